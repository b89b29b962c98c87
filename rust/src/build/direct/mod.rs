//! Explicit canonical token DFAs for `method="direct"`.
//!
//! A `direct` guide stores its automaton as states with explicit token transitions
//! ([`TokenDfa`]) instead of CartesianMerge's product representation. Two ways to get one:
//! * **DirectMerge** (appendix Algorithms 1–2, [`crate::build::direct::merge`]): rewrite the regex's
//!   base-symbol DFA merge by merge. Its correctness proof assumes BPE applies each merge in one
//!   sequential pass; Hugging Face's priority BPE agrees exactly when the merge table is
//!   well-ordered ([`crate::tokenizer::bpe::MergeTable::is_well_ordered`]), so it is used then.
//! * **Materialising the CartesianMerge product**: every relevant product state becomes a state
//!   and its allowed tokens become transitions, then Moore-minimised. This is exact for every
//!   tokenizer the tokenizer DFA supports (Mistral-7B's and Llama 2's tables are not
//!   well-ordered), and is what `direct` does for them.
//!
//! Explicit DFAs can be much larger than the product representation (a JSON string state
//! allows ~30k tokens from each of thousands of product states); the sizes are checked against
//! `max_direct_states` / `max_direct_transitions` *before* anything is materialised.

pub mod merge;

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::guide::token_dfa::TokenDfa;
use crate::guide::{Automaton, Guide, Method};
use crate::limits::TokenDfaLimits;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::bitset;

/// The explicit DFA of a (product) guide's relevant states, without EOS transitions.
pub fn materialize(guide: &Guide, limits: TokenDfaLimits) -> Result<TokenDfa> {
    let n = guide.num_states();
    limits.check_states(n, "states of the explicit token DFA")?;
    let eos = guide.eos_token_ids();
    let mut scratch = vec![0u32; guide.mask_words()];
    let mut total = 0usize;
    for s in 0..n as u32 {
        guide.write_mask(s, &mut scratch)?;
        total += bitset::count(&scratch) - if guide.is_final(s) { eos.len() } else { 0 };
        limits.check_transitions(total, "transitions of the explicit token DFA")?;
    }
    let mut transitions = Vec::with_capacity(n);
    for s in 0..n as u32 {
        guide.write_mask(s, &mut scratch)?;
        let tr: Vec<(u32, u32)> = bitset::iter_ones(&scratch)
            .map(|t| t as u32)
            .filter(|t| !eos.contains(t))
            .map(|t| Ok((t, guide.next_state(s, t)?)))
            .collect::<Result<_>>()?;
        transitions.push(tr);
    }
    Ok(TokenDfa {
        start: guide.initial_state(),
        accepting: (0..n as u32).map(|s| guide.is_final(s)).collect(),
        transitions,
    })
}

/// Moore minimisation: states are split by (accepting, tokens, classes of targets) until stable.
pub fn minimize(dfa: &TokenDfa) -> TokenDfa {
    let n = dfa.num_states();
    if n == 0 {
        return dfa.clone();
    }
    let mut class: Vec<u32> = dfa.accepting.iter().map(|&a| a as u32).collect();
    let mut num_classes = 0;
    loop {
        let mut ids: FxHashMap<(u32, Vec<(u32, u32)>), u32> = FxHashMap::default();
        let next: Vec<u32> = (0..n)
            .map(|s| {
                let sig = (class[s], dfa.transitions[s].iter().map(|&(t, to)| (t, class[to as usize])).collect());
                let k = ids.len() as u32;
                *ids.entry(sig).or_insert(k)
            })
            .collect();
        let count = ids.len();
        class = next;
        if count == num_classes {
            break;
        }
        num_classes = count;
    }
    let mut accepting = vec![false; num_classes];
    let mut transitions = vec![Vec::new(); num_classes];
    let mut done = vec![false; num_classes];
    for s in 0..n {
        let c = class[s] as usize;
        if !done[c] {
            done[c] = true;
            accepting[c] = dfa.accepting[s];
            transitions[c] = dfa.transitions[s].iter().map(|&(t, to)| (t, class[to as usize])).collect();
        }
    }
    TokenDfa { start: class[dfa.start as usize], accepting, transitions }.trim()
}

