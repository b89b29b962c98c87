//! The compiler: one vocabulary, its lazily built tokenizer DFA and token tries, and the
//! entry point that turns a regex into a [`Guide`].
//!
//! The tokenizer DFA is the expensive, regex-independent part (built once, on the first
//! canonical compile, then shared by every guide through an `Arc`); a failed build is cached
//! too, so an unsupported tokenizer fails fast on every call.

use std::sync::{Arc, OnceLock};

use crate::bytedfa::{ByteDfa, DEFAULT_MAX_STATES};
use crate::cartesian::{self, DEFAULT_MAX_PRODUCT_STATES};
use crate::error::{Error, Result};
use crate::explicit::{self, DirectLimits};
use crate::guide::{Guide, Method};
use crate::index::TokenTrie;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::vocab::Vocabulary;

/// Size limits checked while compiling.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_byte_dfa_states: usize,
    pub max_product_states: usize,
    /// States of an explicit (`direct`) token DFA.
    pub max_direct_states: usize,
    /// Transitions of an explicit (`direct`) token DFA; `auto` falls back to `cartesian` past it.
    pub max_direct_transitions: usize,
}

/// Default for [`Limits::max_direct_states`].
pub const DEFAULT_MAX_DIRECT_STATES: usize = 100_000;
/// Default for [`Limits::max_direct_transitions`].
pub const DEFAULT_MAX_DIRECT_TRANSITIONS: usize = 2_000_000;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_byte_dfa_states: DEFAULT_MAX_STATES,
            max_product_states: DEFAULT_MAX_PRODUCT_STATES,
            max_direct_states: DEFAULT_MAX_DIRECT_STATES,
            max_direct_transitions: DEFAULT_MAX_DIRECT_TRANSITIONS,
        }
    }
}

/// See the module docs. `Send + Sync`: compile from as many threads as you like.
pub struct Compiler {
    vocab: Arc<Vocabulary>,
    limits: Limits,
    tokenizer_dfa: OnceLock<Result<Arc<TokenizerDfa>>>,
    all_tokens: OnceLock<TokenTrie>,
    emittable_tokens: OnceLock<TokenTrie>,
}

impl Compiler {
    pub fn new(vocab: Arc<Vocabulary>, limits: Limits) -> Compiler {
        Compiler {
            vocab,
            limits,
            tokenizer_dfa: OnceLock::new(),
            all_tokens: OnceLock::new(),
            emittable_tokens: OnceLock::new(),
        }
    }

    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The tokenizer DFA, built on first use.
    pub fn tokenizer_dfa(&self) -> Result<&Arc<TokenizerDfa>> {
        self.tokenizer_dfa
            .get_or_init(|| TokenizerDfa::build(&self.vocab).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn all_tokens(&self) -> &TokenTrie {
        self.all_tokens.get_or_init(|| {
            let v = &self.vocab;
            TokenTrie::new((0..v.num_tokens() as u32).filter(|&t| !v.is_never_allowed(t)).map(|t| (t, v.token_bytes(t))))
        })
    }

    fn emittable_tokens(&self, dfa: &TokenizerDfa) -> &TokenTrie {
        self.emittable_tokens.get_or_init(|| {
            let v = &self.vocab;
            TokenTrie::new(
                (0..v.num_tokens() as u32)
                    .filter(|&t| dfa.class_of(t) != crate::tokenizer_dfa::NO_CLASS)
                    .map(|t| (t, v.token_bytes(t))),
            )
        })
    }

    /// Compiles a regex (full match) with the given method.
    pub fn compile_regex(&self, pattern: &str, method: Method) -> Result<Guide> {
        match method {
            Method::Agnostic => {
                let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
                Ok(cartesian::build_agnostic(&self.vocab, self.all_tokens(), dfa))
            }
            Method::Cartesian => self.compile_cartesian(pattern),
            Method::Direct => self.direct_from(self.compile_cartesian(pattern)?),
        }
    }

    /// `method="auto"`: the explicit DFA when it fits the `max_direct_*` limits, else the
    /// CartesianMerge guide (its `method()` says which).
    pub fn compile_regex_auto(&self, pattern: &str) -> Result<Guide> {
        let product = self.compile_cartesian(pattern)?;
        match self.direct_limits().and_then(|l| explicit::materialize(&product, l)) {
            Ok(dfa) => explicit::explicit_guide(&self.vocab, explicit::minimize(&dfa)),
            Err(Error::LimitExceeded { .. }) => Ok(product),
            Err(e) => Err(e),
        }
    }

    fn direct_limits(&self) -> Result<DirectLimits> {
        Ok(DirectLimits { max_states: self.limits.max_direct_states, max_transitions: self.limits.max_direct_transitions })
    }

    fn direct_from(&self, product: Guide) -> Result<Guide> {
        let dfa = explicit::materialize(&product, self.direct_limits()?)?;
        explicit::explicit_guide(&self.vocab, explicit::minimize(&dfa))
    }

    fn compile_cartesian(&self, pattern: &str) -> Result<Guide> {
        // Check the tokenizer first: an unsupported one fails before any regex work.
        let tok = self.tokenizer_dfa()?.clone();
        let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
        let trie = self.emittable_tokens(&tok);
        cartesian::build(&self.vocab, &tok, trie, dfa, self.limits.max_product_states)
    }
}
