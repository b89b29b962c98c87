//! A regex's [`ByteNfa`] built straight from its HIR: a Thompson construction that builds the
//! operand of a counted repetition once and copies it.
//!
//! Why not regex-automata's Thompson compiler alone: it compiles a counted repetition's operand
//! again for every copy, and every non-ASCII class through its UTF-8 compiler each time. On 100
//! Github_* regexes that was 60 % of a lazy compile on Llama 3 (`c_bounded` 41 %, the UTF-8
//! compiler 23 %): `[A-Fa-f\d]{24}` compiles the Unicode digits 24 times per field. Here each
//! distinct non-ASCII class is compiled once by regex-automata (its UTF-8 compiler shares
//! suffixes, so the states are as few), kept per thread, and spliced in; a repetition's
//! operand is built once and copied, a copy renumbering its states.
//!
//! # Invariants
//! * A *fragment* (a sub-expression's automaton) is the states made while it is built: a
//!   contiguous range of ids, whose edges stay inside the range. So a copy is the range
//!   shifted, and only the fragment's *end* is ever given an edge afterwards (its one
//!   ε-successor, the *patch*), once every copy of it is made.
//! * The NFA recognises the regex's language (full match, UTF-8 encodings): the same as
//!   regex-automata's NFA, with possibly other states. `tests` hold the minimal DFAs of both to
//!   be identical, on the corpus regexes and on random nested counts.
//! * Regexes with look-around are not built here (`None`): they go through the DFA.
//!
//! # Costs
//! Linear in the NFA it builds, plus one regex-automata compile per distinct non-ASCII class
//! per thread. The NFA is held to the same memory budget as regex-automata's
//! ([`crate::regex::syntax::nfa_budget`]), checked as it grows, so a nested count
//! (`(?:[^a]{1000}){1000}`) stops early with `LimitExceeded`.

use std::cell::RefCell;
use std::rc::Rc;

use regex_syntax::hir::{Class, Hir, HirKind};
use rustc_hash::FxHashMap;

use super::byte_nfa::{ByteEdge, ByteNfa};
use super::syntax::{nfa_budget, thompson_nfa};
use crate::error::{Error, Result};

/// No patch yet.
const NONE: u32 = u32::MAX;

/// How many classes a thread keeps compiled (cleared when full).
const CLASS_CACHE_ENTRIES: usize = 1024;

/// Bytes of NFA per state, byte edge and ε-edge, as [`ByteNfa::heap_bytes`] counts them.
const STATE_BYTES: usize = 9;
const EDGE_BYTES: usize = 8;
const EPSILON_BYTES: usize = 4;

/// One state under construction.
#[derive(Clone, Copy)]
struct State {
    /// Its byte edges: `edges[edges_from..edges_to]` (fixed when made).
    edges_from: u32,
    edges_to: u32,
    /// Its ε-successors: `epsilons[epsilons_from..epsilons_to]` (fixed when made)...
    epsilons_from: u32,
    epsilons_to: u32,
    /// ...and the one added when the fragment it ends is joined to the next ([`NONE`]).
    patch: u32,
}

/// A fragment: its entry, its end, and the range of its states (see the module docs).
#[derive(Clone, Copy)]
struct Fragment {
    start: u32,
    end: u32,
    first: u32,
    past: u32,
}

struct Builder {
    states: Vec<State>,
    edges: Vec<ByteEdge>,
    epsilons: Vec<u32>,
    budget: usize,
    max_states: usize,
}

/// Non-ASCII classes compiled by regex-automata, by their ranges.
type ClassCache = FxHashMap<Box<[(char, char)]>, Rc<ByteNfa>>;

thread_local! {
    static CLASSES: RefCell<ClassCache> = RefCell::default();
}

/// The NFA of `hir` (translated, no look-around: `None` with one), within `max_states`' memory
/// budget.
pub(crate) fn byte_nfa(hir: &Hir, max_states: usize) -> Result<Option<ByteNfa>> {
    if !hir.properties().look_set().is_empty() {
        return Ok(None);
    }
    let mut b = Builder {
        states: Vec::new(),
        edges: Vec::new(),
        epsilons: Vec::new(),
        budget: nfa_budget(max_states),
        max_states,
    };
    let root = b.fragment(hir)?;
    Ok(Some(b.finish(root)))
}

impl Builder {
    fn bytes(&self) -> usize {
        self.states.len() * STATE_BYTES + self.edges.len() * EDGE_BYTES + self.epsilons.len() * EPSILON_BYTES
    }

    /// `Err(LimitExceeded)` past the budget, as regex-automata's size limit.
    fn check(&self) -> Result<()> {
        match self.bytes() > self.budget {
            true => Err(Error::LimitExceeded {
                limit: "max_byte_dfa_states",
                value: self.max_states.to_string(),
                what: format!("the regex's NFA exceeds {} bytes, too large to determinise", self.budget),
            }),
            false => Ok(()),
        }
    }

