//! The tokenizer as the core sees it: every token id's byte string, the merge table in rank
//! order, which ids are special, and the EOS ids — parsed from a Hugging Face `tokenizer.json`.
//!
//! # Token bytes
//! Everything downstream works over bytes (the byte-level homomorphism of the papers), so each
//! token's text is turned into the bytes it decodes to:
//! * byte-level BPE (GPT-2, Llama 3, ...): every character of the token string stands for one
//!   byte through GPT-2's bytes↔unicode table, which we invert;
//! * SentencePiece-style BPE (Mistral-7B, Llama 2): "▁" is a space and, with `byte_fallback`,
//!   `<0xNN>` is the single byte `NN`;
//! * added tokens decode to their content.
//!
//! # What "exact" needs (see [`Vocabulary::canonical_unsupported_reason`])
//! * *Character-level BPE without a pre-tokenizer* (SentencePiece style): the text is turned into
//!   characters (a space becomes "▁" when the tokenizer says so), each character present in the
//!   vocabulary is a base symbol, the others become byte-fallback tokens, and the merges then act
//!   by priority. The `Prepend("▁")` normalizer of Mistral-7B / Llama 2 is deliberately ignored:
//!   guides follow *continuation* semantics (DESIGN.md), where no start-of-text marker is
//!   prepended.
//! * *Byte-level BPE*: bytes are the base symbols, and what runs before the merges is described
//!   by a [`PreTokenizer`] (`Split` / `ByteLevel` / `Digits` / `Punctuation` stages, NFC or
//!   NFKC, `ignore_merges`, non-special added tokens), which `crate::build::pre_tokenized` models.
//!
//! Any other component (lowercasing, a pre-tokenizer after `ByteLevel`, dropout, subword
//! prefixes, ...) makes the tokenizer refused for canonical methods with a message naming it;
//! `agnostic` still works.

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::error::{Error, Result};

/// How token strings map to bytes, and how text maps to base symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Character-level BPE, optionally SentencePiece-style ("▁" for space, `<0xNN>` fallback).
    CharBpe,
    /// Byte-level BPE (GPT-2 byte↔unicode table).
    ByteLevelBpe,
    /// A Unigram model decoded by concatenation (agnostic guides only).
    Unigram,
}

