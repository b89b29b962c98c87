//! Tables that many threads fill while they read: what lazily built guides are made of.
//!
//! * [`Slots`] — an append-only array of write-once cells, read without any lock: segments of
//!   doubling size, each allocated once. A cell is filled by whoever computes it first; a thread
//!   that computes the same cell concurrently throws its copy away. Computations are
//!   deterministic, so every interleaving yields the same contents.
//! * [`Interner`] — distinct keys numbered `0, 1, 2, …` in order of arrival; the lock is held
//!   for a hash-map probe only, never while anything is computed.
//! * [`ShardedMap`] — a concurrent hash map split into independently locked shards, for memo
//!   tables keyed by something other than a dense id.
//! * [`compute_once`] — one write-once cell filled the same way as a slot: computed outside any
//!   lock, first value kept (a `OnceLock::get_or_init` would hold others waiting meanwhile).
//!
//! # Invariants
//! * A cell, once set, never changes: readers may keep references for the table's lifetime.
//! * An id handed out by [`Interner::intern`] has its key readable through [`Interner::key`]
//!   before the id is returned to anyone.

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

use rustc_hash::{FxBuildHasher, FxHashMap};

/// Cells in the first segment; segment `s` holds `FIRST << s`.
const FIRST: usize = 64;
/// Enough segments for `u32` indices.
const SEGMENTS: usize = 27;

/// The value of `cell`, computed by `f` (outside any lock) when it is not set yet; a thread that
/// computes it concurrently keeps the first value stored.
pub fn compute_once<T>(cell: &OnceLock<T>, f: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let _ = cell.set(f());
    cell.get().expect("just set")
}

/// See the module docs.
pub struct Slots<T> {
    segments: [OnceLock<Box<[OnceLock<T>]>>; SEGMENTS],
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { segments: std::array::from_fn(|_| OnceLock::new()) }
    }
}

/// `(segment, offset)` of index `i`: segment `s` starts at `FIRST * (2^s - 1)`.
#[inline]
fn locate(i: usize) -> (usize, usize) {
    let s = (usize::BITS - 1 - (i / FIRST + 1).leading_zeros()) as usize;
    (s, i - FIRST * ((1 << s) - 1))
}

impl<T> Slots<T> {
    fn cell(&self, i: usize) -> &OnceLock<T> {
        let (s, offset) = locate(i);
        let segment = self.segments[s].get_or_init(|| (0..FIRST << s).map(|_| OnceLock::new()).collect());
        &segment[offset]
    }

    /// The value at `i`, if set.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        let (s, offset) = locate(i);
        self.segments[s].get()?[offset].get()
    }

    /// Sets `i` unless it is set already; the value at `i` either way.
    pub fn set(&self, i: usize, value: T) -> &T {
        self.try_set(i, value).0
    }

    /// Sets `i` unless it is set already: the value at `i`, and whether it is `value`.
    pub fn try_set(&self, i: usize, value: T) -> (&T, bool) {
        let cell = self.cell(i);
        let stored = cell.set(value).is_ok();
        (cell.get().expect("just set"), stored)
    }

    /// The value at `i`, computed by `f` (outside any lock) when it is not set yet.
    pub fn get_or_compute<E>(&self, i: usize, f: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.get(i) {
            return Ok(v);
        }
        let value = f()?;
        Ok(self.set(i, value))
    }
}

/// See the module docs.
pub struct Interner<K> {
    index: Mutex<FxHashMap<K, u32>>,
    keys: Slots<K>,
    len: AtomicUsize,
}

impl<K> Default for Interner<K> {
    fn default() -> Self {
        Interner { index: Mutex::new(FxHashMap::default()), keys: Slots::default(), len: AtomicUsize::new(0) }
    }
}

