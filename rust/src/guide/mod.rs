//! A compiled guide: an immutable automaton over token ids with a mask per state.
//!
//! A guide state is a pair `(q1, q2)`: `q1` a state of the regex's byte DFA, `q2` a state of
//! the tokenizer DFA (always 0 for the agnostic method). The allowed tokens of a state are
//! never stored per state up front — there can be thousands of states over a 128k vocabulary —
//! but as the intersection of two precomputed sets (the appendix's §5.4):
//! * `base_masks[q1]`: tokens whose byte walk from `q1` ends in a state `q1'` such that
//!   `(q1', class(t))` is a relevant product state (the transition function δ1 restricted to
//!   relevant targets);
//! * the tokenizer DFA's forbidden set of `q2`, which is subtracted.
//!
//! Byte-fallback tokens, whose target depends on `q2`, are kept as explicit edges, and EOS ids
//! are added on final states. A state's full mask is computed on first request and cached
//! (within the guide's `max_mask_cache_bytes`, see `mask_cache`), so `mask()` can usually hand
//! out a zero-copy view; `write_mask` computes straight into a caller's buffer.
//!
//! # Invariants
//! * Every state is reachable from `initial` and can reach a final state, so a decoder that
//!   only picks allowed tokens can always finish.
//! * EOS is allowed exactly in final states (`q1` accepting and `q2` not inside a
//!   byte-fallback character).

pub mod io;
pub mod mask_cache;
pub mod matcher;
pub mod pre_tokenized;
pub mod token_dfa;
pub mod token_set;

use std::borrow::Cow;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::guide::mask_cache::MaskCache;
use crate::guide::token_dfa::TokenDfa;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::bitset;
use crate::util::random::SplitMix64;

/// The construction behind a guide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every token sequence that decodes to a match (Outlines' token index).
    Agnostic,
    /// Canonical token sequences only, by CartesianMerge.
    Cartesian,
    /// Canonical token sequences only, as an explicit token DFA (DirectMerge, or the
    /// materialised CartesianMerge product when DirectMerge would not be exact).
    Direct,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Agnostic => "agnostic",
            Method::Cartesian => "cartesian",
            Method::Direct => "direct",
        }
    }
    /// Parses a method name; `"auto"` gives `None` (direct when small enough, else cartesian).
    pub fn parse(s: &str) -> Result<Option<Method>> {
        match s {
            "agnostic" => Ok(Some(Method::Agnostic)),
            "cartesian" => Ok(Some(Method::Cartesian)),
            "direct" => Ok(Some(Method::Direct)),
            "auto" => Ok(None),
            other => Err(Error::InvalidArgument(format!(
                "unknown method {other:?}: expected \"cartesian\", \"direct\", \"auto\" or \"agnostic\""
            ))),
        }
    }
}

/// Byte-fallback edges `(token, target state)` of a state.
pub(crate) type ByteEdges = Arc<Vec<(u32, u32)>>;

/// The CartesianMerge (or agnostic) representation: states are `(byte state, tokenizer state)`.
pub(crate) struct ProductAutomaton {
    pub(crate) tokenizer_dfa: Option<Arc<TokenizerDfa>>,
    pub(crate) dfa: ByteDfa,
    pub(crate) states: Vec<(u32, u32)>,
    pub(crate) index: FxHashMap<(u32, u32), u32>,
    /// Per byte-DFA state; empty for byte states that no guide state uses.
    pub(crate) base_masks: Vec<Box<[u32]>>,
    pub(crate) byte_edges: Vec<Option<ByteEdges>>,
}

/// See [`Guide::stats`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuideStats {
    pub num_states: usize,
    /// (state, non-EOS token) pairs.
    pub num_transitions: usize,
    pub mean_allowed_tokens: f64,
    /// Share of states with exactly one choice (one token, or EOS alone).
    pub single_choice_share: f64,
}

/// The parts of a product guide other modules build on.
pub struct ProductParts<'a> {
    pub byte_dfa: &'a ByteDfa,
}

/// How a guide stores its automaton. (One per guide: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Automaton {
    Product(ProductAutomaton),
    /// An explicit token DFA (method `direct`), with each state's fewest tokens to acceptance.
    TokenDfa {
        dfa: TokenDfa,
        distance: Vec<u32>,
    },
    /// A canonical guide for a tokenizer with a pre-tokenizer (see `pre_tokenized`).
    PreTokenized(pre_tokenized::PreTokenizedAutomaton),
}

impl Automaton {
    fn num_states(&self) -> usize {
        match self {
            Automaton::Product(p) => p.states.len(),
            Automaton::TokenDfa { dfa, .. } => dfa.num_states(),
            Automaton::PreTokenized(p) => p.num_states(),
        }
    }
}

