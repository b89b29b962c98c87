//! The part of a dense mask after a token that no class changes, made once per tokenizer.
//!
//! After a token of class `c`, a lazy guide state with one member whose first tokens `S` are
//! dense (a string's contents, the median first visit on Llama 3) has the mask
//!
//! ```text
//! (S & !lone & !F(c)) | B        (plus byte-fallback moves, special tokens, EOS)
//! ```
//!
//! where `B` is the union of the first tokens after the boundaries the member allows
//! (`crate::lazy::automaton`). Only `F(c)` depends on the class: inside a piece, which
//! boundaries a member allows and whether their piece starts are live do not. So with
//!
//! ```text
//! P = (S & !lone) | B
//! ```
//!
//! the mask is `P & (!F(c) | B)`: `F(c)` takes out of `P` only what `B` does not put back.
//!
//! # Why
//! Each string step ends after a token of a new class, so each is a new guide state and a first
//! visit, and its mask was made from four sets: a pass writing `S & !(lone | F(c))` (three
//! streams of 16 KB on Llama 3, or two and `F(c)`'s ids) and a pass ORing `B` into it (two
//! more). `P` is the same for every class and, since `S` and `B` are sets every guide of the
//! tokenizer shares (`Engine::first_tokens`, `TokenizerParts::same_dense_set`), for every
//! string of every schema: made once, it stays in cache, and a step reads `P`, `F(c)` and `B`
//! in one pass, or copies `P` and clears `F(c)`'s ids where `B` does not have them.
//!
//! # Invariants
//! * An entry is keyed by the addresses of `S` and of the sets whose union is `B`, and holds
//!   those sets: while it lives no other set takes one of those addresses, so a key names the
//!   same sets for as long as it is found. Equal sets at two addresses make two entries.
//! * `B ⊆ P`, so `P & (!F(c) | B)` equals `(S & !lone & !F(c)) | B` word for word.
//!
//! # Costs
//! An entry holds `P` (16 KB on Llama 3) and `B`; a tokenizer meets a few dozen. Entries are kept
//! within [`AFTER_CLASS_CACHE_BYTES`]; the cache is emptied when full, and a dropped entry is
//! made again, identically, on its next use.

use std::sync::Arc;

use crate::limits::AFTER_CLASS_CACHE_BYTES;
use crate::util::bitset;
use crate::util::concurrent::BoundedCache;
use crate::util::token_set::{TokenFilter, TokenSet};

/// See the module docs.
pub(crate) struct AfterClass {
    /// `P = (S & !lone) | B`.
    words: Box<[u32]>,
    /// `B`, `None` when no boundary leads to a live piece start.
    boundary: Option<TokenSet>,
    /// The sets the key names (held so that their addresses stay theirs).
    sets: Box<[Arc<TokenSet>]>,
}

impl AfterClass {
    /// `P` and `B` for the dense first tokens `set` and the first tokens after each boundary,
    /// `after`; `lone` is the lone tokens as a bitset.
    fn new(set: &Arc<TokenSet>, after: &[Arc<TokenSet>], lone: &[u32]) -> AfterClass {
        let s = set.as_dense().expect("a dense set");
        let boundary = match after {
            [] => None,
            [one] => Some((**one).clone()),
            many => {
                let mut union = vec![0u32; s.len()];
                many.iter().for_each(|set| set.or_into(&mut union));
                Some(TokenSet::from_bitset(union.into_boxed_slice()))
            }
        };
        let mut words: Box<[u32]> = s.iter().zip(lone).map(|(&s, &l)| s & !l).collect();
        if let Some(b) = &boundary {
            b.or_into(&mut words);
        }
        let sets = std::iter::once(set).chain(after).cloned().collect();
        AfterClass { words, boundary, sets }
    }

    fn bytes(&self) -> usize {
        (self.words.len() + self.boundary.as_ref().map_or(0, |b| b.heap_bytes() / 4)) * 4
            + self.sets.iter().map(|s| s.heap_bytes() + 8).sum::<usize>()
    }

    /// Writes `P & (!F | B)` into `out` (every word), where `forbidden` is `F(c)`: as a bitset of
    /// `out.len()` words when `forbidden_bits` is given, else as the ids of `forbidden_ids`.
    pub(crate) fn write(
        &self,
        forbidden_bits: Option<&[u32]>,
        forbidden_ids: &(impl TokenFilter + ?Sized),
        out: &mut [u32],
    ) {
        let p = &self.words[..];
        match (forbidden_bits, self.boundary.as_ref().map(|b| (b.as_dense(), b))) {
            (Some(f), None) => out.iter_mut().zip(p.iter().zip(f)).for_each(|(o, (&p, &f))| *o = p & !f),
            (Some(f), Some((Some(b), _))) => {
                for ((o, &p), (&f, &b)) in out.iter_mut().zip(p).zip(f.iter().zip(b)) {
                    *o = p & (!f | b);
                }
            }
            (Some(f), Some((None, b))) => {
                out.iter_mut().zip(p.iter().zip(f)).for_each(|(o, (&p, &f))| *o = p & !f);
                b.or_into(out);
            }
            (None, boundary) => {
                out.copy_from_slice(p);
                match boundary {
                    None => forbidden_ids.clear_from(out),
                    // A forbidden id stays where `B` has it.
                    Some((Some(b), _)) => forbidden_ids.for_each(|t| {
                        let w = (t >> 5) as usize;
                        out[w] &= !(1 << (t & 31)) | b[w];
                    }),
                    Some((None, b)) => {
                        forbidden_ids.clear_from(out);
                        b.or_into(out);
                    }
                }
            }
        }
        debug_assert!(self
            .boundary
            .as_ref()
            .is_none_or(|b| b.to_sorted().iter().all(|&t| bitset::contains(out, t as usize))));
    }
}

