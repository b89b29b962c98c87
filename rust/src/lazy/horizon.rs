//! Count horizons: a counted string's nodes judged by the same nodes near its end.
//!
//! A position of `X{a,b}` followed by `S` (a `maxLength` string: `[^"]{0,255}"`) is a regex
//! state of its own, so every position of a document inside the string is a new text state:
//! its slice groups map to new targets (one regex state per count a token may reach), and the
//! hubs that settle them (`crate::lazy::slice::Certificates`) are new nodes, each proved live
//! by a search. That was ~350 µs a token of `{0,255}` on Llama 3, in every guide.
//!
//! # The idea
//! Past the minimum, one more character left only adds texts: the future of count `c` is
//! `X{0, b-c} S`, which contains count `c + 1`'s. A node's liveness (is there a canonical
//! continuation?) depends on its regex state only through that state's language, the other
//! components being equal, so it is monotone in the count: live at a later count ⇒ live at an
//! earlier one; dead at an earlier one ⇒ dead at a later one. So a node at count `c` is live
//! if the same node at the *horizon* ([`HORIZON_CHARS`] characters before the last count) is,
//! and dead if the same node at the string's first proved count is dead. Both stand-ins are
//! the same nodes at every position of the string, so their searches are done once per guide
//! and memoized like any node's (`crate::lazy::engine::Engine::live_by_horizon`, asked at the
//! top of every liveness question); a node is searched on its own only where neither answers
//! (near the end, or live only with more characters left).
//!
//! # What is proved, not assumed
//! A slice use is found by simulation on any regex, so "counted" says nothing about languages
//! (`[a-z]{4}x|[a-z]{6}y` counts too). So, from a position `q`:
//! * the string's positions are walked, one ASCII character of the slice at a time, until the
//!   regex dies ([`positions`]);
//! * `L(p_{c+1}) ⊆ L(p_c)` is proved for each pair of consecutive positions, from the last one
//!   down until a proof fails (the minimum), by a walk over pairs of regex states: at every
//!   pair reachable by one string, the later state accepting implies the earlier one does,
//!   and the earlier one dies only where the later one does ([`contains`]). The walk from a
//!   pair of positions reaches the pairs of the other states one character apart (inside a
//!   multi-byte character, after an escape's backslash), which are proved with it;
//! * the proved pairs `x → y` (`y` one character later) are chained, and a state reads its
//!   stand-ins off its chain ([`chains`]): which character led to a state does not matter,
//!   only that its pair was proved. A state no proof reached has none.
//!
//! Masks do not change: a stand-in answers only along proved inclusions, and every other node
//! is searched as before. `lazy::tests::counted_strings_read_their_nodes_at_the_horizon` holds
//! the masks to the eager guide's at every position up to the end.
//!
//! # Costs, and where it is not used
//! Once per counted string and guide, at the second position of it a guide judges (a string of
//! one token does not pay for it): the walk and the proofs, ~9 pairs of states a count (a
//! JSON string's characters and escapes) at ~0.12 µs a pair on a minimal DFA, 0.27 ms for
//! `{0,255}` on Llama 3. A position of such a string then judged its nodes at 70 % fewer
//! instructions; what is left of its ~210 µs is its groups (the counted map's simulation,
//! its ~300 targets mapped and interned, its exit tokens walked), new at every position.
//!
//! Only minimal DFAs are tabled. On an automaton built on demand (a grammar's: every
//! `compile_json_schema` guide) each step of a proof may build a transition: ~2 µs a pair on a
//! schema's grammar on Llama 3, 7 ms for a `maxLength` of 255, and over 40 JSONSchemaBench
//! schemas with a `maxLength` (documents from the guides' random walks) the steps' p99 rose
//! (1.2 → 1.5-1.7 ms) with strings of up to 64 counts tabled and the sum of the fills did not
//! move.

use crate::regex::byte_dfa::{ByteDfa, DEAD};
use rustc_hash::{FxHashMap, FxHashSet};

/// How many characters before the string's last count the horizon stands: a hub that is live
/// with this many characters left is live with any more. Few tokens need more than a character
/// or two after them to stay canonical; larger, and more hubs near the end are judged on their
/// own.
pub(crate) const HORIZON_CHARS: u32 = 4;

/// The most counts a horizon tables: a longer count (`{0,4095}`) has none. A proof costs
/// ~0.12 µs a pair of states, ~9 pairs a count (a JSON string's characters and escapes):
/// 0.27 ms for `{0,255}` on Llama 3, ~0.55 ms at this bound.
const MAX_COUNTS: usize = 512;

/// The most pairs of regex states the proofs may visit; past it, the counts proved so far stay
/// proved and the others are judged as before.
const MAX_PROOF_PAIRS: usize = 1 << 16;

/// What a node's liveness may be read from instead of its own search: `above`, a regex state
/// whose language is inside the node's (live there ⇒ live); `below`, one whose language
/// contains it (dead there ⇒ dead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StandIns {
    pub(crate) above: Option<u32>,
    pub(crate) below: Option<u32>,
}

