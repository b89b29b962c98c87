//! DirectMerge (appendix Algorithms 1–2): rewrite a DFA over base symbols, merge by merge, into
//! the DFA of the token sequences the tokenizer produces for its strings.
//!
//! # Concept
//! Let `L` be a language over base symbols (single-character tokens) given by a DFA, and
//! `merges = ((a₁, b₁), …, (aₙ, bₙ))` a merge table. The appendix defines
//! `tokenize = merge_{aₙ,bₙ} ∘ … ∘ merge_{a₁,b₁}`, where `merge_{a,b}` makes **one left-to-right
//! pass** over a token sequence and replaces each non-overlapping adjacent `a b` by `ab`
//! (`a a a` → `aa a`). [`direct_merge`] returns a trimmed DFA recognising exactly
//! `tokenize(L)`: each merge is applied to the automaton itself, touching only the states that
//! have an incoming `a` and an outgoing `b`.
//!
//! ## Which tokenizer this is exact for
//! The result is the tokenizer's own output only when BPE is applied as **sequential passes**,
//! merge after merge. Hugging Face `tokenizers` applies merges **by priority** (repeatedly the
//! lowest-ranked adjacent pair, leftmost on ties, see [`crate::tokenizer::bpe`]); the two coincide when the
//! table is *well-ordered* — every merge's parts are base symbols or created by lower-ranked
//! merges ([`crate::tokenizer::bpe::MergeTable::is_well_ordered`]). Mistral-7B's and Llama 2's tables are
//! not well-ordered: for them this module computes the sequential-pass language, which differs
//! from what the tokenizer emits, and callers must use another construction (the materialised
//! CartesianMerge product) when exactness is required.
//!
//! # Algorithms, function by function
//! * `Work::merge_distinct` — Algorithm 1 lines 1–6 (`a ≠ b`): the states with incoming `a` and
//!   an outgoing `b` are found through the §5.1 indexes (`by_token` and the reverse
//!   transitions), never by scanning the DFA.
//! * `Work::process_state` — Algorithm 1 lines 7–29, ProcessState, with its four situations:
//!   (1) `S` is the start state or has a non-`a` incoming transition, (2) `S` is accepting or has
//!   a non-`b` outgoing transition. Yes/yes: new `S'` takes the incoming `a` transitions and a
//!   copy of every non-`b` outgoing transition (lines 12–20; the `a` transitions are redirected
//!   *before* the copy, so an `a` self-loop on `S` becomes `S → S'` plus a self-loop on `S'`, as
//!   in Figure 5, and the new `ab` transition of `S` is copied too). Yes/no: drop the incoming
//!   `a` transitions (21–23). No/yes: drop the `b` transition (25–26). No/no: drop `S` (27–28).
//! * `Work::merge_same` — Algorithm 2 (`a = a`) in the §5.2 variant: the `a`-parities of the
//!   states `E` with an incoming and an outgoing `a` are computed *first* (a worklist over the
//!   `a` transitions into and inside `E`, nothing else), and a state gets an odd copy `S'` only
//!   when both parities occur; a state of parity `{1}` *is* its odd copy and one of parity
//!   `{0}` needs none (lines 3–17 without creating states that RemoveIrrelevantStates, line 20,
//!   would delete). ProcessState on an odd copy (line 19) is always in its "no" branch for
//!   question (1) — odd copies have only `a` incoming transitions and are never the start — so
//!   it adds `(P, aa, δ(S', a))` for every `a`-predecessor `P`, then drops either the `a`
//!   transition of `S'` or `S'` itself.
//! * `Work::resolve_conflicts` — not in the appendix, which assumes every merged token is new.
//!   Real tables often make one token by several merges (`▁the` from `▁t he` and from
//!   `▁th e`: 20,069 such tokens in Mistral-7B's table), so adding `(P, ab, S_b)` could meet an
//!   existing `ab` transition of `P` to another state. When every token id stands for one
//!   string this cannot happen: a text window that starts and ends on token boundaries after
//!   a pass is tokenized exactly as the window alone would be (a pass only crosses a boundary by
//!   merging across it), so from one state the same text cannot be both one token and two
//!   (the tests check it on random tables, and real tables give no conflict). Tables whose ids
//!   collide (a merge producing a base symbol's id) can, and are still handled exactly at the
//!   level of ids: during a merge such transitions are kept as extra, nondeterministic edges
//!   (they are on `ab`, which the merge's own steps never read, so Algorithm 1's argument
//!   holds edge by edge); at the end of the merge the affected states are determinised by a
//!   local subset construction, and states left without a way in are removed.
//!
//! # Invariants of the working automaton (between merges)
//! * Deterministic: at most one transition per (state, token).
//! * Every live state is relevant (reachable from the start and co-reachable), *except* after
//!   a conflict resolution, which can leave unreachable states behind (a state whose only
//!   ways in were the replaced transitions, when it is on a cycle). Those are removed by a
//!   global sweep when a limit is reached and by the final trim.
//! * The indexes agree with the transitions: `rev[q][t]` holds each `p` with `p --t--> q`
//!   exactly once, `by_token[t]` the states with an outgoing `t` transition; empty entries are
//!   removed, so "has an incoming transition on a token other than `a`" is a length check.
//!
//! # Costs
//! A merge costs `O(min(|by_token[a]|, |by_token[b]|))` to find its states — nothing when
//! either token labels no transition, which is most merges of a real table — plus the work
//! proportional to the transitions it adds, moves or removes (with hash-map operations), plus
//! `O(#sources)` to unlink a source from a crowded reverse entry. The whole rewrite is thus
//! proportional to the changes it makes, not to `states × merges`. Memory is three hash-map
//! entries per transition (forward, reverse, per-token index).
//!
//! Measured (test `real_tables_timing`, dev profile, one core): Mistral-7B's 58,980 merges
//! over the base DFAs of a JSON object with fixed keys (91 states → 45), a sentence of nine
//! words (253 → 30) or an IPv4 address (33, untouched) take 0.6–0.8 ms; a quoted UUID
//! (`[0-9a-f]{8}-…`, 39 states → 995 states / 50,812 transitions) 7 ms.
//!
//! The output is not minimised, and it can be much larger than the input: a loop over a large
//! class (`[a-z]+`, a JSON string) becomes, in effect, the product with the tokenizer DFA
//! written out with explicit transitions — an e-mail regex or `"[^"]*"` reaches a million
//! transitions within the first few thousand of Mistral-7B's merges (0.1–0.2 s), which the
//! limits turn into an error. Such regexes are CartesianMerge's job.
//!
//! # Limits
//! [`TokenDfaLimits`] caps the number of live states (`max_direct_states`) and of transitions
//! (`max_direct_transitions`), checked as states and transitions are created, so work stops
//! early with [`Error::LimitExceeded`]. After a conflict resolution, which may leave garbage,
//! a count may run up to twice a limit within one merge; at the end of that merge the
//! garbage is swept and the limit applies exactly.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::guide::token_dfa::TokenDfa;
use crate::limits::TokenDfaLimits;
use crate::tokenizer::vocab::Merge;

