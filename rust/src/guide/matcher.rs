//! A per-sequence cursor over a [`Guide`]: the current state, the states visited (for
//! `rollback`, e.g. after rejected speculative tokens) and whether EOS was accepted.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::guide::Guide;
use crate::util::bitset;

pub struct Matcher {
    guide: Arc<Guide>,
    /// `history[0]` is the initial state; one entry per accepted token after it.
    history: Vec<u32>,
    terminated: bool,
}

impl Matcher {
    pub fn new(guide: Arc<Guide>) -> Matcher {
        let initial = guide.initial_state();
        Matcher { guide, history: vec![initial], terminated: false }
    }

    pub fn guide(&self) -> &Arc<Guide> {
        &self.guide
    }

    pub fn state(&self) -> u32 {
        *self.history.last().expect("history starts with the initial state")
    }

    pub fn num_accepted_tokens(&self) -> usize {
        self.history.len() - 1
    }

    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    pub fn is_accepting(&self) -> bool {
        !self.terminated && self.guide.is_final(self.state())
    }

    /// Advances on `token`; `Ok(false)` (state unchanged) when it is not allowed.
    pub fn accept_token(&mut self, token: u32) -> Result<bool> {
        if token as usize >= self.guide.vocab_size() {
            return Err(Error::InvalidArgument(format!(
                "token id {token} is out of range (vocab_size is {})",
                self.guide.vocab_size()
            )));
        }
        if self.terminated {
            // The mask of a terminated matcher is EOS only (a finished row of a batch keeps
            // sampling EOS as padding), so EOS is accepted — and changes nothing, not even the
            // count of accepted tokens; anything else is refused.
            return Ok(self.guide.eos_token_ids().contains(&token));
        }
        // One lookup decides both whether the token is allowed and where it leads.
        let Some(next) = self.guide.step(self.state(), token)? else {
            return Ok(false);
        };
        if self.guide.eos_token_ids().contains(&token) {
            self.terminated = true;
        }
        self.history.push(next);
        Ok(true)
    }

    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.num_accepted_tokens() {
            return Err(Error::InvalidArgument(format!(
                "cannot roll back {n} tokens: only {} were accepted",
                self.num_accepted_tokens()
            )));
        }
        if n > 0 {
            self.history.truncate(self.history.len() - n);
            self.terminated = false;
        }
        Ok(())
    }

    pub fn reset(&mut self) {
        self.history.truncate(1);
        self.terminated = false;
    }

    /// Writes the allowed-token mask into `out`; a terminated matcher allows only EOS.
    pub fn write_mask(&self, out: &mut [u32]) -> Result<()> {
        if self.terminated {
            out.fill(0);
            for &e in self.guide.eos_token_ids() {
                bitset::set(out, e as usize);
            }
            Ok(())
        } else {
            self.guide.copy_mask(self.state(), out)
        }
    }

    /// [`Matcher::write_mask`] when the mask is cached (or the matcher terminated): `true`; else
    /// `false` with `out` untouched. Computes nothing (see [`Guide::write_cached_mask`]).
    pub fn write_cached_mask(&self, out: &mut [u32]) -> bool {
        if self.terminated {
            self.write_mask(out).is_ok()
        } else {
            self.guide.write_cached_mask(self.state(), out)
        }
    }

    pub fn allowed_tokens(&self) -> Result<Vec<u32>> {
        let mut m = vec![0u32; self.guide.mask_words()];
        self.write_mask(&mut m)?;
        Ok(bitset::iter_ones(&m).map(|t| t as u32).collect())
    }

    pub fn forced_tokens(&self) -> Result<Vec<u32>> {
        if self.terminated {
            return Ok(Vec::new());
        }
        self.guide.forced_tokens(self.state())
    }
}