/// See the module docs.
pub struct Guide {
    pub(crate) method: Method,
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) automaton: Automaton,
    pub(crate) initial: u32,
    pub(crate) masks: MaskCache,
}

impl Guide {
    /// A guide over `automaton`, with an empty mask cache of the default budget (the
    /// `Compiler` sets the caller's [`crate::limits::Limits::max_mask_cache_bytes`]).
    pub(crate) fn new(method: Method, vocab: Arc<Vocabulary>, automaton: Automaton, initial: u32) -> Guide {
        let num_states = automaton.num_states();
        let masks = MaskCache::new(num_states, crate::limits::DEFAULT_MAX_MASK_CACHE_BYTES);
        Guide { method, vocab, automaton, initial, masks }
    }

    pub fn method(&self) -> Method {
        self.method
    }
    pub fn initial_state(&self) -> u32 {
        self.initial
    }
    pub fn num_states(&self) -> usize {
        self.masks.num_states()
    }
    /// Bytes of masks cached so far, and the cache's budget (see `mask_cache`).
    pub fn mask_cache_bytes(&self) -> (usize, usize) {
        (self.masks.cached_bytes(), self.masks.max_bytes())
    }
    /// The same guide with an empty mask cache of `max_bytes`.
    pub fn with_mask_cache_limit(mut self, max_bytes: usize) -> Guide {
        self.masks = MaskCache::new(self.num_states(), max_bytes);
        self
    }
    pub fn vocab_size(&self) -> usize {
        self.vocab.vocab_size()
    }
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }
    pub fn eos_token_ids(&self) -> &[u32] {
        self.vocab.eos_token_ids()
    }
    /// Words per mask: `ceil(vocab_size / 32)`.
    pub fn mask_words(&self) -> usize {
        bitset::words_for(self.vocab.vocab_size())
    }
    /// The regex's byte DFA of a product guide.
    ///
    /// # Panics
    /// On a `direct` guide (internal use only, right after a product compile).
    pub(crate) fn parts(&self) -> ProductParts<'_> {
        match &self.automaton {
            Automaton::Product(p) => ProductParts { byte_dfa: &p.dfa },
            Automaton::TokenDfa { .. } | Automaton::PreTokenized(_) => {
                unreachable!("parts() is only called on product guides")
            }
        }
    }

    /// The explicit token DFA of a `direct` guide.
    pub fn token_dfa(&self) -> Option<&TokenDfa> {
        match &self.automaton {
            Automaton::TokenDfa { dfa, .. } => Some(dfa),
            Automaton::Product(_) | Automaton::PreTokenized(_) => None,
        }
    }

    pub fn check_state(&self, state: u32) -> Result<()> {
        if (state as usize) < self.num_states() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "state {state} is out of range (the guide has {} states)",
                self.num_states()
            )))
        }
    }

    fn check_token(&self, token: u32) -> Result<()> {
        if (token as usize) < self.vocab.vocab_size() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "token id {token} is out of range (vocab_size is {})",
                self.vocab.vocab_size()
            )))
        }
    }

    /// EOS is allowed here.
    pub fn is_final(&self, state: u32) -> bool {
        match &self.automaton {
            Automaton::Product(p) => p.is_final(state),
            Automaton::TokenDfa { dfa, .. } => dfa.accepting[state as usize],
            Automaton::PreTokenized(p) => p.is_final(state),
        }
    }

    /// Writes the mask of `state` into `out` (`mask_words()` words).
    pub fn write_mask(&self, state: u32, out: &mut [u32]) {
        match &self.automaton {
            Automaton::Product(p) => p.write_mask(state, out),
            Automaton::PreTokenized(p) => p.write_mask(state, out),
            Automaton::TokenDfa { dfa, .. } => {
                out.fill(0);
                for &(t, _) in &dfa.transitions[state as usize] {
                    bitset::set(out, t as usize);
                }
            }
        }
        if self.is_final(state) {
            for &e in self.vocab.eos_token_ids() {
                bitset::set(out, e as usize);
            }
        }
    }

    /// The mask of `state`: borrowed from the cache, or computed afresh once the cache's budget
    /// is spent.
    pub fn mask(&self, state: u32) -> Cow<'_, [u32]> {
        match self.cached_mask(state) {
            Some(m) => Cow::Borrowed(m),
            None => {
                let mut m = vec![0u32; self.mask_words()];
                self.write_mask(state, &mut m);
                Cow::Owned(m)
            }
        }
    }

    /// The cached mask of `state` (cached now if the budget allows), `None` past the budget.
    pub fn cached_mask(&self, state: u32) -> Option<&[u32]> {
        self.masks.get_or_compute(state as usize, self.mask_words(), |m| self.write_mask(state, m))
    }

    /// Copies (or computes) the mask of `state` into `out` (`mask_words()` words).
    pub fn copy_mask(&self, state: u32, out: &mut [u32]) {
        match self.cached_mask(state) {
            Some(m) => out.copy_from_slice(m),
            None => self.write_mask(state, out),
        }
    }

    /// Sorted allowed token ids (EOS included on final states).
    pub fn allowed_tokens(&self, state: u32) -> Vec<u32> {
        bitset::iter_ones(&self.mask(state)).map(|t| t as u32).collect()
    }

    /// Whether `token` is in the mask of `state`, decided without computing the mask.
    pub fn is_allowed(&self, state: u32, token: u32) -> bool {
        self.step(state, token).is_some()
    }

    /// The state after `token`, `None` when the mask of `state` does not allow it; EOS from a
    /// final state stays in `state`. `state` and `token` must be in range.
    pub fn step(&self, state: u32, token: u32) -> Option<u32> {
        if self.vocab.eos_token_ids().contains(&token) {
            return self.is_final(state).then_some(state);
        }
        if token as usize >= self.vocab.num_tokens() {
            return None; // padding ids past the tokenizer
        }
        match &self.automaton {
            Automaton::Product(p) => p.next_state(&self.vocab, state, token),
            Automaton::TokenDfa { dfa, .. } => dfa.next(state, token),
            Automaton::PreTokenized(p) => p.next_state(&self.vocab, state, token),
        }
    }

    /// The state after `token`, with an error naming the problem when it is out of range or
    /// not allowed; EOS from a final state stays in `state`.
    pub fn next_state(&self, state: u32, token: u32) -> Result<u32> {
        self.check_state(state)?;
        self.check_token(token)?;
        self.step(state, token).ok_or_else(|| self.disallowed(state, token))
    }

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

    fn disallowed(&self, state: u32, token: u32) -> Error {
        let bytes =
            if (token as usize) < self.vocab.num_tokens() { self.vocab.token_bytes(token) } else { b"<padding>" };
        let text = String::from_utf8_lossy(bytes).into_owned();
        Error::InvalidArgument(format!(
            "token {token} ({text:?}) is not allowed in state {state} ({} tokens are)",
            bitset::count(&self.mask(state))
        ))
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

impl ProductAutomaton {
    fn in_fallback_char(&self, q2: u32) -> bool {
        self.tokenizer_dfa.as_ref().is_some_and(|d| !d.is_class(q2))
    }

    fn is_final(&self, state: u32) -> bool {
        let (q1, q2) = self.states[state as usize];
        self.dfa.is_accepting(q1) && !self.in_fallback_char(q2)
    }

    /// The mask without EOS.
    fn write_mask(&self, state: u32, out: &mut [u32]) {
        let (q1, q2) = self.states[state as usize];
        if self.in_fallback_char(q2) {
            out.fill(0);
        } else {
            out.copy_from_slice(&self.base_masks[q1 as usize]);
            if let Some(d) = &self.tokenizer_dfa {
                d.clear_forbidden(q2, out);
            }
        }
        if let Some(edges) = &self.byte_edges[state as usize] {
            for &(t, _) in edges.iter() {
                bitset::set(out, t as usize);
            }
        }
    }

    /// The target of a non-EOS token, `None` when it is not allowed.
    fn next_state(&self, vocab: &Vocabulary, state: u32, token: u32) -> Option<u32> {
        if let Some(edges) = &self.byte_edges[state as usize] {
            if let Some(&(_, to)) = edges.iter().find(|e| e.0 == token) {
                return Some(to);
            }
        }
        let (q1, q2) = self.states[state as usize];
        let fallback = self.tokenizer_dfa.as_ref().is_some_and(|d| d.fallback_byte(token).is_some());
        if fallback || self.in_fallback_char(q2) || !bitset::contains(&self.base_masks[q1 as usize], token as usize) {
            return None;
        }
        let q2_next = match &self.tokenizer_dfa {
            None => 0,
            Some(d) => {
                if d.forbidden(q2).binary_search(&token).is_ok() {
                    return None;
                }
                d.class_of(token)
            }
        };
        let q1_next = self.dfa.walk(q1, vocab.token_bytes(token));
        debug_assert_ne!(q1_next, DEAD);
        self.index.get(&(q1_next, q2_next)).copied()
    }
}