/// Rewrites `dfa` — a DFA over base-symbol token ids recognising `L` (each transition is one
/// base symbol: a single-character token) — merge by merge over the whole `merges` table (rank
/// order) into a DFA over tokens recognising `tokenize(L)`, where `tokenize` applies each merge
/// `(a, b)` in one left-to-right pass over the sequence, merges in rank order (the appendix's
/// definition; see the module docs for when this equals Hugging Face's priority BPE).
///
/// The input need not be trimmed; the output is trimmed (only relevant states, numbered
/// breadth-first from the start, which is state 0), possibly empty (no states).
///
/// # Errors
/// * [`Error::LimitExceeded`] when a limit of `limits` is reached.
/// * [`Error::InvalidArgument`] when `dfa` is malformed (a target or the start out of range,
///   transitions of a state not strictly sorted by token) or a merge's `merged` id equals its
///   `left` or `right` id.
pub fn direct_merge(dfa: &TokenDfa, merges: &[Merge], limits: &TokenDfaLimits) -> Result<TokenDfa> {
    run(dfa, merges, limits, false).map(|(dfa, _)| dfa)
}

/// Counters of one run, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RunStats {
    /// Merges that changed the automaton.
    merges_applied: usize,
    /// Transitions that met an existing transition on the merged token.
    conflicts: usize,
    /// Global garbage sweeps.
    sweeps: usize,
}

fn run(dfa: &TokenDfa, merges: &[Merge], limits: &TokenDfaLimits, check: bool) -> Result<(TokenDfa, RunStats)> {
    validate(dfa, merges)?;
    let dfa = dfa.trim();
    if dfa.num_states() == 0 {
        return Ok((dfa, RunStats::default()));
    }
    let mut work = Work::new(&dfa, *limits, merges.len())?;
    for (rank, m) in merges.iter().enumerate() {
        work.rank = Some(rank);
        let changed = if m.left == m.right {
            work.merge_same(m.left, m.merged)?
        } else {
            work.merge_distinct(m.left, m.right, m.merged)?
        };
        if changed {
            work.stats.merges_applied += 1;
            work.finish_merge()?;
        }
        if check {
            work.check_invariants();
        }
    }
    let stats = work.stats;
    Ok((work.into_token_dfa(), stats))
}

