//! The shared memo of a lazy guide: text states, which search nodes can still reach acceptance
//! (*facts*), and each text state's first tokens; plus a bounded cache of token groups.
//!
//! A search *node* is `(text state, tokenizer side, split node)`: the element of
//! `crate::build::pre_tokenized` (and, without a pre-tokenizer, CartesianMerge's product state
//! `(q1, q2)`). A node is *live* when some canonical continuation from it reaches acceptance.
//! Liveness is a least fixpoint over a graph the engine never builds in full: [`Engine::live`]
//! answers one node with a depth-first search that stops at the first live node it meets
//! (Tarjan's algorithm on the fly: every node still on its stack reaches the current one, so a
//! live find makes them all live, and a strongly connected component completed without one is
//! dead). Every answer is recorded as a fact and reused by later searches, from any thread.
//!
//! # Invariants
//! * Facts are definitive: a node recorded live has a canonical path to acceptance, a node
//!   recorded dead has none. Searches that run at the same time may record the same facts.
//! * `first_tokens(z, u)` is exactly the set of tokens whose successor from `(z, ·, u)` inside
//!   the piece is live; masks are made from it, so a decoder that follows them can always finish.
//! * Token groups are a pure function of the text state. They are the memo's bulk (a wide text
//!   state's groups hold ~120,000 token ids, ~1 MB), so they live in a cache of
//!   [`LAZY_GROUP_CACHE_BYTES`] that is emptied when full instead of in the memo: dropping them
//!   costs a trie walk, never a different answer.
//!
//! # Finding live nodes cheaply
//! A full search needs the token groups of every text state it expands: one trie walk each, a few
//! ms for a JSON string's contents on a 128k vocabulary. Almost every node a mask asks about is
//! live the obvious way (end the piece, close what is open), and most of the rest are dead the
//! obvious way, so shortcuts come first; a node they cannot settle goes to the full search:
//! * [`Engine::probe`] searches the successors that follow a shortest way to acceptance from each
//!   node's text ([`TextSpace::shortest_way`], memoized per text state as the step to take).
//! * A way search that exhausts every text state reachable from a node's text without meeting
//!   acceptance proves the node dead ([`Engine::stuck`]): no token sequence can be completed
//!   when no text can. Inside key literals on o200k, a boundary between two letters leads to such
//!   text states (the piece may end only before a non-letter, the literal needs a letter).
//! * A piece start whose text's way is *clean* (no added token's content on it, no special
//!   token) is live without a probe, on a tokenizer where every piece of text has canonical
//!   tokens ([`Engine::live_by_clean_way`]): the pieces after a boundary are tokenized apart from
//!   what came before, and the way's text is one the engine spells.
//! * A class node whose pair condition forbids every token its text allows next, and whose
//!   boundaries lead nowhere, is dead without a search ([`Engine::dead_by_pairs`]): the many
//!   non-canonical prefixes of a key's or a literal's canonical token (` t`, ` tr` before ` true`).
//! * [`Engine::first_tokens`] finds once per target text state a way out shared by its class
//!   nodes ([`Engine::exit`]): a boundary there that leads to a live piece start (then every
//!   class node there is live), or the tokens along a shortest way whose successors are live
//!   (then every class node whose pair condition allows one is live). Only the rest are searched,
//!   and no fact is stored per group.
//!
//! Along real documents on Llama 3 these took the worst mask from 7-37 s (searches that went deep
//! into lone-token splits and wide regions before trying the way out) to ~10-25 ms, the first
//! trie walk of each new wide text state; slices ([`crate::lazy::slice`]) and shared exits took
//! that to ~1 ms (`docs/design.md` §8).
//!
//! # Costs
//! One trie walk per text state whose groups a search or a mask needs (a few µs for a narrow
//! state, 2-6 ms for a JSON string's contents on a 128k vocabulary, or ~0.15 ms when its regex
//! state takes a slice and only the exit tokens are walked; none when a text state of any guide
//! of the tokenizer had the same byte closure, see [`Engine::walk_or_reuse`]); a search visits the
//! nodes between its start and the nearest live node, groups in order of the regex's distance to
//! acceptance. Limits: `max_product_states` bounds the text states and the nodes of one search,
//! `max_guide_bytes` the memo's bytes (text states, facts, first-token sets, ways), and
//! `max_compile_seconds` the wall time of one call of the guide ([`Engine::timed`]: a mask, a
//! step, the initial state), checked before each trie walk and each node a search adds: the node
//! limit alone let one mask search for ~80 s (2,000,000 nodes of a few text states, one token
//! class each).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::after_class::AfterClassCache;
use super::groups::{Group, GroupCache, Groups, Mapped, Walked};
use super::horizon::{self, StandIns};
use super::shifted_walk::{self, RecentWalk, RecentWalks, WalkRecord, WalkedStates};
use super::slice::{Hub, Region, SliceInputs, SliceUse, Slices, NO_HUB, SLICE_PATTERNS};
use super::slice_store::{SliceStore, StoreInputs};
use super::text::{ClosureBounds, Step, TextId, TextKey, TextSpace, WaySearch, WideState};
use crate::error::{Error, Result};
use crate::limits::Deadline;
use crate::pre_tokenizer::normal_form::NormalForm;
use crate::pre_tokenizer::piece_table::PieceTable;
use crate::pre_tokenizer::text_automaton::ContentTrie;
use crate::regex::byte_dfa::DEAD;
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::lone_tokens::{LoneSplits, ROOT};
use crate::tokenizer_dfa::side::{class_or_lone, mark_allowed, LONE, NONE, START};
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};
use crate::util::byte_set::ByteSet;
use crate::util::concurrent::{BoundedCache, Interner, ShardedMap};
use crate::util::long_work;
use crate::util::token_set::TokenSet;

/// Sorts distinct token ids below `words * 32`: a long list (a number position's ~1,100 digit
/// tokens on Llama 3) through a bitset, one bit set per id and one pass over the words, at about
/// a tenth of a comparison sort's instructions.
fn sort_token_ids(tokens: &mut Vec<u32>, words: usize) {
    if tokens.len() < SORT_BY_BITSET_MIN {
        return tokens.sort_unstable();
    }
    let mut bits = vec![0u32; words];
    tokens.iter().for_each(|&t| crate::util::bitset::set(&mut bits, t as usize));
    tokens.clear();
    tokens.extend(crate::util::bitset::iter_ones(&bits).map(|t| t as u32));
}

/// The union of two sorted lists of distinct ids with no id in common, sorted.
fn merge_sorted(a: Vec<u32>, b: &[u32]) -> Vec<u32> {
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// A search node (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) struct Node {
    pub(crate) text: TextId,
    /// A tokenizer-DFA state (a class, or inside a byte-fallback character), [`START`] or
    /// [`LONE`].
    pub(crate) side: u32,
    /// A lone-token split node ([`NONE`], [`ROOT`] or deeper).
    pub(crate) split: u32,
}

impl Node {
    /// The node at a piece start in text state `text`: after a boundary, or where text starts
    /// afresh with a pre-tokenizer.
    pub(crate) fn piece_start(text: TextId) -> Node {
        Node { text, side: START, split: ROOT }
    }
}

/// How a node's tokenizer side constrains the next token.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Side {
    /// At a piece start: no pair constraint, lone tokens allowed.
    PieceStart,
    /// After a lone token: a boundary must come first.
    AfterLone,
    /// After a token of this class: the pair condition inside the piece, or a boundary.
    InPiece(u32),
    /// Inside a byte-fallback character (this tokenizer-DFA state): byte tokens only.
    InChar(u32),
}

/// Trie walks by the shape of a text state's byte closure ([`TextSpace::byte_closure`]): per
/// token, `(closure number of its target, class << 32 | token)`, sorted.
type WalksByShape = BoundedCache<Box<[u32]>, Arc<[(u32, u64)]>>;

/// What every lazy guide of one tokenizer shares (made once per `Compiler`).
pub struct TokenizerParts {
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) tok: Arc<TokenizerDfa>,
    /// Every token a guide may use except byte-fallback tokens.
    pub(crate) trie: TokenTrie,
    pub(crate) splits: LoneSplits,
    /// The first byte of each token of `splits.next_tokens(u)`, at `[u]` (see
    /// [`TokenizerParts::split_first_byte`]).
    split_first_bytes: Box<[Box<[u8]>]>,
    /// `None` without a pre-tokenizer.
    pub(crate) pieces: Option<Arc<PieceTable>>,
    pub(crate) contents: Arc<ContentTrie>,
    /// The normalizer's automaton (`None` without one): a component of every text state.
    pub(crate) normal: Option<&'static NormalForm>,
    /// The lone tokens (no class) of `trie`, as a bitset.
    pub(crate) lone: Box<[u32]>,
    /// The tokens of `trie`, as a bitset: no other token (byte-fallback ones aside) is ever
    /// allowed.
    pub(crate) usable: Box<[u32]>,
    pub(crate) slices: Slices,
    /// Walks of unsliced text states with a small byte closure (see [`Engine::walk_or_reuse`]).
    walks: WalksByShape,
    /// First-token sets of unsliced text states with a small byte closure, by what decides
    /// them (see [`Engine::shared_first_key`]).
    first_sets: BoundedCache<Box<[u32]>, Arc<TokenSet>>,
    /// The parts of dense masks after a token that no class changes (see
    /// [`crate::lazy::after_class`]).
    pub(crate) after_class: AfterClassCache,
    /// Dense first-token sets by their words' fingerprint ([`TokenizerParts::same_dense_set`]).
    dense_sets: BoundedCache<u64, Arc<TokenSet>>,
    /// Forbidden sets of classes as bitsets, made on first use (see
    /// [`TokenizerParts::clear_forbidden`]).
    forbidden_bits: BoundedCache<u32, Arc<[u32]>>,
    /// The bytes some token spells (every byte with byte-fallback tokens): what a text may hold
    /// (see `crate::lazy::pushdown::PushdownDfa::new`).
    pub(crate) text_bytes: [bool; 256],
    /// Whether a clean way proves a piece start live ([`Engine::live_by_clean_way`]): the
    /// tokenizer has a pre-tokenizer, no byte fallback, a usable single-byte token with a class
    /// for every byte valid UTF-8 holds (the pre-tokenizer's automaton reads nothing else), and
    /// no merge that makes a token never allowed, so that every piece of text outside an added
    /// token's content has its canonical tokens among the usable ones. Falcon's misses 28 bytes
    /// (`\x0b` among them), whose text has no canonical tokens at all.
    pub(crate) clean_ways_prove_piece_starts: bool,
    /// Tokens that recently proved a node live in a search of some guide, most recent first
    /// (see [`Engine::hinted_live`]). Read and written without a lock: a hint is checked
    /// before it is used, so a mix of two threads' writes is as good as either.
    hints: [AtomicU32; HINTS],
}

impl TokenizerParts {
    /// `trie` holds every token a guide may use but byte-fallback ones; `lone_tokens` those of
    /// them without a class. With a `cache_dir`, the slices' group sets and tables are kept
    /// there too, so that other processes read them instead of walking them (see
    /// `lazy/slice_store.rs`); `None` keeps them in memory only.
    #[allow(clippy::too_many_arguments)] // the tables of one tokenizer, each built elsewhere
    pub fn new(
        vocab: Arc<Vocabulary>,
        tok: Arc<TokenizerDfa>,
        trie: TokenTrie,
        splits: LoneSplits,
        pieces: Option<Arc<PieceTable>>,
        contents: ContentTrie,
        normal: Option<&'static NormalForm>,
        lone_tokens: &[u32],
        cache_dir: Option<&std::path::Path>,
    ) -> Result<TokenizerParts> {
        let words = crate::util::bitset::words_for(vocab.vocab_size());
        let mut usable = vec![0u32; words].into_boxed_slice();
        // One pass: the usable tokens, and the bytes they spell (every byte with byte fallback).
        let mut text_bytes = [tok.fallback_tokens().is_some(); 256];
        let mut byte_tokens = [false; 256];
        trie.for_each_token(|t| {
            crate::util::bitset::set(&mut usable, t as usize);
            let bytes = vocab.token_bytes(t);
            bytes.iter().for_each(|&b| text_bytes[b as usize] = true);
            if let ([b], false) = (bytes, tok.class_of(t) == NO_CLASS) {
                byte_tokens[*b as usize] = true;
            }
        });
        let clean_ways_prove_piece_starts = pieces.is_some()
            && tok.fallback_tokens().is_none()
            && (0..=255u8).filter(|&b| b < 0xC0 || (0xC2..=0xF4).contains(&b)).all(|b| byte_tokens[b as usize])
            && vocab.merges().iter().all(|m| !vocab.is_never_allowed(m.merged));
        let mut lone = vec![0u32; words].into_boxed_slice();
        for &t in lone_tokens {
            crate::util::bitset::set(&mut lone, t as usize);
        }
        let contents = Arc::new(contents);
        let store = cache_dir.map(|dir| {
            let inputs = StoreInputs {
                vocab: &vocab,
                tok: &tok,
                pieces: pieces.as_deref(),
                contents: &contents,
                normal,
                patterns: &SLICE_PATTERNS,
            };
            SliceStore::new(dir, inputs)
        });
        let slices = Slices::new(&trie, &vocab, &tok, pieces.clone(), contents.clone(), normal, store)?;
        let hints = [const { AtomicU32::new(NO_HINT) }; HINTS];
        let split_first_bytes = (0..splits.num_nodes() as u32)
            .map(|u| {
                splits.next_tokens(u).iter().map(|&(t, _)| vocab.token_bytes(t).first().copied().unwrap_or(0)).collect()
            })
            .collect();
        Ok(TokenizerParts {
            vocab,
            tok,
            trie,
            splits,
            split_first_bytes,
            pieces,
            contents,
            normal,
            lone,
            usable,
            slices,
            walks: BoundedCache::new(crate::limits::WALK_CACHE_BYTES),
            first_sets: BoundedCache::new(crate::limits::FIRST_SET_CACHE_BYTES),
            after_class: AfterClassCache::new(),
            dense_sets: BoundedCache::new(crate::limits::DENSE_SET_CACHE_BYTES),
            forbidden_bits: BoundedCache::new(crate::limits::FORBIDDEN_BITS_CACHE_BYTES),
            text_bytes,
            clean_ways_prove_piece_starts,
            hints,
        })
    }

    /// The first byte of the `i`-th token of `splits.next_tokens(u)` (a split's tokens are
    /// merges of base symbols, never empty). Why kept apart: a first-token set tests the 318
    /// split starters of a piece start on Llama 3 against its regex state's bytes, and reading
    /// each token's bytes for that was two dependent loads a starter, most of them cache
    /// misses: about half of `first_tokens`' own time in a wall-time profile (`perf`) of narrow
    /// first visits.
    #[inline]
    pub(crate) fn split_first_byte(&self, u: u32, i: usize) -> u8 {
        self.split_first_bytes[u as usize][i]
    }

    /// Clears the forbidden next tokens of `class` from the dense mask `out`.
    ///
    /// Why a cache: the tokenizer DFA keeps a class's set as a bitset only past 4 ids a word
    /// (443 of Llama 3's 36,464 classes); the others are cleared id by id, through a rank
    /// table. At a string's contents every mask clears the set of its last token's class, and
    /// sets of a few thousand ids made that 7.8 % of a string document's instructions. A set of
    /// at least half an id a word is made a bitset on first use and kept for every guide.
    pub(crate) fn clear_forbidden(&self, class: u32, out: &mut [u32]) {
        self.with_forbidden_bits(class, out.len(), |bits| match bits {
            Some(bits) => crate::util::bitset::clear_all(out, bits),
            None => self.tok.clear_forbidden(class, out),
        })
    }

    /// Calls `f` with the forbidden next tokens of `class` as a bitset of `words` words where
    /// [`TokenizerParts::clear_forbidden`] clears them as one (the tokenizer DFA's, or made
    /// here and kept), else with `None` (a few ids a word, cleared id by id).
    pub(crate) fn with_forbidden_bits<R>(&self, class: u32, words: usize, f: impl FnOnce(Option<&[u32]>) -> R) -> R {
        let tok = &*self.tok;
        if let Some(bits) = tok.forbidden_bits(class) {
            return f(Some(bits));
        }
        let set = tok.forbidden(class);
        if set.len() * 2 < words {
            return f(None);
        }
        let bits = self.forbidden_bits.get(&class).unwrap_or_else(|| {
            let mut bits = vec![0u32; words];
            set.for_each(|t| crate::util::bitset::set(&mut bits, t as usize));
            self.forbidden_bits.insert(class, bits.into(), words * 4)
        });
        f(Some(&bits))
    }

