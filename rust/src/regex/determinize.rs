//! Subset construction: a [`ByteNfa`] without look-around → a DFA table over its byte classes.
//!
//! A DFA state is a set of NFA states closed under ε-edges, kept as the sorted ids of the states
//! in it that read a byte (ε-only states add nothing once followed), plus [`ACCEPTS`] when a match
//! state is in the closure. Two closures with the same key have the same future, so interning by
//! key gives a DFA of the same language as the NFA: the full-match, every-match
//! (`MatchKind::All`) semantics of an anchored regex, the DFA [`super::byte_dfa::ByteDfa`]
//! minimises.
//!
//! # Why not regex-automata's determiniser
//! It computes one transition per (state, byte class), each an ε-closure plus a hash of the
//! target set. Regexes with Unicode classes (`\d`, `[^"\\\x00-\x1F]`) have 50–150 byte
//! classes, and most of a state's row is the same few targets, so a 340-state glaive DFA took
//! 3.3 ms. Here the bytes are cut once per state into the intervals on which its NFA states'
//! edges agree, and each interval (typically 2–10, not 50–150) costs one closure. On 200
//! Glaiveai2K regexes the median determinisation went from 595–647 µs to 73–78 µs; on the
//! slowest of 300 JSONSchemaBench regexes (a 303,000-state DFA) from 4.4 s to 0.24 s
//! (`benches/RESULTS.md`, "Stop 34").
//!
//! # Invariants
//! * State 0 is the start; states are numbered in the order first met.
//! * `trans[s * num_classes + c]` is the target on class `c`, or [`DEAD`] when no NFA state of `s`
//!   reads it. Every state is reachable; some may not reach acceptance (the caller trims).
//!
//! # Costs
//! Per state: its NFA states' edges, one pass over them per interval (a sweep over sorted edges
//! measured no faster), one closure and one hash per interval, and one row of
//! `4 · num_classes` bytes. The states built and the NFA ids stored in keys are bounded by the
//! caller's limits, and so is the work (closures and edges read); past one, [`Exceeded`] says
//! which.

use rustc_hash::FxHashMap;

use crate::regex::byte_nfa::ByteNfa;
use crate::util::long_work;

/// Marks a missing transition (in every DFA table of the crate).
pub const DEAD: u32 = u32::MAX;

/// Key element of a closure that contains a match state (never an NFA id: ids are `< u32::MAX`).
const ACCEPTS: u32 = u32::MAX;

/// A DFA table, complete but for [`DEAD`] transitions (see the module docs).
pub(crate) struct SubsetDfa {
    pub classes: [u8; 256],
    pub num_classes: usize,
    pub trans: Vec<u32>,
    pub accepting: Vec<bool>,
}

/// How far a subset construction may go.
pub(crate) struct SubsetLimits {
    /// DFA states at most.
    pub max_states: usize,
    /// NFA ids stored in the keys of all states together, at most (the construction's memory).
    pub max_key_ids: usize,
    /// NFA states visited by closures plus NFA edges read, at most: a measure of time
    /// (~40 ns a unit on 2 cores), which a caller with a cheaper way out may bound.
    pub max_work: usize,
}

/// Work (NFA edges read, states closed) past which a construction tells its caller the work is
/// long ([`long_work`]): ~40 ns a unit, so ~1 ms.
const LONG_WORK: usize = 25_000;

/// Which of [`SubsetLimits`] stopped a construction.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Exceeded {
    States,
    KeyIds,
    Work,
}

