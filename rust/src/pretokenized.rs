//! Canonical guides for tokenizers that split the text before BPE (byte-level BPE with a
//! pre-tokenizer: GPT-2, Llama 3, Qwen2, cl100k, o200k, …).
//!
//! # What canonical means here
//! Such a tokenizer normalizes the text, cuts it into *pieces* with its pre-tokenizer (see
//! `crate::piece_machine`), and runs BPE on each piece alone; with `ignore_merges`, a piece that
//! is itself a vocabulary token is emitted whole first. So a token sequence is canonical iff
//! 1. every piece boundary of its text is a token boundary (no token spans two pieces);
//! 2. inside each piece, every adjacent token pair is canonical for the merge table (the
//!    tokenizer DFA's pair condition: BPE of a piece is pairwise-canonical exactly as BPE of a
//!    whole text, `crate::tokenizer_dfa`), and a lone piece token is emittable by the merges;
//! 3. with `ignore_merges`, a piece that spells a vocabulary token is that token alone. Only
//!    the *lone tokens* — those the merges would not produce from their own text — need a
//!    check: for any other token `t`, BPE of `t`'s text is `[t]`, so condition 2 already
//!    rejects every other split. A lone token is allowed exactly as a whole piece.
//! Pairs across a piece boundary are unconstrained.
//!
//! # The construction
//! [`crate::text_automaton`] combines the regex's byte DFA, the pre-tokenizer's automaton over
//! correctly *marked* texts, and a trie of lone tokens into one automaton `Z` over bytes and
//! marks. An *element* `(z, c)` pairs a state of `Z` with a tokenizer-side state `c`: a class of
//! the tokenizer DFA (the last token, inside the current piece), [`START`] (at a piece start: no
//! pair constraint, lone tokens allowed) or [`LONE`] (a lone token was just emitted: a piece
//! boundary must follow). A token `t` moves `(z, c)` to `(Z(z, t), class(t))` when `t` may
//! follow `c` inside a piece; an ε-move `(z, c) → (Z(z, |k), START)` puts a boundary of kind `k`
//! before the next token (allowed unless the piece just ended spells a lone token that was not
//! emitted whole). Elements are searched like CartesianMerge's product states (lazily tested
//! token groups, forward then backward), which keeps the *live* ones — those from which some
//! canonical continuation reaches acceptance.
//!
//! Whether a token boundary is a piece boundary can depend on text not generated yet (`" "`
//! before a word joins it, before a newline does not; `\s+(?!\S)` looks one character ahead),
//! so the guide state is a *set* of live elements. All elements of a set share `c` (the last
//! token's class), so a guide state is `(Zset, c)`, with the ε-moves taken implicitly. Its mask
//! is `(A \ F(c)) ∪ (B ∩ F(c))`: `A` the tokens with a live successor through any element, `B`
//! those with one through a boundary (where the pair constraint does not apply), `F(c)` the
//! tokenizer DFA's forbidden set. Every guide state holds a live element, so a decoder that
//! follows the masks can always finish.
//!
//! # Normalizers
//! With NFC or NFKC, `encode(decode(ids)) == ids` forces the text to be normalized. We restrict
//! it to characters whose normalization quick-check is *Yes* and whose canonical combining
//! class is 0: any string of those is normalized, whatever its context. This is sound and
//! exact for text without combining marks; strings that need a combining mark (or a
//! quick-check *Maybe* character) are not generated. Documented in the README.
//!
//! # Costs
//! One trie walk over `Z` per expanded text state (like the agnostic index, but through a hash
//! map per byte instead of a dense table), element and set searches like CartesianMerge's, and
//! two bitsets per `(Zset, mode)`. Limits: `max_product_states` bounds text states, elements
//! and guide states each; the compile deadline and `max_guide_bytes` apply as in CartesianMerge.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::bitset;
use crate::bytedfa::{ByteDfa, DEAD};
use crate::cartesian::ProductLimits;
use crate::error::{Error, Result};
use crate::guide::{Automaton, Guide, Method};
use crate::index::TokenTrie;
use crate::mask_cache::{MaskCache, DEFAULT_MAX_MASK_CACHE_BYTES};
use crate::text_automaton::{FrozenText, LoneTrie, PieceBoundaries, TextAutomaton};
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};
use crate::vocab::{Normalization, Vocabulary};

