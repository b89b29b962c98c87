//! The first two phases of a pre-tokenized guide: the elements `(text state, tokenizer side,
//! split node)` reachable from the start (forward), then those that can reach acceptance
//! (backward), searched like CartesianMerge's product states: each text state's tokens are
//! grouped by (target text state, class), and a group is tested against a class's forbidden set
//! only until its target is reached.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use super::pending::{ClassBits, PendingGroups, Wanted};
use super::token_groups::{Grouper, TokenGroups};
use super::{token_groups, Context};
use crate::build::search::{some_allowed, Registry};
use crate::error::{Error, Result};
use crate::guide::pre_tokenized::{class_or_lone, mark_allowed, side_of, Element, Side, LONE, NONE, START};
use crate::pre_tokenizer::text_automaton::{PieceBoundaries, TextAutomaton};
use crate::regex::byte_dfa::DEAD;
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer_dfa::lone_tokens::ROOT;
use crate::tokenizer_dfa::NO_CLASS;

/// What the state search needs of the elements.
pub(super) struct Elements {
    /// Per expanded text state, its token groups.
    pub(super) groups: FxHashMap<u32, TokenGroups>,
    /// Per text state with boundaries expanded, its targets by boundary kind (`DEAD`: none).
    pub(super) marks_of: FxHashMap<u32, Vec<u32>>,
    /// The live elements.
    pub(super) live: FxHashSet<Element>,
    /// Elements reached (live or not).
    pub(super) count: usize,
}

/// Runs the forward and backward searches.
pub(super) fn search<M: PieceBoundaries>(
    ctx: &Context<'_>,
    text: &mut TextAutomaton<'_, M>,
    trie: &TokenTrie,
    class_bits: &mut ClassBits,
) -> Result<Elements> {
    let mut search = ElementSearch {
        ctx,
        groups: FxHashMap::default(),
        marks_of: FxHashMap::default(),
        split_edges: Vec::new(),
        elements: Registry::new(
            ctx.limits,
            "elements (text state, tokenizer state, split node) of a pre-tokenized guide",
        ),
    };
    search.forward(text, trie, class_bits)?;
    let live = search.backward(text)?;
    let count = search.elements.items.len();
    Ok(Elements { groups: search.groups, marks_of: search.marks_of, live, count })
}

struct ElementSearch<'c, 'a> {
    ctx: &'c Context<'a>,
    groups: FxHashMap<u32, TokenGroups>,
    marks_of: FxHashMap<u32, Vec<u32>>,
    /// Edges on tokens that continue a lone token's split: (source element, target element).
    split_edges: Vec<(u32, Element)>,
    elements: Registry<Element>,
}

