//! CartesianMerge (appendix Algorithms 5–6): canonical guides as the product of the regex's
//! token index (`decode⁻¹(L)`, see `index`) and the tokenizer DFA (`tokenize(Σ*)`), restricted
//! to *relevant* product states — reachable from the start and able to reach acceptance.
//!
//! # How the product is searched (§5.4)
//! From a byte state `q1`, the token transitions are grouped by their product target
//! `(δ1(q1, t), class(t))`: for the product state `(q1, q2)` a group's target is reachable as
//! soon as *one* token of the group is not forbidden after `q2`. Groups are tested lazily:
//! * forward, each `q1` keeps the groups whose target is not reached yet, and a new product
//!   state over `q1` only tests those;
//! * backward, when a product state becomes co-reachable, only the product states over the
//!   predecessor byte states that are not yet co-reachable are tested.
//!
//! Byte-fallback tokens (their target depends on `q2`) are explicit edges.
//!
//! The result stores δ1 restricted to relevant targets as one bitset per byte state, so at
//! decoding time a mask is that bitset minus the forbidden set of `q2` (Algorithm 6's
//! `A1 ∩ A2` with the relevance test precomputed).
//!
//! # Limits
//! Checked as the search goes, each giving [`Error::LimitExceeded`] past it:
//! * `max_product_states`, as states are discovered;
//! * `max_guide_bytes`, an estimate of the finished guide's tables: [`crate::limits::BYTES_PER_PRODUCT_STATE`]
//!   per state plus one `vocab_size / 8`-byte mask per byte state the search has reached;
//! * the compile's [`crate::limits::Deadline`], once per product state and per byte state expanded.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::search::{some_allowed, Registry};
use crate::error::{Error, Result};
use crate::guide::{Automaton, ByteEdges, Guide, Method, ProductAutomaton};
use crate::limits::SearchLimits;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};
use crate::util::bitset;

/// Token transitions from one byte state with the same product target.
struct Group {
    to_q1: u32,
    class: u32,
    /// Sorted token ids.
    tokens: Box<[u32]>,
}

/// A product state `(byte state, tokenizer state)`.
type ProductState = (u32, u32);

/// Builds the canonical guide of `dfa` for `vocab`.
pub fn build(
    vocab: &Arc<Vocabulary>,
    tokenizer_dfa: &Arc<TokenizerDfa>,
    trie: &TokenTrie,
    dfa: ByteDfa,
    limits: &SearchLimits,
) -> Result<Guide> {
    let mut search = ProductSearch::new(vocab, tokenizer_dfa, trie, dfa, limits);
    search.forward()?;
    let live = search.backward()?;
    search.finish(live)
}

/// The state of one CartesianMerge search (see the module docs), phase by phase:
/// [`ProductSearch::forward`] registers the reachable product states,
/// [`ProductSearch::backward`] marks the co-reachable ones, [`ProductSearch::finish`] keeps the
/// relevant ones and makes the guide.
struct ProductSearch<'a> {
    vocab: &'a Arc<Vocabulary>,
    tokenizer_dfa: &'a Arc<TokenizerDfa>,
    trie: &'a TokenTrie,
    dfa: ByteDfa,
    limits: &'a SearchLimits,
    /// Per byte state, its token groups (made when the forward search first reaches it).
    groups: Vec<Vec<Group>>,
    /// Per byte state, its moves on single bytes (for byte-fallback tokens; empty without).
    byte_moves: Vec<Vec<(u8, u32)>>,
    /// Byte states whose groups are made, and their count.
    byte_states_reached: usize,
    states: Registry<ProductState>,
}

