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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::vocab::Vocabulary;
    use crate::{Compiler, Limits};

    /// `write_cached_mask` writes what `write_mask` computed, only once it is cached, leaves
    /// `out` alone otherwise, and writes EOS alone once the matcher has terminated.
    #[test]
    fn a_cached_mask_is_written_only_once_cached() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/python/propertok/data/mistral7b-tokenizer.json");
        let json = std::fs::read_to_string(path).expect("the embedded Mistral-7B tokenizer");
        let vocab = Arc::new(Vocabulary::from_json(&json, None, None).expect("vocabulary"));
        let guide = Arc::new(Compiler::new(vocab, Limits::default()).compile_regex_lazy("ab|cd").unwrap());
        let words = guide.mask_words();
        let mut m = Matcher::new(guide.clone());
        let mut uncached = 0;
        loop {
            // The compile may have filled the first state's mask.
            let mut untouched = vec![u32::MAX; words];
            if !m.write_cached_mask(&mut untouched) {
                uncached += 1;
                assert!(untouched.iter().all(|&w| w == u32::MAX), "state {}: `out` written", m.state());
            }
            let mut computed = vec![0; words];
            m.write_mask(&mut computed).unwrap();
            let mut cached = vec![u32::MAX; words];
            assert!(m.write_cached_mask(&mut cached), "state {}: cached", m.state());
            assert_eq!(cached, computed, "state {}", m.state());
            if m.is_accepting() {
                break;
            }
            let eos = guide.eos_token_ids();
            let next = bitset::iter_ones(&computed).map(|t| t as u32).find(|t| !eos.contains(t)).unwrap();
            assert!(m.accept_token(next).unwrap());
        }
        assert!(uncached > 0, "the premise: a state not cached before its first mask");
        assert!(m.accept_token(guide.eos_token_ids()[0]).unwrap() && m.is_terminated());
        let mut terminated = vec![u32::MAX; words];
        assert!(m.write_cached_mask(&mut terminated));
        let eos: Vec<u32> = bitset::iter_ones(&terminated).map(|t| t as u32).collect();
        assert_eq!(eos, guide.eos_token_ids());
    }
}
