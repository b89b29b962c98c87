//! The tokenizer as the core sees it: every token id's byte string, the merge table in rank
//! order, which ids are special, and the EOS ids — parsed from a Hugging Face `tokenizer.json`
//! or a Mistral Tekken file ([`tekken`], translated into the `tokenizer.json` it stands for).
//!
//! # Token bytes
//! Everything downstream works over bytes (the byte-level homomorphism of the papers), so each
//! token's text is turned into the bytes it decodes to:
//! * byte-level BPE (GPT-2, Llama 3, ...): every character of the token string stands for one
//!   byte through GPT-2's bytes↔unicode table, which we invert;
//! * SentencePiece-style BPE (Mistral-7B, Llama 2): "▁" is a space and, with `byte_fallback`,
//!   `<0xNN>` is the single byte `NN`;
//! * WordPiece: a word-initial token is a space and its text, a continuation (`##ing`) its text
//!   without the prefix (`crate::tokenizer::word_piece` says why);
//! * added tokens decode to their content.
//!
//! # What "exact" needs (see [`Vocabulary::canonical_unsupported_reason`])
//! * *Character-level BPE without a pre-tokenizer* (SentencePiece style): the text is turned into
//!   characters (a space becomes "▁" when the tokenizer says so), each character present in the
//!   vocabulary is a base symbol, the others become byte-fallback tokens, and the merges then act
//!   by priority. The `Prepend("▁")` normalizer of Mistral-7B / Llama 2 is deliberately ignored:
//!   guides follow *continuation* semantics (`docs/design.md` §1), where no start-of-text marker is
//!   prepended.
//! * *Byte-level BPE*: bytes are the base symbols, and what runs before the merges is described
//!   by a [`PreTokenizer`] (`Split` / `ByteLevel` / `Digits` / `Punctuation` stages, also after
//!   `ByteLevel` on the byte-mapped text, NFC or NFKC, `ignore_merges`, non-special added
//!   tokens), which `crate::build::pre_tokenized` models.
//!
//! Any other component (lowercasing, dropout, subword
//! prefixes, ...) makes the tokenizer refused for canonical methods with a message naming it;
//! `agnostic` still works.

mod parse;
mod support;
pub mod tekken;

use rustc_hash::FxHashMap;

use crate::tokenizer::word_piece::WordPiece;

pub use crate::util::byte_level::{byte_to_unicode_table, unicode_to_byte};

/// How token strings map to bytes, and how text maps to base symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Character-level BPE, optionally SentencePiece-style ("▁" for space, `<0xNN>` fallback).
    CharBpe,
    /// Byte-level BPE (GPT-2 byte↔unicode table).
    ByteLevelBpe,
    /// A Unigram model decoded by concatenation (agnostic guides only).
    Unigram,
    /// WordPiece (BERT): a word-initial token decodes to a space and its text, a continuation
    /// (`##ing`) to its text without the prefix (`crate::tokenizer::word_piece`).
    WordPiece,
}

impl TokenizerKind {
    pub fn name(self) -> &'static str {
        match self {
            TokenizerKind::CharBpe => "sentencepiece-bpe",
            TokenizerKind::ByteLevelBpe => "byte-level-bpe",
            TokenizerKind::Unigram => "unigram",
            TokenizerKind::WordPiece => "wordpiece",
        }
    }
}

/// One merge rule: `left` followed by `right` becomes `merged`; its rank is its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merge {
    pub left: u32,
    pub right: u32,
    pub merged: u32,
}

/// The special-token names tried, in order, when no EOS id is given.
pub const EOS_NAMES: &[&str] = &[
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<eos>",
    "<|im_end|>",
    "<|eot_id|>",
    "<｜end▁of▁sentence｜>",
    "<|EOT|>",
    "<|end|>",
    "<EOS_TOKEN>",
    "[SEP]",
];

/// A parsed tokenizer. Immutable once built.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    kind: TokenizerKind,
    token_bytes: Vec<Vec<u8>>,
    token_strings: Vec<Option<String>>,
    /// Ids that are never allowed inside a constraint: special tokens, the unknown token, ids
    /// with no token at all.
    never_allowed: Vec<bool>,
    special_ids: Vec<u32>,
    eos: Vec<u32>,
    vocab_size: usize,
    merges: Vec<Merge>,
    /// `byte_fallback_token[b]`: the id of `<0xNN>` when the model falls back to bytes.
    byte_fallback_token: Option<Box<[u32; 256]>>,
    /// A space in the text is the symbol "▁".
    space_is_metaspace: bool,
    canonical_unsupported: Option<String>,
    /// How a byte-level BPE tokenizer splits and normalizes the text (when canonical guides
    /// support it).
    pre_tokenizer: Option<PreTokenizer>,
    /// The WordPiece model, for a WordPiece tokenizer.
    word_piece: Option<WordPiece>,
    by_string: FxHashMap<String, u32>,
    fingerprint: u64,
}

