//! Mistral's Tekken tokenizer files (`tekken.json`, as `mistral_common` ships them for Nemo,
//! Small 3, Large 2, Pixtral, Devstral), read as the `tokenizer.json` they stand for.
//!
//! # The format
//! `{"config": {"pattern", "default_vocab_size", "default_num_special_tokens", ...},
//! "vocab": [{"rank", "token_bytes" (base64), "token_str"}, ...], "special_tokens": [...]?}`.
//! Tekken is tiktoken: the text is split by `pattern`, a piece that is a token is that token,
//! and other pieces are merged byte pair by byte pair, always the adjacent pair whose
//! concatenation has the lowest rank. Token ids are shifted: ids `0..n_special` are the special
//! (control) tokens, and the token of rank `r` has id `n_special + r`. Only the first
//! `default_vocab_size - n_special` ranks are used. Files without `special_tokens` (the
//! v3 files of 2024) use `mistral_common`'s fixed list ([`DEFAULT_SPECIAL_TOKENS`]); missing
//! ones are filled as `<SPECIAL_{id}>`. Encoding never produces a special token from text.
//!
//! # Why the translation is exact
//! The document built here is byte-level BPE with `Split(pattern, Isolated)`, `ByteLevel`
//! without its own regex, `ignore_merges` (a piece that is a token is emitted whole, as tiktoken
//! does first) and one merge per token: the split of the token's bytes that rank-ordered BPE
//! restricted to lower ranks ends with (no merge when it does not end in two parts). Priority
//! BPE over these merges makes the same choices as tiktoken's lowest-rank pair as long as a
//! token's parts inside a piece are the ones its own bytes produce, which holds for vocabularies
//! trained by BPE (each token is created from two earlier ones); this is also how Hugging Face
//! converts tiktoken vocabularies. The tests hold the result to `mistral_common`'s own
//! encoder, not to this argument (`tests/pre_tokenized/test_tekken.py`).

use rustc_hash::FxHashMap;
use serde_json::{json, Map, Value};

use super::byte_to_unicode_table;
use crate::error::{Error, Result};

/// `mistral_common`'s special tokens for Tekken files that do not list theirs, by id.
pub const DEFAULT_SPECIAL_TOKENS: &[&str] = &[
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
];

/// Whether a parsed JSON document is a Tekken file (and not a `tokenizer.json`).
pub(super) fn is_tekken(root: &Value) -> bool {
    root.get("model").is_none()
        && root.pointer("/config/pattern").is_some_and(Value::is_string)
        && root.get("vocab").is_some_and(Value::is_array)
}

fn malformed(what: impl std::fmt::Display) -> Error {
    Error::MalformedTokenizer(format!("Tekken file: {what}"))
}

/// The `tokenizer.json` document a Tekken file stands for.
pub(super) fn to_tokenizer_json(root: &Value) -> Result<Value> {
    let config = root.get("config").filter(|c| c.is_object()).ok_or_else(|| malformed("no \"config\" object"))?;
    let number = |key: &str| {
        config
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| malformed(format_args!("config.{key} is not a non-negative integer")))
    };
    let pattern = config.get("pattern").and_then(Value::as_str).ok_or_else(|| malformed("no config.pattern"))?;
    let vocab_size = number("default_vocab_size")?;
    let num_special = number("default_num_special_tokens")?;
    if vocab_size > super::parse::MAX_TOKEN_IDS {
        return Err(malformed(format_args!("default_vocab_size {vocab_size} is implausibly large")));
    }
    let entries = root.get("vocab").and_then(Value::as_array).ok_or_else(|| malformed("no \"vocab\" list"))?;
    let num_ranks = vocab_size.checked_sub(num_special).filter(|&n| n <= entries.len()).ok_or_else(|| {
        malformed(format_args!(
            "default_vocab_size {vocab_size} does not fit {num_special} special tokens and {} vocab entries",
            entries.len()
        ))
    })?;
    let ranks = rank_bytes(&entries[..num_ranks])?;
    let specials = special_tokens(root.get("special_tokens"), num_special)?;

    let table = byte_to_unicode_table();
    let spell = |bytes: &[u8]| bytes.iter().map(|&b| table[b as usize]).collect::<String>();
    let mut vocab = Map::with_capacity(num_ranks);
    for (rank, bytes) in ranks.iter().enumerate() {
        vocab.insert(spell(bytes), Value::from(num_special + rank));
    }
    let merges: Vec<Value> =
        derive_merges(&ranks)?.into_iter().map(|(l, r)| json!([spell(&ranks[l]), spell(&ranks[r])])).collect();
    let added: Vec<Value> = specials
        .iter()
        .enumerate()
        .map(|(id, content)| json!({"id": id, "content": content, "special": true}))
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false});
    Ok(json!({
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
            byte_level,
        ]},
        "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": true, "byte_fallback": false},
    }))
}

