//! The grammar property check of the `grammar_guide` fuzz target, and the reference it is
//! judged by: a direct interpreter of a [`Grammar`] (the end positions each expression can reach
//! in a text, with a nesting budget per rule), which shares nothing with the lowering to a regex.
//!
//! Special tokens are read by the reference as one private-use character each (`sentinel`),
//! and by a guide's regex as marker bytes; the check converts between the two.

use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{canonical_tokens, fuzz_limits, replay, synthetic_tokenizer, Input};
use crate::grammar::lower::{to_regex_with_tokens, to_rule_regexes, GrammarRegex, LowerOptions, RuleRegexes};
use crate::grammar::resolve::resolve_tokens;
use crate::grammar::{Expr, Grammar, Syntax, TokenName};
use crate::guide::Method;
use crate::regex::byte_dfa::{ByteDfa, TOKEN_MARKER, TOKEN_MARKER_INDEX};
use crate::tokenizer::bpe::MergeTable;
use crate::tokenizer::vocab::Vocabulary;
use crate::Compiler;

/// The character the reference reads special token `<[k]>` as (private use, so never in the
/// grammars' own text here).
pub(crate) fn sentinel(name: &TokenName) -> char {
    match name {
        TokenName::Id(k) => char::from_u32(0xE000 + k).expect("small token ids"),
        TokenName::Text(_) => unreachable!("the reference reads resolved grammars: tokens by id"),
    }
}

/// Whether `c` stands for a special token.
fn is_sentinel(c: char) -> bool {
    (0xE000..0xF000).contains(&(c as u32))
}

/// The reference: which strings a grammar derives, by interpretation.
pub(crate) struct Reference<'g> {
    grammar: &'g Grammar,
    text: Vec<char>,
    open: Vec<u32>,
    /// How many times each rule may be opened inside itself (`u32::MAX`: unlimited).
    limit: Vec<u32>,
    regexes: FxHashMap<String, Option<ByteDfa>>,
    /// Expression visits left for the current text: nested recursion under repetitions makes
    /// the interpretation exponential, and the reference then gives up instead.
    budget: usize,
}

/// Expression visits one [`Reference::accepts`] may make.
const REFERENCE_BUDGET: usize = 50_000;

