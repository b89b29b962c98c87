//! The slices' disk cache: slice group sets kept in `cache_dir` between processes, beside the
//! tokenizer DFA.
//!
//! A slice group set ([`crate::lazy::slice`]) is a pure function of the tokenizer and of its
//! start `(slice, counted, pre-tokenizer state, added-token prefix, normal form)`: the same in
//! every guide and every process. A `Compiler` keeps the sets it made in memory, but each new
//! process walked them again, one start at a time, when a guide first met it: on Llama 3 a JSON
//! string's contents after a new kind of character (3 digits, a letter, a space) cost a mask
//! 13-27 ms, the worst mask of the Glaiveai2K documents (`docs/design.md` §8). Kept on disk,
//! such a first visit reads up to ~1 MB instead: 0.65-1.5 ms for the whole mask.
//!
//! # Layout and keys
//! Two files per set, in the container of [`crate::util::serialize`] (versioned, checksummed),
//! under `slices-<fingerprint>/`: its contents, `<name>.set`, and its key's,
//! `<slice>-<counted>-<start>.bin`, which repeats the key and names the contents. The slice is
//! named by its identity ([`SliceId::name`]): `p1` for the second of the slice patterns,
//! `c<ASCII bitset><0|1>` for a class derived from a regex state, whose meaning is its name. The
//! start is a [`TextKey`], whose numbers (pre-tokenizer and added-token states) mean something
//! only to tables that number alike, so the fingerprint covers those tables themselves (the
//! piece table, the added-token trie, the normal form), every token's class in the tokenizer
//! DFA, the vocabulary's content and the slice patterns, not just the tokenizer file.
//!
//! Contents are named by a hash of their bytes and their length ([`ContentId`]), and a name is
//! given to other contents only after a byte-for-byte comparison says they differ
//! ([`SliceStore::save`]): two keys name one file only when their sets are the same. Why: a quarter
//! of the sets are another key's (issue 17's first documents meet 222 keys with 171 contents on
//! Qwen2, 86 with 66 on Llama 3, 103 with 79 on o200k): derived classes that behave alike from a
//! start (`[A-Za-z]` and `[A-Za-z0-9]` where a piece takes no digit), normal-form states that
//! change nothing. A process that meets such a key keeps one set in memory for both and reads it
//! once (`crate::lazy::slice::Slices`).
//!
//! A slice's own tables (`Slice::write_tables`: each token's characters, its exit tokens and
//! witnesses; a function of its pattern or class and the vocabulary) are kept beside the sets
//! as `<slice>.tables`, in a container of their own kind, keyed by the slice's name: a new
//! process reads them instead of a pass over the token trie (~13-20 M instructions each on
//! Llama 3): a derived slice's at its first use, the patterns' when the tokenizer's lazy
//! tables are made (four passes, ~80 M instructions of a process's first lazy compile).
//!
//! A loop use's region (`Region`: the text states of a string's contents from one start, which
//! keys of shared first-token sets describe) is a function of the slice and its start too, and
//! is kept as `<slice>-<start>.region`, in a container of its own kind; a region past its bound
//! is kept as such. Found, a region costs a first visit 0.3-1 ms (every state stepped by all 256
//! bytes; 44-61 of them in the first round over issue 17's 300 documents); read, 18-32 µs
//! (median; files of 5-10 KB).
//!
//! The star of the Unicode word characters past ASCII (`crate::lazy::slice`'s word classes) is
//! not a function of the tokenizer, but it is kept here too, as `word-star.dfa`, keyed by the
//! class's ranges in the Unicode tables of the build that made it: determinized, it costs the
//! first mask of a process that meets a word class ~8.5 M instructions (2-3 ms); read from its
//! 130 KB file, under 1 M.
//!
//! # Invariants
//! * A file is read only when its container (checksum included), version, fingerprint and key
//!   match and its tables' indices check ([`SliceGroups::read`]); anything else is ignored and
//!   the set is walked and written again. A file never changes a mask: it holds what a walk
//!   would make, and a key's file names only contents compared equal to its set's.
//! * Files are written to a temporary name and renamed into place, so readers in other
//!   processes see a whole file or none. Failures to write are ignored (the cache is an
//!   optimisation).
//! * [`SLICE_FILE_VERSION`] must change whenever what a set holds, or how it is built, changes;
//!   `SLICE_TABLES_VERSION` likewise for a slice's tables, and `REGION_FILE_VERSION` for a
//!   region. A region read has its indices checked (`Region::read`); its meaning, like a set's,
//!   rests on the fingerprint.
//!
//! # Costs
//! A set is ~1 MB (120,000 token ids and ~50,000 groups for a JSON string's contents on
//! Llama 3); a tokenizer's documents meet a few dozen starts. A slice's tables are 0.13-0.17 MB
//! on Llama 3, for the 4 patterns and at most `MAX_DERIVED_SLICES` derived classes. Old
//! fingerprints' folders are not removed.
//!
//! A set's contents file is memory-mapped, and its groups, tokens and hubs per group (93 % of
//! its bytes) are used where they lie ([`crate::util::u32_storage`], whose contract, no file
//! edited in place, the atomic renames keep): copied out, they took fresh pages, and on this
//! project's machines a fresh page costs ~1.9 µs to fault in. A 0.66 MB set (Qwen2's average)
//! cost ~260 µs read and copied, 30-60 µs mapped and touched (C, the 171 files of Qwen2's first
//! round in the page cache); over issue 17's first Qwen2 documents the fills' page faults went
//! 22,350-22,620 → 3,870-4,250 and their kernel time 63-99 → 22-49 ms. Other files are read
//! into one buffer the process keeps ([`ReadBuffer`]), the size of the largest read so far: into
//! new memory, the kernel's copy of a file faults in fresh pages one by one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::slice::{SliceGroups, SliceId, SliceInputs};
use super::text::TextKey;
use crate::error::Result;
use crate::pre_tokenizer::normal_form::NormalForm;
use crate::pre_tokenizer::piece_table::PieceTable;
use crate::pre_tokenizer::text_automaton::ContentTrie;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::side::class_or_lone;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::serialize::{replace_file, Fnv64, Reader, Sink, Writer};

