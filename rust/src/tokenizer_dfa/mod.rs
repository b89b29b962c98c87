//! The tokenizer DFA: which token may follow which, so that a token sequence is exactly what
//! the tokenizer itself would produce — the DFA of `tokenize(Σ*)`.
//!
//! # Shape
//! The appendix (Algorithm 3 and its proof) shows that for a merge table every transition on a
//! token `t` goes to the same state, so the DFA is: `class_of(t)`, the state after `t`, and for
//! each state the set of *forbidden* next tokens. States with equal forbidden sets are fused
//! (§5.3), so a state here is a *class*. Class 0 has an empty forbidden set: it is the state at
//! the start of a continuation and after a byte-fallback character.
//!
//! # Two constructions, one result
//! * `priority` ([`TokenizerDfa::build`]) — exact for priority BPE on any table, and the one
//!   used.
//! * [`crate::tokenizer_dfa::sequential`] ([`TokenizerDfa::build_sequential`]) — the
//!   appendix's BuildTokenizerDFA. It assumes merges are applied in sequential passes, which
//!   equals Hugging Face's priority BPE only for *well-ordered* tables (see
//!   [`crate::tokenizer::bpe`]). Kept as the reference the tests hold the other to: on the
//!   well-ordered tables where both apply it gives the same sets, but its per-state hash sets
//!   take 6–8× the memory (o200k 3.05 GB at peak against 364 MB; Qwen2 1.57 GB against 225 MB;
//!   GPT-2 327 / 63 MB) and it is 25–35 % slower than replaying every pair, itself 4–5× slower
//!   than the window test (o200k 13.1 s, 9.2 s, 2.5 s).
//!
//! The priority-timeline construction:
//!   A pair `(t1, t2)` is canonical iff each token alone encodes to itself and no merge ever
//!   crosses the boundary when their text is encoded together. Until the first crossing merge,
//!   the two sides evolve exactly as when encoded alone, and the global heap pops their merges
//!   in the order of a greedy two-way merge of their rank sequences (ties go left, the lower
//!   position). The boundary pair `(r, l)` — the current last symbol of the left side and first
//!   symbol of the right side — fires when its rank `β` is below the left side's next rank `p`
//!   (a tie means the very same pair further left, which pops first) and not above the right
//!   side's next rank `q` (a tie pops the boundary first, it is further left). So we record each
//!   token's derivation as a *timeline* of `(first symbol, last symbol, next rank)` and replay
//!   the two timelines — or, where both never lower their next rank (almost every token of
//!   the real tables), compare the ranks that open and close the two sides' windows
//!   (`priority`'s window test, four comparisons). Candidates are only pairs where some merge
//!   `(r, l)` links a last symbol of `t1`'s timeline to a first symbol of `t2`'s.
//!   For sequences longer than two, the projection of the global heap order onto two adjacent
//!   tokens is the same two-way merge, so a sequence is canonical iff all its adjacent pairs are:
//!   the next allowed tokens depend on the last token only, as with Algorithm 3.
//!
//! # Byte fallback
//! A character missing from the vocabulary becomes its UTF-8 bytes as `<0xNN>` tokens, which no
//! merge touches. They are modelled by a small byte automaton of the *absent* characters
//! ([`FallbackTrie`]): after a class state a byte token must start an absent character, inside
//! one it must continue it, and a completed character leads back to class 0. Byte tokens that
//! spell a character present in the vocabulary are never canonical and never allowed.
//!
//! # Memory while building
//! Tokens are fused into classes as their sets are found (`ClassInterner`), in token order, so
//! the class numbering (and the cache file) does not depend on how the work was split: the
//! priority-timeline workers hand their chunks over in order. Never holding every token's set
//! at once took the peak of a build from 3.3 to 1.1 GB for Llama 3 (380 M forbidden ids counted
//! per token against 115 M distinct); storing the interned sets as runs
//! (`forbidden_sets`) took it to 0.26 GB, and o200k's, once Algorithm 3 was no longer used,
//! from 3.0 to 0.36 GB.
//!
//! # Tokens that can never be emitted
//! A token whose own text does not encode to itself (unreachable by the merges, or only ever
//! produced inside a larger token) has no class and is never allowed.

