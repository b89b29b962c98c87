//! Whole-guide walks: random accepted sequences, shortest completions, forced runs, counting,
//! size statistics and equivalence of two guides. Each computes masks into scratch buffers, never
//! into the mask cache: a walk over many states would fill it with states no decoder asked for.

use rustc_hash::FxHashMap;

use super::{Automaton, Guide, GuideStats};
use crate::error::{Error, Result};
use crate::util::bitset;
use crate::util::random::SplitMix64;

impl Guide {
    /// A lower bound-ish hint of how far `state` is from acceptance (bytes for product guides,
    /// tokens for explicit ones); guides the fast way of finishing random walks.
    fn distance_hint(&self, state: u32) -> u32 {
        match &self.automaton {
            Automaton::Product(p) => p.dfa.distance_to_accept(p.states[state as usize].0),
            Automaton::TokenDfa { distance, .. } => distance[state as usize],
            Automaton::PreTokenized(p) => p.distance_hint(state),
        }
    }

    /// Finishes a walk at `state`: greedily towards acceptance (the allowed token that leaves the
    /// fewest bytes to go: fast, and usually enough), falling back to a shortest token path
    /// when the greedy choice would revisit a state — in a product guide the token that
    /// shortens the byte distance can be forbidden as not canonical, and greedy choices can
    /// then cycle (fuzz/regressions/regex_guide/cartesian-walk-cycles).
    fn finish_walk(&self, mut state: u32, rng: &mut SplitMix64) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        let mut seen = rustc_hash::FxHashSet::default();
        while !self.is_final(state) {
            if !seen.insert(state) {
                out.extend(self.shortest_path_to_final(state)?);
                return Some(out);
            }
            let moves = self.transitions(state);
            let best = moves.iter().map(|&(_, to)| self.distance_hint(to)).min()?;
            let best: Vec<(u32, u32)> = moves.into_iter().filter(|&(_, to)| self.distance_hint(to) == best).collect();
            let (t, to) = best[rng.below(best.len())];
            out.push(t);
            state = to;
        }
        Some(out)
    }

    /// A shortest token sequence from `state` to a final state (breadth-first over the guide's
    /// transitions), `None` if there is none.
    pub(crate) fn shortest_path_to_final(&self, state: u32) -> Option<Vec<u32>> {
        let mut parent: Vec<(u32, u32)> = vec![(u32::MAX, u32::MAX); self.num_states()];
        parent[state as usize] = (state, u32::MAX);
        let mut queue = std::collections::VecDeque::from([state]);
        while let Some(s) = queue.pop_front() {
            if self.is_final(s) {
                let mut path = Vec::new();
                let mut at = s;
                while at != state {
                    let (from, token) = parent[at as usize];
                    path.push(token);
                    at = from;
                }
                path.reverse();
                return Some(path);
            }
            for (t, next) in self.transitions(s) {
                if parent[next as usize].0 == u32::MAX {
                    parent[next as usize] = (s, t);
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// Number of (state, non-EOS token) transitions.
    pub fn num_transitions(&self) -> usize {
        self.stats().num_transitions
    }

    /// Size statistics, computed into a scratch buffer (nothing is cached).
    pub fn stats(&self) -> GuideStats {
        let eos = self.eos_token_ids();
        let mut scratch = vec![0u32; self.mask_words()];
        let (mut transitions, mut single) = (0usize, 0usize);
        for s in 0..self.num_states() as u32 {
            self.write_mask(s, &mut scratch);
            let all = bitset::count(&scratch);
            let is_final = self.is_final(s);
            transitions += all - if is_final { eos.len() } else { 0 };
            // One choice: a single non-EOS token and no EOS, or only EOS.
            let choices = all - if is_final { eos.len() - 1 } else { 0 };
            single += (choices == 1) as usize;
        }
        let n = self.num_states().max(1);
        GuideStats {
            num_states: self.num_states(),
            num_transitions: transitions,
            mean_allowed_tokens: transitions as f64 / n as f64,
            single_choice_share: single as f64 / n as f64,
        }
    }

    /// Whether two guides over the same vocabulary accept the same token sequences: a
    /// breadth-first walk of the product of both from their initial states, comparing masks
    /// (EOS included, so finality too) at every reachable pair. Returns `None` when equal, else
    /// a shortest token sequence after which the masks differ. Costs the product's transitions.
    pub fn first_difference(&self, other: &Guide) -> Option<Vec<u32>> {
        let eos = self.eos_token_ids();
        let mut seen: FxHashMap<(u32, u32), (u32, u32, u32)> = FxHashMap::default();
        let start = (self.initial, other.initial);
        seen.insert(start, (u32::MAX, u32::MAX, u32::MAX));
        let mut queue = std::collections::VecDeque::from([start]);
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
            self.write_mask(a, &mut mask_a);
            other.write_mask(b, &mut mask_b);
            if mask_a != mask_b {
                return Some(path_to(&seen, (a, b)));
            }
            for t in bitset::iter_ones(&mask_a).map(|t| t as u32).filter(|t| !eos.contains(t)) {
                let next = (self.next_state(a, t).ok()?, other.next_state(b, t).ok()?);
                if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(next) {
                    e.insert((a, b, t));
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// Non-EOS successors of a state (token, next state). The mask is computed into a scratch
    /// buffer, not cached: walks over many states (counting, finishing a random walk) would
    /// otherwise fill the mask cache with states no decoder asked for.
    pub fn transitions(&self, state: u32) -> Vec<(u32, u32)> {
        let eos = self.vocab.eos_token_ids();
        let mut scratch = vec![0u32; self.mask_words()];
        self.write_mask(state, &mut scratch);
        bitset::iter_ones(&scratch)
            .map(|t| t as u32)
            .filter(|t| !eos.contains(t))
            .map(|t| (t, self.step(state, t).expect("allowed token has a target")))
            .collect()
    }

    /// Number of accepted token sequences (EOS not counted); `None` if infinite.
    pub fn count_sequences(&self) -> Option<u128> {
        // Iterative DFS with colours: 0 new, 1 on stack, 2 done.
        let n = self.num_states();
        let mut colour = vec![0u8; n];
        let mut count = vec![0u128; n];
        // (state, its transitions, the next one to explore)
        type Frame = (u32, Vec<(u32, u32)>, usize);
        let mut stack: Vec<Frame> = Vec::new();
        colour[self.initial as usize] = 1;
        stack.push((self.initial, self.transitions(self.initial), 0));
        while let Some(top) = stack.last_mut() {
            if top.2 < top.1.len() {
                let next = top.1[top.2].1;
                top.2 += 1;
                match colour[next as usize] {
                    0 => {
                        colour[next as usize] = 1;
                        let tr = self.transitions(next);
                        stack.push((next, tr, 0));
                    }
                    1 => return None, // a cycle between relevant states: infinitely many
                    _ => {}
                }
            } else {
                let (s, tr, _) = stack.pop().expect("non-empty");
                let mut c: u128 = if self.is_final(s) { 1 } else { 0 };
                for (_, t) in tr {
                    c = c.saturating_add(count[t as usize]);
                }
                count[s as usize] = c;
                colour[s as usize] = 2;
            }
        }
        Some(count[self.initial as usize])
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
                // Not greedy on the byte distance to acceptance, as it was: in a product guide the
                // token that shortens it may be forbidden (not canonical) and the greedy walk can
                // cycle for ever (fuzz/regressions/regex_guide/cartesian-walk-cycles).
                out.extend(self.finish_walk(s, &mut rng).ok_or_else(stuck)?);
                return Ok(out);
            }
            let allowed: Vec<u32> = self.allowed_tokens(s).into_iter().filter(|t| !eos.contains(t)).collect();
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
    pub fn forced_tokens(&self, mut state: u32) -> Vec<u32> {
        let eos = self.vocab.eos_token_ids();
        let mut out = Vec::new();
        for _ in 0..10_000 {
            let mask = self.mask(state);
            let is_final = self.is_final(state);
            let others = bitset::iter_ones(&mask).filter(|&t| !eos.contains(&(t as u32))).count();
            if is_final {
                if others == 0 {
                    out.push(eos[0]); // EOS is the only choice: the run ends with it
                }
                break;
            }
            if others != 1 {
                break;
            }
            let t = bitset::iter_ones(&mask).next().expect("one") as u32;
            out.push(t);
            state = self.next_state(state, t).expect("allowed");
        }
        out
    }
}
