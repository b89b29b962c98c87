//! Property checks shared by the cargo-fuzz targets in `fuzz/` and by this module's unit tests.
//!
//! Each check takes arbitrary bytes and panics only when a property is violated (or the code
//! under test panics): an `Err` from the library on odd input is always fine. The unit tests
//! replay every saved input under `fuzz/regressions/<target>/` and run a short, seeded,
//! bounded fuzz, so `cargo test --release --lib` keeps the fuzzers' findings fixed on stable
//! Rust. See `fuzz/README.md` for running the real fuzzers.

pub mod grammar;

use std::sync::Arc;

use serde_json::Value;

use crate::error::Error;
use crate::guide::matcher::Matcher;
use crate::guide::{Guide, Method};
use crate::regex::byte_dfa::{Bound, ByteDfa};
use crate::regex::outline::OutlineOptions;
use crate::tokenizer::bpe::MergeTable;
use crate::tokenizer::vocab::Vocabulary;
use crate::util::random::SplitMix64;
use crate::{compiler::Compiler, limits::Limits};

/// The shared corpus: `$PROPERTOK_SHARED`, default `../shared` next to the repository.
pub fn shared_dir() -> std::path::PathBuf {
    match std::env::var("PROPERTOK_SHARED") {
        Ok(p) if !p.is_empty() => p.into(),
        _ => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared"),
    }
}

/// The text of `../shared/data/<name>`; panics, naming the file and `PROPERTOK_SHARED`, when it
/// cannot be read (a missing corpus fails a test, never skips it).
pub fn shared_data(name: &str) -> String {
    let path = shared_dir().join("data").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (set PROPERTOK_SHARED)", path.display()))
}

/// The vocabulary of `../shared/tokenizers/<name>/tokenizer.json`; panics, naming the file and
/// `PROPERTOK_SHARED`, when it cannot be read (a missing corpus fails a test, never skips it).
pub fn shared_vocabulary(name: &str) -> Vocabulary {
    let path = shared_dir().join("tokenizers").join(name).join("tokenizer.json");
    let json =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (set PROPERTOK_SHARED)", path.display()));
    Vocabulary::from_json(&json, None, None).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A random regex of nested alternation, repetition and counted repetition (up to `depth`)
/// over a few literals and classes that split UTF-8 ranges: what the regex automata's
/// differential tests draw (`crate::regex::thompson`, `crate::regex::determinize`).
pub fn random_regex(rng: &mut SplitMix64, depth: u32) -> String {
    const ATOMS: [&str; 11] = ["a", "é", "[^a]", "[a-c]", r"\d", r"\w", "[^\"\\\\]", ".", "(?:)", "ab", "[é-ü]"];
    if depth == 0 || rng.one_in(4) {
        return ATOMS[rng.below(ATOMS.len())].to_string();
    }
    let a = random_regex(rng, depth - 1);
    match rng.below(8) {
        0 => format!("(?:{a}|{})", random_regex(rng, depth - 1)),
        1 => format!("(?:{a})*"),
        2 => format!("(?:{a})+"),
        3 => format!("(?:{a})?"),
        4 => format!("(?:{a}){{{}}}", rng.below(4)),
        5 => format!("(?:{a}){{{},}}", rng.below(4)),
        6 => format!("(?:{a}){{{},{}}}", rng.below(3), 2 + rng.below(3)),
        _ => format!("{a}{}", random_regex(rng, depth - 1)),
    }
}

/// Small limits, so that every input stays fast; reaching one is an `Err`, not a finding.
pub fn fuzz_limits() -> Limits {
    Limits {
        max_byte_dfa_states: 2_000,
        max_product_states: 20_000,
        max_direct_states: 2_000,
        max_direct_transitions: 20_000,
        ..Limits::default()
    }
}

/// Longest regex tried, in bytes.
pub const MAX_REGEX_BYTES: usize = 64;
const MAX_TOKEN_CHARS: usize = 8;
const METHODS: [Method; 3] = [Method::Agnostic, Method::Cartesian, Method::Direct];

/// The fuzz input read front to back; zeros once it is used up.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn rest(&self) -> &[u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }
}