mod cache;
mod fallback;
pub(crate) mod forbidden_sets;
pub mod lone_tokens;
mod priority;
pub mod sequential;
pub mod side;

use fallback::absent_char_trie;
pub use fallback::FallbackTrie;
use forbidden_sets::EncodedSet;
use priority::{build_priority_timeline, Derivations, PairCheck};

use std::time::Instant;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::tokenizer::bpe::MergeTable;
use crate::tokenizer::vocab::Vocabulary;
pub use crate::tokenizer_dfa::forbidden_sets::ForbiddenSet;
use crate::tokenizer_dfa::forbidden_sets::{ForbiddenBits, ForbiddenSets};
use crate::util::bitset;
use crate::util::byte_set::ByteSet;
use crate::util::token_set::TokenFilter;

/// No class: the token is never emitted (or is a byte-fallback token, see `byte_of_token`).
pub const NO_CLASS: u32 = u32::MAX;

/// Which construction produced a [`TokenizerDfa`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construction {
    Algorithm3,
    PriorityTimeline,
}

impl Construction {
    pub fn name(self) -> &'static str {
        match self {
            Construction::Algorithm3 => "algorithm3",
            Construction::PriorityTimeline => "priority-timeline",
        }
    }
}

/// The DFA of canonical token sequences. Immutable; shared by every guide of a compiler.
#[derive(Clone, Debug)]
pub struct TokenizerDfa {
    construction: Construction,
    class_of: Vec<u32>,
    /// The forbidden next tokens, per class.
    forbidden: ForbiddenSets,
    /// `byte_of_token[t]` = the byte of a byte-fallback token, `u16::MAX` otherwise.
    byte_of_token: Vec<u16>,
    fallback_tokens: Option<[u32; 256]>,
    trie: Option<FallbackTrie>,
    num_emittable: usize,
    num_forbidden_pairs: usize,
    build_seconds: f64,
    /// The large forbidden sets as bitsets (see [`TokenizerDfa::forbidden_bits`]).
    forbidden_bits: ForbiddenBits,
}

/// A state of the tokenizer DFA: a class (`< num_classes`) or, past them, a state inside a
/// byte-fallback character.
pub type TokState = u32;

/// Tokens fused into classes by equal forbidden sets, interned by their hash (a collision is
/// resolved by comparing the sets). Class 0 is the empty set (the state at the start of a
/// continuation); other classes are numbered in the order tokens are added, so adding them in
/// token order gives the same numbering however the sets were computed.
struct ClassInterner {
    class_of: Vec<u32>,
    forbidden: ForbiddenSets,
    by_hash: FxHashMap<u64, Vec<u32>>,
    /// Forbidden pairs counted per token.
    pairs: usize,
}

impl ClassInterner {
    fn new(vocab: &Vocabulary) -> ClassInterner {
        let n = vocab.num_tokens();
        let order = ForbiddenSets::lexicographic_order(n, |t| vocab.token_bytes(t));
        let mut classes = ClassInterner {
            class_of: vec![NO_CLASS; n],
            forbidden: ForbiddenSets::new(order),
            by_hash: FxHashMap::default(),
            pairs: 0,
        };
        let empty = EncodedSet::from_ranks(n, &[]);
        classes.intern(&empty);
        classes
    }

    /// The class of `set`.
    fn intern(&mut self, set: &EncodedSet) -> u32 {
        let same = self.by_hash.entry(set.hash64()).or_default();
        if let Some(&c) = same.iter().find(|&&c| self.forbidden.equals(c as usize, set)) {
            return c;
        }
        let c = self.forbidden.len() as u32;
        self.forbidden.push(set);
        same.push(c);
        c
    }

