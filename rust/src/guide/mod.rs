//! A compiled guide: an automaton over token ids with a mask per state, what decoding needs.
//!
//! Four representations sit behind one API (`Automaton`):
//! * *product* (CartesianMerge, agnostic): a state is `(q1, q2)`, a state of the regex's byte
//!   DFA and of the tokenizer DFA; its mask is `base_masks[q1]` (tokens with a relevant target)
//!   minus the tokenizer DFA's forbidden set of `q2`, plus byte-fallback edges;
//! * *token DFA* (`direct`): explicit transitions;
//! * *pre-tokenized*: a state is (member set, tokenizer side), see `pre_tokenized`;
//! * *lazy* (the default for canonical methods): states built the first time a decoder reaches
//!   them, see `crate::lazy`; for WordPiece tokenizers, `crate::max_match::lazy`.
//!
//! EOS ids are added on final states. A state's full mask is computed on first request, into the
//! caller's buffer, and cached (within the guide's `max_mask_cache_bytes`, see `mask_cache`): a
//! mask with many tokens as its words, so `mask()` can hand out a zero-copy view, one with few
//! as its token ids; `write_mask` computes straight into a caller's buffer without caching. Computing a
//! lazy guide's mask or successor can reach a limit, so those calls return `Result`.
//!
//! # Invariants
//! * Every state is reachable from `initial` and can reach a final state, so a decoder that
//!   only picks allowed tokens can always finish.
//! * EOS is allowed exactly in final states.
//! * A token is in a state's mask exactly when `step` gives it a successor.

pub mod io;
pub(crate) mod lazy;
pub mod mask_cache;
pub mod matcher;
pub mod pre_tokenized;
mod product;
pub mod token_dfa;
mod walks;

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::guide::mask_cache::MaskCache;
use crate::guide::token_dfa::TokenDfa;
use crate::max_match::lazy::LazyMaxMatch;
use crate::regex::byte_dfa::ByteDfa;
use crate::tokenizer::vocab::Vocabulary;
use crate::util::bitset::{self, Filled};
pub(crate) use product::{ByteEdges, ProductAutomaton};

/// The construction behind a guide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every token sequence that decodes to a match (Outlines' token index).
    Agnostic,
    /// Canonical token sequences only, by CartesianMerge.
    Cartesian,
    /// Canonical token sequences only, as an explicit token DFA (DirectMerge, or the
    /// materialised CartesianMerge product when DirectMerge would not be exact).
    Direct,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Agnostic => "agnostic",
            Method::Cartesian => "cartesian",
            Method::Direct => "direct",
        }
    }
    /// Parses a method name; `"auto"` gives `None` (direct when small enough, else cartesian).
    pub fn parse(s: &str) -> Result<Option<Method>> {
        match s {
            "agnostic" => Ok(Some(Method::Agnostic)),
            "cartesian" => Ok(Some(Method::Cartesian)),
            "direct" => Ok(Some(Method::Direct)),
            "auto" => Ok(None),
            other => Err(Error::InvalidArgument(format!(
                "unknown method {other:?}: expected \"cartesian\", \"direct\", \"auto\" or \"agnostic\""
            ))),
        }
    }
}

/// See [`Guide::stats`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuideStats {
    pub num_states: usize,
    /// (state, non-EOS token) pairs.
    pub num_transitions: usize,
    pub mean_allowed_tokens: f64,
    /// Share of states with exactly one choice (one token, or EOS alone).
    pub single_choice_share: f64,
}

/// The parts of a product guide other modules build on.
pub struct ProductParts<'a> {
    pub byte_dfa: &'a ByteDfa,
}

/// How a guide stores its automaton. (One per guide: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Automaton {
    Product(ProductAutomaton),
    /// An explicit token DFA (method `direct`), with each state's fewest tokens to acceptance.
    TokenDfa {
        dfa: TokenDfa,
        distance: Vec<u32>,
    },
    /// A canonical guide for a tokenizer with a pre-tokenizer (see `pre_tokenized`).
    PreTokenized(pre_tokenized::PreTokenizedAutomaton),
    /// A canonical guide built as it is used (see `crate::lazy`).
    Lazy(lazy::LazyGuide),
    /// A canonical WordPiece guide built as it is used (see `crate::max_match::lazy`).
    MaxMatch(LazyMaxMatch),
}