/// A small character-level BPE over {a, b, c}: which base characters exist, a few extra tokens
/// that no merge produces, and up to 8 merges of existing tokens (each adds its result).
fn synthetic_tokenizer(r: &mut Input) -> (Vec<String>, Vec<(String, String)>) {
    let head = r.byte();
    let base = if head & 7 == 0 && head & 8 == 0 { 7 } else { head & 7 };
    let mut tokens: Vec<String> =
        (0..3u8).filter(|i| base >> i & 1 == 1).map(|i| char::from(b'a' + i).to_string()).collect();
    for _ in 0..(head >> 4) & 3 {
        let b = r.byte();
        let len = 2 + (b & 1) as usize;
        let s: String = (0..len).map(|k| char::from(b'a' + (b >> (1 + 2 * k)) % 3)).collect();
        if !tokens.contains(&s) {
            tokens.push(s);
        }
    }
    let mut merges = Vec::new();
    for _ in 0..r.byte() % 9 {
        if tokens.is_empty() {
            break;
        }
        let (i, j) = (r.byte() as usize % tokens.len(), r.byte() as usize % tokens.len());
        let merged = format!("{}{}", tokens[i], tokens[j]);
        if merged.len() > MAX_TOKEN_CHARS {
            continue;
        }
        merges.push((tokens[i].clone(), tokens[j].clone()));
        if !tokens.contains(&merged) {
            tokens.push(merged);
        }
    }
    (tokens, merges)
}

const ATOMS: &[&str] =
    &["a", "b", "c", "ab", "ba", "abc", "[ab]", "[a-c]", "[^a]", ".", "d", "é", " ", "(?:)", "(?i:A)", "[bc]"];

/// A regex from a small grammar over the atoms above (concatenation, alternation, repeats).
fn grammar_regex(r: &mut Input, depth: u32, out: &mut String) {
    let op = if depth == 0 || out.len() > MAX_REGEX_BYTES { 0 } else { r.byte() % 8 };
    let d = depth.saturating_sub(1);
    match op {
        0..=2 => out.push_str(ATOMS[r.byte() as usize % ATOMS.len()]),
        3 => {
            grammar_regex(r, d, out);
            grammar_regex(r, d, out);
        }
        4 => {
            out.push_str("(?:");
            grammar_regex(r, d, out);
            out.push('|');
            grammar_regex(r, d, out);
            out.push(')');
        }
        _ => {
            out.push_str("(?:");
            grammar_regex(r, d, out);
            out.push(')');
            let b = r.byte();
            match op {
                5 => out.push_str(["*", "+", "?"][b as usize % 3]),
                6 => out.push_str(&format!("{{{},{}}}", b % 3, b % 3 + (b / 3) % 4)),
                _ => out.push_str(["*?", "{2}", "{0,}", "??"][b as usize % 4]),
            }
        }
    }
}

/// The regex of an input: the grammar, or (mode bit set) the raw UTF-8 remainder, cut short.
fn regex_from(r: &mut Input) -> String {
    if r.byte() & 0x80 != 0 {
        let raw = r.rest();
        String::from_utf8_lossy(&raw[..raw.len().min(MAX_REGEX_BYTES)]).into_owned()
    } else {
        let mut out = String::new();
        grammar_regex(r, 5, &mut out);
        out
    }
}

/// The reference tokenization of `text` (no pre-tokenizer, no byte fallback): its characters
/// as base symbols, merged by priority. `None` when a character has no base symbol.
fn canonical_tokens(vocab: &Vocabulary, table: &MergeTable, text: &[u8]) -> Option<Vec<u32>> {
    let text = std::str::from_utf8(text).ok()?;
    let mut symbols = text.chars().map(|c| vocab.char_symbol(c)).collect::<Option<Vec<u32>>>()?;
    table.encode(&mut symbols);
    Some(symbols)
}

/// A matcher must accept `tokens` one by one (each in its mask), end accepting, take EOS.
fn replay(guide: &Arc<Guide>, tokens: &[u32], ctx: &dyn Fn() -> String) {
    let mut m = Matcher::new(guide.clone());
    for (i, &t) in tokens.iter().enumerate() {
        assert!(m.allowed_tokens().unwrap().binary_search(&t).is_ok(), "{}: token {i} ({t}) not in the mask", ctx());
        assert_eq!(m.accept_token(t), Ok(true), "{}: token {i} ({t}) refused", ctx());
    }
    assert!(m.is_accepting(), "{}: not accepting after the tokens", ctx());
    let eos = guide.eos_token_ids()[0];
    assert_eq!(m.accept_token(eos), Ok(true), "{}: EOS refused", ctx());
    assert!(m.is_terminated() && m.rollback(1).is_ok() && m.is_accepting(), "{}: EOS / rollback", ctx());
}