fn validate(dfa: &TokenDfa, merges: &[Merge]) -> Result<()> {
    let n = dfa.accepting.len();
    if dfa.transitions.len() != n {
        return Err(Error::InvalidArgument(format!(
            "DirectMerge input: {} accepting flags but {} transition lists",
            n,
            dfa.transitions.len()
        )));
    }
    if n > u32::MAX as usize - 1 {
        return Err(Error::InvalidArgument(format!("DirectMerge input: {n} states do not fit u32 ids")));
    }
    if n > 0 && dfa.start as usize >= n {
        return Err(Error::InvalidArgument(format!(
            "DirectMerge input: start state {} out of range (0..{n})",
            dfa.start
        )));
    }
    for (s, tr) in dfa.transitions.iter().enumerate() {
        if tr.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::InvalidArgument(format!(
                "DirectMerge input: transitions of state {s} are not strictly sorted by token (not a DFA)"
            )));
        }
        if let Some(&(t, q)) = tr.iter().find(|e| e.1 as usize >= n) {
            return Err(Error::InvalidArgument(format!(
                "DirectMerge input: transition ({s}, token {t}) goes to state {q}, out of range (0..{n})"
            )));
        }
    }
    if let Some((rank, m)) = merges.iter().enumerate().find(|(_, m)| m.merged == m.left || m.merged == m.right) {
        return Err(Error::InvalidArgument(format!(
            "merge rank {rank} ({}, {}) produces token {}, one of its own parts",
            m.left, m.right, m.merged
        )));
    }
    Ok(())
}

/// The sources of the transitions on one token into one state (usually one).
#[derive(Clone, Debug)]
enum Sources {
    One(u32),
    Many(Vec<u32>),
}

impl Sources {
    fn push(&mut self, p: u32) {
        match self {
            Sources::One(x) => *self = Sources::Many(vec![*x, p]),
            Sources::Many(v) => v.push(p),
        }
    }

    /// Removes `p`; true when no source is left.
    fn remove(&mut self, p: u32) -> bool {
        match self {
            Sources::One(x) => *x == p,
            Sources::Many(v) => {
                if let Some(i) = v.iter().position(|&y| y == p) {
                    v.swap_remove(i);
                }
                match v.len() {
                    0 => true,
                    1 => {
                        *self = Sources::One(v[0]);
                        false
                    }
                    _ => false,
                }
            }
        }
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Sources::One(x) => std::slice::from_ref(x),
            Sources::Many(v) => v,
        }
    }
}

/// No state.
const NONE: u32 = u32::MAX;
/// Parity bits of `merge_same`.
const EVEN: u8 = 1;
const ODD: u8 = 2;

/// The mutable automaton and its §5.1 indexes. State ids are never reused; dead states keep
/// empty maps.
struct Work {
    start: u32,
    alive: Vec<bool>,
    accepting: Vec<bool>,
    /// Forward transitions (one per token).
    out: Vec<FxHashMap<u32, u32>>,
    /// Reverse transitions: `rev[q][t]` = the states `p` with `p --t--> q` (main or extra).
    rev: Vec<FxHashMap<u32, Sources>>,
    /// Token → states with an outgoing (main) transition on it.
    by_token: FxHashMap<u32, FxHashSet<u32>>,
    /// Nondeterministic transitions met during the current merge (`state → (token, target)`),
    /// each beside a main transition on the same token; empty between merges.
    extra: FxHashMap<u32, Vec<(u32, u32)>>,
    num_live: usize,
    num_edges: usize,
    limits: TokenDfaLimits,
    /// Rank of the merge being applied, and table length, for error messages.
    rank: Option<usize>,
    num_merges: usize,
    /// Unreachable states may exist (after a conflict resolution).
    garbage: bool,
    stats: RunStats,
}

impl Work {
    fn new(dfa: &TokenDfa, limits: TokenDfaLimits, num_merges: usize) -> Result<Work> {
        let n = dfa.num_states();
        let mut work = Work {
            start: dfa.start,
            alive: vec![true; n],
            accepting: dfa.accepting.clone(),
            out: Vec::with_capacity(n),
            rev: vec![FxHashMap::default(); n],
            by_token: FxHashMap::default(),
            extra: FxHashMap::default(),
            num_live: n,
            num_edges: 0,
            limits,
            rank: None,
            num_merges,
            garbage: false,
            stats: RunStats::default(),
        };
        work.check_states("states of the input DFA")?;
        for (p, tr) in dfa.transitions.iter().enumerate() {
            let p = p as u32;
            work.out.push(tr.iter().copied().collect());
            for &(t, q) in tr {
                work.by_token.entry(t).or_default().insert(p);
                work.link(p, t, q);
            }
            work.num_edges += tr.len();
        }
        work.check_edges("transitions of the input DFA")?;
        Ok(work)
    }

    // ---- limits ------------------------------------------------------------------------

