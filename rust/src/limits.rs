//! Every limit a compile or a guide checks, their defaults, and the wall-clock [`Deadline`].
//!
//! Anything that can blow up (states, memory, time, cached masks) has a limit here, checked as
//! the construction goes, so a compile that would exceed one stops early with
//! [`Error::LimitExceeded`] naming the knob to raise (its `limit` field is the [`Limits`] field's
//! name, which is also the Python keyword argument). The README's "Limits" table lists them.
//!
//! # The clock
//! Size limits stop most runaway constructions, but a construction can also be slow while
//! staying small (a byte DFA whose states each walk a 128k-token trie, a product search whose
//! states each test thousands of token groups). A [`Deadline`] is created when a compile starts
//! and checked at the top of every loop whose iterations are bounded work (one product state,
//! one byte state, one merge), so a compile stops within one such iteration of the limit —
//! typically well under a millisecond. The one step it cannot interrupt is regex-automata's
//! determinisation, which is bounded by the byte DFA's state budget instead
//! ([`crate::regex::byte_dfa`]). The tokenizer DFA, built once per `Compiler`, is not charged to
//! any compile. A lazy guide, which builds states while it decodes, starts a clock of the same
//! length for each call (`crate::lazy::engine`'s `Engine::timed`). Reading the clock costs
//! ~20 ns; checks are placed where an iteration costs microseconds.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::util::long_work;

/// Limits checked while compiling (and, for the mask cache, while decoding). See the module docs.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// States of the regex's byte DFA (regex-automata's determinisation budget).
    /// Default [`DEFAULT_MAX_BYTE_DFA_STATES`].
    pub max_byte_dfa_states: usize,
    /// States of a canonical guide's searches: product states of CartesianMerge; text states,
    /// elements and guide states (each) of a pre-tokenized guide. Default
    /// [`DEFAULT_MAX_PRODUCT_STATES`]: about 100 MB of search tables.
    pub max_product_states: usize,
    /// States of an explicit (`direct`) token DFA. Default [`DEFAULT_MAX_DIRECT_STATES`].
    pub max_direct_states: usize,
    /// Transitions of an explicit (`direct`) token DFA; `auto` falls back to `cartesian` past it.
    /// Default [`DEFAULT_MAX_DIRECT_TRANSITIONS`].
    pub max_direct_transitions: usize,
    /// Wall-clock seconds of one compile, tokenizer DFA excluded (`None`: unlimited); also of
    /// each call of a lazy guide (a mask, a step) while it settles states met for the first
    /// time (`crate::lazy::engine`). Default [`DEFAULT_MAX_COMPILE_SECONDS`].
    pub max_compile_seconds: Option<f64>,
    /// Estimated bytes of a compiled product guide's tables (states, index, per-byte-state
    /// masks), checked during the product search. Default [`DEFAULT_MAX_GUIDE_BYTES`].
    pub max_guide_bytes: usize,
    /// Bytes of masks a guide caches while it is used ([`crate::guide::mask_cache`]). Default
    /// [`DEFAULT_MAX_MASK_CACHE_BYTES`].
    pub max_mask_cache_bytes: usize,
    /// Seconds a lazy compile spends, after its initial state, filling the first-token sets of
    /// the text states a decoder can reach next, breadth first (`crate::lazy::engine`'s
    /// `prefetch`): first visits move from decoding into the compile, and masks never change.
    /// It stops early at half of `max_product_states` text states or half of `max_guide_bytes`,
    /// so decoding keeps the room its limits leave. Default [`DEFAULT_PREFETCH_SECONDS`] (off).
    pub prefetch_seconds: f64,
}

