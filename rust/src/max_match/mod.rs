//! Canonical WordPiece (MaxMatch) token sequences as automaton states over a regex.
//!
//! WordPiece (`crate::tokenizer::word_piece` has the model) writes each word greedily, longest
//! vocabulary entry first. A token sequence is canonical when every token is the longest entry at
//! its place: no longer entry spells it and what follows it in its word. That can reach past the
//! next token (entries `a`, `##b`, `##c`, `abc` and no `ab`: `a ##b` is canonical, `a ##b ##c` is
//! not), so unlike BPE there is no tokenizer DFA of token pairs; a guide's state carries the
//! checks still open instead.
//!
//! # States
//! A [`State`] is the regex's byte state, where the current word stands ([`Word`]: nothing written
//! yet, a word that may go on, a one-character word such as punctuation that ends here), the
//! characters of the current word (counted only when the regex allows words longer than
//! `max_input_chars_per_word`, past which the word is the unknown token) and the *pending*
//! longest-match checks: for each token of the current word after which a longer entry could
//! still match, the node of the [`EntryTrie`] reached by its text and the text after it. A
//! token's successor walks its bytes through the byte DFA and every pending node: reaching an
//! entry is a longer match (the sequence is not what the tokenizer writes), falling off the trie
//! settles that check, and a word-initial token ends the word, which settles them all. A word
//! that ends is always written as it is (greedy on a word made of the tokens, each the longest
//! entry, gives those tokens back), so these checks are the whole of canonicity.
//!
//! # Invariants and costs
//! * [`Walk::successors`] finds every token's successor at once by walking the entry trie in step
//!   with the byte DFA, pruned where the DFA dies, a check finds a longer entry or the word passes
//!   its length: one walk per state, ~1–3 ms where the regex allows free text over BERT's 30,522
//!   tokens, microseconds for labels and numbers.
//! * The number of pending checks is bounded by the longest entry, so the states are finite.
//! * A state can be a dead end although its byte state is not (the checks forbid the only ways on):
//!   eager guides trim those (`crate::build::word_piece`), lazy ones prove each successor live
//!   before allowing it ([`lazy`]).

mod entries;
pub mod lazy;
mod walk;

pub use entries::EntryTrie;
pub use walk::{counts_word_chars, word_start, Language, State, Walk, Word};