    /// `set`, or an equal dense set a guide of the tokenizer made before (the first kept of
    /// those with its fingerprint).
    ///
    /// Why: the parts of masks after a class ([`crate::lazy::after_class`]) are found by
    /// their sets' addresses, and a dense set that no shared key names (the piece start after a
    /// boundary inside a string, on Llama 3) was made anew by each guide: on issue 18's 40
    /// schemas, 4,827 of the 5,000 sets after a boundary behind dense masks had no key. Equal
    /// sets made one set, they are found by the same key; a set's fingerprint and comparison
    /// cost two passes over its words, once per text state per guide, beside the trie walk and
    /// searches that made it.
    pub(crate) fn same_dense_set(&self, set: Arc<TokenSet>) -> Arc<TokenSet> {
        let Some(words) = set.as_dense() else { return set };
        let kept = self.dense_sets.insert(crate::util::bitset::fingerprint(words), set.clone(), set.heap_bytes() + 64);
        // Another set with the same fingerprint is kept where they differ.
        if Arc::ptr_eq(&kept, &set) || *kept == *set {
            kept
        } else {
            set
        }
    }

    /// The same parts without slices: every text state is walked in full.
    #[cfg(test)]
    pub(crate) fn without_slices(mut self) -> TokenizerParts {
        self.slices = Slices::none();
        self
    }

    pub(crate) fn slice_inputs(&self) -> SliceInputs<'_> {
        SliceInputs {
            trie: &self.trie,
            vocab: &self.vocab,
            tok: &self.tok,
            words: crate::util::bitset::words_for(self.vocab.vocab_size()),
            // Without lone tokens (SentencePiece) the splits have no root.
            root_conts: if self.splits.num_nodes() > ROOT as usize { self.splits.next_tokens(ROOT) } else { &[] },
            splits: &self.splits,
        }
    }
}

/// A way out of a target text state `to` shared by the class nodes `(to, c, NONE)` there, so
/// that a first-token set does not search each of them (a JSON string's contents have ~30,000
/// groups over ~150 targets, most of which may not end a piece: inside a character, before
/// more letters).
enum Exit {
    /// A boundary may come next and leads to a live piece start: every class node is live.
    Boundary,
    /// These tokens spell a prefix of a shortest way to acceptance and have live successors:
    /// a class node is live when its pair condition allows one of them (when none does, the
    /// node may still be live; a search decides).
    Tokens(Vec<u32>),
}

/// Where a search is in a node's successors.
#[derive(Clone, Copy, Default)]
struct Cursor {
    phase: u8,
    at: u32,
}

/// See the module docs.
pub(crate) struct Engine {
    parts: Arc<TokenizerParts>,
    space: TextSpace,
    texts: Interner<TextKey>,
    groups: GroupCache,
    facts: ShardedMap<Node, bool>,
    first: ShardedMap<(TextId, u32), Arc<TokenSet>>,
    /// Byte-fallback tokens with a live successor, per text state and
    /// [`TokenizerDfa::fallback_context`] (see [`Engine::fallback_moves`]).
    ///
    /// [`TokenizerDfa::fallback_context`]: crate::tokenizer_dfa::TokenizerDfa::fallback_context
    fallback: ShardedMap<(TextId, u32), Arc<[u32]>>,
    /// No moves, shared (a tokenizer without byte fallback asks at every mask).
    no_fallback_moves: Arc<[u32]>,
    /// The step a shortest way to acceptance takes from a text state (see [`Engine::step_from`]).
    ways: ShardedMap<TextKey, Step>,
    /// Whether the way from a text state is clean (see [`Engine::clean_way`]).
    clean_ways: ShardedMap<TextKey, bool>,
    /// Per regex state, how it takes a slice's tokens (a loop or a count), if it does (see
    /// [`crate::lazy::slice`]).
    slice_uses: ShardedMap<u32, Option<SliceUse>>,
    /// Per regex state of a counted string, the states its liveness may be read from
    /// ([`Engine::live_by_horizon`]), and the counted positions whose strings were tabled.
    count_stand_ins: ShardedMap<u32, StandIns>,
    /// Per later position of a counted string that a use's table reaches, that use and how many
    /// characters on ([`SliceUse::later_positions`]).
    later_positions: ShardedMap<u32, (SliceUse, u32)>,
    counts_tabled: ShardedMap<u32, ()>,
    /// Counted positions met first in their strings, not tabled (the last [`FIRST_POSITIONS`]).
    first_positions: std::sync::Mutex<Vec<u32>>,
    any_stand_ins: AtomicBool,
    by_horizon: AtomicUsize,
    way_search_failures: AtomicUsize,
    /// Nodes proved live by a hint ([`Engine::hinted_live`]).
    hinted: AtomicUsize,
    /// Piece starts proved live by a clean way ([`Engine::live_by_clean_way`]), and of them by
    /// a grammar's shortest text.
    by_clean_way: AtomicUsize,
    by_shortest_text: AtomicUsize,
    /// First-token sets made as the union of their threads' ([`Engine::first_tokens_of_threads`]).
    thread_unions: AtomicUsize,
    /// Ways found by a search, and along bytes nearest to acceptance ([`Engine::nearest_chain`]).
    way_searches: AtomicUsize,
    nearest_chains: AtomicUsize,
    /// Text states whose groups came from a slice.
    sliced: AtomicUsize,
    /// Text states whose walk came from [`TokenizerParts::walks`].
    walks_reused: AtomicUsize,
    /// Large walks kept for later states to take shifted ([`Engine::walk_shifted_or`]).
    recent_walks: RecentWalks,
    /// One byte of each of the regex's byte classes.
    class_bytes: Vec<u8>,
    /// Text states whose walk was an earlier one's shifted.
    walks_shifted: AtomicUsize,
    /// Walks of at least this many tokens are kept as candidates
    /// ([`shifted_walk::SHIFT_MIN_TOKENS`]; tests on small vocabularies lower it).
    shift_min_tokens: AtomicUsize,
    /// First-token sets taken from [`TokenizerParts::first_sets`].
    first_sets_reused: AtomicUsize,
    /// First-token sets found from a neighbour's ([`Engine::neighbour`]).
    by_neighbour: AtomicUsize,
    #[cfg(test)]
    sliced_first_sets_reused: AtomicUsize,
    /// No first-token set is keyed ([`Engine::shared_first_key`]): a reference for tests.
    #[cfg(test)]
    keys_off: std::sync::atomic::AtomicBool,
    /// Leaves out the last thread of every union ([`Engine::first_tokens_of_threads`]), so
    /// that a test shows it would see a wrong union.
    #[cfg(test)]
    threads_dropped: std::sync::atomic::AtomicBool,
    /// Narrow masks whose class's forbidden set was cleared after their tokens were set
    /// (`crate::lazy::automaton`).
    #[cfg(test)]
    pub(crate) masks_cleared_after: AtomicUsize,
    /// Byte-fallback moves proved live by completing their character ([`Engine::completes_live`]).
    #[cfg(test)]
    completed_moves: AtomicUsize,
    /// Slice groups a first-token set took as live through their hubs.
    settled_by_hubs: AtomicUsize,
    /// Nodes proved dead by their pair conditions ([`Engine::dead_by_pairs`]).
    dead_by_pairs: AtomicUsize,
    max_states: usize,
    max_bytes: usize,
    /// Wall-clock seconds of one call ([`Engine::timed`]; `None`: unlimited).
    max_seconds: Option<f64>,
    bytes: AtomicUsize,
}

/// Tokens a trie walk takes before it counts as long work ([`long_work`]), about a millisecond's
/// worth: a wide text state's walk (a string's contents, ~120,000 tokens on Llama 3) takes
/// several, a narrow one a few dozen tokens.
const LONG_WALK_TOKENS: usize = 16_384;

/// `walked.push(t, to, class)`, telling the caller its work is long at the walk's
/// [`LONG_WALK_TOKENS`]th token.
#[inline]
fn push_walked(walked: &mut Walked, t: u32, to: TextKey, class: u32) {
    walked.push(t, to, class);
    if walked.num_tokens() == LONG_WALK_TOKENS {
        long_work::notify();
    }
}

thread_local! {
    /// The clock of the guide call this thread is inside ([`Engine::timed`]). Per thread, not
    /// per engine: a call's work runs on its caller's thread, and every engine method it
    /// reaches reads the clock without it being passed through each of them.
    static CALL_DEADLINE: Cell<Option<Deadline>> = const { Cell::new(None) };
}

/// Puts the thread's clock back as it was (none, or the clock [`Engine::prefetch`] replaced)
/// when a timed call ends, even by a panic.
struct ClockGuard(Option<Deadline>);

impl Drop for ClockGuard {
    fn drop(&mut self) {
        CALL_DEADLINE.with(|d| d.set(self.0));
    }
}

/// The byte steps [`Engine::completes_live`] tries to complete a byte-fallback character: a
/// character has at most three bytes after its first, and most first tries complete it.
const COMPLETION_STEPS: usize = 16;

/// How far a probe looks along a shortest way to acceptance (longer tokens are not tried), and
/// how many nodes it may expand before the full search takes over (see [`Engine::probe`]): at
/// least `PROBE_NODES`, and `PROBE_NODES_PER_BYTE` per byte of the regex's distance to
/// acceptance, since a probe that goes straight takes a token (and perhaps a boundary) per few
/// bytes of its way.
const PROBE_BYTES: usize = 64;
const PROBE_NODES: usize = 512;
const PROBE_NODES_PER_BYTE: usize = 2;
/// The text states a search for a shortest way may expand ([`TextSpace::shortest_way`]): at
/// least `WAY_SEARCH_STATES`, and `WAY_SEARCH_STATES_PER_BYTE` per byte of the regex's distance.
///
/// Why scale with the distance: a large schema's shortest document can be thousands of bytes
/// (Github_ultra/o16062: ~6,000 bytes, its required keys). A fixed budget failed
/// every way search there, the engine then paid 256 failed searches of 4,096 states before
/// falling back on greedy steps, and probes that could not reach acceptance in 512 nodes left
/// the initial state to the full search: 1.3 s to the first mask on Llama 3, now ~10 ms
/// plus its DFA. A* expands few states beyond the way itself (the regex's distance is a
/// consistent estimate), so the scaled budget is spent only where the way is that long.
const WAY_SEARCH_STATES: usize = 4096;
const WAY_SEARCH_STATES_PER_BYTE: usize = 4;
/// Failed way searches after which an engine guides its ways by the regex's distance alone.
const WAY_SEARCH_FAILURES: usize = 256;
/// The longest way [`Engine::nearest_chain`] follows before leaving it to the search.
const NEAREST_CHAIN_STEPS: usize = 4096;
/// The longest shortest text that proves a piece start ([`Engine::live_by_shortest_text`]); a
/// longer one is left to the way, whose steps later ways join. A text is walked whole for each
/// piece start (~60 instructions a byte with the other components), so this bounds one proof
/// at ~30,000 instructions where a schema's shortest document is thousands of bytes. Issue
/// 18's texts on Llama 3 reach 274 bytes (median 41), issue 17's 48.
const SHORTEST_TEXT_BYTES: usize = 512;

/// The class nodes a target must have before its way out is looked for as witness tokens
/// ([`Engine::exit`]).
const WITNESS_MIN_CLASSES: usize = 8;

/// The trie edges [`Engine::dead_by_pairs`] follows before it gives up: enough for the tokens of
/// a narrow text state, a small part of a wide one's.
const PAIR_WALK_EDGES: usize = 256;

/// The most groups a text state has where [`Engine::first_tokens`] tries
/// [`Engine::dead_by_pairs`] first.
const NARROW_GROUPS: usize = 64;

/// The byte closure a text state may have for its walk to be shared through
/// [`TokenizerParts::walks`], and for its first-token set through
/// [`TokenizerParts::first_sets`] (`WALK_CLOSURE_STATES`, `WALK_CLOSURE_EDGES`): a number's few
/// states, not a free class's (those are sliced or walked). A regex state taking fewer than `WALK_CLOSURE_MIN_BYTES` bytes (a key, a literal,
/// `true`/`false`) is walked without one: its narrowed walk costs about what the closure would,
/// and keys seldom repeat (keys and punctuation were 4-9 % slower with closures).
const WALK_CLOSURE_MIN_BYTES: usize = 8;
const WALK_CLOSURE_STATES: usize = 32;
const WALK_CLOSURE_EDGES: usize = 128;

/// The byte closure a shared first-token set's key may spell out ([`Engine::shared_first_key`]).
/// Larger than a walk's ([`WALK_CLOSURE_STATES`]), and past ASCII: a date's `\d` is Unicode,
/// and the piece of digits after its opening quote takes multi-byte digits (157 states and
/// 1,800 edges on Llama 3; GPT-2 keeps four digits in one piece), one state of them 50 bytes
/// (the mathematical digits' last byte). Keyed, its set is found once per tokenizer instead
/// of once per guide (the date's first digit 370-690 → 80-170 µs on Llama 3), and so are a
/// short counted class's (`"[a-z]{2,40}"`: ~6.5 → ~0.15 ms of masks a document in later
/// guides). A state of more than 32 ASCII bytes stays wide (`TextSpace::byte_closure_of`)
/// while its slice use is unknown or counted: spelled out, `[a-zA-Z0-9]{1,100}` built 8,192
/// edges before giving up at each position, its masks ~3× slower. One that no slice takes
/// (a UUID's `[a-z0-9]{4}`, counted too few times for a derived slice) is spelled out: its
/// closure ends with the count. Unkeyed, each of its positions cost 0.2-2.8 ms in every guide
/// (`Github_medium/o65710`'s, Llama 3).
///
/// A grammar's closure gives up past one stack frame above its start's (`max_nesting`): a
/// string inside a free JSON value, or a key's end before one, runs on through punctuation that
/// may nest without end in one piece (`"],[[{"`), so its key was never made, yet its attempt
/// stepped the automaton through hundreds of new states and tried the slice uses of up to
/// [`KEY_REGIONS`] strings first (a fifth to a third of such a step on Llama 3). One frame keeps
/// the keys that go through one call (a `$ref`'d value, an outlined sub-expression). Issue 18's
/// 40 schemas (`schema_compare.py`'s), one pass of fresh guides on Llama 3: 366.7 → 344.2 M
/// instructions, the same masks, and the steps over 50 µs 89 → 66 (other bounds: `docs/design.md`
/// §8).
const KEY_CLOSURE: ClosureBounds =
    ClosureBounds { max_states: 1024, max_edges: 8192, wide_bytes: 64, ascii_only: false, max_nesting: 1 };

/// The slice regions a shared first-token set's key may describe ([`Engine::shared_first_key`]):
/// a string's contents, and the next string's after `","`. propertok's own JSON string
/// (`json_schema`'s) needs five on Llama 3 from a state inside a word: its `\u` escapes and
/// U+007F-U+009F leave the slice as exit tokens and come back into the contents at four other
/// pre-tokenizer states. With four, every string field of its schemas made no key there, and
/// its first step past a word cost ~170 µs in every guide. A free class (`"[^"]*"`, whose
/// control characters and line breaks are pre-tokenizer states of their own) in a list of pairs
/// (`a=1;b="x y";c=[1,2,"3"]`) needs more than eight on Llama 3: with eight, its steps inside
/// the strings cost 220-420 µs in every fresh guide, with sixteen 19-28 µs, while issue 17's and
/// 18's documents took the same instructions to 0.1 % (`benches/RESULTS.md`, stop 85).
const KEY_REGIONS: usize = 16;

/// When a wide regex state's first-token set is found from its neighbour's
/// ([`Engine::neighbour`]): the state takes at least `NEIGHBOUR_MIN_BYTES` bytes (a narrower
/// one's walk is narrowed to its bytes anyway), and the two part on at most
/// `NEIGHBOUR_MAX_BYTES` bytes.
const NEIGHBOUR_MIN_BYTES: usize = 64;
const NEIGHBOUR_MAX_BYTES: usize = 16;

/// The fewest bytes a regex state takes for [`Engine::first_tokens_of_threads`] to split it
/// into threads: a narrower one's walk is narrowed to its bytes. With 32, an email's states
/// (38-57 bytes: its local part beside a quoted one, a domain's labels) were split, and their
/// threads, new at each step too, cost more than the walk they replaced (`Github_easy/o58906`:
/// 17 → 22 ms of masks a guide on Llama 3).
const THREAD_MIN_BYTES: usize = 64;

/// How many unions of threads one thread may be inside at once
/// ([`Engine::first_tokens_of_threads`]): a thread's set may come from its neighbour's
/// (`Engine::neighbour`), itself a union, and no proof rules out a cycle back, so past this
/// depth a set is found whole.
const MAX_UNION_DEPTH: u32 = 4;

