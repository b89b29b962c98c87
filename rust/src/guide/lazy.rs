//! A lazy guide's automaton as the guide holds it (see `crate::lazy`), with the limits it was
//! compiled under: what an eager rebuild (`crate::build::materialize`) needs besides the regex
//! DFA, which the automaton keeps.

use std::sync::Arc;

use super::{Automaton, Guide, Method};
use crate::error::Result;
use crate::lazy::automaton::LazyAutomaton;
use crate::lazy::engine::Engine;
use crate::lazy::text::{TextRegex, TextSpace};
use crate::lazy::TokenizerParts;
use crate::limits::Limits;

pub(crate) struct LazyGuide {
    pub(crate) automaton: LazyAutomaton,
    pub(crate) limits: Limits,
}

impl LazyGuide {
    /// A lazy guide for `dfa` over the tokenizer of `parts`, with its initial state built (and,
    /// for up to `limits.prefetch_seconds`, the members a decoder reaches next):
    /// `EmptyLanguage` when no canonical sequence is accepted.
    ///
    /// `tokens`: the ids of the special tokens whose markers `dfa` takes (a grammar's, see
    /// `crate::grammar::lower::GrammarRegex`), in marker order; empty for a regex.
    pub(crate) fn compile(
        parts: Arc<TokenizerParts>,
        dfa: impl Into<TextRegex>,
        tokens: Vec<u32>,
        limits: Limits,
    ) -> Result<Guide> {
        let vocab = parts.vocab.clone();
        let space =
            TextSpace::new(dfa, parts.pieces.clone(), parts.contents.clone(), parts.normal)?.with_tokens(tokens.len());
        let engine =
            Engine::new(parts, space, limits.max_product_states, limits.max_guide_bytes, limits.max_compile_seconds);
        let automaton = LazyAutomaton::new(engine, tokens)?;
        automaton.engine().prefetch(limits.prefetch_seconds);
        Ok(Guide::new(Method::Cartesian, vocab, Automaton::Lazy(LazyGuide { automaton, limits }), 0))
    }
}
