//! The product representation of CartesianMerge and agnostic guides: a state is `(q1, q2)`, a
//! byte-DFA state and a tokenizer-DFA state, and its mask is `base_masks[q1]` minus the
//! forbidden set of `q2`, plus byte-fallback edges (see the parent module's docs).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::bitset;

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

impl ProductAutomaton {
    pub(super) fn in_fallback_char(&self, q2: u32) -> bool {
        self.tokenizer_dfa.as_ref().is_some_and(|d| !d.is_class(q2))
    }

    pub(super) fn is_final(&self, state: u32) -> bool {
        let (q1, q2) = self.states[state as usize];
        self.dfa.is_accepting(q1) && !self.in_fallback_char(q2)
    }

    /// The mask without EOS.
    pub(super) fn write_mask(&self, state: u32, out: &mut [u32]) {
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
    pub(super) fn next_state(&self, vocab: &Vocabulary, state: u32, token: u32) -> Option<u32> {
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
                if d.forbids(q2, token) {
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