/// Synthetic tokenizer + regex → every method; `fuzz/README.md` lists the properties. Panics on
/// a violation.
pub fn check_regex_guide(data: &[u8]) {
    let mut r = Input { data, pos: 0 };
    let (tokens, merges) = synthetic_tokenizer(&mut r);
    let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let merge_refs: Vec<(&str, &str)> = merges.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let Ok(vocab) = Vocabulary::char_bpe_for_tests(&token_refs, &merge_refs) else { return };
    let pattern = regex_from(&mut r);
    let vocab = Arc::new(vocab);
    let compiler = Compiler::new(vocab.clone(), fuzz_limits());
    let dfa = ByteDfa::from_regex(&pattern, fuzz_limits().max_byte_dfa_states);
    let mut guides: Vec<(Method, Arc<Guide>)> = Vec::new();
    let mut empty = Vec::new();
    for method in METHODS {
        match compiler.compile_regex(&pattern, method) {
            Ok(g) => {
                assert!(dfa.is_ok(), "regex {pattern:?}: {method:?} compiled but its byte DFA did not");
                assert_eq!(g.method(), method);
                guides.push((method, Arc::new(g)));
            }
            Err(Error::EmptyLanguage(_)) => empty.push(method),
            Err(_) => {}
        }
    }
    let Ok(dfa) = dfa else { return };
    let table = MergeTable::new(vocab.merges());
    // "Empty language" is wrong when the vocabulary can spell a member of the language.
    if let Some(text) = dfa.sample(6, 0x5eed, 12).into_iter().find(|t| canonical_tokens(&vocab, &table, t).is_some()) {
        assert!(empty.is_empty(), "regex {pattern:?}, tokens {tokens:?}: {empty:?} say empty, but {text:?} is spelled");
    }
    for (method, guide) in &guides {
        let canonical = *method != Method::Agnostic;
        for seed in 0..4 {
            let ctx = |what: &str, toks: &[u32]| {
                format!("regex {pattern:?}, tokens {tokens:?}, merges {merges:?}, {method:?} {what} {toks:?}")
            };
            // Every guide state can finish, so a walk never gives up (regressions/regex_guide/
            // agnostic-dead-end-*: agnostic guides used to keep tokens leading to dead ends).
            let walk = guide.random_walk(seed, 12).unwrap_or_else(|e| panic!("{}: {e}", ctx("walk", &[])));
            replay(guide, &walk, &|| ctx("walk", &walk));
            let text: Vec<u8> = walk.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
            assert!(dfa.matches(&text), "{}: decodes to {text:?}, not a match", ctx("walk", &walk));
            if canonical {
                let reference = canonical_tokens(&vocab, &table, &text);
                assert_eq!(reference.as_deref(), Some(&walk[..]), "{}: not canonical", ctx("walk", &walk));
            }
        }
        // Completeness: the reference tokenization of any member of the language that the
        // vocabulary can spell is accepted (agnostic accepts it too: it is one of its spellings).
        for (i, text) in dfa.sample(6, 0x5eed, 12).into_iter().enumerate() {
            let Some(toks) = canonical_tokens(&vocab, &table, &text) else { continue };
            let ctx = || {
                format!("regex {pattern:?}, tokens {tokens:?}, merges {merges:?}, {method:?} sample {i} {text:?} = {toks:?}")
            };
            replay(guide, &toks, &ctx);
        }
    }
    let find = |m: Method| guides.iter().find(|g| g.0 == m).map(|g| g.1.clone());
    if let (Some(c), Some(d)) = (find(Method::Cartesian), find(Method::Direct)) {
        let ctx = format!("regex {pattern:?}, tokens {tokens:?}, merges {merges:?}");
        assert_eq!(c.first_difference(&d), Ok(None), "{ctx}: cartesian vs direct");
        assert_eq!(d.first_difference(&c), Ok(None), "{ctx}: direct vs cartesian");
    }
    // A lazy guide whose regex DFA is determinized on demand (`ByteNfa` states) accepts the
    // eager guide's language.
    if let Some(c) = find(Method::Cartesian) {
        let ctx = format!("regex {pattern:?}, tokens {tokens:?}, merges {merges:?}");
        match compiler.compile_regex_lazy_with(&pattern, Bound::ON_DEMAND) {
            Ok(on_demand) => assert_eq!(on_demand.first_difference(&c), Ok(None), "{ctx}: on demand vs eager"),
            Err(Error::LimitExceeded { .. }) => {}
            Err(e) => panic!("{ctx}: the eager guide compiled, the on-demand one failed: {e}"),
        }
        // And one whose repeated operands are rules of their own (`crate::regex::outline`).
        match compiler.compile_regex_lazy_outlined(&pattern, OutlineOptions::EVERY) {
            Ok(outlined) => assert_eq!(outlined.first_difference(&c), Ok(None), "{ctx}: outlined vs eager"),
            Err(Error::LimitExceeded { .. }) => {}
            Err(e) => panic!("{ctx}: the eager guide compiled, the outlined one failed: {e}"),
        }
    }
}

