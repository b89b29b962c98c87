//! Byte fallback: the byte automaton of the characters that are not base symbols of the
//! vocabulary, so spelled as `<0xNN>` byte tokens (SentencePiece BPE with `byte_fallback`).

use crate::error::Result;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::vocab::Vocabulary;
use crate::util::byte_set::ByteSet;

/// The byte automaton of characters absent from the vocabulary (UTF-8 encodings).
#[derive(Clone, Debug)]
pub struct FallbackTrie {
    pub(super) dfa: ByteDfa,
    /// The bytes each state steps by (not to [`DEAD`]), by state.
    taken: Vec<ByteSet>,
}

impl FallbackTrie {
    pub(super) fn new(dfa: ByteDfa) -> FallbackTrie {
        let taken =
            (0..dfa.num_states() as u32).map(|q| (0..=255u8).filter(|&b| dfa.next(q, b) != DEAD).collect()).collect();
        FallbackTrie { dfa, taken }
    }

    /// The bytes [`FallbackTrie::step`] takes from `state`.
    #[inline]
    pub(super) fn bytes_taken(&self, state: Option<u32>) -> ByteSet {
        self.taken[state.unwrap_or(self.dfa.start()) as usize]
    }

    /// Next trie state from `state` (`None` = trie start) on byte `b`:
    /// `Some(Ok(s))` inside a character, `Some(Err(()))` when the character is complete.
    #[inline]
    pub(super) fn step(&self, state: Option<u32>, b: u8) -> Option<std::result::Result<u32, ()>> {
        let t = self.dfa.next(state.unwrap_or(self.dfa.start()), b);
        if t == DEAD {
            None
        } else if self.dfa.is_accepting(t) {
            Some(Err(()))
        } else {
            Some(Ok(t))
        }
    }
    pub fn num_states(&self) -> usize {
        self.dfa.num_states()
    }
}

/// The byte automaton of the characters that are not base symbols of the vocabulary.
pub(super) fn absent_char_trie(vocab: &Vocabulary, emittable: &[bool]) -> Result<FallbackTrie> {
    use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange, Hir};
    let mut present = Vec::new();
    for t in 0..vocab.num_tokens() as u32 {
        if !emittable[t as usize] {
            continue;
        }
        if let Some(s) = vocab.token_string(t) {
            let mut chars = s.chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                present.push(c);
                if c == '\u{2581}' && vocab.space_is_metaspace() {
                    present.push(' ');
                }
            }
        }
    }
    let mut class = ClassUnicode::new(present.iter().map(|&c| ClassUnicodeRange::new(c, c)));
    class.negate();
    let dfa = ByteDfa::from_hir(&Hir::class(regex_syntax::hir::Class::Unicode(class)), 100_000)?;
    Ok(FallbackTrie::new(dfa))
}
