//! A wall-clock budget for one compile (`max_compile_seconds`).
//!
//! Size limits (`max_byte_dfa_states`, `max_product_states`, ...) stop most runaway
//! constructions, but a construction can also be slow while staying small (a byte DFA whose
//! states each walk a 128k-token trie, a product search whose states each test thousands of
//! token groups). A [`Deadline`] is created when a compile starts and checked at the top of every
//! loop whose iterations are bounded work (one product state, one byte state, one merge), so a
//! compile stops within one such iteration of the limit — typically well under a millisecond.
//!
//! The one step it cannot interrupt is regex-automata's determinisation, which is bounded by
//! the byte DFA's state budget instead (see `bytedfa`). The tokenizer DFA, built once per
//! `Compiler`, is not charged to any compile.
//!
//! Reading the clock costs ~20 ns; checks are placed where an iteration costs microseconds.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// See the module docs.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    started: Instant,
    limit: Option<Duration>,
}

impl Deadline {
    /// A deadline `max_seconds` from now; `None` (or a non-finite value) means no limit.
    pub fn after_seconds(max_seconds: Option<f64>) -> Deadline {
        let limit = max_seconds.filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64);
        Deadline { started: Instant::now(), limit }
    }

    /// No limit.
    pub fn none() -> Deadline {
        Deadline::after_seconds(None)
    }

    /// `Err(LimitExceeded)` naming `stage` once the limit has passed.
    #[inline]
    pub fn check(&self, stage: &str) -> Result<()> {
        match self.limit {
            Some(limit) if self.started.elapsed() > limit => Err(Error::LimitExceeded {
                limit: "max_compile_seconds",
                value: format!("{}", limit.as_secs_f64()),
                what: format!("wall-clock time of one compile; it was still in {stage}"),
            }),
            _ => Ok(()),
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