/// JSON pointers the tokenizer mutations aim at (missing ones are created where possible).
const PATHS: &[&str] = &[
    "/model",
    "/model/type",
    "/model/vocab",
    "/model/merges",
    "/model/merges/0",
    "/model/byte_fallback",
    "/model/unk_token",
    "/model/dropout",
    "/model/ignore_merges",
    "/added_tokens",
    "/added_tokens/0/id",
    "/added_tokens/0/content",
    "/added_tokens/0/special",
    "/pre_tokenizer",
    "/normalizer",
    "/decoder",
    "/model/vocab/a",
    "/model/vocab/</s>",
    "/model/continuing_subword_prefix",
];

/// Values the mutations put there.
const VALUES: &[&str] = &[
    "null", "true", "0", "-1", "4294967296", "1.5", "\"\"", "\"a b\"", "\"<0x41>\"", "[]", "{}", "[\"a\",\"b\"]",
    "[[\"a\",\"b\"]]", "{\"type\":\"ByteLevel\"}", "{\"type\":\"Metaspace\",\"split\":false}",
    "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\u{2581}\"}]}",
    "\"Unigram\"", "\"WordPiece\"", "70000", "16000000", "{\"a\":0,\"b\":0}", "\"</s>\"", "\"\u{2581}\"",
    "[{\"id\":0,\"content\":\"</s>\",\"special\":true}]", "[\"\u{2581} a\",\"a \u{2581}\"]",
];

/// Pieces of regex syntax, in and out of the common subset (`crate::regex::common_syntax`), for
/// [`check_regex_syntax`]'s structured mode.
const REGEX_PIECES: [&str; 40] = [
    "a",
    "b",
    "é",
    "(",
    ")",
    "(?:",
    "(?-u:\\xFE)",
    "(?-u:\\x41)",
    "|",
    "*",
    "+",
    "?",
    "{2}",
    "{1,3}",
    "{0,}",
    "[",
    "]",
    "^",
    "-",
    "\\",
    "\\d",
    "\\p{AHex}",
    "\\P{L}",
    "\\.",
    "\\x41",
    "\\x{e9}",
    ".",
    "[a-c]",
    "[^\"\\\\]",
    "x-",
    "{",
    "}",
    "$",
    "\\n",
    "&&",
    "--",
    "[:alpha:]",
    "(?i)",
    "\\u0041",
    ",",
];

/// Whether `crate::regex::common_syntax` translates `pattern` (with `utf8` as the translator's
/// option); where it does, its HIR must be `regex-syntax`'s, and `regex-syntax` must accept the
/// pattern.
pub fn translates_as_regex_syntax(pattern: &str, utf8: bool) -> bool {
    let Some(fast) = crate::regex::common_syntax::translate_common(pattern, utf8) else { return false };
    match crate::regex::syntax::translate_with_regex_syntax(pattern, utf8) {
        Ok(slow) => assert_eq!(fast, slow, "{pattern:?} (utf8 {utf8})"),
        Err(e) => panic!("{pattern:?} (utf8 {utf8}): translated by the common subset, refused by regex-syntax: {e}"),
    }
    true
}