impl TokenizerKind {
    pub fn name(self) -> &'static str {
        match self {
            TokenizerKind::CharBpe => "sentencepiece-bpe",
            TokenizerKind::ByteLevelBpe => "byte-level-bpe",
            TokenizerKind::Unigram => "unigram",
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
    pub normalization: Normalization,
    /// A piece that is itself a vocabulary token is emitted whole (Llama 3).
    pub ignore_merges: bool,
    /// Characters guides never generate because the pattern translation cannot be exact for
    /// them (see [`DIGITS_DISAGREEMENT`]).
    pub excluded_chars: Vec<(char, char)>,
    /// Non-special added tokens `(id, content)`: when there are any, `stages[0]` splits them out
    /// of the text (a piece spelling a content must be that token alone).
    pub added: Vec<(u32, String)>,
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
    /// Parses a `tokenizer.json` document. `eos_token_ids` defaults to the first of
    /// [`EOS_NAMES`] present among the special tokens; `vocab_size` defaults to the number of
    /// token ids (it is the width of masks, and may be larger when the model pads its logits).
    pub fn from_json(json: &str, eos_token_ids: Option<Vec<u32>>, vocab_size: Option<usize>) -> Result<Vocabulary> {
        let root: Value =
            serde_json::from_str(json).map_err(|e| Error::MalformedTokenizer(format!("not valid JSON: {e}")))?;
        let model = root
            .get("model")
            .filter(|m| m.is_object())
            .ok_or_else(|| Error::MalformedTokenizer("no \"model\" object".into()))?;
        let model_type = model.get("type").and_then(Value::as_str).unwrap_or("BPE");
        let byte_level =
            has_component(root.get("pre_tokenizer"), "ByteLevel") || has_component(root.get("decoder"), "ByteLevel");
        let kind = match model_type {
            "BPE" if byte_level => TokenizerKind::ByteLevelBpe,
            "BPE" => TokenizerKind::CharBpe,
            "Unigram" => TokenizerKind::Unigram,
            other => {
                return Err(Error::UnsupportedTokenizer(format!(
                    "tokenizer model type {other:?} is not supported: its decoding is not a \
                     concatenation of token strings (supported: BPE, Unigram)"
                )))
            }
        };

        // Vocabulary entries: id -> string.
        let mut by_string: FxHashMap<String, u32> = FxHashMap::default();
        let mut entries: Vec<(u32, String)> = Vec::new();
        match model.get("vocab") {
            Some(Value::Object(map)) => {
                for (s, id) in map {
                    let id = as_id(id)
                        .ok_or_else(|| Error::MalformedTokenizer(format!("vocab entry {s:?} has no integer id")))?;
                    entries.push((id, s.clone()));
                }
            }
            Some(Value::Array(list)) if kind == TokenizerKind::Unigram => {
                for (i, item) in list.iter().enumerate() {
                    let s = item.get(0).and_then(Value::as_str).ok_or_else(|| {
                        Error::MalformedTokenizer(format!("unigram vocab entry {i} is not [piece, score]"))
                    })?;
                    entries.push((i as u32, s.to_string()));
                }
            }
            _ => return Err(Error::MalformedTokenizer("model has no \"vocab\"".into())),
        }
        let mut added: Vec<(u32, String, bool)> = Vec::new();
        // Non-special added tokens whose matching is not plain (lstrip / rstrip / single_word).
        let mut added_flags: Vec<String> = Vec::new();
        if let Some(list) = root.get("added_tokens").and_then(Value::as_array) {
            for (i, t) in list.iter().enumerate() {
                let id = t
                    .get("id")
                    .and_then(as_id)
                    .ok_or_else(|| Error::MalformedTokenizer(format!("added_tokens[{i}] has no integer id")))?;
                let content = t
                    .get("content")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::MalformedTokenizer(format!("added_tokens[{i}] has no content")))?;
                let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
                for flag in ["lstrip", "rstrip", "single_word"] {
                    if !special && t.get(flag).and_then(Value::as_bool) == Some(true) {
                        added_flags.push(format!("{content:?} has {flag}=true"));
                    }
                }
                added.push((id, content.to_string(), special));
            }
        }
        let num_tokens =
            entries.iter().map(|e| e.0).chain(added.iter().map(|a| a.0)).max().map_or(0, |m| m as usize + 1);
        if num_tokens == 0 {
            return Err(Error::MalformedTokenizer("the vocabulary is empty".into()));
        }
        if num_tokens > 16_000_000 {
            return Err(Error::MalformedTokenizer(format!("token id {} is implausibly large", num_tokens - 1)));
        }
        let mut token_strings: Vec<Option<String>> = vec![None; num_tokens];
        for (id, s) in entries {
            if let Some(prev) = &token_strings[id as usize] {
                return Err(Error::MalformedTokenizer(format!(
                    "token id {id} is used twice in the vocab ({prev:?} and {s:?})"
                )));
            }
            by_string.insert(s.clone(), id);
            token_strings[id as usize] = Some(s);
        }

        let metaspace = has_component(root.get("pre_tokenizer"), "Metaspace")
            || has_component(root.get("decoder"), "Metaspace")
            || replaces(root.get("normalizer"), " ", "\u{2581}")
            || replaces(root.get("decoder"), "\u{2581}", " ");
        let byte_fallback = model.get("byte_fallback").and_then(Value::as_bool).unwrap_or(false);
        let byte_map = if kind == TokenizerKind::ByteLevelBpe { Some(unicode_to_byte()) } else { None };

        let mut token_bytes: Vec<Vec<u8>> = vec![Vec::new(); num_tokens];
        let mut fallback = [u32::MAX; 256];
        for (id, s) in token_strings.iter().enumerate() {
            let Some(s) = s else { continue };
            token_bytes[id] = match &byte_map {
                Some(map) => s
                    .chars()
                    .map(|c| map.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_else(|| s.as_bytes().to_vec()),
                None => {
                    if let Some(b) = byte_fallback.then(|| parse_byte_token(s)).flatten() {
                        fallback[b as usize] = id as u32;
                        vec![b]
                    } else if metaspace {
                        s.replace('\u{2581}', " ").into_bytes()
                    } else {
                        s.as_bytes().to_vec()
                    }
                }
            };
        }
        let mut never_allowed = vec![false; num_tokens];
        for (id, s) in token_strings.iter().enumerate() {
            if s.is_none() {
                never_allowed[id] = true;
            }
        }
        let mut special_ids = Vec::new();
        let mut nonspecial_added = Vec::new();
        let mut nonspecial_added_ids = Vec::new();
        for (id, content, special) in &added {
            let idu = *id as usize;
            if token_strings[idu].is_none() || *special {
                token_bytes[idu] = content.as_bytes().to_vec();
            }
            if *special {
                never_allowed[idu] = true;
                special_ids.push(*id);
            } else {
                never_allowed[idu] = false;
                nonspecial_added.push(content.clone());
                nonspecial_added_ids.push(*id);
            }
            by_string.entry(content.clone()).or_insert(*id);
        }
        special_ids.sort_unstable();
        special_ids.dedup();
        if let Some(unk) = model.get("unk_token").and_then(Value::as_str) {
            if let Some(&id) = by_string.get(unk) {
                never_allowed[id as usize] = true;
            }
        }
        for (id, b) in token_bytes.iter().enumerate() {
            if b.is_empty() {
                never_allowed[id] = true;
            }
        }

        // Merges, in rank order.
        let mut merges = Vec::new();
        if kind != TokenizerKind::Unigram {
            let list = model.get("merges").and_then(Value::as_array).cloned().unwrap_or_default();
            for (rank, m) in list.iter().enumerate() {
                let (a, b) = match m {
                    Value::String(s) => match s.split_once(' ') {
                        Some((a, b)) => (a.to_string(), b.to_string()),
                        None => {
                            return Err(Error::MalformedTokenizer(format!("merge {rank} {s:?} is not \"left right\"")))
                        }
                    },
                    Value::Array(p) if p.len() == 2 => match (p[0].as_str(), p[1].as_str()) {
                        (Some(a), Some(b)) => (a.to_string(), b.to_string()),
                        _ => return Err(Error::MalformedTokenizer(format!("merge {rank} is not a pair of strings"))),
                    },
                    _ => return Err(Error::MalformedTokenizer(format!("merge {rank} is not a string or a pair"))),
                };
                let look = |t: &str| by_string.get(t).copied();
                let merged = format!("{a}{b}");
                match (look(&a), look(&b), look(&merged)) {
                    (Some(left), Some(right), Some(merged)) => merges.push(Merge { left, right, merged }),
                    _ => {
                        return Err(Error::MalformedTokenizer(format!(
                            "merge {rank} ({a:?}, {b:?}) names a token missing from the vocab"
                        )))
                    }
                }
            }
        }

        let byte_fallback_token =
            (byte_fallback && fallback.iter().all(|&t| t != u32::MAX)).then(|| Box::new(fallback));
        let byte_level_support = (kind == TokenizerKind::ByteLevelBpe)
            .then(|| byte_level_pre_tokenizer(&root, model, &nonspecial_added, &nonspecial_added_ids, &added_flags));
        let canonical_unsupported = canonical_support(
            &root,
            model,
            kind,
            byte_level_support.as_ref(),
            &nonspecial_added,
            byte_fallback,
            byte_fallback_token.as_deref(),
            &merges,
        );

        // EOS.
        let eos = match eos_token_ids {
            Some(ids) => {
                if ids.is_empty() {
                    return Err(Error::InvalidArgument("eos_token_ids is empty: give at least one id".into()));
                }
                for &id in &ids {
                    if id as usize >= num_tokens {
                        return Err(Error::InvalidArgument(format!(
                            "EOS token id {id} is out of range (the tokenizer has {num_tokens} ids)"
                        )));
                    }
                }
                ids
            }
            None => {
                let found = EOS_NAMES.iter().find_map(|name| added.iter().find(|a| a.2 && a.1 == *name).map(|a| a.0));
                match found {
                    Some(id) => vec![id],
                    None => {
                        return Err(Error::InvalidArgument(format!(
                            "EOS token not found: none of the special tokens is named one of {EOS_NAMES:?}; \
                             pass eos_token_ids explicitly"
                        )))
                    }
                }
            }
        };
        let vocab_size = match vocab_size {
            None => num_tokens,
            Some(v) if v < num_tokens => {
                return Err(Error::InvalidArgument(format!(
                    "vocab_size {v} is smaller than the tokenizer's {num_tokens} token ids"
                )))
            }
            Some(v) => v,
        };
        let fingerprint = {
            let mut h = crate::util::serialize::Fnv64::default();
            h.write(kind.name().as_bytes());
            h.write(&[metaspace as u8, byte_fallback_token.is_some() as u8]);
            for (id, b) in token_bytes.iter().enumerate() {
                h.write_u64(b.len() as u64);
                h.write(b);
                h.write(&[never_allowed[id] as u8]);
            }
            for m in &merges {
                h.write_u64(((m.left as u64) << 32) | m.right as u64);
                h.write_u64(m.merged as u64);
            }
            h.write(canonical_unsupported.as_deref().unwrap_or("").as_bytes());
            // The tokenizer DFA keeps only pairs that can share a pre-tokenizer piece.
            if let Some(Ok(p)) = &byte_level_support {
                h.write(format!("{:?}", p).as_bytes());
            }
            h.finish()
        };
        Ok(Vocabulary {
            fingerprint,
            kind,
            token_bytes,
            token_strings,
            never_allowed,
            special_ids,
            eos,
            vocab_size,
            merges,
            byte_fallback_token,
            space_is_metaspace: metaspace,
            canonical_unsupported,
            pre_tokenizer: byte_level_support.and_then(|r| r.ok()),
            by_string,
        })
    }

    /// Builds a character-level BPE vocabulary directly (tests and benchmarks): `tokens[i]` is
    /// token `i`'s text, `merges` pairs of token texts in rank order; the last token is EOS.
    pub fn char_bpe_for_tests(tokens: &[&str], merges: &[(&str, &str)]) -> Result<Vocabulary> {
        let vocab: serde_json::Map<String, Value> =
            tokens.iter().enumerate().map(|(i, t)| (t.to_string(), Value::from(i))).collect();
        let eos = tokens.len();
        let json = serde_json::json!({
            "added_tokens": [{"id": eos, "content": "</s>", "special": true}],
            "model": {"type": "BPE", "vocab": vocab,
                      "merges": merges.iter().map(|(a, b)| vec![a.to_string(), b.to_string()]).collect::<Vec<_>>()},
        });
        Vocabulary::from_json(&json.to_string(), None, None)
    }

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

/// Why canonical guides cannot be exact for this tokenizer, or `None`.
#[allow(clippy::too_many_arguments)]
fn canonical_support(
    root: &Value,
    model: &Value,
    kind: TokenizerKind,
    byte_level_support: Option<&std::result::Result<PreTokenizer, String>>,
    nonspecial_added: &[String],
    byte_fallback: bool,
    fallback_tokens: Option<&[u32; 256]>,
    merges: &[Merge],
) -> Option<String> {
    match kind {
        TokenizerKind::ByteLevelBpe => {
            return byte_level_support.and_then(|r| r.as_ref().err().cloned());
        }
        TokenizerKind::Unigram => {
            return Some(
                "canonical guides need a BPE merge table; this tokenizer is a Unigram model; use method=\"agnostic\""
                    .into(),
            )
        }
        TokenizerKind::CharBpe => {}
    }
    if let Some(pre) = root.get("pre_tokenizer").filter(|v| !v.is_null()) {
        let ok = pre.get("type").and_then(Value::as_str) == Some("Metaspace")
            && pre.get("split").and_then(Value::as_bool) == Some(false);
        if !ok {
            return Some(format!(
                "the pre-tokenizer {} splits the text before BPE, which canonical guides do not model yet; use method=\"agnostic\"",
                describe(Some(pre))
            ));
        }
    }
    if let Some(norm) = root.get("normalizer").filter(|v| !v.is_null()) {
        let parts: Vec<&Value> = match norm.get("normalizers").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![norm],
        };
        for p in parts {
            let ty = p.get("type").and_then(Value::as_str).unwrap_or("?");
            let harmless = match ty {
                "Prepend" => p.get("prepend").and_then(Value::as_str) == Some("\u{2581}"),
                "Replace" => replaces(Some(p), " ", "\u{2581}"),
                _ => false,
            };
            if !harmless {
                return Some(format!(
                    "the normalizer {ty} changes the text before BPE; canonical guides for it are not \
                     implemented; use method=\"agnostic\""
                ));
            }
        }
    }
    if let Some(first) = nonspecial_added.first() {
        return Some(format!(
            "the non-special added token {first:?} (one of {}) is split out of the raw text before BPE, \
             which canonical guides do not model yet; use method=\"agnostic\"",
            nonspecial_added.len()
        ));
    }
    for (key, bad) in [("ignore_merges", Value::Bool(true))] {
        if model.get(key) == Some(&bad) {
            return Some(format!(
                "BPE option {key}=true is not supported by canonical guides without a pre-tokenizer yet"
            ));
        }
    }
    for key in ["dropout", "continuing_subword_prefix", "end_of_word_suffix"] {
        if model.get(key).is_some_and(|v| !v.is_null()) {
            return Some(format!("BPE option {key} is not supported by canonical guides"));
        }
    }
    if byte_fallback && fallback_tokens.is_none() {
        return Some("byte_fallback is set but the vocabulary lacks some of the 256 <0xNN> tokens".into());
    }
    if let Some(fb) = fallback_tokens {
        let is_fb = |t: u32| fb.contains(&t);
        if merges.iter().any(|m| is_fb(m.left) || is_fb(m.right)) {
            return Some("a merge involves a byte-fallback token, which canonical guides do not model".into());
        }
    }
    None
}

/// The pre-tokenization of a byte-level BPE tokenizer, or why canonical guides cannot model it.
pub(crate) fn byte_level_pre_tokenizer(
    root: &Value,
    model: &Value,
    nonspecial_added: &[String],
    nonspecial_added_ids: &[u32],
    added_flags: &[String],
) -> std::result::Result<PreTokenizer, String> {
    let agnostic = "use method=\"agnostic\"";
    for key in ["dropout", "continuing_subword_prefix", "end_of_word_suffix"] {
        if model.get(key).is_some_and(|v| !v.is_null()) {
            return Err(format!("BPE option {key} is not supported by canonical guides; {agnostic}"));
        }
    }
    if model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
        return Err(format!(
            "byte_fallback with a byte-level pre-tokenizer is not supported by canonical guides; {agnostic}"
        ));
    }
    if let Some(first) = added_flags.first() {
        return Err(format!(
            "the non-special added token {first}: canonical guides model added tokens matched as \
             plain strings only; {agnostic}"
        ));
    }
    let normalization = match root.get("normalizer").filter(|v| !v.is_null()) {
        None => Normalization::None,
        Some(norm) => {
            let parts: Vec<&Value> = match norm.get("normalizers").and_then(Value::as_array) {
                Some(list) => list.iter().collect(),
                None => vec![norm],
            };
            let mut found = Normalization::None;
            for p in parts {
                let ty = p.get("type").and_then(Value::as_str).unwrap_or("?");
                let this = match ty {
                    "NFC" => Normalization::Nfc,
                    "NFKC" => Normalization::Nfkc,
                    _ => {
                        return Err(format!(
                            "the normalizer {ty} changes the text before the pre-tokenizer; canonical \
                             guides support NFC and NFKC only; {agnostic}"
                        ))
                    }
                };
                if found != Normalization::None && found != this {
                    return Err(format!(
                        "a sequence of normalizers {} is not supported by canonical guides; {agnostic}",
                        describe(Some(norm))
                    ));
                }
                found = this;
            }
            found
        }
    };
    let pre = root.get("pre_tokenizer").filter(|v| !v.is_null());
    let parts: Vec<&Value> = match pre {
        None => Vec::new(),
        Some(p) if p.get("type").and_then(Value::as_str) == Some("Sequence") => {
            p.get("pretokenizers").and_then(Value::as_array).map(|l| l.iter().collect()).unwrap_or_default()
        }
        Some(p) => vec![p],
    };
    let mut stages = Vec::new();
    let mut excluded_chars = Vec::new();
    let mut byte_level_seen = false;
    for p in parts {
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("?");
        let unsupported = |why: &str| Err(format!("the pre-tokenizer {}: {why}; {agnostic}", describe(Some(p))));
        if byte_level_seen {
            // Later stages see the byte-mapped text (one stand-in character per byte), where a
            // split may fall inside a UTF-8 character (falcon's Digits after ByteLevel).
            return unsupported(
                "a pre-tokenizer after ByteLevel works on the byte-mapped text, which canonical guides do not model",
            );
        }
        match ty {
            "ByteLevel" => {
                if p.get("add_prefix_space").and_then(Value::as_bool) == Some(true) {
                    return unsupported("add_prefix_space=true is not supported");
                }
                if p.get("use_regex").and_then(Value::as_bool).unwrap_or(true) {
                    stages.push(GPT2_PATTERN.to_string());
                }
                byte_level_seen = true;
            }
            "Split" => {
                if p.get("behavior").and_then(Value::as_str) != Some("Isolated") {
                    return unsupported("only behavior Isolated is supported");
                }
                if p.get("invert").and_then(Value::as_bool) == Some(true) {
                    return unsupported("invert=true is not supported");
                }
                match (
                    p.pointer("/pattern/Regex").and_then(Value::as_str),
                    p.pointer("/pattern/String").and_then(Value::as_str),
                ) {
                    (Some(r), _) => stages.push(r.to_string()),
                    (None, Some(lit)) => stages.push(regex_syntax::escape(lit)),
                    _ => return unsupported("no Regex or String pattern"),
                }
            }
            "Digits" => {
                excluded_chars.extend_from_slice(DIGITS_DISAGREEMENT);
                stages.push(if p.get("individual_digits").and_then(Value::as_bool) == Some(true) {
                    r"\p{N}".to_string()
                } else {
                    r"\p{N}+".to_string()
                })
            }
            "Punctuation" => match p.get("behavior").and_then(Value::as_str).unwrap_or("Isolated") {
                "Isolated" => stages.push(PUNCTUATION_CLASS.to_string()),
                "Contiguous" => stages.push(format!("{PUNCTUATION_CLASS}+")),
                _ => return unsupported("only behavior Isolated or Contiguous is supported"),
            },
            _ => return unsupported("this pre-tokenizer type is not modelled by canonical guides"),
        }
    }
    if !byte_level_seen {
        return Err(format!(
            "a byte-level BPE tokenizer without a ByteLevel pre-tokenizer ({}) is not supported by canonical guides; {agnostic}",
            describe(pre)
        ));
    }
    let ignore_merges = model.get("ignore_merges").and_then(Value::as_bool) == Some(true);
    // Non-special added tokens are split out of the text first, leftmost-longest: stage 0,
    // an alternation of their contents, longest first (leftmost-first then equals
    // leftmost-longest on literals).
    let mut added: Vec<(u32, String)> =
        nonspecial_added_ids.iter().copied().zip(nonspecial_added.iter().cloned()).collect();
    added.retain(|(_, c)| !c.is_empty());
    if !added.is_empty() {
        // Hugging Face never pre-tokenizes an added token's match; we model its stage-0 piece
        // as going through the later stages too, which is the same exactly when they leave the
        // content whole.
        let later =
            crate::pre_tokenizer::piece_machine::PieceMachineSpec { stages: stages.clone(), allowed_chars: None };
        let mut machine =
            crate::pre_tokenizer::piece_machine::PieceMachine::new(&later, crate::limits::MAX_PRE_TOKENIZER_STATES)
                .map_err(|e| format!("the pre-tokenizer cannot be modelled: {e}; {agnostic}"))?;
        for (_, content) in &added {
            let pieces =
                machine.split(content).map_err(|e| format!("the pre-tokenizer cannot be modelled: {e}; {agnostic}"))?;
            if pieces.len() != 1 {
                return Err(format!(
                    "the non-special added token {content:?} is split out of the raw text before the \
                     pre-tokenizer, which would cut it into {pieces:?}; canonical guides model added \
                     tokens only when the pre-tokenizer leaves their text whole; {agnostic}"
                ));
            }
        }
        let mut contents: Vec<&str> = added.iter().map(|(_, c)| c.as_str()).collect();
        contents.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        contents.dedup();
        let alternation: Vec<String> = contents.iter().map(|c| regex_syntax::escape(c)).collect();
        stages.insert(0, alternation.join("|"));
    }
    Ok(PreTokenizer { stages, normalization, ignore_merges, excluded_chars, added })
}