    fn context(&self, what: &str) -> String {
        match self.rank {
            Some(rank) => format!("{what} while DirectMerge applied merge rank {rank} of {}", self.num_merges),
            None => format!("{what}, before DirectMerge applied any merge"),
        }
    }

    /// The cap in force: doubled while garbage may be present (it is swept at the merge's end).
    fn cap(&self, limit: usize) -> usize {
        if self.garbage {
            limit.saturating_mul(2)
        } else {
            limit
        }
    }

    fn check_states(&self, what: &str) -> Result<()> {
        if self.num_live > self.cap(self.limits.max_states) || self.out.len() >= NONE as usize {
            return Err(Error::LimitExceeded {
                limit: "max_direct_states",
                value: self.limits.max_states.to_string(),
                what: self.context(what),
            });
        }
        Ok(())
    }

    fn check_edges(&self, what: &str) -> Result<()> {
        if self.num_edges > self.cap(self.limits.max_transitions) {
            return Err(Error::LimitExceeded {
                limit: "max_direct_transitions",
                value: self.limits.max_transitions.to_string(),
                what: self.context(what),
            });
        }
        Ok(())
    }

    // ---- primitive edits (keep the indexes in step) ------------------------------------

    fn new_state(&mut self, accepting: bool) -> Result<u32> {
        self.num_live += 1;
        self.check_states("states of the token DFA")?;
        let id = self.out.len() as u32;
        self.alive.push(true);
        self.accepting.push(accepting);
        self.out.push(FxHashMap::default());
        self.rev.push(FxHashMap::default());
        Ok(id)
    }

    fn link(&mut self, p: u32, t: u32, q: u32) {
        match self.rev[q as usize].get_mut(&t) {
            Some(s) => s.push(p),
            None => {
                self.rev[q as usize].insert(t, Sources::One(p));
            }
        }
    }

    fn unlink(&mut self, p: u32, t: u32, q: u32) {
        let rq = &mut self.rev[q as usize];
        if rq.get_mut(&t).is_some_and(|s| s.remove(p)) {
            rq.remove(&t);
        }
    }

    fn index_remove(&mut self, p: u32, t: u32) {
        if let Some(set) = self.by_token.get_mut(&t) {
            set.remove(&p);
            if set.is_empty() {
                self.by_token.remove(&t);
            }
        }
    }

    /// Adds `p --t--> q`; beside an existing `t` transition to another state it becomes an
    /// extra (nondeterministic) edge, resolved at the end of the merge.
    fn add_edge(&mut self, p: u32, t: u32, q: u32) -> Result<()> {
        match self.out[p as usize].get(&t) {
            Some(&cur) if cur == q => return Ok(()),
            Some(_) => {
                let ex = self.extra.entry(p).or_default();
                if ex.contains(&(t, q)) {
                    return Ok(());
                }
                ex.push((t, q));
                self.stats.conflicts += 1;
            }
            None => {
                self.out[p as usize].insert(t, q);
                self.by_token.entry(t).or_default().insert(p);
            }
        }
        self.link(p, t, q);
        self.num_edges += 1;
        self.check_edges("transitions of the token DFA")
    }

    /// Points the main `t` transition of `p` to `q` (it must exist and have no extras).
    fn set_edge(&mut self, p: u32, t: u32, q: u32) {
        let Some(old) = self.out[p as usize].insert(t, q) else {
            debug_assert!(false, "set_edge on a missing transition");
            self.out[p as usize].remove(&t);
            return;
        };
        debug_assert!(!self.extra.get(&p).is_some_and(|ex| ex.iter().any(|e| e.0 == t)));
        if old != q {
            self.unlink(p, t, old);
            self.link(p, t, q);
        }
    }

    /// Removes `p --t--> q`, main or extra, from the forward side only (`out`, `extra`,
    /// `by_token`); a main transition with extras on `t` is replaced by one of them. False
    /// when there is no such transition.
    fn detach(&mut self, p: u32, t: u32, q: u32) -> bool {
        if self.out[p as usize].get(&t) == Some(&q) {
            let promoted = self.extra.get_mut(&p).and_then(|ex| {
                let i = ex.iter().position(|e| e.0 == t)?;
                Some(ex.swap_remove(i).1)
            });
            if self.extra.get(&p).is_some_and(Vec::is_empty) {
                self.extra.remove(&p);
            }
            match promoted {
                Some(q2) => {
                    self.out[p as usize].insert(t, q2);
                }
                None => {
                    self.out[p as usize].remove(&t);
                    self.index_remove(p, t);
                }
            }
            true
        } else {
            let Some(ex) = self.extra.get_mut(&p) else { return false };
            let Some(i) = ex.iter().position(|&e| e == (t, q)) else { return false };
            ex.swap_remove(i);
            if ex.is_empty() {
                self.extra.remove(&p);
            }
            true
        }
    }

