//! Regex → trimmed byte-level DFA.
//!
//! A [`ByteDfa`] recognises the UTF-8 encodings of the strings that match a regex *in full*
//! (the whole string, not a substring). The pattern is parsed with `regex-syntax` (so
//! unsupported features get a precise error before any automaton is built) and compiled to a
//! Thompson NFA (`crate::regex::thompson`; by `regex-automata` for look-around); the NFA is
//! determinised with `MatchKind::All` semantics
//! (every match, not leftmost-first, so that `a|ab` accepts both) from an anchored start, by our
//! subset construction (`crate::regex::determinize`, 8× faster on glaive regexes) or, for a regex
//! with look-around (`^`, `$`, `\b`), by regex-automata's dense DFA builder, whose reachable part
//! is copied into our table. The result is trimmed, its byte classes merged where no state tells
//! them apart, and minimised (Hopcroft): outlines-style JSON regexes repeat the same tails
//! (`[ ]?`, string bodies), and every byte state saved here saves one state per tokenizer class
//! in the CartesianMerge product (about half of them on glaive schemas).
//!
//! # Invariants
//! * Every state is *relevant*: reachable from `start` and able to reach an accepting state
//!   (the appendix's standing assumption). A regex with an empty language is an error.
//! * `regex-automata` reports a match one transition late (its match states are delayed by one
//!   byte). Here a state is accepting when its end-of-input transition is a match, so
//!   "accepting" means what the papers mean: the bytes read so far are in the language.
//! * Transitions are over byte equivalence classes, `DEAD` where there is no transition. Two
//!   bytes share a class iff they lead every state to the same place (the NFA's classes, which
//!   come from its edges, merged: the UTF-8 ranges of `\d` or `[^"\\]` split dozens of classes
//!   that the minimal DFA never tells apart, 62 → 45 on average over 300 JSONSchemaBench
//!   regexes).
//! * Both determinisers give the same minimal DFA, table for table (tested on random regexes
//!   and on the shared corpus in `crate::regex::determinize`).
//!
//! # Costs
//! Determinisation is worst-case exponential in the pattern (`(a|b)*a(a|b){20}`); the build
//! stops with [`Error::LimitExceeded`] once `4 * max_states` states are reached (the DFA
//! before minimisation) or when the minimal DFA has more than `max_states`, and the memory
//! the determiniser may use is capped accordingly. Minimisation (Hopcroft,
//! `crate::regex::minimize`) costs `O(k · n · log n)` for `n` states and `k` byte classes. The table
//! takes `4 * states * classes` bytes. On 200 Glaiveai2K regexes (2 cores, median per regex):
//! parse 96 µs, NFA 42 µs, determinise 73 µs, trim and merge 53 µs, minimise 135 µs
//! (`benches/RESULTS.md`, "Stop 34").

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::start,
    Anchored, MatchKind,
};
use regex_syntax::hir::Hir;

use crate::error::{Error, Result};
use crate::regex::byte_nfa::ByteNfa;
use crate::regex::determinize::{determinize, Exceeded, SubsetDfa, SubsetLimits};
use crate::util::long_work;
use crate::util::random::SplitMix64;

pub use crate::regex::determinize::DEAD;
pub use crate::regex::syntax::parse_regex;
pub(crate) use crate::regex::syntax::{thompson_nfa, translate};

/// How many times `max_states` the determinised DFA may have before minimisation.
const UNMINIMISED_FACTOR: usize = 4;

/// Where a caller that has another way out (running the NFA) stops determinising a regex up
/// front; see `Compiler::compile_regex_lazy_with`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// States of the DFA before minimisation.
    pub max_states: usize,
    /// Work of the subset construction: NFA states visited by its ε-closures plus NFA edges
    /// read, ~40 ns a unit on 2 cores.
    pub max_work: usize,
}

impl Bound {
    /// Never determinize up front: every state on demand (how the tests reach that engine). No
    /// subset construction fits in it: its start state is already past it.
    pub const ON_DEMAND: Bound = Bound { max_states: 0, max_work: 0 };
    /// No bound but the user's limits.
    pub const UNBOUNDED: Bound = Bound { max_states: usize::MAX, max_work: usize::MAX };
}

/// The constructors of a [`ByteNfa`] from a regex live here, beside the DFA they fall back on:
/// a regex with look-around is carried over as its minimal DFA (see `crate::regex::byte_nfa`).
impl ByteNfa {
    /// The NFA of a grammar rule's regex, in which special tokens and calls are marker bytes
    /// (see [`ByteDfa::from_regex_with_markers`]). Errors as [`ByteDfa`]'s (a syntax error, an
    /// NFA over the budget of `max_states`); an empty language is not one: the start cannot
    /// reach a match state.
    pub fn from_regex_with_markers(pattern: &str, max_states: usize) -> Result<ByteNfa> {
        Self::from_hir(&translate(pattern, false)?, max_states)
    }