    /// Token `t` with its forbidden set.
    fn add(&mut self, t: u32, set: &EncodedSet) {
        let c = self.intern(set);
        self.add_to_class(t, c);
    }

    /// Token `t` into a class interned already.
    fn add_to_class(&mut self, t: u32, class: u32) {
        self.pairs += self.forbidden.get(class as usize).len();
        self.class_of[t as usize] = class;
    }
}

impl TokenizerDfa {
    /// Builds the tokenizer DFA of a character-level BPE vocabulary (the priority-timeline
    /// construction); `Unsupported` for others.
    pub fn build(vocab: &Vocabulary) -> Result<TokenizerDfa> {
        if let Some(reason) = vocab.canonical_unsupported_reason() {
            return Err(Error::Unsupported(reason.to_string()));
        }
        let started = Instant::now();
        let table = MergeTable::new(vocab.merges());
        let words = Derivations::compute(vocab, &table);
        let mut dfa = Self::from_priority_timeline(vocab, &table, &words, PairCheck::WindowsWhereMonotone)?;
        dfa.build_seconds = started.elapsed().as_secs_f64();
        Ok(dfa)
    }

    /// The priority-timeline construction replaying every candidate pair: the reference the
    /// tests hold the window test to.
    #[cfg(test)]
    fn build_replaying_every_pair(vocab: &Vocabulary) -> Result<TokenizerDfa> {
        let table = MergeTable::new(vocab.merges());
        let words = Derivations::compute(vocab, &table);
        Self::from_priority_timeline(vocab, &table, &words, PairCheck::ReplayEvery)
    }

    /// The appendix's Algorithm 3 ([`sequential`]), the reference the tests hold
    /// [`TokenizerDfa::build`] to; `Unsupported` where sequential passes are not exact
    /// ([`MergeTable::sequential_passes_are_exact`]).
    pub fn build_sequential(vocab: &Vocabulary) -> Result<TokenizerDfa> {
        if let Some(reason) = vocab.canonical_unsupported_reason() {
            return Err(Error::Unsupported(reason.to_string()));
        }
        if !MergeTable::sequential_passes_are_exact(vocab.merges()) {
            return Err(Error::Unsupported(
                "Algorithm 3 needs a well-ordered merge table with one producer per token".into(),
            ));
        }
        let started = Instant::now();
        let words = Derivations::compute(vocab, &MergeTable::new(vocab.merges()));
        let mut dfa = Self::from_sequential(vocab, &words.emittable)?;
        dfa.build_seconds = started.elapsed().as_secs_f64();
        Ok(dfa)
    }

    /// The priority-timeline construction, its sets interned as they are found.
    fn from_priority_timeline(
        vocab: &Vocabulary,
        table: &MergeTable,
        words: &Derivations,
        check: PairCheck,
    ) -> Result<TokenizerDfa> {
        let mut classes = ClassInterner::new(vocab);
        let ranks = classes.forbidden.ranks().to_vec();
        build_priority_timeline(table, words, &ranks, check, |t, f| {
            if words.emittable[t as usize] {
                classes.add(t, f);
            }
        });
        let ClassInterner { class_of, forbidden, pairs, .. } = classes;
        Self::assemble(vocab, Construction::PriorityTimeline, class_of, forbidden, pairs, None)
    }

