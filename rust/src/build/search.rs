//! What the canonical searches share: a registry of discovered states with its work queue and
//! state limit, and the test "does some token of this group survive the forbidden set".

use std::collections::VecDeque;
use std::hash::Hash;

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::limits::SearchLimits;
use crate::util::token_set::TokenFilter;

/// Whether some token of `tokens` is absent from `forbidden` and from `except` (sorted
/// `(token, _)` pairs).
#[inline]
pub(crate) fn some_allowed(tokens: &[u32], forbidden: &(impl TokenFilter + ?Sized), except: &[(u32, u32)]) -> bool {
    if except.is_empty() && tokens.len() > forbidden.len() {
        return true;
    }
    tokens.iter().any(|&t| !forbidden.contains(t) && except.binary_search_by_key(&t, |e| e.0).is_err())
}

/// Items with ids, discovered once each, and a work queue of the newly discovered.
pub(crate) struct Registry<K> {
    pub(crate) items: Vec<K>,
    pub(crate) index: FxHashMap<K, u32>,
    pub(crate) queue: VecDeque<u32>,
    limits: SearchLimits,
    what: &'static str,
}

impl<K: Copy + Eq + Hash> Registry<K> {
    /// An empty registry whose size is checked against `limits` (`max_product_states`), `what`
    /// naming its items in the error.
    pub(crate) fn new(limits: &SearchLimits, what: &'static str) -> Registry<K> {
        Registry { items: Vec::new(), index: FxHashMap::default(), queue: VecDeque::new(), limits: *limits, what }
    }
    /// The id of `k`, registered (and queued) now if it is new.
    pub(crate) fn add(&mut self, k: K) -> Result<u32> {
        if let Some(&id) = self.index.get(&k) {
            return Ok(id);
        }
        self.limits.check_states(self.items.len() + 1, self.what)?;
        let id = self.items.len() as u32;
        self.items.push(k);
        self.index.insert(k, id);
        self.queue.push_back(id);
        Ok(id)
    }

    /// For a pending group with target `k` (the callback of `PendingGroups::retain`):
    /// whether it stays pending — no, once `k` is registered, or registered now because the
    /// group has a usable token (`found`).
    pub(crate) fn keep_pending(&mut self, k: K, found: bool) -> Result<bool> {
        if self.index.contains_key(&k) {
            return Ok(false);
        }
        if found {
            self.add(k)?;
            return Ok(false);
        }
        Ok(true)
    }
}