    /// [`ByteNfa::from_regex_with_markers`] for a translated regex.
    pub fn from_hir(hir: &Hir, max_states: usize) -> Result<ByteNfa> {
        if let Some(nfa) = crate::regex::thompson::byte_nfa(hir, max_states)? {
            return Ok(nfa);
        }
        let nfa = thompson_nfa(hir, max_states)?;
        if !nfa.look_set_any().is_empty() {
            return Ok(match ByteDfa::from_hir(hir, max_states)? {
                dfa if dfa.is_empty() => ByteNfa::nothing(),
                dfa => ByteNfa::from_dfa(&dfa),
            });
        }
        Ok(ByteNfa::from_thompson(&nfa))
    }

    /// The DFA as an NFA: one state per DFA state, no ε-edges.
    pub fn from_dfa(dfa: &ByteDfa) -> ByteNfa {
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            classes[b as usize] = dfa.byte_class(b);
        }
        let next = |q: u32, b: u8| Some(dfa.next(q, b)).filter(|&t| t != DEAD);
        ByteNfa::from_rows(dfa.num_states(), dfa.start(), classes, next, |q| dfa.is_accepting(q))
    }
}

/// What determinising one regex may take, from the user's `max_states` (on the minimal DFA).
struct Budget {
    max_states: usize,
    /// The DFA is minimised after determinisation (see `partition`), so the determinised one
    /// may be larger than the limit on the result: `UNMINIMISED_FACTOR` times more.
    max_unminimised: usize,
    /// The DFA's table: a dense state takes one 4-byte id per class (plus end of input), so
    /// `max_unminimised` states fit in `max_unminimised * (classes + 1) * 4` bytes; this allows
    /// about twice that, so an exponential DFA stops near the state limit instead of building
    /// millions of states first.
    table_bytes: usize,
    /// The determiniser also keeps each state's set of NFA states: more room.
    set_bytes: usize,
}

impl Budget {
    /// For an NFA with `num_classes` byte classes (regex-automata counts end of input as one).
    fn of(num_classes: usize, max_states: usize) -> Budget {
        let max_unminimised = max_states.saturating_mul(UNMINIMISED_FACTOR);
        let columns = num_classes + 1;
        let table_bytes = max_unminimised.saturating_mul(columns * 4 * 2).max(1 << 16);
        Budget { max_states, max_unminimised, table_bytes, set_bytes: table_bytes.saturating_mul(4).max(64 << 20) }
    }
}

/// A trimmed DFA over bytes. See the module docs for its invariants.
#[derive(Clone, Debug)]
pub struct ByteDfa {
    classes: [u8; 256],
    num_classes: usize,
    trans: Vec<u32>,
    accepting: Vec<bool>,
    start: u32,
    /// Fewest bytes from each state to an accepting state.
    distance_to_accept: Vec<u32>,
}

