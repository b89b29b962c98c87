//! The last phase of a pre-tokenized guide: its states `(member set, tokenizer side)`, searched
//! forward only (every member set holds a live element, so every state can finish).
//!
//! A state's successors on tokens that continue no member's lone-token split depend only on its
//! text states (the split nodes all become `NONE`): such *successor tables* are shared by the
//! *projection* of the member set; the few other tokens are *overrides* per (set, side).

use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::elements::Elements;
use super::pending::{ClassBits, PendingGroups, Wanted};
use super::successor_table::{successor_table, SuccessorTable, TableScratch};
use super::{exact_successors, Context};
use crate::build::search::{some_allowed, Registry};
use crate::error::Result;
use crate::guide::pre_tokenized::{
    class_or_lone, mark_allowed, side_of, Element, Member, Override, PreTokenizedAutomaton, SetTable, Side,
    TokenSetPool, LONE, NONE, START,
};
use crate::pre_tokenizer::text_automaton::{FrozenText, PieceBoundaries, TextAutomaton};
use crate::regex::byte_dfa::ByteDfa;
use crate::tokenizer_dfa::lone_tokens::{ROOT, SPELLED};
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::bitset;
use crate::util::token_set::TokenSet;

/// Tokens of a `(members, side)` with the same successor sets (`NONE` when empty): `through_any`
/// through any element, `through_boundary` through a boundary only.
pub(super) struct SetGroup {
    pub(super) through_any: u32,
    pub(super) through_boundary: u32,
    pub(super) class: u32,
    /// A range of its table's [`SetSearch::tokens`].
    pub(super) tokens: std::ops::Range<u32>,
}

impl SetGroup {
    /// Its tokens, out of its table's [`SetSearch::tokens`].
    fn tokens_in<'a>(&self, table_tokens: &'a [u32]) -> &'a [u32] {
        &table_tokens[self.tokens.start as usize..self.tokens.end as usize]
    }
}

/// The groups of a `(members, side)` and those whose targets are not reached yet.
struct SetSearch {
    groups: Vec<SetGroup>,
    /// The groups' tokens, group after group.
    tokens: Box<[u32]>,
    /// Lone-token groups with a `through_any` target (tested one by one: never forbidden).
    lone_any: Vec<u32>,
    pending_any: PendingGroups,
    pending_boundary: PendingGroups,
}

/// Member sets interned by value (ids in order of discovery; the empty set is `NONE`).
#[derive(Default)]
struct SetPool {
    sets: Vec<Box<[Member]>>,
    index: FxHashMap<Box<[Member]>, u32>,
}

impl SetPool {
    fn intern(&mut self, set: &[Member]) -> u32 {
        if set.is_empty() {
            return NONE;
        }
        if let Some(&id) = self.index.get(set) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(set.into());
        self.index.insert(set.into(), id);
        id
    }
}

/// Per member set: its projection, and the tokens continuing a member's lone-token split (as
/// `(token, _)` pairs, the shape `some_allowed` takes).
#[derive(Clone)]
struct SetInfo {
    projection: u32,
    continuations: Rc<[(u32, u32)]>,
}

/// The state search's tables, which become the guide's.
pub(super) struct States {
    sets: SetPool,
    states: Registry<(u32, u32)>,
    table_list: Vec<SetTable>,
    token_sets: TokenSetPool,
    state_table: Vec<u32>,
    override_list: Vec<Box<[Override]>>,
    state_override: Vec<u32>,
}

/// Runs the state search.
pub(super) fn search<M: PieceBoundaries>(
    ctx: &Context<'_>,
    text: &mut TextAutomaton<'_, M>,
    elements: &Elements,
    class_bits: &mut ClassBits,
) -> Result<States> {
    let mut search = StateSearch {
        ctx,
        elements,
        words: bitset::words_for(ctx.vocab.vocab_size()),
        out: States {
            sets: SetPool::default(),
            states: Registry::new(ctx.limits, "guide states (member set, tokenizer state) of a pre-tokenized guide"),
            table_list: Vec::new(),
            token_sets: TokenSetPool::default(),
            state_table: Vec::new(),
            override_list: vec![Box::new([])],
            state_override: Vec::new(),
        },
        tables: FxHashMap::default(),
        table_scratch: TableScratch::new(ctx.vocab.num_tokens(), ctx.splits),
        set_info: Vec::new(),
        searches: Vec::new(),
        overrides: FxHashMap::default(),
    };
    let start_set = search.out.sets.intern(&[Member::new(text.start(), ROOT)]);
    search.out.states.add((start_set, START))?;
    while let Some(id) = search.out.states.queue.pop_front() {
        ctx.limits.deadline.check("the pre-tokenized guide's state search")?;
        search.expand(text, id, class_bits)?;
    }
    Ok(search.out)
}

