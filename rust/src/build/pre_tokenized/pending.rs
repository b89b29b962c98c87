//! The token groups of one text state whose target element is not reached yet, tested
//! against a forbidden set all at once.
//!
//! The forward element search visits a text state once per tokenizer class that reaches it —
//! on Llama 3 the contents of a JSON string are one text state reached by ~33,000 classes —
//! and each visit asks, for every group still pending, whether some token of the group is not
//! forbidden after the visiting class. Asking group by group costs a binary search per token
//! (about 60 M of them for one glaive schema). Here one pass over the pending tokens answers
//! for every group. When the `p` pending tokens are not few against the `f` forbidden ones,
//! the forbidden set is first set into a scratch bitset ([`ClassBits`]) and each test is one
//! bit; otherwise each is a lookup in the forbidden set (`O(p · log f)`).
//!
//! # Invariants
//! * `tokens` holds `(token, group)` for exactly the tokens of the groups in `groups`,
//!   ascending by token.
//! * `stamp[g] == round` exactly when group `g` was found to hold an allowed token in the
//!   current round; `dropped[g]` exactly when `g` was pending once and is not any more.

use crate::util::bitset;
use crate::util::token_set::TokenFilter;

/// How often [`PendingGroups::retain`] offers the groups it did not find to `keep`.
pub(super) const RECHECK_EVERY: u32 = 8;

/// One class's forbidden set as a bitset for the [`PendingGroups::retain`] calls of one
/// visit: the tokenizer DFA's own bitset where the class has one, else the ids set into
/// a scratch bitset when enough tokens will be tested to pay for setting and clearing them (a
/// bit test replaces a lookup: the pending groups of a wide table are tested against
/// ~30,000 classes' sets, ~7 M tests per glaive schema on Llama 3).
pub(super) struct ClassBits {
    words: Vec<u32>,
    loaded: bool,
}

impl ClassBits {
    pub(super) fn new(num_tokens: usize) -> ClassBits {
        ClassBits { words: vec![0; bitset::words_for(num_tokens)], loaded: false }
    }

    /// The bitset to test `ids` with, `None` to look each token up in `ids`; `own` is the
    /// DFA's bitset of the class, `tests` how many tokens will be tested. Call
    /// [`ClassBits::unload`] with the same `ids` before the next `load`.
    pub(super) fn load<'a>(
        &'a mut self,
        ids: &(impl TokenFilter + ?Sized),
        own: Option<&'a [u32]>,
        tests: usize,
    ) -> Option<&'a [u32]> {
        debug_assert!(!self.loaded, "unload before the next load");
        if own.is_some() {
            return own;
        }
        // Setting and clearing costs ~2 steps per id; a lookup ~10 per token.
        if tests * 4 < ids.len() {
            return None;
        }
        let words = &mut self.words;
        ids.for_each(|t| bitset::set(words, t as usize));
        self.loaded = true;
        Some(&self.words)
    }

    pub(super) fn unload(&mut self, ids: &(impl TokenFilter + ?Sized)) {
        if std::mem::take(&mut self.loaded) {
            ids.clear_from(&mut self.words);
        }
        debug_assert!(self.words.iter().all(|&w| w == 0));
    }
}

/// What makes a group's token count in [`PendingGroups::retain`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Wanted {
    /// A token outside the forbidden set (the pair constraint lets it through).
    Allowed,
    /// A token inside the forbidden set (only a piece boundary lets it through).
    Forbidden,
}

/// See the module docs.
pub(super) struct PendingGroups {
    groups: Vec<u32>,
    tokens: Vec<(u32, u32)>,
    stamp: Vec<u32>,
    round: u32,
    /// Groups no longer pending.
    dropped: Vec<bool>,
}

