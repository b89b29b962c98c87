//! A regex's syntax and its Thompson NFA: `regex-syntax` parses and translates the pattern
//! (unsupported features get a precise error before any automaton is built) and
//! `regex-automata` compiles it to a Thompson NFA over bytes, within a memory budget. Both the
//! NFA of lazy determinization ([`super::byte_nfa::ByteNfa`]) and the minimal DFA
//! ([`super::byte_dfa::ByteDfa`]) start here.

use regex_automata::nfa::thompson;
use regex_syntax::{ast, hir::Hir};

use crate::error::{Error, Result};

/// The Thompson NFA of a translated regex (no capture states), within a memory budget sized
/// from `max_states`: regex-automata sets none, and a short nested repeat
/// (`(?:[^a]{1000}){1000}`, 20 bytes) built an 8M-state, 270 MB NFA in seconds before the DFA
/// limit could stop it (found from a `regex_guide` fuzzer slow unit). Real patterns take well
/// under 100 bytes of NFA per DFA state; this allows 1 KiB per allowed state.
pub(crate) fn thompson_nfa(hir: &Hir, max_states: usize) -> Result<thompson::NFA> {
    let nfa_budget = max_states.saturating_mul(1 << 10).max(16 << 20);
    let config = thompson::Config::new()
        .utf8(true)
        .shrink(true)
        .which_captures(thompson::WhichCaptures::None)
        .nfa_size_limit(Some(nfa_budget));
    // One compiler per thread, reused: a fresh one allocates and clears regex-automata's UTF-8
    // suffix cache (10,000 entries, ~400 KB) on every build, which was a third of a glaive
    // regex's NFA time and, on a heap just returned to the OS, ~190 page faults (~0.4 ms).
    thread_local! {
        static COMPILER: std::cell::RefCell<thompson::Compiler> = std::cell::RefCell::new(thompson::Compiler::new());
    }
    let refused = |e: thompson::BuildError| match e.size_limit() {
        Some(_) => Error::LimitExceeded {
            limit: "max_byte_dfa_states",
            value: max_states.to_string(),
            what: format!("the regex's NFA exceeds {nfa_budget} bytes, too large to determinise"),
        },
        None => Error::UnsupportedRegex(e.to_string()),
    };
    COMPILER.with(|compiler| compiler.borrow_mut().configure(config).build_from_hir(hir).map_err(refused))
}

/// Parses and translates a regex, turning syntax errors into precise messages.
pub fn parse_regex(pattern: &str) -> Result<Hir> {
    translate(pattern, true)
}

/// [`parse_regex`]; `utf8 = false` lets `(?-u:\xFF)` escapes match bytes outside UTF-8.
pub(crate) fn translate(pattern: &str, utf8: bool) -> Result<Hir> {
    let ast = ast::parse::ParserBuilder::new().build().parse(pattern).map_err(|e| match e.kind() {
        ast::ErrorKind::UnsupportedLookAround => Error::UnsupportedRegex(format!(
            "look-around (look-ahead / look-behind) is not supported by finite automata, in {pattern:?}"
        )),
        ast::ErrorKind::UnsupportedBackreference => {
            Error::UnsupportedRegex(format!("backreferences are not supported by finite automata, in {pattern:?}"))
        }
        _ => Error::InvalidRegex(e.to_string()),
    })?;
    // The translator's defaults are regex-syntax's: Unicode on, `.` excludes \n.
    let hir = regex_syntax::hir::translate::TranslatorBuilder::new()
        .utf8(utf8)
        .build()
        .translate(pattern, &ast)
        .map_err(|e| Error::InvalidRegex(e.to_string()))?;
    Ok(hir)
}
