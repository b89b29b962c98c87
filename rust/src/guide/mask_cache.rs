//! A guide's cache of computed masks, bounded in bytes (`max_mask_cache_bytes`).
//!
//! A mask is computed from two precomputed sets (see `guide`) in a few microseconds; caching it
//! makes later visits to the state a plain copy (tens of nanoseconds). A guide is shared by every
//! request that uses its schema, so over a server's lifetime the cache can grow towards one mask
//! per state — `states × vocab/8` bytes, gigabytes for a large guide over a 128k vocabulary. The
//! cache therefore has a byte budget: past it, masks of uncached states are computed on each
//! request instead of stored. Results never change, only their cost.
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

use crate::util::concurrent::Slots;

/// See the module docs.
pub struct MaskCache {
    slots: Slots<Box<[u32]>>,
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

    /// The cached mask of `state`, computing it with `compute` (into a zeroed buffer of `words`
    /// words, outside any lock) when the budget allows; `None` when it is not cached and the
    /// budget is spent.
    pub fn get_or_compute<E>(
        &self,
        state: usize,
        words: usize,
        compute: impl FnOnce(&mut [u32]) -> Result<(), E>,
    ) -> Result<Option<&[u32]>, E> {
        if let Some(mask) = self.slots.get(state) {
            return Ok(Some(mask));
        }
        let size = words * 4;
        let reserved = self.bytes.fetch_add(size, Ordering::Relaxed) + size;
        if reserved > self.max_bytes {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            return Ok(self.slots.get(state).map(|m| &**m));
        }
        let mut m = vec![0u32; words].into_boxed_slice();
        if let Err(e) = compute(&mut m) {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            return Err(e);
        }
        let (kept, stored) = self.slots.try_set(state, m);
        if !stored {
            self.bytes.fetch_sub(size, Ordering::Relaxed); // another thread filled it first
        }
        Ok(Some(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_within_the_budget_and_computes_nothing_past_it() {
        let cache = MaskCache::new(8); // room for two 1-word masks
        let fill = |v: u32| {
            move |m: &mut [u32]| -> Result<(), ()> {
                m[0] = v;
                Ok(())
            }
        };
        assert_eq!(cache.get_or_compute(0, 1, fill(7)), Ok(Some(&[7u32][..])));
        // Cached: the closure does not run again.
        assert_eq!(cache.get_or_compute(0, 1, |_| -> Result<(), ()> { panic!("recomputed") }), Ok(Some(&[7u32][..])));
        assert_eq!(cache.get_or_compute(1, 1, fill(9)), Ok(Some(&[9u32][..])));
        assert_eq!(cache.cached_bytes(), 8);
        assert_eq!(cache.get_or_compute(2, 1, |_| -> Result<(), ()> { panic!("over budget") }), Ok(None));
        assert_eq!(cache.cached_bytes(), 8);
        // A failed computation caches nothing and returns its reservation.
        let cache = MaskCache::new(8);
        assert_eq!(cache.get_or_compute(0, 1, |_| Err("limit")), Err("limit"));
        assert_eq!(cache.cached_bytes(), 0);
    }

    #[test]
    fn concurrent_fills_count_each_slot_once() {
        let cache = MaskCache::new(usize::MAX);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for state in 0..64 {
                        let fill = |m: &mut [u32]| -> Result<(), ()> {
                            m[1] = state as u32;
                            Ok(())
                        };
                        assert_eq!(cache.get_or_compute(state, 2, fill).unwrap().unwrap()[1], state as u32);
                    }
                });
            }
        });
        assert_eq!(cache.cached_bytes(), 64 * 8);
    }
}