thread_local! {
    /// The unions of threads whose sets this thread is finding, one inside another.
    static UNION_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One level of [`UNION_DEPTH`], left when dropped (on an error too).
struct UnionDepth;

impl UnionDepth {
    fn enter() -> UnionDepth {
        UNION_DEPTH.set(UNION_DEPTH.get() + 1);
        UnionDepth
    }
}

impl Drop for UnionDepth {
    fn drop(&mut self) {
        UNION_DEPTH.set(UNION_DEPTH.get() - 1);
    }
}

/// The fewest gathered first tokens that [`sort_token_ids`] sorts through a bitset.
const SORT_BY_BITSET_MIN: usize = 256;

/// How many witness tokens the guides of one `Compiler` share as hints
/// ([`Engine::hinted_live`]), and the empty slot.
const HINTS: usize = 8;
const NO_HINT: u32 = u32::MAX;

/// The first positions of counted strings an engine remembers ([`Engine::table_counts`]): a
/// document is inside one string at a time, and seldom comes back to an earlier one.
const FIRST_POSITIONS: usize = 8;

/// Bytes a fact or an interned key costs (entry, with its 16-byte text key, plus hash-table
/// slack).
const BYTES_PER_ENTRY: usize = 48;

impl Engine {
    /// An engine over `space`, with the limits of one guide: `max_states` (text states, nodes of
    /// one search), `max_bytes` (the memo), `max_seconds` (one call, see [`Engine::timed`]).
    pub(crate) fn new(
        parts: Arc<TokenizerParts>,
        space: TextSpace,
        max_states: usize,
        max_bytes: usize,
        max_seconds: Option<f64>,
    ) -> Engine {
        let class_bytes = shifted_walk::class_bytes(space.dfa());
        let engine = Engine {
            parts,
            space,
            texts: Interner::default(),
            groups: GroupCache::default(),
            facts: ShardedMap::default(),
            first: ShardedMap::default(),
            fallback: ShardedMap::default(),
            no_fallback_moves: Arc::new([]),
            ways: ShardedMap::default(),
            clean_ways: ShardedMap::default(),
            slice_uses: ShardedMap::default(),
            count_stand_ins: ShardedMap::default(),
            later_positions: ShardedMap::default(),
            counts_tabled: ShardedMap::default(),
            first_positions: std::sync::Mutex::new(Vec::new()),
            any_stand_ins: AtomicBool::new(false),
            by_horizon: AtomicUsize::new(0),
            way_search_failures: AtomicUsize::new(0),
            hinted: AtomicUsize::new(0),
            by_clean_way: AtomicUsize::new(0),
            by_shortest_text: AtomicUsize::new(0),
            way_searches: AtomicUsize::new(0),
            nearest_chains: AtomicUsize::new(0),
            thread_unions: AtomicUsize::new(0),
            sliced: AtomicUsize::new(0),
            walks_reused: AtomicUsize::new(0),
            recent_walks: RecentWalks::default(),
            class_bytes,
            walks_shifted: AtomicUsize::new(0),
            shift_min_tokens: AtomicUsize::new(shifted_walk::SHIFT_MIN_TOKENS),
            first_sets_reused: AtomicUsize::new(0),
            by_neighbour: AtomicUsize::new(0),
            #[cfg(test)]
            sliced_first_sets_reused: AtomicUsize::new(0),
            #[cfg(test)]
            keys_off: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            threads_dropped: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            masks_cleared_after: AtomicUsize::new(0),
            #[cfg(test)]
            completed_moves: AtomicUsize::new(0),
            settled_by_hubs: AtomicUsize::new(0),
            dead_by_pairs: AtomicUsize::new(0),
            max_states,
            max_bytes,
            max_seconds,
            bytes: AtomicUsize::new(0),
        };
        engine.texts.intern(&engine.space.start(), usize::MAX).expect("no limit on the first text state");
        engine
    }

    pub(crate) fn max_states(&self) -> usize {
        self.max_states
    }

    /// Runs `call`, one call of the guide, on a clock of `max_seconds`: the work it does past
    /// that (trie walks and searches for states met for the first time) stops with
    /// `LimitExceeded(max_compile_seconds)`. Facts recorded before stay true, so the guide stays
    /// usable. A call inside another keeps the outer clock.
    pub(crate) fn timed<T>(&self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        if CALL_DEADLINE.with(|d| d.get().is_some()) {
            return call();
        }
        let deadline = Deadline::after_seconds(self.max_seconds).timing("one call of a lazy guide");
        CALL_DEADLINE.with(|d| d.set(Some(deadline)));
        let _guard = ClockGuard(None);
        call()
    }

    /// `Err(LimitExceeded)` once the clock of the current call ([`Engine::timed`]) has run out;
    /// past [`long_work::LONG_AFTER`] on it, tells the caller the work is long
    /// ([`Deadline::check`]).
    #[inline]
    fn check_clock(&self, stage: &str) -> Result<()> {
        CALL_DEADLINE.with(|d| d.get().map_or(Ok(()), |deadline| deadline.check(stage)))
    }
    /// The tokenizer's parts, to hold beside the guide (a mask's recipe).
    pub(crate) fn shared_parts(&self) -> &Arc<TokenizerParts> {
        &self.parts
    }
    pub(crate) fn parts(&self) -> &TokenizerParts {
        &self.parts
    }
    pub(crate) fn space(&self) -> &TextSpace {
        &self.space
    }
    /// The start text state's id (0).
    pub(crate) fn start(&self) -> TextId {
        0
    }
    pub(crate) fn key(&self, z: TextId) -> TextKey {
        *self.texts.key(z)
    }
    /// Text states whose trie walk came from another text state's (see
    /// [`Engine::walk_or_reuse`]).
    #[cfg(test)]
    pub(crate) fn walks_reused(&self) -> usize {
        self.walks_reused.load(Ordering::Relaxed)
    }

    /// Text states whose walk was an earlier one's shifted (see [`Engine::walk_shifted_or`]).
    #[cfg(test)]
    pub(crate) fn walks_shifted(&self) -> usize {
        self.walks_shifted.load(Ordering::Relaxed)
    }

    /// Leaves the last thread out of every union of threads from now on (a wrong union).
    #[cfg(test)]
    pub(crate) fn drop_a_thread(&self) {
        self.threads_dropped.store(true, Ordering::Relaxed);
    }
    /// Finds every first-token set on its own from now on, keying none.
    #[cfg(test)]
    pub(crate) fn turn_keys_off(&self) {
        self.keys_off.store(true, Ordering::Relaxed);
    }

    /// Keeps every walk, however small, as a candidate for shifting (small vocabularies).
    #[cfg(test)]
    pub(crate) fn shift_every_walk(&self) {
        self.shift_min_tokens.store(0, Ordering::Relaxed);
    }

    /// How many first-token sets this guide took from another guide's (see
    /// [`Engine::shared_first_key`]).
    #[cfg(test)]
    pub(crate) fn first_sets_reused(&self) -> usize {
        self.first_sets_reused.load(Ordering::Relaxed)
    }

    /// How many first-token sets this guide found from a neighbour's (see
    /// [`Engine::neighbour`]).
    #[cfg(test)]
    pub(crate) fn first_sets_by_neighbour(&self) -> usize {
        self.by_neighbour.load(Ordering::Relaxed)
    }

    /// How many of those were sets of sliced text states.
    #[cfg(test)]
    pub(crate) fn sliced_first_sets_reused(&self) -> usize {
        self.sliced_first_sets_reused.load(Ordering::Relaxed)
    }

    /// Drops the first-token sets every guide of the tokenizer shares, so that the next guides
    /// walk and search for their own (tests of what those reuse).
    #[cfg(test)]
    pub(crate) fn forget_shared_first_sets(&self) {
        self.parts.first_sets.clear();
    }

    /// For each unsliced text state of this guide whose byte closure is within the bounds of
    /// [`Engine::walk_or_reuse`]: its closure's shape and its own trie walk (never a reused
    /// one) numbered by the closure, as that function keeps it.
    #[cfg(test)]
    pub(crate) fn walks_by_shape(&self) -> Result<Vec<(Box<[u32]>, super::groups::NumberedWalk)>> {
        let mut out = Vec::new();
        for id in 0..self.texts.len() as u32 {
            let key = self.key(id);
            if self.slice_use(key.regex_state())?.is_some() {
                continue;
            }
            let Some(closure) = self.space.byte_closure(key, 0, WALK_CLOSURE_STATES, WALK_CLOSURE_EDGES) else {
                continue;
            };
            let mut walked = Walked::default();
            self.walk_trie(&self.parts.trie, key, &mut walked, None);
            out.push((closure.shape.clone(), walked.by_target_number(|to| closure.number(to))));
        }
        Ok(out)
    }

    /// First-token sets filled so far.
    #[cfg(test)]
    pub(crate) fn first_token_sets(&self) -> usize {
        self.first.len()
    }

    /// The text states kept so far, and how many of those walked had their groups from a slice.
    pub(crate) fn text_states(&self) -> (usize, usize) {
        (self.texts.len(), self.sliced.load(Ordering::Relaxed))
    }
    /// Nodes whose liveness was read off a counted string's horizon or first proved count
    /// ([`Engine::live_by_horizon`]).
    #[cfg(test)]
    pub(crate) fn horizon_answers(&self) -> usize {
        self.by_horizon.load(Ordering::Relaxed)
    }
    /// `q`'s slice use as an earlier position of its string gives it ([`SliceUse::shifted`]).
    #[cfg(test)]
    pub(crate) fn shifted_use(&self, q: u32) -> Option<SliceUse> {
        self.later_positions.get(&q).and_then(|(earlier, k)| earlier.shifted(k, self.space.dfa()))
    }
    /// Way searches that ran out of budget so far.
    #[cfg(test)]
    pub(crate) fn way_search_failures(&self) -> usize {
        self.way_search_failures.load(Ordering::Relaxed)
    }
    /// Nodes proved live by a hint so far.
    #[cfg(test)]
    pub(crate) fn hinted_proofs(&self) -> usize {
        self.hinted.load(Ordering::Relaxed)
    }
    /// Piece starts proved live by a clean way so far.
    #[cfg(test)]
    pub(crate) fn clean_way_proofs(&self) -> usize {
        self.by_clean_way.load(Ordering::Relaxed)
    }
    /// Piece starts proved live by a grammar's shortest text so far.
    #[cfg(test)]
    pub(crate) fn shortest_text_proofs(&self) -> usize {
        self.by_shortest_text.load(Ordering::Relaxed)
    }
    /// Ways found so far by a search, and along bytes nearest to acceptance.
    #[cfg(test)]
    pub(crate) fn ways_found(&self) -> (usize, usize) {
        (self.way_searches.load(Ordering::Relaxed), self.nearest_chains.load(Ordering::Relaxed))
    }
    /// First-token sets made as the union of their threads' sets.
    #[cfg(test)]
    pub(crate) fn thread_unions(&self) -> usize {
        self.thread_unions.load(Ordering::Relaxed)
    }
    /// Nodes proved dead by their pair conditions, without a search.
    #[cfg(test)]
    pub(crate) fn dead_by_pairs_proofs(&self) -> usize {
        self.dead_by_pairs.load(Ordering::Relaxed)
    }

    /// Byte-fallback moves proved live by completing their character, without a judgement of
    /// their own.
    #[cfg(test)]
    pub(crate) fn completed_moves(&self) -> usize {
        self.completed_moves.load(Ordering::Relaxed)
    }

    /// Slice groups taken as live through their hubs, without a search.
    #[cfg(test)]
    pub(crate) fn settled_by_hubs(&self) -> usize {
        self.settled_by_hubs.load(Ordering::Relaxed)
    }

    /// For tests: each step of each hub's chain to its root (`crate::lazy::slice::chain_roots`),
    /// in the certificates of every text state whose groups are kept, is a successor a search
    /// of this guide may take, and so is each split starter's hub from the text state. Returns
    /// the chain steps checked, the hubs whose root was live, and the split starters checked;
    /// `walk_chains: false` checks the split starters only.
    #[cfg(test)]
    pub(crate) fn check_chains(&self, walk_chains: bool) -> Result<(usize, usize, usize)> {
        let (mut steps, mut rooted, mut conts) = (0, 0, 0);
        for z in 0..self.texts.len() as TextId {
            let Some(groups) = self.groups.get(z) else { continue };
            let Some((slice, slice_use)) = groups.certified() else { continue };
            // A node past a counted use's count is no node of the guide (its root is dead there).
            let node = |(key, side, split): Hub| -> Result<Option<Node>> {
                slice_use.target(key).map(|to| Ok(Node { text: self.text_id(to)?, side, split })).transpose()
            };
            for h in (0..slice.num_hubs() as u32).filter(|_| walk_chains) {
                let root = slice.root(slice.root_of(h));
                let mut at = slice.hub(h);
                while at != root {
                    let next = (self.parts.slices.chain_step(slice_use, at, self.parts.slice_inputs()))
                        .expect("a node that is not a root has a successor");
                    let (Some(from), Some(to)) = (node(at)?, node(next)?) else { break };
                    let found = self.is_successor(from, to)?;
                    assert!(found, "chain step {at:?} -> {next:?} is no successor of {from:?} in the guide");
                    steps += 1;
                    at = next;
                }
                if let Some(root) = node(root)? {
                    rooted += self.live(root)? as usize;
                }
            }
            // Each split starter's hub is a successor of its node from this text state (every
            // seventh starter: listing a node's successors in a wide state lists its groups).
            let key = self.key(z);
            for (i, &(t, child)) in self.parts.slice_inputs().root_conts.iter().enumerate().step_by(7) {
                let h = slice.cont_hub(i);
                let Some(to) = self.space.walk(key, self.parts.vocab.token_bytes(t)) else { continue };
                let Some(hub) = (h != NO_HUB).then(|| node(slice.hub(h))).transpose()?.flatten() else { continue };
                let from = Node { text: self.text_id(to)?, side: class_or_lone(&self.parts.tok, t), split: child };
                let found = self.is_successor(from, hub)?;
                assert!(found, "split starter {t}'s hub {hub:?} is no successor of {from:?} in the guide");
                conts += 1;
            }
        }
        Ok((steps, rooted, conts))
    }
    /// For tests: whether a search from `from` may step to `to`.
    #[cfg(test)]
    fn is_successor(&self, from: Node, to: Node) -> Result<bool> {
        let (mut cursor, mut held) = (Cursor::default(), None);
        while let Some(m) = self.next_successor(from, &mut cursor, &mut held)? {
            if m == to {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Heap bytes the memo holds (an estimate), and its limit.
    pub(crate) fn memo_bytes(&self) -> (usize, usize) {
        (self.bytes.load(Ordering::Relaxed), self.max_bytes)
    }

    /// Counts `bytes` more against `max_guide_bytes`. Every memo entry is stored after a charge,
    /// which also fails once a grammar's automaton has run into a limit: a walk since then may
    /// have found a byte refused that was not, so nothing computed from it is kept.
    fn charge(&self, bytes: usize) -> Result<()> {
        if let Some(e) = self.space.dfa().overflow() {
            return Err(e);
        }
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total > self.max_bytes {
            return Err(Error::LimitExceeded {
                limit: "max_guide_bytes",
                value: self.max_bytes.to_string(),
                what: format!("memory of a lazy guide's tables ({total} bytes: text states, facts, first-token sets)"),
            });
        }
        Ok(())
    }

    /// The id of a text state, interned now if new.
    pub(crate) fn text_id(&self, key: TextKey) -> Result<TextId> {
        match self.texts.intern(&key, self.max_states) {
            Ok((id, new)) => {
                if new {
                    self.charge(BYTES_PER_ENTRY)?;
                }
                Ok(id)
            }
            Err(n) => Err(self.too_many_texts(n)),
        }
    }

    /// The ids of text states `keys`, in order, interned now where new: under one lock and
    /// one charge, since a sliced first visit interns its ~150-350 targets at once and each
    /// lock and charge is an atomic read-modify-write that waits for the core's pending stores
    /// (charges were 6.7 % of first visits inside Qwen2 strings).
    fn text_ids(&self, keys: &[TextKey]) -> Result<Vec<TextId>> {
        let mut ids = Vec::with_capacity(keys.len());
        let (new, interned) = self.texts.intern_all(keys, self.max_states, &mut ids);
        self.charge(new * BYTES_PER_ENTRY)?;
        interned.map_err(|n| self.too_many_texts(n))?;
        Ok(ids)
    }

    fn too_many_texts(&self, n: usize) -> Error {
        Error::LimitExceeded {
            limit: "max_product_states",
            value: self.max_states.to_string(),
            what: format!("{n} text states (regex state, pre-tokenizer state, added-token prefix) of a lazy guide"),
        }
    }

    /// How `side` constrains the next token.
    #[inline]
    pub(crate) fn side(&self, side: u32) -> Side {
        match side {
            START => Side::PieceStart,
            LONE => Side::AfterLone,
            s if self.parts.tok.is_class(s) => Side::InPiece(s),
            s => Side::InChar(s),
        }
    }

    /// Whether the text may end at `n`.
    pub(crate) fn accepts(&self, n: Node) -> bool {
        self.tokens_end(n) && self.space.accepting(self.key(n.text))
    }

    /// Whether the tokens so far may end at `n` as they do at the end of the text (the regex
    /// aside): the last token is complete and the pre-tokenizer may end a piece.
    fn tokens_end(&self, n: Node) -> bool {
        !matches!(self.side(n.side), Side::InChar(_))
            && !self.parts.splits.spells_lone_token(n.split)
            && mark_allowed(0, self.space.spells_content(self.key(n.text)), n.side)
    }

    /// The node where text starts afresh in text state `z`: the guide's start, or after a
    /// special token.
    pub(crate) fn text_start(&self, z: TextId) -> Node {
        match self.space.num_stages() > 0 {
            true => Node::piece_start(z),
            false => Node { text: z, side: self.parts.tok.initial(), split: NONE },
        }
    }

    /// The node after the grammar's special token `j` at `n`, if the tokens may end there and
    /// the grammar takes the token (see [`TextSpace::token`]).
    pub(crate) fn token_successor(&self, n: Node, j: usize) -> Result<Option<Node>> {
        if !self.tokens_end(n) {
            return Ok(None);
        }
        match self.space.token(self.key(n.text), j) {
            Some(to) => Ok(Some(self.text_start(self.text_id(to)?))),
            None => Ok(None),
        }
    }

    /// The groups of text state `z`: its slice's shared groups and a walk of the slice's exit
    /// tokens when its regex state takes a slice (loops on or counts its characters), one trie
    /// walk otherwise (again, when the cache dropped them).
    fn groups(&self, z: TextId) -> Result<Arc<Groups>> {
        if let Some(groups) = self.groups.get(z) {
            return Ok(groups);
        }
        self.check_clock("a trie walk of a text state met for the first time")?;
        let key = self.key(z);
        let mut walked = Walked::default();
        let mut recorded = None;
        let shared = match self.slice_use(key.regex_state())? {
            Some(slice) => {
                let inside = self.parts.slices.groups(self.parts.slice_inputs(), &slice, key);
                // The slice's targets first, in the guide's text space.
                walked.reserve_targets(inside.targets().len());
                let targets: Vec<(u32, u32)> = (inside.targets().iter().enumerate())
                    .filter_map(|(j, &k)| Some((walked.target(slice.target(k)?), j as u32)))
                    .collect();
                let exits = self.parts.slices.exits(&slice, &self.space);
                recorded = self.walk_shifted_or(z, Some(&exits), &mut walked, |walked, seen| {
                    self.walk_below(&exits, key, walked, seen)
                });
                self.sliced.fetch_add(1, Ordering::Relaxed);
                Some(Mapped { slice: inside, slice_use: slice, targets })
            }
            None => {
                self.walk_or_reuse(key, &mut walked, |walked| {
                    let walk = |walked: &mut Walked, seen: &mut WalkedStates| {
                        self.walk_trie(&self.parts.trie, key, walked, Some(seen))
                    };
                    recorded = self.walk_shifted_or(z, None, walked, walk);
                });
                None
            }
        };
        let groups = self.assemble(walked, shared)?;
        self.charge(0)?;
        let groups = self.groups.insert(z, Arc::new(groups));
        if let Some(WalkRecord { roots, states }) = recorded {
            self.recent_walks.push(RecentWalk { key, roots, states, groups: groups.clone() });
        }
        Ok(groups)
    }

    /// The walk from text state `z` (below `roots`, the whole trie if `None`) into `walked`:
    /// read off a recent large walk's groups where a shift of regex states carries one onto the
    /// other ([`crate::lazy::shifted_walk`]), else done by `walk`, which records the regex states
    /// it reaches. Returns what to keep of the walk as a candidate for later ones, if large, for
    /// the caller to keep with `z`'s groups.
    fn walk_shifted_or(
        &self,
        z: TextId,
        roots: Option<&[u32]>,
        walked: &mut Walked,
        walk: impl FnOnce(&mut Walked, &mut WalkedStates),
    ) -> Option<WalkRecord> {
        let key = self.key(z);
        // A grammar's special tokens step the regex beside the bytes, and an automaton past its
        // limit refuses new transitions: neither is shifted.
        let shiftable = self.space.num_tokens() == 0 && self.space.dfa().overflow().is_none();
        if shiftable {
            for recent in self.recent_walks.candidates(key, roots) {
                let earlier = &recent.groups;
                let (dfa, q) = (self.space.dfa(), key.regex_state());
                let Some(sigma) =
                    shifted_walk::shift_map(dfa, &self.class_bytes, &recent.states, recent.key.regex_state(), q)
                else {
                    continue;
                };
                // Every target's regex state is in `σ` (the walk reached it from its start);
                // should one not be, the walk is done rather than shifted.
                let targets: Option<Vec<TextKey>> = (earlier.by_target())
                    .filter_map(|target| target.own().next())
                    .map(|g| {
                        let to = self.key(g.to);
                        sigma.get(&to.regex_state()).map(|&q| to.with_regex_state(q))
                    })
                    .collect();
                let Some(targets) = targets else { continue };
                let before = walked.num_tokens();
                // Each target's groups are in (class, token) order: the pushes stay sorted unless
                // `σ` takes two targets to one.
                let mut numbers = FxHashSet::default();
                let mut distinct = before == 0;
                let with_own = earlier.by_target().filter(|target| target.own().next().is_some());
                for (target, to) in with_own.zip(targets) {
                    let i = walked.target(to);
                    distinct &= numbers.insert(i);
                    for g in target.own() {
                        walked.push_group(i, g.class, earlier.tokens(&g));
                    }
                }
                if distinct {
                    walked.presorted();
                }
                if walked.num_tokens() - before >= LONG_WALK_TOKENS {
                    long_work::notify();
                }
                self.walks_shifted.fetch_add(1, Ordering::Relaxed);
                let mut states: Vec<u32> = recent.states.iter().filter_map(|x| sigma.get(x).copied()).collect();
                states.sort_unstable();
                states.dedup();
                return Some(WalkRecord { roots: roots.map(Box::from), states: states.into() });
            }
        }
        let mut seen = WalkedStates::new(key.regex_state());
        let before = walked.num_tokens();
        walk(walked, &mut seen);
        let large = shiftable && walked.num_tokens() - before >= self.shift_min_tokens.load(Ordering::Relaxed);
        large.then(|| WalkRecord { roots: roots.map(Box::from), states: seen.into_sorted() })
    }

    /// The groups of a walk, its targets interned.
    fn assemble(&self, walked: Walked, shared: Option<Mapped>) -> Result<Groups> {
        let ids = self.text_ids(&walked.targets)?;
        let distances: Vec<u32> = walked.targets.iter().map(|&k| self.space.distance(k)).collect();
        Ok(Groups::assemble(walked, &ids, |i| distances[i as usize], shared))
    }

    /// The tokens of `trie` that text state `key` takes, with their successors, into `walked`;
    /// the regex states of the nodes reached alive into `seen`, if given.
    fn walk_trie(&self, trie: &TokenTrie, key: TextKey, walked: &mut Walked, mut seen: Option<&mut WalkedStates>) {
        let tok = &*self.parts.tok;
        trie.for_each_walk_narrowed(
            key,
            |z| self.space.bytes_taken(z.regex_state()),
            |k, b| Ok::<_, std::convert::Infallible>(self.step_seen(k, b, &mut seen)),
            |t, to| push_walked(walked, t, to, class_or_lone(tok, t)),
        )
        .unwrap_or_else(|never| match never {})
    }

    /// The tokens of the subtrees of the tokenizer's trie at `roots` that text state `key`
    /// takes, with their successors, into `walked` (a slice's exit tokens); the regex states of
    /// the nodes reached alive into `seen`.
    fn walk_below(&self, roots: &[u32], key: TextKey, walked: &mut Walked, seen: &mut WalkedStates) {
        let tok = &*self.parts.tok;
        let mut seen = Some(seen);
        (self.parts.trie)
            .for_each_walk_below(
                roots,
                key,
                |z| self.space.bytes_taken(z.regex_state()),
                |k, b| Ok::<_, std::convert::Infallible>(self.step_seen(k, b, &mut seen)),
                |t, to| push_walked(walked, t, to, class_or_lone(tok, t)),
            )
            .unwrap_or_else(|never| match never {})
    }

    /// [`TextSpace::byte`], noting the regex state reached in `seen`.
    #[inline]
    fn step_seen(&self, k: TextKey, b: u8, seen: &mut Option<&mut WalkedStates>) -> Option<TextKey> {
        let next = self.space.byte(k, b);
        if let (Some(next), Some(seen)) = (next, seen.as_deref_mut()) {
            seen.see(next.regex_state());
        }
        next
    }

    /// The trie walk of an unsliced text state `key` into `walked`, taken from the tokenizer's
    /// walks when a text state of any of its guides had the same byte closure, else done by
    /// `walk` and kept there.
    ///
    /// Why: a JSON number has the same few text states in every field of every schema, but each
    /// field is a new regex state, and each walk (~1,100 digit tokens at a number position on
    /// Llama 3) was paid again. Regex states that take few bytes (keys, literals) are walked
    /// at once: see [`WALK_CLOSURE_MIN_BYTES`].
    fn walk_or_reuse(&self, key: TextKey, walked: &mut Walked, walk: impl FnOnce(&mut Walked)) {
        let closure = self.space.byte_closure(key, WALK_CLOSURE_MIN_BYTES, WALK_CLOSURE_STATES, WALK_CLOSURE_EDGES);
        let Some(closure) = closure else {
            return walk(walked);
        };
        let walks = &self.parts.walks;
        if let Some(found) = walks.get(&closure.shape) {
            walked.reserve(found.len());
            for &(j, k) in found.iter() {
                walked.push_key(closure.states[j as usize], k);
            }
            walked.presorted();
            self.walks_reused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        walk(walked);
        let found = walked.by_target_number(|to| closure.number(to));
        let bytes = found.len() * 16 + closure.shape.len() * 4 + 64;
        walks.insert(closure.shape, found.into(), bytes);
    }

    /// How regex state `q` takes a slice, if it does, found once per regex state.
    pub(crate) fn slice_use(&self, q: u32) -> Result<Option<SliceUse>> {
        Ok(self.find_slice_use(q, true)?.flatten())
    }

    /// [`Engine::slice_use`] where it is known or found before a counted use's table
    /// ([`Slices::find_loop`]): a loop use, or none; `None` where the use is still unknown.
    fn loop_use(&self, q: u32) -> Result<Option<Option<SliceUse>>> {
        self.find_slice_use(q, false)
    }

    /// `q`'s slice use, memoized once found ([`Slices::find`]; without `counted`,
    /// [`Slices::find_loop`], `None` where a counted use's table would come first), or read
    /// off an earlier position's of the same string ([`SliceUse::shifted`]).
    fn find_slice_use(&self, q: u32, counted: bool) -> Result<Option<Option<SliceUse>>> {
        if let Some(known) = self.slice_uses.get(&q) {
            return Ok(Some(known));
        }
        let (slices, dfa, parts) = (&self.parts.slices, self.space.dfa(), self.parts.slice_inputs());
        let shifted = self.later_positions.get(&q).and_then(|(earlier, k)| earlier.shifted(k, dfa));
        let found = match (shifted, counted) {
            (Some(shifted), _) => Some(Some(shifted)),
            (None, true) => Some(slices.find(dfa, q, parts)),
            (None, false) => slices.find_loop(dfa, q, parts),
        };
        let Some(found) = found else {
            return Ok(None);
        };
        self.charge(BYTES_PER_ENTRY + found.as_ref().map_or(0, |u| u.heap_bytes()))?;
        if let Some(found) = &found {
            for (later, k) in found.later_positions() {
                if self.later_positions.get(&later).is_none() {
                    self.charge(BYTES_PER_ENTRY)?;
                    self.later_positions.insert_if_absent(later, (found.clone(), k));
                }
            }
        }
        Ok(Some(self.slice_uses.insert_if_absent(q, found)))
    }

    /// Tables the stand-ins of the counted string whose position is regex state `q`
    /// ([`horizon::stand_ins`]) at the second position of the string a guide judges, unless
    /// a position of it was tabled: once per string and guide. Nothing where `slice_use`
    /// counts no string to an end.
    ///
    /// Why not at the first: the table costs about one position's judgement (~0.27 ms for a
    /// `{0,255}` string on Llama 3), and most strings of real documents are a token or two.
    fn table_counts(&self, q: u32, slice_use: &SliceUse) -> Result<()> {
        let (Some(slice), Some(dfa)) = (slice_use.counted_slice(), self.space.dfa().as_dfa()) else { return Ok(()) };
        if self.count_stand_ins.get(&q).is_some() || self.counts_tabled.get(&q).is_some() {
            return Ok(());
        }
        // The walks run outside the lock (a few hundred DFA steps each).
        let firsts = self.first_positions.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !firsts.iter().any(|&p| horizon::follows(slice, dfa, p, q, slice_use.max_count())) {
            let mut firsts = self.first_positions.lock().unwrap_or_else(|e| e.into_inner());
            if firsts.len() == FIRST_POSITIONS {
                firsts.remove(0);
            }
            firsts.push(q);
            return Ok(());
        }
        let tabled = horizon::stand_ins(slice, dfa, q);
        self.charge((tabled.stand_ins.len() + tabled.positions.len() + 1) * BYTES_PER_ENTRY)?;
        for (r, stand_ins) in tabled.stand_ins {
            self.count_stand_ins.insert_if_absent(r, stand_ins);
            self.any_stand_ins.store(true, Ordering::Release);
        }
        for p in tabled.positions.into_iter().chain([q]) {
            self.counts_tabled.insert_if_absent(p, ());
        }
        Ok(())
    }

    /// `n`'s liveness read off the same node at another count of a counted string
    /// ([`crate::lazy::horizon`]): live if it is live with a few characters left, dead if it is
    /// dead at the string's earliest proved count. Those nodes are the same at every position
    /// of the string, so their searches are done once; `None` where neither answers.
    fn live_by_horizon(&self, n: Node) -> Result<Option<bool>> {
        if !self.any_stand_ins.load(Ordering::Acquire) {
            return Ok(None);
        }
        let key = self.key(n.text);
        let Some(stand_ins) = self.count_stand_ins.get(&key.regex_state()) else { return Ok(None) };
        let at = |q: u32| -> Result<Node> { Ok(Node { text: self.text_id(key.with_regex_state(q))?, ..n }) };
        let known = match (stand_ins.above, stand_ins.below) {
            (Some(q), _) if self.live(at(q)?)? => Some(true),
            (_, Some(q)) if !self.live(at(q)?)? => Some(false),
            _ => None,
        };
        if known.is_some() {
            self.by_horizon.fetch_add(1, Ordering::Relaxed);
        }
        Ok(known)
    }

    /// The piece start after a boundary of `kind` at `n`, if one may be placed there: never at a
    /// piece start or inside a byte-fallback character, never where a lone token's split ends.
    fn boundary(&self, n: Node, kind: usize) -> Result<Option<Node>> {
        let z = self.key(n.text);
        if matches!(self.side(n.side), Side::PieceStart | Side::InChar(_))
            || self.parts.splits.spells_lone_token(n.split)
            || !mark_allowed(kind, self.space.spells_content(z), n.side)
        {
            return Ok(None);
        }
        match self.space.mark(z, kind) {
            Some(zm) => Ok(Some(Node::piece_start(self.text_id(zm)?))),
            None => Ok(None),
        }
    }

    /// Whether `side` lets token `t` (not a byte-fallback token) come next in the piece, as one
    /// token: anything at a piece start, a token with a class its pair condition allows after a
    /// class, nothing after a lone token or inside a character.
    #[inline]
    fn allows_token(&self, side: Side, t: u32) -> bool {
        let tok = &*self.parts.tok;
        match side {
            Side::PieceStart => true,
            Side::InPiece(c) => tok.class_of(t) != NO_CLASS && !tok.forbids(c, t),
            Side::AfterLone | Side::InChar(_) => false,
        }
    }

    /// The next successor of `n` at `cursor`, advancing it; `None` when there are no more.
    ///
    /// Order: boundaries, token groups (nearest to acceptance first), byte-fallback tokens,
    /// tokens continuing a lone token's merge-only split, then the grammar's special tokens.
    /// The order never changes an answer, only how much a search explores before it meets a
    /// live node: lone-split continuations come in token-id order, so trying them first sent
    /// searches deep into regions that only lead back to a node still on the stack (a 7 s first
    /// mask on Llama 3, see `docs/design.md` §8).
    fn next_successor(&self, n: Node, cursor: &mut Cursor, held: &mut Option<Arc<Groups>>) -> Result<Option<Node>> {
        let parts = &*self.parts;
        let tok = &*parts.tok;
        let z = self.key(n.text);
        let side = self.side(n.side);
        loop {
            let at = cursor.at;
            cursor.at += 1;
            match cursor.phase {
                0 => {
                    if at as usize >= self.space.num_stages() {
                        *cursor = Cursor { phase: 1, at: 0 };
                        continue;
                    }
                    if let Some(m) = self.boundary(n, at as usize)? {
                        return Ok(Some(m));
                    }
                }
                // Token groups.
                1 => {
                    if matches!(side, Side::AfterLone | Side::InChar(_)) {
                        *cursor = Cursor { phase: 2, at: 0 };
                        continue;
                    }
                    if held.is_none() {
                        *held = Some(self.groups(n.text)?);
                    }
                    let groups = held.as_deref().expect("held above");
                    let Some(g) = groups.get(at) else {
                        *held = None;
                        *cursor = Cursor { phase: 2, at: 0 };
                        continue;
                    };
                    let conts = parts.splits.next_tokens(n.split);
                    let tokens = groups.tokens(&g);
                    let allowed = match side {
                        Side::PieceStart => tokens.iter().any(|t| conts.binary_search_by_key(t, |e| e.0).is_err()),
                        Side::InPiece(c) => g.class != LONE && tok.allows_some(c, tokens, conts),
                        Side::AfterLone | Side::InChar(_) => false,
                    };
                    if allowed {
                        return Ok(Some(Node { text: g.to, side: g.class, split: NONE }));
                    }
                }
                // Byte-fallback tokens (SentencePiece BPE).
                2 => {
                    let in_scope =
                        matches!(side, Side::InPiece(_) | Side::InChar(_)) && tok.fallback_tokens().is_some();
                    // Only the bytes both the tokenizer and the regex state take: stepping the
                    // text by each of the 256 bytes of every node enumerated read the
                    // automaton's memo 256 times (a third of the instructions of a JSON
                    // string's first visit on Mistral-7B).
                    let bytes = match in_scope {
                        true => tok.fallback_bytes(n.side).intersection(&self.space.bytes_taken(z.regex_state())),
                        false => ByteSet::default(),
                    };
                    let Some(b) = bytes.first_from(at) else {
                        *cursor = Cursor { phase: 3, at: 0 };
                        continue;
                    };
                    cursor.at = b as u32 + 1;
                    let next = tok.step_byte(n.side, b).expect("a byte of fallback_bytes");
                    if let Some(to) = self.space.byte(z, b) {
                        return Ok(Some(Node { text: self.text_id(to)?, side: next, split: NONE }));
                    }
                }
                // Tokens continuing a lone token's merge-only split.
                3 => {
                    let conts = parts.splits.next_tokens(n.split);
                    if at as usize >= conts.len() || matches!(side, Side::AfterLone | Side::InChar(_)) {
                        *cursor = Cursor { phase: 4, at: 0 };
                        continue;
                    }
                    let (t, child) = conts[at as usize];
                    let allowed = self.allows_token(side, t);
                    if let Some(to) = self.space.walk(z, parts.vocab.token_bytes(t)).filter(|_| allowed) {
                        return Ok(Some(Node { text: self.text_id(to)?, side: class_or_lone(tok, t), split: child }));
                    }
                }
                // The grammar's special tokens.
                4 => {
                    if at as usize >= self.space.num_tokens() {
                        return Ok(None);
                    }
                    if let Some(m) = self.token_successor(n, at as usize)? {
                        return Ok(Some(m));
                    }
                }
                _ => unreachable!("five phases"),
            }
        }
    }

    fn record(&self, n: Node, live: bool) -> Result<()> {
        self.facts.insert_if_absent(n, live);
        self.charge(BYTES_PER_ENTRY)
    }

    /// The memoized step of a way from `k`, searching for a way when there is none yet.
    fn step_from(&self, k: TextKey) -> Result<Step> {
        if let Some(step) = self.ways.get(&k) {
            return Ok(step);
        }
        // A way that bytes nearest to acceptance reach: the states a search would open first,
        // unless a tie puts another first, which gives a way as short.
        if let Some(chain) = self.nearest_chain(k) {
            self.nearest_chains.fetch_add(1, Ordering::Relaxed);
            self.charge(chain.len() * BYTES_PER_ENTRY)?;
            for &(at, step) in &chain {
                self.ways.insert_if_absent(at, step);
            }
            return Ok(self.ways.get(&k).expect("stored above"));
        }
        // After `WAY_SEARCH_FAILURES` searches that ran out of budget (acceptance thousands of
        // bytes away), the regex's own distance guides the ways, one byte at a time, so that
        // each new text state does not pay a failed search.
        let search = match self.way_search_failures.load(Ordering::Relaxed) >= WAY_SEARCH_FAILURES {
            true => WaySearch::GaveUp,
            false => {
                self.way_searches.fetch_add(1, Ordering::Relaxed);
                let budget = WAY_SEARCH_STATES.max(WAY_SEARCH_STATES_PER_BYTE * self.space.distance(k) as usize);
                self.space.shortest_way(k, budget, |at| self.ways.get(&at).is_some())
            }
        };
        let mut way = match search {
            WaySearch::Found(way) => way,
            WaySearch::NoWay => vec![(k, Step::Stuck)],
            WaySearch::GaveUp => {
                self.way_search_failures.fetch_add(1, Ordering::Relaxed);
                vec![(k, self.space.greedy_step(k))]
            }
        };
        if way.len() > 1 {
            way.pop(); // where it joins a known way, or Done at acceptance
        }
        self.charge(way.len() * BYTES_PER_ENTRY)?;
        for &(at, step) in &way {
            self.ways.insert_if_absent(at, step);
        }
        Ok(self.ways.get(&k).expect("stored above"))
    }

    /// The way from `k` one byte nearest to acceptance at a time ([`TextSpace::nearest_byte`]),
    /// with a boundary before a byte the piece cannot take, to a state whose way is known or
    /// that accepts; `None` where neither gives such a byte (a detour or a special token is
    /// needed: the search finds the way), or past [`NEAREST_CHAIN_STEPS`]. Each byte brings
    /// the regex one byte closer and a boundary costs the search nothing, so every state of the
    /// chain has the smallest estimate a search from `k` can give: it is a way the search could
    /// take, as short, ties aside. The last state, whose way is known, is not included.
    ///
    /// Why: a key's piece starts are proved live along their ways ([`Engine::clean_way`]), and
    /// each new one searched for its way, a priority queue and two maps for a path that, inside
    /// a key or a literal, is one byte wide. Counted over issue 17's 300 Llama 3 documents in a
    /// new process (`benches/instructions.py --warm none`), liveness -7.5 % and mask fills
    /// -1.0 % (`docs/design.md` §8).
    fn nearest_chain(&self, k: TextKey) -> Option<Vec<(TextKey, Step)>> {
        let mut chain = Vec::new();
        let mut at = k;
        loop {
            if at != k && (self.space.accepting(at) || self.ways.get(&at).is_some_and(|step| step != Step::Stuck)) {
                return Some(chain);
            }
            if chain.len() == NEAREST_CHAIN_STEPS {
                return None;
            }
            let (step, to) = match self.space.nearest_byte(at) {
                Some((b, to)) => (Step::Byte(b), to),
                // A boundary first, where the piece cannot take the byte (a key's `_` after
                // letters): free for the search too, and never two in a row.
                None => (0..self.space.num_stages()).find_map(|kind| {
                    let start = self.space.mark(at, kind)?;
                    self.space.nearest_byte(start).map(|_| (Step::Mark(kind), start))
                })?,
            };
            chain.push((at, step));
            at = to;
        }
    }

    /// Whether no text at all reaches acceptance from text state `z` (a way search proved it), so
    /// that every node there is dead without a search.
    fn stuck(&self, z: TextId) -> Result<bool> {
        Ok(self.step_from(self.key(z))? == Step::Stuck)
    }

    /// Whether `n`, a node that may not end the text ([`Engine::live`] asks after
    /// [`Engine::accepts`]), is a piece start that takes no byte: then it has no successor (no
    /// boundary at a piece start; special tokens aside, where this says nothing), so it is dead,
    /// found without a way search.
    ///
    /// Why: the pre-tokenizer's automaton guesses a boundary after most characters of a piece
    /// and refutes it at the next one, so most piece starts a first-token set asks about (a
    /// key's letters) are such; each cost a way search of one state.
    fn stuck_piece_start(&self, n: Node) -> bool {
        let z = self.key(n.text);
        n.side == START && n.split == ROOT && self.space.num_tokens() == 0 && !self.space.takes_a_byte(z)
    }

    /// Whether piece start `start` is live by the way from its text alone: the tokenizer lets a
    /// way prove it ([`TokenizerParts::clean_ways_prove_piece_starts`]) and the way is clean
    /// ([`Engine::clean_way`]). `false` proves nothing.
    ///
    /// Why a clean way proves it: after a boundary the text's pieces are tokenized apart from
    /// what came before. A clean way is a text the text space accepts from `start` with its
    /// marks, so they are the pre-tokenizer's own pieces, none empty (the piece machine puts no
    /// boundary at a piece's start, which is checked as well); no state on it spells an added
    /// token's content, so no added token is cut out of it; and each piece has canonical tokens,
    /// all usable (every byte is a token and no merge makes a token the guide never allows).
    /// The engine holds every canonical sequence of such a text, so a path from `start` reaches
    /// acceptance. A way that is not clean proves nothing either way: the search decides.
    ///
    /// Why: a first-token set's key asks whether the piece start after each boundary of its
    /// closure is live, and each answer was a probe, a trie walk per node along the way, toward
    /// acceptance, once per guide: ~20 % of the time of narrow first visits on Llama 3
    /// (`docs/design.md` §8). Following the way's stored steps costs a lookup per byte, once per
    /// text state.
    fn live_by_clean_way(&self, start: Node) -> Result<bool> {
        if !self.parts.clean_ways_prove_piece_starts || start.side != START || start.split != ROOT {
            return Ok(false);
        }
        let z = self.key(start.text);
        Ok(!matches!(self.step_from(z)?, Step::Mark(_)) && self.clean_way(z)?)
    }

    /// Whether piece start `start` is live by a grammar's shortest text from it
    /// ([`TextSpace::shortest_text_is_clean`]), a clean way found without stepping the
    /// automaton (see [`Engine::live_by_clean_way`] for why a clean way proves it). `false`
    /// proves nothing.
    fn live_by_shortest_text(&self, start: Node) -> bool {
        self.parts.clean_ways_prove_piece_starts
            && start.side == START
            && start.split == ROOT
            && self.space.shortest_text_is_clean(self.key(start.text), SHORTEST_TEXT_BYTES)
    }

    /// Whether the way from `z` ([`Engine::step_from`], step by step) is *clean*: it ends where
    /// the text may end, takes no special token and no two boundaries in a row, and no text
    /// state on it, `z` and the last included, spells an added token's content. Memoized per
    /// text state (a way's steps, once stored, never change, so neither does the answer).
    fn clean_way(&self, z: TextKey) -> Result<bool> {
        let mut path: Vec<(TextKey, Step)> = Vec::new();
        let mut at = z;
        // Whether the way on from the end of `path` is clean, and whether it starts with a mark.
        let (mut clean, mut then_mark) = loop {
            if let Some(clean) = self.clean_ways.get(&at) {
                break (clean, matches!(self.step_from(at)?, Step::Mark(_)));
            }
            let step = self.step_from(at)?;
            path.push((at, step));
            let next = match step {
                Step::Byte(b) => self.space.byte(at, b),
                Step::Mark(kind) => self.space.mark(at, kind),
                Step::Done => break (true, false),
                Step::Token(_) | Step::Stuck => None,
            };
            match next {
                Some(next) => at = next,
                None => break (false, false),
            }
        };
        self.charge(path.len() * BYTES_PER_ENTRY)?;
        for &(k, step) in path.iter().rev() {
            let mark = matches!(step, Step::Mark(_));
            clean = clean && !(mark && then_mark) && !self.space.spells_content(k);
            then_mark = mark;
            clean = self.clean_ways.insert_if_absent(k, clean);
        }
        Ok(clean)
    }

    /// The successors of `n` that follow a shortest way to acceptance from its text (see
    /// [`Engine::probe`]), in the order a probe tries them: boundaries, the grammar's special
    /// tokens, tokens spelling a prefix of that way (longest first), its first byte as a
    /// byte-fallback token. Each obeys the rules of [`Engine::next_successor`]: this is a
    /// subset of its successors.
    fn probe_successors(&self, n: Node, out: &mut Vec<Node>) -> Result<()> {
        let parts = &*self.parts;
        let tok = &*parts.tok;
        let z = self.key(n.text);
        let side = self.side(n.side);
        let tokens = match side {
            Side::AfterLone | Side::InChar(_) => Vec::new(),
            Side::PieceStart | Side::InPiece(_) => self.way_tokens(z)?,
        };
        for kind in 0..self.space.num_stages() {
            out.extend(self.boundary(n, kind)?);
        }
        for j in 0..self.space.num_tokens() {
            out.extend(self.token_successor(n, j)?);
        }
        let conts = parts.splits.next_tokens(n.split);
        for &(t, to) in tokens.iter().rev() {
            if self.allows_token(side, t) {
                let split = conts.binary_search_by_key(&t, |e| e.0).map_or(NONE, |i| conts[i].1);
                out.push(Node { text: self.text_id(to)?, side: class_or_lone(tok, t), split });
            }
        }
        let in_scope = matches!(side, Side::InPiece(_) | Side::InChar(_)) && tok.fallback_tokens().is_some();
        if let (true, Step::Byte(b)) = (in_scope, self.step_from(z)?) {
            if let (Some(to), Some(next)) = (self.space.byte(z, b), tok.step_byte(n.side, b)) {
                out.push(Node { text: self.text_id(to)?, side: next, split: NONE });
            }
        }
        Ok(())
    }

    /// The tokens that spell a prefix of a shortest way to acceptance from `z` (at most
    /// [`PROBE_BYTES`] long), shortest first, with their successors.
    fn way_tokens(&self, z: TextKey) -> Result<Vec<(u32, TextKey)>> {
        let mut tokens = Vec::new();
        let mut failed = None;
        // The way's bytes are read only as far as some token spells them.
        let mut at = z;
        let way = std::iter::from_fn(|| match self.step_from(at) {
            Ok(Step::Byte(b)) => {
                at = self.space.byte(at, b).expect("a way's bytes are text transitions");
                Some(b)
            }
            Ok(Step::Mark(_) | Step::Token(_) | Step::Done | Step::Stuck) => None,
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        self.parts.trie.for_each_prefix_of(
            way.take(PROBE_BYTES),
            z,
            |k, b| self.space.byte(k, b),
            |t, to| tokens.push((t, to)),
        );
        match failed {
            Some(e) => Err(e),
            None => Ok(tokens),
        }
    }

    /// A cheap witness that `start` is live: a depth-first search over [`Engine::probe_successors`]
    /// only, which follow a shortest way to acceptance. Along the way each token shortens the
    /// remaining way by its length, but a boundary off the way can lead to a piece start whose
    /// way is longer and passes through a text state met before (on o53044 on Llama 3 a probe
    /// went round such a cycle until its budget ran out, and the full search then took 15 s),
    /// so the search never re-enters a node on its current path. It gives up after its budget
    /// of nodes ([`PROBE_NODES`], more for a distant acceptance) or at nodes in `failed` (probed
    /// before, in vain). Success records the path live; failure proves nothing and records
    /// nothing, and the full search takes over.
    ///
    /// Why: the full search needs the token groups of every text state it expands, one trie walk
    /// each (milliseconds for a JSON string's contents), while almost every node a mask asks
    /// about is live by closing what is open the short way.
    fn probe(&self, start: Node, failed: &mut FxHashSet<Node>) -> Result<bool> {
        if failed.contains(&start) {
            return Ok(false);
        }
        // Each entry: a node and its successors not tried yet, the next one last.
        let mut path: Vec<(Node, Vec<Node>)> = Vec::new();
        let expand = |w: Node, path: &mut Vec<(Node, Vec<Node>)>| -> Result<()> {
            let mut successors = Vec::new();
            self.probe_successors(w, &mut successors)?;
            successors.reverse();
            path.push((w, successors));
            Ok(())
        };
        expand(start, &mut path)?;
        let budget = PROBE_NODES.max(PROBE_NODES_PER_BYTE * self.space.distance(self.key(start.text)) as usize);
        let mut on_path = FxHashSet::default();
        on_path.insert(start);
        let mut expanded = 1;
        while let Some((node, todo)) = path.last_mut() {
            let Some(w) = todo.pop() else {
                failed.insert(*node);
                on_path.remove(node);
                path.pop();
                continue;
            };
            let live = match self.facts.get(&w) {
                Some(false) => continue,
                Some(true) => true,
                None => self.accepts(w),
            };
            if live {
                for &(n, _) in &path {
                    self.record(n, true)?;
                }
                return Ok(true);
            }
            if failed.contains(&w) || on_path.contains(&w) || expanded >= budget {
                continue;
            }
            expanded += 1;
            on_path.insert(w);
            expand(w, &mut path)?;
        }
        Ok(false)
    }

    /// Whether some canonical continuation from `n` reaches acceptance (see the module docs).
    pub(crate) fn live(&self, start: Node) -> Result<bool> {
        if let Some(known) = self.facts.get(&start) {
            return Ok(known);
        }
        if self.accepts(start) {
            self.record(start, true)?;
            return Ok(true);
        }
        if self.hinted_live(start) {
            self.hinted.fetch_add(1, Ordering::Relaxed);
            self.record(start, true)?;
            return Ok(true);
        }
        if let Some(known) = self.live_by_horizon(start)? {
            self.record(start, known)?;
            return Ok(known);
        }
        if self.stuck_piece_start(start) {
            self.record(start, false)?;
            return Ok(false);
        }
        // Before `stuck`, which steps the automaton along the way to acceptance.
        if self.live_by_shortest_text(start) {
            self.by_clean_way.fetch_add(1, Ordering::Relaxed);
            self.by_shortest_text.fetch_add(1, Ordering::Relaxed);
            self.record(start, true)?;
            return Ok(true);
        }
        if self.stuck(start.text)? {
            self.record(start, false)?;
            return Ok(false);
        }
        if self.live_by_clean_way(start)? {
            self.by_clean_way.fetch_add(1, Ordering::Relaxed);
            self.record(start, true)?;
            return Ok(true);
        }
        let mut probed_in_vain = FxHashSet::default();
        if self.probe(start, &mut probed_in_vain)? {
            return Ok(true);
        }
        struct Frame {
            at: u32,
            cursor: Cursor,
            /// The node's groups while its successors are enumerated.
            groups: Option<Arc<Groups>>,
        }
        let mut index: FxHashMap<Node, u32> = FxHashMap::default();
        let mut nodes: Vec<Node> = vec![start];
        let mut low: Vec<u32> = vec![0];
        let mut on_stack: Vec<bool> = vec![true];
        let mut stack: Vec<u32> = vec![0];
        let mut frames = vec![Frame { at: 0, cursor: Cursor::default(), groups: None }];
        index.insert(start, 0);
        let found_live = |stack: &[u32], nodes: &[Node]| -> Result<bool> {
            for &i in stack {
                self.record(nodes[i as usize], true)?;
            }
            Ok(true)
        };
        while let Some(frame) = frames.last_mut() {
            let v = frame.at;
            match self.next_successor(nodes[v as usize], &mut frame.cursor, &mut frame.groups)? {
                Some(w) => {
                    if let Some(&j) = index.get(&w) {
                        if on_stack[j as usize] {
                            low[v as usize] = low[v as usize].min(j);
                        }
                        continue;
                    }
                    match self.facts.get(&w) {
                        Some(true) => {
                            self.hint_from(nodes[v as usize], frame.cursor, frame.groups.as_deref());
                            return found_live(&stack, &nodes);
                        }
                        Some(false) => continue,
                        None => {}
                    }
                    if self.accepts(w) || self.probe(w, &mut probed_in_vain)? {
                        self.record(w, true)?;
                        self.hint_from(nodes[v as usize], frame.cursor, frame.groups.as_deref());
                        return found_live(&stack, &nodes);
                    }
                    if self.stuck(w.text)? {
                        self.record(w, false)?;
                        continue;
                    }
                    if self.dead_by_pairs(w)? {
                        continue;
                    }
                    self.check_clock("a liveness search")?;
                    if nodes.len() >= self.max_states {
                        return Err(Error::LimitExceeded {
                            limit: "max_product_states",
                            value: self.max_states.to_string(),
                            what: "nodes (text state, tokenizer state) of one liveness search of a lazy guide".into(),
                        });
                    }
                    let j = nodes.len() as u32;
                    index.insert(w, j);
                    nodes.push(w);
                    low.push(j);
                    on_stack.push(true);
                    stack.push(j);
                    frames.push(Frame { at: j, cursor: Cursor::default(), groups: None });
                }
                None => {
                    frames.pop();
                    if low[v as usize] == v {
                        // A completed strongly connected component with no way to acceptance.
                        while let Some(i) = stack.pop() {
                            on_stack[i as usize] = false;
                            self.record(nodes[i as usize], false)?;
                            if i == v {
                                break;
                            }
                        }
                    }
                    if let Some(parent) = frames.last() {
                        let p = parent.at as usize;
                        low[p] = low[p].min(low[v as usize]);
                    }
                }
            }
        }
        Ok(false)
    }

    /// Whether every successor of `n` is known dead (or it has none), which makes it dead, found
    /// without a probe or a search where its text state's groups are at hand (then it is
    /// recorded dead).
    ///
    /// Why: the exit tokens of a JSON string that end in its closing quote (`="`, `("`, `."`:
    /// ~100 groups on Llama 3) lead to class nodes before `,`, which their pair condition forbids
    /// (`",` merges first), so each is dead, and each such proof took a probe and a search of
    /// its own at every string start of every guide (`docs/design.md` §8).
    fn dead_by_successors(&self, n: Node) -> Result<bool> {
        if self.facts.get(&n).is_some() || self.accepts(n) {
            return Ok(false);
        }
        let mut held = match self.side(n.side) {
            Side::AfterLone | Side::InChar(_) => None,
            Side::PieceStart | Side::InPiece(_) => match self.groups.get(n.text) {
                Some(groups) => Some(groups),
                None => return Ok(false),
            },
        };
        let mut cursor = Cursor::default();
        while let Some(w) = self.next_successor(n, &mut cursor, &mut held)? {
            if self.facts.get(&w) != Some(false) {
                return Ok(false);
            }
        }
        self.record(n, false)?;
        Ok(true)
    }

    /// Whether class node `n` has no live successor, found without its groups: its pair
    /// condition forbids every token its text lets come next (a walk of at most
    /// [`PAIR_WALK_EDGES`] trie edges that stops at the first allowed token), no split
    /// continuation or byte-fallback byte may follow, and every boundary leads to a piece start
    /// known dead or where no byte may follow ([`TextSpace::takes_a_byte`]; recorded dead too).
    /// Then `n` is dead, and recorded so; `false` says nothing.
    ///
    /// Why: in a narrow text state most candidate tokens are non-canonical prefixes of the
    /// canonical one (` t`, ` tr`, ` tru` before ` true`). Each led to a class node that only a
    /// way search, a failed probe and a one-node search with a trie walk and groups of its own
    /// proved dead. It is tried only where such nodes are common (narrow unsliced states, and
    /// nodes a search is about to push): before every probe it cost +7 % on string documents,
    /// whose exit nodes pass the walk but not the boundary (`docs/design.md` §8).
    fn dead_by_pairs(&self, n: Node) -> Result<bool> {
        let Side::InPiece(c) = self.side(n.side) else { return Ok(false) };
        if self.space.num_tokens() > 0 || self.facts.get(&n).is_some() || self.accepts(n) {
            return Ok(false);
        }
        // Tokens first: a live node's walk meets an allowed one within a few edges.
        let z = self.key(n.text);
        let conts = self.parts.splits.next_tokens(n.split);
        let allows = |t: u32| self.allows_token(Side::InPiece(c), t);
        let tok = &*self.parts.tok;
        let mut forbids = tok.forbids_in_walk(c);
        let found = Cell::new(false);
        let mut edges = 0;
        let walked = self.parts.trie.for_each_walk_narrowed(
            z,
            |z| self.space.bytes_taken(z.regex_state()),
            |k, b| {
                edges += 1;
                match found.get() || edges > PAIR_WALK_EDGES {
                    true => Err(()),
                    false => Ok(self.space.byte(k, b)),
                }
            },
            // `allows` through a cursor: the walk meets tokens in the order of their bytes.
            |t, _| {
                if !found.get() && tok.class_of(t) != NO_CLASS && !forbids(t) {
                    found.set(conts.binary_search_by_key(&t, |e| e.0).is_err());
                }
            },
        );
        if walked.is_err() || found.get() {
            return Ok(false);
        }
        // Tokens continuing a lone token's split, taken out of the walk, come next with theirs.
        if conts.iter().any(|&(t, _)| allows(t) && self.space.walk(z, self.parts.vocab.token_bytes(t)).is_some()) {
            return Ok(false);
        }
        if tok.fallback_tokens().is_some()
            && self
                .space
                .bytes_taken(z.regex_state())
                .iter()
                .any(|b| self.space.byte(z, b).is_some() && tok.step_byte(n.side, b).is_some())
        {
            return Ok(false);
        }
        // A boundary leads to a piece start, dead at once where no byte may come next.
        for kind in 0..self.space.num_stages() {
            let Some(m) = self.boundary(n, kind)? else { continue };
            match self.facts.get(&m) {
                Some(false) => continue,
                Some(true) => return Ok(false),
                None if self.accepts(m) || self.space.takes_a_byte(self.key(m.text)) => return Ok(false),
                None => self.record(m, false)?,
            }
        }
        self.record(n, false)?;
        self.dead_by_pairs.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Whether a recent witness token proves class node `n` live without a search: one its pair
    /// condition allows, whose successor is a node already known live.
    ///
    /// Why: inside a JSON string a probe fails wherever the last token's class forbids the
    /// closing tokens of the shortest way (`."` is a token, so `.` then `"` is not canonical),
    /// and the full search then walks the trie from the node's text state, one walk per target
    /// of a mask, only to meet a successor whose liveness is already recorded: 47,000 of 52,000
    /// such searches along 30 documents of 8 string fields on Llama 3. The tokens that served
    /// there serve again at the next targets. A hint only ever proves liveness, so hints that
    /// differ between threads change how much is searched, never an answer.
    fn hinted_live(&self, n: Node) -> bool {
        let Side::InPiece(c) = self.side(n.side) else { return false };
        if n.split != NONE {
            return false;
        }
        let z = self.key(n.text);
        self.parts.hints.iter().map(|h| h.load(Ordering::Relaxed)).take_while(|&t| t != NO_HINT).any(|t| {
            self.allows_token(Side::InPiece(c), t)
                && (self.space.walk(z, self.parts.vocab.token_bytes(t)))
                    .and_then(|to| self.texts.find(&to))
                    .is_some_and(|to| {
                        self.facts.get(&Node { text: to, side: self.parts.tok.class_of(t), split: NONE }) == Some(true)
                    })
        })
    }

    /// Keeps as a hint the token by which a search from class node `n` just met a live
    /// successor, when that was one of its token groups (`cursor` just past it).
    fn hint_from(&self, n: Node, cursor: Cursor, groups: Option<&Groups>) {
        let (Side::InPiece(c), 1, Some(groups)) = (self.side(n.side), cursor.phase, groups) else { return };
        if n.split != NONE {
            return;
        }
        let Some(g) = cursor.at.checked_sub(1).and_then(|i| groups.get(i)) else { return };
        if let Some(&t) = groups.tokens(&g).iter().find(|&&t| self.allows_token(Side::InPiece(c), t)) {
            self.add_hint(t);
        }
    }

    /// Keeps `t`, which just proved a class node live, first among the hints.
    fn add_hint(&self, t: u32) {
        let mut hints: [u32; HINTS] = std::array::from_fn(|i| self.parts.hints[i].load(Ordering::Relaxed));
        let at = hints.iter().position(|&h| h == t || h == NO_HINT).unwrap_or(HINTS - 1);
        hints.copy_within(0..at, 1);
        hints[0] = t;
        for (slot, h) in self.parts.hints.iter().zip(hints) {
            slot.store(h, Ordering::Relaxed);
        }
    }

    /// How a class node `(to, c, NONE)` can be shown live for many classes `c` at once (see
    /// [`Exit`]).
    /// Witness tokens are looked for only when `witnesses` (many class nodes share `to`: for a
    /// few, searching each is cheaper than proving several witnesses live).
    fn exit(&self, to: TextId, witnesses: bool) -> Result<Exit> {
        if self.exits_live(to)? {
            return Ok(Exit::Boundary);
        }
        if !witnesses {
            return Ok(Exit::Tokens(Vec::new()));
        }
        let mut witnesses = Vec::new();
        for (t, next) in self.way_tokens(self.key(to))? {
            let class = self.parts.tok.class_of(t);
            if class == NO_CLASS {
                continue;
            }
            let next = self.text_id(next)?;
            if self.exits_live(next)? || self.live(Node { text: next, side: class, split: NONE })? {
                witnesses.push(t);
            }
        }
        Ok(Exit::Tokens(witnesses))
    }

    /// Whether a boundary may follow a token of any class that ends in text state `to` (outside
    /// a lone token's split) and lead to a live piece start: then every such node is live.
    fn exits_live(&self, to: TextId) -> Result<bool> {
        let any_class = Node { text: to, side: 0, split: NONE };
        for kind in 0..self.space.num_stages() {
            if let Some(start) = self.boundary(any_class, kind)? {
                if self.live(start)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The tokens whose successor from text state `z` inside the piece, with split node `u`, is
    /// live: every token a node `(z, ·, u)` may emit before the side's own rules (pair
    /// condition, lone tokens) apply. Byte-fallback tokens are not included.
    pub(crate) fn first_tokens(&self, z: TextId, u: u32) -> Result<Arc<TokenSet>> {
        if let Some(set) = self.first.get(&(z, u)) {
            return Ok(set);
        }
        let shared = self.shared_first_key(z, u)?;
        #[cfg(test)]
        let shared = shared.filter(|_| !self.keys_off.load(Ordering::Relaxed));
        if let Some(set) = shared.as_ref().and_then(|key| self.parts.first_sets.get(key)) {
            self.first_sets_reused.fetch_add(1, Ordering::Relaxed);
            #[cfg(test)]
            if self.slice_use(self.key(z).regex_state())?.is_some() {
                self.sliced_first_sets_reused.fetch_add(1, Ordering::Relaxed);
            }
            self.charge(set.heap_bytes() + BYTES_PER_ENTRY)?;
            return Ok(self.first.insert_if_absent((z, u), set));
        }
        let set = match self.first_tokens_of_threads(z, u)? {
            Some(set) => set,
            None => self.find_first_tokens(z, u)?,
        };
        // A grammar's automaton past a limit refuses every byte: a key read since then may be
        // wrong (its set is not, `find_first_tokens` having charged before keeping it).
        if let Some(key) = shared.filter(|_| self.space.dfa().overflow().is_none()) {
            let bytes = key.len() * 4 + set.heap_bytes() + 64;
            self.parts.first_sets.insert(key, set.clone(), bytes);
        }
        Ok(set)
    }

    /// What decides the first-token set of `(z, u)`: a key equal for two text states, in any
    /// guides of the tokenizer, only when their sets are equal; `None` where no such key is
    /// made.
    ///
    /// Why it decides the set: every way a node inside the piece goes on is a token or a
    /// byte-fallback byte (both [`TextSpace::byte`] steps, inside the byte closure), a boundary
    /// to a piece start, or the text's end. So with the closure's shape, each closure state's
    /// acceptance, whether it spells an added token's content, and, per boundary kind, whether
    /// a boundary leads somewhere and whether that piece start is live, the liveness of every
    /// node `(closure state, side, split)` is fixed (a least fixpoint over the same graph with
    /// the same exits), and `first_tokens(z, u)` is the set of tokens whose successor is live.
    /// The regex enters only through the closure and those bits. A grammar's special tokens
    /// leave the piece another way, so guides with any make no key. Without a pre-tokenizer
    /// the piece is the whole text and its closure the rest of the regex, made only for a small
    /// regex (`TextSpace::has_few_regex_states`): a greeting on Mistral-7B, `hello [a-z]+(,
    /// ?[a-z]+)*!?`, took 0.5-1 ms a step in every fresh guide, and 2-5 µs with keys.
    ///
    /// The closure is spelled out state by state where it is small (within [`KEY_CLOSURE`]:
    /// a key's, a number's, a date's Unicode digits). A state taking more bytes must loop on a
    /// slice, and then its closure, up to where bytes leave the slice, is its slice's region
    /// (`crate::lazy::slice::Region`) from its other components: the same in every guide, with
    /// `φ(s)` in place of each slice state `s`, so the region's serial stands for it, and the
    /// regex enters through which `φ(s)` accept, the piece starts after the region's
    /// boundaries (live or not), and the exits: which `(s, byte)` the regex takes, and the
    /// states they lead to, from which the closure goes on (a string's contents, then `"` and
    /// `,` or `}`; at a key's end, `":"` and the value's contents; at most [`KEY_REGIONS`]
    /// regions). A state that counts a class once or twice and then loops on it
    /// (`SliceUse::enters_a_loop`: a host name's first character, a `{1,}` string's) is spelled
    /// out: its bytes lead into the loop's region, or through a character's continuation bytes
    /// there. On a regex's minimal DFA a state whose loop use is undecided
    /// (`Engine::loop_use`) is decided for that; on an automaton determinized on demand it is
    /// not, since a URL's path watch (`Github_easy/o21869`) makes a new such state beside every
    /// step, whose count tables took its masks' instructions +89 % for keys that gave up.
    /// Spelling them out took issue 17's mask-fill instructions −1.4 % (first guides) and
    /// −2.1 % (second guides of the same schemas). Other wide states (counted uses to an end,
    /// whose positions are regions of their own) and regions past their bound make no key.
    /// With a normal form a region leaves it out, so the key holds the normal-form state each
    /// region is entered at, takes no exit after which that state still matters, and a
    /// region's piece start must be live or dead alike at the inert-only state and at the
    /// start, hence at every state (`crate::lazy::slice`, "With a normalizer").
    ///
    /// A grammar's automaton (or a regex's determinized on demand) is keyed alike: its states
    /// are built as the closure and the exits step to them, and its stacks enter only through
    /// those steps, acceptance and the liveness of piece starts, which the key holds. Its
    /// states are not minimal, so two closures of one language may differ in shape: a key
    /// missed, never a set shared that differs. On issue 18's 40 recursive schemas (Llama 3,
    /// second pass over fresh guides) 1,618 of 1,765 first-token sets came from keys, against
    /// 93 before grammars had byte closures; the masks' sum 113 -> 82 ms.
    ///
    /// Why: a key, a literal or a number's piece has the same closure in every schema (`"name`,
    /// `":`, three digits), and its first visit in each fresh guide repeated the walk, the
    /// grouping and the searches (~10-20 µs, the median step of a document on Llama 3); a
    /// string's contents cost ~170 µs a first visit, and a key's end before them ~46 µs, in
    /// every string field of every guide.
    fn shared_first_key(&self, z: TextId, u: u32) -> Result<Option<Box<[u32]>>> {
        let stages = self.space.num_stages();
        if self.space.num_tokens() > 0 || stages > 15 {
            return Ok(None);
        }
        // Without a pre-tokenizer the closure is the rest of the text: a JSON document's runs
        // past the bounds at nearly every state, and trying it there doubled the mask time of
        // issue 17's Mistral-7B documents (118 → 238 ms), so only a small regex is keyed.
        if stages == 0 && !self.space.has_few_regex_states() {
            return Ok(None);
        }
        let dfa = self.space.dfa();
        let normal = self.space.normal_form();
        let mut regions: Vec<(Arc<Region>, SliceUse)> = Vec::new();
        let mut failed = None;
        let closure = self.space.byte_closure_of(&[self.key(z)], KEY_CLOSURE, |k| {
            // Only a loop use has a region. A state no slice takes, or one that counts a class
            // once or twice before its loop, is spelled out if it is within the bounds (see
            // `KEY_CLOSURE`); other counted uses make no key.
            let found = match self.loop_use(k.regex_state()) {
                Ok(Some(found)) => Ok(found),
                // On an automaton determinized on demand, a URL's path watch makes a new such
                // state beside every step: a count table at each, for keys that gave up.
                Ok(None) if dfa.as_dfa().is_none() => return None,
                Ok(None) => self.slice_use(k.regex_state()),
                Err(e) => Err(e),
            };
            let slice = match found {
                Ok(Some(slice)) if !slice.counts_chars() => slice,
                // A class taken once or twice before its loop: its bytes lead into the loop's
                // region (or a character's continuation bytes, then there).
                Ok(Some(slice)) if slice.enters_a_loop() => return Some(WideState::SpelledOut),
                Ok(Some(_)) => return None,
                Ok(None) => return Some(WideState::SpelledOut),
                Err(e) => {
                    failed = Some(e);
                    return None;
                }
            };
            let region = self.parts.slices.region(&slice, k)?;
            if regions.len() == KEY_REGIONS {
                return None;
            }
            let mut description = vec![region.serial];
            // The region's states accept where their paired regex states do.
            let n = slice.num_slice_states();
            description.extend((0..n.div_ceil(32)).map(|w| {
                (w * 32..n.min(w * 32 + 32))
                    .filter(|&s| slice.paired(s) != DEAD && dfa.is_accepting(slice.paired(s)))
                    .fold(0, |bits, s| bits | 1 << (s % 32))
            }));
            // The exits the regex takes, and the states they lead to.
            let mut next = Vec::new();
            for (i, &(s, b, ref after)) in region.exits.iter().enumerate() {
                let q = self.regex_step(slice.paired(s), b);
                if q != DEAD {
                    if region.remembers_normal[i] {
                        return None;
                    }
                    description.push(i as u32);
                    let after = &region.after[after.start as usize..after.end as usize];
                    next.extend(after.iter().map(|k| k.with_regex_state(q)));
                }
            }
            if normal.is_some() {
                // The region is explored without the normal form (see `Region`).
                description.push(k.normal_part());
            }
            regions.push((region, slice));
            Some(WideState::Described(description, next))
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let Some(closure) = closure else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(2 + closure.shape.len() + closure.states.len());
        out.push(u);
        out.push(closure.states.len() as u32);
        out.extend_from_slice(&closure.shape);
        for &k in &closure.states {
            let mut bits = self.space.accepting(k) as u32 | (self.space.spells_content(k) as u32) << 1;
            for kind in 0..stages {
                if let Some(zm) = self.space.mark(k, kind) {
                    bits |= (1 | (self.live(Node::piece_start(self.text_id(zm)?))? as u32) << 1) << (2 + 2 * kind);
                }
            }
            out.push(bits);
        }
        // The piece starts after each region's boundaries: whether each is live.
        for (region, slice) in &regions {
            let mut bits = 0u32;
            for (i, &start) in region.piece_starts.iter().enumerate() {
                let zm = start.with_regex_state(slice.paired(start.regex_state()));
                let live = self.live(Node::piece_start(self.text_id(zm)?))?;
                // A region's piece start stands for one per normal-form state. Dead at the
                // start, it is dead at every state; live, it must be live at the inert-only
                // state too to be live at every state.
                if let Some(nf) = normal.filter(|_| live) {
                    let inert_only = zm.with_normal_state(nf.inert_only());
                    if !self.live(Node::piece_start(self.text_id(inert_only)?))? {
                        return Ok(None);
                    }
                }
                bits |= (live as u32) << (i % 32);
                if i % 32 == 31 {
                    out.push(std::mem::take(&mut bits));
                }
            }
            out.push(bits);
        }
        Ok(Some(out.into()))
    }

    /// [`Engine::first_tokens`] of a text state whose regex state, determinized on demand, is a
    /// union of threads ([`TextRegex::threads`]): the union of the threads' sets, each found,
    /// keyed or memoized as any text state's set is, and memoized. `None` where the regex state
    /// takes fewer than [`THREAD_MIN_BYTES`] bytes or makes no threads, and in guides with
    /// special tokens.
    ///
    /// Exact: a token's successor is live iff some text after it is canonical and in the
    /// language, and the language is the union of the threads'; every other component of the
    /// text state (pre-tokenizer, added-token prefix, normal form, split) is the text's, the
    /// same in every thread. Guides with special tokens are left out, as keys leave them out:
    /// their markers leave the piece through the automaton rather than the text's bytes, which
    /// this has not been checked against.
    ///
    /// Why: a URL's host after `https://` (`Github_easy/o21869`) is a union of the user name's
    /// `[^\s:@]+`, the host's `[a-zA-Z\d.-]+` and their exits, new at every character, and no
    /// slice fits the union: each step walked the whole trie, 3-9 ms on Llama 3 (the largest
    /// mask of issue 17's documents on every tokenizer), while each thread is the same state at
    /// every step, sliced, and found once.
    fn first_tokens_of_threads(&self, z: TextId, u: u32) -> Result<Option<Arc<TokenSet>>> {
        if self.space.num_tokens() > 0 {
            return Ok(None);
        }
        let key = self.key(z);
        let q = key.regex_state();
        if self.space.bytes_taken(q).len() < THREAD_MIN_BYTES || UNION_DEPTH.get() >= MAX_UNION_DEPTH {
            return Ok(None);
        }
        let Some(threads) = self.space.dfa().threads(q) else { return Ok(None) };
        // A thread that most of its bytes lead back to `q` is no thread of its own: its set
        // would be its neighbour's (`Engine::neighbour`), `q`'s, the set asked for
        // (`(?:(?:.)+)*`, found by the `regex_guide` fuzz target).
        if threads.iter().any(|&t| self.most_common_target(t) == Some(q)) {
            return Ok(None);
        }
        let _depth = UnionDepth::enter();
        let mut bits = vec![0u32; crate::util::bitset::words_for(self.parts.vocab.vocab_size())].into_boxed_slice();
        #[cfg(test)]
        let threads = &threads[..threads.len() - self.threads_dropped.load(Ordering::Relaxed) as usize];
        for &thread in threads.iter() {
            self.first_tokens(self.text_id(key.with_regex_state(thread))?, u)?.or_into(&mut bits);
        }
        self.thread_unions.fetch_add(1, Ordering::Relaxed);
        let set = TokenSet::from_bitset(bits);
        self.charge(set.heap_bytes() + BYTES_PER_ENTRY)?;
        Ok(Some(self.first.insert_if_absent((z, u), self.parts.same_dense_set(Arc::new(set)))))
    }

    /// [`Engine::first_tokens`] found from the text state's groups and searches, or from a
    /// neighbour's set ([`Engine::neighbour`]), and memoized.
    fn find_first_tokens(&self, z: TextId, u: u32) -> Result<Arc<TokenSet>> {
        let set = match self.neighbour(self.key(z).regex_state()) {
            Some(q) => self.first_tokens_beside(z, u, q)?,
            None => self.live_tokens(z, u, &*self.groups(z)?, None)?,
        };
        self.charge(set.heap_bytes() + BYTES_PER_ENTRY)?;
        Ok(self.first.insert_if_absent((z, u), self.parts.same_dense_set(Arc::new(set))))
    }

    /// A state that regex state `q` goes along with on almost every byte: the state `q'` most
    /// of `q`'s bytes lead to, where `q'` loops itself and the two part on at most
    /// [`NEIGHBOUR_MAX_BYTES`] bytes (`δ(q, b) ≠ δ(q', b)`). `None` where `q` takes fewer than
    /// [`NEIGHBOUR_MIN_BYTES`] bytes.
    ///
    /// Why: a regex that watches for a suffix inside a free class (`(.*?)\.alfred3?workflow`,
    /// a URL's `[^\s?#]*` before its closing `"`) runs that watch beside everything after it,
    /// so each step of the document is a new, wide regex state (a key literal's position, the
    /// `.alf` of the suffix), unsliced or sliced with a few thousand exit tokens: 2-9 ms a
    /// first visit on Llama 3, at every step. Yet its set is its loop state's but for the
    /// tokens whose bytes part the two ([`Engine::first_tokens_beside`]).
    fn neighbour(&self, q: u32) -> Option<u32> {
        let (space, dfa) = (&self.space, self.space.dfa());
        if space.bytes_taken(q).len() < NEIGHBOUR_MIN_BYTES {
            return None;
        }
        let loop_state = self.most_common_target(q).filter(|&t| t != q)?;
        if self.most_common_target(loop_state) != Some(loop_state) {
            return None;
        }
        let mut either = space.bytes_taken(q);
        either.union(&space.bytes_taken(loop_state));
        let parting = either.iter().filter(|&b| dfa.next(q, b) != dfa.next(loop_state, b)).count();
        (parting <= NEIGHBOUR_MAX_BYTES).then_some(loop_state)
    }

    /// The state most of the bytes regex state `q` takes lead to. Over the bytes it takes: a
    /// grammar's automaton builds each state it steps to, and a trie walk from the state would
    /// step to the same.
    fn most_common_target(&self, q: u32) -> Option<u32> {
        let dfa = self.space.dfa();
        let mut targets: Vec<u32> =
            self.space.bytes_taken(q).iter().map(|b| dfa.next(q, b)).filter(|&t| t != DEAD).collect();
        targets.sort_unstable();
        (targets.chunk_by(|a, b| a == b)).max_by_key(|run| run.len()).map(|run| run[0])
    }

    /// The first-token set of `(z, u)` from that of `(z', u)`, where `z'` is `z` with regex
    /// state `q` in place of its own ([`Engine::neighbour`]).
    ///
    /// A text step is the regex's step beside the pre-tokenizer's and the added tokens', which
    /// do not look at the regex state. So once a token's bytes have led `z` and `z'` to text
    /// states with one regex state, the two walks are one from there on: the token has one
    /// successor node from both, and is in one set exactly when in the other. A walk of the
    /// trie from the pair, pruned where the two meet, finds every other token: those where `z`
    /// dies (out of the set) and those walked on from `z` (judged as usual). On the suffix
    /// watch above, a few hundred tokens instead of ~120,000. The neighbour `q` is its own most
    /// common target, so its set is found without a neighbour: derivations never chain.
    ///
    /// Only subtrees where `z'` walks on and `z` does not are taken out of `z'`'s set: where
    /// the pre-tokenizer stops both (a piece start that may not begin with a letter), no token
    /// of the subtree is in either set. Taking those out too cleared ~80,000 ids one by one
    /// per set at such piece starts: 46 % of the mask fills' instructions of
    /// `Github_hard/o43084` (`{1,}` strings), and 15-33 % over 60 schemas of issue 17's sample
    /// (without and with slice sets on disk; `benches/instructions.py`, Llama 3).
    fn first_tokens_beside(&self, z: TextId, u: u32, q: u32) -> Result<TokenSet> {
        let key = self.key(z);
        let base = self.first_tokens(self.text_id(key.with_regex_state(q))?, u)?;
        self.check_clock("a trie walk beside a neighbour's")?;
        let (trie, tok) = (&self.parts.trie, &*self.parts.tok);
        let mut walked = Walked::default();
        let mut own = Vec::new();
        let mut dead = Vec::new();
        trie.for_each_walk_or_leave(
            (key, q),
            |(k, r), b| {
                let (k, r) = (self.space.byte(k, b)?, self.regex_step(r, b));
                (k.regex_state() != r).then_some((k, r))
            },
            |t, (to, _)| {
                own.push(t);
                push_walked(&mut walked, t, to, class_or_lone(tok, t));
            },
            |(k, r), b, node| {
                // Where the pre-tokenizer or an added token stops both walks, the subtree's
                // tokens are in neither set: only a byte that `z`'s regex alone refuses parts
                // them. (`r` may be DEAD, which a text state must not hold.)
                if self.regex_step(r, b) != DEAD
                    && self.space.byte(k, b).is_none()
                    && self.space.byte(k.with_regex_state(r), b).is_some()
                {
                    dead.push(node);
                }
            },
        );
        // The same for the split tokens `u` continues by, judged by their continuations.
        let conts = self.parts.splits.next_tokens(u);
        let parted: Vec<bool> =
            conts.iter().map(|&(t, _)| !self.walks_meet(key, q, self.parts.vocab.token_bytes(t))).collect();
        let judged = self.live_tokens(z, u, &self.assemble(walked, None)?, Some(&parted))?;
        let mut bits = vec![0u32; crate::util::bitset::words_for(self.parts.vocab.vocab_size())].into_boxed_slice();
        base.or_into(&mut bits);
        let parted_conts = conts.iter().zip(&parted).filter(|&(_, &parted)| parted).map(|(&(t, _), _)| t);
        let dead_tokens = dead.iter().flat_map(|&node| trie.subtree_tokens(node).iter().copied());
        own.into_iter()
            .chain(dead_tokens)
            .chain(parted_conts)
            .for_each(|t| crate::util::bitset::clear(&mut bits, t as usize));
        judged.or_into(&mut bits);
        self.by_neighbour.fetch_add(1, Ordering::Relaxed);
        Ok(TokenSet::from_bitset(bits))
    }

    /// The regex state after byte `b` from `q`, [`DEAD`] included.
    fn regex_step(&self, q: u32, b: u8) -> u32 {
        match q {
            DEAD => DEAD,
            q => self.space.dfa().next(q, b),
        }
    }

    /// Whether `bytes` lead text state `key` and regex state `q` to one regex state (then on
    /// one walk) before `key`'s walk dies.
    fn walks_meet(&self, mut key: TextKey, mut q: u32, bytes: &[u8]) -> bool {
        for &b in bytes {
            let Some(next) = self.space.byte(key, b) else { return false };
            (key, q) = (next, self.regex_step(q, b));
            if key.regex_state() == q {
                return true;
            }
        }
        false
    }

    /// The tokens of `groups` (a text state `z`'s, or some of its tokens) whose successor from
    /// `(z, u)` is live, with the split tokens `u` continues by (those `judge` marks, if given)
    /// judged by their continuations.
    fn live_tokens(&self, z: TextId, u: u32, groups: &Groups, judge: Option<&[bool]>) -> Result<TokenSet> {
        let parts = &*self.parts;
        let conts = parts.splits.next_tokens(u);
        let mut tokens: Vec<u32> = Vec::new();
        // With a slice, the set starts as every slice token and its dead groups are taken out
        // (a JSON string's contents: ~120,000 tokens in ~20,000 groups, nearly all live);
        // without, the live groups' tokens are gathered.
        let mut bits: Option<Box<[u32]>> = groups.slice_bits();
        // Hubs of the slice's certificates, proved live or dead once per set (see
        // `crate::lazy::slice::Certificates`): a slice group whose hub is live is live.
        let certified = groups.certified();
        // A hub is live where its root is (one search for the hubs of a root), else judged on
        // its own.
        let mut hub_live: Vec<Option<bool>> = vec![None; certified.map_or(0, |(slice, _)| slice.num_hubs())];
        let mut root_live: Vec<Option<bool>> = vec![None; certified.map_or(0, |(slice, _)| slice.num_roots())];
        // At a counted position, the nodes of its string may be judged at its horizon (see
        // `crate::lazy::horizon` and `Engine::live_by_horizon`).
        if let Some((_, slice_use)) = certified {
            self.table_counts(self.key(z).regex_state(), slice_use)?;
        }
        let node_live = |(key, side, split): Hub, slice_use: &SliceUse| -> Result<bool> {
            match slice_use.target(key) {
                Some(to) => self.live(Node { text: self.text_id(to)?, side, split }),
                None => Ok(false),
            }
        };
        // Each call site reads `hub_live` first and judges a hub here only on its first use: a
        // JSON string's ~20,000 groups share a few hundred hubs, and a call per group was a
        // tenth of Mistral-7B's mask instructions on issue 18's schemas.
        let mut judge_hub = |h: u32, hub_live: &mut [Option<bool>]| -> Result<bool> {
            let (slice, slice_use) = certified.expect("hubs come with certificates");
            let r = slice.root_of(h);
            let root = match root_live[r as usize] {
                Some(known) => known,
                None => *root_live[r as usize].insert(node_live(slice.root(r), slice_use)?),
            };
            let live = root || node_live(slice.hub(h), slice_use)?;
            hub_live[h as usize] = Some(live);
            Ok(live)
        };
        // Without a slice and with few groups, most candidates (split starters too) are
        // non-canonical prefixes of the canonical tokens, dead by their pair conditions (see
        // `Engine::dead_by_pairs`).
        let narrow = bits.is_none() && groups.len() <= NARROW_GROUPS;
        let mut pending: Vec<Group> = Vec::new();
        let mut settled = 0;
        for target in groups.by_target() {
            // The groups whose liveness is not settled by a hub.
            let unsettled: Box<dyn Iterator<Item = Group>> = match certified {
                Some((slice, _)) => {
                    pending.clear();
                    for &j in target.slice_targets() {
                        let (hubs, complete) = slice.hubs_of_target(j);
                        let mut all_live = complete;
                        for &h in hubs {
                            all_live &= match hub_live[h as usize] {
                                Some(known) => known,
                                None => judge_hub(h, &mut hub_live)?,
                            };
                        }
                        if all_live {
                            settled += slice.num_groups_of(j);
                            continue;
                        }
                        for (k, g) in target.slice_groups(j).enumerate() {
                            let h = slice.hub_of(j, k);
                            let live = h != NO_HUB
                                && match hub_live[h as usize] {
                                    Some(known) => known,
                                    None => judge_hub(h, &mut hub_live)?,
                                };
                            if !live {
                                pending.push(g);
                            } else {
                                settled += 1;
                            }
                        }
                    }
                    Box::new(pending.drain(..).chain(target.own()))
                }
                None => Box::new(target.iter()),
            };
            // Whether the target's piece may end there with a live piece start after it: then
            // every class node `(to, c, NONE)` is live, which spares a fact per group. Found at
            // its first group with a class.
            let mut exit: Option<Exit> = None;
            let many = target.len() >= WITNESS_MIN_CLASSES;
            for g in unsettled {
                if g.class != LONE && exit.is_none() {
                    exit = Some(self.exit(g.to, many)?);
                }
                let exits_live = g.class != LONE
                    && match &exit {
                        Some(Exit::Boundary) => true,
                        Some(Exit::Tokens(witnesses)) => {
                            witnesses.iter().any(|&t| self.allows_token(Side::InPiece(g.class), t))
                        }
                        None => false,
                    };
                let node = Node { text: g.to, side: g.class, split: NONE };
                let live = exits_live || {
                    let dead = self.dead_by_successors(node)? || (narrow && self.dead_by_pairs(node)?);
                    !dead && self.live(node)?
                };
                match bits.as_mut() {
                    Some(bits) if g.is_shared() && !live => {
                        groups.tokens(&g).iter().for_each(|&t| crate::util::bitset::clear(bits, t as usize))
                    }
                    Some(bits) if !g.is_shared() && live => {
                        groups.tokens(&g).iter().for_each(|&t| crate::util::bitset::set(bits, t as usize))
                    }
                    Some(_) => {}
                    None if live => tokens.extend_from_slice(groups.tokens(&g)),
                    None => {}
                }
            }
        }
        self.settled_by_hubs.fetch_add(settled, Ordering::Relaxed);
        // A token continuing a lone token's split is judged by its continuation instead of its
        // group: out of the groups' tokens (after collecting them, at one lookup per split token
        // rather than one per group token), back in when its continuation is live.
        let mut live_conts = Vec::new();
        let key = self.key(z);
        // At a piece start of a sliced state, a split starter whose hub is live is live (no
        // walk, no search): the slice set certified each from its start.
        let certified_conts = certified.filter(|_| u == ROOT).map(|(slice, _)| slice);
        // A split token whose first byte the regex state does not take has no walk: most of the
        // 318 split starters at a piece start on Llama 3, each a text step saved.
        let first_bytes = self.space.bytes_taken(key.regex_state());
        for (i, &(t, child)) in conts.iter().enumerate() {
            if judge.is_some_and(|judge| !judge[i]) {
                continue;
            }
            if let Some(h) = certified_conts.map(|slice| slice.cont_hub(i)).filter(|&h| h != NO_HUB) {
                let live = match hub_live[h as usize] {
                    Some(known) => known,
                    None => judge_hub(h, &mut hub_live)?,
                };
                if live {
                    live_conts.push(t);
                    continue;
                }
            }
            if !first_bytes.contains(parts.split_first_byte(u, i)) {
                continue;
            }
            if let Some(to) = self.space.walk(key, parts.vocab.token_bytes(t)) {
                let n = Node { text: self.text_id(to)?, side: class_or_lone(&parts.tok, t), split: child };
                if !(narrow && self.dead_by_pairs(n)?) && self.live(n)? {
                    live_conts.push(t);
                }
            }
        }
        let words = crate::util::bitset::words_for(parts.vocab.vocab_size());
        if bits.is_none() && tokens.len() > words {
            let mut gathered = vec![0u32; words].into_boxed_slice();
            tokens.iter().for_each(|&t| crate::util::bitset::set(&mut gathered, t as usize));
            bits = Some(gathered);
        }
        let set = if let Some(mut bits) = bits {
            conts.iter().for_each(|&(t, _)| crate::util::bitset::clear(&mut bits, t as usize));
            live_conts.iter().for_each(|&t| crate::util::bitset::set(&mut bits, t as usize));
            TokenSet::from_bitset(bits)
        } else {
            // Sorted, the split tokens go in one merge with `conts` (sorted too) instead of a
            // binary search per token; the live ones, found in `conts`' order, merge back in.
            sort_token_ids(&mut tokens, words);
            let mut k = 0;
            tokens.retain(|&t| {
                while k < conts.len() && conts[k].0 < t {
                    k += 1;
                }
                k == conts.len() || conts[k].0 != t
            });
            TokenSet::from_sorted(&merge_sorted(tokens, &live_conts), words)
        };
        Ok(set)
    }

    /// Fills first-token sets ahead of decoding for up to `seconds` (`Limits::prefetch_seconds`):
    /// breadth first from the start over the members a decoder can reach, that is the targets
    /// of live tokens `(to, NONE)` and the live piece starts after their boundaries
    /// `(zm, ROOT)`.
    ///
    /// What it fills is what a mask there would fill, with the same facts, so masks never
    /// change; it only moves first visits from decoding into the compile. It stops early, with
    /// everything it recorded still true, where a fill reaches its clock or any limit, and once
    /// it holds half of `max_product_states` text states or half of the memo's bytes, so that it
    /// never takes from decoding the room its limits leave. Lone-token split members, byte
    /// fallback and special tokens are not followed (a mask fills those on its first visit).
    pub(crate) fn prefetch(&self, seconds: f64) {
        if seconds.is_nan() || seconds <= 0.0 {
            return;
        }
        let deadline = Deadline::after_seconds(Some(seconds)).timing("prefetching a lazy guide");
        let _guard = ClockGuard(CALL_DEADLINE.with(|d| d.replace(Some(deadline))));
        let start = self.text_start(self.start());
        let mut seen: FxHashSet<(TextId, u32)> = FxHashSet::from_iter([(start.text, start.split)]);
        let mut queue = std::collections::VecDeque::from([(start.text, start.split)]);
        while let Some((z, u)) = queue.pop_front() {
            let full =
                self.texts.len() > self.max_states / 2 || self.bytes.load(Ordering::Relaxed) > self.max_bytes / 2;
            if full || self.prefetch_from(z, u, &mut seen, &mut queue).is_err() {
                break;
            }
        }
    }

    /// One member of [`Engine::prefetch`]: its first tokens, and the new members they lead to.
    fn prefetch_from(
        &self,
        z: TextId,
        u: u32,
        seen: &mut FxHashSet<(TextId, u32)>,
        queue: &mut std::collections::VecDeque<(TextId, u32)>,
    ) -> Result<()> {
        let first = self.first_tokens(z, u)?;
        let groups = self.groups(z)?;
        for target in groups.by_target() {
            let mut live = target.iter().filter(|g| g.class != LONE && first.contains(groups.tokens(g)[0]));
            let Some(to) = live.next().map(|g| g.to) else { continue };
            if seen.insert((to, NONE)) {
                queue.push_back((to, NONE));
            }
            for kind in 0..self.space.num_stages() {
                let Some(zm) = self.space.mark(self.key(to), kind) else { continue };
                let zm = self.text_id(zm)?;
                if seen.insert((zm, ROOT)) && self.live(Node::piece_start(zm))? {
                    queue.push_back((zm, ROOT));
                }
            }
        }
        Ok(())
    }

    /// The byte-fallback moves from `(z, side)`: the token of each byte whose successor is live
    /// (the successor itself is found again by a step that takes the token).
    ///
    /// Memoized per `z` and the side's [`fallback_context`]: every token's end steps by a byte
    /// alike, so in a string's body, where each step ends at a new tokenizer state (a new
    /// automaton state, a first visit), the moves are found once per text state instead of
    /// once per step. Found per step, they were a third of Mistral-7B's mask-fill instructions
    /// on issue 18's grammars: ~120 bytes the regex takes, each stepped through the tokenizer,
    /// the text (an interned state) and liveness.
    ///
    /// Only the bytes the regex takes from `z` are tried: all 256 were 42 % of the
    /// instructions of Mistral-7B's median first visits, where a narrow state takes a byte or
    /// two; and only those the tokenizer takes too ([`TokenizerDfa::fallback_bytes`]).
    ///
    /// [`fallback_context`]: crate::tokenizer_dfa::TokenizerDfa::fallback_context
    pub(crate) fn fallback_moves(&self, z: TextId, side: u32) -> Result<Arc<[u32]>> {
        let tok = &*self.parts.tok;
        let Some(fallback) = tok.fallback_tokens() else { return Ok(self.no_fallback_moves.clone()) };
        let memo = (z, tok.fallback_context(side));
        if let Some(moves) = self.fallback.get(&memo) {
            return Ok(moves);
        }
        let key = self.key(z);
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for b in tok.fallback_bytes(side).intersection(&self.space.bytes_taken(key.regex_state())).iter() {
            let next = tok.step_byte(side, b).expect("a byte of fallback_bytes");
            if let Some(to) = self.space.byte(key, b) {
                if self.completes_live(to, next, &mut ends)?
                    || self.live(Node { text: self.text_id(to)?, side: next, split: NONE })?
                {
                    out.push(fallback[b as usize]);
                }
            }
        }
        self.charge(BYTES_PER_ENTRY + out.len() * 4)?;
        Ok(self.fallback.insert_if_absent(memo, out.into()))
    }

    /// Whether node `(k, side, NONE)`, inside a byte-fallback character, is live by a witness:
    /// byte-fallback successors that complete the character (bytes both the tokenizer and the
    /// text take, tried depth first, at most [`COMPLETION_STEPS`] of them), after which the
    /// node is live. `false` proves nothing: the caller judges the node itself. `ends` holds
    /// the nodes after a character judged so far, `(text, side, live)`.
    ///
    /// Sound: each step is a successor of [`Engine::next_successor`]'s byte-fallback phase, so
    /// a live end makes every node on the way live.
    ///
    /// Why: in a string's contents, every lead byte's node was judged on its own, interned and
    /// probed along the shortest way, whose first completion is often a character in the
    /// vocabulary, which byte fallback may not spell (the probe then fails and a full search
    /// proves the node); while the completions end at one node, the contents after a character,
    /// judged once. On Mistral-7B, a string value's first mask spent 20-66 µs of its 80-130 µs
    /// on its ~49 lead bytes, up to 37 µs of it on one (`0xE1`).
    fn completes_live(&self, k: TextKey, side: u32, ends: &mut Vec<(TextKey, u32, bool)>) -> Result<bool> {
        let tok = &*self.parts.tok;
        if !matches!(self.side(side), Side::InChar(_)) {
            return Ok(false);
        }
        // The nodes inside the character so far, each with the next byte to try.
        let mut way = vec![(k, side, 0u32)];
        let mut steps = 0;
        while let Some((at, s, from)) = way.last_mut() {
            let bytes = tok.fallback_bytes(*s).intersection(&self.space.bytes_taken(at.regex_state()));
            let Some(c) = bytes.first_from(*from) else {
                way.pop();
                continue;
            };
            *from = c as u32 + 1;
            steps += 1;
            if steps > COMPLETION_STEPS {
                return Ok(false);
            }
            let (at, s) = (*at, *s);
            let Some(to) = self.space.byte(at, c) else { continue };
            let next = tok.step_byte(s, c).expect("a byte of fallback_bytes");
            if matches!(self.side(next), Side::InChar(_)) {
                way.push((to, next, 0));
                continue;
            }
            let live = match ends.iter().find(|&&(t, n, _)| t == to && n == next) {
                Some(&(_, _, live)) => live,
                None => {
                    let live = self.live(Node { text: self.text_id(to)?, side: next, split: NONE })?;
                    ends.push((to, next, live));
                    live
                }
            };
            if live {
                #[cfg(test)]
                self.completed_moves.fetch_add(1, Ordering::Relaxed);
                return Ok(true);
            }
        }
        Ok(false)
    }
}
