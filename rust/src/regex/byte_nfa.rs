//! Regex → byte NFA with ε-edges, built without determinising.
//!
//! A [`ByteNfa`] recognises the same strings as the [`ByteDfa`] of its regex (UTF-8 encodings,
//! full match), as a Thompson NFA: states with byte-range edges, ε-edges (alternation,
//! repetition) and match states. It exists for automata that are determinised *lazily*, by
//! the decoder's own walk: a grammar's pushdown automaton (`crate::lazy::pushdown`) runs its
//! large rules as NFAs, and lazy guides so run regexes too large to determinize up front. A
//! compile then costs the regex parse and the NFA (linear in the pattern) instead of the subset
//! construction and minimisation of the whole DFA (half to four fifths of a compile on
//! JSONSchemaBench's recursive schemas, exponential in the worst case), and only the states a
//! text reaches are ever built. It is also what our subset construction
//! (`crate::regex::determinize`) determinises into the minimal DFA.
//!
//! The constructors from a regex ([`ByteNfa::from_hir`], [`ByteNfa::from_regex_with_markers`])
//! and from a DFA ([`ByteNfa::from_dfa`]) are in `crate::regex::byte_dfa`, next to the DFA they
//! fall back on: this module knows nothing of DFAs, so that the DFA can be built from it. The
//! construction itself is `crate::regex::thompson`'s.
//!
//! [`ByteDfa`]: crate::regex::byte_dfa::ByteDfa
//!
//! # Invariants
//! * The start is [`ByteNfa::start`]; a string is in the language iff some path reading its
//!   bytes, with ε-edges anywhere, leads from the start to a state with
//!   [`ByteNfa::is_match`] at its end.
//! * A state's byte edges are disjoint ranges sorted by their first byte.
//! * Bytes in one [`ByteNfa::byte_class`] have the same edges from every state.
//! * Regexes with look-around assertions (`^`, `$`, `\b`) are built through their minimal
//!   [`ByteDfa`], which handles them, and carried over: a DFA is an NFA without ε-edges. So is
//!   any DFA given to [`ByteNfa::from_dfa`].
//!
//! # Costs
//! Building is linear in the pattern (the NFA is bounded like [`ByteDfa`]'s, by
//! `max_states`). A state takes 8 bytes of offsets plus 8 per byte edge and 4 per ε-edge.

use regex_automata::nfa::thompson::{self, State};
use regex_automata::util::primitives::StateID;

/// A byte-range edge: bytes `lo..=hi` lead to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteEdge {
    pub lo: u8,
    pub hi: u8,
    pub to: u32,
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct ByteNfa {
    start: u32,
    /// State `s`'s byte edges are `edges[edge_start[s]..edge_start[s + 1]]`.
    edge_start: Vec<u32>,
    edges: Vec<ByteEdge>,
    /// State `s`'s ε-successors are `epsilons[epsilon_start[s]..epsilon_start[s + 1]]`.
    epsilon_start: Vec<u32>,
    epsilons: Vec<u32>,
    is_match: Vec<bool>,
    classes: [u8; 256],
}