impl ByteDfa {
    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.trans.len() * 4 + self.accepting.len() + self.distance_to_accept.len() * 4
    }

    /// Compiles `pattern` (full-match semantics) with at most `max_states` states.
    pub fn from_regex(pattern: &str, max_states: usize) -> Result<ByteDfa> {
        Self::from_parsed(pattern, parse_regex(pattern), max_states)
    }

    /// [`ByteDfa::from_regex`] for a grammar's regex, in which special tokens are written as
    /// marker bytes ([`TOKEN_MARKER`]): the only bytes outside UTF-8 it may match. Only
    /// `crate::grammar::lower` writes such regexes; a user's regex goes through `from_regex`,
    /// which refuses anything but UTF-8.
    pub fn from_regex_with_markers(pattern: &str, max_states: usize) -> Result<ByteDfa> {
        Self::from_parsed(pattern, translate(pattern, false), max_states)
    }

    pub(crate) fn from_parsed(pattern: &str, hir: Result<Hir>, max_states: usize) -> Result<ByteDfa> {
        ByteDfa::from_hir(&hir?, max_states)?.non_empty(pattern)
    }

    /// `self`, or [`Error::EmptyLanguage`] naming `pattern` when no string matches.
    pub(crate) fn non_empty(self, pattern: &str) -> Result<ByteDfa> {
        if self.is_empty() {
            return Err(Error::EmptyLanguage(format!("no string matches the regex {pattern:?}")));
        }
        Ok(self)
    }

    /// Compiles an already translated regex. An empty language gives a DFA with no states
    /// (check [`ByteDfa::is_empty`]).
    pub fn from_hir(hir: &Hir, max_states: usize) -> Result<ByteDfa> {
        if let Some(nfa) = crate::regex::thompson::byte_nfa(hir, max_states)? {
            return Self::from_byte_nfa(&nfa, max_states);
        }
        let nfa = thompson_nfa(hir, max_states)?;
        let budget = Budget::of(nfa.byte_classes().alphabet_len(), max_states);
        Self::minimal(Self::determinized_by_regex_automata(&nfa, &budget)?, false, max_states)
    }

    /// The minimal DFA of an NFA already built (an empty language gives a DFA with no
    /// states), as [`ByteDfa::from_hir`] would build it from the same regex: callers that hold
    /// the [`ByteNfa`] spare a second Thompson construction.
    pub(crate) fn from_byte_nfa(nfa: &ByteNfa, max_states: usize) -> Result<ByteDfa> {
        Self::from_byte_nfa_with(nfa, &Budget::of(nfa.num_classes(), max_states), max_states)
    }

    fn from_byte_nfa_with(nfa: &ByteNfa, budget: &Budget, max_states: usize) -> Result<ByteDfa> {
        let full = Self::subset_construction(nfa, budget, Bound::UNBOUNDED)?.expect("unbounded");
        Self::minimal(full, nfa.every_state_reaches_a_match(), max_states)
    }

    /// [`ByteDfa::from_byte_nfa`], or `None` once the subset construction passes `bound`. For
    /// callers that can run the NFA instead.
    pub(crate) fn from_byte_nfa_within(nfa: &ByteNfa, max_states: usize, bound: Bound) -> Result<Option<ByteDfa>> {
        let budget = Budget::of(nfa.num_classes(), max_states);
        match Self::subset_construction(nfa, &budget, bound)? {
            Some(full) => Ok(Some(Self::minimal(full, nfa.every_state_reaches_a_match(), max_states)?)),
            None => Ok(None),
        }
    }

    /// Our subset construction (`crate::regex::determinize`), for NFAs without look-around;
    /// `None` past `bound`.
    fn subset_construction(nfa: &ByteNfa, budget: &Budget, bound: Bound) -> Result<Option<ByteDfa>> {
        let limits = SubsetLimits {
            max_states: budget.max_unminimised.min(bound.max_states),
            // Each key is held twice (by id and in the map), 4 bytes an id.
            max_key_ids: budget.set_bytes / 8,
            max_work: bound.max_work,
        };
        let exceeded = |what: String| Error::LimitExceeded {
            limit: "max_byte_dfa_states",
            value: budget.max_states.to_string(),
            what,
        };
        match determinize(nfa, &limits) {
            Ok(SubsetDfa { classes, num_classes, trans, accepting }) => {
                Ok(Some(ByteDfa { classes, num_classes, trans, accepting, start: 0, distance_to_accept: Vec::new() }))
            }
            Err(Exceeded::Work) => Ok(None),
            Err(Exceeded::States) if bound.max_states < budget.max_unminimised => Ok(None),
            Err(Exceeded::States) => {
                Err(exceeded(format!("the regex's byte DFA has over {} states before minimisation", limits.max_states)))
            }
            Err(Exceeded::KeyIds) => Err(exceeded(format!(
                "determinising the regex holds over {} NFA states in its DFA states, too large",
                limits.max_key_ids
            ))),
        }
    }

    /// regex-automata's determiniser, which handles look-around (`^`, `$`, `\b`); its DFA
    /// copied into our table.
    fn determinized_by_regex_automata(nfa: &thompson::NFA, budget: &Budget) -> Result<ByteDfa> {
        // Its work cannot be watched from here (see `crate::util::long_work`): taken as long.
        long_work::notify();
        let ra = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    // Minimised by `partition` after trimming: regex-automata's own minimisation
                    // took 100 s on one JSONSchemaBench regex (see `partition`).
                    .minimize(false)
                    .byte_classes(true)
                    .determinize_size_limit(Some(budget.set_bytes))
                    .dfa_size_limit(Some(budget.table_bytes)),
            )
            .build_from_nfa(nfa)
            .map_err(|e| {
                if e.is_size_limit_exceeded() {
                    Error::LimitExceeded {
                        limit: "max_byte_dfa_states",
                        value: budget.max_states.to_string(),
                        what: "the regex's DFA is too large to determinise".into(),
                    }
                } else {
                    Error::UnsupportedRegex(e.to_string())
                }
            })?;
        Self::copy(&ra, budget.max_unminimised, budget.max_states)
    }

    /// [`ByteDfa::from_hir`] through regex-automata's determiniser whatever the regex: the
    /// reference our subset construction is tested against.
    #[cfg(test)]
    pub(crate) fn from_hir_by_regex_automata(hir: &Hir, max_states: usize) -> Result<ByteDfa> {
        let nfa = thompson_nfa(hir, max_states)?;
        let budget = Budget::of(nfa.byte_classes().alphabet_len(), max_states);
        Self::minimal(Self::determinized_by_regex_automata(&nfa, &budget)?, false, max_states)
    }

    /// Whether `other` has the same table: classes, transitions, start and accepting states.
    #[cfg(test)]
    pub(crate) fn same_table(&self, other: &ByteDfa) -> bool {
        (self.classes, &self.trans, &self.accepting, self.start)
            == (other.classes, &other.trans, &other.accepting, other.start)
    }

    /// The minimal DFA of `full` with the fewest byte classes, or `LimitExceeded` when it has
    /// over `max_states` states. `every_state_live`: every state of `full` is known to reach
    /// acceptance (see [`ByteNfa::every_state_reaches_a_match`]), so that minimisation may
    /// start without trimming: a trim costs three passes over the table (a tenth of a glaive
    /// regex's DFA), and its numbering is forgotten anyway (the last trim numbers states
    /// breadth-first from the start, the same whatever the input's numbering).
    fn minimal(full: ByteDfa, every_state_live: bool, max_states: usize) -> Result<ByteDfa> {
        let full = if every_state_live { full } else { full.trim() };
        // Classes merged before minimising (its cost is linear in them) and again after (two
        // classes may differ only between equivalent states).
        let minimal = full.merged_classes().minimized().merged_classes();
        if minimal.num_states() > max_states {
            return Err(Error::LimitExceeded {
                limit: "max_byte_dfa_states",
                value: max_states.to_string(),
                what: format!("the regex's minimal byte DFA has {} states", minimal.num_states()),
            });
        }
        Ok(minimal)
    }

    /// Copies the reachable states (at most `max_copied`; past it `LimitExceeded` names the
    /// user's `max_states`).
    fn copy(ra: &dense::DFA<Vec<u32>>, max_copied: usize, max_states: usize) -> Result<ByteDfa> {
        use regex_automata::util::primitives::StateID;
        let ra_start = ra
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| Error::UnsupportedRegex(e.to_string()))?;
        let mut classes = [0u8; 256];
        let bc = ra.byte_classes();
        let mut representatives: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            let c = bc.get(b);
            classes[b as usize] = c;
            if c as usize == representatives.len() {
                representatives.push(b);
            }
        }
        let num_classes = representatives.len();
        // Breadth-first copy of the reachable part.
        let mut ids: rustc_hash::FxHashMap<StateID, u32> = Default::default();
        let mut order: Vec<StateID> = Vec::new();
        let mut trans: Vec<u32> = Vec::new();
        let live = |s: StateID| !ra.is_dead_state(s) && !ra.is_quit_state(s);
        if live(ra_start) {
            ids.insert(ra_start, 0);
            order.push(ra_start);
        }
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            for &b in &representatives {
                let t = ra.next_state(s, b);
                let id = if !live(t) {
                    DEAD
                } else if let Some(&id) = ids.get(&t) {
                    id
                } else {
                    if order.len() >= max_copied {
                        return Err(Error::LimitExceeded {
                            limit: "max_byte_dfa_states",
                            value: max_states.to_string(),
                            what: format!("the regex's byte DFA has over {max_copied} states before minimisation"),
                        });
                    }
                    let id = order.len() as u32;
                    ids.insert(t, id);
                    order.push(t);
                    id
                };
                trans.push(id);
            }
        }
        let accepting: Vec<bool> = order.iter().map(|&s| ra.is_match_state(ra.next_eoi_state(s))).collect();
        Ok(ByteDfa { classes, num_classes, trans, accepting, start: 0, distance_to_accept: Vec::new() })
    }

    /// The minimal DFA of the same language (`crate::regex::minimize`), trimmed and renumbered.
    /// Expects a trimmed DFA: every state live, so none is equivalent to a missing transition.
    fn minimized(self) -> ByteDfa {
        let n = self.accepting.len();
        let k = self.num_classes;
        if n == 0 {
            return self;
        }
        let block = crate::regex::minimize::coarsest_partition_partial(n, k, &self.trans, &self.accepting, DEAD);
        // Dense ids for the blocks, in the order of their first state, and one representative each.
        let mut id_of_block = vec![u32::MAX; n];
        let mut representatives: Vec<usize> = Vec::new();
        for (s, &b) in block.iter().enumerate() {
            let b = b as usize;
            if id_of_block[b] == u32::MAX {
                id_of_block[b] = representatives.len() as u32;
                representatives.push(s);
            }
        }
        let new_id: Vec<u32> = block.iter().map(|&b| id_of_block[b as usize]).collect();
        let map = |t: u32| if t == DEAD { DEAD } else { new_id[t as usize] };
        let mut trans: Vec<u32> = Vec::with_capacity(representatives.len() * k);
        for &r in &representatives {
            trans.extend(self.trans[r * k..(r + 1) * k].iter().map(|&t| map(t)));
        }
        let minimal = ByteDfa {
            classes: self.classes,
            num_classes: k,
            trans,
            accepting: representatives.iter().map(|&r| self.accepting[r]).collect(),
            start: map(self.start),
            distance_to_accept: Vec::new(),
        };
        minimal.trim()
    }

    /// Keeps only states that are reachable (all are, by construction) and co-reachable,
    /// renumbering them breadth-first from the start; computes distances to acceptance.
    fn trim(self) -> ByteDfa {
        let n = self.accepting.len();
        let k = self.num_classes;
        // Predecessors as one array: those of `t` are `reverse[first[t]..first[t + 1]]`, a
        // predecessor listed once per run of equal targets in its row (a row is a few runs).
        fn runs(row: &[u32]) -> impl Iterator<Item = u32> + '_ {
            let mut last = DEAD;
            row.iter().copied().filter(move |&t| std::mem::replace(&mut last, t) != t && t != DEAD)
        }
        let mut first = vec![0u32; n + 1];
        for row in self.trans.chunks_exact(k) {
            runs(row).for_each(|t| first[t as usize + 1] += 1);
        }
        for t in 0..n {
            first[t + 1] += first[t];
        }
        let mut fill = first.clone();
        let mut reverse = vec![0u32; first[n] as usize];
        for (s, row) in self.trans.chunks_exact(k).enumerate() {
            for t in runs(row) {
                reverse[fill[t as usize] as usize] = s as u32;
                fill[t as usize] += 1;
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue: std::collections::VecDeque<u32> = Default::default();
        for (s, d) in dist.iter_mut().enumerate() {
            if self.accepting[s] {
                *d = 0;
                queue.push_back(s as u32);
            }
        }
        while let Some(s) = queue.pop_front() {
            for &p in &reverse[first[s as usize] as usize..first[s as usize + 1] as usize] {
                if dist[p as usize] == u32::MAX {
                    dist[p as usize] = dist[s as usize] + 1;
                    queue.push_back(p);
                }
            }
        }
        if n == 0 || dist[self.start as usize] == u32::MAX {
            return ByteDfa {
                classes: self.classes,
                num_classes: k,
                trans: Vec::new(),
                accepting: Vec::new(),
                start: 0,
                distance_to_accept: Vec::new(),
            };
        }
        // Breadth-first over kept states, so the start stays 0; a state's row is written when
        // it is taken, by which time all its kept targets have their new ids.
        let mut new_id = vec![DEAD; n];
        let mut order = vec![self.start];
        new_id[self.start as usize] = 0;
        let mut trans = Vec::with_capacity(n * k);
        let mut i = 0;
        while i < order.len() {
            let s = order[i] as usize;
            i += 1;
            for &t in &self.trans[s * k..(s + 1) * k] {
                if t == DEAD || dist[t as usize] == u32::MAX {
                    trans.push(DEAD);
                    continue;
                }
                if new_id[t as usize] == DEAD {
                    new_id[t as usize] = order.len() as u32;
                    order.push(t);
                }
                trans.push(new_id[t as usize]);
            }
        }
        ByteDfa {
            classes: self.classes,
            num_classes: k,
            trans,
            accepting: order.iter().map(|&s| self.accepting[s as usize]).collect(),
            start: 0,
            distance_to_accept: order.iter().map(|&s| dist[s as usize]).collect(),
        }
    }

    /// The same DFA with byte classes that lead every state to the same place merged into one:
    /// a regex's classes come from its NFA's edges, and many of them (the UTF-8 ranges of `\d`
    /// or `[^"\\]`) never lead anywhere different. Renumbers classes in byte order.
    fn merged_classes(self) -> ByteDfa {
        let (n, k) = (self.accepting.len(), self.num_classes);
        // A hash of each class's column, in one pass over the rows (a column is strided), then
        // each class compared in full with the kept classes of its hash.
        let mut hashes = vec![0u64; k];
        for row in self.trans.chunks_exact(k) {
            for (h, &t) in hashes.iter_mut().zip(row) {
                *h = (h.rotate_left(5) ^ u64::from(t)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
            }
        }
        let table = &self.trans;
        let column = |c: usize| (0..n).map(move |s| table[s * k + c]);
        let mut by_hash: rustc_hash::FxHashMap<u64, Vec<u8>> = Default::default();
        let mut representatives: Vec<usize> = Vec::new();
        let new_class: Vec<u8> = (0..k)
            .map(|c| {
                let same = by_hash.entry(hashes[c]).or_default();
                match same.iter().find(|&&id| column(representatives[id as usize]).eq(column(c))) {
                    Some(&id) => id,
                    None => {
                        let id = representatives.len() as u8;
                        same.push(id);
                        representatives.push(c);
                        id
                    }
                }
            })
            .collect();
        if representatives.len() == k {
            return self;
        }
        let k2 = representatives.len();
        let mut trans = Vec::with_capacity(n * k2);
        for row in self.trans.chunks_exact(k) {
            trans.extend(representatives.iter().map(|&c| row[c]));
        }
        let mut classes = self.classes;
        for c in classes.iter_mut() {
            *c = new_class[*c as usize];
        }
        ByteDfa { classes, num_classes: k2, trans, ..self }
    }

    /// This DFA with its start also taking each byte `loops` selects back to itself, where the
    /// start has no transition on it. For a star of characters (its start its only accepting
    /// state) that takes no such byte, this is the star of those characters and the bytes as
    /// one-byte characters, and minimal where this DFA is: the new edges leave the start, the
    /// one accepting state, so no two other states come to agree, and no distance shrinks.
    ///
    /// Why: the star of the Unicode word characters past ASCII has ~300 states, ~8.5 M
    /// instructions to determinize and minimize; a derived slice's class adds ASCII characters
    /// to it (`crate::lazy::slice`), each class once, in the mask fill that meets it.
    pub(crate) fn with_start_loops(&self, loops: impl Fn(u8) -> bool) -> ByteDfa {
        let n = self.num_states();
        let mut trans = Vec::with_capacity(n * 256);
        for s in 0..n as u32 {
            trans.extend((0..=255u8).map(|b| match self.next(s, b) {
                DEAD if s == self.start && loops(b) => self.start,
                to => to,
            }));
        }
        let dfa = ByteDfa {
            classes: std::array::from_fn(|b| b as u8),
            num_classes: 256,
            trans,
            accepting: self.accepting.clone(),
            start: self.start,
            distance_to_accept: self.distance_to_accept.clone(),
        };
        dfa.merged_classes()
    }

    pub fn is_empty(&self) -> bool {
        self.accepting.is_empty()
    }

    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    #[inline]
    pub fn is_accepting(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// Fewest bytes from `state` to acceptance.
    pub fn distance_to_accept(&self, state: u32) -> u32 {
        self.distance_to_accept[state as usize]
    }

    /// The equivalence class of `byte`: bytes of one class have the same transitions everywhere.
    #[inline]
    pub fn byte_class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }

    /// The transitions of `state` by byte class (class `c` at index `c`, [`DEAD`] where none).
    #[inline]
    pub fn row(&self, state: u32) -> &[u32] {
        let at = state as usize * self.num_classes;
        &self.trans[at..at + self.num_classes]
    }

    /// The next state on `byte`, or [`DEAD`].
    #[inline]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * self.num_classes + self.classes[byte as usize] as usize]
    }

    /// Runs `bytes` from `state`; [`DEAD`] as soon as a byte has no transition.
    #[inline]
    pub fn walk(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            state = self.next(state, b);
            if state == DEAD {
                return DEAD;
            }
        }
        state
    }

    /// Whether the whole of `bytes` is in the language.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        if self.is_empty() {
            return false;
        }
        let s = self.walk(self.start, bytes);
        s != DEAD && self.is_accepting(s)
    }

    /// Serialises the DFA into `w` (part of a guide's serialisation).
    pub(crate) fn write(&self, w: &mut impl crate::util::serialize::Sink) {
        w.u32s(&self.classes.iter().map(|&c| c as u32).collect::<Vec<_>>());
        w.u32(self.num_classes as u32);
        w.u32s(&self.trans);
        w.u32s(&self.accepting.iter().map(|&a| a as u32).collect::<Vec<_>>());
        w.u32(self.start);
        w.u32s(&self.distance_to_accept);
    }

    /// Reads a DFA written by [`ByteDfa::write`], checking every index.
    pub(crate) fn read(r: &mut crate::util::serialize::Reader<'_>) -> Result<ByteDfa> {
        let bad = |what: &str| Error::InvalidArgument(format!("invalid serialized byte DFA: {what}"));
        let classes_v = r.u32s()?;
        let num_classes = r.u32()? as usize;
        if classes_v.len() != 256
            || num_classes == 0
            || num_classes > 256
            || classes_v.iter().any(|&c| c as usize >= num_classes)
        {
            return Err(bad("byte classes"));
        }
        let mut classes = [0u8; 256];
        for (i, &c) in classes_v.iter().enumerate() {
            classes[i] = c as u8;
        }
        let trans = r.u32s()?;
        let accepting: Vec<bool> = r.u32s()?.into_iter().map(|a| a != 0).collect();
        let start = r.u32()?;
        let distance_to_accept = r.u32s()?;
        let n = accepting.len();
        if n == 0 || trans.len() != n * num_classes || distance_to_accept.len() != n || start as usize >= n {
            return Err(bad("table sizes"));
        }
        if trans.iter().any(|&t| t != DEAD && t as usize >= n) {
            return Err(bad("transition out of range"));
        }
        Ok(ByteDfa { classes, num_classes, trans, accepting, start, distance_to_accept })
    }

    /// Number of byte equivalence classes (the width of the table).
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// `n` random members of the language: uniform choice among the bytes that keep the walk
    /// alive, stopping at an accepting state with probability 1/4; once `max_len` bytes are
    /// reached the walk takes a shortest way to acceptance.
    pub fn sample(&self, n: usize, seed: u64, max_len: usize) -> Vec<Vec<u8>> {
        let mut rng = SplitMix64::new(seed);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let mut s = self.start;
            let mut bytes = Vec::new();
            loop {
                if self.is_accepting(s) && (bytes.len() >= max_len || rng.one_in(4)) {
                    break;
                }
                let choices: Vec<u8> = (0..=255u8)
                    .filter(|&b| {
                        let t = self.next(s, b);
                        t != DEAD
                            && (bytes.len() < max_len
                                || self.distance_to_accept[t as usize] < self.distance_to_accept[s as usize])
                    })
                    .collect();
                if choices.is_empty() {
                    break; // accepting state with no way on
                }
                let b = choices[rng.below(choices.len())];
                bytes.push(b);
                s = self.next(s, b);
            }
            out.push(bytes);
        }
        out
    }
}