/// The kind and the format and construction version of slice group files (see the module docs):
/// a set's contents, and a key's file naming them (4: sets named by their contents).
const SLICE_FILE_KIND: &[u8; 4] = b"SLCG";
const SLICE_KEY_KIND: &[u8; 4] = b"SLCK";
pub(crate) const SLICE_FILE_VERSION: u32 = 4;
/// How many names a set's contents may try, past another set's with the same hash (see
/// [`SliceStore::save`]).
const CONTENT_NAME_TRIES: u128 = 4;
/// The same of derived slices' tables files (1 listed exit tokens, 2 their trie nodes).
const SLICE_TABLES_KIND: &[u8; 4] = b"SLCT";
const SLICE_TABLES_VERSION: u32 = 2;
/// The same of the star of the Unicode word characters past ASCII (`ByteDfa::write`).
const WORD_STAR_KIND: &[u8; 4] = b"SLCW";
const WORD_STAR_VERSION: u32 = 1;
/// The same of loop uses' regions (`Region::write`).
const REGION_FILE_KIND: &[u8; 4] = b"SLCR";
const REGION_FILE_VERSION: u32 = 1;

/// The word star's file name (see [`SliceStore::load_word_star`]).
const WORD_STAR_FILE: &str = "word-star.dfa";

/// Where one tokenizer's slice group sets are kept.
pub(crate) struct SliceStore {
    dir: PathBuf,
    fingerprint: u64,
}

/// A set's key: `(slice, counted, start)`.
pub(crate) type SliceKey = (SliceId, bool, TextKey);

/// The name of a set's contents in the store: a hash of them and their length (see
/// [`SliceStore::save`]).
pub(crate) type ContentId = u128;

/// The tables a slice group set's numbers refer to (see the module docs).
pub(crate) struct StoreInputs<'a> {
    pub(crate) vocab: &'a Vocabulary,
    pub(crate) tok: &'a TokenizerDfa,
    pub(crate) pieces: Option<&'a PieceTable>,
    pub(crate) contents: &'a ContentTrie,
    pub(crate) normal: Option<&'static NormalForm>,
    pub(crate) patterns: &'a [&'a str],
}