    fn state(&mut self, edges: impl IntoIterator<Item = ByteEdge>, epsilons: impl IntoIterator<Item = u32>) -> u32 {
        let (edges_from, epsilons_from) = (self.edges.len() as u32, self.epsilons.len() as u32);
        self.edges.extend(edges);
        self.epsilons.extend(epsilons);
        let id = self.states.len() as u32;
        self.states.push(State {
            edges_from,
            edges_to: self.edges.len() as u32,
            epsilons_from,
            epsilons_to: self.epsilons.len() as u32,
            patch: NONE,
        });
        id
    }

    /// A state with no way on yet: a fragment's end.
    fn end(&mut self) -> u32 {
        self.state([], [])
    }

    fn patch(&mut self, end: u32, to: u32) {
        debug_assert_eq!(self.states[end as usize].patch, NONE);
        self.states[end as usize].patch = to;
    }

    fn fragment(&mut self, hir: &Hir) -> Result<Fragment> {
        let first = self.states.len() as u32;
        let (start, end) = self.entry_and_end(hir)?;
        self.check()?;
        Ok(Fragment { start, end, first, past: self.states.len() as u32 })
    }

    fn entry_and_end(&mut self, hir: &Hir) -> Result<(u32, u32)> {
        Ok(match hir.kind() {
            HirKind::Empty => {
                let s = self.end();
                (s, s)
            }
            HirKind::Literal(lit) => {
                let start = self.states.len() as u32;
                for (i, &b) in lit.0.iter().enumerate() {
                    let to = start + i as u32 + 1;
                    self.state([ByteEdge { lo: b, hi: b, to }], []);
                }
                (start, self.end())
            }
            HirKind::Class(Class::Bytes(class)) => {
                let end = self.states.len() as u32 + 1;
                let start =
                    self.state(class.ranges().iter().map(|r| ByteEdge { lo: r.start(), hi: r.end(), to: end }), []);
                (start, self.end())
            }
            HirKind::Class(Class::Unicode(class)) if class.ranges().last().is_none_or(|r| r.end() <= '\x7f') => {
                let end = self.states.len() as u32 + 1;
                let edges = class.ranges().iter().map(|r| ByteEdge { lo: r.start() as u8, hi: r.end() as u8, to: end });
                let start = self.state(edges, []);
                (start, self.end())
            }
            HirKind::Class(Class::Unicode(class)) => {
                let key: Box<[(char, char)]> = class.ranges().iter().map(|r| (r.start(), r.end())).collect();
                let nfa = match CLASSES.with(|c| c.borrow().get(&key).cloned()) {
                    Some(nfa) => nfa,
                    None => {
                        let nfa = Rc::new(ByteNfa::from_thompson(&thompson_nfa(hir, self.max_states)?));
                        CLASSES.with(|c| {
                            let mut c = c.borrow_mut();
                            if c.len() >= CLASS_CACHE_ENTRIES {
                                c.clear();
                            }
                            c.insert(key, nfa.clone());
                        });
                        nfa
                    }
                };
                self.splice(&nfa)
            }
            HirKind::Look(_) => unreachable!("regexes with look-around are not built here"),
            HirKind::Capture(capture) => self.entry_and_end(&capture.sub)?,
            HirKind::Concat(parts) => {
                let mut parts = parts.iter();
                let Some(first) = parts.next() else { return self.entry_and_end(&Hir::empty()) };
                let (start, mut end) = self.entry_and_end(first)?;
                for part in parts {
                    let (next, next_end) = self.entry_and_end(part)?;
                    self.patch(end, next);
                    end = next_end;
                }
                (start, end)
            }
            HirKind::Alternation(branches) => {
                let branches: Vec<Fragment> = branches.iter().map(|b| self.fragment(b)).collect::<Result<_>>()?;
                let end = self.end();
                branches.iter().for_each(|b| self.patch(b.end, end));
                let start = self.state([], branches.iter().map(|b| b.start));
                (start, end)
            }
            HirKind::Repetition(rep) => {
                let copies = rep.max.unwrap_or(rep.min.max(1));
                if copies == 0 {
                    return self.entry_and_end(&Hir::empty());
                }
                let operand = self.fragment(&rep.sub)?;
                let mut made = vec![operand];
                for _ in 1..copies {
                    made.push(self.copy(operand)?);
                }
                self.repeat(&made, rep.min as usize, rep.max.is_none())
            }
        })
    }