impl ByteNfa {
    /// The part of `nfa` reachable from its anchored start, renumbered in the order met (the
    /// NFA also holds an unanchored prefix, `(?s-u:.)*?`, which full matches never take).
    pub(crate) fn from_thompson(nfa: &thompson::NFA) -> ByteNfa {
        let states = nfa.states();
        let mut id = vec![u32::MAX; states.len()];
        let mut order = vec![nfa.start_anchored()];
        id[nfa.start_anchored().as_usize()] = 0;
        let mut i = 0;
        let mut reach = |s: StateID, order: &mut Vec<StateID>| {
            if id[s.as_usize()] == u32::MAX {
                id[s.as_usize()] = order.len() as u32;
                order.push(s);
            }
            id[s.as_usize()]
        };
        let mut out = ByteNfa::with_capacity(0);
        while i < order.len() {
            let state = &states[order[i].as_usize()];
            i += 1;
            match state {
                State::ByteRange { trans } => {
                    let to = reach(trans.next, &mut order);
                    out.edges.push(ByteEdge { lo: trans.start, hi: trans.end, to });
                }
                State::Sparse(sparse) => {
                    for t in sparse.transitions.iter() {
                        let to = reach(t.next, &mut order);
                        out.edges.push(ByteEdge { lo: t.start, hi: t.end, to });
                    }
                }
                State::Dense(dense) => {
                    // Runs of bytes with the same target; the zero id is "no transition".
                    let next = &dense.transitions;
                    let mut b = 0usize;
                    while b < 256 {
                        let mut e = b;
                        while e + 1 < 256 && next[e + 1] == next[b] {
                            e += 1;
                        }
                        if next[b].as_usize() != 0 {
                            let to = reach(next[b], &mut order);
                            out.edges.push(ByteEdge { lo: b as u8, hi: e as u8, to });
                        }
                        b = e + 1;
                    }
                }
                State::Union { alternates } => {
                    for &s in alternates.iter() {
                        let to = reach(s, &mut order);
                        out.epsilons.push(to);
                    }
                }
                State::BinaryUnion { alt1, alt2 } => {
                    for s in [*alt1, *alt2] {
                        let to = reach(s, &mut order);
                        out.epsilons.push(to);
                    }
                }
                State::Capture { next, .. } => {
                    let to = reach(*next, &mut order);
                    out.epsilons.push(to);
                }
                State::Look { .. } => unreachable!("regexes with look-around go through their DFA"),
                State::Fail | State::Match { .. } => {}
            }
            out.is_match.push(matches!(state, State::Match { .. }));
            out.close_state();
        }
        let classes = nfa.byte_classes();
        for b in 0..=255u8 {
            out.classes[b as usize] = classes.get(b);
        }
        out
    }

    /// A DFA as an NFA: one state per DFA state, no ε-edges. `next(q, b)` is where byte `b`
    /// leads from `q`, if anywhere; `classes` are the DFA's byte classes.
    pub(crate) fn from_rows(
        num_states: usize,
        start: u32,
        classes: [u8; 256],
        next: impl Fn(u32, u8) -> Option<u32>,
        accepting: impl Fn(u32) -> bool,
    ) -> ByteNfa {
        let mut out = ByteNfa::with_capacity(num_states);
        for q in 0..num_states as u32 {
            let mut b = 0usize;
            while b < 256 {
                let to = next(q, b as u8);
                let mut e = b;
                while e + 1 < 256 && next(q, e as u8 + 1) == to {
                    e += 1;
                }
                if let Some(to) = to {
                    out.edges.push(ByteEdge { lo: b as u8, hi: e as u8, to });
                }
                b = e + 1;
            }
            out.is_match.push(accepting(q));
            out.close_state();
        }
        out.start = start;
        out.classes = classes;
        out
    }

    /// The NFA of the empty language: a start with no way on.
    pub(crate) fn nothing() -> ByteNfa {
        let mut out = ByteNfa::with_capacity(1);
        out.is_match.push(false);
        out.close_state();
        out
    }

    pub(super) fn with_capacity(n: usize) -> ByteNfa {
        let mut edge_start = Vec::with_capacity(n + 1);
        edge_start.push(0);
        let mut epsilon_start = Vec::with_capacity(n + 1);
        epsilon_start.push(0);
        ByteNfa {
            start: 0,
            edge_start,
            edges: Vec::new(),
            epsilon_start,
            epsilons: Vec::new(),
            is_match: Vec::with_capacity(n),
            classes: [0; 256],
        }
    }

    /// Adds a state (`edges` disjoint and sorted); the classes are set after the last one
    /// ([`ByteNfa::set_classes_from_edges`]).
    pub(super) fn push_state(&mut self, edges: &[ByteEdge], epsilons: &[u32], is_match: bool) {
        debug_assert!(edges.windows(2).all(|w| w[0].hi < w[1].lo));
        self.edges.extend_from_slice(edges);
        self.epsilons.extend_from_slice(epsilons);
        self.is_match.push(is_match);
        self.close_state();
    }