/// The DFA of `nfa` (which must have no look-around: [`ByteNfa`] carries such regexes as DFAs
/// already). See the module docs.
pub(crate) fn determinize(nfa: &ByteNfa, limits: &SubsetLimits) -> Result<SubsetDfa, Exceeded> {
    let mut classes = [0u8; 256];
    for b in 0..=255u8 {
        classes[b as usize] = nfa.byte_class(b);
    }
    let num_classes = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
    // The first byte of each class: a row is filled once per class, from its representative.
    let mut is_representative = [false; 256];
    let mut seen = [false; 256];
    for b in 0..256 {
        is_representative[b] = !std::mem::replace(&mut seen[classes[b] as usize], true);
    }

    let mut builder = Builder {
        nfa,
        ids: FxHashMap::default(),
        keys: Vec::new(),
        key_ids: 0,
        work: 0,
        limits,
        stamp: vec![0; nfa.num_states()],
        generation: 0,
        stack: Vec::new(),
        key: Vec::new(),
    };
    builder.state_of_closure(&[nfa.start()])?;
    let mut trans: Vec<u32> = Vec::new();
    let mut accepting: Vec<bool> = Vec::new();
    let mut edges: Vec<(u8, u8, u32)> = Vec::new();
    let mut targets: Vec<u32> = Vec::new();
    let mut s = 0;
    while s < builder.keys.len() {
        let key = std::mem::take(&mut builder.keys[s]);
        let (ids, accepts) = match key.last() {
            Some(&ACCEPTS) => (&key[..key.len() - 1], true),
            _ => (&key[..], false),
        };
        accepting.push(accepts);
        edges.clear();
        for &q in ids {
            edges.extend(nfa.edges(q).iter().map(|e| (e.lo, e.hi, e.to)));
        }
        let before = builder.work;
        builder.work += edges.len();
        if before < LONG_WORK && builder.work >= LONG_WORK {
            long_work::notify();
        }
        // Cut 0..=255 where any edge starts or ends; each interval has one target set.
        let mut cut = [false; 257];
        for &(lo, hi, _) in &edges {
            cut[lo as usize] = true;
            cut[hi as usize + 1] = true;
        }
        let row = trans.len();
        trans.resize(row + num_classes, DEAD);
        let mut lo = 0usize;
        while lo < 256 {
            let mut hi = lo;
            while hi < 255 && !cut[hi + 1] {
                hi += 1;
            }
            targets.clear();
            targets.extend(edges.iter().filter(|e| (e.0 as usize) <= lo && lo <= e.1 as usize).map(|e| e.2));
            if !targets.is_empty() {
                let to = builder.state_of_closure(&targets)?;
                for b in lo..=hi {
                    if is_representative[b] {
                        trans[row + classes[b] as usize] = to;
                    }
                }
            }
            lo = hi + 1;
        }
        builder.keys[s] = key;
        s += 1;
    }
    Ok(SubsetDfa { classes, num_classes, trans, accepting })
}

struct Builder<'a> {
    nfa: &'a ByteNfa,
    ids: FxHashMap<Box<[u32]>, u32>,
    /// Key of each state, by id (taken out while the state's row is built).
    keys: Vec<Box<[u32]>>,
    key_ids: usize,
    work: usize,
    limits: &'a SubsetLimits,
    /// `stamp[q] == generation`: `q` is in the closure being built.
    stamp: Vec<u32>,
    generation: u32,
    stack: Vec<u32>,
    /// The key being built (one buffer for all: most closures are of states met before, and
    /// their keys are never stored).
    key: Vec<u32>,
}

impl Builder<'_> {
    /// The id of the state of the ε-closure of `seeds`, adding it if new.
    fn state_of_closure(&mut self, seeds: &[u32]) -> Result<u32, Exceeded> {
        self.closure(seeds);
        self.intern()
    }

    /// Builds the key of the ε-closure of `seeds` (see the module docs) in `self.key`.
    fn closure(&mut self, seeds: &[u32]) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|x| *x = 0);
            self.generation = 1;
        }
        let key = &mut self.key;
        key.clear();
        let mut accepts = false;
        self.stack.extend_from_slice(seeds);
        while let Some(q) = self.stack.pop() {
            if std::mem::replace(&mut self.stamp[q as usize], self.generation) == self.generation {
                continue;
            }
            self.work += 1;
            accepts |= self.nfa.is_match(q);
            if !self.nfa.edges(q).is_empty() {
                key.push(q);
            }
            self.stack.extend_from_slice(self.nfa.epsilons(q));
        }
        key.sort_unstable();
        if accepts {
            key.push(ACCEPTS);
        }
    }

    /// The id of the state with the key in `self.key`, adding it if new.
    fn intern(&mut self) -> Result<u32, Exceeded> {
        if self.work > self.limits.max_work {
            return Err(Exceeded::Work);
        }
        if let Some(&id) = self.ids.get(self.key.as_slice()) {
            return Ok(id);
        }
        let key: Box<[u32]> = self.key.as_slice().into();
        let id = self.keys.len();
        self.key_ids += key.len();
        if id >= self.limits.max_states {
            return Err(Exceeded::States);
        }
        if self.key_ids > self.limits.max_key_ids {
            return Err(Exceeded::KeyIds);
        }
        self.ids.insert(key.clone(), id as u32);
        self.keys.push(key);
        Ok(id as u32)
    }
}