impl<'g> Reference<'g> {
    /// `limit[r]`: how many times rule `r` may be opened inside itself.
    pub(crate) fn new(grammar: &'g Grammar, limit: Vec<u32>) -> Reference<'g> {
        assert_eq!(limit.len(), grammar.rules.len());
        let open = vec![0; grammar.rules.len()];
        Reference { grammar, text: Vec::new(), open, limit, regexes: FxHashMap::default(), budget: 0 }
    }

    /// Whether the start rule derives `text`; `None` when the reference gave up (its budget, or
    /// a regex of the grammar that does not compile).
    pub(crate) fn accepts(&mut self, text: &str) -> Option<bool> {
        self.text = text.chars().collect();
        self.budget = REFERENCE_BUDGET;
        let start = Expr::Rule(self.grammar.start);
        let ends = self.ends(&start, 0)?;
        Some(ends.contains(&self.text.len()))
    }

    fn ends(&mut self, expr: &Expr, at: usize) -> Option<BTreeSet<usize>> {
        self.budget = self.budget.checked_sub(1)?;
        let mut out = BTreeSet::new();
        match expr {
            Expr::Literal(s) => {
                let s: Vec<char> = s.chars().collect();
                if self.text[at..].starts_with(&s) {
                    out.insert(at + s.len());
                }
            }
            Expr::CaseInsensitiveLiteral(s) => {
                let s: Vec<char> = s.chars().collect();
                let fold = |c: char| c.to_lowercase().collect::<String>();
                if self.text.len() - at >= s.len() && s.iter().zip(&self.text[at..]).all(|(a, b)| fold(*a) == fold(*b))
                {
                    out.insert(at + s.len());
                }
            }
            Expr::Class { negated, ranges } => {
                // A special token is not a character: no class takes it.
                if let Some(&c) = self.text.get(at).filter(|&&c| !is_sentinel(c)) {
                    if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated {
                        out.insert(at + 1);
                    }
                }
            }
            Expr::Regex { pattern, .. } => {
                let dfa = self
                    .regexes
                    .entry(pattern.clone())
                    .or_insert_with(|| ByteDfa::from_regex(&format!("(?:{pattern})"), 10_000).ok())
                    .as_ref()?;
                let text_end = (at..self.text.len()).find(|&i| is_sentinel(self.text[i])).unwrap_or(self.text.len());
                for end in at..=text_end {
                    let piece: String = self.text[at..end].iter().collect();
                    if dfa.matches(piece.as_bytes()) {
                        out.insert(end);
                    }
                }
            }
            Expr::Token(name) => {
                if self.text.get(at) == Some(&sentinel(name)) {
                    out.insert(at + 1);
                }
            }
            Expr::Rule(i) => {
                // Opened more often than the text is long (plus slack) only by ε-loops, which
                // add no new end.
                if self.open[*i] > self.limit[*i] || self.open[*i] as usize > self.text.len() + 3 {
                    return Some(out);
                }
                self.open[*i] += 1;
                let body = &self.grammar.rules[*i].body;
                let ends = self.ends(body, at);
                self.open[*i] -= 1;
                out = ends?;
            }
            Expr::Seq(items) => {
                let mut here = BTreeSet::from([at]);
                for item in items {
                    let mut next = BTreeSet::new();
                    for p in here {
                        next.extend(self.ends(item, p)?);
                    }
                    here = next;
                }
                out = here;
            }
            Expr::Alt(items) => {
                for item in items {
                    out.extend(self.ends(item, at)?);
                }
            }
            Expr::Repeat { expr, min, max } => {
                let mut here = BTreeSet::from([at]);
                let mut count = 0;
                loop {
                    if count >= *min {
                        out.extend(here.iter().copied());
                    }
                    if max.is_some_and(|m| count >= m) || here.is_empty() || count > self.text.len() as u32 + *min {
                        break;
                    }
                    let mut next = BTreeSet::new();
                    for p in here {
                        next.extend(self.ends(expr, p)?);
                    }
                    here = next;
                    count += 1;
                }
            }
        }
        Some(out)
    }
}

/// Most bytes of raw grammar text tried.
pub const MAX_GRAMMAR_BYTES: usize = 256;
/// The special tokens of the synthetic tokenizer (after `</s>`).
const SPECIALS: [&str; 2] = ["<x>", "<y>"];
const LITERALS: &[&str] = &["a", "b", "c", "ab", "", "ca", "bb"];
const CLASSES: &[(&str, &str)] = &[("/[ab]/", "[ab]"), ("/[^a]/", "[^a]"), ("/[a-c]/", "[a-c]")];

/// A random rule set over `a b c`, special tokens and references (recursion of every kind
/// included), written in Lark or GBNF.
fn random_grammar(r: &mut Input, eos: u32) -> (String, Syntax) {
    let syntax = if r.byte() & 1 == 0 { Syntax::Lark } else { Syntax::Gbnf };
    let rules = 1 + r.byte() as usize % 3;
    let first = if syntax == Syntax::Lark { "start" } else { "root" };
    let names: Vec<String> = (0..rules).map(|i| if i == 0 { first.into() } else { format!("r{i}") }).collect();
    let mut text = String::new();
    for name in &names {
        let mut body = String::new();
        random_expr(r, 3, syntax, &names, eos, &mut body);
        let sep = if syntax == Syntax::Lark { ":" } else { " ::=" };
        text.push_str(&format!("{name}{sep} {body}\n"));
    }
    (text, syntax)
}

fn random_expr(r: &mut Input, depth: u32, syntax: Syntax, names: &[String], eos: u32, out: &mut String) {
    let op = if depth == 0 { r.byte() % 4 } else { r.byte() % 9 };
    let d = depth.saturating_sub(1);
    match op {
        0 | 1 => out.push_str(&format!("{:?}", LITERALS[r.byte() as usize % LITERALS.len()])),
        2 => {
            let (lark, gbnf) = CLASSES[r.byte() as usize % CLASSES.len()];
            out.push_str(if syntax == Syntax::Lark { lark } else { gbnf });
        }
        3 => match r.byte() % 6 {
            0 => out.push_str(&names[r.byte() as usize % names.len()]),
            // A reference between two literals: nesting recursion, as brackets are.
            4 | 5 => {
                let (open, close) = if r.byte() & 1 == 0 { ("\"a\"", "\"b\"") } else { ("\"c\"", "\"a\"?") };
                out.push_str(&format!("({open} {} {close})", names[r.byte() as usize % names.len()]));
            }
            1 => out.push_str(&format!("<[{}]>", eos + 1)),
            k => out.push_str(SPECIALS[k as usize % 2]),
        },
        4 | 5 => {
            out.push('(');
            random_expr(r, d, syntax, names, eos, out);
            out.push(' ');
            random_expr(r, d, syntax, names, eos, out);
            out.push(')');
        }
        6 => {
            out.push('(');
            random_expr(r, d, syntax, names, eos, out);
            out.push_str(" | ");
            random_expr(r, d, syntax, names, eos, out);
            out.push(')');
        }
        _ => {
            out.push('(');
            random_expr(r, d, syntax, names, eos, out);
            out.push(')');
            let b = r.byte();
            let (m, n) = (b % 3, b % 3 + (b / 3) % 3);
            match (b / 9) % 4 {
                0 => out.push('*'),
                1 => out.push('+'),
                2 => out.push('?'),
                _ if syntax == Syntax::Lark => out.push_str(&format!(" ~ {m}..{n}")),
                _ => out.push_str(&format!("{{{m},{n}}}")),
            }
        }
    }
}

/// The synthetic tokenizer of the regex check, with the special tokens `<x>` and `<y>` added.
fn vocabulary(tokens: &[String], merges: &[(String, String)]) -> Option<Vocabulary> {
    let vocab: serde_json::Map<String, serde_json::Value> =
        tokens.iter().enumerate().map(|(i, t)| (t.clone(), serde_json::Value::from(i))).collect();
    let eos = tokens.len();
    let mut added = vec![serde_json::json!({"id": eos, "content": "</s>", "special": true})];
    for (k, s) in SPECIALS.iter().enumerate() {
        added.push(serde_json::json!({"id": eos + 1 + k, "content": s, "special": true}));
    }
    let json = serde_json::json!({
        "added_tokens": added,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges.iter().map(|(a, b)| vec![a, b]).collect::<Vec<_>>()},
    });
    Vocabulary::from_json(&json.to_string(), None, None).ok()
}