/// Default for [`Limits::max_byte_dfa_states`]. Real JSON schemas reach ~120,000
/// (JSONSchemaBench's `Github_hard/o46283`: ten counted strings such as `{1,256}`, 117,839 states,
/// ~1.2 s and ~300 MB at peak while determinising); a lazy guide is cheap on such a DFA.
pub const DEFAULT_MAX_BYTE_DFA_STATES: usize = 250_000;
/// Default for [`Limits::max_product_states`]: about 100 MB of search tables, and a few seconds
/// of search for a simple regex (the deadline stops slower ones earlier).
pub const DEFAULT_MAX_PRODUCT_STATES: usize = 2_000_000;
/// Default for [`Limits::max_direct_states`].
pub const DEFAULT_MAX_DIRECT_STATES: usize = 100_000;
/// Default for [`Limits::max_direct_transitions`].
pub const DEFAULT_MAX_DIRECT_TRANSITIONS: usize = 2_000_000;
/// Default for [`Limits::max_compile_seconds`].
pub const DEFAULT_MAX_COMPILE_SECONDS: f64 = 30.0;
/// Default for [`Limits::max_guide_bytes`]: 1 GiB.
pub const DEFAULT_MAX_GUIDE_BYTES: usize = 1 << 30;
/// Default for [`Limits::max_mask_cache_bytes`]: 256 MiB, about 16,000 masks of a 128k
/// vocabulary.
pub const DEFAULT_MAX_MASK_CACHE_BYTES: usize = 256 << 20;
/// Default for [`Limits::prefetch_seconds`]: off, so that a compile costs what its initial state
/// costs. Worth turning on where compiles overlap other work (a serving engine compiles while
/// the prompt is prefilled) and each decoding step's mask is on the critical path:
/// `docs/design.md` §8 gives the trade-off measured on Llama 3.
pub const DEFAULT_PREFETCH_SECONDS: f64 = 0.0;
/// States of a pre-tokenizer's automaton ([`crate::pre_tokenizer::piece_machine`]). Not a
/// [`Limits`] field: the automaton is per tokenizer, and no real tokenizer comes near it
/// (33–140 states at a character boundary, a few thousand inside characters).
pub const MAX_PRE_TOKENIZER_STATES: usize = 200_000;
/// Working memory of a lazy guide for the token groups of the text states it walked last
/// (`crate::lazy::engine`): a wide text state's groups hold its ~120,000 token ids (~1 MB on a
/// 128k vocabulary), so keeping every one would make them most of the guide's memory. Groups are
/// a pure function of the text state: past this budget the cache is emptied and walks are
/// redone when needed, which changes first-visit cost, never a mask. Not charged to
/// [`Limits::max_guide_bytes`], which bounds what a guide keeps.
pub const LAZY_GROUP_CACHE_BYTES: usize = 8 << 20;

/// Bytes of slice groups (`crate::lazy::slice`) one tokenizer keeps for all its lazy guides:
/// the tokens inside a JSON string's (or `.*`'s) loop grouped by pre-tokenizer successor, up to
/// 1.8 MB (0.7 MB at the median on Qwen2) per pre-tokenizer state met inside a string. Issue
/// 17's 300 first documents meet 86 such starts on Llama 3 (37 MB on disk), 103 on o200k (61 MB)
/// and 222 on Qwen2 (126 MB: its normal form tells apart more starts); at 64 MB, Qwen2's cache
/// emptied and read its sets from disk again (265 reads instead of 196 in one round, 98 more in
/// a second). A set that several starts share (the same contents, kept once) counts once per
/// start. Emptied when full; a dropped entry costs a trie walk, or a read from the cache
/// directory, on its next use, never a different mask.
pub const SLICE_CACHE_BYTES: usize = 256 << 20;

/// Bytes of slice regions (`crate::lazy::slice::Region`) one tokenizer keeps for all its lazy
/// guides: what a sliced state's shared first-token set is keyed by, ~20 KB per pre-tokenizer
/// state a string starts from (a few dozen on Llama 3). Emptied when full; a dropped region is
/// found again on its next use (a new serial: sets keyed by the old one are no longer met,
/// never wrongly met).
pub const REGION_CACHE_BYTES: usize = 4 << 20;

/// Bytes of trie walks one tokenizer keeps for all its lazy guides, by the shape of the walked
/// text state's byte closure (`crate::lazy::engine`: a number's few states, the same in every
/// field of every schema): ~18 KB for a number's ~1,100 digit tokens on Llama 3. Emptied when full; a dropped walk is redone on its next use, identically.
pub const WALK_CACHE_BYTES: usize = 16 << 20;

/// Bytes of first-token sets one tokenizer keeps for all its lazy guides, by what decides them
/// (`crate::lazy::engine`: the byte closure of a key's, a literal's or a number's piece and the
/// liveness of the pieces after it). Emptied when full; a dropped set is found again on its
/// next use, identically.
pub const FIRST_SET_CACHE_BYTES: usize = 16 << 20;