impl<'a> ProductSearch<'a> {
    fn new(
        vocab: &'a Arc<Vocabulary>,
        tokenizer_dfa: &'a Arc<TokenizerDfa>,
        trie: &'a TokenTrie,
        dfa: ByteDfa,
        limits: &'a SearchLimits,
    ) -> ProductSearch<'a> {
        let n1 = dfa.num_states();
        let byte_moves = (0..n1 as u32)
            .map(|q1| {
                if tokenizer_dfa.fallback_tokens().is_none() {
                    return Vec::new();
                }
                (0..=255u8)
                    .filter_map(|b| {
                        let to = dfa.next(q1, b);
                        (to != DEAD).then_some((b, to))
                    })
                    .collect()
            })
            .collect();
        ProductSearch {
            vocab,
            tokenizer_dfa,
            trie,
            dfa,
            limits,
            groups: (0..n1).map(|_| Vec::new()).collect(),
            byte_moves,
            byte_states_reached: 0,
            states: Registry::new(limits, "relevant (byte state, tokenizer state) pairs of CartesianMerge"),
        }
    }

    fn mask_bytes(&self) -> usize {
        bitset::words_for(self.vocab.vocab_size()) * 4
    }

    /// The token groups of byte state `q1`. Made lazily, for the byte states the forward search
    /// reaches: a regex whose product is too large then stops at `max_product_states` after
    /// walking the token trie from a few hundred byte states, not from all of them first.
    fn groups_of(&self, q1: u32) -> Vec<Group> {
        // Sorting (target, class, token) triples makes every group a contiguous run, with its
        // tokens already sorted: one allocation per group, no hashing per token.
        let mut triples: Vec<(u32, u32, u32)> = Vec::new();
        self.trie.for_each_transition(&self.dfa, q1, |t, to| {
            let class = self.tokenizer_dfa.class_of(t);
            debug_assert_ne!(class, NO_CLASS);
            triples.push((to, class, t));
        });
        triples.sort_unstable();
        triples
            .chunk_by(|a, b| a.0 == b.0 && a.1 == b.1)
            .map(|run| Group { to_q1: run[0].0, class: run[0].1, tokens: run.iter().map(|x| x.2).collect() })
            .collect()
    }

    /// Registers every product state reachable from the start. Each byte state keeps the groups
    /// whose target is not reached yet, and a new product state over it tests only those.
    fn forward(&mut self) -> Result<()> {
        let tok = self.tokenizer_dfa.as_ref();
        let n1 = self.dfa.num_states();
        let mut pending: Vec<Vec<u32>> = vec![Vec::new(); n1];
        let mut computed = vec![false; n1];
        let mut class_bytes_done = vec![false; n1];
        self.states.add((self.dfa.start(), tok.initial()))?;
        while let Some(id) = self.states.queue.pop_front() {
            self.limits.deadline.check("CartesianMerge's forward search")?;
            let (q1, q2) = self.states.items[id as usize];
            if !computed[q1 as usize] {
                self.byte_states_reached += 1;
                self.limits.check_bytes(self.states.items.len(), self.byte_states_reached, self.mask_bytes())?;
                computed[q1 as usize] = true;
                self.groups[q1 as usize] = self.groups_of(q1);
                pending[q1 as usize] = (0..self.groups[q1 as usize].len() as u32).collect();
            }
            if tok.is_class(q2) {
                let forbidden = tok.forbidden(q2);
                let mut keep = Vec::new();
                for &g in &pending[q1 as usize] {
                    let group = &self.groups[q1 as usize][g as usize];
                    let target = (group.to_q1, group.class);
                    if self.states.index.contains_key(&target) {
                        continue;
                    }
                    if some_allowed(&group.tokens, &forbidden, &[]) {
                        self.states.add(target)?;
                    } else {
                        keep.push(g);
                    }
                }
                pending[q1 as usize] = keep;
                // A byte-fallback token's target does not depend on which class `q2` is, so
                // the class states over one byte state share their byte moves: do them once.
                if class_bytes_done[q1 as usize] {
                    continue;
                }
                class_bytes_done[q1 as usize] = true;
            }
            for i in 0..self.byte_moves[q1 as usize].len() {
                let (b, to) = self.byte_moves[q1 as usize][i];
                if let Some(q2n) = tok.step_byte(q2, b) {
                    self.states.add((to, q2n))?;
                }
            }
        }
        Ok(())
    }

    /// Which reached states can reach acceptance. When a state becomes co-reachable, only the
    /// product states over its predecessor byte states that are not yet co-reachable are tested.
    fn backward(&self) -> Result<Vec<bool>> {
        let tok = self.tokenizer_dfa.as_ref();
        let n1 = self.dfa.num_states();
        let states = &self.states.items;
        let mut over_q1: Vec<Vec<u32>> = vec![Vec::new(); n1];
        for (id, &(q1, _)) in states.iter().enumerate() {
            over_q1[q1 as usize].push(id as u32);
        }
        // Reverse of groups: (target q1, class) -> [(source q1, group)]; reverse byte moves.
        let mut group_preds: FxHashMap<ProductState, Vec<(u32, u32)>> = FxHashMap::default();
        for (q1, gs) in self.groups.iter().enumerate() {
            for (g, group) in gs.iter().enumerate() {
                group_preds.entry((group.to_q1, group.class)).or_default().push((q1 as u32, g as u32));
            }
        }
        let mut byte_preds: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n1];
        for (q1, moves) in self.byte_moves.iter().enumerate() {
            for &(b, to) in moves {
                byte_preds[to as usize].push((q1 as u32, b));
            }
        }
        let mut live = vec![false; states.len()];
        let mut not_live: Vec<Vec<u32>> = over_q1;
        let mut work: VecDeque<u32> = VecDeque::new();
        for (id, &(q1, q2)) in states.iter().enumerate() {
            if self.dfa.is_accepting(q1) && tok.is_class(q2) {
                live[id] = true;
                work.push_back(id as u32);
            }
        }
        self.limits.check_bytes(states.len(), self.byte_states_reached, self.mask_bytes())?;
        // Moves the not-yet-live states over `q1` that `is_pred` accepts to live.
        let mut promote = |q1: u32, live: &mut Vec<bool>, work: &mut VecDeque<u32>, is_pred: &dyn Fn(u32) -> bool| {
            let candidates = std::mem::take(&mut not_live[q1 as usize]);
            let mut keep = Vec::with_capacity(candidates.len());
            for p in candidates {
                if live[p as usize] {
                    continue;
                }
                if is_pred(states[p as usize].1) {
                    live[p as usize] = true;
                    work.push_back(p);
                } else {
                    keep.push(p);
                }
            }
            not_live[q1 as usize] = keep;
        };
        while let Some(id) = work.pop_front() {
            self.limits.deadline.check("CartesianMerge's backward search")?;
            let (q1t, q2t) = states[id as usize];
            if tok.is_class(q2t) {
                for &(q1, g) in group_preds.get(&(q1t, q2t)).map_or(&[][..], |v| v.as_slice()) {
                    let group = &self.groups[q1 as usize][g as usize];
                    promote(q1, &mut live, &mut work, &|q2| {
                        tok.is_class(q2) && some_allowed(&group.tokens, &tok.forbidden(q2), &[])
                    });
                }
            }
            // Byte-fallback tokens lead only into a character (a non-class state) or, completing
            // one, to class 0: other targets have no byte predecessors.
            let byte_target = !tok.is_class(q2t) || q2t == tok.initial();
            for &(q1, b) in byte_preds[q1t as usize].iter().filter(|_| byte_target) {
                promote(q1, &mut live, &mut work, &|q2| tok.step_byte(q2, b) == Some(q2t));
            }
        }
        if !live[0] {
            return Err(Error::EmptyLanguage(
                "no canonical token sequence spells a string of the regex (its strings are not representable by this tokenizer)".into(),
            ));
        }
        Ok(live)
    }

    /// The guide over the relevant (`live`) states: δ1 restricted to relevant targets as one
    /// base mask per byte state used, and the byte-fallback edges.
    fn finish(self, live: Vec<bool>) -> Result<Guide> {
        let tok = self.tokenizer_dfa.as_ref();
        let n1 = self.dfa.num_states();
        let states = &self.states.items;
        // Renumber the relevant states.
        let mut new_id = vec![u32::MAX; states.len()];
        let mut kept: Vec<ProductState> = Vec::new();
        for (id, &p) in states.iter().enumerate() {
            if live[id] {
                new_id[id] = kept.len() as u32;
                kept.push(p);
            }
        }
        let kept_index: FxHashMap<ProductState, u32> = kept.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();
        let words = bitset::words_for(self.vocab.vocab_size());
        let mut used = vec![false; n1];
        for &(q1, _) in &kept {
            used[q1 as usize] = true;
        }
        let mut base_masks: Vec<Box<[u32]>> = Vec::with_capacity(n1);
        for (q1, &used) in used.iter().enumerate() {
            if !used {
                base_masks.push(Box::new([]));
                continue;
            }
            let mut m = vec![0u32; words].into_boxed_slice();
            for group in &self.groups[q1] {
                if kept_index.contains_key(&(group.to_q1, group.class)) {
                    for &t in &group.tokens {
                        bitset::set(&mut m, t as usize);
                    }
                }
            }
            base_masks.push(m);
        }
        // Byte-fallback edges; shared between the class states over one byte state.
        let mut byte_edges: Vec<Option<ByteEdges>> = vec![None; kept.len()];
        if let Some(fallback) = tok.fallback_tokens() {
            let mut class_edges: FxHashMap<u32, Option<ByteEdges>> = FxHashMap::default();
            for (id, &(q1, q2)) in kept.iter().enumerate() {
                let compute = || -> Option<ByteEdges> {
                    let edges: Vec<(u32, u32)> = self.byte_moves[q1 as usize]
                        .iter()
                        .filter_map(|&(b, to)| {
                            let q2n = tok.step_byte(q2, b)?;
                            kept_index.get(&(to, q2n)).map(|&target| (fallback[b as usize], target))
                        })
                        .collect();
                    (!edges.is_empty()).then(|| Arc::new(edges))
                };
                byte_edges[id] =
                    if tok.is_class(q2) { class_edges.entry(q1).or_insert_with(compute).clone() } else { compute() };
            }
        }
        let initial = new_id[0];
        let automaton = ProductAutomaton {
            tokenizer_dfa: Some(self.tokenizer_dfa.clone()),
            dfa: self.dfa,
            states: kept,
            index: kept_index,
            base_masks,
            byte_edges,
        };
        Ok(Guide::new(Method::Cartesian, self.vocab.clone(), Automaton::Product(automaton), initial))
    }
}