    /// Algorithm 3 ([`sequential`]): its states' sets become classes in token order, each
    /// converted (sorted, hashed) once and its hash set freed as soon as it is interned.
    fn from_sequential(vocab: &Vocabulary, emittable: &[bool]) -> Result<TokenizerDfa> {
        let sequential::States { state_of, mut forbidden } = sequential::states(vocab, emittable);
        let mut classes = ClassInterner::new(vocab);
        let mut class_of_state = vec![NO_CLASS; forbidden.len()];
        for (t, &s) in state_of.iter().enumerate() {
            if !emittable[t] {
                continue;
            }
            if s == sequential::NONE {
                classes.add_to_class(t as u32, 0);
                continue;
            }
            if class_of_state[s as usize] == NO_CLASS {
                let rank = classes.forbidden.ranks();
                let mut f: Vec<u32> =
                    std::mem::take(&mut forbidden[s as usize]).into_iter().map(|t| rank[t as usize]).collect();
                f.sort_unstable();
                let set = EncodedSet::from_ranks(rank.len(), &f);
                class_of_state[s as usize] = classes.intern(&set);
            }
            classes.add_to_class(t as u32, class_of_state[s as usize]);
        }
        let ClassInterner { class_of, forbidden, pairs, .. } = classes;
        Self::assemble(vocab, Construction::Algorithm3, class_of, forbidden, pairs, None)
    }

    /// The DFA of classes already fused: adds the byte-fallback tables and trie (`loaded_trie`
    /// when a cache supplies it, else built) and the bitsets of the large forbidden sets.
    fn assemble(
        vocab: &Vocabulary,
        construction: Construction,
        class_of: Vec<u32>,
        forbidden: ForbiddenSets,
        num_forbidden_pairs: usize,
        loaded_trie: Option<FallbackTrie>,
    ) -> Result<TokenizerDfa> {
        let n = vocab.num_tokens();
        let emittable: Vec<bool> = class_of.iter().map(|&c| c != NO_CLASS).collect();
        let mut byte_of_token = vec![u16::MAX; n];
        let (fallback_tokens, trie) = match vocab.byte_fallback_tokens() {
            Some(fb) => {
                for (b, &t) in fb.iter().enumerate() {
                    byte_of_token[t as usize] = b as u16;
                }
                let trie = match loaded_trie {
                    Some(trie) => trie,
                    None => absent_char_trie(vocab, &emittable)?,
                };
                (Some(*fb), Some(trie))
            }
            None => (None, None),
        };
        Ok(TokenizerDfa {
            construction,
            forbidden_bits: ForbiddenBits::new(&forbidden, n),
            forbidden,
            byte_of_token,
            fallback_tokens,
            trie,
            num_emittable: emittable.iter().filter(|&&e| e).count(),
            num_forbidden_pairs,
            build_seconds: 0.0,
            class_of,
        })
    }

    /// Whether the forbidden sets are read in place from a memory-mapped cache file.
    pub fn is_mapped(&self) -> bool {
        self.forbidden.is_mapped()
    }