    /// Removes `p --t--> q`, main or extra.
    fn remove_edge(&mut self, p: u32, t: u32, q: u32) {
        if self.detach(p, t, q) {
            self.unlink(p, t, q);
            self.num_edges -= 1;
        }
    }

    /// Points every `t` transition into `s` to `to` instead, in `O(#sources)`.
    fn move_incoming(&mut self, s: u32, t: u32, to: u32) {
        if s == to {
            return;
        }
        let Some(src) = self.rev[s as usize].remove(&t) else { return };
        for &p in src.as_slice() {
            if self.out[p as usize].get(&t) == Some(&s) {
                self.out[p as usize].insert(t, to);
            } else if let Some(e) = self.extra.get_mut(&p).and_then(|ex| ex.iter_mut().find(|e| **e == (t, s))) {
                e.1 = to;
            }
        }
        match self.rev[to as usize].get_mut(&t) {
            Some(existing) => src.as_slice().iter().for_each(|&p| existing.push(p)),
            None => {
                self.rev[to as usize].insert(t, src);
            }
        }
    }

    /// Removes every `t` transition into `s`, in `O(#sources)`.
    fn drop_incoming(&mut self, s: u32, t: u32) {
        let Some(src) = self.rev[s as usize].remove(&t) else { return };
        for &p in src.as_slice() {
            if self.detach(p, t, s) {
                self.num_edges -= 1;
            }
        }
    }

    /// Removes `s` and every transition into or out of it.
    fn remove_state(&mut self, s: u32) {
        if !self.alive[s as usize] {
            return;
        }
        let mut outs: Vec<(u32, u32)> = self.out[s as usize].iter().map(|(&t, &q)| (t, q)).collect();
        if let Some(ex) = self.extra.get(&s) {
            outs.extend_from_slice(ex);
        }
        for (t, q) in outs {
            self.remove_edge(s, t, q);
        }
        // Self-loops are gone with the outgoing transitions.
        let tokens: Vec<u32> = self.rev[s as usize].keys().copied().collect();
        for t in tokens {
            self.drop_incoming(s, t);
        }
        self.alive[s as usize] = false;
        self.num_live -= 1;
        self.out[s as usize] = FxHashMap::default();
        self.rev[s as usize] = FxHashMap::default();
    }

    fn has_incoming(&self, s: u32, t: u32) -> bool {
        self.rev[s as usize].contains_key(&t)
    }

    /// `S = S0` or `S` has an incoming transition on a token other than `a` (question 1).
    fn entered_otherwise(&self, s: u32, a: u32) -> bool {
        let r = &self.rev[s as usize];
        s == self.start || r.len() > 1 || (r.len() == 1 && !r.contains_key(&a))
    }

    /// The states with an incoming `a` and an outgoing `b` transition (Algorithm 1 line 3,
    /// Algorithm 2 line 3), sorted; found from the smaller of the two indexes.
    fn candidates(&self, a: u32, b: u32) -> Vec<u32> {
        let (Some(with_a), Some(with_b)) = (self.by_token.get(&a), self.by_token.get(&b)) else {
            return Vec::new();
        };
        let mut c: Vec<u32> = if with_a.len() <= with_b.len() {
            with_a
                .iter()
                .filter_map(|&p| self.out[p as usize].get(&a).copied())
                .filter(|&s| self.out[s as usize].contains_key(&b))
                .collect()
        } else {
            with_b.iter().copied().filter(|&s| self.has_incoming(s, a)).collect()
        };
        c.sort_unstable();
        c.dedup();
        c
    }

    // ---- Algorithm 1 -------------------------------------------------------------------

    /// Algorithm 1 (`a ≠ b`, merged token `m`). Returns whether anything changed.
    fn merge_distinct(&mut self, a: u32, b: u32, m: u32) -> Result<bool> {
        let cands = self.candidates(a, b);
        for &s in &cands {
            // A processed state never becomes a candidate again and an unprocessed one stays
            // one (see the proof of Algorithm 1); checked anyway.
            if self.alive[s as usize] && self.has_incoming(s, a) && self.out[s as usize].contains_key(&b) {
                self.process_state(s, a, b, m)?;
            }
        }
        Ok(!cands.is_empty())
    }