/// Bytes one tokenizer keeps for all its lazy guides of the parts of dense masks after a token
/// that no class changes (`crate::lazy::after_class`: a string's contents with the first tokens
/// after its boundaries, ~16-32 KB each on Llama 3, a few dozen per tokenizer). Emptied when
/// full; a dropped part is made again, identically, on its next use.
pub const AFTER_CLASS_CACHE_BYTES: usize = 16 << 20;

/// Bytes of dense first-token sets one tokenizer keeps for all its lazy guides by their
/// fingerprint (`crate::lazy::engine::TokenizerParts::same_dense_set`), so that equal sets of
/// two guides are one set, and the parts of masks made of them are found by it: 16 KB a set on
/// Llama 3. Emptied when full; a dropped set costs later guides a part made again, never a
/// different mask.
pub const DENSE_SET_CACHE_BYTES: usize = 16 << 20;

/// Bytes of forbidden sets one tokenizer keeps as bitsets for all its lazy guides, beyond those
/// the tokenizer DFA holds as bitsets (`crate::lazy::engine::TokenizerParts::clear_forbidden`):
/// 16 KB a class on Llama 3. Emptied when full; a dropped bitset is made again, identically.
pub const FORBIDDEN_BITS_CACHE_BYTES: usize = 16 << 20;

/// Bytes of the rule automata one `Compiler` keeps for the grammars and recursive schemas it
/// compiles (`crate::lazy::pushdown::RuleAutomata`; a JSON schema's start rule takes ~0.1-3 MB).
/// Emptied when full; a dropped automaton is rebuilt, identically, when next needed.
pub const RULE_CACHE_BYTES: usize = 32 << 20;

/// Bytes one automaton built on demand (`crate::lazy::pushdown::PushdownDfa`: a grammar's, or a
/// regex too large to determinize up front) keeps of the states its byte steps closed to, by the
/// configurations the step moved to before closing: classes of bytes that move a state's
/// configurations alike (a string's ASCII characters, across a counted string's ~60 counts)
/// close to one state, which is then found, not closed again. Emptied when full; a dropped
/// entry is closed again, identically. Not charged to [`Limits::max_guide_bytes`].
pub const CLOSED_STEP_CACHE_BYTES: usize = 1 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_byte_dfa_states: DEFAULT_MAX_BYTE_DFA_STATES,
            max_product_states: DEFAULT_MAX_PRODUCT_STATES,
            max_direct_states: DEFAULT_MAX_DIRECT_STATES,
            max_direct_transitions: DEFAULT_MAX_DIRECT_TRANSITIONS,
            max_compile_seconds: Some(DEFAULT_MAX_COMPILE_SECONDS),
            max_guide_bytes: DEFAULT_MAX_GUIDE_BYTES,
            max_mask_cache_bytes: DEFAULT_MAX_MASK_CACHE_BYTES,
            prefetch_seconds: DEFAULT_PREFETCH_SECONDS,
        }
    }
}

impl Limits {
    /// The limits of one search, with its clock.
    pub fn search(&self, deadline: Deadline) -> SearchLimits {
        SearchLimits { max_states: self.max_product_states, max_guide_bytes: self.max_guide_bytes, deadline }
    }

    /// The size limits of an explicit token DFA.
    pub fn token_dfa(&self) -> TokenDfaLimits {
        TokenDfaLimits { max_states: self.max_direct_states, max_transitions: self.max_direct_transitions }
    }
}

/// Bytes a product state costs in a finished guide: the state pair (8), its index entry (~16
/// plus hash-table slack), its byte-edge slot (8) and mask-cache slot (8).
pub const BYTES_PER_PRODUCT_STATE: usize = 48;

/// The limits of one canonical-guide search (CartesianMerge, pre-tokenized): states
/// ([`Limits::max_product_states`]), the estimated guide size ([`Limits::max_guide_bytes`])
/// and the compile's clock.
#[derive(Clone, Copy, Debug)]
pub struct SearchLimits {
    pub max_states: usize,
    pub max_guide_bytes: usize,
    pub deadline: Deadline,
}

impl SearchLimits {
    /// `Err(LimitExceeded)` naming `max_product_states` and `what` when `count` states would
    /// exceed the limit.
    pub(crate) fn check_states(&self, count: usize, what: &str) -> Result<()> {
        if count > self.max_states {
            return Err(Error::LimitExceeded {
                limit: "max_product_states",
                value: self.max_states.to_string(),
                what: what.to_string(),
            });
        }
        Ok(())
    }

