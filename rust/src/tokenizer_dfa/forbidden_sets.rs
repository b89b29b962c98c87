//! The tokenizer DFA's forbidden sets: per class, the sorted ids of the tokens that may not
//! follow it, stored back to back, and the large ones also as bitsets.
//!
//! # Layout
//! Set `i` is `values[offsets[i]..offsets[i + 1]]`: one allocation for all classes instead of
//! one each (Llama 3: 36,464 sets, 115.6 M ids, 462 MB), so building, dropping and caching them
//! are bulk operations. The values are either owned or a view into a read-only memory map of
//! the tokenizer-DFA cache file ([`U32Storage`]).
//!
//! # Why a memory map
//! Reading Llama 3's 463 MB cache into memory cost ~0.5 s: ~215 ms to read the file into fresh
//! pages and ~170 ms to copy the ids out of the byte buffer, before the checks. Mapped, the ids
//! are used where they lie in the page cache: a load is the checksum and the structural checks
//! below (one pass each), and processes that load the same cache share its pages.
//!
//! The map's contract: the file is never changed in place while it is mapped. propertok only
//! ever replaces a cache file by renaming a complete new one over it (the old inode, and so the
//! map, stays intact); editing or truncating a cache file in place under a running process is
//! not supported (a truncation would end the process with `SIGBUS`).
//!
//! # Invariants (checked by [`ForbiddenSets::validate`] on every load)
//! * `offsets` starts at 0, never decreases and ends at the number of values.
//! * Every set is strictly increasing, with ids below the vocabulary size.

use std::sync::Arc;

use crate::util::bitset;

/// A read-only run of `u32`s: owned, or a view into a memory-mapped file.
#[derive(Clone)]
pub(crate) enum U32Storage {
    Owned(Vec<u32>),
    /// `len` values starting `start` bytes into `map` (`start` is a multiple of 4).
    Mapped {
        map: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
    },
}

impl U32Storage {
    /// A view of `len` little-endian values at byte `start` of `map`; `None` when they are not
    /// 4-byte aligned or out of bounds, or on a big-endian target (callers then copy).
    pub(crate) fn mapped(map: &Arc<memmap2::Mmap>, start: usize, len: usize) -> Option<U32Storage> {
        let end = len.checked_mul(4)?.checked_add(start)?;
        let aligned = (map.as_ptr() as usize + start).is_multiple_of(std::mem::align_of::<u32>());
        (cfg!(target_endian = "little") && aligned && end <= map.len()).then(|| U32Storage::Mapped {
            map: Arc::clone(map),
            start,
            len,
        })
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u32] {
        match self {
            U32Storage::Owned(v) => v,
            // SAFETY: `mapped` checked that the range is inside the map and 4-byte aligned, the
            // target is little-endian (the file's byte order), any bit pattern is a valid u32,
            // and the map lives as long as `self` (the module docs state the no-in-place-edit
            // contract the map relies on).
            U32Storage::Mapped { map, start, len } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().add(*start).cast::<u32>(), *len)
            },
        }
    }

    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, U32Storage::Mapped { .. })
    }
}

impl std::fmt::Debug for U32Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_mapped() { "mapped" } else { "owned" };
        write!(f, "U32Storage({kind}, {} values)", self.as_slice().len())
    }
}

impl PartialEq for U32Storage {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for U32Storage {}

/// Sorted token sets stored back to back; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ForbiddenSets {
    offsets: Vec<u32>,
    values: U32Storage,
}

impl ForbiddenSets {
    /// No sets; add them with [`ForbiddenSets::push`].
    pub(crate) fn new() -> ForbiddenSets {
        ForbiddenSets { offsets: vec![0], values: U32Storage::Owned(Vec::new()) }
    }