impl ElementSearch<'_, '_> {
    /// Registers every element reachable from the start.
    fn forward<M: PieceBoundaries>(
        &mut self,
        text: &mut TextAutomaton<'_, M>,
        trie: &TokenTrie,
        class_bits: &mut ClassBits,
    ) -> Result<()> {
        let Context { vocab, tok, splits, limits } = *self.ctx;
        // Compile temporaries that grow with the text states: their token groups.
        let mut group_bytes = 0usize;
        let mut grouper = Grouper::new(vocab.num_tokens(), |t| class_or_lone(tok, t));
        let mut pending: FxHashMap<u32, PendingGroups> = FxHashMap::default();
        let mut marks_done: FxHashSet<(u32, bool)> = FxHashSet::default();
        let elements = &mut self.elements;
        elements.add(Element::new(text.start(), START, ROOT))?;
        while let Some(id) = elements.queue.pop_front() {
            limits.deadline.check("the pre-tokenized guide's forward search")?;
            let Element { text: z, tokenizer: c, split: u } = elements.items[id as usize];
            if let std::collections::hash_map::Entry::Vacant(slot) = self.groups.entry(z) {
                let g = token_groups(text, trie, &mut grouper, z)?;
                group_bytes += g.heap_bytes();
                limits.check_bytes(elements.items.len(), 1, group_bytes)?;
                slot.insert(g);
            }
            let split_continuations = splits.next_tokens(u);
            let gs = &self.groups[&z];
            match side_of(c) {
                Side::PieceStart => {
                    for g in &gs.groups {
                        if some_allowed(gs.tokens(g), &[][..], split_continuations) {
                            elements.add(Element::new(g.to, g.class, NONE))?;
                        }
                    }
                }
                Side::AfterLone => {}
                Side::InPiece => {
                    // Groups not pending have their target reached already. Tokens continuing
                    // the lone-token split of `u` are left to the edges below. (Made on the first
                    // visit in this side: most text states never get one.)
                    let pending = pending.entry(z).or_insert_with(|| {
                        let regular = gs.groups.iter().enumerate().filter(|(_, g)| g.class != LONE);
                        PendingGroups::new(regular.map(|(i, g)| (i as u32, gs.tokens(g))), gs.groups.len())
                    });
                    let ids = &tok.forbidden(c);
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
                    Side::InPiece => tok.class_of(t) != NO_CLASS && !tok.forbids(c, t),
                };
                if allowed {
                    let to = text.walk(z, vocab.token_bytes(t))?;
                    if to != DEAD {
                        let target = Element::new(to, class_or_lone(tok, t), child);
                        elements.add(target)?;
                        self.split_edges.push((id, target));
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
                self.marks_of.insert(z, ms);
            }
        }
        Ok(())
    }

    /// The elements that can reach acceptance. When an element becomes live, only the
    /// not-yet-live elements over the text states of its predecessors are tested.
    fn backward<M: PieceBoundaries>(&self, text: &mut TextAutomaton<'_, M>) -> Result<FxHashSet<Element>> {
        let Context { tok, splits, limits, .. } = *self.ctx;
        let elements = &self.elements;
        let mut not_live: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for (id, &Element { text: z, .. }) in elements.items.iter().enumerate() {
            not_live.entry(z).or_default().push(id as u32);
        }
        // The groups `(z, group index)` into each `(text state, class)`: chained in one vector
        // (most keys have one; a vector per key cost a third of this phase).
        let num_groups: usize = self.groups.values().map(|gs| gs.groups.len()).sum();
        let mut group_preds: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        group_preds.reserve(num_groups);
        let mut pred_chain: Vec<(u32, u32, u32)> = Vec::with_capacity(num_groups);
        for (&z, gs) in &self.groups {
            for (gi, g) in gs.groups.iter().enumerate() {
                let head = group_preds.entry((g.to, g.class)).or_insert(NONE);
                pred_chain.push((z, gi as u32, *head));
                *head = pred_chain.len() as u32 - 1;
            }
        }
        let mut mark_preds: FxHashMap<u32, Vec<(u32, usize)>> = FxHashMap::default();
        for (&z, ms) in &self.marks_of {
            for (kind, &zm) in ms.iter().enumerate().filter(|&(_, &zm)| zm != DEAD) {
                mark_preds.entry(zm).or_default().push((z, kind));
            }
        }
        let mut split_preds: FxHashMap<Element, Vec<u32>> = FxHashMap::default();
        for &(src, target) in &self.split_edges {
            split_preds.entry(target).or_default().push(src);
        }
        let mut live = vec![false; elements.items.len()];
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
                let gs = &self.groups[&zs];
                let g = &gs.groups[gi as usize];
                let tokens = gs.tokens(g);
                promote(zs, &mut live, &mut work, &|Element { tokenizer: cp, split: up, .. }| match side_of(cp) {
                    Side::PieceStart => some_allowed(tokens, &[][..], splits.next_tokens(up)),
                    Side::AfterLone => false,
                    Side::InPiece => {
                        g.class != LONE && some_allowed(tokens, &tok.forbidden(cp), splits.next_tokens(up))
                    }
                });
            }
        }
        if !live[0] {
            return Err(Error::EmptyLanguage(
                "no canonical token sequence spells a string of the regex (its strings are not representable by this tokenizer, or its pre-tokenizer never splits them so)".into(),
            ));
        }
        Ok(elements.items.iter().zip(&live).filter(|(_, &l)| l).map(|(&e, _)| e).collect())
    }
}