/// The stand-ins of every regex state of the counted string at position `q` that a proof
/// reached (see the module docs), and the positions walked. No stand-ins where `q` takes no
/// character of the slice or the count passes [`MAX_COUNTS`].
pub(crate) fn stand_ins(slice: &ByteDfa, dfa: &ByteDfa, q: u32) -> Tabled {
    let (positions, complete) = positions(slice, dfa, q);
    if !complete {
        return Tabled { positions, stand_ins: Vec::new() };
    }
    let later = prove(dfa, &positions);
    Tabled { stand_ins: chains(&later), positions }
}

/// What [`stand_ins`] found from one position: the string's positions it walked (so that no
/// later one tables the string again), and the stand-ins, each state once.
#[derive(Default)]
pub(crate) struct Tabled {
    pub(crate) positions: Vec<u32>,
    pub(crate) stand_ins: Vec<(u32, StandIns)>,
}

/// The string's positions from `q` on: the regex states after `c` characters for each count
/// `c` until the regex dies, each character one same ASCII character of the slice that `q`
/// takes; and whether that end was reached (not where the count passes [`MAX_COUNTS`]).
///
/// Why one character stands for all: the proofs hold for the states they are about, whatever
/// the text that led there, and a walk from a position's pair reaches the pairs of the other
/// characters' states (a multi-byte character's, an escape's) on its own. A position a
/// document reaches by other characters and that is another state has no stand-ins and is
/// searched as before.
fn positions(slice: &ByteDfa, dfa: &ByteDfa, q: u32) -> (Vec<u32>, bool) {
    let mut positions = vec![q];
    let Some(b) = step_character(slice, dfa, q) else {
        return (positions, false);
    };
    loop {
        let next = dfa.next(*positions.last().unwrap(), b);
        if next == DEAD {
            let complete = positions.len() > 1;
            return (positions, complete);
        }
        if positions.len() == MAX_COUNTS {
            return (positions, false);
        }
        positions.push(next);
    }
}

/// Whether position `to` of a counted string follows position `from` within `max_chars`
/// characters (of the character [`positions`] steps by): then both are positions of one string.
pub(crate) fn follows(slice: &ByteDfa, dfa: &ByteDfa, from: u32, to: u32, max_chars: usize) -> bool {
    let Some(b) = step_character(slice, dfa, from) else { return false };
    let mut q = from;
    for _ in 0..max_chars {
        q = dfa.next(q, b);
        if q == DEAD {
            return false;
        }
        if q == to {
            return true;
        }
    }
    false
}

/// The character [`positions`] steps by from `q`: the first ASCII one (letters first) that
/// completes a character of the slice and that `q` takes.
fn step_character(slice: &ByteDfa, dfa: &ByteDfa, q: u32) -> Option<u8> {
    let completes = |b: u8| slice.next(slice.start(), b) != DEAD && slice.is_accepting(slice.next(slice.start(), b));
    (b'a'..=b'z').chain(0..128).find(|&b| completes(b) && dfa.next(q, b) != DEAD)
}

/// Pairs `(x, y)` with `L(y) ⊆ L(x)` proved, `y` one character later than `x`: from each pair
/// of consecutive positions, from the last down until a proof fails, and every pair those
/// walks reach (a multi-byte character's states, an escape's, one count apart). Stops early,
/// keeping what is proved, past [`MAX_PROOF_PAIRS`].
fn prove(dfa: &ByteDfa, positions: &[u32]) -> Vec<(u32, u32)> {
    // One byte per class of the regex.
    let mut seen = [false; 256];
    let bytes: Vec<u8> =
        (0..=255u8).filter(|&b| !std::mem::replace(&mut seen[dfa.byte_class(b) as usize], true)).collect();
    let mut proved: FxHashSet<(u32, u32)> = FxHashSet::default();
    let mut later: Vec<(u32, u32)> = Vec::new();
    let mut budget = MAX_PROOF_PAIRS;
    for pair in positions.windows(2).rev() {
        match contains(dfa, &bytes, pair[0], pair[1], &mut proved, &mut later, &mut budget) {
            Some(true) => {}
            Some(false) | None => break,
        }
    }
    later
}

