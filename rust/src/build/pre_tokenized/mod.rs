//! Canonical guides for tokenizers that split the text before BPE (byte-level BPE with a
//! pre-tokenizer: GPT-2, Llama 3, Qwen2, cl100k, o200k, …).
//!
//! # What canonical means here
//! Such a tokenizer normalizes the text, cuts it into *pieces* with its pre-tokenizer (see
//! `crate::pre_tokenizer::piece_machine`), and runs BPE on each piece alone; with `ignore_merges`, a piece that
//! is itself a vocabulary token is emitted whole first. So a token sequence is canonical iff
//! 1. every piece boundary of its text is a token boundary (no token spans two pieces);
//! 2. inside each piece, every adjacent token pair is canonical for the merge table (the
//!    tokenizer DFA's pair condition: BPE of a piece is pairwise-canonical exactly as BPE of a
//!    whole text, `crate::tokenizer_dfa`), and a lone piece token is emittable by the merges;
//! 3. with `ignore_merges`, a piece that spells a vocabulary token is that token alone. Only
//!    the *lone tokens* — those the merges would not produce from their own text — need a
//!    check: for any other token `t`, BPE of `t`'s text is `[t]`, so condition 2 already
//!    rejects every other split. A lone token is allowed exactly as a whole piece.
//!
//! Pairs across a piece boundary are unconstrained.
//!
//! # The construction
//! [`crate::pre_tokenizer::text_automaton`] combines the regex's byte DFA, the pre-tokenizer's automaton over
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
//! One trie walk over `Z` per expanded text state (like the agnostic index), element and set
//! searches like CartesianMerge's, and two token sets per `(Zset, side)` (sparse or dense,
//! deduplicated: `crate::guide::token_set`). The searches visit a wide text state once per class
//! that reaches it (a JSON string's contents: ~33,000 of Llama 3's 36,464 classes), so the
//! per-visit work is kept to a merge of the still-pending tokens with the class's forbidden set
//! (`pending`), and each wide successor table is built once by partition refinement
//! (`successor_table`). Limits: `max_product_states` bounds text states, elements and guide
//! states each; the compile deadline and `max_guide_bytes` apply as in CartesianMerge.

use super::search::{some_allowed, Registry};

mod pending;
mod successor_table;
mod token_groups;

use crate::guide::pre_tokenized::{
    class_or_lone, mark_allowed, side_of, Element, Member, Override, PreTokenizedAutomaton, SetTable, Side,
    TokenSetPool, LONE, NONE, START,
};
use crate::tokenizer_dfa::lone_tokens::{LoneSplits, ROOT, SPELLED};
use pending::{ClassBits, PendingGroups, Wanted};
use successor_table::{successor_table, SuccessorTable, TableScratch};
use token_groups::{Grouper, TokenGroups};

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::guide::token_set::TokenSet;
use crate::guide::{Automaton, Guide, Method};
use crate::limits::SearchLimits;
use crate::pre_tokenizer::text_automaton::{ContentTrie, PieceBoundaries, TextAutomaton};
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};
use crate::util::bitset;

/// Tokens of a `(members, side)` with the same successor sets (`NONE` when empty): `through_any`
/// through any element, `through_boundary` through a boundary only.
struct SetGroup {
    through_any: u32,
    through_boundary: u32,
    class: u32,
    /// A range of its table's [`SetSearch::tokens`].
    tokens: std::ops::Range<u32>,
}

/// The groups of a `(members, side)` and those whose targets are not reached yet.
struct SetSearch {
    groups: Vec<SetGroup>,
    /// The groups' tokens, group after group.
    tokens: Box<[u32]>,
    /// Lone-token groups with an `through_any` target (tested one by one: never forbidden).
    lone_any: Vec<u32>,
    pending_any: PendingGroups,
    pending_boundary: PendingGroups,
}

impl SetGroup {
    /// Its tokens, out of its table's [`SetSearch::tokens`].
    fn tokens_in<'a>(&self, table_tokens: &'a [u32]) -> &'a [u32] {
        &table_tokens[self.tokens.start as usize..self.tokens.end as usize]
    }
}