/// Every string up to `max_len` characters over `alphabet`.
pub(crate) fn strings(alphabet: &[char], max_len: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut layer = vec![String::new()];
    for _ in 0..max_len {
        layer = layer.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
        all.extend(layer.iter().cloned());
    }
    all
}

/// The text a guide's byte DFA reads for a reference string (special tokens as markers).
pub(crate) fn marked(text: &str, tokens: &[TokenName]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in text.chars() {
        match tokens.iter().position(|t| sentinel(t) == c) {
            Some(j) => out.extend([TOKEN_MARKER, TOKEN_MARKER_INDEX + j as u8]),
            None => out.extend(c.to_string().bytes()),
        }
    }
    out
}

/// The reference string of a byte-DFA string (markers as sentinels); `None` if not UTF-8.
fn unmarked(bytes: &[u8], tokens: &[TokenName]) -> Option<String> {
    let mut out = String::new();
    for (i, run) in bytes.split(|&b| b == TOKEN_MARKER).enumerate() {
        let run = if i == 0 {
            run
        } else {
            let (&j, rest) = run.split_first()?;
            out.push(sentinel(tokens.get(j.checked_sub(TOKEN_MARKER_INDEX)? as usize)?));
            rest
        };
        out.push_str(std::str::from_utf8(run).ok()?);
    }
    Some(out)
}

/// The canonical token sequence of a reference string: each run between special tokens
/// tokenized on its own, the special tokens as themselves; `None` when a run has a character
/// without a token.
fn canonical_with_tokens(vocab: &Vocabulary, table: &MergeTable, text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let mut run = String::new();
    for c in text.chars() {
        if is_sentinel(c) {
            out.extend(canonical_tokens(vocab, table, run.as_bytes())?);
            out.push(c as u32 - 0xE000);
            run.clear();
        } else {
            run.push(c);
        }
    }
    out.extend(canonical_tokens(vocab, table, run.as_bytes())?);
    Some(out)
}

