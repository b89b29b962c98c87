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
//! * `max_guide_bytes`, an estimate of the finished guide's tables: [`BYTES_PER_PRODUCT_STATE`]
//!   per state plus one `vocab_size / 8`-byte mask per byte state the search has reached;
//! * the compile's [`Deadline`], once per product state and per byte state expanded.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::mask_cache::{MaskCache, DEFAULT_MAX_MASK_CACHE_BYTES};

use rustc_hash::FxHashMap;

use crate::bitset;
use crate::bytedfa::{ByteDfa, DEAD};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::guide::{Automaton, ByteEdges, Guide, Method, ProductAutomaton};
use crate::index::TokenTrie;
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};
use crate::vocab::Vocabulary;

/// Default cap on product states: about 100 MB of search tables, and a few seconds of search
/// for a simple regex (the deadline stops slower ones earlier).
pub const DEFAULT_MAX_PRODUCT_STATES: usize = 2_000_000;

/// Default cap on the estimated bytes of a product guide: 1 GiB.
pub const DEFAULT_MAX_GUIDE_BYTES: usize = 1 << 30;

/// Bytes a product state costs in a finished guide: the state pair (8), its index entry (~16
/// plus hash-table slack), its byte-edge slot (8) and mask-cache slot (8).
pub const BYTES_PER_PRODUCT_STATE: usize = 48;

/// The limits of one product construction.
#[derive(Clone, Copy, Debug)]
pub struct ProductLimits {
    pub max_product_states: usize,
    pub max_guide_bytes: usize,
    pub deadline: Deadline,
}

impl ProductLimits {
    /// `Err(LimitExceeded)` when `states` product states and `masks` byte-state masks of
    /// `mask_bytes` each would exceed `max_guide_bytes`.
    pub(crate) fn check_bytes(&self, states: usize, masks: usize, mask_bytes: usize) -> Result<()> {
        let estimate = states.saturating_mul(BYTES_PER_PRODUCT_STATE).saturating_add(masks.saturating_mul(mask_bytes));
        if estimate > self.max_guide_bytes {
            return Err(Error::LimitExceeded {
                limit: "max_guide_bytes",
                value: self.max_guide_bytes.to_string(),
                what: format!(
                    "estimated guide size: {states} product states and {masks} byte-state masks of {mask_bytes} bytes"
                ),
            });
        }
        Ok(())
    }
}

/// Token transitions from one byte state with the same product target.
struct Group {
    to_q1: u32,
    class: u32,
    /// Sorted token ids.
    tokens: Box<[u32]>,
}

/// Whether some token of `tokens` is absent from the sorted `forbidden`.
#[inline]
fn some_allowed(tokens: &[u32], forbidden: &[u32]) -> bool {
    tokens.len() > forbidden.len() || tokens.iter().any(|t| forbidden.binary_search(t).is_err())
}

/// Registers a newly reached product state.
fn add(
    p: (u32, u32),
    index: &mut FxHashMap<(u32, u32), u32>,
    states: &mut Vec<(u32, u32)>,
    queue: &mut VecDeque<u32>,
    max_product_states: usize,
) -> Result<()> {
    if index.contains_key(&p) {
        return Ok(());
    }
    if states.len() >= max_product_states {
        return Err(Error::LimitExceeded {
            limit: "max_product_states",
            value: max_product_states.to_string(),
            what: "relevant (byte state, tokenizer state) pairs of CartesianMerge".into(),
        });
    }
    let id = states.len() as u32;
    index.insert(p, id);
    states.push(p);
    queue.push_back(id);
    Ok(())
}