/// Builds the agnostic guide (Outlines' index): states are the byte DFA's states. Only the
/// guide-size and time limits apply (there is no product).
///
/// The byte DFA is trimmed byte by byte, but a vocabulary need not spell every string: a
/// token can lead to a byte state from which no *token* sequence reaches acceptance (regex
/// `ab` with a token `a` and no `b`). Such tokens are removed from the masks, so the guide keeps
/// the invariant that every reachable state can finish (found by the `regex_guide` fuzzer).
pub fn build_agnostic(vocab: &Arc<Vocabulary>, trie: &TokenTrie, dfa: ByteDfa, limits: &SearchLimits) -> Result<Guide> {
    let words = bitset::words_for(vocab.vocab_size());
    let n1 = dfa.num_states();
    limits.check_bytes(n1, n1, words * 4)?;
    // Masks, and the byte states each state's tokens lead to.
    let mut targets: Vec<Vec<u32>> = Vec::with_capacity(n1);
    let mut base_masks: Vec<Box<[u32]>> = (0..n1 as u32)
        .map(|q1| {
            limits.deadline.check("the agnostic token index")?;
            let mut m = vec![0u32; words].into_boxed_slice();
            let mut to_states = Vec::new();
            trie.for_each_transition(&dfa, q1, |t, to| {
                bitset::set(&mut m, t as usize);
                to_states.push(to);
            });
            to_states.sort_unstable();
            to_states.dedup();
            targets.push(to_states);
            Ok(m)
        })
        .collect::<Result<_>>()?;
    // States from which a token sequence reaches acceptance: a backward fixpoint.
    let mut predecessors: Vec<Vec<u32>> = vec![Vec::new(); n1];
    for (q1, to_states) in targets.iter().enumerate() {
        for &to in to_states {
            predecessors[to as usize].push(q1 as u32);
        }
    }
    let mut live: Vec<bool> = (0..n1 as u32).map(|q| dfa.is_accepting(q)).collect();
    let mut work: Vec<u32> = (0..n1 as u32).filter(|&q| live[q as usize]).collect();
    while let Some(q) = work.pop() {
        for &p in &predecessors[q as usize] {
            if !live[p as usize] {
                live[p as usize] = true;
                work.push(p);
            }
        }
    }
    if !live[dfa.start() as usize] {
        return Err(Error::EmptyLanguage(
            "no token sequence spells a string of the regex (the vocabulary cannot spell its strings)".into(),
        ));
    }
    for q1 in 0..n1 {
        if targets[q1].iter().any(|&to| !live[to as usize]) {
            let mask = &mut base_masks[q1];
            trie.for_each_transition(&dfa, q1 as u32, |t, to| {
                if !live[to as usize] {
                    bitset::clear(mask, t as usize);
                }
            });
        }
    }
    let states: Vec<(u32, u32)> = (0..n1 as u32).map(|q| (q, 0)).collect();
    let index = states.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();
    let initial = dfa.start();
    let automaton =
        ProductAutomaton { tokenizer_dfa: None, dfa, states, index, base_masks, byte_edges: vec![None; n1] };
    Ok(Guide::new(Method::Agnostic, vocab.clone(), Automaton::Product(automaton), initial))
}