/// The `regex_syntax` fuzz target: the first byte chooses UTF-8 or byte translation (bit 0) and
/// how the rest is read (bit 1): as raw text (lossy UTF-8, 256 characters at most), or each byte
/// as one of the regex pieces above. Panics where the common subset and `regex-syntax` disagree.
pub fn check_regex_syntax(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let pattern: String = match mode & 2 {
        0 => String::from_utf8_lossy(rest).chars().take(256).collect(),
        _ => rest.iter().take(64).map(|&b| REGEX_PIECES[b as usize % REGEX_PIECES.len()]).collect(),
    };
    translates_as_regex_syntax(&pattern, mode & 1 == 0);
}

fn mutate(v: &mut Value, rng: &mut SplitMix64) {
    let path = PATHS[rng.below(PATHS.len())];
    let new: Value = serde_json::from_str(VALUES[rng.below(VALUES.len())]).expect("valid JSON constant");
    if let Some(slot) = v.pointer_mut(path) {
        *slot = new;
        return;
    }
    let (parent, key) = path.rsplit_once('/').expect("a pointer");
    match v.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(key.to_string(), new);
        }
        Some(Value::Array(list)) => list.push(new),
        _ => {}
    }
}

/// Arbitrary bytes (and, when they are JSON, mutations of it) → `Vocabulary::from_json` with a
/// few EOS / `vocab_size` arguments: `Ok` or `Err`, never a panic; on `Ok`, compiling trivial
/// regexes with every method must not panic either.
pub fn check_tokenizer_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    load_and_use(&text, data);
    let Ok(root) = serde_json::from_str::<Value>(&text) else { return };
    let mut hash = crate::util::serialize::Fnv64::default();
    hash.write(data);
    let mut rng = SplitMix64::new(hash.finish());
    for k in 0..8 {
        let mut v = root.clone();
        for _ in 0..1 + k / 4 {
            mutate(&mut v, &mut rng);
        }
        load_and_use(&v.to_string(), data);
    }
}

fn load_and_use(json: &str, data: &[u8]) {
    let first = data.first().copied().unwrap_or(0) as u32;
    let last = data.last().copied().unwrap_or(0) as u32;
    let options = [(None, None), (Some(vec![first]), None), (Some(vec![0, first]), Some(1usize << (last % 40)))];
    for (eos, vocab_size) in options {
        if let Ok(vocab) = Vocabulary::from_json(json, eos, vocab_size) {
            exercise(vocab);
        }
    }
}