    /// `Err(LimitExceeded)` when `states` product states and `masks` byte-state masks of
    /// `mask_bytes` each would exceed `max_guide_bytes`.
    pub(crate) fn check_bytes(&self, states: usize, masks: usize, mask_bytes: usize) -> Result<()> {
        let estimate = states.saturating_mul(BYTES_PER_PRODUCT_STATE).saturating_add(masks.saturating_mul(mask_bytes));
        if estimate > self.max_guide_bytes {
            return Err(Error::LimitExceeded {
                limit: "max_guide_bytes",
                value: self.max_guide_bytes.to_string(),
                what: format!(
                    "estimated guide size: {states} product states and {masks} byte-state masks of {mask_bytes} bytes"
                ),
            });
        }
        Ok(())
    }
}

/// Size caps of an explicit token DFA ([`Limits::max_direct_states`],
/// [`Limits::max_direct_transitions`]), checked while DirectMerge rewrites and while a product
/// guide is materialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenDfaLimits {
    /// Most live states at any time.
    pub max_states: usize,
    /// Most live transitions at any time.
    pub max_transitions: usize,
}

impl TokenDfaLimits {
    /// `Err(LimitExceeded)` naming `max_direct_states` when `states` exceed the limit.
    pub(crate) fn check_states(&self, states: usize, what: &str) -> Result<()> {
        if states > self.max_states {
            return Err(Error::LimitExceeded {
                limit: "max_direct_states",
                value: self.max_states.to_string(),
                what: what.to_string(),
            });
        }
        Ok(())
    }

    /// `Err(LimitExceeded)` naming `max_direct_transitions` when `transitions` exceed the limit.
    pub(crate) fn check_transitions(&self, transitions: usize, what: &str) -> Result<()> {
        if transitions > self.max_transitions {
            return Err(Error::LimitExceeded {
                limit: "max_direct_transitions",
                value: self.max_transitions.to_string(),
                what: what.to_string(),
            });
        }
        Ok(())
    }
}

/// The wall-clock budget of one compile (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    started: Instant,
    limit: Option<Duration>,
    /// What the clock times, for the error.
    what: &'static str,
}

impl Deadline {
    /// A deadline `max_seconds` from now; `None` (or a non-finite value) means no limit.
    pub fn after_seconds(max_seconds: Option<f64>) -> Deadline {
        let limit = max_seconds.filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64);
        Deadline { started: Instant::now(), limit, what: "one compile" }
    }

    /// The same clock, timing `what` (named in the error: "wall-clock time of {what}").
    pub fn timing(self, what: &'static str) -> Deadline {
        Deadline { what, ..self }
    }

    /// No limit.
    pub fn none() -> Deadline {
        Deadline::after_seconds(None)
    }

    /// `Err(LimitExceeded)` naming `stage` once the limit has passed; tells the caller the
    /// work is long past [`long_work::LONG_AFTER`] of its call ([`long_work::notify_past`]).
    #[inline]
    pub fn check(&self, stage: &str) -> Result<()> {
        let elapsed = self.started.elapsed();
        match self.limit {
            Some(limit) if elapsed > limit => Err(self.exceeded(limit, stage)),
            _ => {
                long_work::notify_past(self.started, elapsed);
                Ok(())
            }
        }
    }

    fn exceeded(&self, limit: Duration, stage: &str) -> Error {
        Error::LimitExceeded {
            limit: "max_compile_seconds",
            value: format!("{}", limit.as_secs_f64()),
            what: format!("wall-clock time of {}; it was still in {stage}", self.what),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_before_and_fails_after_the_limit() {
        assert!(Deadline::none().check("x").is_ok());
        assert!(Deadline::after_seconds(Some(f64::INFINITY)).check("x").is_ok());
        assert!(Deadline::after_seconds(Some(60.0)).check("x").is_ok());
        let past = Deadline::after_seconds(Some(0.0));
        std::thread::sleep(Duration::from_millis(2));
        match past.check("the product search") {
            Err(Error::LimitExceeded { limit, what, .. }) => {
                assert_eq!(limit, "max_compile_seconds");
                assert!(what.contains("the product search"), "{what}");
            }
            other => panic!("{other:?}"),
        }
    }
}
