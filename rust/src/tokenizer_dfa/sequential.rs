//! The appendix's BuildTokenizerDFA (Algorithm 3, with the §5.3 indexes).
//!
//! Every token `t` points to one state `δ(S0, t)`; each state has a set `f` of forbidden next
//! tokens. Merges are processed in rank order; merge `(a, b)`:
//! * is skipped when `b ∈ f(δ(a))` (an `a` followed by `b` can never occur, lines 9–10);
//! * otherwise adds `b` to the forbidden set of `a`'s state — after splitting `a` off into a
//!   fresh state when `a = b` or when other tokens share its state (lines 11–16);
//! * sends `ab` to `b`'s state (line 17), and forbids `ab` wherever `a` is forbidden
//!   (lines 18–19), found through the index "token → states forbidding it" (§5.3).
//!
//! The proof assumes `tokenize` applies each merge in one left-to-right pass over the whole
//! sequence. Hugging Face's BPE merges by priority instead; the two agree exactly when the merge
//! table is well-ordered ([`crate::tokenizer::bpe::MergeTable::is_well_ordered`]), which is when
//! [`crate::tokenizer_dfa::TokenizerDfa::build`] uses this construction. A token produced by two
//! different merges is outside the algorithm's model as well (line 17 would send the token's
//! transitions to two different states); such tables also go to the priority-timeline
//! construction.

use rustc_hash::FxHashSet;

use crate::tokenizer::vocab::Vocabulary;

/// The state each token leads to ([`NONE`] for a token that never exists as a part) and each
/// state's forbidden next tokens. Tokens share states, so the sets are kept per state, never
/// copied per token (o200k: 813 M forbidden ids counted per token).
pub struct States {
    pub state_of: Vec<u32>,
    pub forbidden: Vec<FxHashSet<u32>>,
}

/// No state: the token never exists as a part.
pub const NONE: u32 = u32::MAX;

/// Runs the algorithm over the merges; `emittable` tokens that encode to themselves start in
/// state 0 (the empty set).
pub fn states(vocab: &Vocabulary, emittable: &[bool]) -> States {
    let n = vocab.num_tokens();
    let mut delta = vec![NONE; n];
    let mut f: Vec<FxHashSet<u32>> = vec![FxHashSet::default()];
    let mut sharing: Vec<u32> = vec![0];
    let mut forbidding: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut symbols = Vec::new();
    for t in 0..n as u32 {
        if emittable[t as usize] && vocab.base_symbols(vocab.token_bytes(t), &mut symbols) && symbols == [t] {
            delta[t as usize] = 0;
            sharing[0] += 1;
        }
    }
    for m in vocab.merges() {
        let (a, b, ab) = (m.left as usize, m.right as usize, m.merged as usize);
        if delta[a] == NONE || delta[b] == NONE {
            continue; // a part that never exists
        }
        let (s, s_b) = (delta[a] as usize, delta[b]);
        if f[s].contains(&m.right) {
            continue;
        }
        if a == b || sharing[s] > 1 {
            let mut split = f[s].clone();
            split.insert(m.right);
            let id = f.len() as u32;
            for &x in &split {
                forbidding[x as usize].push(id);
            }
            f.push(split);
            sharing.push(1);
            sharing[s] -= 1;
            delta[a] = id;
        } else {
            f[s].insert(m.right);
            forbidding[b].push(s as u32);
        }
        if delta[ab] != NONE {
            sharing[delta[ab] as usize] -= 1;
        }
        delta[ab] = s_b;
        sharing[s_b as usize] += 1;
        let states = forbidding[a].clone();
        for st in states {
            if f[st as usize].insert(m.merged) {
                forbidding[ab].push(st);
            }
        }
    }
    States { state_of: delta, forbidden: f }
}
