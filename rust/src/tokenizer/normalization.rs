//! The characters a pre-tokenized guide's text may use (see the parent module's "Normalizers").

use crate::tokenizer::vocab::{Normalization, PreTokenizer};

/// The characters a guide's text may use (`None`: all): those the normalizer leaves unchanged
/// in any context, minus those the pre-tokenizer's own character tests disagree on.
pub fn allowed_chars(pre: &PreTokenizer) -> Option<Vec<(char, char)>> {
    let base = normalization_stable_chars(pre.normalization);
    if pre.excluded_chars.is_empty() {
        return base;
    }
    let mut allowed = base.unwrap_or_else(|| vec![('\0', char::MAX)]);
    for &(lo, hi) in &pre.excluded_chars {
        let mut out = Vec::with_capacity(allowed.len() + 1);
        for &(a, b) in &allowed {
            if b < lo || a > hi {
                out.push((a, b));
                continue;
            }
            if a < lo {
                out.push((a, char::from_u32(lo as u32 - 1).expect("not a surrogate boundary")));
            }
            if b > hi {
                out.push((char::from_u32(hi as u32 + 1).expect("not a surrogate boundary"), b));
            }
        }
        allowed = out;
    }
    Some(allowed)
}

/// Characters a normalizer leaves unchanged in any context (quick-check Yes, combining class 0),
/// as sorted inclusive ranges; `None` without a normalizer.
pub fn normalization_stable_chars(normalization: Normalization) -> Option<Vec<(char, char)>> {
    use unicode_normalization::char::canonical_combining_class;
    use unicode_normalization::{is_nfc_quick, is_nfkc_quick, IsNormalized};
    let quick: fn(std::iter::Once<char>) -> IsNormalized = match normalization {
        Normalization::None => return None,
        Normalization::Nfc => is_nfc_quick,
        Normalization::Nfkc => is_nfkc_quick,
    };
    let mut ranges: Vec<(char, char)> = Vec::new();
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        if canonical_combining_class(c) != 0 || quick(std::iter::once(c)) != IsNormalized::Yes {
            continue;
        }
        match ranges.last_mut() {
            Some((_, hi)) if (*hi as u32) + 1 == c as u32 || (*hi as u32 == 0xD7FF && c as u32 == 0xE000) => *hi = c,
            _ => ranges.push((c, c)),
        }
    }
    Some(ranges)
}