/// What a byte-level BPE tokenizer does to the text before the merges, in the form the
/// canonical construction (`crate::build::pre_tokenized`) models exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreTokenizer {
    /// `Split(pattern, Isolated)` stages in order; each splits every piece of the previous one.
    /// `ByteLevel(use_regex=true)`, `Digits` and `Punctuation` are expressed as such patterns.
    pub stages: Vec<String>,
    /// Stages after `ByteLevel` (Falcon's `Digits` and `Split`), as patterns over the
    /// *byte-mapped* text: each byte of a piece is one stand-in character (GPT-2's table), so
    /// they may cut inside a UTF-8 character (`crate::pre_tokenizer::byte_mapped`).
    pub byte_mapped_stages: Vec<String>,
    pub normalization: Normalization,
    /// A piece that is itself a vocabulary token is emitted whole (Llama 3).
    pub ignore_merges: bool,
    /// Characters guides never generate because the pattern translation cannot be exact for
    /// them (see [`DIGITS_DISAGREEMENT`]).
    pub excluded_chars: Vec<(char, char)>,
    /// Non-special added tokens `(id, content)`: when there are any, `stages[0]` splits them out
    /// of the text first and is *final* (its matches never go through the later stages, see
    /// `crate::pre_tokenizer::piece_machine`); a piece spelling a content must be that token
    /// alone.
    pub added: Vec<(u32, String)>,
}

impl PreTokenizer {
    /// The non-special added tokens' contents (what `stages[0]` splits out when there are any).
    pub fn added_contents(&self) -> Vec<String> {
        self.added.iter().map(|a| a.1.clone()).collect()
    }
}

/// Code points where Hugging Face's `Digits` (Rust's `char::is_numeric`, Unicode 17 in the
/// tokenizers 0.23 wheels) and regex-syntax's `\p{N}` (Unicode 16) disagree: guides exclude them.
pub const DIGITS_DISAGREEMENT: &[(char, char)] = &[('\u{11DE0}', '\u{11DE9}'), ('\u{16FF4}', '\u{16FF6}')];

/// A normalizer that canonical guides support: the text is restricted to characters the
/// normalizer leaves unchanged in every context (see `crate::build::pre_tokenized`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalization {
    None,
    Nfc,
    Nfkc,
}

/// GPT-2's pre-tokenizer regex (`ByteLevel` with `use_regex=true`).
pub const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Hugging Face's `Punctuation` pre-tokenizer class: ASCII punctuation or Unicode `P*`.
const PUNCTUATION_CLASS: &str = r"[!-/:-@\[-`{-~\p{P}]";

