//! A guide's cache of computed masks, bounded in bytes (`max_mask_cache_bytes`).
//!
//! A mask is computed from two precomputed sets (see `guide`) in a few microseconds; caching it
//! makes later visits to the state a plain copy (tens of nanoseconds). A guide is shared by every
//! request that uses its schema, so over a server's lifetime the cache can grow towards one mask
//! per state — `states × vocab/8` bytes, gigabytes for a large guide over a 128k vocabulary. The
//! cache therefore has a byte budget: past it, masks of uncached states are computed on each
//! request instead of stored. Results never change, only their cost.
//!
//! A mask of at most `words / SPARSE_DIVISOR` tokens (a key's, a literal's, a number's end) is
//! kept as its token ids, not as a bitset: 4 bytes a token instead of 16 KB on a 128k vocabulary,
//! and a first visit copies the few ids out of the caller's buffer instead of allocating,
//! zeroing and copying a whole mask (~1.7 µs of a lazy guide's first visit on Llama 3, see
//! `docs/design.md` §8). A lazy guide's narrow states hand over their ids as they make them, so
//! that the buffer is not scanned for them; a mask dense in its first words is copied without
//! collecting ids first.
//!
//! A dense mask after a token inside a string is kept as a [`Recipe`] (`crate::lazy::automaton`):
//! its words would be 16 KB of cold memory written at each first visit, and a string's steps
//! are nearly all first visits. A revisit then makes the mask again in one pass over words the
//! tokenizer's guides share (Llama 3: ~1.9 µs against a copy's ~1.0; the first visit ~3.3
//! against ~4.8, see `docs/design.md` §8).
//!
//! Slots are made on demand ([`crate::util::concurrent::Slots`]), so a lazy guide, whose states
//! are numbered as decoders reach them, uses the same cache.
//!
//! # Invariants
//! * A slot, once set, is never changed or freed while the cache lives (so views of it can be
//!   handed out without copying).
//! * `bytes` is the total size of the set slots, and never exceeds `max_bytes` (reservations are
//!   made before a slot is filled and returned when another thread filled it first).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::util::bitset::{self, Filled, Recipe};
use crate::util::concurrent::Slots;

/// A mask of at most `words / SPARSE_DIVISOR` tokens is kept as ids (at most 1/8 of the bitset's
/// bytes).
const SPARSE_DIVISOR: usize = 8;

/// The most tokens a mask of `words` words is kept as ids.
pub(crate) fn max_ids(words: usize) -> usize {
    words / SPARSE_DIVISOR
}

/// Words [`Cached::of`] counts first, to tell a dense mask at once.
const DENSE_PROBE_WORDS: usize = 64;

/// Words [`Cached::of`] tests for zero at once.
const SCAN_BLOCK: usize = 16;

/// A cached mask.
enum Cached {
    /// The mask's words.
    Bits(Box<[u32]>),
    /// The ids of its tokens, ascending.
    Ids(Box<[u32]>),
    /// How to write it.
    Recipe(Arc<dyn Recipe>),
}

impl Cached {
    /// The compact form of `mask`: its ids when it has few tokens, else a copy of its words.
    fn of(mask: &[u32]) -> Cached {
        let most = max_ids(mask.len());
        // A dense mask (a string's contents) has more than `most` tokens in its first words:
        // counted there, it is copied without collecting `most` ids first.
        if bitset::count_past(&mask[..mask.len().min(DENSE_PROBE_WORDS)], most) > most {
            return Cached::Bits(mask.into());
        }
        let mut ids = Vec::new();
        // The ids of `words`, the first at word `at`; `false` past `most`.
        let mut take = |at: usize, words: &[u32]| {
            for (i, &w) in words.iter().enumerate() {
                if ids.len() + w.count_ones() as usize > most {
                    return false;
                }
                let base = ((at + i) * 32) as u32;
                let mut w = w;
                while w != 0 {
                    ids.push(base + w.trailing_zeros());
                    w &= w - 1;
                }
            }
            true
        };
        // Blocks of zero words are skipped by one OR each: a narrow mask over a 128k vocabulary
        // is ~4,000 words, nearly all zero. Fixed-size blocks, so that the OR is vectorized (over
        // slices of any length it was a word at a time: 9,000 instructions a first visit).
        let (blocks, rest) = mask.split_at(mask.len() - mask.len() % SCAN_BLOCK);
        for (b, block) in blocks.chunks_exact(SCAN_BLOCK).enumerate() {
            let block: &[u32; SCAN_BLOCK] = block.try_into().expect("a whole block");
            if block.iter().fold(0, |acc, &w| acc | w) != 0 && !take(b * SCAN_BLOCK, block) {
                return Cached::Bits(mask.into());
            }
        }
        if !take(blocks.len(), rest) {
            return Cached::Bits(mask.into());
        }
        Cached::Ids(ids.into_boxed_slice())
    }