    pub fn construction(&self) -> Construction {
        self.construction
    }
    pub fn num_classes(&self) -> usize {
        self.forbidden.len()
    }
    /// Classes plus states inside a byte-fallback character.
    pub fn num_states(&self) -> usize {
        self.forbidden.len() + self.trie.as_ref().map_or(0, |t| t.num_states())
    }
    /// The state at the start of a continuation.
    pub fn initial(&self) -> TokState {
        0
    }
    pub fn is_class(&self, q: TokState) -> bool {
        (q as usize) < self.forbidden.len()
    }
    /// The class reached by a (non byte-fallback) token, or [`NO_CLASS`].
    #[inline]
    pub fn class_of(&self, token: u32) -> u32 {
        self.class_of.get(token as usize).copied().unwrap_or(NO_CLASS)
    }
    /// The forbidden next tokens of `class`.
    #[inline]
    pub fn forbidden(&self, class: u32) -> ForbiddenSet<'_> {
        self.forbidden.get(class as usize)
    }
    /// The forbidden set of `class` as a bitset over the tokens (`words_for(num_tokens)`
    /// words) when it is large enough to have one (see `BITSET_MIN_IDS_PER_WORD`).
    pub fn forbidden_bits(&self, class: u32) -> Option<&[u32]> {
        self.forbidden_bits.get(class as usize)
    }
    /// Whether `token` may not follow `class`.
    #[inline]
    pub fn forbids(&self, class: u32, token: u32) -> bool {
        match self.forbidden_bits(class) {
            Some(bits) => bitset::contains(bits, token as usize),
            None => self.forbidden(class).contains(token),
        }
    }

    /// [`TokenizerDfa::forbids`] for one class over tokens met mostly in the order of their
    /// bytes, as a trie walk meets them (see `forbidden_sets::ForbiddenCursor`).
    pub fn forbids_in_walk(&self, class: u32) -> impl FnMut(u32) -> bool + '_ {
        let bits = self.forbidden_bits(class);
        let mut cursor = self.forbidden(class).cursor();
        move |token| match bits {
            Some(bits) => bitset::contains(bits, token as usize),
            None => cursor.contains(token),
        }
    }
    /// Whether some token of `tokens` (sorted) may follow `class` and is not in `except` (sorted
    /// `(token, _)` pairs). A set larger than the forbidden one always has such a token.
    #[inline]
    pub fn allows_some(&self, class: u32, tokens: &[u32], except: &[(u32, u32)]) -> bool {
        if except.is_empty() && tokens.len() > self.forbidden(class).len() {
            return true;
        }
        tokens.iter().any(|&t| !self.forbids(class, t) && except.binary_search_by_key(&t, |e| e.0).is_err())
    }

    /// Clears the forbidden next tokens of `class` from the bitset `mask`.
    pub fn clear_forbidden(&self, class: u32, mask: &mut [u32]) {
        match self.forbidden_bits(class) {
            Some(bits) => bitset::clear_all(mask, bits),
            None => self.forbidden(class).clear_from(mask),
        }
    }
    pub fn num_emittable(&self) -> usize {
        self.num_emittable
    }
    pub fn num_forbidden_pairs(&self) -> usize {
        self.num_forbidden_pairs
    }
    pub(crate) fn set_build_seconds(&mut self, seconds: f64) {
        self.build_seconds = seconds;
    }
    /// Build time, or load time when the DFA came from a cache.
    pub fn build_seconds(&self) -> f64 {
        self.build_seconds
    }
    /// The byte of a byte-fallback token.
    #[inline]
    pub fn fallback_byte(&self, token: u32) -> Option<u8> {
        let b = self.byte_of_token.get(token as usize).copied().unwrap_or(u16::MAX);
        (b != u16::MAX).then_some(b as u8)
    }
    pub fn fallback_tokens(&self) -> Option<&[u32; 256]> {
        self.fallback_tokens.as_ref()
    }

    /// What of state `q` a byte-fallback token's transition reads: [`step_byte`] from every
    /// class state (a token's end) is the same, so those share one context; inside an absent
    /// character the context is the state itself.
    ///
    /// [`step_byte`]: TokenizerDfa::step_byte
    #[inline]
    pub fn fallback_context(&self, q: TokState) -> u32 {
        if q < self.forbidden.len() as u32 {
            u32::MAX
        } else {
            q
        }
    }

    /// Transition on a byte-fallback token's byte.
    #[inline]
    pub fn step_byte(&self, q: TokState, b: u8) -> Option<TokState> {
        let trie = self.trie.as_ref()?;
        let c = self.forbidden.len() as u32;
        let inside = (q >= c).then(|| q - c);
        match trie.step(inside, b)? {
            Ok(s) => Some(c + s),
            Err(()) => Some(0),
        }
    }

    /// The bytes whose byte-fallback token may follow state `q`: those [`TokenizerDfa::step_byte`]
    /// takes, none without byte fallback.
    #[inline]
    pub fn fallback_bytes(&self, q: TokState) -> ByteSet {
        let Some(trie) = self.trie.as_ref() else { return ByteSet::default() };
        let c = self.forbidden.len() as u32;
        trie.bytes_taken((q >= c).then(|| q - c))
    }

    /// Transition on any token: `None` when the token may not follow state `q`.
    #[inline]
    pub fn step(&self, q: TokState, token: u32) -> Option<TokState> {
        if let Some(b) = self.fallback_byte(token) {
            return self.step_byte(q, b);
        }
        let c = self.class_of(token);
        if c == NO_CLASS || !self.is_class(q) || self.forbidden.get(q as usize).contains(token) {
            return None;
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// All-pairs brute force (appendix Algorithm 4) with the priority BPE as `tokenize`.
    fn brute_force_allowed(vocab: &Vocabulary, t1: u32, t2: u32) -> bool {
        let table = MergeTable::new(vocab.merges());
        let syms = |t: u32| -> Vec<u32> {
            std::str::from_utf8(vocab.token_bytes(t)).unwrap().chars().map(|c| vocab.char_symbol(c).unwrap()).collect()
        };
        let alone = |t: u32| {
            let mut w = syms(t);
            table.encode(&mut w);
            w == [t]
        };
        let mut w = syms(t1);
        w.extend(syms(t2));
        table.encode(&mut w);
        alone(t1) && alone(t2) && w == [t1, t2]
    }

    /// Checks every pair against the brute force in each construction that applies; returns
    /// how many did.
    fn check_all_pairs(tokens: &[&str], merges: &[(&str, &str)]) -> usize {
        let vocab = Vocabulary::char_bpe_for_tests(tokens, merges).unwrap();
        let mut dfas =
            vec![TokenizerDfa::build(&vocab).unwrap(), TokenizerDfa::build_replaying_every_pair(&vocab).unwrap()];
        let sequential = TokenizerDfa::build_sequential(&vocab);
        assert_eq!(sequential.is_ok(), MergeTable::sequential_passes_are_exact(vocab.merges()));
        dfas.extend(sequential.ok());
        for dfa in &dfas {
            let n = tokens.len() as u32;
            for t1 in 0..n {
                let q = dfa.step(dfa.initial(), t1);
                for t2 in 0..n {
                    let got = q.and_then(|q| dfa.step(q, t2)).is_some();
                    assert_eq!(
                        got,
                        brute_force_allowed(&vocab, t1, t2),
                        "{:?}: pair ({:?}, {:?})",
                        dfa.construction(),
                        tokens[t1 as usize],
                        tokens[t2 as usize]
                    );
                }
            }
        }
        dfas.len()
    }

    #[test]
    fn serialization_round_trip() {
        let vocab =
            Vocabulary::char_bpe_for_tests(&["a", "b", "c", "ab", "aa", "ac"], &[("a", "b"), ("a", "a"), ("a", "c")])
                .unwrap();
        let dfa = TokenizerDfa::build(&vocab).unwrap();
        let bytes = dfa.to_bytes(&vocab);
        let back = TokenizerDfa::from_bytes(&bytes, &vocab).unwrap();
        assert_eq!(back.class_of, dfa.class_of);
        assert_eq!(back.forbidden, dfa.forbidden);
        let other =
            Vocabulary::char_bpe_for_tests(&["a", "b", "c", "ab", "aa", "ac"], &[("a", "b"), ("a", "c"), ("a", "a")])
                .unwrap();
        assert!(TokenizerDfa::from_bytes(&bytes, &other).is_err(), "another merge order is another tokenizer");
    }

    /// The streamed cache file is byte for byte what `to_bytes` gives (a trie included).
    #[test]
    fn written_file_equals_to_bytes() {
        let (vocab, dfa) = vocab_with_large_forbidden_sets();
        let path = std::env::temp_dir().join(format!("propertok-written-dfa-{}.bin", std::process::id()));
        dfa.write_file(&vocab, &path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), dfa.to_bytes(&vocab));
        std::fs::remove_file(&path).unwrap();
        assert!(dfa.write_file(&vocab, std::path::Path::new("/nonexistent-dir/x.bin")).is_err());
    }

    /// A small vocabulary some of whose forbidden sets reach the bitset threshold, and its DFA.
    fn vocab_with_large_forbidden_sets() -> (Vocabulary, TokenizerDfa) {
        let tokens = ["a", "b", "c", "ab", "aa", "ac", "ba", "ca", "bb", "abc", "aab"];
        let merges = [("a", "b"), ("a", "a"), ("a", "c"), ("b", "a"), ("c", "a"), ("b", "b"), ("ab", "c"), ("a", "ab")];
        let vocab = Vocabulary::char_bpe_for_tests(&tokens, &merges).unwrap();
        let dfa = TokenizerDfa::build(&vocab).unwrap();
        (vocab, dfa)
    }

    /// A cache file loaded through a memory map uses its forbidden sets in place and equals the
    /// DFA it was written from; a flipped bit anywhere in the payload or a truncation is refused.
    #[test]
    fn mapped_cache_file_round_trip_and_refusals() {
        let (vocab, dfa) = vocab_with_large_forbidden_sets();
        let bytes = dfa.to_bytes(&vocab);
        let dir = std::env::temp_dir().join(format!("propertok-mapped-dfa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let map_of = |name: &str, data: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, data).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: a private temporary file that nothing writes while it is mapped.
            Arc::new(unsafe { memmap2::Mmap::map(&file) }.unwrap())
        };
        let back = TokenizerDfa::from_mapped_file(map_of("ok.bin", &bytes), &vocab).unwrap();
        assert!(back.is_mapped() && !dfa.is_mapped());
        assert_eq!(back.class_of, dfa.class_of);
        assert_eq!(back.forbidden, dfa.forbidden);
        for c in 0..dfa.num_classes() as u32 {
            assert_eq!(back.forbidden_bits(c), dfa.forbidden_bits(c));
        }
        for at in [40, bytes.len() / 2, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1;
            assert!(TokenizerDfa::from_mapped_file(map_of("flipped.bin", &flipped), &vocab).is_err(), "bit {at}");
        }
        assert!(TokenizerDfa::from_mapped_file(map_of("short.bin", &bytes[..bytes.len() - 4]), &vocab).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Clearing a class's forbidden set from a mask gives the same bits whether it goes through
    /// the ids or the bitset (a 4-token-per-word threshold makes the larger sets of this small
    /// vocabulary take the bitset path), before and after a cache round trip.
    #[test]
    fn clearing_forbidden_sets_through_ids_or_bitsets() {
        let (vocab, dfa) = vocab_with_large_forbidden_sets();
        let back = TokenizerDfa::from_bytes(&dfa.to_bytes(&vocab), &vocab).unwrap();
        let words = bitset::words_for(vocab.vocab_size());
        let mut with_bits = 0;
        for d in [&dfa, &back] {
            for c in 0..d.num_classes() as u32 {
                let ids = d.forbidden(c).to_sorted_vec();
                if let Some(bits) = d.forbidden_bits(c) {
                    with_bits += 1;
                    assert_eq!(bitset::iter_ones(bits).map(|t| t as u32).collect::<Vec<_>>(), ids);
                }
                let mut mask = vec![u32::MAX; words];
                d.clear_forbidden(c, &mut mask);
                let want: Vec<usize> = (0..words * 32).filter(|&t| ids.binary_search(&(t as u32)).is_err()).collect();
                assert_eq!(bitset::iter_ones(&mask).collect::<Vec<_>>(), want, "class {c}");
            }
        }
        assert!(with_bits > 0, "no class took the bitset path: the test would not cover it");
    }

    #[test]
    fn blog_table() {
        let all = check_all_pairs(&["a", "b", "c", "ab", "aa", "ac"], &[("a", "b"), ("a", "a"), ("a", "c")]);
        assert_eq!(all, 3, "a well-ordered table: Algorithm 3 applies too");
    }

    #[test]
    fn chains_and_aa() {
        let all = check_all_pairs(
            &["a", "b", "c", "ab", "abc", "aa", "aaaa"],
            &[("a", "b"), ("ab", "c"), ("a", "a"), ("aa", "aa")],
        );
        assert_eq!(all, 3);
    }

    #[test]
    fn parts_created_later() {
        // Not well-ordered: only the priority-timeline construction is exact.
        assert_eq!(check_all_pairs(&["b", "c", "d", "cd", "bcd", "bc"], &[("b", "cd"), ("b", "c"), ("c", "d")]), 2);
        assert_eq!(check_all_pairs(&["a", "b", "ab", "aab", "aa"], &[("a", "ab"), ("a", "a"), ("a", "b")]), 2);
    }

    /// Random merge tables over three characters, well-ordered or not (so with monotone and
    /// non-monotone timelines side by side): every pair of every construction against the
    /// brute force.
    #[test]
    fn random_tables_against_brute_force() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut mixed, mut windows_used) = (0, 0);
        for _ in 0..300 {
            let mut tokens: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
            let mut merges: Vec<(String, String)> = Vec::new();
            for _ in 0..2 + next(9) {
                let (x, y) = (tokens[next(tokens.len())].clone(), tokens[next(tokens.len())].clone());
                let merged = format!("{x}{y}");
                if merged.chars().count() > 6 || merges.contains(&(x.clone(), y.clone())) {
                    continue;
                }
                // Sometimes the merge goes before the ones that build its parts: not well-ordered.
                let at = if next(3) == 0 { next(merges.len() + 1) } else { merges.len() };
                merges.insert(at, (x, y));
                if !tokens.contains(&merged) {
                    tokens.push(merged);
                }
            }
            let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
            let merge_refs: Vec<(&str, &str)> = merges.iter().map(|(x, y)| (x.as_str(), y.as_str())).collect();
            check_all_pairs(&token_refs, &merge_refs);
            let vocab = Vocabulary::char_bpe_for_tests(&token_refs, &merge_refs).unwrap();
            let words = Derivations::compute(&vocab, &MergeTable::new(vocab.merges()));
            let monotone = (0..tokens.len()).filter(|&t| words.emittable[t] && words.monotone[t]).count();
            let emittable = words.emittable.iter().filter(|&&e| e).count();
            windows_used += usize::from(monotone > 3);
            mixed += usize::from(monotone < emittable);
        }
        assert!(mixed > 20 && windows_used > 100, "the tables did not mix the two judgements: {mixed}, {windows_used}");
    }

    /// On Llama 3 (107 of its 127,412 timelines are not monotone, so both judgements meet) the
    /// window test gives the classes and sets of a replay of every candidate.
    #[test]
    fn window_test_equals_replays_on_llama3() {
        let vocab = crate::testing::shared_vocabulary("llama3");
        let words = Derivations::compute(&vocab, &MergeTable::new(vocab.merges()));
        let not_monotone = (0..vocab.num_tokens()).filter(|&t| words.emittable[t] && !words.monotone[t]).count();
        assert!(not_monotone > 0, "every timeline monotone: the replay path would go untested");
        let (a, b) = (TokenizerDfa::build(&vocab).unwrap(), TokenizerDfa::build_replaying_every_pair(&vocab).unwrap());
        assert_eq!(a.class_of, b.class_of);
        assert_eq!(a.forbidden, b.forbidden);
    }

    /// On a real well-ordered table (GPT-2's 50,000 merges) both constructions give the same
    /// classes and sets.
    #[test]
    fn algorithm3_equals_priority_timeline_on_gpt2() {
        let vocab = crate::testing::shared_vocabulary("gpt2");
        let (a, b) = (TokenizerDfa::build(&vocab).unwrap(), TokenizerDfa::build_sequential(&vocab).unwrap());
        assert_eq!((a.construction(), b.construction()), (Construction::PriorityTimeline, Construction::Algorithm3));
        assert_eq!(a.class_of, b.class_of);
        assert_eq!(a.forbidden, b.forbidden);
    }
}
