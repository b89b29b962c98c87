//! Whether canonical guides can be exact for a tokenizer, and for a byte-level BPE tokenizer the
//! [`PreTokenizer`] they model: every component is either modelled exactly or refused by name.

use serde_json::Value;

use super::parse::AddedToken;
use super::{Merge, Normalization, PreTokenizer, TokenizerKind, DIGITS_DISAGREEMENT, GPT2_PATTERN, PUNCTUATION_CLASS};

/// Why canonical guides cannot be exact for this tokenizer, or `None`.
#[allow(clippy::too_many_arguments)]
pub(super) fn canonical_support(
    root: &Value,
    model: &Value,
    kind: TokenizerKind,
    byte_level_support: Option<&std::result::Result<PreTokenizer, String>>,
    nonspecial_added: &[String],
    byte_fallback: bool,
    fallback_tokens: Option<&[u32; 256]>,
    merges: &[Merge],
    word_piece_unsupported: Option<&String>,
) -> Option<String> {
    match kind {
        TokenizerKind::WordPiece => return word_piece_unsupported.cloned(),
        TokenizerKind::ByteLevelBpe => {
            return byte_level_support.and_then(|r| r.as_ref().err().cloned());
        }
        TokenizerKind::Unigram => {
            return Some(
                "canonical guides need a BPE merge table; this tokenizer is a Unigram model, whose canonical \
                 segmentation is a Viterbi argmax over piece scores that a character far ahead can change (not \
                 finite-state in general); use method=\"agnostic\""
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
pub(super) fn byte_level_pre_tokenizer(
    root: &Value,
    model: &Value,
    added_tokens: &[AddedToken],
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
    if let Some(why) = added_tokens_interfere(added_tokens) {
        return Err(format!("{why}; {agnostic}"));
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
    let mut byte_mapped_stages = Vec::new();
    let mut excluded_chars = Vec::new();
    let mut byte_level_seen = false;
    for p in parts {
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("?");
        let unsupported = |why: &str| Err(format!("the pre-tokenizer {}: {why}; {agnostic}", describe(Some(p))));
        // Stages after ByteLevel see the byte-mapped text (one stand-in character per byte) and
        // may cut inside a UTF-8 character (Falcon's Digits): patterns over that text.
        let stages = if byte_level_seen { &mut byte_mapped_stages } else { &mut stages };
        match ty {
            "ByteLevel" if byte_level_seen => return unsupported("ByteLevel twice is not supported"),
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
                if !byte_level_seen {
                    // (the stand-in characters have none of them)
                    excluded_chars.extend_from_slice(DIGITS_DISAGREEMENT);
                }
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
    // Non-special added tokens are cut out of the raw text first, leftmost-longest, and never
    // pre-tokenized: stage 0, final (`crate::pre_tokenizer::piece_machine`, "Added tokens").
    let added: Vec<(u32, String)> = added_tokens
        .iter()
        .filter(|t| !t.special && !t.content.is_empty())
        .map(|t| (t.id, t.content.clone()))
        .collect();
    if normalization != Normalization::None {
        if let Some(t) = added_tokens.iter().find(|t| !t.special && !t.normalized && !t.content.is_empty()) {
            // Hugging Face normalizes each text between such tokens on its own; guides model one
            // normalized text (exact with `normalized=true` added tokens, found after normalizing).
            return Err(format!(
                "the non-special added token {:?} has normalized=false with a normalizer: the text between \
                 such tokens is normalized piece by piece, which canonical guides do not model; {agnostic}",
                t.content
            ));
        }
    }
    if !added.is_empty() {
        let contents: Vec<&str> = added.iter().map(|a| a.1.as_str()).collect();
        stages.insert(0, crate::pre_tokenizer::piece_machine::added_tokens_pattern(&contents));
    }
    if !byte_mapped_stages.is_empty() && (normalization != Normalization::None || !added.is_empty()) {
        // Neither occurs in a real tokenizer with such stages, and neither is modelled with them.
        return Err(format!(
            "pre-tokenizer stages after ByteLevel together with a normalizer or non-special added tokens are not \
             supported by canonical guides; {agnostic}"
        ));
    }
    Ok(PreTokenizer { stages, byte_mapped_stages, normalization, ignore_merges, excluded_chars, added })
}

/// Why one leftmost-longest pass over the non-special added tokens' contents would not be how
/// Hugging Face splits them out, or `None`.
///
/// Hugging Face matches every added token (special ones too) with one leftmost-longest
/// Aho-Corasick pass per group: first the `normalized=false` group in the raw text, then the
/// `normalized=true` group in the gaps between those matches. With special tokens read as text
/// (`encode_special_tokens`), a special token's match is skipped but its text is still consumed,
/// so it can hide a non-special token that overlaps it; and a token of the second group can
/// lose to an overlapping one of the first group where one pass would prefer it. Neither
/// happens in the tokenizers of the corpus; where it can, canonical guides are refused.
fn added_tokens_interfere(added: &[AddedToken]) -> Option<String> {
    let plain = |t: &&AddedToken| !t.content.is_empty();
    for n in added.iter().filter(plain).filter(|t| !t.special) {
        for a in added.iter().filter(plain).filter(|a| a.id != n.id) {
            if a.special && (a.content == n.content || (a.normalized == n.normalized && wins(&a.content, &n.content))) {
                return Some(format!(
                    "the special token {:?} can hide the non-special added token {:?} (Hugging Face \
                     skips the special token's match but consumes its text), which canonical guides \
                     do not model",
                    a.content, n.content
                ));
            }
            if !a.special && !a.normalized && n.normalized && wins(&n.content, &a.content) {
                return Some(format!(
                    "the added token {:?} (normalized=true) can overlap {:?} (normalized=false, split \
                     out in an earlier pass), which canonical guides do not model",
                    n.content, a.content
                ));
            }
        }
    }
    None
}

/// Whether an occurrence of `a` can overlap one of `b` and be preferred by a leftmost-longest
/// search: `a` starts first, or at the same place and is longer.
fn wins(a: &str, b: &str) -> bool {
    a.char_indices().any(|(k, _)| {
        let rest = &a[k..];
        (rest.starts_with(b) || b.starts_with(rest)) && (k > 0 || a.len() > b.len())
    })
}

/// Whether a component (or a member of a `Sequence`) has the given `type`.
pub(super) fn has_component(v: Option<&Value>, ty: &str) -> bool {
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
pub(super) fn replaces(v: Option<&Value>, from: &str, to: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(id: u32, content: &str, special: bool, normalized: bool) -> AddedToken {
        AddedToken { id, content: content.to_string(), special, normalized }
    }

    #[test]
    fn leftmost_longest_wins() {
        assert!(wins("<|a|>", "a|>")); // starts first and overlaps
        assert!(wins("<|ab", "<|a")); // same start, longer
        assert!(!wins("<|a", "<|ab")); // same start, shorter
        assert!(wins("x<", "<y")); // suffix-prefix overlap
        assert!(!wins("<y", "x<")); // the other one starts first
        assert!(!wins("ab", "cd"));
    }

    #[test]
    fn added_tokens_that_interfere_are_refused_by_name() {
        // DeepSeek V3: "<｜/table>｜" (raw) and "｜DSML｜" (normalized) overlap only with the raw one first.
        let v3 = [tok(1, "<｜/table>｜", false, false), tok(2, "｜DSML｜", false, true)];
        assert_eq!(added_tokens_interfere(&v3), None);
        let hidden = [tok(1, "<think>", false, true), tok(2, "<think>x", true, true)];
        assert!(added_tokens_interfere(&hidden).is_some_and(|m| m.contains("special token \"<think>x\"")));
        // In another matching pass, a special token hides nothing.
        let other_pass = [tok(1, "<think>", false, true), tok(2, "<think>x", true, false)];
        assert_eq!(added_tokens_interfere(&other_pass), None);
        let same_text = [tok(1, "<a>", false, true), tok(2, "<a>", true, false)];
        assert!(added_tokens_interfere(&same_text).is_some());
        let passes = [tok(1, "ab", false, false), tok(2, "xa", false, true)];
        assert!(added_tokens_interfere(&passes).is_some_and(|m| m.contains("normalized=false")));
    }
}
