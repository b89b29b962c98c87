//! The decode-time form of a pre-tokenized guide: masks, steps, and its serialisation.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::pre_tokenizer::text_automaton::FrozenText;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::bitset;
use crate::util::token_set::TokenSet;

use crate::tokenizer_dfa::lone_tokens::{LoneSplits, ROOT, SPELLED};
pub(crate) use crate::tokenizer_dfa::side::{class_or_lone, mark_allowed, side_of, Side, LONE, NONE, START};

/// A member of a guide state: a text state and a [`LoneSplits`] node. Ordered by text state,
/// then split node (member sets are stored sorted).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) struct Member {
    pub(crate) text: u32,
    pub(crate) split: u32,
}

impl Member {
    pub(crate) const fn new(text: u32, split: u32) -> Member {
        Member { text, split }
    }
}

/// An element of the search: a text state, a tokenizer-side state (a class, [`START`] or
/// [`LONE`]) and a [`LoneSplits`] node.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) struct Element {
    pub(crate) text: u32,
    pub(crate) tokenizer: u32,
    pub(crate) split: u32,
}

impl Element {
    pub(crate) const fn new(text: u32, tokenizer: u32, split: u32) -> Element {
        Element { text, tokenizer, split }
    }
}

/// Per `(members, side)`: tokens with a live successor (`through_any`), and through a boundary
/// (`through_boundary`, a subset of `through_any`), as indices into the guide's deduplicated [`TokenSet`]s.
pub(crate) struct SetTable {
    pub(crate) through_any: u32,
    pub(crate) through_boundary: u32,
}

/// Token sets deduplicated by value (many projections share theirs; most `through_boundary` sets are
/// empty).
#[derive(Default)]
pub(crate) struct TokenSetPool {
    pub(crate) sets: Vec<TokenSet>,
    index: FxHashMap<TokenSet, u32>,
    bytes: usize,
}

impl TokenSetPool {
    pub(crate) fn intern(&mut self, set: TokenSet) -> u32 {
        if let Some(&id) = self.index.get(&set) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.bytes += set.heap_bytes();
        self.sets.push(set.clone());
        self.index.insert(set, id);
        id
    }
    /// Heap bytes of the distinct sets.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes
    }
}

/// A token whose successor sets differ from its projection's table (it continues a member's
/// lone-token split).
pub(crate) struct Override {
    pub(crate) token: u32,
    pub(crate) through_any: u32,
    pub(crate) through_boundary: u32,
}

/// The decode-time form of a pre-tokenized guide (see the module docs).
pub(crate) struct PreTokenizedAutomaton {
    pub(crate) tokenizer_dfa: Arc<TokenizerDfa>,
    pub(crate) splits: LoneSplits,
    pub(crate) dfa: ByteDfa,
    pub(crate) text: FrozenText,
    pub(crate) live: FxHashSet<Element>,
    pub(crate) sets: Vec<Box<[Member]>>,
    pub(crate) set_index: FxHashMap<Box<[Member]>, u32>,
    pub(crate) states: Vec<(u32, u32)>,
    pub(crate) index: FxHashMap<(u32, u32), u32>,
    pub(crate) state_table: Vec<u32>,
    pub(crate) tables: Vec<SetTable>,
    pub(crate) token_sets: Vec<TokenSet>,
    /// Per state, an index into `overrides` (0: none).
    pub(crate) state_override: Vec<u32>,
    pub(crate) overrides: Vec<Box<[Override]>>,
    pub(crate) accepting: Vec<bool>,
}