    /// Sets read back from storage; call [`ForbiddenSets::validate`] before using them.
    pub(crate) fn from_parts(offsets: Vec<u32>, values: U32Storage) -> ForbiddenSets {
        ForbiddenSets { offsets, values }
    }

    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Appends a set (only to owned sets: those being built).
    pub(crate) fn push(&mut self, set: &[u32]) {
        let U32Storage::Owned(values) = &mut self.values else {
            unreachable!("sets are only pushed while they are built, never into a mapped file");
        };
        values.extend_from_slice(set);
        self.offsets.push(values.len() as u32);
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> &[u32] {
        &self.values.as_slice()[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    pub(crate) fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    pub(crate) fn values(&self) -> &[u32] {
        self.values.as_slice()
    }

    pub(crate) fn is_mapped(&self) -> bool {
        self.values.is_mapped()
    }

    /// Checks the module's invariants for a vocabulary of `n` tokens. One pass over the values
    /// without a data-dependent branch (Llama 3: ~10 ms for 115.6 M ids).
    pub(crate) fn validate(&self, n: usize) -> std::result::Result<(), &'static str> {
        let values = self.values.as_slice();
        if self.offsets.first() != Some(&0) || self.offsets.last().map(|&o| o as usize) != Some(values.len()) {
            return Err("forbidden-set offsets do not span the values");
        }
        if self.offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err("forbidden-set offsets decrease");
        }
        for i in 0..self.len() {
            let set = self.get(i);
            let mut bad = set.last().is_some_and(|&t| t as usize >= n);
            // `|` rather than `any`: no early exit, so the loop vectorises.
            bad |= set.windows(2).fold(false, |bad, w| bad | (w[0] >= w[1]));
            if bad {
                return Err("forbidden set not sorted or out of range");
            }
        }
        Ok(())
    }
}

/// Forbidden sets of at least this many ids per word of a bitset over the tokens also get
/// the bitset: clearing the set from a mask is then one pass over the mask's words (~0.5 µs
/// for 128k tokens) instead of a step per id (~1 ns each; Llama 3 has sets of up to 120,000),
/// for at most a quarter of the memory of the ids. On Llama 3, 443 of the 36,464 classes
/// qualify: 7 MB, made in ~11 ms when the DFA is built or loaded.
const BITSET_MIN_IDS_PER_WORD: usize = 4;

/// Bitsets of the large forbidden sets: class `c`'s is
/// `bits[slot[c] * words..(slot[c] + 1) * words]` when `slot[c] != u32::MAX`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ForbiddenBits {
    words: usize,
    slot: Vec<u32>,
    bits: Vec<u32>,
}

impl ForbiddenBits {
    pub(crate) fn new(sets: &ForbiddenSets, num_tokens: usize) -> ForbiddenBits {
        let words = bitset::words_for(num_tokens).max(1);
        let mut out = ForbiddenBits { words, slot: vec![u32::MAX; sets.len()], bits: Vec::new() };
        for c in 0..sets.len() {
            let ids = sets.get(c);
            if ids.len() >= BITSET_MIN_IDS_PER_WORD * words {
                out.slot[c] = (out.bits.len() / words) as u32;
                let start = out.bits.len();
                out.bits.resize(start + words, 0);
                for &t in ids {
                    bitset::set(&mut out.bits[start..], t as usize);
                }
            }
        }
        out
    }

    pub(crate) fn get(&self, class: usize) -> Option<&[u32]> {
        match self.slot.get(class) {
            Some(&s) if s != u32::MAX => Some(&self.bits[s as usize * self.words..(s as usize + 1) * self.words]),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(offsets: &[u32], values: &[u32]) -> ForbiddenSets {
        ForbiddenSets::from_parts(offsets.to_vec(), U32Storage::Owned(values.to_vec()))
    }

    #[test]
    fn forbidden_sets_are_validated() {
        assert_eq!(sets(&[0, 0, 2], &[1, 3]).validate(4), Ok(()));
        assert!(sets(&[], &[]).validate(4).is_err(), "no offsets");
        assert!(sets(&[1, 2], &[1, 3]).validate(4).is_err(), "does not start at 0");
        assert!(sets(&[0, 1], &[1, 3]).validate(4).is_err(), "does not end at the values' end");
        assert!(sets(&[0, 2, 1, 2], &[1, 3]).validate(4).is_err(), "decreasing offsets");
        assert!(sets(&[0, 2], &[3, 1]).validate(4).is_err(), "unsorted");
        assert!(sets(&[0, 2], &[1, 1]).validate(4).is_err(), "duplicate");
        assert!(sets(&[0, 2], &[1, 4]).validate(4).is_err(), "out of range");
        // An unsorted pair anywhere in a long set is found (the check has no early exit).
        let mut long: Vec<u32> = (0..1000).collect();
        assert_eq!(sets(&[0, 1000], &long).validate(1000), Ok(()));
        long.swap(517, 518);
        assert!(sets(&[0, 1000], &long).validate(1000).is_err(), "unsorted in the middle");
    }

    #[test]
    fn mapped_storage_reads_the_file_in_place() {
        let values: Vec<u32> = vec![7, 0, 3, 99, u32::MAX];
        let mut bytes = vec![0u8; 8]; // a header, so the values start at an offset
        for v in &values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let path = std::env::temp_dir().join(format!("propertok-u32storage-{}.bin", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a private temporary file that nothing else writes.
        let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.unwrap());
        std::fs::remove_file(&path).unwrap();
        let view = U32Storage::mapped(&map, 8, values.len()).unwrap();
        assert!(view.is_mapped());
        assert_eq!(view.as_slice(), &values[..]);
        assert_eq!(view, U32Storage::Owned(values.clone()));
        assert!(U32Storage::mapped(&map, 6, 1).is_none(), "misaligned");
        assert!(U32Storage::mapped(&map, 8, values.len() + 1).is_none(), "past the end");
        assert!(U32Storage::mapped(&map, 8, usize::MAX).is_none(), "overflowing length");
    }
}
