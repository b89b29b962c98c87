//! Reading a `tokenizer.json`: the model's vocabulary and merges, the added tokens, each token's
//! bytes, the EOS ids, and the fingerprint that keys the tokenizer DFA's disk cache.

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::support::{byte_level_pre_tokenizer, canonical_support, has_component, replaces};
use super::{unicode_to_byte, Merge, PreTokenizer, TokenizerKind, Vocabulary, EOS_NAMES};
use crate::error::{Error, Result};
use crate::tokenizer::word_piece::WordPiece;

/// An entry of `added_tokens`.
pub(super) struct AddedToken {
    pub(super) id: u32,
    pub(super) content: String,
    pub(super) special: bool,
    /// Matched in the normalized text (`true`, Hugging Face's default) or in the raw text, in an
    /// earlier pass (`false`).
    pub(super) normalized: bool,
}

/// Ids past this are refused as implausible (a malformed or hostile file).
pub(super) const MAX_TOKEN_IDS: usize = 16_000_000;

impl Vocabulary {
    /// Parses a `tokenizer.json` document, or a Mistral Tekken file (see [`super::tekken`]).
    /// `eos_token_ids` defaults to the first of [`EOS_NAMES`] present among the special tokens;
    /// `vocab_size` defaults to the number of token ids (it is the width of masks, and may be
    /// larger when the model pads its logits).
    pub fn from_json(json: &str, eos_token_ids: Option<Vec<u32>>, vocab_size: Option<usize>) -> Result<Vocabulary> {
        let mut root: Value =
            serde_json::from_str(json).map_err(|e| Error::MalformedTokenizer(format!("not valid JSON: {e}")))?;
        if super::tekken::is_tekken(&root) {
            root = super::tekken::to_tokenizer_json(&root)?;
        }
        let model = root
            .get("model")
            .filter(|m| m.is_object())
            .ok_or_else(|| Error::MalformedTokenizer("no \"model\" object".into()))?;
        let kind = model_kind(&root, model)?;
        let entries = vocab_entries(model, kind)?;
        let (added, added_flags) = added_tokens(&root)?;
        let num_tokens =
            entries.iter().map(|e| e.0).chain(added.iter().map(|a| a.id)).max().map_or(0, |m| m as usize + 1);
        if num_tokens == 0 {
            return Err(Error::MalformedTokenizer("the vocabulary is empty".into()));
        }
        if num_tokens > MAX_TOKEN_IDS {
            return Err(Error::MalformedTokenizer(format!("token id {} is implausibly large", num_tokens - 1)));
        }
        let mut by_string: FxHashMap<String, u32> = FxHashMap::default();
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
        let word_piece = (kind == TokenizerKind::WordPiece).then(|| WordPiece::from_tokenizer_json(&root, model));
        let (mut token_bytes, fallback) = match &word_piece {
            Some(wp) => (word_piece_token_bytes(&token_strings, wp), [u32::MAX; 256]),
            None => model_token_bytes(&token_strings, kind, metaspace, byte_fallback),
        };
        let mut never_allowed: Vec<bool> = token_strings.iter().map(Option::is_none).collect();
        let mut special_ids = Vec::new();
        let mut nonspecial_added = Vec::new();
        for AddedToken { id, content, special, .. } in &added {
            let idu = *id as usize;
            if token_strings[idu].is_none() || *special {
                token_bytes[idu] = content.as_bytes().to_vec();
            }
            never_allowed[idu] = *special;
            if *special {
                special_ids.push(*id);
            } else {
                nonspecial_added.push(content.clone());
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
        let merges = match kind {
            TokenizerKind::Unigram | TokenizerKind::WordPiece => Vec::new(),
            _ => model_merges(model, &by_string)?,
        };

        let byte_fallback_token =
            (byte_fallback && fallback.iter().all(|&t| t != u32::MAX)).then(|| Box::new(fallback));
        let byte_level_support =
            (kind == TokenizerKind::ByteLevelBpe).then(|| byte_level_pre_tokenizer(&root, model, &added, &added_flags));
        let word_piece_unsupported = word_piece.as_ref().and_then(|wp| match wp.unsupported_reason(&root) {
            None if !nonspecial_added.is_empty() => Some(format!(
                "this WordPiece tokenizer has non-special added tokens ({:?}, ...), which canonical guides do not \
                 model; use method=\"agnostic\"",
                nonspecial_added[0]
            )),
            reason => reason,
        });
        let canonical_unsupported = canonical_support(
            &root,
            model,
            kind,
            byte_level_support.as_ref(),
            &nonspecial_added,
            byte_fallback,
            byte_fallback_token.as_deref(),
            &merges,
            word_piece_unsupported.as_ref(),
        );
        let eos = resolve_eos(eos_token_ids, &added, num_tokens)?;
        let vocab_size = match vocab_size {
            None => num_tokens,
            Some(v) if v < num_tokens => {
                return Err(Error::InvalidArgument(format!(
                    "vocab_size {v} is smaller than the tokenizer's {num_tokens} token ids"
                )))
            }
            Some(v) => v,
        };
        let pre_tokenizer = byte_level_support.and_then(|r| r.ok());
        let mut vocab = Vocabulary {
            fingerprint: 0,
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
            pre_tokenizer,
            word_piece,
            by_string,
        };
        vocab.fingerprint = vocab.compute_fingerprint();
        Ok(vocab)
    }

    /// A hash of everything the tokenizer DFA depends on: token bytes, which ids are never
    /// allowed, merges, the support verdict and the pre-tokenizer (the DFA keeps only pairs that
    /// can share a piece). Hashed field by field, so renaming a type never changes it.
    fn compute_fingerprint(&self) -> u64 {
        let mut h = crate::util::serialize::Fnv64::default();
        h.write(self.kind.name().as_bytes());
        h.write(&[self.space_is_metaspace as u8, self.byte_fallback_token.is_some() as u8]);
        for (id, b) in self.token_bytes.iter().enumerate() {
            h.write_u64(b.len() as u64);
            h.write(b);
            h.write(&[self.never_allowed[id] as u8]);
        }
        for m in &self.merges {
            h.write_u64(((m.left as u64) << 32) | m.right as u64);
            h.write_u64(m.merged as u64);
        }
        h.write(self.canonical_unsupported.as_deref().unwrap_or("").as_bytes());
        if let Some(p) = &self.pre_tokenizer {
            hash_pre_tokenizer(&mut h, p);
        }
        h.finish()
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
}

fn hash_pre_tokenizer(h: &mut crate::util::serialize::Fnv64, p: &PreTokenizer) {
    let text = |h: &mut crate::util::serialize::Fnv64, s: &str| {
        h.write_u64(s.len() as u64);
        h.write(s.as_bytes());
    };
    h.write_u64(p.stages.len() as u64);
    for stage in &p.stages {
        text(h, stage);
    }
    text(h, &format!("{:?}", p.normalization));
    h.write(&[p.ignore_merges as u8]);
    h.write_u64(p.excluded_chars.len() as u64);
    for &(lo, hi) in &p.excluded_chars {
        h.write_u64(((lo as u64) << 32) | hi as u64);
    }
    h.write_u64(p.added.len() as u64);
    for (id, content) in &p.added {
        h.write_u64(*id as u64);
        text(h, content);
    }
    // (only when present, so that the fingerprints of other tokenizers stay as they were)
    if !p.byte_mapped_stages.is_empty() {
        h.write_u64(p.byte_mapped_stages.len() as u64);
        for stage in &p.byte_mapped_stages {
            text(h, stage);
        }
    }
}

/// The model type, from `model.type` and whether a `ByteLevel` component is present.
fn model_kind(root: &Value, model: &Value) -> Result<TokenizerKind> {
    let model_type = model.get("type").and_then(Value::as_str).unwrap_or("BPE");
    let byte_level =
        has_component(root.get("pre_tokenizer"), "ByteLevel") || has_component(root.get("decoder"), "ByteLevel");
    match model_type {
        "BPE" if byte_level => Ok(TokenizerKind::ByteLevelBpe),
        "BPE" => Ok(TokenizerKind::CharBpe),
        "Unigram" => Ok(TokenizerKind::Unigram),
        "WordPiece" => Ok(TokenizerKind::WordPiece),
        other => Err(Error::UnsupportedTokenizer(format!(
            "tokenizer model type {other:?} is not supported (supported: BPE, Unigram, WordPiece)"
        ))),
    }
}

/// `model.vocab` as `(id, string)` entries.
fn vocab_entries(model: &Value, kind: TokenizerKind) -> Result<Vec<(u32, String)>> {
    let mut entries = Vec::new();
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
    Ok(entries)
}

/// `added_tokens`, and a description of each non-special one whose matching is not plain
/// (`lstrip` / `rstrip` / `single_word`).
fn added_tokens(root: &Value) -> Result<(Vec<AddedToken>, Vec<String>)> {
    let mut added = Vec::new();
    let mut flags = Vec::new();
    for (i, t) in root.get("added_tokens").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let id = t
            .get("id")
            .and_then(as_id)
            .ok_or_else(|| Error::MalformedTokenizer(format!("added_tokens[{i}] has no integer id")))?;
        let content = t
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::MalformedTokenizer(format!("added_tokens[{i}] has no content")))?;
        let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
        let normalized = t.get("normalized").and_then(Value::as_bool).unwrap_or(true);
        for flag in ["lstrip", "rstrip", "single_word"] {
            if !special && t.get(flag).and_then(Value::as_bool) == Some(true) {
                flags.push(format!("{content:?} has {flag}=true"));
            }
        }
        added.push(AddedToken { id, content: content.to_string(), special, normalized });
    }
    Ok((added, flags))
}

/// The bytes each model token decodes to, and the `<0xNN>` byte-fallback ids (`u32::MAX` where
/// missing).
fn model_token_bytes(
    token_strings: &[Option<String>],
    kind: TokenizerKind,
    metaspace: bool,
    byte_fallback: bool,
) -> (Vec<Vec<u8>>, [u32; 256]) {
    let byte_map = if kind == TokenizerKind::ByteLevelBpe { Some(unicode_to_byte()) } else { None };
    let mut token_bytes: Vec<Vec<u8>> = vec![Vec::new(); token_strings.len()];
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
    (token_bytes, fallback)
}

/// A WordPiece token's bytes: a space and its text when it starts a word, its text without
/// `continuing_subword_prefix` when it continues one (`crate::tokenizer::word_piece`).
fn word_piece_token_bytes(token_strings: &[Option<String>], model: &WordPiece) -> Vec<Vec<u8>> {
    let bytes = |s: &str| match model.split_entry(s) {
        (text, true) => text.as_bytes().to_vec(),
        (text, false) => [b" ", text.as_bytes()].concat(),
    };
    token_strings.iter().map(|s| s.as_deref().map(bytes).unwrap_or_default()).collect()
}

/// `model.merges` in rank order, as token ids.
fn model_merges(model: &Value, by_string: &FxHashMap<String, u32>) -> Result<Vec<Merge>> {
    let mut merges = Vec::new();
    let list = model.get("merges").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (rank, m) in list.iter().enumerate() {
        let (a, b) = match m {
            Value::String(s) => match s.split_once(' ') {
                Some((a, b)) => (a.to_string(), b.to_string()),
                None => return Err(Error::MalformedTokenizer(format!("merge {rank} {s:?} is not \"left right\""))),
            },
            Value::Array(p) if p.len() == 2 => match (p[0].as_str(), p[1].as_str()) {
                (Some(a), Some(b)) => (a.to_string(), b.to_string()),
                _ => return Err(Error::MalformedTokenizer(format!("merge {rank} is not a pair of strings"))),
            },
            _ => return Err(Error::MalformedTokenizer(format!("merge {rank} is not a string or a pair"))),
        };
        let look = |t: &str| by_string.get(t).copied();
        match (look(&a), look(&b), look(&format!("{a}{b}"))) {
            (Some(left), Some(right), Some(merged)) => merges.push(Merge { left, right, merged }),
            _ => {
                return Err(Error::MalformedTokenizer(format!(
                    "merge {rank} ({a:?}, {b:?}) names a token missing from the vocab"
                )))
            }
        }
    }
    Ok(merges)
}

/// The EOS ids: the caller's, checked, or the first special token named one of [`EOS_NAMES`].
fn resolve_eos(eos_token_ids: Option<Vec<u32>>, added: &[AddedToken], num_tokens: usize) -> Result<Vec<u32>> {
    match eos_token_ids {
        Some(ids) => {
            if ids.is_empty() {
                return Err(Error::InvalidArgument("eos_token_ids is empty: give at least one id".into()));
            }
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= num_tokens) {
                return Err(Error::InvalidArgument(format!(
                    "EOS token id {id} is out of range (the tokenizer has {num_tokens} ids)"
                )));
            }
            Ok(ids)
        }
        None => EOS_NAMES
            .iter()
            .find_map(|name| added.iter().find(|a| a.special && a.content == *name).map(|a| vec![a.id]))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "EOS token not found: none of the special tokens is named one of {EOS_NAMES:?}; \
                     pass eos_token_ids explicitly"
                ))
            }),
    }
}

fn as_id(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|x| u32::try_from(x).ok())
}

/// `<0xNN>` → `NN`.
fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok()).flatten()
}