/// Each rank's bytes, checking that entry `i` has rank `i` ([`derive_merges`] checks that no
/// two ranks share bytes).
fn rank_bytes(entries: &[Value]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        if e.get("rank").and_then(Value::as_u64) != Some(i as u64) {
            return Err(malformed(format_args!("vocab[{i}] does not have rank {i}")));
        }
        let encoded = e
            .get("token_bytes")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed(format_args!("vocab[{i}] has no token_bytes")))?;
        let bytes = decode_base64(encoded)
            .filter(|b| !b.is_empty())
            .ok_or_else(|| malformed(format_args!("vocab[{i}].token_bytes {encoded:?} is not non-empty base64")))?;
        out.push(bytes);
    }
    Ok(out)
}

/// The special tokens by id: the file's `special_tokens` (by `rank`) or
/// [`DEFAULT_SPECIAL_TOKENS`], then `<SPECIAL_{id}>` up to `num_special`.
fn special_tokens(listed: Option<&Value>, num_special: usize) -> Result<Vec<String>> {
    let mut out: Vec<Option<String>> = vec![None; num_special];
    match listed.filter(|v| !v.is_null()) {
        None => {
            for (id, name) in DEFAULT_SPECIAL_TOKENS.iter().enumerate().take(num_special) {
                out[id] = Some(name.to_string());
            }
        }
        Some(list) => {
            let list = list.as_array().ok_or_else(|| malformed("special_tokens is not a list"))?;
            for (i, t) in list.iter().enumerate() {
                let rank = t.get("rank").and_then(Value::as_u64).map(|r| r as usize).filter(|&r| r < num_special);
                let text = t.get("token_str").and_then(Value::as_str);
                let (Some(rank), Some(text)) = (rank, text) else {
                    return Err(malformed(format_args!(
                        "special_tokens[{i}] needs a rank below {num_special} and a token_str"
                    )));
                };
                if out[rank].replace(text.to_string()).is_some() {
                    return Err(malformed(format_args!("special token rank {rank} is listed twice")));
                }
            }
        }
    }
    Ok(out.into_iter().enumerate().map(|(id, t)| t.unwrap_or_else(|| format!("<SPECIAL_{id}>"))).collect())
}

/// One merge `(left rank, right rank)` per token of two or more bytes, in rank order: the two
/// parts that lowest-rank-first pair merging over the token's own bytes, using only lower ranks,
/// ends with. Tokens it leaves in three or more parts get none (they are only ever emitted whole).
fn derive_merges(ranks: &[Vec<u8>]) -> Result<Vec<(usize, usize)>> {
    let mut rank_of: FxHashMap<&[u8], usize> = FxHashMap::default();
    for (r, bytes) in ranks.iter().enumerate() {
        if let Some(other) = rank_of.insert(bytes, r) {
            return Err(malformed(format_args!("ranks {other} and {r} have the same bytes")));
        }
    }
    if let Some(b) = (0..=255u8).find(|b| !rank_of.contains_key(&[*b][..])) {
        return Err(malformed(format_args!("byte 0x{b:02X} is not a token, so some text has no encoding")));
    }
    let mut merges = Vec::new();
    let mut cuts: Vec<usize> = Vec::new();
    for (rank, bytes) in ranks.iter().enumerate() {
        if bytes.len() < 2 {
            continue;
        }
        cuts.clear();
        cuts.extend(0..=bytes.len());
        loop {
            let best = (0..cuts.len() - 2)
                .filter_map(|i| rank_of.get(&bytes[cuts[i]..cuts[i + 2]]).map(|&r| (r, i)))
                .filter(|&(r, _)| r < rank)
                .min();
            let Some((_, i)) = best else { break };
            cuts.remove(i + 1);
        }
        if cuts.len() == 3 {
            merges.push((rank_of[&bytes[..cuts[1]]], rank_of[&bytes[cuts[1]..]]));
        }
    }
    Ok(merges)
}

