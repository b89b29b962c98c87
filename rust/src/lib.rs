//! # propertok — canonical-token masks for constrained decoding
//!
//! propertok builds, for a regex and a tokenizer, an automaton over token ids whose accepted
//! sequences are exactly the *canonical* tokenizations (what the tokenizer itself produces) of
//! the strings that match — not every token sequence that merely decodes to a match, as
//! Outlines-style indexes do. See `DESIGN.md` for the definition everything is tested against.
//!
//! ## Contents, in pipeline order
//! * [`vocab`] — a `tokenizer.json` as token byte strings, merge table, special tokens, EOS.
//! * [`bytedfa`] — regex → trimmed, minimised byte DFA (regex-automata; [`partition`] minimises).
//! * [`index`] — the token trie and `decode⁻¹(L)` (the agnostic baseline).
//! * [`bpe`] — the reference priority BPE and token derivations.
//! * [`split_pattern`] / [`piece_machine`] — a pre-tokenizer's `Split` regexes as priority NFAs,
//!   and the lazy DFA of texts marked exactly at its piece boundaries.
//! * [`tokenizer_dfa`] / [`algorithm3`] — the DFA of canonical token sequences;
//!   `forbidden_sets` stores its per-class forbidden sets (owned, or mapped from the cache).
//! * [`cartesian`] — CartesianMerge: product search for relevant states.
//! * [`text_automaton`] / [`pretokenized`] — canonical guides for byte-level BPE tokenizers
//!   that split (and normalize) the text before the merges.
//! * [`direct_merge`] / [`explicit`] / [`token_dfa`] — DirectMerge and explicit token DFAs
//!   (`method="direct"`).
//! * [`serialize`] — the versioned, checksummed container of the tokenizer DFA's disk cache.
//! * [`guide`] / [`matcher`] — the compiled automaton, its masks, and a decoding cursor.
//! * [`compiler`] — ties them together, under the limits of [`deadline`] (wall time),
//!   [`mask_cache`] (memory of cached masks) and each stage's size limits; `python` (feature
//!   `python`) is the PyO3 layer and the only module that knows about Python.
//!
//! ## Example
//! ```
//! use std::sync::Arc;
//! use propertok::{compiler::{Compiler, Limits}, guide::Method, vocab::Vocabulary};
//! let vocab = Vocabulary::char_bpe_for_tests(&["a", "b", "ab"], &[("a", "b")]).unwrap();
//! let compiler = Compiler::new(Arc::new(vocab), Limits::default());
//! let guide = compiler.compile_regex("(ab)+", Method::Cartesian).unwrap();
//! // Only the canonical "ab" token may start; the split "a","b" is not canonical.
//! assert_eq!(guide.allowed_tokens(guide.initial_state()), vec![2]);
//! ```

pub mod algorithm3;
pub mod bitset;
pub mod bpe;
pub mod bytedfa;
pub mod cartesian;
pub mod compiler;
pub mod deadline;
pub mod direct_merge;
pub mod error;
pub mod explicit;
mod forbidden_sets;
/// Property checks shared by the cargo-fuzz targets (`fuzz/`) and the stable-Rust regression
/// tests that replay their findings (`fuzz/regressions/`).
pub mod fuzz_checks;
pub mod guide;
pub mod guide_io;
pub mod index;
pub mod mask_cache;
pub mod matcher;
pub mod partition;
pub mod piece_machine;
pub mod pretokenized;
mod random;
pub mod serialize;
pub mod split_pattern;
pub mod text_automaton;
pub mod token_dfa;
pub mod token_set;
pub mod tokenizer_dfa;
pub mod vocab;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