    /// Joins copies of one operand into a repetition: the first `min` in a row, then, unbounded,
    /// a loop on the last copy, or, bounded, each further copy optional.
    fn repeat(&mut self, copies: &[Fragment], min: usize, unbounded: bool) -> (u32, u32) {
        let end = self.end();
        let mut start = NONE;
        // The end the next piece hangs on (NONE: the fragment's start is not made yet).
        let mut last = NONE;
        let mut join = |b: &mut Builder, piece_start: u32, piece_end: u32| {
            match last {
                NONE => start = piece_start,
                last => b.patch(last, piece_start),
            }
            last = piece_end;
        };
        if unbounded {
            // `min` copies, the last one looped (`min == 0`: the loop may be skipped).
            for c in &copies[..min.saturating_sub(1)] {
                join(self, c.start, c.end);
            }
            let looped = copies[min.saturating_sub(1)];
            let again = self.state([], [looped.start, end]);
            self.patch(looped.end, again);
            join(self, if min == 0 { again } else { looped.start }, end);
        } else {
            for c in &copies[..min] {
                join(self, c.start, c.end);
            }
            for c in &copies[min..] {
                let optional = self.state([], [c.start, end]);
                join(self, optional, c.end);
            }
            match last {
                NONE => start = end,
                last => self.patch(last, end),
            }
        }
        (start, end)
    }

    /// A copy of `f`: its range of states shifted past the last state made.
    fn copy(&mut self, f: Fragment) -> Result<Fragment> {
        let shift = self.states.len() as u32 - f.first;
        for s in f.first..f.past {
            let state = self.states[s as usize];
            let (edges_from, epsilons_from) = (self.edges.len() as u32, self.epsilons.len() as u32);
            self.edges.extend_from_within(state.edges_from as usize..state.edges_to as usize);
            self.edges[edges_from as usize..].iter_mut().for_each(|e| e.to += shift);
            self.epsilons.extend_from_within(state.epsilons_from as usize..state.epsilons_to as usize);
            self.epsilons[epsilons_from as usize..].iter_mut().for_each(|t| *t += shift);
            self.states.push(State {
                edges_from,
                edges_to: self.edges.len() as u32,
                epsilons_from,
                epsilons_to: self.epsilons.len() as u32,
                patch: if state.patch == NONE { NONE } else { state.patch + shift },
            });
            if s % 4096 == 0 {
                self.check()?;
            }
        }
        self.check()?;
        Ok(Fragment { start: f.start + shift, end: f.end + shift, first: f.first + shift, past: f.past + shift })
    }

    /// A class's NFA (compiled by regex-automata) as a fragment: its match state is the end.
    fn splice(&mut self, nfa: &ByteNfa) -> (u32, u32) {
        let shift = self.states.len() as u32;
        let mut end = NONE;
        for s in 0..nfa.num_states() as u32 {
            let edges = nfa.edges(s).iter().map(|e| ByteEdge { to: e.to + shift, ..*e });
            self.state(edges, nfa.epsilons(s).iter().map(|&t| t + shift));
            if nfa.is_match(s) {
                debug_assert!(end == NONE && nfa.edges(s).is_empty() && nfa.epsilons(s).is_empty());
                end = s + shift;
            }
        }
        match end {
            NONE => (nfa.start() + shift, self.end()),
            end => (nfa.start() + shift, end),
        }
    }

