//! Saving and loading compiled guides (the versioned, checksummed container of
//! [`crate::util::serialize`]).
//!
//! A guide refers to its vocabulary and, for canonical product guides, to the tokenizer DFA;
//! neither is stored. The file is keyed by the vocabulary's fingerprint and loaded through a
//! [`crate::compiler::Compiler`] for the same tokenizer, which supplies both. Everything read is
//! checked (state and token ids in range, sizes consistent) before a guide is built from it, so
//! a truncated, corrupted, stale or foreign file gives an error, never a wrong mask.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::guide::token_dfa::TokenDfa;
use crate::guide::{Automaton, Guide, Method, ProductAutomaton};
use crate::regex::byte_dfa::ByteDfa;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::bitset;
use crate::util::serialize::Sink;
use crate::util::serialize::{Reader, Writer};

const KIND: &[u8; 4] = b"GUID";
/// 2: pre-tokenized guides store deduplicated sparse-or-dense token sets.
const VERSION: u32 = 2;

fn bad(what: &str) -> Error {
    Error::InvalidArgument(format!("invalid serialized guide: {what}"))
}

/// Serialises a guide.
pub fn guide_to_bytes(guide: &Guide) -> Result<Vec<u8>> {
    let mut w = Writer::default();
    w.u8(match guide.method {
        Method::Agnostic => 0,
        Method::Cartesian => 1,
        Method::Direct => 2,
    });
    w.u32(guide.initial);
    match &guide.automaton {
        Automaton::Product(p) => {
            w.u8(0);
            p.dfa.write(&mut w);
            w.u32s(&p.states.iter().flat_map(|&(a, b)| [a, b]).collect::<Vec<_>>());
            w.u64(p.base_masks.len() as u64);
            for m in &p.base_masks {
                w.u32s(m);
            }
            for edges in &p.byte_edges {
                let flat: Vec<u32> = edges.iter().flat_map(|e| e.iter().flat_map(|&(t, s)| [t, s])).collect();
                w.u32s(&flat);
            }
        }
        Automaton::TokenDfa { dfa, distance } => {
            w.u8(1);
            w.u32(dfa.start);
            w.u32s(&dfa.accepting.iter().map(|&a| a as u32).collect::<Vec<_>>());
            for tr in &dfa.transitions {
                w.u32s(&tr.iter().flat_map(|&(t, s)| [t, s]).collect::<Vec<_>>());
            }
            w.u32s(distance);
        }
        Automaton::PreTokenized(p) => {
            w.u8(2);
            p.write(&mut w);
        }
        Automaton::Lazy(_) | Automaton::MaxMatch(_) => {
            return Err(Error::Unsupported(
                "a lazy guide builds its states as it is used and cannot be saved: materialize() it first, or \
                 compile with lazy=False"
                    .into(),
            ))
        }
    }
    Ok(w.finish(KIND, VERSION, guide.vocab.fingerprint()))
}

