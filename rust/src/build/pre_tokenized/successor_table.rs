//! The successor table of a member-set projection: every token with a live successor, grouped
//! by (successor set through any element, successor set through a boundary, class).
//!
//! The successors come from *sources*: a token group of a member's text state (unmarked), or
//! of a state one piece boundary further (marked). Within a source every token has the same
//! target member, so a token's successor sets are determined by the set of sources it belongs
//! to. Instead of listing `(token, target)` entries and sorting them (a wide projection, such as
//! a JSON string's contents on Llama 3, has ~120,000 of them and took ~15 ms), the tokens are
//! partitioned by source membership: each source splits the blocks its tokens are in (partition
//! refinement, array work per token, no hashing). A block's successor sets follow from its
//! parent's and its own source's target; the distinct chains are few (a wide projection's
//! ~45,000 blocks come from groups that differ mostly by class), so the sets are computed and
//! interned once per chain (memoized), not once per block.
//!
//! Tokens that continue a lone token's split from a piece start (the children of
//! [`super::ROOT`]) have targets that depend on the token, not only on its group; when a
//! boundary source is present they are left out of the partition and their sets are computed
//! exactly by the caller.
//!
//! # Invariants
//! * `block[t] == NONE` for every token outside the current table (the scratch is reset through
//!   the list of tokens touched), and `remap` is all `NONE` between sources.
//! * Block `b`'s sources are those of `parent[b]` plus `source_of[b]` (`parent[b]` is `NONE` for
//!   a block made from tokens in no block yet).

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::Result;
use crate::regex::byte_dfa::DEAD;
use crate::tokenizer_dfa::TokenizerDfa;

use super::states::SetGroup;
use super::token_groups::TokenGroups;
use crate::guide::pre_tokenized::{class_or_lone, mark_allowed, Element, Member, Side, LONE, NONE, START};
use crate::tokenizer_dfa::lone_tokens::{LoneSplits, ROOT};

/// Tokens with a live successor, grouped (see the module docs): group `g`'s tokens are
/// `tokens[groups[g].tokens]`, ascending; `by_token` lists `(token, group)` by ascending token,
/// and `boundary_tokens` the tokens whose group has a `through_boundary` set.
pub(super) struct SuccessorTable {
    pub(super) groups: Vec<SetGroup>,
    pub(super) tokens: Box<[u32]>,
    pub(super) by_token: Vec<(u32, u32)>,
    pub(super) boundary_tokens: Vec<u32>,
}

/// Per-vocabulary scratch reused from table to table.
pub(super) struct TableScratch {
    block: Vec<u32>,
    /// The children of [`ROOT`] in the lone-token splits.
    root_continues: Vec<bool>,
    /// Per text state, its tokens (in any group) that continue a lone split from [`ROOT`].
    root_tokens_of: FxHashMap<u32, Box<[u32]>>,
    remap: Vec<u32>,
}

impl TableScratch {
    pub(super) fn new(num_tokens: usize, splits: &LoneSplits) -> TableScratch {
        let mut root_continues = vec![false; num_tokens];
        for &(t, _) in splits.next_tokens(ROOT) {
            root_continues[t as usize] = true;
        }
        TableScratch {
            block: vec![NONE; num_tokens],
            root_continues,
            root_tokens_of: FxHashMap::default(),
            remap: Vec::new(),
        }
    }
}

/// Tokens of one group reaching `target`.
struct Source<'a> {
    target: Member,
    marked: bool,
    tokens: &'a [u32],
}

/// The successor sets of the blocks with one chain of sources: as member lists (ascending) and
/// as interned ids.
struct Combination {
    through_any: Vec<Member>,
    through_boundary: Vec<Member>,
    /// Interned when a block with tokens has it (intermediate ones are never interned).
    ids: Option<(u32, u32)>,
}

fn insert_sorted(list: &mut Vec<Member>, m: Member) {
    if let Err(at) = list.binary_search(&m) {
        list.insert(at, m);
    }
}