impl<K: Clone + Eq + Hash> Interner<K> {
    /// The id of `key` (new ones numbered in order of arrival) and whether it is new; `Err` with
    /// the number of keys when a new key would pass `max` keys.
    pub fn intern(&self, key: &K, max: usize) -> Result<(u32, bool), usize> {
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let interned = self.intern_locked(&mut index, key, max);
        self.len.store(index.len(), Ordering::Release);
        interned
    }

    /// [`Interner::intern`] for each of `keys` in order, under one lock: their ids pushed to
    /// `ids`, and how many were new. A key that would pass `max` stops it, with `Err` as
    /// `intern` gives it; the keys before it stay interned, with their ids in `ids`.
    pub fn intern_all(&self, keys: &[K], max: usize, ids: &mut Vec<u32>) -> (usize, Result<(), usize>) {
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let (mut new, mut refused) = (0, Ok(()));
        for key in keys {
            match self.intern_locked(&mut index, key, max) {
                Ok((id, is_new)) => {
                    ids.push(id);
                    new += is_new as usize;
                }
                Err(n) => {
                    refused = Err(n);
                    break;
                }
            }
        }
        self.len.store(index.len(), Ordering::Release);
        (new, refused)
    }

    /// [`Interner::intern`] with the lock held (`index`); the caller publishes the length.
    fn intern_locked(&self, index: &mut FxHashMap<K, u32>, key: &K, max: usize) -> Result<(u32, bool), usize> {
        if let Some(&id) = index.get(key) {
            return Ok((id, false));
        }
        let id = index.len();
        if id >= max {
            return Err(id);
        }
        self.keys.set(id, key.clone());
        index.insert(key.clone(), id as u32);
        Ok((id as u32, true))
    }

    /// The id of `key`, interned now if new (no limit: for tables bounded by another).
    pub fn intern_unbounded(&self, key: &K) -> u32 {
        self.intern(key, usize::MAX).map_or_else(|n| n as u32, |(id, _)| id)
    }

    /// The id of `key`, if interned.
    pub fn find(&self, key: &K) -> Option<u32> {
        self.index.lock().unwrap_or_else(|e| e.into_inner()).get(key).copied()
    }

    /// The key of an id handed out by [`Interner::intern`].
    #[inline]
    pub fn key(&self, id: u32) -> &K {
        self.keys.get(id as usize).expect("an interned id")
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

const SHARDS: usize = 16;

/// See the module docs.
pub struct ShardedMap<K, V> {
    shards: [RwLock<FxHashMap<K, V>>; SHARDS],
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap { shards: std::array::from_fn(|_| RwLock::new(FxHashMap::default())) }
    }
}

impl<K: Eq + Hash, V: Clone> ShardedMap<K, V> {
    #[inline]
    fn shard(&self, key: &K) -> &RwLock<FxHashMap<K, V>> {
        &self.shards[FxBuildHasher.hash_one(key) as usize % SHARDS]
    }

    pub fn get(&self, key: &K) -> Option<V> {
        self.shard(key).read().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    /// Inserts `value` unless `key` has one; the value kept either way.
    pub fn insert_if_absent(&self, key: K, value: V) -> V {
        self.shard(&key).write().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(value).clone()
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().unwrap_or_else(|e| e.into_inner()).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A cache of values that are a pure function of their key, within a byte budget: emptied when
/// an insert would pass it (a dropped value is recomputed, identically, when next needed). The
/// lock is held only to look up or insert, never while a value is computed.
pub struct BoundedCache<K, V> {
    entries: Mutex<(FxHashMap<K, V>, usize)>,
    max_bytes: usize,
}

impl<K: Eq + Hash, V: Clone> BoundedCache<K, V> {
    pub fn new(max_bytes: usize) -> Self {
        BoundedCache { entries: Mutex::new((FxHashMap::default(), 0)), max_bytes }
    }

    /// The value of `key` (by any form the key borrows as: a `&str` for a `String` key).
    pub fn get<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).0.get(key).cloned()
    }

    /// Whether `key` has a value, without cloning it.
    pub fn contains_key<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
    {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).0.contains_key(key)
    }