/// Builds the canonical guide of `dfa` for `vocab`.
pub fn build(
    vocab: &Arc<Vocabulary>,
    tokenizer_dfa: &Arc<TokenizerDfa>,
    trie: &TokenTrie,
    dfa: ByteDfa,
    limits: &ProductLimits,
) -> Result<Guide> {
    let max_product_states = limits.max_product_states;
    let mask_bytes = bitset::words_for(vocab.vocab_size()) * 4;
    let mut byte_states_reached = 0usize;
    let tok = tokenizer_dfa.as_ref();
    let n1 = dfa.num_states();
    // Token groups are computed lazily, for the byte states the forward search reaches: a
    // regex whose product is too large then stops at `max_product_states` after walking the
    // token trie from a few hundred byte states, not from all of them first.
    let groups_of = |q1: u32| -> Vec<Group> {
        // Sorting (target, class, token) triples makes every group a contiguous run, with its
        // tokens already sorted: one allocation per group, no hashing per token.
        let mut triples: Vec<(u32, u32, u32)> = Vec::new();
        trie.for_each_transition(&dfa, q1, |t, to| {
            let class = tok.class_of(t);
            debug_assert_ne!(class, NO_CLASS);
            triples.push((to, class, t));
        });
        triples.sort_unstable();
        triples
            .chunk_by(|a, b| a.0 == b.0 && a.1 == b.1)
            .map(|run| Group { to_q1: run[0].0, class: run[0].1, tokens: run.iter().map(|x| x.2).collect() })
            .collect()
    };
    let mut groups: Vec<Vec<Group>> = (0..n1).map(|_| Vec::new()).collect();
    let mut computed = vec![false; n1];
    let byte_moves: Vec<Vec<(u8, u32)>> = (0..n1 as u32)
        .map(|q1| {
            if tok.fallback_tokens().is_none() {
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

    // Forward search.
    let mut index: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    let mut states: Vec<(u32, u32)> = Vec::new();
    let mut pending: Vec<Vec<u32>> = vec![Vec::new(); n1];
    let mut queue = VecDeque::new();
    let mut class_bytes_done = vec![false; n1];
    add((dfa.start(), tok.initial()), &mut index, &mut states, &mut queue, max_product_states)?;
    while let Some(id) = queue.pop_front() {
        limits.deadline.check("CartesianMerge's forward search")?;
        let (q1, q2) = states[id as usize];
        if !computed[q1 as usize] {
            byte_states_reached += 1;
            limits.check_bytes(states.len(), byte_states_reached, mask_bytes)?;
            computed[q1 as usize] = true;
            groups[q1 as usize] = groups_of(q1);
            pending[q1 as usize] = (0..groups[q1 as usize].len() as u32).collect();
        }
        if tok.is_class(q2) {
            let forbidden = tok.forbidden(q2);
            let mut keep = Vec::new();
            for &g in &pending[q1 as usize] {
                let group = &groups[q1 as usize][g as usize];
                let target = (group.to_q1, group.class);
                if index.contains_key(&target) {
                    continue;
                }
                if some_allowed(&group.tokens, forbidden) {
                    add(target, &mut index, &mut states, &mut queue, max_product_states)?;
                } else {
                    keep.push(g);
                }
            }
            pending[q1 as usize] = keep;
        }
        // A byte-fallback token's target does not depend on which class `q2` is, so the class
        // states over one byte state share their byte moves: do them once per byte state.
        if tok.is_class(q2) {
            if class_bytes_done[q1 as usize] {
                continue;
            }
            class_bytes_done[q1 as usize] = true;
        }
        for &(b, to) in &byte_moves[q1 as usize] {
            if let Some(q2n) = tok.step_byte(q2, b) {
                add((to, q2n), &mut index, &mut states, &mut queue, max_product_states)?;
            }
        }
    }

    // Backward search for co-reachable states among the reached ones.
    let n = states.len();
    let mut over_q1: Vec<Vec<u32>> = vec![Vec::new(); n1];
    for (id, &(q1, _)) in states.iter().enumerate() {
        over_q1[q1 as usize].push(id as u32);
    }
    // Reverse of groups: (target q1, class) -> [(source q1, group)]; reverse byte moves.
    let mut group_preds: FxHashMap<(u32, u32), Vec<(u32, u32)>> = FxHashMap::default();
    for (q1, gs) in groups.iter().enumerate() {
        for (g, group) in gs.iter().enumerate() {
            group_preds.entry((group.to_q1, group.class)).or_default().push((q1 as u32, g as u32));
        }
    }
    let mut byte_preds: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n1];
    for (q1, moves) in byte_moves.iter().enumerate() {
        for &(b, to) in moves {
            byte_preds[to as usize].push((q1 as u32, b));
        }
    }
    let mut live = vec![false; n];
    let mut not_live: Vec<Vec<u32>> = over_q1.clone();
    let mut work: VecDeque<u32> = VecDeque::new();
    for (id, &(q1, q2)) in states.iter().enumerate() {
        if dfa.is_accepting(q1) && tok.is_class(q2) {
            live[id] = true;
            work.push_back(id as u32);
        }
    }
    limits.check_bytes(states.len(), byte_states_reached, mask_bytes)?;
    while let Some(id) = work.pop_front() {
        limits.deadline.check("CartesianMerge's backward search")?;
        let (q1t, q2t) = states[id as usize];
        if tok.is_class(q2t) {
            if let Some(preds) = group_preds.get(&(q1t, q2t)) {
                for &(q1, g) in preds {
                    let group = &groups[q1 as usize][g as usize];
                    let candidates = std::mem::take(&mut not_live[q1 as usize]);
                    let mut keep = Vec::with_capacity(candidates.len());
                    for p in candidates {
                        if live[p as usize] {
                            continue;
                        }
                        let q2 = states[p as usize].1;
                        if tok.is_class(q2) && some_allowed(&group.tokens, tok.forbidden(q2)) {
                            live[p as usize] = true;
                            work.push_back(p);
                        } else {
                            keep.push(p);
                        }
                    }
                    not_live[q1 as usize] = keep;
                }
            }
        }
        // Byte-fallback tokens lead only into a character (a non-class state) or, completing
        // one, to class 0: other targets have no byte predecessors.
        let byte_target = !tok.is_class(q2t) || q2t == tok.initial();
        for &(q1, b) in byte_preds[q1t as usize].iter().filter(|_| byte_target) {
            let candidates = std::mem::take(&mut not_live[q1 as usize]);
            let mut keep = Vec::with_capacity(candidates.len());
            for p in candidates {
                if live[p as usize] {
                    continue;
                }
                if tok.step_byte(states[p as usize].1, b) == Some(q2t) {
                    live[p as usize] = true;
                    work.push_back(p);
                } else {
                    keep.push(p);
                }
            }
            not_live[q1 as usize] = keep;
        }
    }
    if !live[0] {
        return Err(Error::EmptyLanguage(
            "no canonical token sequence spells a string of the regex (its strings are not representable by this tokenizer)".into(),
        ));
    }

    // Renumber the relevant states.
    let mut new_id = vec![u32::MAX; n];
    let mut kept: Vec<(u32, u32)> = Vec::new();
    for (id, &p) in states.iter().enumerate() {
        if live[id] {
            new_id[id] = kept.len() as u32;
            kept.push(p);
        }
    }
    let kept_index: FxHashMap<(u32, u32), u32> = kept.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();

    // δ1 restricted to relevant targets, per byte state that is used.
    let words = bitset::words_for(vocab.vocab_size());
    let mut used = vec![false; n1];
    for &(q1, _) in &kept {
        used[q1 as usize] = true;
    }
    let mut base_masks: Vec<Box<[u32]>> = Vec::with_capacity(n1);
    for q1 in 0..n1 {
        if !used[q1] {
            base_masks.push(Box::new([]));
            continue;
        }
        let mut m = vec![0u32; words].into_boxed_slice();
        for group in &groups[q1] {
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
                let edges: Vec<(u32, u32)> = byte_moves[q1 as usize]
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
    let masks = MaskCache::new(kept.len(), DEFAULT_MAX_MASK_CACHE_BYTES);
    let automaton = ProductAutomaton {
        tokenizer_dfa: Some(tokenizer_dfa.clone()),
        dfa,
        states: kept,
        index: kept_index,
        base_masks,
        byte_edges,
    };
    Ok(Guide {
        method: Method::Cartesian,
        vocab: vocab.clone(),
        automaton: Automaton::Product(automaton),
        initial,
        masks,
    })
}

/// Builds the agnostic guide (Outlines' index): states are the byte DFA's states. Only the
/// guide-size and time limits apply (there is no product).
///
/// The byte DFA is trimmed byte by byte, but a vocabulary need not spell every string: a
/// token can lead to a byte state from which no *token* sequence reaches acceptance (regex
/// `ab` with a token `a` and no `b`). Such tokens are removed from the masks, so the guide keeps
/// the invariant that every reachable state can finish (found by the `regex_guide` fuzzer).
pub fn build_agnostic(
    vocab: &Arc<Vocabulary>,
    trie: &TokenTrie,
    dfa: ByteDfa,
    limits: &ProductLimits,
) -> Result<Guide> {
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
    Ok(Guide {
        method: Method::Agnostic,
        vocab: vocab.clone(),
        automaton: Automaton::Product(automaton),
        initial,
        masks: MaskCache::new(n1, DEFAULT_MAX_MASK_CACHE_BYTES),
    })
}