/// Builds the canonical guide of `dfa` for a pre-tokenized `vocab`.
pub fn build<M: PieceBoundaries>(
    vocab: &Arc<Vocabulary>,
    tokenizer_dfa: &Arc<TokenizerDfa>,
    trie: &TokenTrie,
    dfa: ByteDfa,
    machine: M,
    splits: &LoneSplits,
    contents: ContentTrie,
    limits: &SearchLimits,
) -> Result<Guide> {
    let tok = tokenizer_dfa.as_ref();
    let max = limits.max_states;
    // Compile temporaries that grow with the text states: their token groups.
    let mut group_bytes = 0usize;
    // Each text state costs a 1 KiB row of byte transitions.
    let text_limit = if limits.max_guide_bytes / 1024 < max {
        ("max_guide_bytes", limits.max_guide_bytes)
    } else {
        ("max_product_states", max)
    };
    let mut text = TextAutomaton::new(&dfa, machine, contents, max.min(limits.max_guide_bytes / 1024), text_limit);

    let debug_started = std::time::Instant::now();
    // --- Elements, forward. ---
    let mut groups: FxHashMap<u32, TokenGroups> = FxHashMap::default();
    let mut grouper = Grouper::new(vocab.num_tokens(), |t| class_or_lone(tok, t));
    let mut class_bits = ClassBits::new(vocab.num_tokens());
    let mut pending: FxHashMap<u32, PendingGroups> = FxHashMap::default();
    let mut marks_of: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    let mut marks_done: FxHashSet<(u32, bool)> = FxHashSet::default();
    // Edges on tokens that continue a lone token's split: (source element, target element).
    let mut split_edges: Vec<(u32, Element)> = Vec::new();
    let mut elements: Registry<Element> =
        Registry::new(limits, "elements (text state, tokenizer state, split node) of a pre-tokenized guide");
    elements.add(Element::new(text.start(), START, ROOT))?;
    while let Some(id) = elements.queue.pop_front() {
        limits.deadline.check("the pre-tokenized guide's forward search")?;
        let Element { text: z, tokenizer: c, split: u } = elements.items[id as usize];
        if let std::collections::hash_map::Entry::Vacant(slot) = groups.entry(z) {
            let g = token_groups(&mut text, trie, &mut grouper, z)?;
            group_bytes += g.heap_bytes();
            limits.check_bytes(elements.items.len(), 1, group_bytes)?;
            slot.insert(g);
        }
        let split_continuations = splits.next_tokens(u);
        let gs = &groups[&z];
        match side_of(c) {
            Side::PieceStart => {
                for g in &gs.groups {
                    if some_allowed(gs.tokens(g), &[], split_continuations) {
                        elements.add(Element::new(g.to, g.class, NONE))?;
                    }
                }
            }
            Side::AfterLone => {}
            Side::InPiece => {
                // Groups not pending have their target reached already. Tokens continuing the
                // lone-token split of `u` are left to the edges below.
                // (Made on the first visit in this side: most text states never get one.)
                let pending = pending.entry(z).or_insert_with(|| {
                    let regular = gs.groups.iter().enumerate().filter(|(_, g)| g.class != LONE);
                    PendingGroups::new(regular.map(|(i, g)| (i as u32, gs.tokens(g))), gs.groups.len())
                });
                let ids = tok.forbidden(c);
                let bits = class_bits.load(ids, tok.forbidden_bits(c), pending.num_tokens());
                let visit = pending.retain(ids, bits, split_continuations, Wanted::Allowed, |gi, allowed| {
                    let g = &gs.groups[gi as usize];
                    elements.keep_pending(Element::new(g.to, g.class, NONE), allowed)
                });
                class_bits.unload(ids);
                visit?;
            }
        }
        for &(t, child) in split_continuations {
            let allowed = match side_of(c) {
                Side::PieceStart => true,
                Side::AfterLone => false,
                Side::InPiece => tok.class_of(t) != NO_CLASS && tok.forbidden(c).binary_search(&t).is_err(),
            };
            if allowed {
                let to = text.walk(z, vocab.token_bytes(t))?;
                if to != DEAD {
                    let target = Element::new(to, class_or_lone(tok, t), child);
                    elements.add(target)?;
                    split_edges.push((id, target));
                }
            }
        }
        // Boundaries depend on `c` only through `c == LONE` (`mark_allowed`): once per text
        // state and kind of `c`, not once per class (a wide state has ~30,000 elements).
        if c != START && !splits.spells_lone_token(u) && marks_done.insert((z, c == LONE)) {
            let ms = text.marks(z)?.to_vec();
            let spells = text.spells_content(z);
            for (kind, &zm) in ms.iter().enumerate() {
                if zm != DEAD && mark_allowed(kind, spells, c) {
                    elements.add(Element::new(zm, START, ROOT))?;
                }
            }
            marks_of.insert(z, ms);
        }
    }

    let debug_forward = debug_started.elapsed().as_secs_f64();
    // --- Elements, backward: which can reach acceptance. ---
    let n = elements.items.len();
    let mut not_live: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (id, &Element { text: z, .. }) in elements.items.iter().enumerate() {
        not_live.entry(z).or_default().push(id as u32);
    }
    // The groups `(z, group index)` into each `(text state, class)`: chained in one vector
    // (most keys have one; a vector per key cost a third of this phase).
    let num_groups: usize = groups.values().map(|gs| gs.groups.len()).sum();
    let mut group_preds: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    group_preds.reserve(num_groups);
    let mut pred_chain: Vec<(u32, u32, u32)> = Vec::with_capacity(num_groups);
    for (&z, gs) in &groups {
        for (gi, g) in gs.groups.iter().enumerate() {
            let head = group_preds.entry((g.to, g.class)).or_insert(NONE);
            pred_chain.push((z, gi as u32, *head));
            *head = pred_chain.len() as u32 - 1;
        }
    }
    let mut mark_preds: FxHashMap<u32, Vec<(u32, usize)>> = FxHashMap::default();
    for (&z, ms) in &marks_of {
        for (kind, &zm) in ms.iter().enumerate().filter(|&(_, &zm)| zm != DEAD) {
            mark_preds.entry(zm).or_default().push((z, kind));
        }
    }
    let mut split_preds: FxHashMap<Element, Vec<u32>> = FxHashMap::default();
    for &(src, target) in &split_edges {
        split_preds.entry(target).or_default().push(src);
    }
    let mut live = vec![false; n];
    let mut work: VecDeque<u32> = VecDeque::new();
    for (id, &Element { text: z, tokenizer: c, split: u }) in elements.items.iter().enumerate() {
        if text.is_accepting(z)? && !splits.spells_lone_token(u) && mark_allowed(0, text.spells_content(z), c) {
            live[id] = true;
            work.push_back(id as u32);
        }
    }
    // Moves `z`'s not-yet-live elements that pass `ok` to live.
    let mut promote = |zs: u32, live: &mut Vec<bool>, work: &mut VecDeque<u32>, ok: &dyn Fn(Element) -> bool| {
        let Some(list) = not_live.get_mut(&zs) else { return };
        list.retain(|&p| {
            if live[p as usize] {
                return false;
            }
            if ok(elements.items[p as usize]) {
                live[p as usize] = true;
                work.push_back(p);
                return false;
            }
            true
        });
    };
    while let Some(id) = work.pop_front() {
        limits.deadline.check("the pre-tokenized guide's backward search")?;
        let target = elements.items[id as usize];
        let Element { text: zt, tokenizer: ct, split: ut } = target;
        for &src in split_preds.get(&target).map_or(&[][..], |v| v.as_slice()) {
            if !live[src as usize] {
                live[src as usize] = true;
                work.push_back(src);
            }
        }
        if ct == START {
            for &(zs, kind) in mark_preds.get(&zt).map_or(&[][..], |v| v.as_slice()) {
                let spells = text.spells_content(zs);
                promote(zs, &mut live, &mut work, &|Element { tokenizer: cp, split: up, .. }| {
                    cp != START && !splits.spells_lone_token(up) && mark_allowed(kind, spells, cp)
                });
            }
            continue;
        }
        if ut != NONE {
            continue; // reached only through split edges
        }
        let mut at = group_preds.get(&(zt, ct)).copied().unwrap_or(NONE);
        while at != NONE {
            let (zs, gi, next) = pred_chain[at as usize];
            at = next;
            let gs = &groups[&zs];
            let g = &gs.groups[gi as usize];
            let tokens = gs.tokens(g);
            promote(zs, &mut live, &mut work, &|Element { tokenizer: cp, split: up, .. }| match side_of(cp) {
                Side::PieceStart => some_allowed(tokens, &[], splits.next_tokens(up)),
                Side::AfterLone => false,
                Side::InPiece => g.class != LONE && some_allowed(tokens, tok.forbidden(cp), splits.next_tokens(up)),
            });
        }
    }
    if !live[0] {
        return Err(Error::EmptyLanguage(
            "no canonical token sequence spells a string of the regex (its strings are not representable by this tokenizer, or its pre-tokenizer never splits them so)".into(),
        ));
    }
    let live_set: FxHashSet<Element> = elements.items.iter().zip(&live).filter(|(_, &l)| l).map(|(&e, _)| e).collect();
    drop(not_live);
    drop(group_preds);
    drop(pred_chain);

    let debug_backward = debug_started.elapsed().as_secs_f64();
    // --- Guide states: (members, c), forward only (every one holds a live element). ---
    let words = bitset::words_for(vocab.vocab_size());
    let mut sets: Vec<Box<[Member]>> = Vec::new();
    let mut set_index: FxHashMap<Box<[Member]>, u32> = FxHashMap::default();
    let mut intern = |set: &[Member], sets: &mut Vec<Box<[Member]>>| -> u32 {
        if set.is_empty() {
            return NONE;
        }
        if let Some(&id) = set_index.get(set) {
            return id;
        }
        let id = sets.len() as u32;
        sets.push(set.into());
        set_index.insert(set.into(), id);
        id
    };
    let start_set = intern(&[Member::new(text.start(), ROOT)], &mut sets);
    let mut states: Registry<(u32, u32)> =
        Registry::new(limits, "guide states (member set, tokenizer state) of a pre-tokenized guide");
    states.add((start_set, START))?;
    // A state's successors on tokens that continue no member's lone-token split depend only on
    // its text states (the split nodes all become NONE): such tables are shared by the
    // *projection* of the member set; the few other tokens are overrides per (set, side).
    let mut tables: FxHashMap<(u32, Side), u32> = FxHashMap::default();
    let mut table_list: Vec<SetTable> = Vec::new();
    let mut token_sets = TokenSetPool::default();
    let mut table_scratch = TableScratch::new(vocab.num_tokens(), splits);
    // Per member set: its projection, and the tokens continuing a member's lone-token split.
    type SetInfo = (u32, std::rc::Rc<[(u32, u32)]>);
    let mut set_info: Vec<Option<SetInfo>> = Vec::new();
    let mut searches: Vec<SetSearch> = Vec::new();
    let mut state_table: Vec<u32> = Vec::new();
    let mut overrides: FxHashMap<(u32, Side), u32> = FxHashMap::default();
    let mut override_list: Vec<Box<[Override]>> = vec![Box::new([])];
    let mut state_override: Vec<u32> = Vec::new();
    while let Some(id) = states.queue.pop_front() {
        limits.deadline.check("the pre-tokenized guide's state search")?;
        let (set, c) = states.items[id as usize];
        let side = side_of(c);
        // Per member set, once: its projection and the tokens continuing some member's
        // lone-token split (as `(token, _)` pairs).
        if set_info.len() <= set as usize {
            set_info.resize(set as usize + 1, None);
        }
        if set_info[set as usize].is_none() {
            let members = &sets[set as usize];
            // (Whether a member's piece spells a lone token must survive: it may not end there.)
            let mut projection: Vec<Member> = members
                .iter()
                .map(|m| Member::new(m.text, if splits.spells_lone_token(m.split) { SPELLED } else { NONE }))
                .collect();
            projection.sort_unstable();
            projection.dedup();
            let mut split_continuations: Vec<(u32, u32)> =
                members.iter().flat_map(|m| splits.next_tokens(m.split).iter().map(|e| (e.0, 0))).collect();
            split_continuations.sort_unstable();
            split_continuations.dedup();
            let proj = intern(&projection, &mut sets);
            set_info[set as usize] = Some((proj, split_continuations.into()));
        }
        let (proj, continuation_pairs) = set_info[set as usize].clone().expect("set info computed above");
        let tid = match tables.get(&(proj, side)) {
            Some(&tid) => tid,
            None => {
                let projection = sets[proj as usize].clone();
                let member_spells: Vec<bool> = projection.iter().map(|m| text.spells_content(m.text)).collect();
                let SuccessorTable { groups, tokens, by_token, boundary_tokens } = successor_table(
                    &mut table_scratch,
                    &projection,
                    &member_spells,
                    side,
                    tok,
                    &groups,
                    &marks_of,
                    &live_set,
                    splits,
                    &mut |m: &[Member]| intern(m, &mut sets),
                    &mut |t: u32| exact_successors(&mut text, vocab, tok, splits, &live_set, &projection, side, t),
                )?;
                let pick = |f: &dyn Fn(&SetGroup) -> bool| {
                    let ids = (0..groups.len() as u32).filter(|&g| f(&groups[g as usize])).collect();
                    let pairs = by_token.iter().filter(|&&(_, g)| f(&groups[g as usize])).copied().collect();
                    PendingGroups::from_sorted(ids, pairs, groups.len())
                };
                let pending_any = pick(&|g| g.through_any != NONE && g.class != LONE);
                let pending_boundary = pick(&|g| g.through_boundary != NONE && g.class != LONE);
                let lone_any = (0..groups.len() as u32)
                    .filter(|&g| groups[g as usize].through_any != NONE && groups[g as usize].class == LONE)
                    .collect();
                let tid = table_list.len() as u32;
                tables.insert((proj, side), tid);
                let all_tokens: Vec<u32> = by_token.iter().map(|&(t, _)| t).collect();
                let all = token_sets.intern(TokenSet::from_sorted(&all_tokens, words));
                let free = token_sets.intern(TokenSet::from_sorted(&boundary_tokens, words));
                table_list.push(SetTable { through_any: all, through_boundary: free });
                searches.push(SetSearch { groups, tokens, lone_any, pending_any, pending_boundary });
                limits.check_bytes(states.items.len(), 1, token_sets.heap_bytes())?;
                tid
            }
        };
        state_table.push(tid);
        // Tokens continuing some member's lone-token split (never in the Lone side: no
        // unmarked successors there).
        let except: &[(u32, u32)] = if side == Side::AfterLone { &[] } else { &continuation_pairs };
        let oid = if except.is_empty() {
            0
        } else if let Some(&oid) = overrides.get(&(set, side)) {
            oid
        } else {
            let members = sets[set as usize].clone();
            let mut list = Vec::with_capacity(except.len());
            for &(t, _) in except {
                let (all, free) = exact_successors(&mut text, vocab, tok, splits, &live_set, &members, side, t)?;
                list.push(Override {
                    token: t,
                    through_any: intern(&all, &mut sets),
                    through_boundary: intern(&free, &mut sets),
                });
            }
            let oid = override_list.len() as u32;
            override_list.push(list.into_boxed_slice());
            overrides.insert((set, side), oid);
            oid
        };
        state_override.push(oid);
        let search = &mut searches[tid as usize];
        match side {
            Side::PieceStart | Side::AfterLone => {
                for g in &search.groups {
                    let target = if side == Side::PieceStart { g.through_any } else { g.through_boundary };
                    if target != NONE && some_allowed(g.tokens_in(&search.tokens), &[], except) {
                        states.add((target, g.class))?;
                    }
                }
            }
            Side::InPiece => {
                // As in CartesianMerge: each group is tested until its target is reached.
                let forbidden = tok.forbidden(c);
                let SetSearch { groups, tokens, lone_any, pending_any, pending_boundary } = search;
                let tests = pending_any.num_tokens() + pending_boundary.num_tokens();
                let forbidden_bits = class_bits.load(forbidden, tok.forbidden_bits(c), tests);
                for &gi in lone_any.iter() {
                    let g = &groups[gi as usize];
                    if except.is_empty() || some_allowed(g.tokens_in(tokens), forbidden, except) {
                        states.add((g.through_any, g.class))?;
                    }
                }
                let visit = pending_any
                    .retain(forbidden, forbidden_bits, except, Wanted::Allowed, |gi, found| {
                        let g = &groups[gi as usize];
                        states.keep_pending((g.through_any, g.class), found)
                    })
                    .and_then(|()| {
                        pending_boundary.retain(forbidden, forbidden_bits, except, Wanted::Forbidden, |gi, found| {
                            let g = &groups[gi as usize];
                            states.keep_pending((g.through_boundary, g.class), found)
                        })
                    });
                class_bits.unload(forbidden);
                visit?;
            }
        }
        for o in override_list[oid as usize].iter() {
            let class = class_or_lone(tok, o.token);
            let forbidden = side == Side::InPiece && tok.forbidden(c).binary_search(&o.token).is_ok();
            let target = if forbidden { o.through_boundary } else { o.through_any };
            if target != NONE {
                states.add((target, class))?;
            }
        }
    }
    drop(searches);
    if std::env::var_os("PROPERTOK_DEBUG").is_some() {
        eprintln!(
            "pre-tokenized: forward {debug_forward:.3}s backward {debug_backward:.3}s states {:.3}s; {} text states, {} elements ({} live), {} member sets, {} guide states, {} tables",
            debug_started.elapsed().as_secs_f64(),
            text.num_states(),
            elements.items.len(),
            live_set.len(),
            sets.len(),
            states.items.len(),
            table_list.len()
        );
    }
    let frozen = text.freeze()?;
    let accepting: Vec<bool> = states
        .items
        .iter()
        .map(|&(set, c)| {
            sets[set as usize].iter().any(|&Member { text: z, split: u }| {
                frozen.is_accepting(z) && !splits.spells_lone_token(u) && mark_allowed(0, frozen.spells_content(z), c)
            })
        })
        .collect();
    let automaton = PreTokenizedAutomaton {
        tokenizer_dfa: tokenizer_dfa.clone(),
        splits: splits.clone(),
        dfa,
        text: frozen,
        live: live_set,
        sets,
        set_index,
        states: states.items,
        index: states.index,
        state_table,
        tables: table_list,
        token_sets: token_sets.sets,
        state_override,
        overrides: override_list,
        accepting,
    };
    if std::env::var_os("PROPERTOK_DEBUG").is_some() {
        let parts = automaton.heap_bytes_by_part();
        let shown: Vec<String> = parts.iter().map(|(n, b)| format!("{n} {:.2}", *b as f64 / 1e6)).collect();
        eprintln!(
            "pre-tokenized: ~{:.2} MB retained ({})",
            parts.iter().map(|p| p.1).sum::<usize>() as f64 / 1e6,
            shown.join(", ")
        );
    }
    Ok(Guide::new(Method::Cartesian, vocab.clone(), Automaton::PreTokenized(automaton), 0))
}

