//! The constructions that compile a regex's byte DFA and a tokenizer into a [`crate::guide::Guide`].
//!
//! | method | module | guide | language |
//! | --- | --- | --- | --- |
//! | `agnostic` | [`cartesian::build_agnostic`] | product (byte state only) | every token sequence that decodes to a match (Outlines' index) |
//! | `cartesian` | [`cartesian::build`] | product (byte state, tokenizer state) | the canonical sequences, by CartesianMerge |
//! | `cartesian`, pre-tokenized tokenizers | [`pre_tokenized::build`] | sets of (text state, split node) × tokenizer state | the canonical sequences, pre-tokenizer included |
//! | `direct` | [`direct`] | explicit token DFA | the same as `cartesian`, by DirectMerge or by materialising the product |
//! | every method, WordPiece tokenizers | [`word_piece::build`] | explicit token DFA | canonical (or, for `agnostic`, all) sequences whose decoded text matches |
//!
//! `cartesian` and `direct` accept the same language (tested with
//! [`crate::guide::Guide::first_difference`]); `agnostic` accepts a superset. Builders produce a
//! guide's decode-time automaton ([`crate::guide`]) and never the other way round.

pub mod cartesian;
pub mod direct;
pub mod pre_tokenized;
mod search;
pub mod word_piece;

use crate::error::{Error, Result};
use crate::guide::{Automaton, Guide, Method};
use crate::lazy::text::TextRegex;
use crate::limits::Deadline;
use crate::max_match::Language;
use crate::pre_tokenizer::normal_form::Normalized;
use crate::regex::byte_dfa::ByteDfa;

/// The eager guide of a lazy one: the same language with every state built up front, under the
/// limits the lazy guide was compiled with (what serialisation, `direct` and whole-guide
/// statistics need). `InvalidArgument` for a guide that is not lazy, `Unsupported` for one
/// whose grammar names special tokens.
pub fn materialize(guide: &Guide) -> Result<Guide> {
    if let Automaton::MaxMatch(lazy) = &guide.automaton {
        let limits = lazy.limits();
        let deadline = Deadline::after_seconds(limits.max_compile_seconds);
        let tokens = word_piece::build(
            lazy.entries(),
            lazy.max_word_chars(),
            lazy.dfa(),
            Language::Canonical,
            limits.token_dfa(),
            deadline,
        )?;
        let eager = direct::token_dfa_guide(&guide.vocab, tokens, Method::Direct)?;
        return Ok(eager.with_mask_cache_limit(limits.max_mask_cache_bytes));
    }
    let Automaton::Lazy(lazy) = &guide.automaton else {
        return Err(Error::InvalidArgument("materialize: the guide is not lazy".into()));
    };
    if let Some(&id) = lazy.automaton.special_tokens().first() {
        return Err(Error::Unsupported(format!(
            "the guide's grammar names special token {id}, which only lazy guides model: it has no eager form"
        )));
    }
    let engine = lazy.automaton.engine();
    let parts = engine.parts();
    let dfa = match engine.space().dfa() {
        TextRegex::Dfa(dfa) => dfa.clone(),
        TextRegex::Grammar(g) => match g.regex() {
            Some(regex) => ByteDfa::from_regex(regex, lazy.limits.max_byte_dfa_states)?,
            None => {
                return Err(Error::Unsupported(
                    "the guide's grammar nests rules (a context-free grammar), which only lazy guides model: it \
                     has no eager form"
                        .into(),
                ))
            }
        },
    };
    let limits = lazy.limits.search(Deadline::after_seconds(lazy.limits.max_compile_seconds));
    let eager = match &parts.pieces {
        Some(pieces) => {
            let tables = pre_tokenized::PreTokenizedTables {
                machine: Normalized::new((**pieces).clone(), parts.normal),
                contents: (*parts.contents).clone(),
                splits: parts.splits.clone(),
                trie: parts.trie.clone(),
            };
            pre_tokenized::build(&parts.vocab, &parts.tok, &tables, dfa, &limits)?
        }
        None => cartesian::build(&parts.vocab, &parts.tok, &parts.trie, dfa, &limits)?,
    };
    Ok(eager.with_mask_cache_limit(lazy.limits.max_mask_cache_bytes))
}