impl SliceStore {
    /// The store for the tokenizer of `inputs` under `cache_dir`.
    pub(crate) fn new(cache_dir: &Path, inputs: StoreInputs) -> SliceStore {
        let mut h = Fnv64::default();
        h.write_u64(SLICE_FILE_VERSION as u64);
        h.write_u64(inputs.vocab.fingerprint());
        let classes: Vec<u8> =
            (0..inputs.vocab.num_tokens() as u32).flat_map(|t| class_or_lone(inputs.tok, t).to_le_bytes()).collect();
        h.write(&classes);
        match inputs.pieces {
            Some(p) => p.fingerprint_into(&mut h),
            None => h.write_u64(u64::MAX),
        }
        inputs.contents.fingerprint_into(&mut h);
        match inputs.normal {
            Some(nf) => [nf.num_states(), nf.num_classes(), nf.num_prefixes()].map(|n| h.write_u64(n as u64)),
            None => [(); 3].map(|_| h.write_u64(u64::MAX)),
        };
        for p in inputs.patterns {
            h.write_u64(p.len() as u64);
            h.write(p.as_bytes());
        }
        let fingerprint = h.finish();
        SliceStore { dir: cache_dir.join(format!("slices-{fingerprint:016x}")), fingerprint }
    }

    /// A store in `dir` under `fingerprint`, for tests of files that do not depend on the
    /// tokenizer.
    #[cfg(test)]
    pub(crate) fn at(dir: PathBuf, fingerprint: u64) -> SliceStore {
        SliceStore { dir, fingerprint }
    }

    fn file_name(key: &SliceKey) -> String {
        format!("{}-{}-{:032x}.bin", key.0.name(), key.1 as u8, key.2.to_bits())
    }

    /// The key a set's file starts with: the slice's name, `counted` and the start.
    fn write_key(w: &mut impl Sink, (id, counted, start): &SliceKey) {
        let name = id.name();
        w.u64(name.len() as u64);
        name.bytes().for_each(|b| w.u8(b));
        w.u8(*counted as u8);
        let bits = start.to_bits();
        w.u64(bits as u64);
        w.u64((bits >> 64) as u64);
    }

    fn content_file_name(id: ContentId) -> String {
        format!("{id:032x}.set")
    }

    /// The name of the contents of `key`'s set, from its key's file, if there is a valid one.
    pub(crate) fn load_id(&self, key: &SliceKey) -> Option<ContentId> {
        let mut stored_key = Vec::new();
        Self::write_key(&mut stored_key, key);
        self.read((SLICE_KEY_KIND, SLICE_FILE_VERSION), &Self::file_name(key), &stored_key, |r| {
            let id = (r.u64()? as u128) << 64 | r.u64()? as u128;
            r.expect_end()?;
            Ok(id)
        })
    }