impl PendingGroups {
    /// The groups `(index, sorted tokens)`, all pending; `num_groups` bounds the indices.
    pub(super) fn new<'a>(groups: impl Iterator<Item = (u32, &'a [u32])>, num_groups: usize) -> PendingGroups {
        let mut ids = Vec::new();
        let mut tokens = Vec::new();
        for (g, ts) in groups {
            ids.push(g);
            tokens.extend(ts.iter().map(|&t| (t, g)));
        }
        tokens.sort_unstable();
        PendingGroups { groups: ids, tokens, stamp: vec![0; num_groups], round: 0, dropped: vec![false; num_groups] }
    }

    /// The groups `groups`, all pending, given with their `(token, group)` pairs ascending by
    /// token; `num_groups` bounds the indices.
    pub(super) fn from_sorted(groups: Vec<u32>, tokens: Vec<(u32, u32)>, num_groups: usize) -> PendingGroups {
        debug_assert!(tokens.windows(2).all(|w| w[0] < w[1]));
        PendingGroups { groups, tokens, stamp: vec![0; num_groups], round: 0, dropped: vec![false; num_groups] }
    }

    /// The tokens a [`PendingGroups::retain`] would test at most.
    pub(super) fn num_tokens(&self) -> usize {
        if self.groups.is_empty() {
            0
        } else {
            self.tokens.len()
        }
    }

    /// Calls `keep(group, found)` for the pending groups, `found` telling whether one of its
    /// tokens is absent from `except` (sorted `(token, _)` pairs) and, as `wanted` says,
    /// absent from or present in `forbidden` (tested in `forbidden_bits`, its bitset, when
    /// given); the group stays pending when `keep` returns `Ok(true)`. An error stops the
    /// visit (the groups not visited stay pending).
    ///
    /// `keep` sees every found group, but the others only every [`RECHECK_EVERY`]th round:
    /// for them `keep` can only drop a group whose target was reached some other way, which
    /// saves token scans later but costs a lookup now, and a wide text state has hundreds of
    /// groups that stay unfound through thousands of rounds.
    pub(super) fn retain<E>(
        &mut self,
        forbidden: &(impl TokenFilter + ?Sized),
        forbidden_bits: Option<&[u32]>,
        except: &[(u32, u32)],
        wanted: Wanted,
        mut keep: impl FnMut(u32, bool) -> Result<bool, E>,
    ) -> Result<(), E> {
        if self.groups.is_empty() {
            return Ok(());
        }
        self.round = self.round.wrapping_add(1);
        if self.round == 0 {
            self.stamp.fill(0);
            self.round = 1;
        }
        let round = self.round;
        let want_forbidden = wanted == Wanted::Forbidden;
        let mut any_found = false;
        for &(t, g) in &self.tokens {
            if self.stamp[g as usize] == round {
                continue;
            }
            let in_forbidden = match forbidden_bits {
                Some(bits) => bitset::contains(bits, t as usize),
                None => forbidden.contains(t),
            };
            if in_forbidden == want_forbidden
                && (except.is_empty() || except.binary_search_by_key(&t, |e| e.0).is_err())
            {
                self.stamp[g as usize] = round;
                any_found = true;
            }
        }
        let recheck = round.is_multiple_of(RECHECK_EVERY);
        if !any_found && !recheck {
            return Ok(()); // `keep` would see no group this round
        }
        let mut dropped = false;
        let mut failure = None;
        let stamp = &self.stamp;
        let dropped_groups = &mut self.dropped;
        self.groups.retain(|&g| {
            let found = stamp[g as usize] == round;
            if failure.is_some() || !(found || recheck) {
                return true;
            }
            match keep(g, found) {
                Ok(true) => true,
                Ok(false) => {
                    dropped_groups[g as usize] = true;
                    dropped = true;
                    false
                }
                Err(e) => {
                    failure = Some(e);
                    true
                }
            }
        });
        if dropped {
            let dropped_groups = &self.dropped;
            self.tokens.retain(|&(_, g)| !dropped_groups[g as usize]);
        }
        failure.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::random::SplitMix64;

    /// Rounds of random forbidden sets against a direct per-group check; groups are dropped at
    /// random, and a dropped group is never visited again.
    #[test]
    fn retain_reports_exactly_the_groups_with_an_allowed_token() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..50 {
            let num_groups = 1 + rng.below(40);
            let groups: Vec<Vec<u32>> = (0..num_groups)
                .map(|_| {
                    let mut ts: Vec<u32> = (0..1 + rng.below(4)).map(|_| rng.below(200) as u32).collect();
                    ts.sort_unstable();
                    ts.dedup();
                    ts
                })
                .collect();
            let mut pending =
                PendingGroups::new(groups.iter().enumerate().map(|(g, ts)| (g as u32, ts.as_slice())), num_groups);
            let mut alive = vec![true; num_groups];
            for round in 0..20 {
                let wanted = if round % 3 == 2 { Wanted::Forbidden } else { Wanted::Allowed };
                let forbidden: Vec<u32> = (0..200).filter(|_| rng.one_in(2)).collect();
                let except: Vec<(u32, u32)> = (0..200).filter(|_| rng.one_in(8)).map(|t| (t, 0)).collect();
                // Half the rounds test membership through a bitset of the forbidden set.
                let bits = rng.one_in(2).then(|| {
                    let mut words = vec![0u32; bitset::words_for(200)];
                    forbidden.iter().for_each(|&t| bitset::set(&mut words, t as usize));
                    words
                });
                let mut seen = Vec::new();
                let recheck = pending.round.wrapping_add(1).is_multiple_of(RECHECK_EVERY);
                pending
                    .retain::<()>(&forbidden[..], bits.as_deref(), &except, wanted, |g, allowed| {
                        let want = groups[g as usize].iter().any(|t| {
                            forbidden.binary_search(t).is_ok() == (wanted == Wanted::Forbidden)
                                && except.binary_search_by_key(t, |e| e.0).is_err()
                        });
                        assert_eq!(allowed, want, "group {g}");
                        seen.push(g);
                        Ok(!rng.one_in(4))
                    })
                    .unwrap();
                // Every found group is offered; the others only on a recheck round.
                let found = |g: u32| {
                    groups[g as usize].iter().any(|t| {
                        forbidden.binary_search(t).is_ok() == (wanted == Wanted::Forbidden)
                            && except.binary_search_by_key(t, |e| e.0).is_err()
                    })
                };
                let mut expected: Vec<u32> =
                    (0..num_groups as u32).filter(|&g| alive[g as usize] && (recheck || found(g))).collect();
                seen.sort_unstable();
                assert_eq!(seen, expected, "round {round}, recheck {recheck}");
                expected.retain(|g| pending.groups.contains(g));
                for (g, alive) in alive.iter_mut().enumerate() {
                    *alive = pending.groups.contains(&(g as u32));
                }
                assert!(pending.tokens.iter().all(|&(_, g)| alive[g as usize]));
            }
        }
    }
}
