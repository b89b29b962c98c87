//! The tokenizer as data: a `tokenizer.json` read into token byte strings, merges, special
//! tokens and the description of its pre-tokenizer ([`vocab`]); the reference priority BPE
//! ([`bpe`]); the token trie ([`token_trie`]); which characters a normalizer leaves alone
//! ([`normalization`]); which tokens a pre-tokenizer always splits ([`always_split`]); and what
//! a WordPiece model does to words ([`word_piece`]).

pub mod always_split;
pub mod bpe;
pub mod normalization;
pub mod token_trie;
pub mod vocab;
pub mod word_piece;