/// The live successor member sets of token `t` from `members` in `side`: through any element,
/// and through a boundary only.
#[allow(clippy::too_many_arguments)]
fn exact_successors<M: PieceBoundaries>(
    text: &mut TextAutomaton<'_, M>,
    vocab: &Vocabulary,
    tok: &TokenizerDfa,
    splits: &LoneSplits,
    live: &FxHashSet<Element>,
    members: &[Member],
    side: Side,
    t: u32,
) -> Result<(Vec<Member>, Vec<Member>)> {
    let class = class_or_lone(tok, t);
    let bytes = vocab.token_bytes(t);
    let (mut all, mut free) = (Vec::new(), Vec::new());
    if side != Side::AfterLone && (side == Side::PieceStart || class != LONE) {
        for &Member { text: z, split: u } in members {
            let to = text.walk(z, bytes)?;
            let child = splits.child(u, t);
            if to != DEAD && live.contains(&Element::new(to, class, child)) {
                all.push(Member::new(to, child));
            }
        }
    }
    if side != Side::PieceStart {
        let c = if side == Side::AfterLone { LONE } else { 0 };
        for &Member { text: z, split: u } in members {
            if splits.spells_lone_token(u) {
                continue;
            }
            let spells = text.spells_content(z);
            for (kind, zm) in text.marks(z)?.to_vec().into_iter().enumerate() {
                if zm == DEAD || !mark_allowed(kind, spells, c) || !live.contains(&Element::new(zm, START, ROOT)) {
                    continue;
                }
                let to = text.walk(zm, bytes)?;
                let child = splits.child(ROOT, t);
                if to != DEAD && live.contains(&Element::new(to, class, child)) {
                    free.push(Member::new(to, child));
                }
            }
        }
    }
    free.sort_unstable();
    free.dedup();
    all.extend_from_slice(&free);
    all.sort_unstable();
    all.dedup();
    Ok((all, free))
}

/// The token groups of text state `z`: tokens whose walk from `z` stays alive, grouped by
/// (target text state, class), lone tokens under [`LONE`].
fn token_groups<M: PieceBoundaries, F: Fn(u32) -> u32>(
    text: &mut TextAutomaton<'_, M>,
    trie: &TokenTrie,
    grouper: &mut Grouper<F>,
    z: u32,
) -> Result<TokenGroups> {
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    trie.for_each_walk(
        z,
        |s, b| {
            let to = text.byte(s, b)?;
            Ok::<_, Error>((to != DEAD).then_some(to))
        },
        |t, to| pairs.push((t, to)),
    )?;
    Ok(grouper.group(&pairs))
}

#[cfg(test)]
mod tests;