    /// ProcessState(S, a, b), Algorithm 1 lines 7–29.
    fn process_state(&mut self, s: u32, a: u32, b: u32, m: u32) -> Result<()> {
        let Some(&s_b) = self.out[s as usize].get(&b) else { return Ok(()) };
        let preds: Vec<u32> = self.rev[s as usize].get(&a).map_or(Vec::new(), |src| src.as_slice().to_vec());
        // Lines 9–10.
        for &p in &preds {
            self.add_edge(p, m, s_b)?;
        }
        // Questions (1) and (2); an `a` self-loop counts as a non-`b` outgoing transition.
        let entered = self.entered_otherwise(s, a);
        let continues = self.accepting[s as usize] || self.out[s as usize].len() > 1;
        match (entered, continues) {
            (true, true) => {
                // Lines 13–20: S' takes the `a` transitions (redirected first, so an `a`
                // self-loop becomes S → S' and then S' → S'), and copies of the non-`b` ones.
                let s2 = self.new_state(self.accepting[s as usize])?;
                self.move_incoming(s, a, s2);
                let mut copies: Vec<(u32, u32)> =
                    self.out[s as usize].iter().filter(|e| *e.0 != b).map(|(&t, &q)| (t, q)).collect();
                if let Some(ex) = self.extra.get(&s) {
                    copies.extend(ex.iter().filter(|e| e.0 != b));
                }
                for (t, q) in copies {
                    self.add_edge(s2, t, q)?;
                }
            }
            (true, false) => self.drop_incoming(s, a),    // Lines 21–23.
            (false, true) => self.remove_edge(s, b, s_b), // Lines 25–26.
            (false, false) => self.remove_state(s),       // Line 28.
        }
        Ok(())
    }

    // ---- Algorithm 2 -------------------------------------------------------------------

    /// Algorithm 2 (`a = a`, merged token `m`) in the §5.2 variant. Returns whether anything
    /// changed.
    fn merge_same(&mut self, a: u32, m: u32) -> Result<bool> {
        // Line 3: E.
        let e = self.candidates(a, a);
        if e.is_empty() {
            return Ok(false);
        }
        let index: FxHashMap<u32, usize> = e.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        let a_target = |w: &Work, s: u32| w.out[s as usize].get(&a).copied().unwrap_or(NONE);

        // Parities (§5.2: before creating states). A state outside E with an outgoing `a` has
        // no incoming `a`: its words have parity 0, so its `a` leads to parity 1.
        let mut parity = vec![0u8; e.len()];
        let mut stack: Vec<(usize, u8)> = Vec::new();
        let mark = |parity: &mut [u8], stack: &mut Vec<(usize, u8)>, i: usize, bit: u8| {
            if parity[i] & bit == 0 {
                parity[i] |= bit;
                stack.push((i, bit));
            }
        };
        for (i, &s) in e.iter().enumerate() {
            if self.entered_otherwise(s, a) {
                mark(&mut parity, &mut stack, i, EVEN);
            }
            let outside =
                self.rev[s as usize].get(&a).is_some_and(|src| src.as_slice().iter().any(|p| !index.contains_key(p)));
            if outside {
                mark(&mut parity, &mut stack, i, ODD);
            }
        }
        while let Some((i, bit)) = stack.pop() {
            if let Some(&j) = index.get(&a_target(self, e[i])) {
                mark(&mut parity, &mut stack, j, EVEN + ODD - bit);
            }
        }

        // Snapshot of the original `a` transitions at E.
        let targets: Vec<u32> = e.iter().map(|&s| a_target(self, s)).collect();
        let outside_preds: Vec<Vec<u32>> = e
            .iter()
            .map(|&s| {
                self.rev[s as usize].get(&a).map_or(Vec::new(), |src| {
                    src.as_slice().iter().copied().filter(|p| !index.contains_key(p)).collect()
                })
            })
            .collect();

        // A state of E with no parity is unreachable (only `a` transitions from such states
        // lead to it): drop it.
        for (i, &s) in e.iter().enumerate() {
            if parity[i] == 0 {
                self.remove_state(s);
            }
        }

        // Lines 4–7: even and odd versions; a new state only where both parities occur.
        let mut even = vec![NONE; e.len()];
        let mut odd = vec![NONE; e.len()];
        for (i, &s) in e.iter().enumerate() {
            match parity[i] {
                EVEN => even[i] = s,
                ODD => odd[i] = s,
                p if p == EVEN | ODD => {
                    even[i] = s;
                    odd[i] = self.new_state(self.accepting[s as usize])?;
                }
                _ => {}
            }
        }
        // Lines 9, 13–14: odd copies repeat the non-`a` transitions.
        for (i, &s) in e.iter().enumerate() {
            if odd[i] != NONE && odd[i] != s {
                let copies: Vec<(u32, u32)> =
                    self.out[s as usize].iter().filter(|e| *e.0 != a).map(|(&t, &q)| (t, q)).collect();
                for (t, q) in copies {
                    self.add_edge(odd[i], t, q)?;
                }
            }
        }
        // Lines 10–14: `a` transitions inside E alternate parity; out of E they keep their
        // target.
        for (i, &s) in e.iter().enumerate() {
            let t = targets[i];
            if t == NONE || parity[i] == 0 {
                continue;
            }
            match index.get(&t) {
                Some(&j) => {
                    if even[i] != NONE {
                        debug_assert!(odd[j] != NONE);
                        if odd[j] != NONE {
                            self.set_edge(s, a, odd[j]);
                        }
                    }
                    if odd[i] != NONE && even[j] != NONE {
                        if odd[i] == s {
                            self.set_edge(s, a, even[j]);
                        } else {
                            self.add_edge(odd[i], a, even[j])?;
                        }
                    }
                }
                None => {
                    if odd[i] != NONE && odd[i] != s {
                        self.add_edge(odd[i], a, t)?;
                    }
                }
            }
        }
        // Lines 15–17: `a` transitions from outside E reach the odd version.
        for (i, &s) in e.iter().enumerate() {
            if odd[i] != NONE && odd[i] != s {
                for &p in &outside_preds[i] {
                    self.set_edge(p, a, odd[i]);
                }
            }
        }
        // Lines 18–19: ProcessState on the odd versions, always with "no" to question (1).
        for &o in &odd {
            if o == NONE {
                continue;
            }
            debug_assert!(!self.entered_otherwise(o, a));
            let Some(&s_b) = self.out[o as usize].get(&a) else { continue };
            let preds: Vec<u32> = self.rev[o as usize].get(&a).map_or(Vec::new(), |src| src.as_slice().to_vec());
            for &p in &preds {
                self.add_edge(p, m, s_b)?;
            }
            if self.accepting[o as usize] || self.out[o as usize].len() > 1 {
                self.remove_edge(o, a, s_b);
            } else {
                self.remove_state(o);
            }
        }
        Ok(true)
    }

