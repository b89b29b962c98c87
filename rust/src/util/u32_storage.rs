//! A read-only run of `u32`s that is either owned or a view into a read-only memory map of a
//! cache file.
//!
//! Why a view: a cache read into memory is copied into fresh pages, and on the machines measured
//! here a fresh page costs ~1.9 µs to fault in (a 0.66 MB slice set: ~260 µs read and copied,
//! 30-60 µs mapped and read in place, where its pages are in the page cache). Mapped, the values are
//! used where they lie, and processes that load one cache share its pages.
//!
//! # The map's contract
//! The file is never changed in place while it is mapped. propertok only ever replaces a cache
//! file by renaming a complete new one over it (the old inode, and so the map, stays intact);
//! editing or truncating a cache file in place under a running process is not supported (a
//! truncation would end the process with `SIGBUS`).
//!
//! # Invariants
//! A view's values lie inside its map, 4-byte aligned, on a little-endian target (the files'
//! byte order); [`U32Storage::mapped`] refuses anything else and callers then copy
//! ([`U32Storage::view_or_copy`]).

use std::ops::Deref;
use std::sync::Arc;

/// A read-only run of `u32`s: owned, or a view into a memory-mapped file (see the module docs).
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

    /// The little-endian values `bytes` (a multiple of 4), in place where they lie inside `map`
    /// and can be viewed, copied otherwise (no map, or not aligned).
    pub(crate) fn view_or_copy(map: Option<&Arc<memmap2::Mmap>>, bytes: &[u8]) -> U32Storage {
        let inside = map.and_then(|map| {
            // Bytes before the map have no offset in it; `mapped` checks that they end inside.
            let start = (bytes.as_ptr() as usize).checked_sub(map.as_ptr() as usize)?;
            U32Storage::mapped(map, start, bytes.len() / 4)
        });
        inside.unwrap_or_else(|| U32Storage::Owned(crate::util::serialize::u32s_from_le(bytes)))
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

impl Deref for U32Storage {
    type Target = [u32];
    #[inline]
    fn deref(&self) -> &[u32] {
        self.as_slice()
    }
}

impl Default for U32Storage {
    fn default() -> U32Storage {
        U32Storage::Owned(Vec::new())
    }
}

impl From<Vec<u32>> for U32Storage {
    fn from(values: Vec<u32>) -> U32Storage {
        U32Storage::Owned(values)
    }
}

impl From<Box<[u32]>> for U32Storage {
    fn from(values: Box<[u32]>) -> U32Storage {
        U32Storage::Owned(values.into_vec())
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

#[cfg(test)]
mod tests {
    use super::*;

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

        // In place where the bytes lie inside the map; a copy of bytes elsewhere.
        let inside = U32Storage::view_or_copy(Some(&map), &map[8..]);
        assert!(inside.is_mapped() && inside[..] == values[..]);
        let elsewhere = U32Storage::view_or_copy(Some(&map), &bytes[8..]);
        assert!(!elsewhere.is_mapped() && elsewhere[..] == values[..]);
        let unmapped = U32Storage::view_or_copy(None, &map[12..]);
        assert!(!unmapped.is_mapped() && unmapped[..] == values[1..]);
    }
}