/// Tokenizer-side state at the start of a piece.
pub const START: u32 = u32::MAX - 2;
/// Tokenizer-side state after a lone token: only a piece boundary may follow.
pub const LONE: u32 = u32::MAX - 3;
const NONE: u32 = u32::MAX;

/// The lone tokens of a vocabulary under `ignore_merges`: allowed, not special, not emittable by
/// the merges from their own text.
pub fn lone_tokens(vocab: &Vocabulary, tok: &TokenizerDfa) -> Vec<u32> {
    (0..vocab.num_tokens() as u32)
        .filter(|&t| !vocab.is_never_allowed(t) && tok.class_of(t) == NO_CLASS && tok.fallback_byte(t).is_none())
        .filter(|&t| !vocab.token_bytes(t).is_empty())
        .collect()
}

/// Characters a normalizer leaves unchanged in any context (quick-check Yes, combining class 0),
/// as sorted inclusive ranges; `None` without a normalizer.
pub fn normalization_stable_chars(normalization: Normalization) -> Option<Vec<(char, char)>> {
    use unicode_normalization::char::canonical_combining_class;
    use unicode_normalization::{is_nfc_quick, is_nfkc_quick, IsNormalized};
    let quick: fn(std::iter::Once<char>) -> IsNormalized = match normalization {
        Normalization::None => return None,
        Normalization::Nfc => is_nfc_quick,
        Normalization::Nfkc => is_nfkc_quick,
    };
    let mut ranges: Vec<(char, char)> = Vec::new();
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        if canonical_combining_class(c) != 0 || quick(std::iter::once(c)) != IsNormalized::Yes {
            continue;
        }
        match ranges.last_mut() {
            Some((_, hi)) if (*hi as u32) + 1 == c as u32 || (*hi as u32 == 0xD7FF && c as u32 == 0xE000) => *hi = c,
            _ => ranges.push((c, c)),
        }
    }
    Some(ranges)
}

/// Token transitions from one text state with the same element target.
struct Group {
    to: u32,
    class: u32,
    tokens: Box<[u32]>,
}

#[inline]
fn some_allowed(tokens: &[u32], forbidden: &[u32]) -> bool {
    tokens.len() > forbidden.len() || tokens.iter().any(|t| forbidden.binary_search(t).is_err())
}

#[inline]
fn some_forbidden(tokens: &[u32], forbidden: &[u32]) -> bool {
    if forbidden.is_empty() {
        return false;
    }
    if tokens.len() < forbidden.len() {
        tokens.iter().any(|t| forbidden.binary_search(t).is_ok())
    } else {
        forbidden.iter().any(|t| tokens.binary_search(t).is_ok())
    }
}

fn too_many(max: usize, what: &str) -> Error {
    Error::LimitExceeded { limit: "max_product_states", value: max.to_string(), what: what.to_string() }
}

/// A registry of pairs with ids and a work queue.
struct Registry {
    items: Vec<(u32, u32)>,
    index: FxHashMap<(u32, u32), u32>,
    queue: VecDeque<u32>,
    max: usize,
    what: &'static str,
}

impl Registry {
    fn new(max: usize, what: &'static str) -> Registry {
        Registry { items: Vec::new(), index: FxHashMap::default(), queue: VecDeque::new(), max, what }
    }
    fn add(&mut self, p: (u32, u32)) -> Result<u32> {
        if let Some(&id) = self.index.get(&p) {
            return Ok(id);
        }
        if self.items.len() >= self.max {
            return Err(too_many(self.max, self.what));
        }
        let id = self.items.len() as u32;
        self.items.push(p);
        self.index.insert(p, id);
        self.queue.push_back(id);
        Ok(id)
    }
}

/// How a guide state's tokenizer side constrains its tokens.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Mode {
    /// At the start of the text: no pair constraint, lone tokens allowed, no boundary yet.
    Start,
    /// After a lone token: a boundary must come first.
    Lone,
    /// After a token with a class: the pair constraint inside the piece, or a boundary.
    Regular,
}

