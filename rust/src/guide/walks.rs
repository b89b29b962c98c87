//! Whole-guide walks: random accepted sequences, shortest completions, forced runs, counting,
//! size statistics and equivalence of two guides. Each computes masks into scratch buffers, never
//! into the mask cache: a walk over many states would fill it with states no decoder asked for.
//! They keep their per-state tables in hash maps, so they work on lazy guides, whose states are
//! built as the walk reaches them.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::{Automaton, Guide, GuideStats};
use crate::error::{Error, Result};
use crate::util::bitset;
use crate::util::random::SplitMix64;

impl Guide {
    /// `Unsupported` for `what` when this guide's grammar nests without bound (its states never
    /// run out; see `crate::lazy::pushdown`).
    fn refuse_unbounded(&self, what: &str) -> Result<()> {
        match &self.automaton {
            Automaton::Lazy(lazy) if lazy.automaton.engine().space().dfa().nests_without_bound() => {
                Err(Error::Unsupported(format!(
                    "{what} walks every state of a guide, and a grammar that nests without bound has \
                     unboundedly many: compile it with max_recursion_depth to bound it"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The tokens from `from` to `to` in a search tree stored as `parent[state] = (previous, token)`.
fn path_back(parent: &FxHashMap<u32, (u32, u32)>, from: u32, to: u32) -> Vec<u32> {
    let mut path = Vec::new();
    let mut at = to;
    while at != from {
        let (previous, token) = parent[&at];
        path.push(token);
        at = previous;
    }
    path.reverse();
    path
}

impl Guide {
    /// A lower bound-ish hint of how far `state` is from acceptance (bytes for product guides,
    /// tokens for explicit ones); guides the fast way of finishing random walks.
    fn distance_hint(&self, state: u32) -> u32 {
        match &self.automaton {
            Automaton::Product(p) => p.dfa.distance_to_accept(p.states[state as usize].0),
            Automaton::TokenDfa { distance, .. } => distance[state as usize],
            Automaton::PreTokenized(p) => p.distance_hint(state),
            Automaton::Lazy(l) => l.automaton.distance_hint(state),
            Automaton::MaxMatch(m) => m.distance_hint(state),
        }
    }

    /// Finishes a walk at `state`: a greedy best-first search towards acceptance that expands,
    /// from each state, only the few allowed tokens that leave the fewest bytes to go (ties
    /// broken at random). Fast, and it cannot cycle: in a product guide the token that shortens
    /// the byte distance can be forbidden as not canonical, so plain greedy choices can loop
    /// (fuzz/regressions/regex_guide/cartesian-walk-cycles). A lazy guide builds only the states
    /// the search expands. Falls back to a breadth-first shortest path when the narrow search
    /// runs dry.
    fn finish_walk(&self, state: u32, rng: &mut SplitMix64) -> Result<Option<Vec<u32>>> {
        const WIDTH: usize = 8;
        let mut parent: FxHashMap<u32, (u32, u32)> = FxHashMap::default();
        parent.insert(state, (state, u32::MAX));
        let mut frontier =
            std::collections::BinaryHeap::from([std::cmp::Reverse((self.distance_hint(state), 0u64, state))]);
        while let Some(std::cmp::Reverse((_, _, s))) = frontier.pop() {
            if self.is_final(s) {
                return Ok(Some(path_back(&parent, state, s)));
            }
            let mut moves: Vec<(u32, u64, u32)> =
                self.distances_after(s)?.into_iter().map(|(t, d)| (d, rng.next_u64(), t)).collect();
            moves.sort_unstable();
            for &(d, tie, t) in moves.iter().take(WIDTH) {
                let to = self.next_state(s, t)?;
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(to) {
                    e.insert((s, t));
                    frontier.push(std::cmp::Reverse((d, tie, to)));
                }
            }
        }
        self.shortest_path_to_final(state)
    }

    /// `(token, distance hint after it)` for every allowed non-EOS token. A lazy guide answers
    /// without building the successors (a wide state has thousands), the others step.
    fn distances_after(&self, state: u32) -> Result<Vec<(u32, u32)>> {
        if let Automaton::Lazy(l) = &self.automaton {
            let eos = self.vocab.eos_token_ids();
            let mut scratch = vec![0u32; self.mask_words()];
            self.write_mask(state, &mut scratch)?;
            let tokens: Vec<u32> = bitset::iter_ones(&scratch).map(|t| t as u32).filter(|t| !eos.contains(t)).collect();
            let distances = l.automaton.distances_after(state, &tokens)?;
            return Ok(tokens.into_iter().zip(distances).collect());
        }
        Ok(self.transitions(state)?.into_iter().map(|(t, to)| (t, self.distance_hint(to))).collect())
    }

    /// A shortest token sequence from `state` to a final state (breadth-first over the guide's
    /// transitions), `None` if there is none.
    pub(crate) fn shortest_path_to_final(&self, state: u32) -> Result<Option<Vec<u32>>> {
        let mut parent: FxHashMap<u32, (u32, u32)> = FxHashMap::default();
        parent.insert(state, (state, u32::MAX));
        let mut queue = VecDeque::from([state]);
        while let Some(s) = queue.pop_front() {
            if self.is_final(s) {
                return Ok(Some(path_back(&parent, state, s)));
            }
            for (t, next) in self.transitions(s)? {
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(next) {
                    e.insert((s, t));
                    queue.push_back(next);
                }
            }
        }
        Ok(None)
    }

    /// Number of (state, non-EOS token) transitions.
    pub fn num_transitions(&self) -> Result<usize> {
        Ok(self.stats()?.num_transitions)
    }

    /// Size statistics, computed into a scratch buffer (nothing is cached). Of a lazy guide: of
    /// the states built so far.
    pub fn stats(&self) -> Result<GuideStats> {
        let eos = self.eos_token_ids();
        let mut scratch = vec![0u32; self.mask_words()];
        let (mut transitions, mut single) = (0usize, 0usize);
        let num_states = self.num_states();
        for s in 0..num_states as u32 {
            self.write_mask(s, &mut scratch)?;
            let all = bitset::count(&scratch);
            let is_final = self.is_final(s);
            transitions += all - if is_final { eos.len() } else { 0 };
            // One choice: a single non-EOS token and no EOS, or only EOS.
            let choices = all - if is_final { eos.len() - 1 } else { 0 };
            single += (choices == 1) as usize;
        }
        let n = num_states.max(1);
        Ok(GuideStats {
            num_states,
            num_transitions: transitions,
            mean_allowed_tokens: transitions as f64 / n as f64,
            single_choice_share: single as f64 / n as f64,
        })
    }

    /// Whether two guides over the same vocabulary accept the same token sequences: a
    /// breadth-first walk of the product of both from their initial states, comparing masks
    /// (EOS included, so finality too) at every reachable pair. Returns `None` when equal, else
    /// a shortest token sequence after which the masks differ. Costs the product's transitions.
    /// Refused (`Unsupported`) for a guide whose grammar nests without bound, as
    /// [`Guide::count_sequences`].
    pub fn first_difference(&self, other: &Guide) -> Result<Option<Vec<u32>>> {
        self.refuse_unbounded("first_difference")?;
        other.refuse_unbounded("first_difference")?;
        let eos = self.eos_token_ids();
        let mut seen: FxHashMap<(u32, u32), (u32, u32, u32)> = FxHashMap::default();
        let start = (self.initial, other.initial);
        seen.insert(start, (u32::MAX, u32::MAX, u32::MAX));
        let mut queue = VecDeque::from([start]);
        let path_to = |seen: &FxHashMap<(u32, u32), (u32, u32, u32)>, mut p: (u32, u32)| -> Vec<u32> {
            let mut out = Vec::new();
            while let Some(&(pa, pb, t)) = seen.get(&p) {
                if t == u32::MAX {
                    break;
                }
                out.push(t);
                p = (pa, pb);
            }
            out.reverse();
            out
        };
        // Scratch buffers, not the caches: a comparison visits every state once.
        let (mut mask_a, mut mask_b) = (vec![0u32; self.mask_words()], vec![0u32; other.mask_words()]);
        while let Some((a, b)) = queue.pop_front() {
            self.write_mask(a, &mut mask_a)?;
            other.write_mask(b, &mut mask_b)?;
            if mask_a != mask_b {
                return Ok(Some(path_to(&seen, (a, b))));
            }
            for t in bitset::iter_ones(&mask_a).map(|t| t as u32).filter(|t| !eos.contains(t)) {
                let (Some(next_a), Some(next_b)) = (self.step(a, t)?, other.step(b, t)?) else {
                    // In the mask but without a successor: an inconsistent guide.
                    let mut path = path_to(&seen, (a, b));
                    path.push(t);
                    return Ok(Some(path));
                };
                if let std::collections::hash_map::Entry::Vacant(e) = seen.entry((next_a, next_b)) {
                    e.insert((a, b, t));
                    queue.push_back((next_a, next_b));
                }
            }
        }
        Ok(None)
    }

    /// Non-EOS successors of a state (token, next state). The mask is computed into a scratch
    /// buffer, not cached: walks over many states (counting, finishing a random walk) would
    /// otherwise fill the mask cache with states no decoder asked for.
    pub fn transitions(&self, state: u32) -> Result<Vec<(u32, u32)>> {
        let eos = self.vocab.eos_token_ids();
        let mut scratch = vec![0u32; self.mask_words()];
        self.write_mask(state, &mut scratch)?;
        let mut out = Vec::new();
        for t in bitset::iter_ones(&scratch).map(|t| t as u32).filter(|t| !eos.contains(t)) {
            match self.step(state, t)? {
                Some(to) => out.push((t, to)),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "internal inconsistency: token {t} is in the mask of state {state} but has no successor"
                    )))
                }
            }
        }
        Ok(out)
    }

    /// Number of accepted token sequences (EOS not counted); `None` if infinite. Explores every
    /// reachable state (all of a lazy guide's get built).
    /// A guide whose grammar nests without bound has unboundedly many states: it is refused
    /// (`Unsupported`) rather than walked until a limit stops it.
    pub fn count_sequences(&self) -> Result<Option<u128>> {
        self.refuse_unbounded("count_sequences")?;
        // Iterative DFS with colours: absent new, 1 on stack, 2 done.
        let mut colour: FxHashMap<u32, u8> = FxHashMap::default();
        let mut count: FxHashMap<u32, u128> = FxHashMap::default();
        // (state, its transitions, the next one to explore)
        type Frame = (u32, Vec<(u32, u32)>, usize);
        let mut stack: Vec<Frame> = Vec::new();
        colour.insert(self.initial, 1);
        stack.push((self.initial, self.transitions(self.initial)?, 0));
        while let Some(top) = stack.last_mut() {
            if top.2 < top.1.len() {
                let next = top.1[top.2].1;
                top.2 += 1;
                match colour.get(&next) {
                    None => {
                        colour.insert(next, 1);
                        let tr = self.transitions(next)?;
                        stack.push((next, tr, 0));
                    }
                    Some(1) => return Ok(None), // a cycle between relevant states: infinitely many
                    Some(_) => {}
                }
            } else {
                let (s, tr, _) = stack.pop().expect("non-empty");
                let mut c: u128 = if self.is_final(s) { 1 } else { 0 };
                for (_, t) in tr {
                    c = c.saturating_add(count[&t]);
                }
                count.insert(s, c);
                colour.insert(s, 2);
            }
        }
        Ok(Some(count[&self.initial]))
    }

    /// A random accepted sequence: uniform among allowed tokens, stopping at a final state with
    /// probability 1/4; past `max_tokens`, it finishes towards acceptance (see `finish_walk`).
    pub fn random_walk(&self, seed: u64, max_tokens: usize) -> Result<Vec<u32>> {
        let mut rng = SplitMix64::new(seed);
        let eos = self.vocab.eos_token_ids();
        let mut s = self.initial;
        let mut out = Vec::new();
        let stuck = || Error::InvalidArgument("random walk did not reach a final state".into());
        loop {
            if self.is_final(s) && (out.len() >= max_tokens || rng.one_in(4)) {
                return Ok(out);
            }
            if out.len() >= max_tokens {
                // Not greedy on the byte distance to acceptance: in a product guide the token that
                // shortens it may be forbidden (not canonical) and a greedy walk can cycle for ever
                // (fuzz/regressions/regex_guide/cartesian-walk-cycles).
                out.extend(self.finish_walk(s, &mut rng)?.ok_or_else(stuck)?);
                return Ok(out);
            }
            let allowed: Vec<u32> = self.allowed_tokens(s)?.into_iter().filter(|t| !eos.contains(t)).collect();
            if allowed.is_empty() {
                // Final with nothing else allowed; a non-final dead end is an error, not a walk.
                return if self.is_final(s) { Ok(out) } else { Err(stuck()) };
            }
            let t = allowed[rng.below(allowed.len())];
            out.push(t);
            s = self.next_state(s, t)?;
        }
    }

    /// The longest run of forced tokens from `state` (see `Matcher::forced_tokens`).
    pub fn forced_tokens(&self, mut state: u32) -> Result<Vec<u32>> {
        let eos = self.vocab.eos_token_ids();
        let mut out = Vec::new();
        for _ in 0..10_000 {
            let mask = self.mask(state)?;
            let is_final = self.is_final(state);
            let mut others = bitset::iter_ones(&mask).map(|t| t as u32).filter(|t| !eos.contains(t));
            let (first, second) = (others.next(), others.next());
            if is_final {
                if first.is_none() {
                    out.push(eos[0]); // EOS is the only choice: the run ends with it
                }
                break;
            }
            let (Some(t), None) = (first, second) else { break };
            out.push(t);
            state = self.next_state(state, t)?;
        }
        Ok(out)
    }
}