    fn bytes(&self) -> usize {
        match self {
            Cached::Bits(words) | Cached::Ids(words) => words.len() * 4,
            Cached::Recipe(recipe) => recipe.heap_bytes() + 16,
        }
    }

    fn write(&self, out: &mut [u32]) {
        match self {
            Cached::Bits(words) => out.copy_from_slice(words),
            Cached::Recipe(recipe) => recipe.write(out),
            Cached::Ids(ids) => {
                out.fill(0);
                ids.iter().for_each(|&t| bitset::set(out, t as usize));
            }
        }
    }
}

/// See the module docs.
pub struct MaskCache {
    slots: Slots<Cached>,
    bytes: AtomicUsize,
    max_bytes: usize,
}

impl MaskCache {
    pub fn new(max_bytes: usize) -> MaskCache {
        MaskCache { slots: Slots::default(), bytes: AtomicUsize::new(0), max_bytes }
    }

    /// Bytes held by cached masks.
    pub fn cached_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The cached words of `state`, when its mask is cached as a bitset.
    pub fn words(&self, state: usize) -> Option<&[u32]> {
        match self.slots.get(state)? {
            Cached::Bits(words) => Some(words),
            Cached::Ids(_) | Cached::Recipe(_) => None,
        }
    }

    /// Writes the cached mask of `state` into `out`; `false` (and `out` untouched) when it is not
    /// cached.
    pub fn write(&self, state: usize, out: &mut [u32]) -> bool {
        match self.slots.get(state) {
            Some(cached) => {
                cached.write(out);
                true
            }
            None => false,
        }
    }

    /// Writes the mask of `state` into `out`: the cached one, or one computed by `compute` into
    /// `out` (outside any lock) and then cached when the budget allows. `compute` must write
    /// every word of `out`, which holds whatever the caller left there (as
    /// `crate::guide::Guide::write_mask` does: zeroing it here as well cost a second 16 KB
    /// memset per first visit on a 128k vocabulary). It may return the mask's ids when it knows
    /// them (a mask of few tokens is then kept without scanning `out`), or a recipe (kept
    /// instead of the words).
    pub fn write_or_compute<E>(
        &self,
        state: usize,
        out: &mut [u32],
        compute: impl FnOnce(&mut [u32]) -> Result<Filled, E>,
    ) -> Result<(), E> {
        if self.write(state, out) {
            return Ok(());
        }
        let filled = compute(out)?;
        self.store(state, out, filled);
        Ok(())
    }

