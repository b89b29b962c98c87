//! A regex's syntax and regex-automata's Thompson NFA: `regex-syntax` parses and translates
//! the pattern (unsupported features get a precise error before any automaton is built) and
//! `regex-automata` compiles it to a Thompson NFA over bytes, within a memory budget: for
//! regexes with look-around and for the non-ASCII classes that `super::thompson` splices into
//! its own NFAs. Both the NFA of lazy determinization ([`super::byte_nfa::ByteNfa`]) and the
//! minimal DFA ([`super::byte_dfa::ByteDfa`]) start here.

use regex_automata::nfa::thompson;
use regex_syntax::ast;
use regex_syntax::hir::{Hir, HirKind, Look, Repetition};

use super::common_syntax::translate_common;
use crate::error::{Error, Result};

/// The bytes a regex's NFA may take (see [`thompson_nfa`]).
pub(crate) fn nfa_budget(max_states: usize) -> usize {
    max_states.saturating_mul(1 << 10).max(16 << 20)
}

/// The Thompson NFA of a translated regex (no capture states), within a memory budget sized
/// from `max_states`: regex-automata sets none, and a short nested repeat
/// (`(?:[^a]{1000}){1000}`, 20 bytes) built an 8M-state, 270 MB NFA in seconds before the DFA
/// limit could stop it (found from a `regex_guide` fuzzer slow unit). Real patterns take well
/// under 100 bytes of NFA per DFA state; this allows 1 KiB per allowed state.
pub(crate) fn thompson_nfa(hir: &Hir, max_states: usize) -> Result<thompson::NFA> {
    let nfa_budget = nfa_budget(max_states);
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

/// [`parse_regex`]; `utf8 = false` lets `(?-u:\xFF)` escapes match bytes outside UTF-8. The
/// common subset is read directly ([`translate_common`]: the same HIR, ~3.5x faster), the rest
/// by `regex-syntax`.
pub(crate) fn translate(pattern: &str, utf8: bool) -> Result<Hir> {
    // The subset has no anchors, so nothing to resolve.
    if let Some(hir) = translate_common(pattern, utf8) {
        return Ok(hir);
    }
    Ok(resolve_anchors(translate_with_regex_syntax(pattern, utf8)?))
}

/// `regex-syntax`'s own translation, its errors made precise.
pub(crate) fn translate_with_regex_syntax(pattern: &str, utf8: bool) -> Result<Hir> {
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

/// `hir` with its text anchors (`^`, `$`, `\A`, `\z`) resolved where the full-match position
/// decides them: every regex here matches a whole text, so an anchor that always has text
/// before it (`^`) or after it (`$`) can never hold and stands for no string, and one that
/// never has is no constraint at all. JSON Schema converters write a `pattern`'s anchors inside
/// the string's quotes (`"^#/"`: `Github_hard/o5863`), and users write `^…$` around whole
/// regexes; either way the regex had look-around, which only regex-automata's determiniser
/// takes, with no way to stop it early (o5863: 50 s before its DFA was refused) and no NFA to
/// determinize on demand. Anchors that may or may not have text before them (`a?^b`) stay, as
/// do multi-line anchors and word boundaries.
fn resolve_anchors(hir: Hir) -> Hir {
    let anchors = hir.properties().look_set();
    if !(anchors.contains(Look::Start) || anchors.contains(Look::End)) {
        return hir;
    }
    resolve(&hir, Span::EMPTY, Span::EMPTY)
}

/// The lengths the text before (or after) a sub-expression may have in a whole match.
#[derive(Clone, Copy)]
struct Span {
    min: usize,
    /// `None`: unbounded.
    max: Option<usize>,
}

impl Span {
    const EMPTY: Span = Span { min: 0, max: Some(0) };

    /// The lengths of `hir`'s strings (a sub-expression with no string counts as any length,
    /// which keeps every anchor next to it).
    fn of(hir: &Hir) -> Span {
        Span { min: hir.properties().minimum_len().unwrap_or(0), max: hir.properties().maximum_len() }
    }

    fn then(self, next: Span) -> Span {
        let max = match (self.max, next.max) {
            (Some(a), Some(b)) => a.checked_add(b),
            _ => None,
        };
        Span { min: self.min.saturating_add(next.min), max }
    }

    /// What a repeated sub-expression sees: the first copy's least, and more when the copies
    /// before may have text.
    fn repeated(self, copy: Span, at_most_one: bool) -> Span {
        let grows = !at_most_one && copy.max != Some(0);
        Span { min: self.min, max: if grows { None } else { self.max } }
    }
}

fn resolve(hir: &Hir, before: Span, after: Span) -> Hir {
    match hir.kind() {
        HirKind::Look(look @ (Look::Start | Look::End)) => {
            let span = if *look == Look::Start { before } else { after };
            if span.min > 0 {
                Hir::fail()
            } else if span.max == Some(0) {
                Hir::empty()
            } else {
                hir.clone()
            }
        }
        _ if !hir.properties().look_set().contains(Look::Start) && !hir.properties().look_set().contains(Look::End) => {
            hir.clone()
        }
        HirKind::Capture(capture) => resolve(&capture.sub, before, after),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(|sub| resolve(sub, before, after)).collect()),
        HirKind::Concat(subs) => {
            let spans: Vec<Span> = subs.iter().map(Span::of).collect();
            // The text after sub `i`: the subs after it, then `after`.
            let mut afters = vec![after; subs.len()];
            for i in (0..subs.len().saturating_sub(1)).rev() {
                afters[i] = spans[i + 1].then(afters[i + 1]);
            }
            let mut at = before;
            let mut out = Vec::with_capacity(subs.len());
            for (i, sub) in subs.iter().enumerate() {
                out.push(resolve(sub, at, afters[i]));
                at = at.then(spans[i]);
            }
            Hir::concat(out)
        }
        HirKind::Repetition(repetition) => {
            let copy = Span::of(&repetition.sub);
            let at_most_one = repetition.max == Some(1);
            let sub = resolve(&repetition.sub, before.repeated(copy, at_most_one), after.repeated(copy, at_most_one));
            Hir::repetition(Repetition { sub: Box::new(sub), ..repetition.clone() })
        }
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => hir.clone(),
    }
}

#[cfg(test)]
mod anchor_tests {
    use super::*;

    fn has_anchor(pattern: &str) -> bool {
        let looks = parse_regex(pattern).unwrap().properties().look_set();
        looks.contains(Look::Start) || looks.contains(Look::End)
    }

    #[test]
    fn anchors_the_whole_match_decides_are_resolved() {
        // At the edges: no constraint.
        assert_eq!(parse_regex("^abc$").unwrap(), parse_regex("abc").unwrap());
        assert_eq!(parse_regex(r"\A(a|b)*\z").unwrap(), parse_regex("(a|b)*").unwrap());
        assert!(!has_anchor("(^a|^b)c(d$|e)?"));
        // Inside a JSON string: never holds, so that branch has no string.
        assert!(!has_anchor(r#"\{"k": ("big"|"^#/")\}"#));
        assert_eq!(parse_regex(r#""^#/""#).unwrap().properties().minimum_len(), None, "no string");
        // Undecided: text before may or may not be empty.
        assert!(has_anchor("a?^b"));
        assert!(has_anchor("(a|^b)*c"));
        // Multi-line anchors and word boundaries are not text anchors.
        assert!(!parse_regex(r"(?m)a^b").unwrap().properties().look_set().is_empty());
    }
}
