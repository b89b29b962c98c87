//! The constructions that compile a regex's byte DFA and a tokenizer into a [`crate::guide::Guide`].
//!
//! | method | module | guide | language |
//! | --- | --- | --- | --- |
//! | `agnostic` | [`cartesian::build_agnostic`] | product (byte state only) | every token sequence that decodes to a match (Outlines' index) |
//! | `cartesian` | [`cartesian::build`] | product (byte state, tokenizer state) | the canonical sequences, by CartesianMerge |
//! | `cartesian`, pre-tokenized tokenizers | [`pre_tokenized::build`] | sets of (text state, split node) × tokenizer state | the canonical sequences, pre-tokenizer included |
//! | `direct` | [`direct`] | explicit token DFA | the same as `cartesian`, by DirectMerge or by materialising the product |
//!
//! `cartesian` and `direct` accept the same language (tested with
//! [`crate::guide::Guide::first_difference`]); `agnostic` accepts a superset. Builders produce a
//! guide's decode-time automaton ([`crate::guide`]) and never the other way round.

pub mod cartesian;
pub mod direct;
pub mod pre_tokenized;
mod search;