    /// Caches `mask` (of which `filled` tells what is known) as the mask of `state` unless it
    /// is cached already or the budget is spent.
    fn store(&self, state: usize, mask: &[u32], filled: Filled) {
        if self.slots.get(state).is_some() {
            return;
        }
        let cached = match filled {
            Filled::Ids(mut ids) if ids.len() <= max_ids(mask.len()) => {
                ids.sort_unstable();
                ids.dedup();
                debug_assert!(ids.iter().all(|&t| bitset::contains(mask, t as usize)));
                Cached::Ids(ids.into_boxed_slice())
            }
            Filled::Recipe(recipe) => Cached::Recipe(recipe),
            Filled::Words | Filled::Ids(_) => Cached::of(mask),
        };
        let size = cached.bytes();
        let reserved = self.bytes.fetch_add(size, Ordering::Relaxed) + size;
        if reserved > self.max_bytes {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            return;
        }
        if !self.slots.try_set(state, cached).1 {
            self.bytes.fetch_sub(size, Ordering::Relaxed); // another thread filled it first
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `write_or_compute` with a mask of the given words; the closure panics if called when
    /// `cached` says it must not be.
    fn fill(cache: &MaskCache, state: usize, words: &[u32], cached: bool) -> Result<Vec<u32>, ()> {
        let mut out = vec![u32::MAX; words.len()];
        cache.write_or_compute(state, &mut out, |m| {
            assert!(!cached, "recomputed a cached mask");
            m.copy_from_slice(words);
            Ok(Filled::Words)
        })?;
        Ok(out)
    }

    #[test]
    fn caches_within_the_budget_and_computes_past_it() {
        // 16 words: a mask of at most 2 tokens is kept as ids.
        let sparse: Vec<u32> = (0..16).map(|i| if i == 3 { 0b101 } else { 0 }).collect();
        let dense: Vec<u32> = (0..16).map(|i| i as u32 * 7).collect();
        let cache = MaskCache::new(8 + 64);
        assert_eq!(fill(&cache, 0, &sparse, false), Ok(sparse.clone()));
        assert_eq!(cache.cached_bytes(), 8, "two ids");
        assert_eq!(cache.words(0), None);
        // Cached: written from the ids without computing, over whatever `out` held.
        assert_eq!(fill(&cache, 0, &sparse, true), Ok(sparse.clone()));
        assert_eq!(fill(&cache, 1, &dense, false), Ok(dense.clone()));
        assert_eq!(cache.cached_bytes(), 8 + 64);
        assert_eq!(cache.words(1), Some(&dense[..]));
        assert_eq!(fill(&cache, 1, &dense, true), Ok(dense.clone()));
        // Past the budget: computed each time, nothing stored.
        assert_eq!(fill(&cache, 2, &dense, false), Ok(dense.clone()));
        assert_eq!(fill(&cache, 2, &dense, false), Ok(dense.clone()));
        assert_eq!(cache.cached_bytes(), 8 + 64);
        // A failed computation caches nothing.
        let cache = MaskCache::new(1 << 20);
        assert_eq!(cache.write_or_compute(0, &mut [0u32; 16], |_| Err("limit")), Err("limit"));
        assert_eq!(cache.cached_bytes(), 0);
        assert!(!cache.write(0, &mut [0u32; 16]));
    }

    #[test]
    fn a_mask_is_kept_as_ids_up_to_an_eighth_of_its_words() {
        for tokens in [0usize, 1, 63, 64, 65, 200] {
            let mut mask = vec![0u32; 512];
            (0..tokens).for_each(|i| bitset::set(&mut mask, i * 251 % (512 * 32)));
            let cached = Cached::of(&mask);
            assert_eq!(matches!(cached, Cached::Ids(_)), tokens <= 64, "{tokens} tokens");
            let mut out = vec![u32::MAX; 512];
            cached.write(&mut out);
            assert_eq!(out, mask, "{tokens} tokens");
        }
    }

    #[test]
    fn known_ids_are_kept_as_given_and_dense_masks_as_words() {
        // 512 words: at most 64 ids. The ids a computation reports are kept, and give back its
        // mask; past 64 the words are kept.
        let cache = MaskCache::new(usize::MAX);
        for (state, tokens) in [(0usize, 3usize), (1, 64), (2, 65)] {
            let ids: Vec<u32> = (0..tokens as u32).map(|i| i * 97 + 5).collect();
            let mut mask = vec![0u32; 512];
            ids.iter().for_each(|&t| bitset::set(&mut mask, t as usize));
            // Reported in no order, the first repeated.
            let reported: Vec<u32> = ids.iter().rev().copied().chain(ids.first().copied()).collect();
            let mut out = vec![u32::MAX; 512];
            cache
                .write_or_compute(state, &mut out, |m| {
                    m.copy_from_slice(&mask);
                    Ok::<_, ()>(Filled::Ids(reported.clone()))
                })
                .unwrap();
            assert_eq!(cache.words(state).is_none(), tokens <= 64, "{tokens} tokens");
            let mut again = vec![u32::MAX; 512];
            assert!(cache.write(state, &mut again));
            assert_eq!(again, mask, "{tokens} tokens");
        }
        // Dense in its first words (every token below 2,048, the probe's 64 words): words.
        let mut mask = vec![0u32; 512];
        (0..2048).step_by(3).for_each(|t| bitset::set(&mut mask, t));
        let cached = Cached::of(&mask);
        assert!(matches!(cached, Cached::Bits(_)));
        let mut out = vec![0u32; 512];
        cached.write(&mut out);
        assert_eq!(out, mask);
    }

    /// Writes its words, counting its writes.
    struct Counted(Vec<u32>, AtomicUsize);

    impl Recipe for Counted {
        fn write(&self, out: &mut [u32]) {
            self.1.fetch_add(1, Ordering::Relaxed);
            out.copy_from_slice(&self.0);
        }
        fn heap_bytes(&self) -> usize {
            24
        }
    }

    #[test]
    fn a_recipe_is_kept_instead_of_the_words_and_written_on_each_visit() {
        let cache = MaskCache::new(usize::MAX);
        let dense: Vec<u32> = (0..64).map(|i| i as u32 * 7 + 1).collect();
        let recipe = Arc::new(Counted(dense.clone(), AtomicUsize::new(0)));
        let mut out = vec![0u32; 64];
        cache
            .write_or_compute(0, &mut out, |m| {
                m.copy_from_slice(&dense);
                Ok::<_, ()>(Filled::Recipe(recipe.clone()))
            })
            .unwrap();
        assert_eq!(cache.cached_bytes(), 24 + 16, "the recipe's bytes, not the words'");
        assert_eq!(cache.words(0), None, "no words to borrow");
        let mut again = vec![u32::MAX; 64];
        assert!(cache.write(0, &mut again));
        assert_eq!((again, recipe.1.load(Ordering::Relaxed)), (dense, 1));
    }

    #[test]
    fn concurrent_fills_count_each_slot_once() {
        let cache = MaskCache::new(usize::MAX);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for state in 0..64 {
                        let mut out = [0u32; 16];
                        let fill = |m: &mut [u32]| -> Result<Filled, ()> {
                            m.iter_mut().for_each(|w| *w = state as u32 + 1);
                            Ok(Filled::Words)
                        };
                        cache.write_or_compute(state, &mut out, fill).unwrap();
                        assert_eq!(out, [state as u32 + 1; 16]);
                    }
                });
            }
        });
        assert_eq!(cache.cached_bytes(), 64 * 64);
    }
}
