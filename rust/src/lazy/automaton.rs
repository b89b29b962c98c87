//! The states of a lazy guide, numbered as decoders reach them.
//!
//! A state is `(member set, tokenizer side)`: the text states (with split nodes) the text so
//! far may be in — a token boundary may or may not be a piece boundary until later text decides
//! — and the side the last token left (its class, at a piece start, after a lone token, or inside
//! a byte-fallback character). Without a pre-tokenizer a member set has one member. Its mask:
//! * at a piece start, the first tokens of its members;
//! * after a token of class `c`, the members' first tokens that have a class, less `F(c)`, plus
//!   the byte-fallback moves and the first tokens after each boundary the members allow;
//! * after a lone token, only the first tokens after a boundary;
//! * inside a byte-fallback character, the byte tokens that continue it.
//!
//! A grammar's special token is in the mask when a member may end its text there and the text
//! after the token can start afresh (`Engine::token_successor`); its successor is that start.
//!
//! A token's successor is computed on request (`next_state`) with the same liveness facts the
//! masks use, so a token is in the mask exactly when it has a successor.

use rustc_hash::FxHashSet;

use std::sync::Arc;

use super::after_class::AfterClass;
use super::engine::{Engine, Node, Side, TokenizerParts};
use super::text::TextId;
use crate::error::{Error, Result};
use crate::tokenizer_dfa::lone_tokens::ROOT;
use crate::tokenizer_dfa::side::{class_or_lone, mark_allowed, LONE, NONE, START};
use crate::util::bitset::{self, Filled, Recipe};
use crate::util::concurrent::{Interner, ShardedMap};
use crate::util::token_set::TokenSet;

/// A member of a state: a text state and a lone-token split node.
type Member = (TextId, u32);

/// A state after a class whose members' first tokens are sparse sets of at most
/// `mask words / SPARSE_FILTER_DIVISOR` tokens in all tests each token against the lone tokens
/// and `F(c)` rather than clearing both from the whole mask.
const SPARSE_FILTER_DIVISOR: usize = 2;

/// What one token's lookup in a forbidden set without a bitset costs, in ids of the set cleared
/// from a mask: fewer tokens than `|F(c)| / LOOKUP_COST_IN_CLEARED_IDS` are looked up one by
/// one, more are set and `F(c)` cleared after them.
const LOOKUP_COST_IN_CLEARED_IDS: usize = 8;

/// A dense mask after a token of class `class` inside a string, kept as the tokenizer's part no
/// class changes and the ids set beside it (byte-fallback moves, special tokens, EOS): a few
/// dozen bytes in the guide's mask cache where its words are 16 KB on Llama 3, written again
/// in one pass over the part, `F(class)` and the sets after its boundaries (see
/// [`crate::lazy::after_class`]).
struct AfterClassMask {
    parts: Arc<TokenizerParts>,
    part: Arc<AfterClass>,
    class: u32,
    ids: Box<[u32]>,
}

impl Recipe for AfterClassMask {
    fn write(&self, out: &mut [u32]) {
        let (parts, class) = (&*self.parts, self.class);
        parts.with_forbidden_bits(class, out.len(), |bits| {
            self.part.write(bits.filter(|bits| bits.len() == out.len()), &parts.tok.forbidden(class), out)
        });
        self.ids.iter().for_each(|&t| bitset::set(out, t as usize));
    }

    fn heap_bytes(&self) -> usize {
        self.ids.len() * 4 + std::mem::size_of::<AfterClassMask>()
    }
}

/// See the module docs.
pub(crate) struct LazyAutomaton {
    engine: Engine,
    /// The ids of the grammar's special tokens, by marker index (see [`TextSpace::token`]).
    ///
    /// [`TextSpace::token`]: super::text::TextSpace::token
    tokens: Vec<u32>,
    sets: Interner<Box<[Member]>>,
    states: Interner<(u32, u32)>,
    /// The part of each dense member's masks after a class that no class changes (see
    /// [`LazyAutomaton::fill_after_class`]).
    after_class: ShardedMap<Member, Arc<AfterClass>>,
}