fn exercise(vocab: Vocabulary) {
    let n = vocab.num_tokens();
    assert!(n <= vocab.vocab_size() && !vocab.eos_token_ids().is_empty());
    for t in 0..n.min(1 << 12) as u32 {
        let _ = (vocab.token_bytes(t), vocab.token_string(t), vocab.is_never_allowed(t));
    }
    let _ = (vocab.fingerprint(), vocab.char_symbol('a'), vocab.char_symbol(' '), vocab.canonical_unsupported_reason());
    // A regex made of the first token that may appear inside a constraint, if any.
    let spelled = (0..n.min(1 << 12) as u32)
        .find(|&t| !vocab.is_never_allowed(t))
        .map(|t| regex_syntax::escape(&String::from_utf8_lossy(vocab.token_bytes(t))));
    let compiler = Compiler::new(Arc::new(vocab), fuzz_limits());
    for pattern in ["a", "[a-c ]{0,3}"].iter().map(|s| s.to_string()).chain(spelled) {
        for method in METHODS {
            if let Ok(g) = compiler.compile_regex(&pattern, method) {
                let _ = g.allowed_tokens(g.initial_state());
                let _ = g.random_walk(1, 8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Instant;

    /// Inputs of the seeded runs (about 3 s, 1 s and 3 s in release on one core).
    const REGEX_INPUTS: usize = 8_000;
    const JSON_INPUTS: usize = 5_000;
    const GRAMMAR_INPUTS: usize = 4_000;
    const REGEX_SYNTAX_INPUTS: usize = 20_000;

    fn files(dir: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut out: Vec<_> = std::fs::read_dir(&dir)
            .map(|it| {
                it.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    // `.gitkeep` keeps an empty directory in git; it is not an input.
                    .filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out.into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("readable"))).collect()
    }

    /// Runs `check` on every file of the directories, naming the file that fails.
    fn replay_dir(check: fn(&[u8]), dirs: &[&str]) -> usize {
        let mut n = 0;
        for dir in dirs {
            for (path, bytes) in files(dir) {
                let caught = std::panic::catch_unwind(|| check(&bytes));
                assert!(caught.is_ok(), "{} fails", path.display());
                n += 1;
            }
        }
        n
    }

    #[test]
    fn regex_guide_regressions() {
        replay_dir(check_regex_guide, &["fuzz/regressions/regex_guide"]);
    }

    #[test]
    fn grammar_guide_regressions() {
        replay_dir(grammar::check_grammar, &["fuzz/regressions/grammar_guide"]);
    }

    /// A short bounded fuzz on stable Rust: random inputs for the grammar target (random rule
    /// sets mostly, raw text when the mode bit is set).
    #[test]
    fn grammar_guide_seeded() {
        let started = Instant::now();
        let mut rng = SplitMix64::new(20_261_127);
        for _ in 0..GRAMMAR_INPUTS {
            let len = rng.below(64);
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            grammar::check_grammar(&data);
        }
        eprintln!("grammar_guide_seeded: {GRAMMAR_INPUTS} inputs in {:.1?}", started.elapsed());
    }

    #[test]
    fn tokenizer_json_regressions_and_seeds() {
        let n = replay_dir(check_tokenizer_json, &["fuzz/regressions/tokenizer_json", "fuzz/seeds/tokenizer_json"]);
        assert!(n >= 3, "the tokenizer.json seeds are missing");
    }

    /// A short bounded fuzz on stable Rust: random inputs for the regex target.
    #[test]
    fn regex_guide_seeded() {
        let started = Instant::now();
        let mut rng = SplitMix64::new(20_261_122);
        for _ in 0..REGEX_INPUTS {
            let len = rng.below(48);
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            check_regex_guide(&data);
        }
        eprintln!("regex_guide_seeded: {REGEX_INPUTS} inputs in {:.1?}", started.elapsed());
    }

    #[test]
    fn regex_syntax_regressions() {
        replay_dir(check_regex_syntax, &["fuzz/regressions/regex_syntax"]);
    }

    /// A short bounded fuzz on stable Rust: random patterns from the pieces (the structured
    /// mode), of which a good share must be in the common subset for the check to say anything.
    #[test]
    fn regex_syntax_seeded() {
        let mut rng = SplitMix64::new(20_261_128);
        let mut answered = 0;
        for _ in 0..REGEX_SYNTAX_INPUTS {
            let utf8 = rng.one_in(2);
            let pattern: String = (0..1 + rng.below(10)).map(|_| REGEX_PIECES[rng.below(REGEX_PIECES.len())]).collect();
            answered += translates_as_regex_syntax(&pattern, utf8) as usize;
        }
        assert!(answered * 10 > REGEX_SYNTAX_INPUTS, "{answered} of {REGEX_SYNTAX_INPUTS} in the common subset");
    }

    /// A short bounded fuzz on stable Rust: byte-level mutations of the tokenizer.json seeds.
    #[test]
    fn tokenizer_json_seeded() {
        let started = Instant::now();
        let seeds = files("fuzz/seeds/tokenizer_json");
        assert!(!seeds.is_empty());
        let mut rng = SplitMix64::new(20_261_122);
        for _ in 0..JSON_INPUTS {
            let mut data = seeds[rng.below(seeds.len())].1.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(data.len() + 1);
                let alphabet = b"{}[]\":,0123456789-. abtrue\\";
                let byte = alphabet[rng.below(alphabet.len())];
                match rng.below(4) {
                    0 if at < data.len() => data[at] = byte,
                    1 => data.insert(at, byte),
                    2 if at < data.len() => drop(data.remove(at)),
                    _ => data.truncate(at.max(data.len() / 2)),
                }
            }
            check_tokenizer_json(&data);
        }
        eprintln!("tokenizer_json_seeded: {JSON_INPUTS} inputs in {:.1?}", started.elapsed());
    }
}