/// Loads a guide written by [`guide_to_bytes`] for `vocab`; `tokenizer_dfa` is the compiler's
/// (needed by canonical product guides).
pub fn guide_from_bytes(
    bytes: &[u8],
    vocab: &Arc<Vocabulary>,
    tokenizer_dfa: impl FnOnce() -> Result<Arc<TokenizerDfa>>,
) -> Result<Guide> {
    let mut r = Reader::open(bytes, KIND, VERSION, vocab.fingerprint())?;
    let method = match r.u8()? {
        0 => Method::Agnostic,
        1 => Method::Cartesian,
        2 => Method::Direct,
        _ => return Err(bad("unknown method")),
    };
    let initial = r.u32()?;
    let n_tokens = vocab.num_tokens() as u32;
    let words = bitset::words_for(vocab.vocab_size());
    let automaton = match (r.u8()?, method) {
        (0, Method::Agnostic | Method::Cartesian) => {
            let dfa = ByteDfa::read(&mut r)?;
            let flat = r.u32s()?;
            if flat.len() % 2 != 0 {
                return Err(bad("state table"));
            }
            let states: Vec<(u32, u32)> = flat.chunks_exact(2).map(|c| (c[0], c[1])).collect();
            let tok = if method == Method::Cartesian { Some(tokenizer_dfa()?) } else { None };
            let q2_limit = tok.as_ref().map_or(1, |d| d.num_states() as u32);
            if states.iter().any(|&(q1, q2)| q1 as usize >= dfa.num_states() || q2 >= q2_limit) {
                return Err(bad("state out of range"));
            }
            let n_masks = r.u64()? as usize;
            if n_masks != dfa.num_states() {
                return Err(bad("mask count"));
            }
            let mut base_masks = Vec::with_capacity(n_masks);
            for _ in 0..n_masks {
                let m = r.u32s()?;
                if !m.is_empty() && m.len() != words {
                    return Err(bad("mask width"));
                }
                if bitset::iter_ones(&m).any(|t| t as u32 >= n_tokens) {
                    return Err(bad("mask allows an id past the tokenizer"));
                }
                base_masks.push(m.into_boxed_slice());
            }
            if states.iter().any(|&(q1, _)| base_masks[q1 as usize].is_empty()) {
                return Err(bad("missing mask"));
            }
            let mut byte_edges = Vec::with_capacity(states.len());
            for _ in 0..states.len() {
                let flat = r.u32s()?;
                if flat.len() % 2 != 0
                    || flat.chunks_exact(2).any(|c| c[0] >= n_tokens || c[1] as usize >= states.len())
                {
                    return Err(bad("byte edges"));
                }
                byte_edges
                    .push((!flat.is_empty()).then(|| Arc::new(flat.chunks_exact(2).map(|c| (c[0], c[1])).collect())));
            }
            let index: FxHashMap<(u32, u32), u32> = states.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();
            if index.len() != states.len() {
                return Err(bad("duplicate states"));
            }
            Automaton::Product(ProductAutomaton { tokenizer_dfa: tok, dfa, states, index, base_masks, byte_edges })
        }
        (1, Method::Direct) => {
            let start = r.u32()?;
            let accepting: Vec<bool> = r.u32s()?.into_iter().map(|a| a != 0).collect();
            let n = accepting.len();
            let mut transitions = Vec::with_capacity(n);
            for _ in 0..n {
                let flat = r.u32s()?;
                if flat.len() % 2 != 0 {
                    return Err(bad("transitions"));
                }
                let tr: Vec<(u32, u32)> = flat.chunks_exact(2).map(|c| (c[0], c[1])).collect();
                if tr.windows(2).any(|w| w[0].0 >= w[1].0) || tr.iter().any(|&(t, s)| t >= n_tokens || s as usize >= n)
                {
                    return Err(bad("transition out of range or unsorted"));
                }
                transitions.push(tr);
            }
            let distance = r.u32s()?;
            if distance.len() != n || start as usize >= n.max(1) {
                return Err(bad("sizes"));
            }
            Automaton::TokenDfa { dfa: TokenDfa { start, accepting, transitions }, distance }
        }
        (2, Method::Cartesian) => Automaton::PreTokenized(crate::guide::pre_tokenized::PreTokenizedAutomaton::read(
            &mut r,
            tokenizer_dfa()?,
            vocab,
        )?),
        _ => return Err(bad("automaton kind does not match the method")),
    };
    r.expect_end()?;
    let guide = Guide::new(method, vocab.clone(), automaton, initial);
    if initial as usize >= guide.num_states() {
        return Err(bad("initial state out of range"));
    }
    Ok(guide)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compiler::Compiler, limits::Limits};

    #[test]
    fn round_trip_every_method_and_reject_corruption() {
        let vocab = Arc::new(
            Vocabulary::char_bpe_for_tests(&["a", "b", "c", "ab", "aa", "ac"], &[("a", "b"), ("a", "a"), ("a", "c")])
                .unwrap(),
        );
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        for method in [Method::Agnostic, Method::Cartesian, Method::Direct] {
            let guide = compiler.compile_regex("(ab|a|c)*b?", method).unwrap();
            let bytes = guide_to_bytes(&guide).unwrap();
            let back = guide_from_bytes(&bytes, &vocab, || compiler.tokenizer_dfa().cloned()).unwrap();
            assert_eq!(back.method(), method);
            assert_eq!(guide.first_difference(&back), Ok(None), "{method:?}");
            for cut in [0, 10, 39, 40, bytes.len() / 2, bytes.len() - 1] {
                assert!(guide_from_bytes(&bytes[..cut], &vocab, || compiler.tokenizer_dfa().cloned()).is_err());
            }
            for i in (0..bytes.len()).step_by(7) {
                let mut b = bytes.clone();
                b[i] ^= 0x41;
                assert!(guide_from_bytes(&b, &vocab, || compiler.tokenizer_dfa().cloned()).is_err(), "flip at {i}");
            }
        }
        let other = Arc::new(Vocabulary::char_bpe_for_tests(&["a", "b", "c", "ab"], &[("a", "b")]).unwrap());
        let g = compiler.compile_regex("ab", Method::Cartesian).unwrap();
        assert!(
            guide_from_bytes(&guide_to_bytes(&g).unwrap(), &other, || Err(bad("unused"))).is_err(),
            "other tokenizer"
        );
    }
}
