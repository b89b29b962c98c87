//! What a tokenizer's normalizer and pre-tokenizer leave guides free to write: the characters
//! (all but those the pre-tokenizer's own character tests disagree on) and, with NFC / NFKC, the
//! normalized strings ([`crate::pre_tokenizer::normal_form`]).

use std::path::Path;

use crate::pre_tokenizer::normal_form::{Form, NormalForm};
use crate::tokenizer::vocab::{Normalization, PreTokenizer};

/// The characters a guide's text may use (`None`: all): all but those the pre-tokenizer's own
/// character tests disagree on. Which *sequences* a normalizer allows is [`normal_form`]'s job.
pub fn allowed_chars(pre: &PreTokenizer) -> Option<Vec<(char, char)>> {
    if pre.excluded_chars.is_empty() {
        return None;
    }
    let mut allowed = vec![('\0', char::MAX)];
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

/// The DFA of the text the tokenizer's normalizer leaves unchanged (`None` without one), read
/// from or kept in `cache_dir` ([`NormalForm::get_cached`]).
pub fn normal_form(pre: &PreTokenizer, cache_dir: Option<&Path>) -> Option<&'static NormalForm> {
    match pre.normalization {
        Normalization::None => None,
        Normalization::Nfc => Some(NormalForm::get_cached(Form::Nfc, cache_dir)),
        Normalization::Nfkc => Some(NormalForm::get_cached(Form::Nfkc, cache_dir)),
    }
}
