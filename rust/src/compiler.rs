//! The compiler: one vocabulary, its lazily built tokenizer DFA and token tries, and the
//! entry point that turns a regex into a [`Guide`].
//!
//! The tokenizer DFA is the expensive, regex-independent part (built once, on the first
//! canonical compile, then shared by every guide through an `Arc`); a failed build is cached
//! too, so an unsupported tokenizer fails fast on every call.

use std::path::PathBuf;
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
    cache_dir: Option<PathBuf>,
    cache_status: OnceLock<&'static str>,
    tokenizer_dfa: OnceLock<Result<Arc<TokenizerDfa>>>,
    all_tokens: OnceLock<TokenTrie>,
    emittable_tokens: OnceLock<TokenTrie>,
}

impl Compiler {
    pub fn new(vocab: Arc<Vocabulary>, limits: Limits) -> Compiler {
        Compiler {
            vocab,
            limits,
            cache_dir: None,
            cache_status: OnceLock::new(),
            tokenizer_dfa: OnceLock::new(),
            all_tokens: OnceLock::new(),
            emittable_tokens: OnceLock::new(),
        }
    }

    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Keeps the tokenizer DFA in `dir` (`tokenizer-dfa-<fingerprint>.bin`): loaded when a
    /// valid file is there, built and written (atomically, by rename) otherwise. A corrupt,
    /// stale or unreadable file is rebuilt, never trusted; a failed write only loses the cache.
    pub fn with_cache_dir(mut self, dir: Option<PathBuf>) -> Compiler {
        self.cache_dir = dir;
        self
    }

    /// `"hit"`, `"miss"` (built and written), `"write-failed"`, `"disabled"`, or `"not-built"`.
    pub fn cache_status(&self) -> &'static str {
        self.cache_status.get().copied().unwrap_or("not-built")
    }

    /// The tokenizer DFA, built (or loaded from the cache) on first use.
    pub fn tokenizer_dfa(&self) -> Result<&Arc<TokenizerDfa>> {
        self.tokenizer_dfa.get_or_init(|| self.load_or_build().map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    fn load_or_build(&self) -> Result<TokenizerDfa> {
        if let Some(reason) = self.vocab.canonical_unsupported_reason() {
            return Err(Error::Unsupported(reason.to_string()));
        }
        let Some(dir) = &self.cache_dir else {
            let _ = self.cache_status.set("disabled");
            return TokenizerDfa::build(&self.vocab);
        };
        let path = dir.join(format!("tokenizer-dfa-{:016x}.bin", self.vocab.fingerprint()));
        let started = std::time::Instant::now();
        if let Ok(bytes) = std::fs::read(&path) {
            if let Ok(mut dfa) = TokenizerDfa::from_bytes(&bytes, &self.vocab) {
                dfa.set_build_seconds(started.elapsed().as_secs_f64());
                let _ = self.cache_status.set("hit");
                return Ok(dfa);
            }
        }
        let dfa = TokenizerDfa::build(&self.vocab)?;
        let tmp = dir.join(format!(".tokenizer-dfa-{:016x}.{}.tmp", self.vocab.fingerprint(), std::process::id()));
        let written = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&tmp, dfa.to_bytes(&self.vocab)))
            .and_then(|_| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        let _ = self.cache_status.set(if written.is_ok() { "miss" } else { "write-failed" });
        Ok(dfa)
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