impl LazyAutomaton {
    /// The automaton with its initial state (0): the start text state at the tokenizer's
    /// initial side (`START` with a pre-tokenizer). `tokens` are the ids of the special tokens
    /// the regex's markers name, in marker order. `EmptyLanguage` when nothing is accepted.
    pub(crate) fn new(engine: Engine, tokens: Vec<u32>) -> Result<LazyAutomaton> {
        debug_assert_eq!(tokens.len(), engine.space().num_tokens());
        let initial = engine.text_start(engine.start());
        if !engine.timed(|| engine.live(initial))? {
            return Err(Error::EmptyLanguage(
                "no canonical token sequence spells a string of the regex (its strings are not representable by this tokenizer, or its pre-tokenizer never splits them so)".into(),
            ));
        }
        let automaton = LazyAutomaton {
            engine,
            tokens,
            sets: Interner::default(),
            states: Interner::default(),
            after_class: ShardedMap::default(),
        };
        let set = automaton.intern_set(vec![(initial.text, initial.split)])?;
        automaton.intern_state(set, initial.side)?;
        Ok(automaton)
    }

    /// The grammar's special tokens, by marker index.
    pub(crate) fn special_tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn num_states(&self) -> usize {
        self.states.len()
    }

    fn intern_set(&self, set: Vec<Member>) -> Result<u32> {
        Ok(self.sets.intern_unbounded(&set.into_boxed_slice()))
    }

    fn intern_state(&self, set: u32, side: u32) -> Result<u32> {
        let max = self.engine.max_states();
        self.states.intern(&(set, side), max).map(|(id, _)| id).map_err(|n| Error::LimitExceeded {
            limit: "max_product_states",
            value: max.to_string(),
            what: format!("{n} states of a lazy guide"),
        })
    }

    fn members(&self, state: u32) -> (&[Member], u32) {
        let &(set, side) = self.states.key(state);
        (self.sets.key(set), side)
    }

    /// EOS is allowed here.
    pub(crate) fn is_final(&self, state: u32) -> bool {
        let (members, side) = self.members(state);
        members.iter().any(|&(text, split)| self.engine.accepts(Node { text, side, split }))
    }

    /// The text states after each boundary `(z, u)` allows from `side` (`side` matters only as
    /// "after a lone token" or not).
    fn boundaries(&self, z: TextId, u: u32, side: u32) -> Result<Vec<TextId>> {
        let engine = &self.engine;
        let space = engine.space();
        if side == START || engine.parts().splits.spells_lone_token(u) {
            return Ok(Vec::new());
        }
        let key = engine.key(z);
        let spells = space.spells_content(key);
        let mut out = Vec::new();
        for kind in 0..space.num_stages() {
            if mark_allowed(kind, spells, side) {
                if let Some(zm) = space.mark(key, kind) {
                    out.push(engine.text_id(zm)?);
                }
            }
        }
        Ok(out)
    }

    /// The mask (see the module docs) with the `eos` ids set (none where the state is not
    /// final), and what the caller's mask cache may keep instead of scanning the 16 KB it was
    /// written to: its ids (in no order, maybe repeated) where every set it was made of is
    /// sparse and they number at most `max_ids` (a key's, a literal's, a number's state), or a
    /// recipe for a dense mask after a class (a string's contents, see
    /// [`crate::lazy::after_class`]).
    pub(crate) fn write_mask(&self, state: u32, out: &mut [u32], max_ids: usize, eos: &[u32]) -> Result<Filled> {
        self.engine.timed(|| self.fill_mask(state, out, max_ids, eos))
    }