    /// Byte classes from the edges: bytes split apart by no edge's range share a class, numbered
    /// in byte order.
    pub(super) fn set_classes_from_edges(&mut self) {
        let mut boundary = [false; 256];
        for e in &self.edges {
            boundary[e.lo as usize] = true;
            if e.hi < 255 {
                boundary[e.hi as usize + 1] = true;
            }
        }
        let mut class = 0u8;
        for (b, (&starts, out)) in boundary.iter().zip(self.classes.iter_mut()).enumerate() {
            if b > 0 && starts {
                class += 1;
            }
            *out = class;
        }
    }

    /// Ends the state whose edges were just pushed.
    fn close_state(&mut self) {
        self.edge_start.push(self.edges.len() as u32);
        self.epsilon_start.push(self.epsilons.len() as u32);
    }

    pub fn num_states(&self) -> usize {
        self.is_match.len()
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    pub fn is_match(&self, s: u32) -> bool {
        self.is_match[s as usize]
    }

    /// `s`'s byte edges, disjoint and sorted.
    pub fn edges(&self, s: u32) -> &[ByteEdge] {
        &self.edges[self.edge_start[s as usize] as usize..self.edge_start[s as usize + 1] as usize]
    }

    /// `s`'s ε-successors.
    pub fn epsilons(&self, s: u32) -> &[u32] {
        &self.epsilons[self.epsilon_start[s as usize] as usize..self.epsilon_start[s as usize + 1] as usize]
    }

    /// Where byte `b` leads from `s`, if anywhere (edges are disjoint: at most one).
    #[inline]
    pub fn next(&self, s: u32, b: u8) -> Option<u32> {
        self.edges(s).iter().find(|e| e.lo <= b && b <= e.hi).map(|e| e.to)
    }

    /// Number of byte classes (ids `0..num_classes()`).
    pub fn num_classes(&self) -> usize {
        self.classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1
    }

    /// Bytes with the same edges from every state share a class.
    #[inline]
    pub fn byte_class(&self, b: u8) -> u8 {
        self.classes[b as usize]
    }

    /// Whether every state reaches a match state (through byte and ε-edges). Then so does
    /// every state of its subset construction (a set of its states, none empty), and that DFA
    /// needs no trimming before minimisation. Linear in the NFA's edges.
    pub(crate) fn every_state_reaches_a_match(&self) -> bool {
        let n = self.num_states();
        // Predecessors through either kind of edge: those of `t` are `from[first[t]..first[t + 1]]`.
        let successors = |s: usize| {
            let bytes = self.edges(s as u32).iter().map(|e| e.to);
            bytes.chain(self.epsilons(s as u32).iter().copied())
        };
        let mut first = vec![0u32; n + 1];
        for s in 0..n {
            successors(s).for_each(|t| first[t as usize + 1] += 1);
        }
        for t in 0..n {
            first[t + 1] += first[t];
        }
        let mut fill = first.clone();
        let mut from = vec![0u32; first[n] as usize];
        for s in 0..n {
            for t in successors(s) {
                from[fill[t as usize] as usize] = s as u32;
                fill[t as usize] += 1;
            }
        }
        let mut reached = self.is_match.clone();
        let mut todo: Vec<u32> = (0..n as u32).filter(|&s| reached[s as usize]).collect();
        let mut count = todo.len();
        while let Some(t) = todo.pop() {
            for &s in &from[first[t as usize] as usize..first[t as usize + 1] as usize] {
                if !reached[s as usize] {
                    reached[s as usize] = true;
                    count += 1;
                    todo.push(s);
                }
            }
        }
        count == n
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.edge_start.len() * 4
            + self.edges.len() * 8
            + self.epsilon_start.len() * 4
            + self.epsilons.len() * 4
            + self.is_match.len()
    }

    /// Whether the whole of `text` is in the language (a set-of-states simulation; for tests
    /// and checks, not decoding).
    pub fn matches(&self, text: &[u8]) -> bool {
        let mut current = self.epsilon_closure(vec![self.start]);
        for &b in text {
            let next: Vec<u32> = current.iter().filter_map(|&s| self.next(s, b)).collect();
            current = self.epsilon_closure(next);
        }
        current.iter().any(|&s| self.is_match(s))
    }

    /// `seeds` and every state their ε-edges reach, distinct (a hash set, not a table of all
    /// states: closures are small and NFAs may have hundreds of thousands of states).
    pub fn epsilon_closure(&self, mut todo: Vec<u32>) -> Vec<u32> {
        let mut seen = rustc_hash::FxHashSet::default();
        let mut out = Vec::new();
        while let Some(s) = todo.pop() {
            if seen.insert(s) {
                out.push(s);
                todo.extend_from_slice(self.epsilons(s));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex::byte_dfa::ByteDfa;

    /// The NFA and the minimal DFA of each pattern agree on every string over a small
    /// alphabet up to length 5, and on a few Unicode strings.
    #[test]
    fn same_language_as_the_dfa() {
        let alphabet: &[&[u8]] = &[b"a", b"b", b"\"", "é".as_bytes(), &"é".as_bytes()[..1], b"\n"];
        for pattern in [
            "a|ab",
            "(a|b)*a(a|b){2}",
            "\"[^\"\\\\]{0,3}\"",
            "(ab|ac)d|é+",
            "^a$|b",
            r"(?-u:\b)a(?-u:\b)",
            "[ab]?(b|a{2,3})*",
            ".",
            "",
        ] {
            let dfa = ByteDfa::from_regex_with_markers(pattern, 10_000).unwrap();
            let nfa = ByteNfa::from_regex_with_markers(pattern, 10_000).unwrap();
            let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
            let mut layer = texts.clone();
            for _ in 0..5 {
                layer = layer.iter().flat_map(|t| alphabet.iter().map(move |a| [t.as_slice(), a].concat())).collect();
                texts.extend(layer.iter().cloned());
            }
            for text in &texts {
                assert_eq!(nfa.matches(text), dfa.matches(text), "{pattern:?} on {text:?}");
            }
        }
    }

    #[test]
    fn classes_split_what_the_edges_split() {
        let nfa = ByteNfa::from_regex_with_markers("[a-c]x|b", 100).unwrap();
        for s in 0..nfa.num_states() as u32 {
            for b in 0..=255u8 {
                for c in 0..=255u8 {
                    if nfa.byte_class(b) == nfa.byte_class(c) {
                        assert_eq!(nfa.next(s, b), nfa.next(s, c), "state {s}, bytes {b} and {c}");
                    }
                }
            }
        }
        assert_ne!(nfa.byte_class(b'a'), nfa.byte_class(b'b'));
    }

    /// Only what full matches take: no unanchored prefix (whose `[\x00-\xFF]` loop would read
    /// a grammar's call marker), every state reachable from the start.
    #[test]
    fn every_state_is_reachable() {
        for pattern in ["[abc]*", "a|b(c|d)*", "\"[^\"]*\""] {
            let nfa = ByteNfa::from_regex_with_markers(pattern, 100).unwrap();
            let mut seen = vec![false; nfa.num_states()];
            let mut todo = vec![nfa.start()];
            while let Some(s) = todo.pop() {
                if !std::mem::replace(&mut seen[s as usize], true) {
                    todo.extend(nfa.edges(s).iter().map(|e| e.to));
                    todo.extend_from_slice(nfa.epsilons(s));
                }
            }
            assert!(seen.iter().all(|&s| s), "{pattern}");
            assert!((0..nfa.num_states() as u32).all(|s| nfa.next(s, 0xFE).is_none()), "{pattern}");
        }
    }

    #[test]
    fn an_empty_language_has_no_match() {
        for pattern in [r"[^\s\S]", r"^[^\s\S]$"] {
            let nfa = ByteNfa::from_regex_with_markers(pattern, 100).unwrap();
            assert!(!nfa.matches(b"") && !nfa.matches(b"a"), "{pattern}");
        }
    }
}