    /// How many values the cache holds.
    #[cfg(test)]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).0.len()
    }

    /// Drops every value, as a full cache does (tests: what a guide computes itself).
    #[cfg(test)]
    pub fn clear(&self) {
        *self.entries.lock().unwrap_or_else(|e| e.into_inner()) = (FxHashMap::default(), 0);
    }

    /// Keeps `value` (of `bytes`) unless `key` has one already; returns the value kept.
    pub fn insert(&self, key: K, value: V, bytes: usize) -> V {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = entries.0.get(&key) {
            return known.clone();
        }
        if entries.1 + bytes > self.max_bytes {
            *entries = (FxHashMap::default(), 0);
        }
        entries.1 += bytes;
        entries.0.insert(key, value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn segments_cover_every_index_once() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..100_000 {
            let (s, o) = locate(i);
            assert!(o < FIRST << s, "{i}");
            assert!(seen.insert((s, o)), "{i}");
        }
        assert_eq!(locate(u32::MAX as usize).0, SEGMENTS - 1);
    }

    #[test]
    fn slots_keep_the_first_value() {
        let slots: Slots<u32> = Slots::default();
        assert_eq!(slots.get(5000), None);
        assert_eq!(*slots.set(5000, 1), 1);
        assert_eq!(*slots.set(5000, 2), 1);
        assert_eq!(slots.get_or_compute(5000, || Ok::<_, ()>(3)), Ok(&1));
        assert_eq!(slots.get_or_compute(7, || Ok::<_, ()>(3)), Ok(&3));
    }

    #[test]
    fn interning_from_many_threads_gives_one_id_per_key() {
        let interner: Arc<Interner<u64>> = Arc::new(Interner::default());
        let handles: Vec<_> = (0..8)
            .map(|k| {
                let interner = interner.clone();
                std::thread::spawn(move || {
                    let keys = (0..2000u64).map(|i| (i * 7 + k) % 1500);
                    keys.map(|key| (key, interner.intern(&key, usize::MAX).unwrap().0)).collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            // Every thread saw the id the table keeps for each key.
            for (key, id) in h.join().unwrap() {
                assert_eq!(interner.find(&key), Some(id));
            }
        }
        assert_eq!(interner.len(), 1500);
        for id in 0..1500u32 {
            assert_eq!(interner.find(interner.key(id)), Some(id));
        }
        assert_eq!(interner.intern(&99_999, 1500), Err(1500));
    }

    /// Interning keys together gives the ids one at a time would, counts the new ones, and
    /// stops at the limit with the keys before it interned.
    #[test]
    fn interning_together_gives_the_ids_of_one_at_a_time() {
        let (one, all): (Interner<u64>, Interner<u64>) = Default::default();
        let mut rng = crate::util::random::SplitMix64::new(3);
        for _ in 0..50 {
            let keys: Vec<u64> = (0..rng.below(40)).map(|_| rng.below(300) as u64).collect();
            let expected: Vec<u32> = keys.iter().map(|k| one.intern(k, usize::MAX).unwrap().0).collect();
            let before = all.len();
            let mut ids = Vec::new();
            assert_eq!(all.intern_all(&keys, usize::MAX, &mut ids), (all.len() - before, Ok(())));
            assert_eq!(ids, expected);
        }
        let mut ids = Vec::new();
        for known in [5, 7] {
            all.intern(&known, usize::MAX).unwrap();
        }
        let n = all.len();
        let (new, refused) = all.intern_all(&[5, 1_000, 7, 1_001, 1_002], n + 1, &mut ids);
        assert_eq!((new, refused), (1, Err(n + 1)));
        assert_eq!((ids.len(), all.len(), all.find(&1_000)), (3, n + 1, Some(n as u32)));
        assert_eq!(all.find(&1_001), None);
    }
}
