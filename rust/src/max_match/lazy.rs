//! Lazy WordPiece guides: states built as decoding reaches them, each successor allowed only once
//! it is proven to reach acceptance.
//!
//! # Why a proof per successor
//! A mask must not allow a token after which no canonical sequence can finish, and the pending
//! longest-match checks can make a state a dead end although its byte state is not: after `una`
//! in a regex that wants `unaffable`, a continuation that a longer entry would swallow is not
//! written by the tokenizer, so the word may have no canonical way on. Eager guides find dead
//! ends by trimming the whole automaton; a lazy guide decides each successor on its own:
//! * **quick**: its byte state accepts, or it was settled before, or its word can end here and a
//!   new word can start and finish (the *boundary* state: the byte state with a closed word,
//!   settled once and shared by every state with that byte state, whatever its checks);
//! * **probe**: a greedy run of one-byte tokens (a space and a letter, or `##` and a letter),
//!   each the one that leaves the fewest bytes to acceptance, up to [`PROBE_STEPS`] tokens, that
//!   ends in a quick state: a real canonical path, found without walking the trie;
//! * **search**: best-first over successors (by bytes left to acceptance), one trie walk per
//!   state, until a quick state (live) or nothing is left (every state seen is dead).
//!
//! Every state on a path found is settled live (and the boundary state before each
//! word-initial token of it); a search that runs out settles everything it saw dead. So a
//! verdict never depends on which thread or which order settled it: the masks are the same
//! under any interleaving, and the tables are read and written under short locks, never held
//! across a walk.
//!
//! # Costs and limits
//! A mask is a trie walk (2–5 ms for all of BERT's vocabulary on a first visit, then cached by
//! the guide) plus a verdict per distinct successor, almost all quick. The tokens that
//! start a word are most of a mask and do not depend on the checks of the word before, so they
//! are settled once per byte state where a word starts and shared (`word_starts`): a new state
//! of free text then walks only the continuations its checks leave. Searches walk the trie once
//! per state they expand; the states settled and searched are bounded by `max_product_states`,
//! the word-start masks by `max_guide_bytes`, and each call by `max_compile_seconds`, past
//! which the call fails with `LimitExceeded` and the guide stays usable.

use std::collections::BinaryHeap;
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use super::entries::{EntryTrie, NO_TOKEN};
use super::walk::{counts_word_chars, word_start, Language, State, Walk, Word};
use crate::error::{Error, Result};
use crate::limits::{Deadline, Limits};
use crate::regex::byte_dfa::ByteDfa;
use crate::util::bitset;

/// Most one-byte tokens a probe tries before a search takes over.
pub const PROBE_STEPS: usize = 64;

/// See the module docs.
pub struct LazyMaxMatch {
    trie: Arc<EntryTrie>,
    dfa: ByteDfa,
    count_chars: bool,
    max_word_chars: usize,
    /// `max_product_states` bounds the states built, settled and searched; `max_compile_seconds`
    /// each call; the rest is what `materialize` builds the eager guide under.
    limits: Limits,
    /// The states decoders reached, by id (the start is 0).
    states: RwLock<Interned>,
    /// Whether a state can reach acceptance, for the states settled so far.
    settled: RwLock<FxHashMap<State, bool>>,
    /// The live tokens that start a word, by the byte state where the word starts: shared by
    /// every state with that word start (see `walk::word_start`).
    word_starts: RwLock<FxHashMap<u32, Arc<[u32]>>>,
}

#[derive(Default)]
struct Interned {
    list: Vec<State>,
    ids: FxHashMap<State, u32>,
}