fn mode_of(c: u32) -> Mode {
    match c {
        START => Mode::Start,
        LONE => Mode::Lone,
        _ => Mode::Regular,
    }
}

/// Per `(Zset, mode)`: tokens with a live successor (`all`), and through a boundary (`free`).
struct SetTable {
    all: Box<[u32]>,
    free: Box<[u32]>,
}

/// Builds the canonical guide of `dfa` for a pre-tokenized `vocab`.
#[allow(clippy::too_many_arguments)]
pub fn build<M: PieceBoundaries>(
    vocab: &Arc<Vocabulary>,
    tokenizer_dfa: &Arc<TokenizerDfa>,
    trie: &TokenTrie,
    dfa: ByteDfa,
    machine: M,
    lone: LoneTrie,
    limits: &ProductLimits,
) -> Result<Guide> {
    let tok = tokenizer_dfa.as_ref();
    let max = limits.max_product_states;
    let mask_bytes = bitset::words_for(vocab.vocab_size()) * 4;
    let mut text = TextAutomaton::new(&dfa, machine, lone, max);

    // --- Elements, forward. ---
    let mut groups: FxHashMap<u32, Vec<Group>> = FxHashMap::default();
    let mut pending: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    let mut marks_of: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    let mut elements = Registry::new(max, "elements (text state, tokenizer state) of a pre-tokenized guide");
    elements.add((text.start(), START))?;
    while let Some(id) = elements.queue.pop_front() {
        limits.deadline.check("the pre-tokenized guide's forward search")?;
        let (z, c) = elements.items[id as usize];
        if !groups.contains_key(&z) {
            let g = token_groups(&mut text, trie, tok, z)?;
            limits.check_bytes(elements.items.len(), groups.len() + 1, mask_bytes)?;
            pending.insert(z, (0..g.len() as u32).filter(|&i| g[i as usize].class != LONE).collect());
            groups.insert(z, g);
        }
        let gs = &groups[&z];
        match mode_of(c) {
            Mode::Start => {
                for g in gs {
                    elements.add((g.to, g.class))?;
                }
            }
            Mode::Lone => {}
            Mode::Regular => {
                let forbidden = tok.forbidden(c);
                let mut keep = Vec::new();
                for &gi in &pending[&z] {
                    let g = &gs[gi as usize];
                    if elements.index.contains_key(&(g.to, g.class)) {
                        continue;
                    }
                    if some_allowed(&g.tokens, forbidden) {
                        elements.add((g.to, g.class))?;
                    } else {
                        keep.push(gi);
                    }
                }
                pending.insert(z, keep);
            }
        }
        if c != START && (c == LONE || !text.spells_lone_token(z)) {
            let ms = text.marks(z)?.to_vec();
            for &zm in ms.iter().filter(|&&zm| zm != DEAD) {
                elements.add((zm, START))?;
            }
            marks_of.insert(z, ms);
        }
    }

    // --- Elements, backward: which can reach acceptance. ---
    let n = elements.items.len();
    let mut not_live: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (id, &(z, _)) in elements.items.iter().enumerate() {
        not_live.entry(z).or_default().push(id as u32);
    }
    let mut group_preds: FxHashMap<(u32, u32), Vec<(u32, u32)>> = FxHashMap::default();
    for (&z, gs) in &groups {
        for (gi, g) in gs.iter().enumerate() {
            group_preds.entry((g.to, g.class)).or_default().push((z, gi as u32));
        }
    }
    let mut mark_preds: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (&z, ms) in &marks_of {
        for &zm in ms.iter().filter(|&&zm| zm != DEAD) {
            mark_preds.entry(zm).or_default().push(z);
        }
    }
    let mut live = vec![false; n];
    let mut work: VecDeque<u32> = VecDeque::new();
    for (id, &(z, c)) in elements.items.iter().enumerate() {
        if text.is_accepting(z)? && (c == LONE || !text.spells_lone_token(z)) {
            live[id] = true;
            work.push_back(id as u32);
        }
    }
    while let Some(id) = work.pop_front() {
        limits.deadline.check("the pre-tokenized guide's backward search")?;
        let (zt, ct) = elements.items[id as usize];
        if ct == START {
            for &zs in mark_preds.get(&zt).map_or(&[][..], |v| v.as_slice()) {
                let lone_piece = text.spells_lone_token(zs);
                let candidates = std::mem::take(not_live.get_mut(&zs).expect("over z"));
                let mut keep = Vec::with_capacity(candidates.len());
                for p in candidates {
                    if live[p as usize] {
                        continue;
                    }
                    let cp = elements.items[p as usize].1;
                    if cp != START && (cp == LONE || !lone_piece) && marks_of.get(&zs).is_some_and(|ms| ms.contains(&zt)) {
                        live[p as usize] = true;
                        work.push_back(p);
                    } else {
                        keep.push(p);
                    }
                }
                not_live.insert(zs, keep);
            }
            continue;
        }
        for &(zs, gi) in group_preds.get(&(zt, ct)).map_or(&[][..], |v| v.as_slice()) {
            let g = &groups[&zs][gi as usize];
            let candidates = std::mem::take(not_live.get_mut(&zs).expect("over z"));
            let mut keep = Vec::with_capacity(candidates.len());
            for p in candidates {
                if live[p as usize] {
                    continue;
                }
                let cp = elements.items[p as usize].1;
                let ok = match mode_of(cp) {
                    Mode::Start => true,
                    Mode::Lone => false,
                    Mode::Regular => g.class != LONE && some_allowed(&g.tokens, tok.forbidden(cp)),
                };
                if ok {
                    live[p as usize] = true;
                    work.push_back(p);
                } else {
                    keep.push(p);
                }
            }
            not_live.insert(zs, keep);
        }
    }
    if !live[0] {
        return Err(Error::EmptyLanguage(
            "no canonical token sequence spells a string of the regex (its strings are not representable by this tokenizer, or its pre-tokenizer never splits them so)".into(),
        ));
    }
    let live_set: FxHashSet<(u32, u32)> =
        elements.items.iter().zip(&live).filter(|(_, &l)| l).map(|(&e, _)| e).collect();
    drop(not_live);
    drop(group_preds);

    // --- Guide states: (Zset, c), forward only (every one holds a live element). ---
    let words = bitset::words_for(vocab.vocab_size());
    let mut zsets: Vec<Box<[u32]>> = Vec::new();
    let mut zset_index: FxHashMap<Box<[u32]>, u32> = FxHashMap::default();
    let mut intern = |set: Vec<u32>, zsets: &mut Vec<Box<[u32]>>| -> u32 {
        if set.is_empty() {
            return NONE;
        }
        let set: Box<[u32]> = set.into_boxed_slice();
        if let Some(&id) = zset_index.get(&set) {
            return id;
        }
        let id = zsets.len() as u32;
        zsets.push(set.clone());
        zset_index.insert(set, id);
        id
    };
    let start_set = intern(vec![text.start()], &mut zsets);
    let mut states = Registry::new(max, "guide states (text-state set, tokenizer state) of a pre-tokenized guide");
    states.add((start_set, START))?;
    let mut tables: FxHashMap<(u32, Mode), u32> = FxHashMap::default();
    let mut table_list: Vec<SetTable> = Vec::new();
    let mut state_table: Vec<u32> = Vec::new();
    while let Some(id) = states.queue.pop_front() {
        limits.deadline.check("the pre-tokenized guide's state search")?;
        let (zs, c) = states.items[id as usize];
        let mode = mode_of(c);
        let key = (zs, mode);
        // (all, free, class, tokens) groups of this set, and its bitsets.
        let set_groups = {
            let members = zsets[zs as usize].clone();
            let mut entries: Vec<(u32, u32, bool)> = Vec::new();
            let is_live = |to: u32, class: u32| live_set.contains(&(to, class));
            if mode != Mode::Lone {
                for &z in members.iter() {
                    for g in &groups[&z] {
                        if (mode == Mode::Start || g.class != LONE) && is_live(g.to, g.class) {
                            entries.extend(g.tokens.iter().map(|&t| (t, g.to, false)));
                        }
                    }
                }
            }
            if mode != Mode::Start {
                for &z in members.iter() {
                    if mode == Mode::Regular && text.spells_lone_token(z) {
                        continue;
                    }
                    for &zm in marks_of.get(&z).map_or(&[][..], |v| v.as_slice()) {
                        if zm == DEAD || !is_live(zm, START) {
                            continue;
                        }
                        for g in &groups[&zm] {
                            if is_live(g.to, g.class) {
                                entries.extend(g.tokens.iter().map(|&t| (t, g.to, true)));
                            }
                        }
                    }
                }
            }
            entries.sort_unstable();
            let mut by_target: FxHashMap<(u32, u32, u32), Vec<u32>> = FxHashMap::default();
            let mut all_bits = vec![0u32; words].into_boxed_slice();
            let mut free_bits = vec![0u32; words].into_boxed_slice();
            for run in entries.chunk_by(|a, b| a.0 == b.0) {
                let t = run[0].0;
                let mut all: Vec<u32> = run.iter().map(|e| e.1).collect();
                all.dedup();
                all.sort_unstable();
                all.dedup();
                let mut free: Vec<u32> = run.iter().filter(|e| e.2).map(|e| e.1).collect();
                free.sort_unstable();
                free.dedup();
                let class = match tok.class_of(t) {
                    NO_CLASS => LONE,
                    k => k,
                };
                let all_id = intern(all, &mut zsets);
                let free_id = intern(free, &mut zsets);
                if all_id != NONE {
                    bitset::set(&mut all_bits, t as usize);
                }
                if free_id != NONE {
                    bitset::set(&mut free_bits, t as usize);
                }
                by_target.entry((all_id, free_id, class)).or_default().push(t);
            }
            if !tables.contains_key(&key) {
                tables.insert(key, table_list.len() as u32);
                table_list.push(SetTable { all: all_bits, free: free_bits });
                limits.check_bytes(states.items.len(), table_list.len() * 2, mask_bytes)?;
            }
            by_target
        };
        state_table.push(tables[&key]);
        for ((all, free, class), tokens) in set_groups {
            match mode {
                Mode::Start => {
                    if all != NONE {
                        states.add((all, class))?;
                    }
                }
                Mode::Lone => {
                    if free != NONE {
                        states.add((free, class))?;
                    }
                }
                Mode::Regular => {
                    let forbidden = tok.forbidden(c);
                    if all != NONE && (class == LONE || some_allowed(&tokens, forbidden)) {
                        states.add((all, class))?;
                    }
                    if free != NONE && class != LONE && some_forbidden(&tokens, forbidden) {
                        states.add((free, class))?;
                    }
                }
            }
        }
    }
    let frozen = text.freeze()?;
    let accepting: Vec<bool> = states
        .items
        .iter()
        .map(|&(zs, c)| {
            zsets[zs as usize].iter().any(|&z| frozen.is_accepting(z) && (c == LONE || !frozen.spells_lone_token(z)))
        })
        .collect();
    let num_states = states.items.len();
    let automaton = PretokenizedAutomaton {
        tokenizer_dfa: tokenizer_dfa.clone(),
        dfa,
        text: frozen,
        live: live_set,
        zsets,
        zset_index,
        states: states.items,
        index: states.index,
        state_table,
        tables: table_list,
        accepting,
    };
    Ok(Guide {
        method: Method::Cartesian,
        vocab: vocab.clone(),
        automaton: Automaton::Pretokenized(automaton),
        initial: 0,
        masks: MaskCache::new(num_states, DEFAULT_MAX_MASK_CACHE_BYTES),
    })
}

