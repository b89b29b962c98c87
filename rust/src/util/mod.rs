//! Small building blocks with no knowledge of tokenizers or regexes: token bitsets, byte sets, GPT-2's
//! byte↔character table of byte-level text, a seeded random generator for tests and walks, the
//! versioned, checksummed container of the disk caches (and their whole-file writes), runs of
//! `u32`s read in place from them, and the hook that tells a binding a call's work is long.

pub mod bitset;
pub mod byte_level;
pub mod byte_set;
pub mod concurrent;
pub mod long_work;
pub(crate) mod random;
pub mod serialize;
pub mod token_set;
pub(crate) mod u32_storage;