    fn fill_mask(&self, state: u32, out: &mut [u32], max_ids: usize, eos: &[u32]) -> Result<Filled> {
        let engine = &self.engine;
        let parts = engine.parts();
        let (members, side) = self.members(state);
        // The ids set so far, while every set has been sparse and small enough.
        let mut ids: Option<Vec<u32>> = Some(Vec::new());
        let add_set = |set: &TokenSet, out: &mut [u32], ids: &mut Option<Vec<u32>>| {
            set.or_into(out);
            match (set.as_sparse(), ids.as_mut()) {
                (Some(set), Some(ids)) if ids.len() + set.len() <= max_ids => ids.extend_from_slice(set),
                _ => *ids = None,
            }
        };
        let add = |t: u32, out: &mut [u32], ids: &mut Option<Vec<u32>>| {
            bitset::set(out, t as usize);
            match ids {
                Some(ids) if ids.len() < max_ids => ids.push(t),
                _ => *ids = None,
            }
        };
        match engine.side(side) {
            Side::PieceStart => {
                let sets = members.iter().map(|&(z, u)| engine.first_tokens(z, u)).collect::<Result<Vec<_>>>()?;
                match &sets[..] {
                    // One dense set (a string's contents): copied, not cleared and ORed.
                    [set] if set.as_dense().is_some_and(|words| words.len() == out.len()) => {
                        out.copy_from_slice(set.as_dense().expect("dense"));
                        ids = None;
                    }
                    _ => {
                        out.fill(0);
                        sets.iter().for_each(|set| add_set(set, out, &mut ids));
                    }
                }
            }
            Side::InPiece(c) => {
                let sets = members.iter().map(|&(z, u)| engine.first_tokens(z, u)).collect::<Result<Vec<_>>>()?;
                let sparse: Option<usize> = sets.iter().map(|set| set.as_sparse().map(<[u32]>::len)).sum();
                let one_dense = match (&sets[..], members) {
                    ([set], &[member]) if set.as_dense().is_some_and(|set| set.len() == out.len()) => {
                        Some((set, member)).filter(|_| parts.lone.len() == out.len())
                    }
                    _ => None,
                };
                if let Some((set, member)) = one_dense {
                    return self.fill_after_class(c, set, member, side, out, eos);
                } else if let Some(n) = sparse.filter(|&n| n <= out.len() / SPARSE_FILTER_DIVISOR) {
                    out.fill(0);
                    // A narrow state's few first tokens (a key literal's, a number's) are tested
                    // one by one: clearing the lone tokens and `F(c)` word by word from the
                    // whole mask would cost more.
                    let tokens = || sets.iter().filter_map(|set| set.as_sparse()).flatten().copied();
                    let kept = |t: u32| !bitset::contains(&parts.lone, t as usize);
                    if n * LOOKUP_COST_IN_CLEARED_IDS <= parts.tok.forbidden(c).len()
                        || parts.tok.forbidden_bits(c).is_some()
                    {
                        (tokens().filter(|&t| kept(t) && !parts.tok.forbids(c, t))).for_each(|t| add(t, out, &mut ids));
                    } else {
                        // Many tokens against `F(c)`'s few ids a word: `F(c)` is cleared from
                        // the mask once the tokens are in, and the tokens kept are those left.
                        // Each token looked up in it (a rank table's cache miss, then a search
                        // among runs) cost ~80 µs at a string's opening on o200k: 2,780 tokens
                        // after ` "`.
                        #[cfg(test)]
                        engine.masks_cleared_after.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tokens().filter(|&t| kept(t)).for_each(|t| bitset::set(out, t as usize));
                        parts.clear_forbidden(c, out);
                        for t in tokens() {
                            if bitset::contains(out, t as usize) {
                                add(t, out, &mut ids);
                            }
                        }
                    }
                } else {
                    ids = None;
                    out.fill(0);
                    sets.iter().for_each(|set| set.or_into(out));
                    for (o, &l) in out.iter_mut().zip(parts.lone.iter()) {
                        *o &= !l;
                    }
                    parts.clear_forbidden(c, out);
                }
                for &(z, u) in members {
                    if u == NONE {
                        for &t in engine.fallback_moves(z, side)?.iter() {
                            add(t, out, &mut ids);
                        }
                    }
                }
            }
            Side::AfterLone => out.fill(0),
            Side::InChar(_) => {
                out.fill(0);
                for &(z, _) in members {
                    for &t in engine.fallback_moves(z, side)?.iter() {
                        add(t, out, &mut ids);
                    }
                }
            }
        }
        if matches!(engine.side(side), Side::InPiece(_) | Side::AfterLone) {
            for &(z, u) in members {
                for zm in self.boundaries(z, u, side)? {
                    if engine.live(Node::piece_start(zm))? {
                        add_set(&*engine.first_tokens(zm, ROOT)?, out, &mut ids);
                    }
                }
            }
        }
        for (j, &id) in self.tokens.iter().enumerate() {
            if !self.token_successors(members, side, j)?.is_empty() {
                add(id, out, &mut ids);
            }
        }
        eos.iter().for_each(|&e| add(e, out, &mut ids));
        Ok(ids.map_or(Filled::Words, Filled::Ids))
    }