/// Standard base64 with padding (`None` when malformed).
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let text = text.as_bytes();
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for (k, chunk) in text.chunks(4).enumerate() {
        let last = k + 1 == text.len() / 4;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::vocab::Vocabulary;

    #[test]
    fn base64_round_trips() {
        assert_eq!(decode_base64("AA==").unwrap(), vec![0]);
        assert_eq!(decode_base64("SGVsbG8=").unwrap(), b"Hello");
        assert_eq!(decode_base64("SGVsbG8h").unwrap(), b"Hello!");
        assert_eq!(decode_base64("4paB").unwrap(), "▁".as_bytes());
        for bad in ["A", "AA=A", "A===", "AA==AA==", "A*A="] {
            assert_eq!(decode_base64(bad), None, "{bad}");
        }
    }

    /// A tiny Tekken file: the 256 bytes, then `ab`, `abc` (whose own BPE is `ab` + `c`), `bc`
    /// (ranked after `abc`), and `xyz` (no two tokens make it: emitted whole only).
    fn tiny(extra_specials: Option<Value>) -> String {
        use std::fmt::Write;
        let mut vocab = String::new();
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.extend([b"ab".to_vec(), b"abc".to_vec(), b"bc".to_vec(), b"xyz".to_vec()]);
        for (rank, t) in tokens.iter().enumerate() {
            let b64 = encode_base64_for_tests(t);
            let sep = if rank == 0 { "" } else { "," };
            write!(vocab, r#"{sep}{{"rank":{rank},"token_bytes":"{b64}","token_str":null}}"#).unwrap();
        }
        let specials = extra_specials.map_or(String::new(), |s| format!(r#","special_tokens":{s}"#));
        format!(
            r#"{{"config":{{"pattern":"\\s+|[^\\s]+","num_vocab_tokens":{n},"default_vocab_size":{v},
            "default_num_special_tokens":3,"version":"v7"}},"vocab":[{vocab}]{specials}}}"#,
            n = tokens.len(),
            v = tokens.len() + 3
        )
    }

    fn encode_base64_for_tests(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let mut n = 0u32;
            for (i, &b) in chunk.iter().enumerate() {
                n |= (b as u32) << (16 - 8 * i);
            }
            for i in 0..4 {
                out.push(if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char } else { '=' });
            }
        }
        out
    }

    #[test]
    fn tiny_file_reads_as_byte_level_bpe() {
        let v = Vocabulary::from_json(&tiny(None), None, None).unwrap();
        assert_eq!(v.num_tokens(), 3 + 260);
        assert_eq!(v.special_token_ids(), &[0, 1, 2]);
        assert_eq!(v.eos_token_ids(), &[2]);
        assert_eq!(v.token_bytes(3 + b'a' as u32), b"a");
        assert_eq!(v.token_bytes(3 + 256), b"ab");
        assert_eq!(v.token_bytes(3 + 259), b"xyz");
        assert_eq!(v.canonical_unsupported_reason(), None);
        let id = |r: u32| 3 + r;
        let merges: Vec<(u32, u32, u32)> = v.merges().iter().map(|m| (m.left, m.right, m.merged)).collect();
        // ab = a + b; abc = ab + c; bc = b + c; xyz has none.
        let (a, b, c) = (id(b'a' as u32), id(b'b' as u32), id(b'c' as u32));
        assert_eq!(merges, vec![(a, b, id(256)), (id(256), c, id(257)), (b, c, id(258))]);
        assert!(v.pre_tokenizer().unwrap().ignore_merges);
    }

    #[test]
    fn listed_special_tokens_and_fillers() {
        let listed = json!([{"rank": 0, "token_str": "<unk>", "is_control": true},
                            {"rank": 1, "token_str": "</s>", "is_control": true}]);
        let v = Vocabulary::from_json(&tiny(Some(listed)), None, None).unwrap();
        assert_eq!(v.eos_token_ids(), &[1]);
        assert_eq!(v.token_id("<SPECIAL_2>"), Some(2));
        let twice = json!([{"rank": 0, "token_str": "a"}, {"rank": 0, "token_str": "b"}]);
        let err = Vocabulary::from_json(&tiny(Some(twice)), None, None).unwrap_err();
        assert!(err.to_string().contains("rank 0 is listed twice"), "{err}");
    }

    #[test]
    fn malformed_files_name_the_field() {
        let good = tiny(None);
        for (from, to, needle) in [
            (r#""rank":5,"#, r#""rank":6,"#, "vocab[5] does not have rank 5"),
            ("\"default_num_special_tokens\":3", "\"default_num_special_tokens\":-1", "default_num_special_tokens"),
            ("\"AA==\"", "\"A\"", "vocab[0].token_bytes"),
            ("\"default_vocab_size\":263", "\"default_vocab_size\":900", "does not fit"),
            ("\"default_vocab_size\":263", "\"default_vocab_size\":99000000000", "implausibly large"),
            ("\"default_num_special_tokens\":3", "\"default_num_special_tokens\":99000000000", "does not fit"),
        ] {
            let bad = good.replacen(from, to, 1);
            assert_ne!(bad, good, "{from}");
            let err = Vocabulary::from_json(&bad, None, None).unwrap_err();
            assert!(matches!(err, Error::MalformedTokenizer(_)) && err.to_string().contains(needle), "{err}");
        }
    }
}