fn as_id(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|x| u32::try_from(x).ok())
}

/// Whether a component (or a member of a `Sequence`) has the given `type`.
fn has_component(v: Option<&Value>, ty: &str) -> bool {
    let Some(v) = v else { return false };
    if v.get("type").and_then(Value::as_str) == Some(ty) {
        return true;
    }
    ["pretokenizers", "normalizers", "decoders"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_array))
        .flatten()
        .any(|c| has_component(Some(c), ty))
}

/// Whether a component (or a member of a `Sequence`) is `Replace(from -> to)`.
fn replaces(v: Option<&Value>, from: &str, to: &str) -> bool {
    let Some(v) = v else { return false };
    if v.get("type").and_then(Value::as_str) == Some("Replace")
        && v.pointer("/pattern/String").and_then(Value::as_str) == Some(from)
        && v.get("content").and_then(Value::as_str) == Some(to)
    {
        return true;
    }
    ["normalizers", "decoders"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_array))
        .flatten()
        .any(|c| replaces(Some(c), from, to))
}

fn describe(v: Option<&Value>) -> String {
    let s = v.map(|v| v.to_string()).unwrap_or_else(|| "none".into());
    if s.len() > 160 {
        format!("{}…", &s[..s.char_indices().take_while(|(i, _)| *i < 160).last().map_or(0, |(i, c)| i + c.len_utf8())])
    } else {
        s
    }
}

/// `<0xNN>` → `NN`.
fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok()).flatten()
}

/// GPT-2's map from bytes to their printable stand-in characters.
pub fn byte_to_unicode_table() -> &'static [char; 256] {
    static TABLE: std::sync::OnceLock<[char; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ['\0'; 256];
        for (c, b) in unicode_to_byte() {
            table[b as usize] = c;
        }
        table
    })
}

/// GPT-2's map from the printable stand-in characters back to bytes.
pub fn unicode_to_byte() -> FxHashMap<char, u8> {
    let mut map = FxHashMap::default();
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let c = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).expect("valid code point")
        };
        map.insert(c, b);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

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
