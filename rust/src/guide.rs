//! A compiled guide: an immutable automaton over token ids with a mask per state.
//!
//! A guide state is a pair `(q1, q2)`: `q1` a state of the regex's byte DFA, `q2` a state of
//! the tokenizer DFA (always 0 for the agnostic method). The allowed tokens of a state are
//! never stored per state up front — there can be thousands of states over a 128k vocabulary —
//! but as the intersection of two precomputed sets (the appendix's §5.4):
//! * `base_masks[q1]`: tokens whose byte walk from `q1` ends in a state `q1'` such that
//!   `(q1', class(t))` is a relevant product state (the transition function δ1 restricted to
//!   relevant targets);
//! * the tokenizer DFA's forbidden set of `q2`, which is subtracted;
//! plus byte-fallback tokens, whose target depends on `q2` and which are kept as explicit edges,
//! and EOS ids on final states. A state's full mask is computed on first request and cached, so
//! `mask()` can hand out a zero-copy view; `write_mask` computes straight into a caller's buffer.
//!
//! # Invariants
//! * Every state is reachable from `initial` and can reach a final state, so a decoder that
//!   only picks allowed tokens can always finish.
//! * EOS is allowed exactly in final states (`q1` accepting and `q2` not inside a
//!   byte-fallback character).

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use crate::bitset;
use crate::bytedfa::{ByteDfa, DEAD};
use crate::error::{Error, Result};
use crate::random::SplitMix64;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::vocab::Vocabulary;

/// The construction behind a guide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every token sequence that decodes to a match (Outlines' token index).
    Agnostic,
    /// Canonical token sequences only, by CartesianMerge.
    Cartesian,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Agnostic => "agnostic",
            Method::Cartesian => "cartesian",
        }
    }
    pub fn parse(s: &str) -> Result<Method> {
        match s {
            "agnostic" => Ok(Method::Agnostic),
            "cartesian" => Ok(Method::Cartesian),
            "direct" | "auto" => Err(Error::Unsupported(format!(
                "method {s:?} (DirectMerge) is not implemented yet; use \"cartesian\" (canonical) or \"agnostic\""
            ))),
            other => Err(Error::InvalidArgument(format!(
                "unknown method {other:?}: expected \"cartesian\" or \"agnostic\""
            ))),
        }
    }
}

/// Byte-fallback edges `(token, target state)` of a state.
pub(crate) type ByteEdges = Arc<Vec<(u32, u32)>>;

/// See the module docs.
pub struct Guide {
    pub(crate) method: Method,
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) tokenizer_dfa: Option<Arc<TokenizerDfa>>,
    pub(crate) dfa: ByteDfa,
    pub(crate) states: Vec<(u32, u32)>,
    pub(crate) index: FxHashMap<(u32, u32), u32>,
    /// Per byte-DFA state; empty for byte states that no guide state uses.
    pub(crate) base_masks: Vec<Box<[u32]>>,
    pub(crate) byte_edges: Vec<Option<ByteEdges>>,
    pub(crate) initial: u32,
    pub(crate) masks: Vec<OnceLock<Box<[u32]>>>,
}

impl Guide {
    pub fn method(&self) -> Method {
        self.method
    }
    pub fn initial_state(&self) -> u32 {
        self.initial
    }
    pub fn num_states(&self) -> usize {
        self.states.len()
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
    /// The byte DFA of the regex.
    pub fn byte_dfa(&self) -> &ByteDfa {
        &self.dfa
    }

    pub fn check_state(&self, state: u32) -> Result<()> {
        if (state as usize) < self.states.len() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "state {state} is out of range (the guide has {} states)",
                self.states.len()
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

    fn in_fallback_char(&self, q2: u32) -> bool {
        self.tokenizer_dfa.as_ref().is_some_and(|d| !d.is_class(q2))
    }

    /// EOS is allowed here.
    pub fn is_final(&self, state: u32) -> bool {
        let (q1, q2) = self.states[state as usize];
        self.dfa.is_accepting(q1) && !self.in_fallback_char(q2)
    }

    /// Writes the mask of `state` into `out` (`mask_words()` words).
    pub fn write_mask(&self, state: u32, out: &mut [u32]) {
        let (q1, q2) = self.states[state as usize];
        if self.in_fallback_char(q2) {
            out.fill(0);
        } else {
            out.copy_from_slice(&self.base_masks[q1 as usize]);
            if let Some(d) = &self.tokenizer_dfa {
                for &t in d.forbidden(q2) {
                    bitset::clear(out, t as usize);
                }
            }
        }
        if let Some(edges) = &self.byte_edges[state as usize] {
            for &(t, _) in edges.iter() {
                bitset::set(out, t as usize);
            }
        }
        if self.is_final(state) {
            for &e in self.vocab.eos_token_ids() {
                bitset::set(out, e as usize);
            }
        }
    }

    /// The cached mask of `state`.
    pub fn mask(&self, state: u32) -> &[u32] {
        self.masks[state as usize].get_or_init(|| {
            let mut m = vec![0u32; self.mask_words()].into_boxed_slice();
            self.write_mask(state, &mut m);
            m
        })
    }

    /// Sorted allowed token ids (EOS included on final states).
    pub fn allowed_tokens(&self, state: u32) -> Vec<u32> {
        bitset::iter_ones(self.mask(state)).map(|t| t as u32).collect()
    }

    pub fn is_allowed(&self, state: u32, token: u32) -> bool {
        bitset::contains(self.mask(state), token as usize)
    }

    /// The state after `token`; EOS from a final state stays in `state`.
    pub fn next_state(&self, state: u32, token: u32) -> Result<u32> {
        self.check_state(state)?;
        self.check_token(token)?;
        if self.vocab.eos_token_ids().contains(&token) {
            return if self.is_final(state) {
                Ok(state)
            } else {
                Err(self.disallowed(state, token))
            };
        }
        if let Some(edges) = &self.byte_edges[state as usize] {
            if let Some(&(_, to)) = edges.iter().find(|e| e.0 == token) {
                return Ok(to);
            }
        }
        let (q1, q2) = self.states[state as usize];
        let fallback = self.tokenizer_dfa.as_ref().is_some_and(|d| d.fallback_byte(token).is_some());
        if fallback || self.in_fallback_char(q2) || !bitset::contains(&self.base_masks[q1 as usize], token as usize) {
            return Err(self.disallowed(state, token));
        }
        let q2_next = match &self.tokenizer_dfa {
            None => 0,
            Some(d) => {
                if d.forbidden(q2).binary_search(&token).is_ok() {
                    return Err(self.disallowed(state, token));
                }
                d.class_of(token)
            }
        };
        let q1_next = self.dfa.walk(q1, self.vocab.token_bytes(token));
        debug_assert_ne!(q1_next, DEAD);
        self.index
            .get(&(q1_next, q2_next))
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("internal: no state for token {token}")))
    }