impl PreTokenizedAutomaton {
    pub(crate) fn is_final(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// The mask without EOS: `(A \ F(c)) ∪ (B ∩ F(c))`.
    pub(crate) fn write_mask(&self, state: u32, out: &mut [u32]) {
        let (_, c) = self.states[state as usize];
        let table = &self.tables[self.state_table[state as usize] as usize];
        let regular = side_of(c) == Side::InPiece;
        let all = &self.token_sets[table.through_any as usize];
        // `free ⊆ all`, so `(A \ F) ∪ (B ∩ F)` is `(A \ F) ∪ B`.
        if regular {
            all.write_minus(&self.tokenizer_dfa.forbidden(c), self.tokenizer_dfa.forbidden_bits(c), out);
        } else {
            all.write_minus(&[][..], None, out);
        }
        if regular {
            self.token_sets[table.through_boundary as usize].or_into(out);
        }
        for o in self.overrides[self.state_override[state as usize] as usize].iter() {
            let forbidden = regular && self.tokenizer_dfa.forbids(c, o.token);
            if (if forbidden { o.through_boundary } else { o.through_any }) != NONE {
                bitset::set(out, o.token as usize);
            } else {
                bitset::clear(out, o.token as usize);
            }
        }
    }

    /// The target of a non-EOS token, `None` when it is not allowed.
    pub(crate) fn next_state(&self, vocab: &Vocabulary, state: u32, token: u32) -> Option<u32> {
        let (set, c) = self.states[state as usize];
        let side = side_of(c);
        let forbidden = side == Side::InPiece && self.tokenizer_dfa.forbids(c, token);
        let class = class_or_lone(&self.tokenizer_dfa, token);
        let bytes = vocab.token_bytes(token);
        let mut out: Vec<Member> = Vec::new();
        let reach = |z: u32, u: u32, out: &mut Vec<Member>| {
            let to = self.text.walk(z, bytes);
            let child = self.splits.child(u, token);
            if to != DEAD && self.live.contains(&Element::new(to, class, child)) {
                out.push(Member::new(to, child));
            }
        };
        let members = &self.sets[set as usize];
        if !forbidden && side != Side::AfterLone && (side == Side::PieceStart || class != LONE) {
            for &Member { text: z, split: u } in members.iter() {
                reach(z, u, &mut out);
            }
        }
        if side != Side::PieceStart {
            for &Member { text: z, split: u } in members.iter() {
                if self.splits.spells_lone_token(u) {
                    continue;
                }
                let spells = self.text.spells_content(z);
                for (kind, &zm) in self.text.marks(z).iter().enumerate() {
                    if zm != DEAD && mark_allowed(kind, spells, c) && self.live.contains(&Element::new(zm, START, ROOT))
                    {
                        reach(zm, ROOT, &mut out);
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        let target = self.set_index.get(out.as_slice())?;
        self.index.get(&(*target, class)).copied()
    }

    /// Fewest bytes to acceptance over the members' regex states (a hint for finishing walks).
    pub(crate) fn distance_hint(&self, state: u32) -> u32 {
        let (set, _) = self.states[state as usize];
        self.sets[set as usize]
            .iter()
            .map(|m| self.dfa.distance_to_accept(self.text.regex_state(m.text)))
            .min()
            .unwrap_or(u32::MAX)
    }

    pub(crate) fn num_states(&self) -> usize {
        self.states.len()
    }

    /// Approximate heap bytes, by part: `(name, bytes)`.
    pub(crate) fn heap_bytes_by_part(&self) -> Vec<(&'static str, usize)> {
        // Hash tables: entry plus one control byte, at their capacity.
        let hashed = |cap: usize, entry: usize| cap * (entry + 1);
        vec![
            ("text automaton", self.text.heap_bytes()),
            ("live elements", hashed(self.live.capacity(), 12)),
            (
                "member sets",
                self.sets.iter().map(|s| s.len() * 8 * 2 + 16).sum::<usize>() + hashed(self.set_index.capacity(), 20),
            ),
            ("states", self.states.len() * 8 + hashed(self.index.capacity(), 12) + self.states.len() * 9),
            ("token sets", self.token_sets.iter().map(|s| s.heap_bytes() + 24).sum::<usize>() + self.tables.len() * 8),
            ("overrides", self.overrides.iter().map(|o| o.len() * 12 + 16).sum::<usize>()),
            ("regex DFA", self.dfa.heap_bytes()),
        ]
    }

    /// Serialises the automaton into `w` (part of a guide's serialisation).
    pub(crate) fn write(&self, w: &mut impl crate::util::serialize::Sink) {
        self.dfa.write(w);
        self.text.write(w);
        w.u32s(&self.splits.terminal.iter().map(|&t| t as u32).collect::<Vec<_>>());
        for ch in &self.splits.children {
            w.u32s(&ch.iter().flat_map(|&(t, u)| [t, u]).collect::<Vec<_>>());
        }
        let mut live: Vec<Element> = self.live.iter().copied().collect();
        live.sort_unstable();
        w.u32s(&live.iter().flat_map(|e| [e.text, e.tokenizer, e.split]).collect::<Vec<_>>());
        w.u64(self.sets.len() as u64);
        for set in &self.sets {
            w.u32s(&set.iter().flat_map(|m| [m.text, m.split]).collect::<Vec<_>>());
        }
        w.u32s(&self.states.iter().flat_map(|&(s, c)| [s, c]).collect::<Vec<_>>());
        w.u32s(&self.state_table);
        w.u64(self.token_sets.len() as u64);
        for set in &self.token_sets {
            set.write(w);
        }
        w.u32s(&self.tables.iter().flat_map(|t| [t.through_any, t.through_boundary]).collect::<Vec<_>>());
        w.u32s(&self.state_override);
        w.u64(self.overrides.len() as u64);
        for o in &self.overrides {
            w.u32s(&o.iter().flat_map(|o| [o.token, o.through_any, o.through_boundary]).collect::<Vec<_>>());
        }
        w.u32s(&self.accepting.iter().map(|&a| a as u32).collect::<Vec<_>>());
    }

    /// Reads an automaton written by [`PreTokenizedAutomaton::write`], checking every index, so
    /// that a crafted file gives an error, never a panic.
    pub(crate) fn read(
        r: &mut crate::util::serialize::Reader<'_>,
        tok: Arc<TokenizerDfa>,
        vocab: &Vocabulary,
    ) -> Result<Self> {
        let bad = |what: &str| Error::InvalidArgument(format!("invalid serialized guide: pre-tokenized {what}"));
        let dfa = ByteDfa::read(r)?;
        let text = FrozenText::read(r, dfa.num_states())?;
        let nz = text.num_states() as u32;
        let terminal: Vec<bool> = r.u32s()?.into_iter().map(|t| t != 0).collect();
        let mut children = Vec::with_capacity(terminal.len());
        for _ in 0..terminal.len() {
            let flat = r.u32s()?;
            let ch: Vec<(u32, u32)> = flat.chunks_exact(2).map(|c| (c[0], c[1])).collect();
            if flat.len() % 2 != 0
                || ch.windows(2).any(|w| w[0].0 >= w[1].0)
                || ch.iter().any(|&(_, u)| u as usize >= terminal.len())
            {
                return Err(bad("lone-token splits"));
            }
            children.push(ch);
        }
        if terminal.is_empty() {
            return Err(bad("lone-token splits"));
        }
        let splits = LoneSplits { children, terminal };
        let nu = splits.num_nodes() as u32;
        let node_ok = |u: u32| u < nu || u == NONE || u == SPELLED;
        let class_ok = |c: u32| (c as usize) < tok.num_classes() || c == START || c == LONE;
        let flat = r.u32s()?;
        if flat.len() % 3 != 0 {
            return Err(bad("live elements"));
        }
        let live: FxHashSet<Element> = flat.chunks_exact(3).map(|c| Element::new(c[0], c[1], c[2])).collect();
        if live.iter().any(|e| e.text >= nz || !class_ok(e.tokenizer) || !node_ok(e.split)) {
            return Err(bad("live element out of range"));
        }
        let num_sets = r.u64()? as usize;
        let mut sets: Vec<Box<[Member]>> = Vec::with_capacity(num_sets.min(1 << 20));
        for _ in 0..num_sets {
            let flat = r.u32s()?;
            let set: Box<[Member]> = flat.chunks_exact(2).map(|c| Member::new(c[0], c[1])).collect();
            if flat.len() % 2 != 0
                || set.iter().any(|m| m.text >= nz || !node_ok(m.split))
                || set.windows(2).any(|w| w[0] >= w[1])
            {
                return Err(bad("member set"));
            }
            sets.push(set);
        }
        let set_index: FxHashMap<Box<[Member]>, u32> =
            sets.iter().enumerate().map(|(i, s)| (s.clone(), i as u32)).collect();
        let flat = r.u32s()?;
        let states: Vec<(u32, u32)> = flat.chunks_exact(2).map(|c| (c[0], c[1])).collect();
        if flat.len() % 2 != 0
            || states.is_empty()
            || states.iter().any(|&(s, c)| s as usize >= sets.len() || !class_ok(c))
        {
            return Err(bad("states"));
        }
        let index: FxHashMap<(u32, u32), u32> = states.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();
        if index.len() != states.len() || set_index.len() != sets.len() {
            return Err(bad("duplicate states"));
        }
        let state_table = r.u32s()?;
        let num_sets = r.u64()? as usize;
        let words = bitset::words_for(vocab.vocab_size());
        let mut token_sets = Vec::with_capacity(num_sets.min(1 << 20));
        for _ in 0..num_sets {
            token_sets.push(TokenSet::read(r, vocab.num_tokens(), words)?.ok_or_else(|| bad("token set"))?);
        }
        let flat = r.u32s()?;
        let tables: Vec<SetTable> =
            flat.chunks_exact(2).map(|p| SetTable { through_any: p[0], through_boundary: p[1] }).collect();
        let set_of = |i: u32| token_sets.get(i as usize);
        // The masks rely on `free ⊆ all`.
        if flat.len() % 2 != 0
            || tables.iter().any(|t| match (set_of(t.through_any), set_of(t.through_boundary)) {
                (Some(all), Some(free)) => !free.is_subset(all),
                _ => true,
            })
        {
            return Err(bad("mask table"));
        }
        let state_override = r.u32s()?;
        let num_overrides = r.u64()? as usize;
        let mut overrides = Vec::with_capacity(num_overrides.min(1 << 20));
        for _ in 0..num_overrides {
            let flat = r.u32s()?;
            let list: Box<[Override]> = flat
                .chunks_exact(3)
                .map(|c| Override { token: c[0], through_any: c[1], through_boundary: c[2] })
                .collect();
            let set_ok = |s: u32| s == NONE || (s as usize) < sets.len();
            if flat.len() % 3 != 0
                || list.iter().any(|o| {
                    o.token as usize >= vocab.num_tokens() || !set_ok(o.through_any) || !set_ok(o.through_boundary)
                })
            {
                return Err(bad("overrides"));
            }
            overrides.push(list);
        }
        let accepting: Vec<bool> = r.u32s()?.into_iter().map(|a| a != 0).collect();
        let n = states.len();
        if state_table.len() != n
            || state_override.len() != n
            || accepting.len() != n
            || state_table.iter().any(|&t| t as usize >= tables.len())
            || state_override.iter().any(|&o| o as usize >= overrides.len())
        {
            return Err(bad("per-state tables"));
        }
        Ok(PreTokenizedAutomaton {
            tokenizer_dfa: tok,
            splits,
            dfa,
            text,
            live,
            sets,
            set_index,
            states,
            index,
            state_table,
            tables,
            token_sets,
            state_override,
            overrides,
            accepting,
        })
    }
}