    /// The mask after class `c` of a state whose one member `(z, u)` has dense first tokens
    /// `set` (a string's contents, the median first visit), and its recipe: the tokenizer's
    /// part no class changes, which holds the first tokens after the member's boundaries
    /// ([`crate::lazy::after_class`]), less `F(c)`, plus the byte-fallback moves, the special
    /// tokens and `eos`.
    fn fill_after_class(
        &self,
        c: u32,
        set: &Arc<TokenSet>,
        (z, u): Member,
        side: u32,
        out: &mut [u32],
        eos: &[u32],
    ) -> Result<Filled> {
        let engine = &self.engine;
        let parts = engine.parts();
        // The part is the member's whatever the class: inside a piece, which boundaries a
        // member allows, and whether their piece starts are live, do not depend on it. Kept
        // per member, a first visit after another class skips the boundaries' lookups and the
        // tokenizer's cache (issue 18's Llama 3 documents: first-visit median 3.33-3.37 ->
        // 3.00-3.06 µs).
        let part = match self.after_class.get(&(z, u)) {
            Some(part) => part,
            None => {
                let mut after = Vec::new();
                for zm in self.boundaries(z, u, side)? {
                    if engine.live(Node::piece_start(zm))? {
                        after.push(engine.first_tokens(zm, ROOT)?);
                    }
                }
                let part = parts.after_class.get_or_make(set, &after, &parts.lone);
                self.after_class.insert_if_absent((z, u), part)
            }
        };
        let mut ids = Vec::new();
        if u == NONE {
            ids.extend_from_slice(&engine.fallback_moves(z, side)?);
        }
        for (j, &id) in self.tokens.iter().enumerate() {
            if !self.token_successors(&[(z, u)], side, j)?.is_empty() {
                ids.push(id);
            }
        }
        ids.extend_from_slice(eos);
        let recipe =
            AfterClassMask { parts: engine.shared_parts().clone(), part, class: c, ids: ids.into_boxed_slice() };
        recipe.write(out);
        Ok(Filled::Recipe(Arc::new(recipe)))
    }