struct StateSearch<'c, 'a> {
    ctx: &'c Context<'a>,
    elements: &'c Elements,
    words: usize,
    out: States,
    /// `(projection, side)` → its successor table.
    tables: FxHashMap<(u32, Side), u32>,
    table_scratch: TableScratch,
    set_info: Vec<Option<SetInfo>>,
    /// Per successor table, its groups and which are still pending.
    searches: Vec<SetSearch>,
    /// `(set, side)` → its overrides.
    overrides: FxHashMap<(u32, Side), u32>,
}

impl StateSearch<'_, '_> {
    /// Registers the successors of state `id`.
    fn expand<M: PieceBoundaries>(
        &mut self,
        text: &mut TextAutomaton<'_, M>,
        id: u32,
        class_bits: &mut ClassBits,
    ) -> Result<()> {
        let tok = self.ctx.tok;
        let (set, c) = self.out.states.items[id as usize];
        let side = side_of(c);
        let info = self.set_info(set);
        let tid = self.table(text, info.projection, side)?;
        self.out.state_table.push(tid);
        // Tokens continuing some member's lone-token split (never after a lone token: no
        // unmarked successors there).
        let except: &[(u32, u32)] = if side == Side::AfterLone { &[] } else { &info.continuations };
        let oid = self.overrides_of(text, set, side, except)?;
        self.out.state_override.push(oid);
        let states = &mut self.out.states;
        let search = &mut self.searches[tid as usize];
        match side {
            Side::PieceStart | Side::AfterLone => {
                for g in &search.groups {
                    let target = if side == Side::PieceStart { g.through_any } else { g.through_boundary };
                    if target != NONE && some_allowed(g.tokens_in(&search.tokens), &[][..], except) {
                        states.add((target, g.class))?;
                    }
                }
            }
            Side::InPiece => {
                // As in CartesianMerge: each group is tested until its target is reached.
                let forbidden = &tok.forbidden(c);
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
        for o in self.out.override_list[oid as usize].iter() {
            let class = class_or_lone(tok, o.token);
            let forbidden = side == Side::InPiece && tok.forbids(c, o.token);
            let target = if forbidden { o.through_boundary } else { o.through_any };
            if target != NONE {
                states.add((target, class))?;
            }
        }
        Ok(())
    }

    /// Per member set, once: its projection and its split continuations.
    fn set_info(&mut self, set: u32) -> SetInfo {
        let splits = self.ctx.splits;
        if self.set_info.len() <= set as usize {
            self.set_info.resize(set as usize + 1, None);
        }
        if let Some(info) = &self.set_info[set as usize] {
            return info.clone();
        }
        let members = &self.out.sets.sets[set as usize];
        // (Whether a member's piece spells a lone token must survive: it may not end there.)
        let mut projection: Vec<Member> = members
            .iter()
            .map(|m| Member::new(m.text, if splits.spells_lone_token(m.split) { SPELLED } else { NONE }))
            .collect();
        projection.sort_unstable();
        projection.dedup();
        let mut continuations: Vec<(u32, u32)> =
            members.iter().flat_map(|m| splits.next_tokens(m.split).iter().map(|e| (e.0, 0))).collect();
        continuations.sort_unstable();
        continuations.dedup();
        let info = SetInfo { projection: self.out.sets.intern(&projection), continuations: continuations.into() };
        self.set_info[set as usize] = Some(info.clone());
        info
    }

    /// The successor table of a projection in `side`, built on first use.
    fn table<M: PieceBoundaries>(&mut self, text: &mut TextAutomaton<'_, M>, proj: u32, side: Side) -> Result<u32> {
        if let Some(&tid) = self.tables.get(&(proj, side)) {
            return Ok(tid);
        }
        let ctx = self.ctx;
        let projection = self.out.sets.sets[proj as usize].clone();
        let member_spells: Vec<bool> = projection.iter().map(|m| text.spells_content(m.text)).collect();
        let live = &self.elements.live;
        let sets = &mut self.out.sets;
        let SuccessorTable { groups, tokens, by_token, boundary_tokens } = successor_table(
            &mut self.table_scratch,
            &projection,
            &member_spells,
            side,
            ctx.tok,
            &self.elements.groups,
            &self.elements.marks_of,
            live,
            ctx.splits,
            &mut |m: &[Member]| sets.intern(m),
            &mut |t: u32| exact_successors(ctx, text, live, &projection, side, t),
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
        let tid = self.out.table_list.len() as u32;
        self.tables.insert((proj, side), tid);
        let any_tokens: Vec<u32> = by_token.iter().map(|&(t, _)| t).collect();
        let token_sets = &mut self.out.token_sets;
        let through_any = token_sets.intern(TokenSet::from_sorted(&any_tokens, self.words));
        let through_boundary = token_sets.intern(TokenSet::from_sorted(&boundary_tokens, self.words));
        self.out.table_list.push(SetTable { through_any, through_boundary });
        self.searches.push(SetSearch { groups, tokens, lone_any, pending_any, pending_boundary });
        ctx.limits.check_bytes(self.out.states.items.len(), 1, token_sets.heap_bytes())?;
        Ok(tid)
    }

    /// The overrides of `(set, side)` for the split continuations `except` (0: none).
    fn overrides_of<M: PieceBoundaries>(
        &mut self,
        text: &mut TextAutomaton<'_, M>,
        set: u32,
        side: Side,
        except: &[(u32, u32)],
    ) -> Result<u32> {
        if except.is_empty() {
            return Ok(0);
        }
        if let Some(&oid) = self.overrides.get(&(set, side)) {
            return Ok(oid);
        }
        let members = self.out.sets.sets[set as usize].clone();
        let mut list = Vec::with_capacity(except.len());
        for &(t, _) in except {
            let (any, boundary) = exact_successors(self.ctx, text, &self.elements.live, &members, side, t)?;
            list.push(Override {
                token: t,
                through_any: self.out.sets.intern(&any),
                through_boundary: self.out.sets.intern(&boundary),
            });
        }
        let oid = self.out.override_list.len() as u32;
        self.out.override_list.push(list.into_boxed_slice());
        self.overrides.insert((set, side), oid);
        Ok(oid)
    }
}

impl States {
    /// Sizes, for `PROPERTOK_DEBUG`.
    pub(super) fn summary(&self) -> String {
        format!(
            "{} member sets, {} guide states, {} tables",
            self.sets.sets.len(),
            self.states.items.len(),
            self.table_list.len()
        )
    }

    /// The decode-time automaton.
    pub(super) fn finish(
        self,
        ctx: &Context<'_>,
        tokenizer_dfa: &Arc<TokenizerDfa>,
        text: FrozenText,
        live: FxHashSet<Element>,
        dfa: ByteDfa,
    ) -> PreTokenizedAutomaton {
        let splits = ctx.splits;
        let sets = self.sets.sets;
        let accepting: Vec<bool> = self
            .states
            .items
            .iter()
            .map(|&(set, c)| {
                sets[set as usize].iter().any(|&Member { text: z, split: u }| {
                    text.is_accepting(z) && !splits.spells_lone_token(u) && mark_allowed(0, text.spells_content(z), c)
                })
            })
            .collect();
        PreTokenizedAutomaton {
            tokenizer_dfa: tokenizer_dfa.clone(),
            splits: splits.clone(),
            dfa,
            text,
            live,
            sets,
            set_index: self.sets.index,
            states: self.states.items,
            index: self.states.index,
            state_table: self.state_table,
            tables: self.table_list,
            token_sets: self.token_sets.sets,
            state_override: self.state_override,
            overrides: self.override_list,
            accepting,
        }
    }
}