/// Builds the table of `members` (a projection: split nodes are `NONE` or `SPELLED`) in
/// `side`. `member_spells[i]`: whether member `i`'s stage-0 piece spells an added token's
/// content; `intern` numbers member sets (`NONE` for the empty one); `exact(t)` gives the
/// successor sets of one token, for the tokens left out of the partition.
#[allow(clippy::too_many_arguments)]
pub(super) fn successor_table(
    scratch: &mut TableScratch,
    members: &[Member],
    member_spells: &[bool],
    side: Side,
    tok: &TokenizerDfa,
    groups: &FxHashMap<u32, TokenGroups>,
    marks_of: &FxHashMap<u32, Vec<u32>>,
    live: &FxHashSet<Element>,
    splits: &LoneSplits,
    intern: &mut dyn FnMut(&[Member]) -> u32,
    exact: &mut dyn FnMut(u32) -> Result<(Vec<Member>, Vec<Member>)>,
) -> Result<SuccessorTable> {
    // --- Sources, as `successor sets` defines them (module docs of `build::pre_tokenized`). ---
    let mut sources: Vec<Source<'_>> = Vec::new();
    let mut exact_tokens = false;
    let mut exact_list: Vec<u32> = Vec::new();
    if side != Side::AfterLone {
        for &Member { text: z, split: u } in members {
            debug_assert!(splits.next_tokens(u).is_empty(), "projections carry no split nodes");
            let gs = &groups[&z];
            for g in &gs.groups {
                if (g.class != LONE || side == Side::PieceStart) && live.contains(&Element::new(g.to, g.class, NONE)) {
                    sources.push(Source { target: Member::new(g.to, NONE), marked: false, tokens: gs.tokens(g) });
                }
            }
        }
    }
    if side != Side::PieceStart {
        let c = if side == Side::AfterLone { LONE } else { 0 };
        for (&Member { text: z, split: u }, &spells) in members.iter().zip(member_spells) {
            if splits.spells_lone_token(u) {
                continue;
            }
            for (kind, &zm) in marks_of.get(&z).map_or(&[][..], |v| v.as_slice()).iter().enumerate() {
                if zm == DEAD || !mark_allowed(kind, spells, c) || !live.contains(&Element::new(zm, START, ROOT)) {
                    continue;
                }
                exact_tokens = true;
                let root_continues = &scratch.root_continues;
                let root_tokens = scratch.root_tokens_of.entry(zm).or_insert_with(|| {
                    let gs = &groups[&zm];
                    gs.groups
                        .iter()
                        .flat_map(|g| gs.tokens(g).iter().copied())
                        .filter(|&t| root_continues[t as usize])
                        .collect()
                });
                // Also those whose group has no live target without the split node.
                exact_list.extend_from_slice(root_tokens);
                let gs = &groups[&zm];
                for g in &gs.groups {
                    // Tokens continuing a lone split from ROOT are handled exactly below.
                    if live.contains(&Element::new(g.to, g.class, NONE)) {
                        sources.push(Source { target: Member::new(g.to, NONE), marked: true, tokens: gs.tokens(g) });
                    }
                }
            }
        }
    }
    let skip = |t: u32, scratch: &TableScratch| exact_tokens && scratch.root_continues[t as usize];

    // --- Partition refinement by source membership. ---
    let mut parent: Vec<u32> = Vec::new();
    let mut source_of: Vec<u32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    let mut touched_blocks: Vec<u32> = Vec::new();
    for (j, src) in sources.iter().enumerate() {
        for &t in src.tokens {
            if skip(t, scratch) {
                exact_list.push(t);
                continue;
            }
            let old = scratch.block[t as usize];
            if old == NONE {
                touched.push(t);
            }
            // remap slot 0 is "no block yet", slot b + 1 is block b.
            let key = if old == NONE { 0 } else { old as usize + 1 };
            if scratch.remap.len() <= key {
                scratch.remap.resize(key + 1, NONE);
            }
            let mut new = scratch.remap[key];
            if new == NONE {
                new = parent.len() as u32;
                parent.push(old);
                source_of.push(j as u32);
                scratch.remap[key] = new;
                touched_blocks.push(key as u32);
            }
            scratch.block[t as usize] = new;
        }
        for &k in &touched_blocks {
            scratch.remap[k as usize] = NONE;
        }
        touched_blocks.clear();
    }

    // --- Successor sets per block, from its parent's and its source's target. ---
    // Few distinct combinations exist (a wide projection has ~45,000 blocks, mostly from
    // token groups that differ only by class), so they are memoized by (parent combination,
    // target, marked) and each distinct member list is interned once.
    let mut combos: Vec<Combination> = Vec::new();
    let mut combo_of: FxHashMap<(u32, Member, bool), u32> = FxHashMap::default();
    let mut block_combo: Vec<u32> = Vec::with_capacity(parent.len());
    for b in 0..parent.len() {
        let up = if parent[b] == NONE { NONE } else { block_combo[parent[b] as usize] };
        let src = &sources[source_of[b] as usize];
        let key = (up, src.target, src.marked);
        let combo = match combo_of.get(&key) {
            Some(&c) => c,
            None => {
                let (mut all, mut free) = match up {
                    NONE => (Vec::new(), Vec::new()),
                    c => (combos[c as usize].through_any.clone(), combos[c as usize].through_boundary.clone()),
                };
                insert_sorted(&mut all, src.target);
                if src.marked {
                    insert_sorted(&mut free, src.target);
                }
                combos.push(Combination { through_any: all, through_boundary: free, ids: None });
                let c = combos.len() as u32 - 1;
                combo_of.insert(key, c);
                c
            }
        };
        block_combo.push(combo);
    }

    // --- Groups per (all, free, class). ---
    let mut block_group: Vec<u32> = vec![NONE; parent.len()];
    let mut group_index: FxHashMap<(u32, u32, u32), u32> = FxHashMap::default();
    group_index.reserve(parent.len());
    // Per block, whether its group has a `through_boundary` set (read per token: a byte, not a `SetGroup`).
    let mut block_free: Vec<bool> = vec![false; parent.len()];
    let mut out =
        SuccessorTable { groups: Vec::new(), tokens: Box::new([]), by_token: Vec::new(), boundary_tokens: Vec::new() };
    let mut place = |all_id: u32, free_id: u32, t: u32, out: &mut SuccessorTable| -> Option<u32> {
        if all_id == NONE {
            return None;
        }
        let key = (all_id, free_id, class_or_lone(tok, t));
        let next = out.groups.len() as u32;
        let gi = *group_index.entry(key).or_insert_with(|| {
            out.groups.push(SetGroup { through_any: all_id, through_boundary: free_id, class: key.2, tokens: 0..0 });
            next
        });
        Some(gi)
    };
    if touched.len() >= scratch.block.len() / 16 {
        // Cheaper than sorting a large share of the vocabulary.
        let block = &scratch.block;
        touched = (0..block.len() as u32).filter(|&t| block[t as usize] != NONE).collect();
    } else {
        touched.sort_unstable();
    }
    exact_list.sort_unstable();
    exact_list.dedup();
    out.by_token.reserve(touched.len() + exact_list.len());
    // Tokens of the partition and exact ones, merged in ascending order.
    let (mut i, mut k) = (0, 0);
    while i < touched.len() || k < exact_list.len() {
        let take_exact = k < exact_list.len() && (i >= touched.len() || exact_list[k] < touched[i]);
        let (t, gi, free) = if take_exact {
            let t = exact_list[k];
            k += 1;
            let (a, f) = exact(t)?;
            let free_id = intern(&f);
            (t, place(intern(&a), free_id, t, &mut out), free_id != NONE)
        } else {
            let t = touched[i];
            i += 1;
            let b = scratch.block[t as usize] as usize;
            scratch.block[t as usize] = NONE;
            if block_group[b] == NONE {
                let combo = &mut combos[block_combo[b] as usize];
                let (all_id, free_id) =
                    *combo.ids.get_or_insert_with(|| (intern(&combo.through_any), intern(&combo.through_boundary)));
                block_group[b] = place(all_id, free_id, t, &mut out).expect("a block has a source");
                block_free[b] = free_id != NONE;
            }
            (t, Some(block_group[b]), block_free[b])
        };
        if let Some(gi) = gi {
            out.by_token.push((t, gi));
            if free {
                out.boundary_tokens.push(t);
            }
        }
    }
    // Tokens by group (a counting sort: ascending within each group).
    let mut start = vec![0u32; out.groups.len() + 1];
    for &(_, gi) in &out.by_token {
        start[gi as usize + 1] += 1;
    }
    for g in 0..out.groups.len() {
        start[g + 1] += start[g];
        out.groups[g].tokens = start[g]..start[g + 1];
    }
    let mut tokens = vec![0u32; out.by_token.len()];
    for &(t, gi) in &out.by_token {
        tokens[start[gi as usize] as usize] = t;
        start[gi as usize] += 1;
    }
    out.tokens = tokens.into_boxed_slice();
    Ok(out)
}