    /// The live members after the grammar's special token `j`, from each member that may take it.
    fn token_successors(&self, members: &[Member], side: u32, j: usize) -> Result<Vec<Member>> {
        let mut out = Vec::new();
        for &(text, split) in members {
            if let Some(n) = self.engine.token_successor(Node { text, side, split }, j)? {
                if self.engine.live(n)? {
                    out.push((n.text, n.split));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The state after a non-EOS token, `None` when it is not allowed.
    pub(crate) fn next_state(&self, state: u32, token: u32) -> Result<Option<u32>> {
        self.engine.timed(|| self.step(state, token))
    }

    fn step(&self, state: u32, token: u32) -> Result<Option<u32>> {
        let engine = &self.engine;
        let parts = engine.parts();
        let tok = &*parts.tok;
        let (members, side) = self.members(state);
        if let Some(j) = self.tokens.iter().position(|&t| t == token) {
            let after = self.token_successors(members, side, j)?;
            if after.is_empty() {
                return Ok(None);
            }
            let side = engine.text_start(after[0].0).side;
            let set = self.intern_set(after)?;
            return Ok(Some(self.intern_state(set, side)?));
        }
        if let Some(b) = tok.fallback_byte(token) {
            // Byte fallback: only without a pre-tokenizer, where a state has one member.
            let mut targets = FxHashSet::default();
            for &(z, _) in members.iter().filter(|m| m.1 == NONE) {
                let key = engine.key(z);
                if let (Some(to), Some(next)) = (engine.space().byte(key, b), tok.step_byte(side, b)) {
                    let n = Node { text: engine.text_id(to)?, side: next, split: NONE };
                    if engine.live(n)? {
                        targets.insert((n.text, next));
                    }
                }
            }
            let mut targets: Vec<(TextId, u32)> = targets.into_iter().collect();
            targets.sort_unstable();
            return match targets.as_slice() {
                [] => Ok(None),
                [(text, next)] => {
                    let set = self.intern_set(vec![(*text, NONE)])?;
                    Ok(Some(self.intern_state(set, *next)?))
                }
                _ => unreachable!("a state without a pre-tokenizer has one member"),
            };
        }
        if !bitset::contains(&parts.usable, token as usize) {
            return Ok(None);
        }
        let class = class_or_lone(tok, token);
        let bytes = parts.vocab.token_bytes(token);
        let side_kind = engine.side(side);
        let forbidden = matches!(side_kind, Side::InPiece(c) if tok.forbids(c, token));
        let mut out: Vec<Member> = Vec::new();
        let reach = |z: TextId, u: u32, out: &mut Vec<Member>| -> Result<()> {
            if let Some(to) = engine.space().walk(engine.key(z), bytes) {
                let child = parts.splits.child(u, token);
                let text = engine.text_id(to)?;
                if engine.live(Node { text, side: class, split: child })? {
                    out.push((text, child));
                }
            }
            Ok(())
        };
        let in_piece = match side_kind {
            Side::PieceStart => true,
            Side::InPiece(_) => !forbidden && class != LONE,
            Side::AfterLone | Side::InChar(_) => false,
        };
        if in_piece {
            for &(z, u) in members {
                reach(z, u, &mut out)?;
            }
        }
        if matches!(side_kind, Side::InPiece(_) | Side::AfterLone) {
            for &(z, u) in members {
                for zm in self.boundaries(z, u, side)? {
                    if engine.live(Node::piece_start(zm))? {
                        reach(zm, ROOT, &mut out)?;
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        if out.is_empty() {
            return Ok(None);
        }
        let set = self.intern_set(out)?;
        Ok(Some(self.intern_state(set, class)?))
    }

    /// For each token, the fewest bytes to acceptance after its bytes from any member, or from
    /// any boundary a member allows (`u32::MAX` when no regex state takes them): a hint for
    /// finishing walks that builds no state.
    pub(crate) fn distances_after(&self, state: u32, tokens: &[u32]) -> Result<Vec<u32>> {
        let engine = &self.engine;
        let space = engine.space();
        let (members, side) = self.members(state);
        let mut starts = Vec::new();
        for &(z, u) in members {
            starts.push(engine.key(z));
            if matches!(engine.side(side), Side::InPiece(_) | Side::AfterLone) {
                for zm in self.boundaries(z, u, side)? {
                    starts.push(engine.key(zm));
                }
            }
        }
        starts.sort_unstable();
        starts.dedup();
        let vocab = &engine.parts().vocab;
        let after = |t: u32| match self.tokens.iter().position(|&s| s == t) {
            Some(j) => {
                let after = members.iter().filter_map(|&(z, _)| space.token(engine.key(z), j));
                after.map(|to| space.distance(to)).min().unwrap_or(u32::MAX)
            }
            None => {
                let bytes = vocab.token_bytes(t);
                let walked = starts.iter().filter_map(|&z| space.walk(z, bytes));
                walked.map(|to| space.distance(to)).min().unwrap_or(u32::MAX)
            }
        };
        Ok(tokens.iter().map(|&t| after(t)).collect())
    }

    /// Fewest bytes to acceptance over the members' regex states (a hint for finishing walks).
    pub(crate) fn distance_hint(&self, state: u32) -> u32 {
        let (members, _) = self.members(state);
        members.iter().map(|&(z, _)| self.engine.space().distance(self.engine.key(z))).min().unwrap_or(u32::MAX)
    }
}