/// The regex's DFA over base symbols: one transition per character token present in the
/// vocabulary, byte-fallback tokens for the characters that are not (through the tokenizer
/// DFA's fallback automaton). This is DirectMerge's input.
pub fn base_symbol_dfa(
    dfa: &ByteDfa,
    vocab: &Vocabulary,
    tok: &TokenizerDfa,
    limits: TokenDfaLimits,
) -> Result<TokenDfa> {
    let symbols: Vec<u32> = (0..vocab.num_tokens() as u32)
        .filter(|&t| {
            tok.class_of(t) != crate::tokenizer_dfa::NO_CLASS
                && std::str::from_utf8(vocab.token_bytes(t)).is_ok_and(|s| s.chars().count() == 1)
        })
        .collect();
    let mut index: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    let mut states: Vec<(u32, u32)> = vec![(dfa.start(), tok.initial())];
    index.insert(states[0], 0);
    let mut transitions: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut i = 0;
    while i < states.len() {
        let (q1, q2) = states[i];
        i += 1;
        let mut tr = Vec::new();
        let mut target = |p: (u32, u32), states: &mut Vec<(u32, u32)>| -> Result<u32> {
            if let Some(&id) = index.get(&p) {
                return Ok(id);
            }
            limits.check_states(states.len() + 1, "states of the base-symbol DFA")?;
            let id = states.len() as u32;
            index.insert(p, id);
            states.push(p);
            Ok(id)
        };
        if tok.is_class(q2) {
            for &t in &symbols {
                let to = dfa.walk(q1, vocab.token_bytes(t));
                if to != DEAD {
                    tr.push((t, target((to, tok.initial()), &mut states)?));
                }
            }
        }
        if let Some(fb) = tok.fallback_tokens() {
            for b in 0..=255u8 {
                let to = dfa.next(q1, b);
                if to == DEAD {
                    continue;
                }
                if let Some(q2n) = tok.step_byte(q2, b) {
                    tr.push((fb[b as usize], target((to, q2n), &mut states)?));
                }
            }
        }
        tr.sort_unstable();
        transitions.push(tr);
    }
    let accepting = states.iter().map(|&(q1, q2)| dfa.is_accepting(q1) && tok.is_class(q2)).collect();
    Ok(TokenDfa { start: 0, accepting, transitions }.trim())
}

/// Fewest tokens from each state to acceptance.
fn distances(dfa: &TokenDfa) -> Vec<u32> {
    let n = dfa.num_states();
    let mut reverse: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (s, tr) in dfa.transitions.iter().enumerate() {
        for &(_, to) in tr {
            reverse[to as usize].push(s as u32);
        }
    }
    let mut dist = vec![u32::MAX; n];
    let mut queue: std::collections::VecDeque<u32> = (0..n as u32).filter(|&s| dfa.accepting[s as usize]).collect();
    for &s in &queue {
        dist[s as usize] = 0;
    }
    while let Some(s) = queue.pop_front() {
        for &p in &reverse[s as usize] {
            if dist[p as usize] == u32::MAX {
                dist[p as usize] = dist[s as usize] + 1;
                queue.push_back(p);
            }
        }
    }
    dist
}

/// Wraps an explicit DFA, built by `method`, into a guide.
pub fn token_dfa_guide(vocab: &Arc<Vocabulary>, dfa: TokenDfa, method: Method) -> Result<Guide> {
    if dfa.num_states() == 0 {
        let which = if method == Method::Agnostic { "token sequence" } else { "canonical token sequence" };
        return Err(Error::EmptyLanguage(format!("no {which} spells a string of the regex")));
    }
    let distance = distances(&dfa);
    let initial = dfa.start;
    Ok(Guide::new(method, vocab.clone(), Automaton::TokenDfa { dfa, distance }, initial))
}