impl LazyMaxMatch {
    /// A lazy canonical guide of `dfa` over the entries of a WordPiece vocabulary, with its start
    /// settled: `EmptyLanguage` when no canonical sequence is accepted.
    pub fn new(trie: Arc<EntryTrie>, dfa: ByteDfa, max_word_chars: usize, limits: Limits) -> Result<LazyMaxMatch> {
        let count_chars = counts_word_chars(&dfa, Language::Canonical, max_word_chars);
        let guide = LazyMaxMatch {
            trie,
            dfa,
            count_chars,
            max_word_chars,
            limits,
            states: RwLock::default(),
            settled: RwLock::default(),
            word_starts: RwLock::default(),
        };
        let start = guide.walk().start();
        if guide.dfa.is_empty() || !guide.live(&start, &guide.deadline())? {
            return Err(Error::EmptyLanguage("no canonical token sequence spells a string of the regex".into()));
        }
        guide.intern(start)?;
        Ok(guide)
    }

    fn walk(&self) -> Walk<'_> {
        Walk::new(&self.trie, &self.dfa, Language::Canonical, self.count_chars, self.max_word_chars)
    }

    fn deadline(&self) -> Deadline {
        Deadline::after_seconds(self.limits.max_compile_seconds)
    }

    /// The regex's byte DFA.
    pub fn dfa(&self) -> &ByteDfa {
        &self.dfa
    }

    /// The vocabulary's entries.
    pub fn entries(&self) -> &EntryTrie {
        &self.trie
    }

    /// `max_input_chars_per_word`.
    pub fn max_word_chars(&self) -> usize {
        self.max_word_chars
    }

    /// The limits the guide was compiled under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// States built so far.
    pub fn num_states(&self) -> usize {
        self.states.read().unwrap_or_else(|e| e.into_inner()).list.len()
    }

    /// Bytes the guide's tables hold (an estimate: the word-start masks, which
    /// `max_guide_bytes` bounds, plus the states and verdicts, which `max_product_states`
    /// bounds), and `max_guide_bytes`.
    pub fn memo_bytes(&self) -> (usize, usize) {
        let entry = |s: &State| std::mem::size_of::<State>() + 4 * s.pending.len();
        let states = self.states.read().unwrap_or_else(|e| e.into_inner());
        // A state is held twice (by id and in the map) plus its id.
        let state_bytes: usize = states.list.iter().map(|s| 2 * entry(s) + 4).sum();
        drop(states);
        let settled: usize = self.settled.read().unwrap_or_else(|e| e.into_inner()).keys().map(|s| entry(s) + 1).sum();
        let masks: usize =
            self.word_starts.read().unwrap_or_else(|e| e.into_inner()).values().map(|m| 4 * m.len() + 4).sum();
        (state_bytes + settled + masks, self.limits.max_guide_bytes)
    }

    fn state(&self, id: u32) -> State {
        self.states.read().unwrap_or_else(|e| e.into_inner()).list[id as usize].clone()
    }

    fn intern(&self, state: State) -> Result<u32> {
        let mut table = self.states.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = table.ids.get(&state) {
            return Ok(id);
        }
        let id = table.list.len() as u32;
        self.check_size(id as usize + 1, "states of the lazy WordPiece guide")?;
        table.ids.insert(state.clone(), id);
        table.list.push(state);
        Ok(id)
    }

    fn check_size(&self, count: usize, what: &str) -> Result<()> {
        if count > self.limits.max_product_states {
            return Err(Error::LimitExceeded {
                limit: "max_product_states",
                value: self.limits.max_product_states.to_string(),
                what: what.to_string(),
            });
        }
        Ok(())
    }

    pub fn is_final(&self, state: u32) -> bool {
        self.dfa.is_accepting(self.state(state).byte_state)
    }

    /// Bytes from `state` to acceptance in the regex (a hint for walks).
    pub fn distance_hint(&self, state: u32) -> u32 {
        self.dfa.distance_to_accept(self.state(state).byte_state)
    }

    /// The tokens allowed in `state` (EOS not included): those whose successor is live.
    pub fn write_mask(&self, state: u32, out: &mut [u32]) -> Result<()> {
        let from = self.state(state);
        let deadline = self.deadline();
        out.fill(0);
        if let Some(start) = word_start(&self.dfa, &from) {
            let known = self.word_starts.read().unwrap_or_else(|e| e.into_inner()).get(&start).cloned();
            let tokens = match known {
                Some(tokens) => tokens,
                None => {
                    let mut walk = self.walk();
                    walk.starting_word(start);
                    let mut tokens = vec![0u32; out.len()];
                    self.allow_live(std::mem::take(&mut walk.out), &mut tokens, &deadline)?;
                    let tokens: Arc<[u32]> = tokens.into();
                    let mut cache = self.word_starts.write().unwrap_or_else(|e| e.into_inner());
                    let bytes = (cache.len() + 1) * out.len() * 4;
                    if bytes > self.limits.max_guide_bytes {
                        return Err(Error::LimitExceeded {
                            limit: "max_guide_bytes",
                            value: self.limits.max_guide_bytes.to_string(),
                            what: format!("{bytes} bytes of word-start masks of the lazy WordPiece guide"),
                        });
                    }
                    cache.entry(start).or_insert(tokens).clone()
                }
            };
            out.copy_from_slice(&tokens);
        }
        let mut walk = self.walk();
        walk.continuing(&from);
        self.allow_live(std::mem::take(&mut walk.out), out, &deadline)
    }

    /// Sets the bits of the tokens in `successors` whose successor is live. Most are settled by
    /// their byte state alone (it accepts, or a word may end there and the text finish: the
    /// boundary state); the others one by one.
    fn allow_live(&self, successors: Vec<(u32, State)>, out: &mut [u32], deadline: &Deadline) -> Result<()> {
        let mut boundary_live: FxHashMap<u32, bool> = FxHashMap::default();
        let mut verdicts: FxHashMap<State, bool> = FxHashMap::default();
        for (token, next) in successors {
            let q = next.byte_state;
            let mut live = self.dfa.is_accepting(q);
            if !live && next.word != Word::None {
                live = match boundary_live.get(&q) {
                    Some(&v) => v,
                    None => {
                        let v = self.live(&boundary(&next), deadline)?;
                        boundary_live.insert(q, v);
                        v
                    }
                };
            }
            if !live {
                live = match verdicts.get(&next) {
                    Some(&v) => v,
                    None => {
                        let v = self.live(&next, deadline)?;
                        verdicts.insert(next, v);
                        v
                    }
                };
            }
            if live {
                bitset::set(out, token as usize);
            }
        }
        Ok(())
    }

    /// The state after `token`, `None` when the mask of `state` does not allow it.
    pub fn next_state(&self, state: u32, token: u32) -> Result<Option<u32>> {
        let from = self.state(state);
        let Some(next) = self.walk().step(&from, token) else { return Ok(None) };
        if !self.live(&next, &self.deadline())? {
            return Ok(None);
        }
        self.intern(next).map(Some)
    }

    /// Whether a final state can be reached from `state` (see the module docs).
    fn live(&self, state: &State, deadline: &Deadline) -> Result<bool> {
        if let Some(v) = self.quick(state) {
            return Ok(v);
        }
        if self.probe(state)? {
            return Ok(true);
        }
        self.search(state, deadline)
    }

    /// The verdict without a walk, when there is one.
    fn quick(&self, state: &State) -> Option<bool> {
        if self.dfa.is_accepting(state.byte_state) {
            return Some(true);
        }
        let settled = self.settled.read().unwrap_or_else(|e| e.into_inner());
        if let Some(&v) = settled.get(state) {
            return Some(v);
        }
        (state.word != Word::None && settled.get(&boundary(state)) == Some(&true)).then_some(true)
    }

    /// A greedy run of one-byte tokens towards acceptance; settles its path live when it ends in
    /// a live state.
    fn probe(&self, state: &State) -> Result<bool> {
        let walk = self.walk();
        let mut path = vec![state.clone()];
        let mut starts_word = Vec::new();
        for _ in 0..PROBE_STEPS {
            let at = path.last().expect("the path starts with `state`");
            let mut best: Option<(u32, State, bool)> = None;
            for (root, b) in [EntryTrie::WORD_START, EntryTrie::CONTINUATION]
                .into_iter()
                .flat_map(|r| (0..=127u8).map(move |b| (r, b)))
            {
                let Some(node) = self.trie.child(root, b) else { continue };
                let token = self.trie.nodes[node as usize].canonical;
                if token == NO_TOKEN {
                    continue;
                }
                let Some(next) = walk.step(at, token) else { continue };
                let distance = self.dfa.distance_to_accept(next.byte_state);
                if best.as_ref().is_none_or(|b| distance < b.0) && !path.contains(&next) {
                    best = Some((distance, next, root == EntryTrie::WORD_START));
                }
            }
            let Some((_, next, starts)) = best else { return Ok(false) };
            starts_word.push(starts);
            let verdict = self.quick(&next);
            path.push(next);
            match verdict {
                Some(true) => {
                    self.settle_path(&path, &starts_word)?;
                    return Ok(true);
                }
                Some(false) => return Ok(false),
                None => {}
            }
        }
        Ok(false)
    }

    /// Best-first search from `from` (see the module docs).
    fn search(&self, from: &State, deadline: &Deadline) -> Result<bool> {
        let mut walk = self.walk();
        // nodes[i] = (state, parent index, the token into it starts a word)
        let mut nodes: Vec<(State, usize, bool)> = vec![(from.clone(), usize::MAX, false)];
        let mut seen: FxHashMap<State, usize> = FxHashMap::default();
        seen.insert(from.clone(), 0);
        let mut frontier =
            BinaryHeap::from([std::cmp::Reverse((self.dfa.distance_to_accept(from.byte_state), 0usize))]);
        while let Some(std::cmp::Reverse((_, i))) = frontier.pop() {
            deadline.check("a lazy WordPiece guide's search for a way to acceptance")?;
            let at = nodes[i].0.clone();
            if i > 0 {
                match self.quick(&at) {
                    Some(true) => {
                        let mut path = Vec::new();
                        let mut starts = Vec::new();
                        let mut k = i;
                        while k != usize::MAX {
                            path.push(nodes[k].0.clone());
                            starts.push(nodes[k].2);
                            k = nodes[k].1;
                        }
                        path.reverse();
                        starts.reverse();
                        self.settle_path(&path, &starts[1..])?;
                        return Ok(true);
                    }
                    Some(false) => continue,
                    None => {}
                }
            }
            walk.successors(&at);
            for (token, next) in std::mem::take(&mut walk.out) {
                if seen.contains_key(&next) {
                    continue;
                }
                let starts = !self.trie.token(token).is_some_and(|e| e.continues);
                let k = nodes.len();
                self.check_size(k + 1, "states of a lazy WordPiece guide's search")?;
                seen.insert(next.clone(), k);
                frontier.push(std::cmp::Reverse((self.dfa.distance_to_accept(next.byte_state), k)));
                nodes.push((next, i, starts));
            }
        }
        let mut settled = self.settled.write().unwrap_or_else(|e| e.into_inner());
        self.check_size(settled.len() + nodes.len(), "settled states of the lazy WordPiece guide")?;
        for (state, _, _) in nodes {
            settled.insert(state, false);
        }
        Ok(false)
    }

    /// Settles every state of `path` live (it ends in a live state), and the boundary state
    /// before each token that starts a word (`starts_word[i]`: the token from `path[i]`).
    fn settle_path(&self, path: &[State], starts_word: &[bool]) -> Result<()> {
        let mut settled = self.settled.write().unwrap_or_else(|e| e.into_inner());
        self.check_size(settled.len() + 2 * path.len(), "settled states of the lazy WordPiece guide")?;
        for (i, state) in path.iter().enumerate() {
            settled.insert(state.clone(), true);
            if starts_word.get(i) == Some(&true) && state.word != Word::None {
                settled.insert(boundary(state), true);
            }
        }
        Ok(())
    }
}

/// The state where `state`'s word has just ended: a new word may start, nothing may continue.
fn boundary(state: &State) -> State {
    State { byte_state: state.byte_state, word: Word::Closed, word_chars: 0, pending: Box::new([]) }
}
