//! The Rust twin of `tests/methods/test_corpus.py`: every case of `tests/corpus/*.toml` against
//! every method, through the crate's API. See `tests/corpus/README.md` for the format and for
//! where the expected ids come from (the real tokenizer, never propertok).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use propertok::regex::byte_dfa::Bound;
use propertok::regex::outline::OutlineOptions;
use propertok::util::bitset;
use propertok::{Compiler, Error, Guide, Limits, Method, Vocabulary};
use toml::Value;

/// How a corpus method compiles.
#[derive(Clone, Copy)]
enum How {
    Eager(Method),
    Lazy,
    /// A lazy guide whose regex DFA is determinized on demand, however small.
    OnDemand,
    /// A lazy guide whose regex is written as rules, every repeated operand longer than a
    /// character a rule of its own (`propertok::regex::outline`).
    Outlined,
    Auto,
}

/// `cartesian` is the lazy guide (the default), `eager` CartesianMerge's eager product;
/// `on_demand` is the lazy guide determinizing its regex as it goes, `outlined` the lazy guide of
/// its regex as rules (`cartesian`'s skips apply to both; they have no byte DFA limit, so cases
/// with limits leave them out).
const METHODS: [(&str, How); 7] = [
    ("agnostic", How::Eager(Method::Agnostic)),
    ("cartesian", How::Lazy),
    ("on_demand", How::OnDemand),
    ("outlined", How::Outlined),
    ("eager", How::Eager(Method::Cartesian)),
    ("direct", How::Eager(Method::Direct)),
    ("auto", How::Auto),
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().expect("an id list").iter().map(|x| x.as_integer().expect("an id") as u32).collect()
}

fn str_map(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_table)
        .map(|t| t.iter().map(|(k, v)| (k.clone(), v.as_str().expect("a string").to_string())).collect())
        .unwrap_or_default()
}

/// The vocabulary a corpus file names: a tokenizer.json of the repository, or a synthetic merge
/// table (ids: the letters in order, then each merge result at its first creation, then `</s>`).
fn vocabulary(tokenizer: &Value) -> Vocabulary {
    if let Some(file) = tokenizer.get("file").and_then(Value::as_str) {
        let json = std::fs::read_to_string(repo_root().join(file)).expect("the tokenizer file");
        return Vocabulary::from_json(&json, None, None).expect("a valid tokenizer");
    }
    let alphabet = tokenizer["alphabet"].as_str().expect("an alphabet");
    let merges: Vec<(String, String)> = tokenizer["merges"]
        .as_array()
        .expect("merges")
        .iter()
        .map(|m| (m[0].as_str().unwrap().to_string(), m[1].as_str().unwrap().to_string()))
        .collect();
    let mut tokens: Vec<String> = alphabet.chars().map(String::from).collect();
    for (a, b) in &merges {
        let merged = format!("{a}{b}");
        if !tokens.contains(&merged) {
            tokens.push(merged);
        }
    }
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let merges: Vec<(&str, &str)> = merges.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    Vocabulary::char_bpe_for_tests(&tokens, &merges).expect("a valid synthetic table")
}

/// The mask of `state`, checked against `write_mask` into a buffer of ones: a mask is computed
/// into the caller's buffer without zeroing it first, so every engine must write every word.
fn mask(guide: &Guide, state: u32) -> Result<Vec<u32>, String> {
    let mask = guide.mask(state).map_err(|e| e.to_string())?.into_owned();
    let mut dirty = vec![u32::MAX; guide.mask_words()];
    guide.write_mask(state, &mut dirty).map_err(|e| e.to_string())?;
    match dirty == mask {
        true => Ok(mask),
        false => Err(format!("state {state}: write_mask left words of a dirty buffer")),
    }
}

/// Whether `guide` allows `ids` token by token (mask and step agree), then EOS.
fn accepts(guide: &Guide, ids: &[u32]) -> Result<bool, String> {
    let mut state = guide.initial_state();
    for &t in ids {
        let in_mask = bitset::contains(&mask(guide, state)?, t as usize);
        match (in_mask, guide.step(state, t).map_err(|e| e.to_string())?) {
            (false, None) => return Ok(false),
            (true, Some(next)) => state = next,
            (in_mask, next) => return Err(format!("token {t}: in the mask {in_mask}, step {next:?}")),
        }
    }
    let mask = mask(guide, state)?;
    Ok(guide.is_final(state) && guide.eos_token_ids().iter().all(|&e| bitset::contains(&mask, e as usize)))
}

/// The masks (EOS included) of `a` and `b` along 20 random walks of each: the token prefix after
/// which they first differ, `None` if they never do.
fn difference_along_walks(a: &Guide, b: &Guide) -> Result<Option<Vec<u32>>, Error> {
    for seed in 0..40u64 {
        let walk = if seed % 2 == 0 { a.random_walk(seed, 64)? } else { b.random_walk(seed, 64)? };
        let (mut sa, mut sb) = (a.initial_state(), b.initial_state());
        for (i, &t) in walk.iter().enumerate() {
            if a.mask(sa)? != b.mask(sb)? {
                return Ok(Some(walk[..i].to_vec()));
            }
            match (a.step(sa, t)?, b.step(sb, t)?) {
                (Some(na), Some(nb)) => (sa, sb) = (na, nb),
                _ => return Ok(Some(walk[..=i].to_vec())),
            }
        }
        if a.mask(sa)? != b.mask(sb)? {
            return Ok(Some(walk));
        }
    }
    Ok(None)
}

fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::EmptyLanguage(_) => "empty_language",
        Error::InvalidRegex(_) => "invalid_regex",
        Error::UnsupportedRegex(_) => "unsupported_regex",
        _ => "other",
    }
}

fn run_file(path: &Path, failures: &mut Vec<String>) -> usize {
    let doc: Value = toml::from_str(&std::fs::read_to_string(path).unwrap()).expect("valid TOML");
    let file = path.file_stem().unwrap().to_string_lossy().into_owned();
    let compiler = Compiler::new(Arc::new(vocabulary(&doc["tokenizer"])), Limits::default());
    let cases = doc.get("case").and_then(Value::as_array).cloned().unwrap_or_default();
    for case in &cases {
        let name = format!("{file}:{}", case["name"].as_str().unwrap());
        let regex = case["regex"].as_str().unwrap();
        let skip = str_map(case.get("skip"));
        let limit = str_map(case.get("limit"));
        let error = case.get("error").and_then(Value::as_str);
        let mut canonical: Vec<(&str, Guide)> = Vec::new();
        for (method_name, method) in METHODS {
            let twin = matches!(method_name, "on_demand" | "outlined");
            let same_skips = if twin { "cartesian" } else { method_name };
            if skip.iter().any(|(m, _)| m == same_skips) || (twin && !limit.is_empty()) {
                continue;
            }
            let at = format!("{name} [{method_name}]");
            let compiled = match method {
                How::Eager(m) => compiler.compile_regex(regex, m),
                How::Lazy => compiler.compile_regex_lazy(regex),
                How::OnDemand => compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND),
                How::Outlined => compiler.compile_regex_lazy_outlined(regex, OutlineOptions::EVERY),
                How::Auto => compiler.compile_regex_auto(regex),
            };
            if let Some((_, expected)) = limit.iter().find(|(m, _)| m == method_name) {
                match compiled {
                    Err(Error::LimitExceeded { limit, .. }) if limit == expected => {}
                    other => failures.push(format!("{at}: expected LimitExceeded({expected}), got {:?}", other.err())),
                }
                continue;
            }
            if let Some(expected) = error {
                match compiled {
                    Err(e) if error_kind(&e) == expected => {}
                    other => failures.push(format!("{at}: expected {expected}, got {:?}", other.err())),
                }
                continue;
            }
            let guide = match compiled {
                Ok(g) => g,
                Err(e) => {
                    failures.push(format!("{at}: {e}"));
                    continue;
                }
            };
            for a in case.get("accept").and_then(Value::as_array).into_iter().flatten() {
                match accepts(&guide, &ids(&a["ids"])) {
                    Ok(true) => {}
                    Ok(false) => failures.push(format!("{at}: refused {:?}", a["text"].as_str().unwrap())),
                    Err(why) => failures.push(format!("{at}: {why}")),
                }
            }
            for r in case.get("refuse").and_then(Value::as_array).into_iter().flatten() {
                let expected = method_name == "agnostic" && r["in_language"].as_bool().unwrap();
                match accepts(&guide, &ids(&r["ids"])) {
                    Ok(got) if got == expected => {}
                    Ok(got) => failures.push(format!("{at}: accepted = {got} for {}", r["why"].as_str().unwrap())),
                    Err(why) => failures.push(format!("{at}: {why}")),
                }
            }
            if method_name != "agnostic" {
                canonical.push((method_name, guide));
            }
        }
        // The canonical methods accept one language (when they built different automata).
        if let Some(((first_name, first), rest)) = canonical.split_first() {
            for (other_name, other) in rest {
                if other.method() != first.method()
                    || other.is_lazy() != first.is_lazy()
                    || matches!(*other_name, "on_demand" | "outlined")
                {
                    // A wide case's product has millions of transitions: compare along walks.
                    let difference = if limit.is_empty() {
                        first.first_difference(other)
                    } else {
                        difference_along_walks(first, other)
                    };
                    match difference {
                        Ok(None) => {}
                        Ok(Some(path)) => {
                            failures.push(format!("{name}: {first_name} and {other_name} differ after {path:?}"))
                        }
                        Err(e) => failures.push(format!("{name}: {first_name} vs {other_name}: {e}")),
                    }
                }
            }
        }
    }
    cases.len()
}

#[test]
fn corpus_against_every_method() {
    let dir = repo_root().join("tests").join("corpus");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/corpus")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    let mut failures = Vec::new();
    let cases: usize = paths.iter().map(|p| run_file(p, &mut failures)).sum();
    assert!(paths.len() >= 3 && cases >= 30, "{} files, {cases} cases", paths.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
