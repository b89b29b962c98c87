//! # propertok — canonical-token masks for constrained decoding
//!
//! propertok builds, for a regex and a tokenizer, an automaton over token ids whose accepted
//! sequences are exactly the *canonical* tokenizations (what the tokenizer itself produces) of
//! the strings that match — not every token sequence that merely decodes to a match, as
//! Outlines-style indexes do. `docs/design.md` in the repository gives the definition everything
//! is tested against and the algorithms as implemented. Module docs cite "the appendix": the
//! technical appendix of Tran-Thien 2024 (DirectMerge, CartesianMerge, BuildTokenizerDFA), whose
//! algorithms that note summarises.
//!
//! ## Layers, lowest first
//! Dependencies run one way, down this list (CI fails on a module cycle):
//! * [`util`], [`error`], [`limits`] — bitsets, the disk-cache container, the one error type,
//!   every limit and its default.
//! * [`regex`] — regex → trimmed, minimised byte DFA (regex-automata).
//! * [`grammar`] — Lark and GBNF grammars → rules → one regex (recursion refused or unrolled).
//! * [`json_schema`] — JSON Schema → pushdown rules for a subset of schemas, byte-identical to
//!   the Python converter's (which handles the rest).
//! * [`pre_tokenizer`] — a pre-tokenizer's `Split` regexes as priority NFAs, the lazy DFA of texts
//!   marked at its piece boundaries, and its product with a regex ([`pre_tokenizer::text_automaton`]).
//! * [`tokenizer`] — a `tokenizer.json` as a [`Vocabulary`], the reference BPE, the token trie.
//! * [`tokenizer_dfa`] — the DFA of canonical token sequences of a merge table, built once per
//!   tokenizer and cached on disk.
//! * [`guide`] — what decoding needs: a compiled [`Guide`], its masks, a [`Matcher`] cursor,
//!   serialisation. Never names a builder.
//! * [`lazy`] — canonical guides whose states are built the first time a decoder reaches them,
//!   memoized in the guide and shared by every thread (below `guide`, which holds them).
//! * [`max_match`] — WordPiece's canonical sequences as states over a regex, and its lazy guides
//!   (below `guide`, which holds them).
//! * [`build`] — the eager constructions: `agnostic`, CartesianMerge (`cartesian`),
//!   pre-tokenized guides, DirectMerge (`direct`).
//! * [`compiler`] — the [`Compiler`]: one vocabulary, its cached tokenizer DFA, and the method
//!   dispatch. `python` (feature `python`) is the PyO3 layer and the only module that knows
//!   about Python.
//!
//! ## Which method when?
//! * `cartesian` (the default): canonical masks for every supported tokenizer; the mask is a
//!   per-state bitset minus the forbidden set of the last token's class.
//!   [`Compiler::compile_regex_lazy`] builds the same guide lazily (a millisecond to the first
//!   mask where the eager product takes up to seconds on 128k vocabularies; the Python
//!   binding's default, see `docs/design.md` §8).
//! * `direct`: the same language as an explicit token DFA; smaller and faster per step for
//!   small guides, refused past [`Limits::max_direct_states`] / `max_direct_transitions`.
//!   `auto` picks it when it fits.
//! * `agnostic`: Outlines' index (any tokenization of a match), for comparison and for
//!   tokenizers that canonical methods refuse.
//!
//! ## Limits
//! Every construction that can blow up checks a limit of [`Limits`] as it goes and fails with
//! [`Error::LimitExceeded`] naming it; see [`limits`].
//!
//! ## Glossary
//! * **canonical** — a token sequence is canonical when the tokenizer, encoding its text as a
//!   continuation, produces exactly it.
//! * **class** — a state of the tokenizer DFA reached after a token: tokens with the same
//!   forbidden successors share a class. `NO_CLASS`: the merges never emit the token.
//! * **forbidden set** `F(c)` — the tokens that may not follow a token of class `c`.
//! * **piece** — a span of text the pre-tokenizer cuts out; BPE runs on each piece alone.
//! * **mark** — a piece boundary written into a text, with the pre-tokenizer stage (its *kind*)
//!   that put it there.
//! * **lone token** — with `ignore_merges`, a token the merges never produce from its own text;
//!   it is emitted only as a whole piece.
//! * **text state** — a state of the [`pre_tokenizer::text_automaton`]: regex state × piece
//!   machine state × added-token content.
//! * **element** — a text state, a tokenizer-side state (a class, at a piece start, after a lone
//!   token) and a node of the lone tokens' split trie: one state of the pre-tokenized search.
//! * **member set** — the text states (with split nodes) a pre-tokenized guide state stands for:
//!   a token boundary may or may not be a piece boundary until later text decides.
//! * **base mask** — per byte state, the tokens with a relevant target (CartesianMerge); a mask
//!   is a base mask minus a forbidden set.
//!
//! ## Example
//! ```
//! use std::sync::Arc;
//! use propertok::{Compiler, Limits, Method, Vocabulary};
//! let vocab = Vocabulary::char_bpe_for_tests(&["a", "b", "ab"], &[("a", "b")]).unwrap();
//! let compiler = Compiler::new(Arc::new(vocab), Limits::default());
//! let guide = compiler.compile_regex("(ab)+", Method::Cartesian).unwrap();
//! // Only the canonical "ab" token may start; the split "a","b" is not canonical.
//! assert_eq!(guide.allowed_tokens(guide.initial_state()).unwrap(), vec![2]);
//! // The same guide built lazily, state by state as a decoder reaches them.
//! let lazy = compiler.compile_regex_lazy("(ab)+").unwrap();
//! assert_eq!(lazy.allowed_tokens(lazy.initial_state()).unwrap(), vec![2]);
//! ```

pub mod build;
pub mod compiler;
pub mod error;
pub mod grammar;
pub mod guide;
pub mod json_schema;
pub mod lazy;
pub mod limits;
pub mod max_match;
pub mod pre_tokenizer;
pub mod regex;
/// Property checks shared by the cargo-fuzz targets (`fuzz/`) and the stable-Rust regression
/// tests that replay their findings (`fuzz/regressions/`).
#[doc(hidden)]
pub mod testing;
pub mod tokenizer;
pub mod tokenizer_dfa;
pub mod util;

#[cfg(feature = "python")]
mod python;

pub use compiler::Compiler;
pub use error::{Error, Result};
pub use guide::matcher::Matcher;
pub use guide::{Guide, Method};
pub use limits::Limits;
pub use tokenizer::vocab::Vocabulary;