/// The stand-ins along chains of proved pairs `x → y` (`y` one character later): for a state
/// more than [`HORIZON_CHARS`] steps from its chain's end, the state that many steps from the
/// end (`above`); for any other state but the chain's first and that one, the chain's first
/// (`below`). The horizon and the first state have no stand-in for each other, so reading one
/// never comes back to the other.
fn chains(later: &[(u32, u32)]) -> Vec<(u32, StandIns)> {
    let mut up: FxHashMap<u32, u32> = FxHashMap::default();
    let mut has_down: FxHashSet<u32> = FxHashSet::default();
    for &(x, y) in later {
        if up.contains_key(&x) || has_down.contains(&y) {
            // Where chains meet or part, the first pair found is the chain.
            continue;
        }
        up.insert(x, y);
        has_down.insert(y);
    }
    let mut out = Vec::with_capacity(up.len() + 1);
    let mut path = Vec::new();
    for &first in up.keys().filter(|x| !has_down.contains(x)) {
        path.clear();
        path.push(first);
        while let Some(&next) = up.get(path.last().unwrap()) {
            path.push(next);
        }
        let horizon = path.len().checked_sub(1 + HORIZON_CHARS as usize);
        for (i, &x) in path.iter().enumerate() {
            let above = horizon.filter(|&h| i < h).map(|h| path[h]);
            let below = (i > 0 && Some(i) != horizon).then_some(first);
            if above.is_some() || below.is_some() {
                out.push((x, StandIns { above, below }));
            }
        }
    }
    out
}

/// Whether `L(y) ⊆ L(x)` in `dfa` (trimmed: every live state reaches acceptance): no pair of
/// states reachable from `(x, y)` by one string has `y` accepting and `x` not, or `x` dead and
/// `y` not. Proved pairs are kept in `proved` (a failed walk keeps none); `None` once `budget`
/// pairs were visited.
fn contains(
    dfa: &ByteDfa,
    bytes: &[u8],
    x: u32,
    y: u32,
    proved: &mut FxHashSet<(u32, u32)>,
    later: &mut Vec<(u32, u32)>,
    budget: &mut usize,
) -> Option<bool> {
    let mut visited: Vec<(u32, u32)> = Vec::new();
    let mut seen: FxHashSet<(u32, u32)> = FxHashSet::default();
    let mut todo = vec![(x, y)];
    while let Some((x, y)) = todo.pop() {
        if y == DEAD || x == y || proved.contains(&(x, y)) || !seen.insert((x, y)) {
            continue;
        }
        if x == DEAD || (dfa.is_accepting(y) && !dfa.is_accepting(x)) {
            return Some(false);
        }
        *budget = budget.checked_sub(1)?;
        visited.push((x, y));
        // Most classes lead a string's pair to one same pair: pushed once in a row.
        let mut last = (DEAD, DEAD);
        for &b in bytes {
            let y2 = dfa.next(y, b);
            if y2 == DEAD {
                continue;
            }
            let pair = (dfa.next(x, b), y2);
            if pair != last {
                todo.push(pair);
                last = pair;
            }
        }
    }
    later.extend_from_slice(&visited);
    proved.extend(visited);
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stand-ins of `regex`'s string after its opening quote, with JSON string characters as
    /// the slice, and the state after the quote and `c` letters.
    fn stand_ins_of(regex: &str) -> (FxHashMap<u32, StandIns>, impl Fn(usize) -> u32) {
        let dfa = ByteDfa::from_regex(regex, 1 << 20).unwrap();
        let slice = ByteDfa::from_regex(r#"[^"\\\x00-\x1F]*"#, 1 << 16).unwrap();
        let q = dfa.next(dfa.start(), b'"');
        let found = stand_ins(&slice, &dfa, q).stand_ins.into_iter().collect();
        (found, move |c| (0..c).fold(q, |q, _| dfa.next(q, b'a')))
    }

    #[test]
    fn a_bounded_string_stands_in_for_itself_at_its_horizon_and_its_start() {
        let (found, at) = stand_ins_of(r#""[^"\\\x00-\x1F]{0,40}"x"#);
        assert_eq!(found[&at(5)], StandIns { above: Some(at(36)), below: Some(at(0)) });
        assert_eq!(found[&at(0)], StandIns { above: Some(at(36)), below: None });
        // The horizon and the start do not stand in for each other both ways.
        assert!(!found.contains_key(&at(36)));
        assert_eq!(found[&at(38)], StandIns { above: None, below: Some(at(0)) });
    }

    #[test]
    fn counts_below_the_minimum_have_no_stand_ins() {
        // Count 2's future needs a character more than count 3's has: not nested.
        let (found, at) = stand_ins_of(r#""[^"\\\x00-\x1F]{3,40}"x"#);
        assert!(!found.contains_key(&at(2)));
        assert_eq!(found[&at(10)], StandIns { above: Some(at(36)), below: Some(at(3)) });
        // The same where the text may end after the count: count 3 accepts, count 2 does not.
        let (found, at) = stand_ins_of(r#""[a-z]{3,40}"#);
        assert!(!found.contains_key(&at(2)));
        assert_eq!(found[&at(10)], StandIns { above: Some(at(36)), below: Some(at(3)) });
    }

    #[test]
    fn counts_whose_futures_are_not_nested_have_no_stand_ins() {
        // After four letters `x` may follow, after six only `y`: count 6's future is not
        // inside count 5's.
        let (found, at) = stand_ins_of(r#""([a-z]{4}x|[a-z]{6}y)"#);
        for c in 0..6 {
            assert!(found.get(&at(c)).is_none_or(|s| s.above.is_none()), "count {c}: {:?}", found.get(&at(c)));
        }
    }
}
