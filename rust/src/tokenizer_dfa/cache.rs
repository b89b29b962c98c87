//! The tokenizer DFA's disk format: a [`crate::util::serialize`] container keyed by the
//! vocabulary's fingerprint, whose forbidden sets can be used in place from a memory map.

use std::sync::Arc;

use super::fallback::FallbackTrie;
use super::forbidden_sets::ForbiddenSets;
use super::{Construction, TokenizerDfa, NO_CLASS};
use crate::error::{Error, Result};
use crate::regex::byte_dfa::ByteDfa;
use crate::tokenizer::vocab::Vocabulary;
use crate::util::serialize::Sink;
use crate::util::u32_storage::U32Storage;

const SERIAL_KIND: &[u8; 4] = b"TDFA";
/// 2: forbidden sets stored flat (offsets, then values), so a cache load is two bulk reads.
/// 3: non-special added tokens are never emittable by the merges.
/// 4: the construction is a u32, so every u32 array lies 4-byte aligned in the file and a cache
/// load uses the forbidden sets where they lie in a memory map (see `forbidden_sets`).
/// 5: forbidden sets as runs of tokens in the order of their bytes (the order, the sets'
/// lengths, the per-block offsets, then the runs): Llama 3's file 463 → 54 MB.
const SERIAL_VERSION: u32 = 5;

impl TokenizerDfa {
    /// Serialises the DFA (see [`crate::util::serialize`]); keyed by the vocabulary's fingerprint.
    /// Every u32 array starts 4-byte aligned in the file (the container header is 40 bytes and
    /// every field before the arrays is 4 or 8 bytes), so a load can map the forbidden sets.
    pub fn to_bytes(&self, vocab: &Vocabulary) -> Vec<u8> {
        let mut w = crate::util::serialize::Writer::default();
        self.write_payload(&mut w);
        w.finish(SERIAL_KIND, SERIAL_VERSION, vocab.fingerprint())
    }

    /// The bytes of [`TokenizerDfa::to_bytes`] written to `path`, streamed: never a second
    /// copy of the forbidden sets in memory.
    pub fn write_file(&self, vocab: &Vocabulary, path: &std::path::Path) -> std::io::Result<()> {
        let mut w = crate::util::serialize::FileWriter::create(path)?;
        self.write_payload(&mut w);
        w.finish(SERIAL_KIND, SERIAL_VERSION, vocab.fingerprint())
    }

    fn write_payload(&self, w: &mut impl Sink) {
        w.u32(match self.construction {
            Construction::Algorithm3 => 0,
            Construction::PriorityTimeline => 1,
        });
        w.u32s(&self.class_of);
        w.u32s(self.forbidden.order());
        w.u32s(self.forbidden.lens());
        w.u32s(self.forbidden.offsets());
        w.u32s(self.forbidden.runs());
        w.u8(self.trie.is_some() as u8);
        if let Some(trie) = &self.trie {
            trie.dfa.write(w);
        }
        w.u64(self.num_forbidden_pairs as u64);
    }

    /// Reads a DFA written by [`TokenizerDfa::to_bytes`] for the same vocabulary, checking its
    /// structure (the forbidden sets are copied out of `bytes`).
    pub fn from_bytes(bytes: &[u8], vocab: &Vocabulary) -> Result<TokenizerDfa> {
        Self::read(bytes, vocab, |values| U32Storage::Owned(crate::util::serialize::u32s_from_le(values)))
    }

    /// Like [`TokenizerDfa::from_bytes`] over a memory map of a cache file, whose forbidden sets
    /// are then used in place (`crate::util::u32_storage` states the map's contract: the file is
    /// never changed in place while mapped).
    pub fn from_mapped_file(map: Arc<memmap2::Mmap>, vocab: &Vocabulary) -> Result<TokenizerDfa> {
        Self::read(&map, vocab, |values| U32Storage::view_or_copy(Some(&map), values))
    }

    /// The reader behind both loads; `store_values` keeps the forbidden sets' raw bytes. The
    /// payload is checksummed on a second thread while this one parses and validates it
    /// (Llama 3: a 54 MB file, loaded in ~17 ms).
    fn read(bytes: &[u8], vocab: &Vocabulary, store_values: impl FnOnce(&[u8]) -> U32Storage) -> Result<TokenizerDfa> {
        let (r, checksum) =
            crate::util::serialize::Reader::open_unverified(bytes, SERIAL_KIND, SERIAL_VERSION, vocab.fingerprint())?;
        std::thread::scope(|scope| {
            // Where no thread can be started, the checksum runs here, after the parse.
            let verifier = std::thread::Builder::new().spawn_scoped(scope, || checksum.verify()).ok();
            let dfa = Self::parse(r, vocab, store_values);
            match verifier {
                // A checksum thread cannot panic; were it to, the data is not trusted.
                Some(v) => {
                    v.join().unwrap_or_else(|_| Err(Error::InvalidArgument("tokenizer DFA checksum failed".into())))?
                }
                None => checksum.verify()?,
            }
            dfa
        })
    }

    fn parse(
        mut r: crate::util::serialize::Reader<'_>,
        vocab: &Vocabulary,
        store_values: impl FnOnce(&[u8]) -> U32Storage,
    ) -> Result<TokenizerDfa> {
        let bad = |what: &str| Error::InvalidArgument(format!("invalid tokenizer DFA data: {what}"));
        let construction = match r.u32()? {
            0 => Construction::Algorithm3,
            1 => Construction::PriorityTimeline,
            _ => return Err(bad("unknown construction")),
        };
        let class_of = r.u32s()?;
        let n = vocab.num_tokens();
        if class_of.len() != n {
            return Err(bad("token count differs from the vocabulary"));
        }
        let order = r.u32s()?;
        let lens = r.u32s()?;
        let offsets = r.u32s()?;
        let forbidden = ForbiddenSets::from_parts(order, lens, offsets, store_values(r.u32s_bytes()?))
            .ok_or_else(|| bad("the token order is not a permutation"))?;
        forbidden.validate(n).map_err(bad)?;
        let num_classes = forbidden.len();
        if num_classes == 0 || num_classes > n + 1 {
            return Err(bad("class count out of range"));
        }
        if !forbidden.get(0).is_empty() {
            return Err(bad("class 0 must have an empty forbidden set"));
        }
        let trie = match r.u8()? {
            0 => None,
            1 => Some(FallbackTrie::new(ByteDfa::read(&mut r)?)),
            _ => return Err(bad("byte-fallback flag")),
        };
        if trie.is_some() != vocab.byte_fallback_tokens().is_some() {
            return Err(bad("byte-fallback automaton present without byte fallback, or missing"));
        }
        let num_forbidden_pairs = r.u64()? as usize;
        r.expect_end()?;
        if class_of.iter().any(|&c| c != NO_CLASS && c as usize >= num_classes) {
            return Err(bad("class id out of range"));
        }
        Self::assemble(vocab, construction, class_of, forbidden, num_forbidden_pairs, trie)
    }
}