#[cfg(test)]
mod tests {
    use crate::regex::byte_dfa::{parse_regex, ByteDfa};
    use crate::util::random::SplitMix64;

    /// The minimal DFAs from our subset construction and from regex-automata's, identical
    /// table for table (a minimal DFA is unique; both are renumbered the same way), or the
    /// same refusal. `None` when regex-automata refused.
    fn same_as_regex_automata(pattern: &str, max_states: usize) -> Option<ByteDfa> {
        let hir = parse_regex(pattern).unwrap_or_else(|e| panic!("{pattern:?}: {e}"));
        let theirs = ByteDfa::from_hir_by_regex_automata(&hir, max_states);
        let ours = ByteDfa::from_hir(&hir, max_states);
        match theirs {
            Ok(theirs) => {
                let ours = ours.unwrap_or_else(|e| panic!("{pattern:?}: ours refused ({e}), regex-automata's did not"));
                assert!(ours.same_table(&theirs), "{pattern:?}: the minimal DFAs differ");
                Some(ours)
            }
            Err(_) => None,
        }
    }

    #[test]
    fn same_minimal_dfa_as_regex_automata_on_random_regexes() {
        let mut rng = SplitMix64::new(11);
        let mut compared = 0;
        for _ in 0..3_000 {
            let pattern = crate::testing::random_regex(&mut rng, 4);
            compared += same_as_regex_automata(&pattern, 2_000).is_some() as usize;
        }
        assert!(compared > 2_900, "only {compared} compared");
    }

    #[test]
    fn same_minimal_dfa_as_regex_automata_on_chosen_regexes() {
        for pattern in [
            "a|ab",
            "(a|b)*a(a|b){3}",
            "\"([^\"\\\\\\x00-\\x1F\\x7F-\\x9F]|\\\\[\"\\\\/bfnrt])*\"",
            r"\d{4}-\d{2}",
            r"[\w.-]+@[\w]+\.[A-Za-z]{2,4}",
            "(?s:.){0,5}",
            "[^\\s\\S]?x",
            "",
        ] {
            assert!(same_as_regex_automata(pattern, 10_000).is_some(), "{pattern:?}");
        }
    }

    /// The real regexes of the shared corpus: the suite, and one JSONSchemaBench regex in 25
    /// (up to 20,000 bytes; those over the state limit are left to regex-automata's refusal).
    #[test]
    fn same_minimal_dfa_as_regex_automata_on_the_shared_regexes() {
        let read = crate::testing::shared_data;
        let suite = read("regex_suite.jsonl");
        let bench = read("jsonschemabench_regex.jsonl");
        let patterns = suite
            .lines()
            .chain(bench.lines().step_by(25))
            .filter_map(|line| {
                Some(serde_json::from_str::<serde_json::Value>(line).ok()?["regex"].as_str()?.to_string())
            })
            .filter(|p| p.len() <= 20_000);
        let (mut compared, mut tried) = (0, 0);
        for pattern in patterns.filter(|p| parse_regex(p).is_ok()) {
            tried += 1;
            compared += same_as_regex_automata(&pattern, 20_000).is_some() as usize;
        }
        assert!(tried > 250 && compared * 10 > tried * 9, "{compared} of {tried} compared");
    }
}