impl Vocabulary {
    /// A hash of everything the tokenizer DFA depends on (token bytes, merges, flags): the key
    /// of its disk cache. EOS ids and `vocab_size` are not part of it.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
    /// Number of token ids the tokenizer defines.
    pub fn num_tokens(&self) -> usize {
        self.token_bytes.len()
    }
    /// Mask width (≥ `num_tokens`).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }
    pub fn eos_token_ids(&self) -> &[u32] {
        &self.eos
    }
    pub fn special_token_ids(&self) -> &[u32] {
        &self.special_ids
    }
    /// The bytes of a token (empty for ids past the tokenizer, e.g. logits padding).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.token_bytes.get(id as usize).map_or(&[], |b| b.as_slice())
    }
    /// The text a token sequence stands for: its tokens' bytes in order, except that the first
    /// word of a WordPiece text has no space before it (`crate::tokenizer::word_piece`).
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out: Vec<u8> = ids.iter().flat_map(|&id| self.token_bytes(id).iter().copied()).collect();
        if let (Some(model), Some(&first)) = (&self.word_piece, ids.first()) {
            // (A special token's bytes are its content, without the space.)
            let starts_word = self.token_string(first).is_some_and(|s| !model.split_entry(s).1);
            if starts_word && out.first() == Some(&b' ') {
                out.remove(0);
            }
        }
        out
    }
    pub fn token_string(&self, id: u32) -> Option<&str> {
        self.token_strings.get(id as usize).and_then(|s| s.as_deref())
    }
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.by_string.get(text).copied()
    }
    /// Special tokens, the unknown token and unused ids: never allowed inside a constraint.
    pub fn is_never_allowed(&self, id: u32) -> bool {
        self.never_allowed.get(id as usize).copied().unwrap_or(true)
    }
    pub fn merges(&self) -> &[Merge] {
        &self.merges
    }
    pub fn byte_fallback_tokens(&self) -> Option<&[u32; 256]> {
        self.byte_fallback_token.as_deref()
    }
    pub fn space_is_metaspace(&self) -> bool {
        self.space_is_metaspace
    }
    /// `None` when canonical guides are exact for this tokenizer, else why they are refused.
    pub fn canonical_unsupported_reason(&self) -> Option<&str> {
        self.canonical_unsupported.as_deref()
    }
    /// The pre-tokenization canonical guides model, for a supported byte-level BPE tokenizer.
    pub fn pre_tokenizer(&self) -> Option<&PreTokenizer> {
        self.pre_tokenizer.as_ref()
    }
    /// The WordPiece model, for a WordPiece tokenizer (`canonical_unsupported_reason` says
    /// whether canonical guides follow it).
    pub fn word_piece(&self) -> Option<&WordPiece> {
        self.word_piece.as_ref()
    }
    /// The base symbols BPE starts from for `bytes` (one per character, or per byte for
    /// byte-level BPE), `None` when one is missing from the vocabulary.
    pub fn base_symbols(&self, bytes: &[u8], out: &mut Vec<u32>) -> bool {
        out.clear();
        if self.kind == TokenizerKind::ByteLevelBpe {
            let table = byte_to_unicode_table();
            let mut buf = [0u8; 4];
            return bytes.iter().all(|&b| {
                let c = table[b as usize];
                self.by_string
                    .get(&*c.encode_utf8(&mut buf))
                    .copied()
                    .filter(|&id| !self.never_allowed[id as usize])
                    .map(|id| out.push(id))
                    .is_some()
            });
        }
        let Ok(text) = std::str::from_utf8(bytes) else { return false };
        text.chars().all(|c| self.char_symbol(c).map(|s| out.push(s)).is_some())
    }
    /// The base symbol a character of the text starts as, if the vocabulary has one.
    pub fn char_symbol(&self, c: char) -> Option<u32> {
        let c = if c == ' ' && self.space_is_metaspace { '\u{2581}' } else { c };
        let mut buf = [0u8; 4];
        self.by_string.get(&*c.encode_utf8(&mut buf)).copied().filter(|&id| !self.never_allowed[id as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn byte_table_is_a_bijection() {
        let m = unicode_to_byte();
        assert_eq!(m.len(), 256);
        assert_eq!(m[&'Ġ'], b' ');
        assert_eq!(m[&'Ċ'], b'\n');
        assert_eq!(m[&'a'], b'a');
    }

    #[test]
    fn synthetic_char_bpe() {
        let v = Vocabulary::char_bpe_for_tests(&["a", "b", "ab"], &[("a", "b")]).unwrap();
        assert_eq!(v.kind(), TokenizerKind::CharBpe);
        assert_eq!(v.num_tokens(), 4);
        assert_eq!(v.eos_token_ids(), &[3]);
        assert!(v.is_never_allowed(3));
        assert_eq!(v.merges(), &[Merge { left: 0, right: 1, merged: 2 }]);
        assert_eq!(v.canonical_unsupported_reason(), None);
    }

    #[test]
    fn malformed_inputs() {
        assert!(
            matches!(Vocabulary::from_json("{", None, None), Err(Error::MalformedTokenizer(m)) if m.contains("JSON"))
        );
        assert!(
            matches!(Vocabulary::from_json("{}", None, None), Err(Error::MalformedTokenizer(m)) if m.contains("model"))
        );
        let no_eos = r#"{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}"#;
        assert!(
            matches!(Vocabulary::from_json(no_eos, None, None), Err(Error::InvalidArgument(m)) if m.contains("EOS"))
        );
        assert!(Vocabulary::from_json(no_eos, Some(vec![0]), Some(64)).is_ok());
        assert!(matches!(Vocabulary::from_json(no_eos, Some(vec![5]), None), Err(Error::InvalidArgument(_))));
        let bad_merge = r#"{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}"#;
        assert!(
            matches!(Vocabulary::from_json(bad_merge, Some(vec![0]), None), Err(Error::MalformedTokenizer(m)) if m.contains("missing"))
        );
    }
}