/// The token groups of text state `z`: tokens whose walk from `z` stays alive, grouped by
/// (target text state, class), lone tokens under [`LONE`].
fn token_groups<M: PieceBoundaries>(
    text: &mut TextAutomaton<'_, M>,
    trie: &TokenTrie,
    tok: &TokenizerDfa,
    z: u32,
) -> Result<Vec<Group>> {
    let mut triples: Vec<(u32, u32, u32)> = Vec::new();
    trie.for_each_walk(
        z,
        |s, b| {
            let to = text.byte(s, b)?;
            Ok::<_, Error>((to != DEAD).then_some(to))
        },
        |t, to| {
            let class = match tok.class_of(t) {
                NO_CLASS => LONE,
                k => k,
            };
            triples.push((to, class, t));
        },
    )?;
    triples.sort_unstable();
    Ok(triples
        .chunk_by(|a, b| a.0 == b.0 && a.1 == b.1)
        .map(|run| Group { to: run[0].0, class: run[0].1, tokens: run.iter().map(|x| x.2).collect() })
        .collect())
}

/// The decode-time form of a pre-tokenized guide (see the module docs).
pub(crate) struct PretokenizedAutomaton {
    tokenizer_dfa: Arc<TokenizerDfa>,
    dfa: ByteDfa,
    text: FrozenText,
    live: FxHashSet<(u32, u32)>,
    zsets: Vec<Box<[u32]>>,
    zset_index: FxHashMap<Box<[u32]>, u32>,
    states: Vec<(u32, u32)>,
    index: FxHashMap<(u32, u32), u32>,
    state_table: Vec<u32>,
    tables: Vec<SetTable>,
    accepting: Vec<bool>,
}

