//! A guide's cache of computed masks, bounded in bytes (`max_mask_cache_bytes`).
//!
//! A mask is computed from two precomputed sets (see `guide`) in a few microseconds; caching it
//! makes later visits to the state a plain copy (tens of nanoseconds). A guide is shared by every
//! request that uses its schema, so over a server's lifetime the cache can grow towards one mask
//! per state — `states × vocab/8` bytes, gigabytes for a large guide over a 128k vocabulary. The
//! cache therefore has a byte budget: past it, masks of uncached states are computed on each
//! request instead of stored. Results never change, only their cost.
//!
//! # Invariants
//! * A slot, once set, is never changed or freed while the cache lives (so views of it can be
//!   handed out without copying).
//! * `bytes` is the total size of the set slots, and never exceeds `max_bytes` (reservations are
//!   made before a slot is filled and returned when another thread filled it first).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// See the module docs.
pub struct MaskCache {
    slots: Box<[OnceLock<Box<[u32]>>]>,
    bytes: AtomicUsize,
    max_bytes: usize,
}

impl MaskCache {
    pub fn new(num_states: usize, max_bytes: usize) -> MaskCache {
        MaskCache { slots: (0..num_states).map(|_| OnceLock::new()).collect(), bytes: AtomicUsize::new(0), max_bytes }
    }

    pub fn num_states(&self) -> usize {
        self.slots.len()
    }

    /// Bytes held by cached masks.
    pub fn cached_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The cached mask of `state`, computing it with `compute` (into a zeroed buffer of `words`
    /// words) when the budget allows; `None` when it is not cached and the budget is spent.
    pub fn get_or_compute(&self, state: usize, words: usize, compute: impl FnOnce(&mut [u32])) -> Option<&[u32]> {
        let slot = &self.slots[state];
        if let Some(mask) = slot.get() {
            return Some(mask);
        }
        let size = words * 4;
        let reserved = self.bytes.fetch_add(size, Ordering::Relaxed) + size;
        if reserved > self.max_bytes {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            return slot.get().map(|m| &**m);
        }
        let mut filled_here = false;
        let mask = slot.get_or_init(|| {
            filled_here = true;
            let mut m = vec![0u32; words].into_boxed_slice();
            compute(&mut m);
            m
        });
        if !filled_here {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
        }
        Some(mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_within_the_budget_and_computes_nothing_past_it() {
        let cache = MaskCache::new(3, 8); // room for two 1-word masks
        assert_eq!(cache.get_or_compute(0, 1, |m| m[0] = 7), Some(&[7u32][..]));
        // Cached: the closure does not run again.
        assert_eq!(cache.get_or_compute(0, 1, |_| panic!("recomputed")), Some(&[7u32][..]));
        assert_eq!(cache.get_or_compute(1, 1, |m| m[0] = 9), Some(&[9u32][..]));
        assert_eq!(cache.cached_bytes(), 8);
        assert_eq!(cache.get_or_compute(2, 1, |_| panic!("over budget")), None);
        assert_eq!(cache.cached_bytes(), 8);
    }

    #[test]
    fn concurrent_fills_count_each_slot_once() {
        let cache = MaskCache::new(64, usize::MAX);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for state in 0..64 {
                        assert_eq!(cache.get_or_compute(state, 2, |m| m[1] = state as u32).unwrap()[1], state as u32);
                    }
                });
            }
        });
        assert_eq!(cache.cached_bytes(), 64 * 8);
    }
}