    /// The set whose contents are named `id`, from their file, if there is a valid one. The
    /// file is mapped and the set's large arrays (its groups, tokens and hubs per group, 93 % of
    /// its bytes) are used where they lie (see the module docs); where mapping fails it is read.
    pub(crate) fn load_contents(&self, id: ContentId, parts: SliceInputs) -> Option<SliceGroups> {
        let name = Self::content_file_name(id);
        let file = std::fs::File::open(self.dir.join(&name)).ok()?;
        // SAFETY: cache files are only ever replaced by renaming a complete file over them
        // (`SliceStore::write`), never written in place: the contract of
        // `crate::util::u32_storage`, under which the mapped bytes do not change.
        let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
            return self.read((SLICE_FILE_KIND, SLICE_FILE_VERSION), &name, &[], |r| SliceGroups::read(r, parts, None));
        };
        let map = Arc::new(map);
        let mut r = Reader::open(&map, SLICE_FILE_KIND, SLICE_FILE_VERSION, self.fingerprint).ok()?;
        SliceGroups::read(&mut r, parts, Some(&map)).ok()
    }

    /// Writes the set of `key`: its contents under their name, unless a file of those contents
    /// is there already, then its key's file naming them (each whole or not at all). Returns the
    /// name, or `None` where a file could not be written (errors are otherwise ignored: the
    /// cache is an optimisation).
    ///
    /// The name is a hash of the contents and their length; where a valid file of other
    /// contents has it (compared byte for byte, never assumed), the next of
    /// [`CONTENT_NAME_TRIES`] names is tried, so two keys name one file only when their sets are
    /// the same.
    pub(crate) fn save(&self, key: &SliceKey, groups: &SliceGroups) -> Option<ContentId> {
        let mut contents = Writer::default();
        groups.write(&mut contents);
        let payload = contents.payload();
        let mut h = Fnv64::default();
        h.write(payload);
        let first = (h.finish() as u128) << 64 | payload.len() as u128;
        let mut named = None;
        for id in (0..CONTENT_NAME_TRIES).map(|i| first.wrapping_add(i)) {
            let found = self.read((SLICE_FILE_KIND, SLICE_FILE_VERSION), &Self::content_file_name(id), &[], |r| {
                Ok(r.rest() == payload)
            });
            match found {
                Some(true) => {
                    named = Some(id);
                    break;
                }
                // Another set's contents under this name.
                Some(false) => continue,
                // None there, or a damaged file: written (again).
                None => {
                    let written =
                        self.write((SLICE_FILE_KIND, SLICE_FILE_VERSION), &Self::content_file_name(id), contents);
                    named = written.then_some(id);
                    break;
                }
            }
        }
        let id = named?;
        let mut w = Writer::default();
        Self::write_key(&mut w, key);
        w.u64((id >> 64) as u64);
        w.u64(id as u64);
        self.write((SLICE_KEY_KIND, SLICE_FILE_VERSION), &Self::file_name(key), w).then_some(id)
    }

    fn region_file_name(id: SliceId, start: TextKey) -> String {
        format!("{}-{:032x}.region", id.name(), start.to_bits())
    }

    /// The region of slice `id` from `start`, from its file, if there is a valid one: `Some(None)`
    /// says the region passed its bound; `read` takes the payload past the key.
    pub(crate) fn load_region<T>(
        &self,
        id: SliceId,
        start: TextKey,
        read: impl FnOnce(&mut Reader) -> Result<T>,
    ) -> Option<T> {
        let mut stored_key = Vec::new();
        Self::write_key(&mut stored_key, &(id, false, start));
        self.read((REGION_FILE_KIND, REGION_FILE_VERSION), &Self::region_file_name(id, start), &stored_key, read)
    }

    /// Writes the region of slice `id` from `start`, which `write` puts after the key.
    pub(crate) fn save_region(&self, id: SliceId, start: TextKey, write: impl FnOnce(&mut Writer)) {
        let mut w = Writer::default();
        Self::write_key(&mut w, &(id, false, start));
        write(&mut w);
        self.write((REGION_FILE_KIND, REGION_FILE_VERSION), &Self::region_file_name(id, start), w);
    }

    /// The tables of slice `id` from their file, if there is a valid one; `read` takes
    /// the payload past the key.
    pub(crate) fn load_tables<T>(&self, id: SliceId, read: impl FnOnce(&mut Reader) -> Result<T>) -> Option<T> {
        let name = id.name();
        self.read((SLICE_TABLES_KIND, SLICE_TABLES_VERSION), &format!("{name}.tables"), name.as_bytes(), read)
    }

    /// Writes the tables of slice `id`, which `write` puts after the key.
    pub(crate) fn save_tables(&self, id: SliceId, write: impl FnOnce(&mut Writer)) {
        let name = id.name();
        let mut w = Writer::default();
        w.put(name.as_bytes());
        write(&mut w);
        self.write((SLICE_TABLES_KIND, SLICE_TABLES_VERSION), &format!("{name}.tables"), w);
    }

    /// The star of the Unicode word characters past ASCII (not a function of the tokenizer, but
    /// made where a tokenizer's lazy guides first need it), from its file if that was written
    /// for `key` (the class's ranges: other Unicode tables, another star); `read` takes the
    /// payload past the key.
    pub(crate) fn load_word_star<T>(&self, key: &[u8], read: impl FnOnce(&mut Reader) -> Result<T>) -> Option<T> {
        self.read((WORD_STAR_KIND, WORD_STAR_VERSION), WORD_STAR_FILE, key, read)
    }

    /// Writes the star of the Unicode word characters past ASCII for `key`, which `write` puts
    /// after the key.
    pub(crate) fn save_word_star(&self, key: &[u8], write: impl FnOnce(&mut Writer)) {
        let mut w = Writer::default();
        w.put(key);
        write(&mut w);
        self.write((WORD_STAR_KIND, WORD_STAR_VERSION), WORD_STAR_FILE, w);
    }

    /// The payload of file `name` past its key, read by `read`, if the container, the key and
    /// `read` accept it.
    fn read<T>(
        &self,
        (kind, version): (&[u8; 4], u32),
        name: &str,
        key: &[u8],
        read: impl FnOnce(&mut Reader) -> Result<T>,
    ) -> Option<T> {
        let mut buffer = ReadBuffer::take();
        let bytes = buffer.read(&self.dir.join(name)).ok()?;
        let mut r = Reader::open(bytes, kind, version, self.fingerprint).ok()?;
        if r.bytes(key.len()).ok()? != key {
            return None;
        }
        read(&mut r).ok()
    }

    /// Writes file `name` whole, or not at all; whether it was written.
    fn write(&self, (kind, version): (&[u8; 4], u32), name: &str, w: Writer) -> bool {
        let bytes = w.finish(kind, version, self.fingerprint);
        replace_file(&self.dir.join(name), |tmp| std::fs::write(tmp, &bytes)).is_ok()
    }
}