    fn disallowed(&self, state: u32, token: u32) -> Error {
        let text = String::from_utf8_lossy(self.vocab.token_bytes(token)).into_owned();
        Error::InvalidArgument(format!(
            "token {token} ({text:?}) is not allowed in state {state} ({} tokens are)",
            bitset::count(self.mask(state))
        ))
    }

    /// Number of (state, non-EOS token) transitions.
    pub fn num_transitions(&self) -> usize {
        (0..self.states.len() as u32)
            .map(|s| {
                let eos = if self.is_final(s) { self.vocab.eos_token_ids().len() } else { 0 };
                bitset::count(self.mask(s)) - eos
            })
            .sum()
    }

    /// Non-EOS successors of a state (token, next state).
    pub fn transitions(&self, state: u32) -> Vec<(u32, u32)> {
        let eos = self.vocab.eos_token_ids();
        self.allowed_tokens(state)
            .into_iter()
            .filter(|t| !eos.contains(t))
            .map(|t| (t, self.next_state(state, t).expect("allowed token has a target")))
            .collect()
    }

    /// Number of accepted token sequences (EOS not counted); `None` if infinite.
    pub fn count_sequences(&self) -> Option<u128> {
        // Iterative DFS with colours: 0 new, 1 on stack, 2 done.
        let n = self.states.len();
        let mut colour = vec![0u8; n];
        let mut count = vec![0u128; n];
        let mut stack: Vec<(u32, Vec<(u32, u32)>, usize)> = Vec::new();
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
    /// probability 1/4; past `max_tokens`, tokens are chosen to shorten the remaining byte
    /// distance to acceptance.
    pub fn random_walk(&self, seed: u64, max_tokens: usize) -> Result<Vec<u32>> {
        let mut rng = SplitMix64::new(seed);
        let eos = self.vocab.eos_token_ids();
        let mut s = self.initial;
        let mut out = Vec::new();
        let hard_cap = max_tokens.saturating_add(100_000);
        loop {
            if self.is_final(s) && (out.len() >= max_tokens || rng.one_in(4)) {
                return Ok(out);
            }
            let allowed: Vec<u32> = self.allowed_tokens(s).into_iter().filter(|t| !eos.contains(t)).collect();
            if allowed.is_empty() {
                return Ok(out); // final with nothing else allowed
            }
            let t = if out.len() < max_tokens {
                allowed[rng.below(allowed.len())]
            } else {
                // Greedy towards acceptance: fewest remaining bytes after the token.
                let dist = |t: u32| -> u32 {
                    let to = self.next_state(s, t).expect("allowed");
                    let (q1, _) = self.states[to as usize];
                    self.dfa.distance_to_accept(q1)
                };
                let best = allowed.iter().map(|&t| dist(t)).min().expect("non-empty");
                let best_tokens: Vec<u32> = allowed.into_iter().filter(|&t| dist(t) == best).collect();
                best_tokens[rng.below(best_tokens.len())]
            };
            out.push(t);
            s = self.next_state(s, t)?;
            if out.len() > hard_cap {
                return Err(Error::InvalidArgument("random walk did not reach a final state".into()));
            }
        }
    }

    /// The longest run of forced tokens from `state` (see `Matcher::forced_tokens`).
    pub fn forced_tokens(&self, mut state: u32) -> Vec<u32> {
        let eos = self.vocab.eos_token_ids();
        let mut out = Vec::new();
        for _ in 0..10_000 {
            let mask = self.mask(state);
            let is_final = self.is_final(state);
            let others = bitset::iter_ones(mask).filter(|&t| !eos.contains(&(t as u32))).count();
            if is_final {
                if others == 0 {
                    out.push(eos[0]); // EOS is the only choice: the run ends with it
                }
                break;
            }
            if others != 1 {
                break;
            }
            let t = bitset::iter_ones(mask).next().expect("one") as u32;
            out.push(t);
            state = self.next_state(state, t).expect("allowed");
        }
        out
    }
}
