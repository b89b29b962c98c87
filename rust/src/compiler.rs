//! The compiler: one vocabulary, its lazily built tokenizer DFA and token tries, and the
//! entry point that turns a regex into a [`Guide`].
//!
//! The tokenizer DFA is the expensive, regex-independent part (built once, on the first
//! canonical compile, then shared by every guide through an `Arc`); a failed build is cached
//! too, so an unsupported tokenizer fails fast on every call.

use std::sync::{Arc, OnceLock};

use crate::bytedfa::{ByteDfa, DEFAULT_MAX_STATES};
use crate::cartesian::{self, DEFAULT_MAX_PRODUCT_STATES};
use crate::error::Result;
use crate::guide::{Guide, Method};
use crate::index::TokenTrie;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::vocab::Vocabulary;

/// Size limits checked while compiling.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_byte_dfa_states: usize,
    pub max_product_states: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_byte_dfa_states: DEFAULT_MAX_STATES, max_product_states: DEFAULT_MAX_PRODUCT_STATES }
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
        // Check the tokenizer first: an unsupported one fails before any regex work.
        let tokenizer_dfa = match method {
            Method::Cartesian => Some(self.tokenizer_dfa()?.clone()),
            Method::Agnostic => None,
        };
        let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
        match tokenizer_dfa {
            None => Ok(cartesian::build_agnostic(&self.vocab, self.all_tokens(), dfa)),
            Some(tok) => {
                let trie = self.emittable_tokens(&tok);
                cartesian::build(&self.vocab, &tok, trie, dfa, self.limits.max_product_states)
            }
        }
    }
}