/// The buffer files are read into, kept for the next read (see the module docs: a set read into
/// new memory took twice as long). One buffer is kept for the process, the largest file's size
/// (a few MB at most); a read while another thread holds it uses a new one, and the larger of
/// the two is kept.
struct ReadBuffer(Vec<u8>);

static READ_BUFFER: Mutex<Vec<u8>> = Mutex::new(Vec::new());

impl ReadBuffer {
    fn take() -> ReadBuffer {
        ReadBuffer(READ_BUFFER.try_lock().map(|mut kept| std::mem::take(&mut *kept)).unwrap_or_default())
    }

    /// The whole of file `path`.
    fn read(&mut self, path: &Path) -> std::io::Result<&[u8]> {
        self.0.clear();
        std::fs::File::open(path)?.read_to_end(&mut self.0)?;
        Ok(&self.0)
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        if let Ok(mut kept) = READ_BUFFER.try_lock() {
            if kept.capacity() < self.0.capacity() {
                *kept = std::mem::take(&mut self.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files read one after another through the kept buffer ([`ReadBuffer`]), a large one before
    /// smaller ones and while another thread holds the buffer, read back whole and nothing
    /// else; a file cut short is refused.
    #[test]
    fn files_of_any_size_are_read_whole_through_the_kept_buffer() {
        let dir = std::env::temp_dir().join(format!("propertok-read-buffer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SliceStore::at(dir.clone(), 11);
        let payload = |n: usize| (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect::<Vec<u32>>();
        let sizes = [300_000, 7, 0, 120_000, 300_001];
        for (i, &n) in sizes.iter().enumerate() {
            store.save_tables(SliceId::Pattern(i as u8), |w| w.u32s(&payload(n)));
        }
        let read = |i: usize| store.load_tables(SliceId::Pattern(i as u8), |r| r.u32s());
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(read(i).as_deref(), Some(&payload(n)[..]), "file {i}");
        }
        // Another thread's read while this one holds the buffer gets one of its own.
        let held = ReadBuffer::take();
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(read(3).as_deref(), Some(&payload(sizes[3])[..])));
        });
        drop(held);
        assert_eq!(read(1).as_deref(), Some(&payload(sizes[1])[..]));
        // Cut short after a larger file was read into the buffer: refused, not padded.
        let file = dir.join(format!("{}.tables", SliceId::Pattern(0).name()));
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 4]).unwrap();
        assert!(read(4).is_some() && read(0).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
