//! WordPiece (BERT): what its normalizer, pre-tokenizer and greedy longest-match-first model do,
//! in the form canonical guides need (`crate::max_match` builds them).
//!
//! # The model (Hugging Face's `WordPiece::tokenize`)
//! The text is normalized (`BertNormalizer`), cut into words (`BertPreTokenizer`: white space is
//! dropped, each punctuation character is a word of its own), and each word is tokenized on its
//! own: a word of more than `max_input_chars_per_word` characters is the unknown token;
//! otherwise, from the word's start, the longest vocabulary entry that is a prefix of the rest is
//! taken, spelt with `continuing_subword_prefix` ("##") everywhere but at the word's start, and
//! if at some point none is, the whole word is the unknown token. So a token sequence is
//! canonical exactly when it splits into words (a word starts at each token without the prefix)
//! that the pre-tokenizer would cut out of their decoded text and that the normalizer leaves as
//! they are, and each token is the *longest* entry at its position: no longer entry spells it
//! plus what follows it in its word. That last condition can look past the next token
//! (`a ##b ##c` is not canonical when `abc` is an entry and `ab` is not), which is why WordPiece
//! has no tokenizer DFA of token pairs like BPE's.
//!
//! # The text a token sequence stands for
//! Decoding is lossy: the normalizer lowercases and strips accents, and the pre-tokenizer drops
//! white space, so `Hello,World` and `hello , world` are the same tokens. A guide generates the
//! text the tokens decode to, Hugging Face's `WordPiece` decoder without its `cleanup`: words
//! joined by one space, pieces with the prefix glued to the piece before (`hello , world`). A
//! word-initial token's bytes (`Vocabulary::token_bytes`) are a space and its text, a
//! continuation's its text without the prefix; the space before the first word of a generated
//! text is not part of it. Only such text is generated ("representable", `docs/design.md` §1):
//! lowercase, without accents, one space between words and around punctuation.
//!
//! # Characters
//! [`WordPiece::keeps`] is whether the normalizer leaves a character as it is (not white space,
//! not a control character, its own lowercase, no canonical decomposition and not a non-spacing
//! mark when accents are stripped, nor of a non-zero combining class, which NFD could move
//! within a word); [`WordPiece::stands_alone`] whether the pre-tokenizer (or
//! the normalizer, for CJK ideographs) makes it a word of its own. Both use the Unicode tables
//! Hugging Face uses (`unicode_categories`, `unicode-normalization-alignments` and Rust's
//! `char` methods), so they agree on every character.

use serde_json::Value;
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::char::{canonical_combining_class, decompose_canonical};

/// A WordPiece model with a normalizer and pre-tokenizer canonical guides model exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WordPiece {
    /// `continuing_subword_prefix`: spells a token that continues a word ("##").
    pub prefix: String,
    /// `max_input_chars_per_word`: a longer word is the unknown token.
    pub max_word_chars: usize,
    /// `BertNormalizer`'s options, `None` without a normalizer.
    pub normalizer: Option<BertNormalizer>,
}

/// `BertNormalizer`'s options, `strip_accents` resolved (`null` follows `lowercase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BertNormalizer {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    pub strip_accents: bool,
    pub lowercase: bool,
}

impl WordPiece {
    /// Reads the model's options (and `BertNormalizer`'s, when that is the normalizer).
    pub fn from_tokenizer_json(root: &Value, model: &Value) -> WordPiece {
        let prefix = model.get("continuing_subword_prefix").and_then(Value::as_str).unwrap_or("##").to_string();
        let max_word_chars =
            model.get("max_input_chars_per_word").and_then(Value::as_u64).unwrap_or(100).min(u16::MAX as u64) as usize;
        let normalizer =
            root.get("normalizer").filter(|n| n.get("type").and_then(Value::as_str) == Some("BertNormalizer"));
        let normalizer = normalizer.map(|n| {
            let flag = |k: &str, default: bool| n.get(k).and_then(Value::as_bool).unwrap_or(default);
            let lowercase = flag("lowercase", true);
            BertNormalizer {
                clean_text: flag("clean_text", true),
                handle_chinese_chars: flag("handle_chinese_chars", true),
                strip_accents: n.get("strip_accents").and_then(Value::as_bool).unwrap_or(lowercase),
                lowercase,
            }
        });
        WordPiece { prefix, max_word_chars, normalizer }
    }

    /// Why canonical guides cannot follow this tokenizer: a component other than
    /// `BertNormalizer` (or none) and `BertPreTokenizer`, or an empty prefix.
    pub fn unsupported_reason(&self, root: &Value) -> Option<String> {
        if self.prefix.is_empty() {
            return Some("the WordPiece model has an empty continuing_subword_prefix".into());
        }
        let ty = |part: &str| {
            root.get(part).filter(|v| !v.is_null()).map(|v| v.get("type").and_then(Value::as_str).unwrap_or("?"))
        };
        match ty("normalizer") {
            None | Some("BertNormalizer") => {}
            Some(other) => {
                return Some(format!(
                "the normalizer {other} of this WordPiece tokenizer is not modelled by canonical guides (supported: \
                     BertNormalizer or none); use method=\"agnostic\""
            ))
            }
        }
        match ty("pre_tokenizer") {
            Some("BertPreTokenizer") => None,
            other => Some(format!(
                "the pre-tokenizer {} of this WordPiece tokenizer is not modelled by canonical guides (supported: \
                 BertPreTokenizer); use method=\"agnostic\"",
                other.unwrap_or("(none)")
            )),
        }
    }