impl PretokenizedAutomaton {
    pub(crate) fn is_final(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// The mask without EOS: `(A \ F(c)) ∪ (B ∩ F(c))`.
    pub(crate) fn write_mask(&self, state: u32, out: &mut [u32]) {
        let (_, c) = self.states[state as usize];
        let table = &self.tables[self.state_table[state as usize] as usize];
        out.copy_from_slice(&table.all);
        if mode_of(c) == Mode::Regular {
            for &t in self.tokenizer_dfa.forbidden(c) {
                if bitset::contains(&table.free, t as usize) {
                    bitset::set(out, t as usize);
                } else {
                    bitset::clear(out, t as usize);
                }
            }
        }
    }

    /// The target of a non-EOS token, `None` when it is not allowed.
    pub(crate) fn next_state(&self, vocab: &Vocabulary, state: u32, token: u32) -> Option<u32> {
        let (zs, c) = self.states[state as usize];
        let mode = mode_of(c);
        let table = &self.tables[self.state_table[state as usize] as usize];
        let forbidden = mode == Mode::Regular && self.tokenizer_dfa.forbidden(c).binary_search(&token).is_ok();
        let allowed = if forbidden { &table.free } else { &table.all };
        if !bitset::contains(allowed, token as usize) {
            return None;
        }
        let class = match self.tokenizer_dfa.class_of(token) {
            NO_CLASS => LONE,
            k => k,
        };
        let bytes = vocab.token_bytes(token);
        let mut out: Vec<u32> = Vec::new();
        let reach = |from: u32, out: &mut Vec<u32>| {
            let to = self.text.walk(from, bytes);
            if to != DEAD && self.live.contains(&(to, class)) {
                out.push(to);
            }
        };
        let members = &self.zsets[zs as usize];
        if !forbidden && mode != Mode::Lone && (mode == Mode::Start || class != LONE) {
            for &z in members.iter() {
                reach(z, &mut out);
            }
        }
        if mode != Mode::Start {
            for &z in members.iter() {
                if mode == Mode::Regular && self.text.spells_lone_token(z) {
                    continue;
                }
                for &zm in self.text.marks(z) {
                    if zm != DEAD && self.live.contains(&(zm, START)) {
                        reach(zm, &mut out);
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        let target = self.zset_index.get(out.as_slice())?;
        self.index.get(&(*target, class)).copied()
    }

    /// Fewest bytes to acceptance over the set's regex states (a hint for finishing walks).
    pub(crate) fn distance_hint(&self, state: u32) -> u32 {
        let (zs, _) = self.states[state as usize];
        self.zsets[zs as usize].iter().map(|&z| self.dfa.distance_to_accept(self.text.regex_state(z))).min().unwrap_or(u32::MAX)
    }

    pub(crate) fn num_states(&self) -> usize {
        self.states.len()
    }
}

#[cfg(test)]
#[path = "pretokenized_tests.rs"]
mod tests;