/// Synthetic tokenizer with special tokens + grammar (random rules in Lark or GBNF, or raw text)
/// → parsed, lowered, compiled lazily; `fuzz/README.md` lists the properties. Panics on a
/// violation.
pub fn check_grammar(data: &[u8]) {
    let mut r = Input { data, pos: 0 };
    let (tokens, merges) = synthetic_tokenizer(&mut r);
    let Some(vocab) = vocabulary(&tokens, &merges) else { return };
    let eos = vocab.eos_token_ids()[0];
    let depth = match r.byte() % 4 {
        0 => None,
        d => Some(d as u32 - 1),
    };
    let (text, syntax) = if r.byte() & 0xE0 == 0xE0 {
        let raw = r.rest();
        let syntax = if raw.first().is_some_and(|b| b & 1 == 1) { Syntax::Gbnf } else { Syntax::Lark };
        (String::from_utf8_lossy(&raw[..raw.len().min(MAX_GRAMMAR_BYTES)]).into_owned(), syntax)
    } else {
        random_grammar(&mut r, eos)
    };
    // Parsing and lowering anything: an error is fine, a panic is a finding.
    let Ok(parsed) = crate::grammar::parse(&text, syntax, None) else { return };
    let options = LowerOptions { max_recursion_depth: depth, max_regex_bytes: 1 << 14 };
    let _ = to_regex_with_tokens(&parsed, options);
    let Ok(grammar) = resolve_tokens(&parsed, &vocab) else { return };
    // A grammar that nests has no regex without a depth; its lazy guide (a pushdown automaton)
    // is still checked against the reference below.
    let Ok(RuleRegexes { tokens: names, .. }) = to_rule_regexes(&grammar, options) else { return };
    let lowered = match to_regex_with_tokens(&grammar, options) {
        Ok(GrammarRegex { regex, tokens }) => {
            match ByteDfa::from_regex_with_markers(&regex, fuzz_limits().max_byte_dfa_states) {
                Ok(dfa) => Some((regex, dfa, tokens)),
                Err(_) => return,
            }
        }
        Err(_) if depth.is_none() => None,
        Err(_) => return,
    };
    let ctx = || format!("{syntax:?} grammar {text:?} (depth {depth:?}), tokens {tokens:?}, merges {merges:?}");

    // The regex against the reference: its strings are derivations (sound), and every string the
    // grammar derives within the depth is one of them (complete).
    let unlimited = vec![u32::MAX; grammar.rules.len()];
    let within = vec![depth.unwrap_or(u32::MAX); grammar.rules.len()];
    let mut reference = Reference::new(&grammar, unlimited);
    if let Some((_, dfa, lowered_names)) = &lowered {
        for bytes in dfa.sample(8, 0x5eed, 10) {
            let s =
                unmarked(&bytes, lowered_names).unwrap_or_else(|| panic!("{}: sample {bytes:?} is not text", ctx()));
            if let Some(ok) = reference.accepts(&s) {
                assert!(ok, "{}: the regex matches {s:?}, which the grammar does not derive", ctx());
            }
        }
    }
    let mut alphabet = vec!['a', 'b', 'c'];
    alphabet.extend(names.iter().map(sentinel));
    let mut derived = Vec::new();
    let mut reference = Reference::new(&grammar, within);
    for s in strings(&alphabet, if alphabet.len() > 4 { 3 } else { 4 }) {
        if reference.accepts(&s) == Some(true) {
            if let Some((_, dfa, lowered_names)) = &lowered {
                let ok = dfa.matches(&marked(&s, lowered_names));
                assert!(ok, "{}: the grammar derives {s:?}, the regex does not match", ctx());
            }
            derived.push(s);
        }
    }

    // The lazy guide: walks canonical run by run and derived; every derived string's canonical
    // tokens accepted; the eager guide the same, where there is no special token.
    let vocab = Arc::new(vocab);
    let compiler = Compiler::new(vocab.clone(), fuzz_limits());
    let Ok(guide) = compiler.compile_grammar(&parsed, options, Some(Method::Cartesian), true) else { return };
    let guide = Arc::new(guide);
    let table = MergeTable::new(vocab.merges());
    let mut reference = Reference::new(&grammar, vec![u32::MAX; grammar.rules.len()]);
    for seed in 0..4 {
        let walk = match guide.random_walk(seed, 12) {
            Ok(w) => w,
            Err(e) => panic!("{}: walk {seed} failed: {e}", ctx()),
        };
        replay(&guide, &walk, &|| format!("{}: walk {walk:?}", ctx()));
        let s: String = walk
            .iter()
            .map(|&t| match names.contains(&TokenName::Id(t)) {
                true => sentinel(&TokenName::Id(t)).to_string(),
                false => String::from_utf8_lossy(vocab.token_bytes(t)).into_owned(),
            })
            .collect();
        assert_eq!(
            canonical_with_tokens(&vocab, &table, &s).as_ref(),
            Some(&walk),
            "{}: walk {walk:?} not canonical",
            ctx()
        );
        if let Some(ok) = reference.accepts(&s) {
            assert!(ok, "{}: walk {walk:?} spells {s:?}, which the grammar does not derive", ctx());
        }
    }
    for s in &derived {
        if let Some(toks) = canonical_with_tokens(&vocab, &table, s) {
            replay(&guide, &toks, &|| format!("{}: derived {s:?} = {toks:?}", ctx()));
        }
    }
    // Lazy (with nesting: a pushdown automaton bounded at the same depth) against eager (the
    // regex unrolled to that depth), every reachable state.
    // (The unrolled regex may name fewer special tokens: the others only deeper.)
    match lowered {
        Some((regex, _, lowered_names)) if lowered_names.is_empty() => {
            if let Ok(eager) = compiler.compile_regex(&regex, Method::Cartesian) {
                assert_eq!(guide.first_difference(&eager), Ok(None), "{}: lazy vs eager", ctx());
            }
        }
        None => {}
        Some(_) => {
            let eager = compiler.compile_grammar(&parsed, options, Some(Method::Cartesian), false);
            assert!(
                matches!(eager, Err(crate::Error::Unsupported(_))),
                "{}: an eager guide with special tokens",
                ctx()
            );
        }
    }
}