    /// The NFA from `root`'s start, its end the match state: the states reachable, numbered in
    /// the order met, each edge taken past the states that only pass on to one other (a
    /// concatenation's joins), which the subset construction would otherwise walk through.
    fn finish(self, root: Fragment) -> ByteNfa {
        let forwards = |s: u32| {
            let st = &self.states[s as usize];
            let epsilons = (st.epsilons_to - st.epsilons_from) as usize + usize::from(st.patch != NONE);
            match s != root.end && st.edges_from == st.edges_to && epsilons == 1 {
                true => Some(if st.patch != NONE { st.patch } else { self.epsilons[st.epsilons_from as usize] }),
                false => None,
            }
        };
        // Chains are short; a cycle of forwarding states (an ε-loop with no way out) stops
        // the walk at the bound, which only keeps a state the NFA could have skipped.
        let resolve = |mut s: u32| {
            for _ in 0..64 {
                match forwards(s) {
                    Some(t) => s = t,
                    None => break,
                }
            }
            s
        };
        let mut id = vec![NONE; self.states.len()];
        let start = resolve(root.start);
        id[start as usize] = 0;
        let mut order = Vec::with_capacity(self.states.len());
        order.push(start);
        let mut out = ByteNfa::with_capacity(self.states.len());
        let mut i = 0;
        let (mut edges, mut epsilons): (Vec<ByteEdge>, Vec<u32>) = (Vec::new(), Vec::new());
        while i < order.len() {
            let s = order[i];
            i += 1;
            let st = self.states[s as usize];
            let mut reach = |t: u32| {
                let t = resolve(t);
                if id[t as usize] == NONE {
                    id[t as usize] = order.len() as u32;
                    order.push(t);
                }
                id[t as usize]
            };
            edges.clear();
            edges.extend(
                self.edges[st.edges_from as usize..st.edges_to as usize]
                    .iter()
                    .map(|e| ByteEdge { to: reach(e.to), ..*e }),
            );
            epsilons.clear();
            let patch = (st.patch != NONE).then_some(st.patch);
            for t in self.epsilons[st.epsilons_from as usize..st.epsilons_to as usize].iter().copied().chain(patch) {
                let t = reach(t);
                if !epsilons.contains(&t) {
                    epsilons.push(t);
                }
            }
            out.push_state(&edges, &epsilons, s == root.end);
        }
        out.set_classes_from_edges();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex::byte_dfa::{parse_regex, ByteDfa};
    use crate::util::random::SplitMix64;

    /// The minimal DFAs of this NFA and of regex-automata's Thompson NFA, identical table for
    /// table (our subset construction and minimisation for both), or the same refusal. `false`
    /// when both refused.
    fn same_as_regex_automata_nfa(pattern: &str, max_states: usize) -> bool {
        let hir = crate::regex::syntax::translate(pattern, false).unwrap_or_else(|e| panic!("{pattern:?}: {e}"));
        let theirs = thompson_nfa(&hir, max_states)
            .and_then(|nfa| ByteDfa::from_byte_nfa(&ByteNfa::from_thompson(&nfa), max_states));
        let ours = byte_nfa(&hir, max_states).map(|nfa| nfa.expect("no look-around"));
        match (ours.and_then(|nfa| ByteDfa::from_byte_nfa(&nfa, max_states)), theirs) {
            (Ok(ours), Ok(theirs)) => {
                assert!(ours.same_table(&theirs), "{pattern:?}: the minimal DFAs differ");
                true
            }
            (Err(Error::LimitExceeded { .. }), Err(Error::LimitExceeded { .. })) => false,
            (ours, theirs) => panic!("{pattern:?}: ours {:?}, regex-automata's {:?}", ours.err(), theirs.err()),
        }
    }

    #[test]
    fn same_minimal_dfa_as_regex_automata_nfa_on_random_regexes() {
        let mut rng = SplitMix64::new(5);
        let compared = (0..3_000)
            .filter(|_| same_as_regex_automata_nfa(&crate::testing::random_regex(&mut rng, 4), 5_000))
            .count();
        assert!(compared > 2_900, "only {compared} compared");
    }

    #[test]
    fn same_minimal_dfa_as_regex_automata_nfa_on_chosen_regexes() {
        for pattern in [
            "",
            "a{0}",
            "(?:a{0})*",
            "(?:)*",
            "(?:a*)*b",
            "(?:a|)+",
            "[^\\s\\S]",
            "[^\\s\\S]?x",
            "x[^\\s\\S]*",
            "(?-u:[\\x80-\\xff])+",
            "[A-Fa-f\\d]{24}",
            "(?:[\\w\\s-]{2,5}|é){3}",
            "\"([^\"\\\\\\x00-\\x1F\\x7F-\\x9F]|\\\\[\"\\\\/bfnrt]){0,255}\"",
        ] {
            assert!(same_as_regex_automata_nfa(pattern, 100_000), "{pattern:?}");
        }
    }

    /// The regexes of the shared corpus up to 20,000 bytes: the suite, and one JSONSchemaBench
    /// regex in 4 (all of them agreed when this was written: 3,447 compared, 157 refused by
    /// both at the state limit, a minute in a release build).
    #[test]
    fn same_minimal_dfa_as_regex_automata_nfa_on_the_shared_regexes() {
        let (suite, bench) = (
            crate::testing::shared_data("regex_suite.jsonl"),
            crate::testing::shared_data("jsonschemabench_regex.jsonl"),
        );
        let patterns: Vec<String> = (suite.lines().chain(bench.lines().step_by(4)))
            .filter_map(|line| {
                Some(serde_json::from_str::<serde_json::Value>(line).ok()?["regex"].as_str()?.to_string())
            })
            .filter(|p| p.len() <= 20_000 && parse_regex(p).is_ok_and(|h| h.properties().look_set().is_empty()))
            .collect();
        let compared = patterns.iter().filter(|p| same_as_regex_automata_nfa(p, 20_000)).count();
        assert!(
            patterns.len() > 800 && compared * 10 > patterns.len() * 9,
            "{compared} of {} compared",
            patterns.len()
        );
    }

    /// A nested count stops while the NFA grows, well before it is built.
    #[test]
    fn a_nested_count_stops_at_the_budget() {
        let started = std::time::Instant::now();
        let hir = parse_regex("(?:[^a]{1000}){1000}").unwrap();
        assert!(matches!(byte_nfa(&hir, 2_000), Err(Error::LimitExceeded { what, .. }) if what.contains("NFA")));
        assert!(started.elapsed().as_secs_f64() < 5.0);
    }
}