/// The [`AfterClass`] parts of a tokenizer's dense masks (see the module docs).
pub(crate) struct AfterClassCache {
    cache: BoundedCache<Box<[usize]>, Arc<AfterClass>>,
}

impl AfterClassCache {
    pub(crate) fn new() -> AfterClassCache {
        AfterClassCache { cache: BoundedCache::new(AFTER_CLASS_CACHE_BYTES) }
    }

    /// The part of the dense first tokens `set` and the sets after its boundaries, `after`:
    /// found by their addresses, or made (`lone`: the lone tokens as a bitset) and kept.
    pub(crate) fn get_or_make(&self, set: &Arc<TokenSet>, after: &[Arc<TokenSet>], lone: &[u32]) -> Arc<AfterClass> {
        let address = |set: &Arc<TokenSet>| Arc::as_ptr(set) as usize;
        let key: Box<[usize]> = std::iter::once(set).chain(after).map(address).collect();
        if let Some(part) = self.cache.get(&key) {
            return part;
        }
        let part = Arc::new(AfterClass::new(set, after, lone));
        let bytes = part.bytes() + key.len() * 8 + 64;
        // Another thread may have kept the same part first: either is the part.
        self.cache.insert(key, part, bytes)
    }

    /// How many parts are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::random::SplitMix64;

    /// `P & (!F | B)` is `(S & !lone & !F) | B` in every layout of `F` and `B`, against the
    /// formula computed bit by bit.
    #[test]
    fn the_part_and_a_class_give_the_mask() {
        let words = 8;
        let mut rng = SplitMix64::new(7);
        let mut random_bits = |density: u32| -> Box<[u32]> {
            (0..words).map(|_| (0..32).fold(0, |w, i| w | u32::from(rng.below(100) < density as usize) << i)).collect()
        };
        let s = Arc::new(TokenSet::Dense(random_bits(60)));
        let lone = random_bits(10);
        let f_bits = random_bits(30);
        let f_ids: Vec<u32> = bitset::iter_ones(&f_bits).map(|t| t as u32).collect();
        let dense_b = Arc::new(TokenSet::Dense(random_bits(50)));
        let sparse_b = Arc::new(TokenSet::from_sorted(&[3, 40, 77, 200], words));
        let other_b = Arc::new(TokenSet::from_sorted(&[5, 41, 255], words));
        let cases: [&[Arc<TokenSet>]; 4] =
            [&[], std::slice::from_ref(&dense_b), std::slice::from_ref(&sparse_b), &[sparse_b.clone(), other_b]];
        for after in cases {
            let mut want = vec![0u32; words];
            for t in 0..words * 32 {
                let b = after.iter().any(|set| set.contains(t as u32));
                let s = s.contains(t as u32) && !bitset::contains(&lone, t) && !bitset::contains(&f_bits, t);
                if s || b {
                    bitset::set(&mut want, t);
                }
            }
            let part = AfterClass::new(&s, after, &lone);
            for bits in [Some(&f_bits[..]), None] {
                let mut out = vec![u32::MAX; words];
                part.write(bits, &f_ids[..], &mut out);
                assert_eq!(out, want, "{} sets after, F as bits: {}", after.len(), bits.is_some());
            }
        }
    }

    #[test]
    fn parts_are_found_by_the_same_sets_only() {
        let cache = AfterClassCache::new();
        let lone = [0u32; 4];
        let a = Arc::new(TokenSet::Dense(vec![0b1010; 4].into()));
        let b = Arc::new(TokenSet::Dense(vec![0b1010; 4].into())); // equal to `a`, another set
        let after = Arc::new(TokenSet::from_sorted(&[1], 4));
        let first = cache.get_or_make(&a, &[], &lone);
        assert!(Arc::ptr_eq(&first, &cache.get_or_make(&a, &[], &lone)));
        assert!(!Arc::ptr_eq(&first, &cache.get_or_make(&b, &[], &lone)));
        let with_after = cache.get_or_make(&a, std::slice::from_ref(&after), &lone);
        assert!(!Arc::ptr_eq(&first, &with_after));
        assert_eq!(with_after.words[0], 0b1010 | 0b10);
        assert_eq!(cache.len(), 3);
    }
}