    // ---- end of a merge ----------------------------------------------------------------

    /// Determinises the extra edges of the merge, then enforces the limits exactly.
    fn finish_merge(&mut self) -> Result<()> {
        self.resolve_conflicts()?;
        if self.num_live > self.limits.max_states || self.num_edges > self.limits.max_transitions {
            if self.garbage {
                self.sweep();
            }
            self.check_states("states of the token DFA")?;
            self.check_edges("transitions of the token DFA")?;
        }
        Ok(())
    }

    /// Replaces every nondeterministic (state, token) by one transition to a union state:
    /// a subset construction over the current automaton, started from the conflicting target
    /// sets. Union states only ever combine pre-existing states.
    fn resolve_conflicts(&mut self) -> Result<()> {
        if self.extra.is_empty() {
            return Ok(());
        }
        self.garbage = true;
        let mut conflicted: Vec<u32> = self.extra.keys().copied().collect();
        conflicted.sort_unstable();
        let mut memo: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        let mut todo: Vec<(u32, Vec<u32>)> = Vec::new();
        // 1. The union state of each conflicting (state, token).
        let mut rewires: Vec<(u32, u32, u32)> = Vec::new();
        for &p in &conflicted {
            let mut tokens: Vec<u32> = self.extra[&p].iter().map(|e| e.0).collect();
            tokens.sort_unstable();
            tokens.dedup();
            for t in tokens {
                let set = self.targets(p, t);
                let u = self.union_state(set, &mut memo, &mut todo)?;
                rewires.push((p, t, u));
            }
        }
        // 2. Transitions of the union states (reading the unmodified automaton).
        while let Some((u, set)) = todo.pop() {
            let mut grouped: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
            for &c in &set {
                for (&t, &q) in &self.out[c as usize] {
                    grouped.entry(t).or_default().push(q);
                }
                if let Some(ex) = self.extra.get(&c) {
                    for &(t, q) in ex {
                        grouped.entry(t).or_default().push(q);
                    }
                }
            }
            let mut grouped: Vec<(u32, Vec<u32>)> = grouped.into_iter().collect();
            grouped.sort_unstable_by_key(|g| g.0);
            for (t, mut qs) in grouped {
                qs.sort_unstable();
                qs.dedup();
                let q = if qs.len() == 1 { qs[0] } else { self.union_state(qs, &mut memo, &mut todo)? };
                self.add_edge(u, t, q)?;
            }
        }
        // 3. Point the conflicting tokens to their union states.
        let mut orphans: Vec<u32> = Vec::new();
        for (p, t, u) in rewires {
            for q in self.targets(p, t) {
                orphans.push(q);
                self.remove_edge(p, t, q);
            }
            self.add_edge(p, t, u)?;
        }
        debug_assert!(self.extra.is_empty());
        // 4. States left without a way in (other than from themselves) go, transitively.
        while let Some(x) = orphans.pop() {
            if !self.alive[x as usize] || x == self.start {
                continue;
            }
            if self.rev[x as usize].values().any(|src| src.as_slice().iter().any(|&p| p != x)) {
                continue;
            }
            orphans.extend(self.out[x as usize].values().copied().filter(|&q| q != x));
            self.remove_state(x);
        }
        Ok(())
    }

