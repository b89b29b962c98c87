//! Lazy canonical guides: states built the first time a decoder reaches them, memoized in the
//! guide, which every matcher and thread shares.
//!
//! An eager guide (`crate::build`) searches every relevant product state of the regex and the
//! tokenizer before the first mask: ~47,000 states for a JSON schema on Llama 3, of which
//! decoding a document visits a few dozen. Here the unit of work is the *text state* (regex
//! state × pre-tokenizer state × added-token prefix, [`text`]): its tokens are walked once and
//! grouped by successor, whether a successor can still reach acceptance is answered by a
//! depth-first search that stops at the first way out and records what it learns as facts
//! (`engine`), and a guide state's mask is made from its members' first tokens minus the last
//! token's forbidden set (`automaton`). The tokenizer's class enters a mask only through that
//! forbidden set, so nothing is ever computed per (text state, class) pair up front.
//!
//! The masks are those of the eager construction, bit for bit: both are the exact canonical
//! masks (`docs/design.md` §1). The differential tests hold them to it.
//!
//! # Concurrency
//! The tables are append-only ([`crate::util::concurrent`]): reads take no lock, a lock is held
//! only to intern a key, and expensive work (trie walks, searches) runs on immutable inputs
//! outside any lock. Two threads may compute the same entry; both compute the same value and
//! the first one stored is kept, so masks do not depend on the interleaving.
//!
//! # Prefetching
//! A compile may go on, for `Limits::prefetch_seconds` (off by default), filling the first-token
//! sets of the text states a decoder can reach next, breadth first (`Engine::prefetch`). These
//! are the fills a mask would do there, so masks never change; only where a first visit's cost
//! is paid moves (`docs/design.md` §8 has the trade-off).
//!
//! # Limits
//! `max_product_states` bounds the text states, the states, and the nodes one search visits;
//! `max_guide_bytes` bounds the memo's memory. Past either, the call that needed more fails with
//! `LimitExceeded` naming it; the guide keeps what it built and stays usable along paths it
//! already knows.

pub(crate) mod after_class;
pub(crate) mod automaton;
pub(crate) mod engine;
pub(crate) mod groups;
pub(crate) mod horizon;
pub mod pushdown;
pub(crate) mod shifted_walk;
pub(crate) mod slice;
pub(crate) mod slice_store;
pub mod text;

pub use engine::TokenizerParts;

#[cfg(test)]
mod tests;