    /// Whether the normalizer leaves `c` as it is and the pre-tokenizer keeps it inside a word:
    /// the characters a canonical token may contain.
    pub fn keeps(&self, c: char) -> bool {
        if is_bert_whitespace(c) {
            return false;
        }
        let Some(n) = self.normalizer else { return true };
        if n.clean_text && (c == '\0' || c == '\u{FFFD}' || is_bert_control(c)) {
            return false;
        }
        if n.strip_accents {
            if c.is_mark_nonspacing() {
                return false;
            }
            // NFD must leave `c` alone, and not move it: canonical reordering only moves
            // characters of a non-zero combining class.
            let mut decomposed = 0;
            let mut same = true;
            decompose_canonical(c, |d| {
                decomposed += 1;
                same &= d == c;
            });
            if decomposed != 1 || !same || canonical_combining_class(c) != 0 {
                return false;
            }
        }
        if n.lowercase {
            let mut lower = c.to_lowercase();
            if lower.next() != Some(c) || lower.next().is_some() {
                return false;
            }
        }
        true
    }

    /// Whether `c` is always a word of its own: punctuation (`BertPreTokenizer`) or, with
    /// `handle_chinese_chars`, a CJK ideograph.
    pub fn stands_alone(&self, c: char) -> bool {
        c.is_ascii_punctuation()
            || c.is_punctuation()
            || self.normalizer.is_some_and(|n| n.handle_chinese_chars) && is_cjk_ideograph(c)
    }

    /// Whether a vocabulary entry's text (prefix removed) can be a token of a canonical
    /// sequence as far as its own characters go: every character kept, and a character that
    /// stands alone only as a whole word-initial token.
    pub fn may_emit(&self, text: &str, continues: bool) -> bool {
        let mut chars = text.chars();
        let (Some(first), rest) = (chars.next(), chars.as_str()) else { return false };
        if !text.chars().all(|c| self.keeps(c)) || text.chars().count() > self.max_word_chars {
            return false;
        }
        if rest.is_empty() {
            return !(continues && self.stands_alone(first));
        }
        !text.chars().any(|c| self.stands_alone(c))
    }

    /// The text of a vocabulary entry and whether it continues a word (spelt with the prefix).
    pub fn split_entry<'a>(&self, entry: &'a str) -> (&'a str, bool) {
        match entry.strip_prefix(self.prefix.as_str()) {
            Some(rest) if !rest.is_empty() && !self.prefix.is_empty() => (rest, true),
            _ => (entry, false),
        }
    }
}

/// `BertNormalizer`'s white space: tab, newline, carriage return or Rust's `char::is_whitespace`
/// (the pre-tokenizer splits on the latter, a superset of the others).
fn is_bert_whitespace(c: char) -> bool {
    c.is_whitespace()
}

/// `BertNormalizer`'s control characters (removed by `clean_text`): general category C other
/// than tab, newline and carriage return.
fn is_bert_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// `BertNormalizer`'s CJK ideograph blocks (`handle_chinese_chars` puts spaces around them).
fn is_cjk_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bert() -> WordPiece {
        let root = json!({"normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
            "strip_accents": null, "lowercase": true}, "pre_tokenizer": {"type": "BertPreTokenizer"}});
        WordPiece::from_tokenizer_json(&root, &json!({"type": "WordPiece"}))
    }

    #[test]
    fn characters_the_normalizer_keeps() {
        let wp = bert();
        for c in ['a', 'z', '0', '.', 'ß', 'ł', 'ø', '中', 'α'] {
            assert!(wp.keeps(c), "{c:?}");
        }
        // upper case, accents (decomposable or a lone mark), white space, controls
        for c in ['A', 'É', 'é', '\u{301}', ' ', '\t', '\u{a0}', '\u{200b}', '\u{7}', '\u{FFFD}'] {
            assert!(!wp.keeps(c), "{c:?}");
        }
        let cased = WordPiece { normalizer: None, ..bert() };
        assert!(cased.keeps('A') && cased.keeps('é') && !cased.keeps(' '));
    }

    #[test]
    fn what_a_token_may_be() {
        let wp = bert();
        assert_eq!(wp.split_entry("##ing"), ("ing", true));
        assert_eq!(wp.split_entry("##"), ("##", false));
        assert!(wp.may_emit("ing", true) && wp.may_emit("hello", false));
        assert!(wp.may_emit(".", false) && wp.may_emit("中", false));
        assert!(!wp.may_emit(".", true) && !wp.may_emit("a.", false) && !wp.may_emit("中国", false));
        assert!(!wp.may_emit("Hello", false) && !wp.may_emit("", false));
    }

    #[test]
    fn other_components_are_refused_by_name() {
        let reason = |root: serde_json::Value| {
            WordPiece::from_tokenizer_json(&root, &json!({"type": "WordPiece"})).unsupported_reason(&root)
        };
        let root = json!({"normalizer": {"type": "NFD"}, "pre_tokenizer": {"type": "BertPreTokenizer"}});
        assert!(reason(root).unwrap().contains("NFD"));
        assert!(reason(json!({"pre_tokenizer": {"type": "Whitespace"}})).unwrap().contains("Whitespace"));
        assert_eq!(reason(json!({"pre_tokenizer": {"type": "BertPreTokenizer"}})), None);
    }
}