    /// The sorted targets of `p` on `t`, main and extra.
    fn targets(&self, p: u32, t: u32) -> Vec<u32> {
        let mut v: Vec<u32> = self.out[p as usize].get(&t).copied().into_iter().collect();
        if let Some(ex) = self.extra.get(&p) {
            v.extend(ex.iter().filter(|e| e.0 == t).map(|e| e.1));
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    fn union_state(
        &mut self,
        set: Vec<u32>,
        memo: &mut FxHashMap<Vec<u32>, u32>,
        todo: &mut Vec<(u32, Vec<u32>)>,
    ) -> Result<u32> {
        if let Some(&u) = memo.get(&set) {
            return Ok(u);
        }
        let accepting = set.iter().any(|&c| self.accepting[c as usize]);
        let u = self.new_state(accepting)?;
        memo.insert(set.clone(), u);
        todo.push((u, set));
        Ok(u)
    }

    /// Removes every live state that is not relevant (global; only after conflicts).
    fn sweep(&mut self) {
        let n = self.out.len();
        let mut reach = vec![false; n];
        let mut stack = vec![self.start];
        reach[self.start as usize] = true;
        while let Some(s) = stack.pop() {
            for &q in self.out[s as usize].values() {
                if !reach[q as usize] {
                    reach[q as usize] = true;
                    stack.push(q);
                }
            }
        }
        let mut co = vec![false; n];
        let mut stack: Vec<u32> =
            (0..n as u32).filter(|&s| self.alive[s as usize] && self.accepting[s as usize]).collect();
        for &s in &stack {
            co[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for src in self.rev[s as usize].values() {
                for &p in src.as_slice() {
                    if !co[p as usize] {
                        co[p as usize] = true;
                        stack.push(p);
                    }
                }
            }
        }
        for s in 0..n as u32 {
            if self.alive[s as usize] && !(reach[s as usize] && co[s as usize]) {
                self.remove_state(s);
            }
        }
        self.garbage = false;
        self.stats.sweeps += 1;
    }

    /// The explicit, trimmed DFA.
    fn into_token_dfa(self) -> TokenDfa {
        let mut next = 0u32;
        let id: Vec<u32> = self
            .alive
            .iter()
            .map(|&alive| {
                next += alive as u32;
                if alive {
                    next - 1
                } else {
                    NONE
                }
            })
            .collect();
        if !self.alive[self.start as usize] {
            return TokenDfa::default();
        }
        let mut accepting = Vec::with_capacity(next as usize);
        let mut transitions = Vec::with_capacity(next as usize);
        for (s, out) in self.out.iter().enumerate() {
            if !self.alive[s] {
                continue;
            }
            accepting.push(self.accepting[s]);
            let mut tr: Vec<(u32, u32)> = out.iter().map(|(&t, &q)| (t, id[q as usize])).collect();
            tr.sort_unstable();
            transitions.push(tr);
        }
        TokenDfa { start: id[self.start as usize], accepting, transitions }.trim()
    }

    /// Checks every index against the transitions (tests only: `O(size)`).
    fn check_invariants(&self) {
        assert!(self.extra.is_empty(), "extra edges left after a merge");
        let mut edges = 0;
        let mut live = 0;
        for (p, out) in self.out.iter().enumerate() {
            if !self.alive[p] {
                assert!(out.is_empty() && self.rev[p].is_empty(), "dead state {p} keeps transitions");
                continue;
            }
            live += 1;
            for (&t, &q) in out {
                assert!(self.alive[q as usize], "transition ({p}, {t}) to dead state {q}");
                assert!(self.by_token.get(&t).is_some_and(|s| s.contains(&(p as u32))), "by_token misses ({p}, {t})");
                let src = self.rev[q as usize].get(&t).map_or(&[][..], |s| s.as_slice());
                assert_eq!(src.iter().filter(|&&x| x == p as u32).count(), 1, "rev misses ({p}, {t}, {q})");
                edges += 1;
            }
        }
        for (q, rev) in self.rev.iter().enumerate() {
            for (&t, src) in rev {
                assert!(!src.as_slice().is_empty());
                for &p in src.as_slice() {
                    assert_eq!(self.out[p as usize].get(&t), Some(&(q as u32)), "stale rev ({p}, {t}, {q})");
                }
            }
        }
        for (&t, set) in &self.by_token {
            assert!(!set.is_empty());
            for &p in set {
                assert!(self.out[p as usize].contains_key(&t), "stale by_token ({p}, {t})");
            }
        }
        assert_eq!(edges, self.num_edges, "transition count");
        assert_eq!(live, self.num_live, "state count");
        assert!(self.alive[self.start as usize], "start removed");
    }
}

#[cfg(test)]
mod tests;