/// The first byte of a special-token marker: 0xFF never occurs in UTF-8, so no text walks it.
pub const TOKEN_MARKER: u8 = 0xFF;
/// The second byte of the marker of special token `j` is `TOKEN_MARKER_INDEX + j`.
pub const TOKEN_MARKER_INDEX: u8 = 0x80;
/// Special tokens one grammar may name (second marker bytes 0x80..=0xBF).
pub const MAX_GRAMMAR_TOKENS: usize = 64;
/// The first byte of a call to a grammar rule (never in UTF-8 text, like [`TOKEN_MARKER`]);
/// the next two bytes, each in 0x80..=0xBF, name the rule: `0x80 + id / 64`, `0x80 + id % 64`
/// (see `crate::grammar::lower::to_rule_regexes`).
pub const CALL_MARKER: u8 = 0xFE;
/// Rules a grammar's pushdown automaton may have, its start rule included.
pub const MAX_RULES_CALLED: usize = 64 * 64;

/// The marker bytes of a call to rule `id` (below [`MAX_RULES_CALLED`]).
pub fn call_marker(id: usize) -> [u8; 3] {
    debug_assert!(id < MAX_RULES_CALLED);
    [CALL_MARKER, 0x80 + (id >> 6) as u8, 0x80 + (id & 63) as u8]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(p: &str) -> ByteDfa {
        ByteDfa::from_regex(p, crate::limits::DEFAULT_MAX_BYTE_DFA_STATES).unwrap()
    }

    /// Whether `a` and `b` accept the same strings: a walk over the pairs of states one string
    /// reaches, which must agree on acceptance and on dying.
    fn same_language(a: &ByteDfa, b: &ByteDfa) -> bool {
        let mut seen = rustc_hash::FxHashSet::default();
        let mut todo = vec![(a.start(), b.start())];
        while let Some((x, y)) = todo.pop() {
            if !seen.insert((x, y)) {
                continue;
            }
            if a.is_accepting(x) != b.is_accepting(y) {
                return false;
            }
            for byte in 0..=255u8 {
                match (a.next(x, byte), b.next(y, byte)) {
                    (DEAD, DEAD) => {}
                    (DEAD, _) | (_, DEAD) => return false,
                    pair => todo.push(pair),
                }
            }
        }
        true
    }

    /// A star of characters with ASCII bytes looping at its start is the star of both, with as
    /// many states as the minimal DFA of that star, and the same distances: on the Unicode word
    /// characters past ASCII (~300 states) and on two accented letters.
    #[test]
    fn start_loops_add_ascii_characters_to_a_star() {
        let stars = [r"[\w&&[^\x00-\x7F]]*", "(\u{e9}|\u{fc})*"];
        let classes: [&[u8]; 3] = [b"abcdefghijklmnopqrstuvwxyz0123456789_", b"|.-", b""];
        for star in stars {
            let base = ByteDfa::from_regex(star, 1024).unwrap();
            let members = star.trim_end_matches('*');
            for ascii in classes {
                let looped = base.with_start_loops(|b| ascii.contains(&b));
                let listed: String = ascii.iter().map(|b| format!("\\x{b:02X}")).collect();
                let want = match listed.is_empty() {
                    true => ByteDfa::from_regex(star, 1024).unwrap(),
                    false => ByteDfa::from_regex(&format!("([{listed}]|{members})*"), 1024).unwrap(),
                };
                assert!(same_language(&looped, &want), "{star} with {:?}", String::from_utf8_lossy(ascii));
                assert_eq!(looped.num_states(), want.num_states(), "{star}: minimal");
                assert!(looped.num_classes() <= want.num_classes() + 1, "{star}: classes merged");
                for s in 0..looped.num_states() as u32 {
                    let t = want.walk(want.start(), &shortest_way(&looped, s));
                    assert_eq!(looped.distance_to_accept(s), want.distance_to_accept(t));
                }
            }
        }
    }

    /// The bytes of a shortest string from `dfa`'s start to `state`.
    fn shortest_way(dfa: &ByteDfa, state: u32) -> Vec<u8> {
        let mut way: Vec<Option<(u32, u8)>> = vec![None; dfa.num_states()];
        let mut queue = std::collections::VecDeque::from([dfa.start()]);
        let mut seen = vec![false; dfa.num_states()];
        seen[dfa.start() as usize] = true;
        while let Some(s) = queue.pop_front() {
            for b in 0..=255u8 {
                let t = dfa.next(s, b);
                if t != DEAD && !seen[t as usize] {
                    seen[t as usize] = true;
                    way[t as usize] = Some((s, b));
                    queue.push_back(t);
                }
            }
        }
        let mut bytes = Vec::new();
        let mut at = state;
        while let Some((s, b)) = way[at as usize] {
            bytes.push(b);
            at = s;
        }
        bytes.reverse();
        bytes
    }

    #[test]
    fn full_match_semantics() {
        let d = dfa("a|ab");
        assert!(d.matches(b"a") && d.matches(b"ab"));
        assert!(!d.matches(b"") && !d.matches(b"abc") && !d.matches(b"b"));
        let d = dfa("(true)|(false)");
        assert!(d.matches(b"true") && !d.matches(b"tru") && !d.matches(b"truefalse"));
    }

    #[test]
    fn utf8_and_classes() {
        let d = dfa("é+");
        assert!(d.matches("ééé".as_bytes()));
        assert!(!d.matches(&"é".as_bytes()[..1]));
        let d = dfa(".");
        assert!(d.matches("中".as_bytes()) && !d.matches(b"\n"));
    }

    /// An NFA with a state that reaches no match is trimmed before minimisation: otherwise the
    /// states after `x` and after `y` (both accept exactly `b`) would stay apart, the first
    /// having a transition, on `c`, to a state that leads nowhere.
    #[test]
    fn a_dead_end_in_the_nfa_does_not_keep_equivalent_states_apart() {
        let mut classes = [0u8; 256];
        for (i, b) in [b'b', b'c', b'x', b'y'].into_iter().enumerate() {
            classes[b as usize] = i as u8 + 1;
        }
        // 0 -x-> 1, 0 -y-> 2, 1 -b-> 3, 1 -c-> 4 (no way on), 2 -b-> 3 (accepting)
        let edges = [(0, b'x', 1), (0, b'y', 2), (1, b'b', 3), (1, b'c', 4), (2, b'b', 3)];
        let next = |q: u32, b: u8| edges.iter().find(|e| e.0 == q && e.1 == b).map(|e| e.2);
        let nfa = ByteNfa::from_rows(5, 0, classes, next, |q| q == 3);
        assert!(!nfa.every_state_reaches_a_match());
        let dfa = ByteDfa::from_byte_nfa(&nfa, 100).expect("a DFA");
        assert_eq!(dfa.num_states(), 3, "start, after x or y, accepting");
        assert!(dfa.matches(b"xb") && dfa.matches(b"yb") && !dfa.matches(b"xc"));
        let without = ByteNfa::from_rows(4, 0, classes, |q, b| next(q, b).filter(|&t| t != 4), |q| q == 3);
        assert!(without.every_state_reaches_a_match());
        assert!(ByteDfa::from_byte_nfa(&without, 100).expect("a DFA").same_table(&dfa));
    }

    #[test]
    fn trimmed_every_state_relevant() {
        // `a[bc]|ad` would give irrelevant states only without trimming; check all are relevant.
        let d = dfa("abc|abd|x*y");
        for s in 0..d.num_states() as u32 {
            assert_ne!(d.distance_to_accept(s), u32::MAX);
        }
    }

    #[test]
    fn minimal_state_counts() {
        // Counted by hand: equivalent states merge, distinct futures stay apart.
        for (pattern, states) in [
            ("(a|b)*", 1),
            ("a{0,3}", 4),
            ("(ab|ac)d", 4),
            ("x(a|b)*y|x(b|a)*y", 3),
            ("(a*|b*)*", 1),
            ("[0-9]{2}|[0-9]{2}", 3),
        ] {
            assert_eq!(dfa(pattern).num_states(), states, "{pattern}");
        }
    }

    #[test]
    fn errors_are_precise() {
        assert!(
            matches!(ByteDfa::from_regex("(?=a)b", 100), Err(Error::UnsupportedRegex(m)) if m.contains("look-around"))
        );
        assert!(
            matches!(ByteDfa::from_regex(r"(a)\1", 100), Err(Error::UnsupportedRegex(m)) if m.contains("backreference"))
        );
        assert!(matches!(ByteDfa::from_regex("(a", 100), Err(Error::InvalidRegex(_))));
        assert!(matches!(ByteDfa::from_regex(r"[^\s\S]", 100), Err(Error::EmptyLanguage(_))));
        assert!(matches!(ByteDfa::from_regex("(a|b)*a(a|b){16}", 1000), Err(Error::LimitExceeded { .. })));
        // Stopped while building the NFA, not seconds later while determinising.
        assert!(
            matches!(ByteDfa::from_regex("(?:[^a]{1000}){1000}", 2000), Err(Error::LimitExceeded { what, .. }) if what.contains("NFA"))
        );
    }

    #[test]
    fn samples_are_members() {
        let d = dfa(r"[a-z]{2,5}( [0-9]+)?");
        for s in d.sample(200, 7, 16) {
            assert!(d.matches(&s), "{s:?}");
        }
    }
}