impl Automaton {
    fn num_states(&self) -> usize {
        match self {
            Automaton::Product(p) => p.states.len(),
            Automaton::TokenDfa { dfa, .. } => dfa.num_states(),
            Automaton::PreTokenized(p) => p.num_states(),
            Automaton::Lazy(l) => l.automaton.num_states(),
            Automaton::MaxMatch(m) => m.num_states(),
        }
    }
}

/// See the module docs.
pub struct Guide {
    pub(crate) method: Method,
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) automaton: Automaton,
    pub(crate) initial: u32,
    pub(crate) masks: MaskCache,
}

impl Guide {
    /// A guide over `automaton`, with an empty mask cache of the default budget (the
    /// `Compiler` sets the caller's [`crate::limits::Limits::max_mask_cache_bytes`]).
    pub(crate) fn new(method: Method, vocab: Arc<Vocabulary>, automaton: Automaton, initial: u32) -> Guide {
        let masks = MaskCache::new(crate::limits::DEFAULT_MAX_MASK_CACHE_BYTES);
        Guide { method, vocab, automaton, initial, masks }
    }

    pub fn method(&self) -> Method {
        self.method
    }
    pub fn initial_state(&self) -> u32 {
        self.initial
    }
    /// Number of states (of a lazy guide: the states built so far).
    pub fn num_states(&self) -> usize {
        self.automaton.num_states()
    }
    /// Whether states are built as decoders reach them (see `crate::lazy`).
    pub fn is_lazy(&self) -> bool {
        matches!(self.automaton, Automaton::Lazy(_) | Automaton::MaxMatch(_))
    }
    /// Whether a call's work on this guide either stays short or tells
    /// [`crate::util::long_work`] when it turns out long: an eager guide's masks and steps are
    /// bounded by the vocabulary (microseconds), and the lazy engine notifies at its clock
    /// checks and before its long steps. A lazy WordPiece guide does not.
    pub fn reports_long_work(&self) -> bool {
        !matches!(self.automaton, Automaton::MaxMatch(_))
    }
    /// Bytes a lazy guide's memo holds (an estimate), and its limit (`max_guide_bytes`).
    pub fn lazy_memo_bytes(&self) -> Option<(usize, usize)> {
        match &self.automaton {
            Automaton::Lazy(l) => Some(l.automaton.engine().memo_bytes()),
            Automaton::MaxMatch(m) => Some(m.memo_bytes()),
            _ => None,
        }
    }
    /// For a lazy guide: what runs its regex or grammar (see `crate::lazy::text::TextRegex::kind`).
    pub fn lazy_text_automaton(&self) -> Option<&'static str> {
        match &self.automaton {
            Automaton::Lazy(l) => Some(l.automaton.engine().space().dfa().kind()),
            // Runs the regex's minimal byte DFA (WordPiece guides take no grammar that nests).
            Automaton::MaxMatch(_) => Some("minimal DFA"),
            _ => None,
        }
    }
    /// For a lazy guide: the text states it has built, and how many of those whose tokens it
    /// walked took their groups from a slice (`crate::lazy::slice`).
    pub fn lazy_text_states(&self) -> Option<(usize, usize)> {
        match &self.automaton {
            Automaton::Lazy(l) => Some(l.automaton.engine().text_states()),
            _ => None,
        }
    }
    /// For a lazy guide of a grammar that nests: the stack frames its automaton has interned,
    /// and per rule the distinct stacks it has been decided under
    /// (`PushdownDfa::stacks_per_rule`).
    pub fn lazy_grammar_stacks(&self) -> Option<(usize, Vec<(String, usize)>)> {
        let Automaton::Lazy(l) = &self.automaton else { return None };
        let g = l.automaton.engine().space().dfa().nesting_grammar()?;
        let per_rule = g.stacks_per_rule().into_iter().map(|(name, n)| (name.to_string(), n)).collect();
        Some((g.num_stack_frames(), per_rule))
    }
    /// For a lazy guide: its engine.
    #[cfg(test)]
    pub(crate) fn lazy_engine(&self) -> Option<&crate::lazy::engine::Engine> {
        match &self.automaton {
            Automaton::Lazy(l) => Some(l.automaton.engine()),
            _ => None,
        }
    }
    /// Bytes of masks cached so far, and the cache's budget (see `mask_cache`).
    pub fn mask_cache_bytes(&self) -> (usize, usize) {
        (self.masks.cached_bytes(), self.masks.max_bytes())
    }
    /// The same guide with an empty mask cache of `max_bytes`.
    pub fn with_mask_cache_limit(mut self, max_bytes: usize) -> Guide {
        self.masks = MaskCache::new(max_bytes);
        self
    }
    pub fn vocab_size(&self) -> usize {
        self.vocab.vocab_size()
    }
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }
    pub fn eos_token_ids(&self) -> &[u32] {
        self.vocab.eos_token_ids()
    }
    /// Words per mask: `ceil(vocab_size / 32)`.
    pub fn mask_words(&self) -> usize {
        bitset::words_for(self.vocab.vocab_size())
    }
    /// The regex's byte DFA of a product guide.
    ///
    /// # Panics
    /// On a `direct` guide (internal use only, right after a product compile).
    pub(crate) fn parts(&self) -> ProductParts<'_> {
        match &self.automaton {
            Automaton::Product(p) => ProductParts { byte_dfa: &p.dfa },
            Automaton::TokenDfa { .. } | Automaton::PreTokenized(_) | Automaton::Lazy(_) | Automaton::MaxMatch(_) => {
                unreachable!("parts() is only called on product guides")
            }
        }
    }

    /// The explicit token DFA of a `direct` guide.
    pub fn token_dfa(&self) -> Option<&TokenDfa> {
        match &self.automaton {
            Automaton::TokenDfa { dfa, .. } => Some(dfa),
            Automaton::Product(_) | Automaton::PreTokenized(_) | Automaton::Lazy(_) | Automaton::MaxMatch(_) => None,
        }
    }

    pub fn check_state(&self, state: u32) -> Result<()> {
        if (state as usize) < self.num_states() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "state {state} is out of range (the guide has {} states)",
                self.num_states()
            )))
        }
    }

    fn check_token(&self, token: u32) -> Result<()> {
        if (token as usize) < self.vocab.vocab_size() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "token id {token} is out of range (vocab_size is {})",
                self.vocab.vocab_size()
            )))
        }
    }

    /// EOS is allowed here.
    pub fn is_final(&self, state: u32) -> bool {
        match &self.automaton {
            Automaton::Product(p) => p.is_final(state),
            Automaton::TokenDfa { dfa, .. } => dfa.accepting[state as usize],
            Automaton::PreTokenized(p) => p.is_final(state),
            Automaton::Lazy(l) => l.automaton.is_final(state),
            Automaton::MaxMatch(m) => m.is_final(state),
        }
    }

    /// Writes the mask of `state` into `out` (`mask_words()` words), every word of it: `out` may
    /// hold anything before.
    pub fn write_mask(&self, state: u32, out: &mut [u32]) -> Result<()> {
        self.compute_mask(state, out).map(drop)
    }

    /// [`Guide::write_mask`], and what the automaton knows of the mask besides its words: its
    /// ids where it knows them without reading `out` back (a lazy guide's narrow states), or
    /// a recipe (a lazy guide's dense states inside a string).
    fn compute_mask(&self, state: u32, out: &mut [u32]) -> Result<Filled> {
        let eos: &[u32] = if self.is_final(state) { self.vocab.eos_token_ids() } else { &[] };
        match &self.automaton {
            Automaton::Product(p) => p.write_mask(state, out),
            Automaton::PreTokenized(p) => p.write_mask(state, out),
            Automaton::TokenDfa { dfa, .. } => {
                out.fill(0);
                for &(t, _) in &dfa.transitions[state as usize] {
                    bitset::set(out, t as usize);
                }
            }
            // A lazy guide's recipe writes EOS too.
            Automaton::Lazy(l) => return l.automaton.write_mask(state, out, mask_cache::max_ids(out.len()), eos),
            Automaton::MaxMatch(m) => m.write_mask(state, out)?,
        }
        eos.iter().for_each(|&e| bitset::set(out, e as usize));
        Ok(Filled::Words)
    }

    /// The mask of `state`: borrowed from the cache when it holds the mask's words, else written
    /// (from the cached token ids, or computed afresh once the cache's budget is spent) into a
    /// fresh vector.
    pub fn mask(&self, state: u32) -> Result<Cow<'_, [u32]>> {
        if let Some(words) = self.masks.words(state as usize) {
            return Ok(Cow::Borrowed(words));
        }
        let mut m = vec![0u32; self.mask_words()];
        self.copy_mask(state, &mut m)?;
        Ok(match self.masks.words(state as usize) {
            Some(words) => Cow::Borrowed(words),
            None => Cow::Owned(m),
        })
    }

    /// The cached words of `state`'s mask, when the cache holds them (a mask with few tokens is
    /// cached as ids, see `mask_cache`); computes nothing.
    pub fn cached_words(&self, state: u32) -> Option<&[u32]> {
        self.masks.words(state as usize)
    }

    /// Writes the cached mask of `state` into `out` (`mask_words()` words) and returns `true`;
    /// `false`, with `out` untouched, when it is not cached. Computes nothing, so a binding may
    /// call it without releasing its interpreter lock.
    pub fn write_cached_mask(&self, state: u32, out: &mut [u32]) -> bool {
        self.masks.write(state as usize, out)
    }

    /// Writes the mask of `state` into `out` (`mask_words()` words): a copy of the cached mask,
    /// or computed into `out` and then cached when the budget allows.
    pub fn copy_mask(&self, state: u32, out: &mut [u32]) -> Result<()> {
        self.masks.write_or_compute(state as usize, out, |m| self.compute_mask(state, m))
    }

    /// Sorted allowed token ids (EOS included on final states).
    pub fn allowed_tokens(&self, state: u32) -> Result<Vec<u32>> {
        Ok(bitset::iter_ones(&self.mask(state)?).map(|t| t as u32).collect())
    }

    /// Whether `token` is in the mask of `state`, decided without computing the mask.
    pub fn is_allowed(&self, state: u32, token: u32) -> Result<bool> {
        Ok(self.step(state, token)?.is_some())
    }

    /// The state after `token`, `None` when the mask of `state` does not allow it; EOS from a
    /// final state stays in `state`. `state` and `token` must be in range.
    pub fn step(&self, state: u32, token: u32) -> Result<Option<u32>> {
        if self.vocab.eos_token_ids().contains(&token) {
            return Ok(self.is_final(state).then_some(state));
        }
        if token as usize >= self.vocab.num_tokens() {
            return Ok(None); // padding ids past the tokenizer
        }
        Ok(match &self.automaton {
            Automaton::Product(p) => p.next_state(&self.vocab, state, token),
            Automaton::TokenDfa { dfa, .. } => dfa.next(state, token),
            Automaton::PreTokenized(p) => p.next_state(&self.vocab, state, token),
            Automaton::Lazy(l) => l.automaton.next_state(state, token)?,
            Automaton::MaxMatch(m) => m.next_state(state, token)?,
        })
    }

    /// The state after `token`, with an error naming the problem when it is out of range or
    /// not allowed; EOS from a final state stays in `state`.
    pub fn next_state(&self, state: u32, token: u32) -> Result<u32> {
        self.check_state(state)?;
        self.check_token(token)?;
        match self.step(state, token)? {
            Some(next) => Ok(next),
            None => Err(self.disallowed(state, token)),
        }
    }

    fn disallowed(&self, state: u32, token: u32) -> Error {
        let bytes =
            if (token as usize) < self.vocab.num_tokens() { self.vocab.token_bytes(token) } else { b"<padding>" };
        let text = String::from_utf8_lossy(bytes).into_owned();
        let allowed = match self.mask(state) {
            Ok(mask) => format!("{} tokens are", bitset::count(&mask)),
            Err(e) => format!("its mask: {e}"),
        };
        Error::InvalidArgument(format!("token {token} ({text:?}) is not allowed in state {state} ({allowed})"))
    }
}
