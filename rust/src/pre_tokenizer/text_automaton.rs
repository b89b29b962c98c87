//! The text side of a pre-tokenized canonical guide: one deterministic automaton over bytes
//! *and piece-boundary marks* that knows everything about the generated text except which
//! tokens spell it.
//!
//! A state is a triple `(q, m, n)`:
//! * `q`, a state of the regex's [`ByteDfa`] (the text so far is a prefix of the language);
//! * `m`, a state of the pre-tokenizer's [`PieceBoundaries`] automaton (the text so far, with
//!   marks at the token boundaries chosen as piece boundaries, is a prefix of a correctly
//!   split text);
//! * `n`, with non-special added tokens (stage 0 of the pre-tokenizer splits them out), a node
//!   of the trie of their contents over the text since the last stage-0 boundary: a stage-0
//!   piece that spells a content is that added token's match, which only the added token
//!   itself may spell ([`ContentTrie`]).
//!
//! Bytes move all three; a mark moves `m`, and a stage-0 mark restarts `n`. States are
//! interned lazily while the guide is built ([`TextAutomaton`]) and then frozen with the
//! transitions that were explored ([`FrozenText`]) — the decode-time walks only ever follow
//! token paths the build explored from the same states, so nothing else is needed.
//!
//! # Costs
//! Each explored byte transition is one hash-map entry (`(state, byte) → state`, ~24 bytes with
//! slack); the build explores one trie walk per state it expands, like the agnostic index.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::regex::byte_dfa::{ByteDfa, DEAD};

/// The pre-tokenizer as an automaton over correctly marked texts (bytes and boundary marks),
/// built lazily (see `crate::pre_tokenizer::piece_machine`). A boundary's *kind* is the pre-tokenizer stage
/// that puts it there first. `DEAD` (`u32::MAX`) answers "no correctly split text continues so".
pub trait PieceBoundaries {
    fn num_stages(&self) -> usize;
    fn start(&self) -> u32;
    fn byte(&mut self, state: u32, byte: u8) -> Result<u32>;
    fn mark(&mut self, state: u32, kind: usize) -> Result<u32>;
    fn accepts_end(&mut self, state: u32) -> Result<bool>;
}

/// A byte trie of the added tokens' contents; node 0 is the root, [`NOT_A_PREFIX`] is "no
/// content starts with the text so far". Empty when the tokenizer has no added tokens.
#[derive(Clone, Debug, Default)]
pub struct ContentTrie {
    children: Vec<Vec<(u8, u32)>>,
    terminal: Vec<bool>,
}

/// See [`ContentTrie`].
pub const NOT_A_PREFIX: u32 = u32::MAX - 1;

impl ContentTrie {
    pub fn new<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> ContentTrie {
        let mut trie = ContentTrie { children: vec![Vec::new()], terminal: vec![false] };
        let mut any = false;
        for w in words {
            any = true;
            let mut node = 0usize;
            for &b in w {
                node = match trie.children[node].binary_search_by_key(&b, |c| c.0) {
                    Ok(i) => trie.children[node][i].1 as usize,
                    Err(i) => {
                        let id = trie.children.len();
                        trie.children[node].insert(i, (b, id as u32));
                        trie.children.push(Vec::new());
                        trie.terminal.push(false);
                        id
                    }
                };
            }
            trie.terminal[node] = true;
        }
        if !any {
            return ContentTrie::default();
        }
        trie
    }
    /// Number of trie nodes (0 without contents).
    pub fn num_nodes(&self) -> usize {
        self.children.len()
    }
    /// Feeds the trie, its node numbers included, to `h` (see `PieceTable::fingerprint_into`).
    pub fn fingerprint_into(&self, h: &mut crate::util::serialize::Fnv64) {
        h.write_u64(self.children.len() as u64);
        for (children, &terminal) in self.children.iter().zip(&self.terminal) {
            h.write_u64(children.len() as u64 * 2 + terminal as u64);
            children.iter().for_each(|&(b, to)| h.write_u64((b as u64) << 32 | to as u64));
        }
    }
    /// Whether there are contents at all (stage 0 splits added tokens out).
    pub fn is_active(&self) -> bool {
        !self.children.is_empty()
    }
    pub(crate) fn step(&self, node: u32, b: u8) -> u32 {
        if node == NOT_A_PREFIX || !self.is_active() {
            return NOT_A_PREFIX;
        }
        let ch = &self.children[node as usize];
        ch.binary_search_by_key(&b, |c| c.0).map_or(NOT_A_PREFIX, |i| ch[i].1)
    }
    pub(crate) fn is_terminal(&self, node: u32) -> bool {
        node != NOT_A_PREFIX && self.is_active() && self.terminal[node as usize]
    }
}

/// A byte transition not computed yet.
const UNKNOWN: u32 = u32::MAX - 1;

/// The lazily built automaton (see the module docs).
pub struct TextAutomaton<'a, M: PieceBoundaries> {
    dfa: &'a ByteDfa,
    machine: M,
    contents: ContentTrie,
    states: Vec<(u32, u32, u32)>,
    index: FxHashMap<(u32, u32, u32), u32>,
    /// Byte transitions, 256 per state: a dense table because the trie walks that build a
    /// guide step through it hundreds of thousands of times per text state.
    next: Vec<u32>,
    marks: FxHashMap<u32, Vec<u32>>,
    accepting: FxHashMap<u32, bool>,
    max_states: usize,
    /// The limit `max_states` comes from, and its value.
    limit: (&'static str, usize),
}

impl<'a, M: PieceBoundaries> TextAutomaton<'a, M> {
    /// At most `max_states` states (`limit` names the user-facing limit behind it).
    pub fn new(
        dfa: &'a ByteDfa,
        machine: M,
        contents: ContentTrie,
        max_states: usize,
        limit: (&'static str, usize),
    ) -> TextAutomaton<'a, M> {
        let n0 = if contents.is_active() { 0 } else { NOT_A_PREFIX };
        let mut t = TextAutomaton {
            dfa,
            machine,
            contents,
            states: Vec::new(),
            index: FxHashMap::default(),
            next: Vec::new(),
            marks: FxHashMap::default(),
            accepting: FxHashMap::default(),
            max_states,
            limit,
        };
        let start = (dfa.start(), t.machine.start(), n0);
        t.states.push(start);
        t.index.insert(start, 0);
        t.next.resize(256, UNKNOWN);
        t
    }

    pub fn start(&self) -> u32 {
        0
    }
    pub fn num_stages(&self) -> usize {
        self.machine.num_stages()
    }
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    fn intern(&mut self, s: (u32, u32, u32)) -> Result<u32> {
        if let Some(&id) = self.index.get(&s) {
            return Ok(id);
        }
        if self.states.len() >= self.max_states {
            let (limit, value) = self.limit;
            return Err(Error::LimitExceeded {
                limit,
                value: value.to_string(),
                what: format!(
                    "{} text states (regex state, pre-tokenizer state, added-token prefix) of a pre-tokenized guide, 1 KiB each",
                    self.max_states
                ),
            });
        }
        let id = self.states.len() as u32;
        self.states.push(s);
        self.index.insert(s, id);
        self.next.resize(self.next.len() + 256, UNKNOWN);
        Ok(id)
    }

    /// The state after `b`, `DEAD` when the regex or the pre-tokenizer rules it out.
    pub fn byte(&mut self, z: u32, b: u8) -> Result<u32> {
        let slot = z as usize * 256 + b as usize;
        if self.next[slot] != UNKNOWN {
            return Ok(self.next[slot]);
        }
        let (q, m, n) = self.states[z as usize];
        let q2 = self.dfa.next(q, b);
        let to = if q2 == DEAD {
            DEAD
        } else {
            match self.machine.byte(m, b)? {
                DEAD => DEAD,
                m2 => {
                    let n2 = self.contents.step(n, b);
                    self.intern((q2, m2, n2))?
                }
            }
        };
        self.next[slot] = to;
        Ok(to)
    }

    /// The state after `bytes`, `DEAD` when they are ruled out.
    pub fn walk(&mut self, mut z: u32, bytes: &[u8]) -> Result<u32> {
        for &b in bytes {
            z = self.byte(z, b)?;
            if z == DEAD {
                break;
            }
        }
        Ok(z)
    }

    /// The states after a piece boundary of each kind (`DEAD` where impossible).
    pub fn marks(&mut self, z: u32) -> Result<&[u32]> {
        if !self.marks.contains_key(&z) {
            let (q, m, n) = self.states[z as usize];
            let mut out = Vec::with_capacity(self.machine.num_stages());
            for kind in 0..self.machine.num_stages() {
                // A stage-0 boundary ends a stage-0 piece; it must not spell an added token's
                // content unless that token spelled it (the caller checks `spells_content`).
                let n2 = if kind == 0 && self.contents.is_active() { 0 } else { n };
                out.push(match self.machine.mark(m, kind)? {
                    DEAD => DEAD,
                    m2 => self.intern((q, m2, n2))?,
                });
            }
            self.marks.insert(z, out);
        }
        Ok(&self.marks[&z])
    }

    /// Whether the text may end here (regex accepts, every pre-tokenizer decision resolves).
    pub fn is_accepting(&mut self, z: u32) -> Result<bool> {
        if let Some(&a) = self.accepting.get(&z) {
            return Ok(a);
        }
        let (q, m, _) = self.states[z as usize];
        let a = self.dfa.is_accepting(q) && self.machine.accepts_end(m)?;
        self.accepting.insert(z, a);
        Ok(a)
    }

    /// Whether the stage-0 piece so far spells an added token's content.
    pub fn spells_content(&self, z: u32) -> bool {
        self.contents.is_terminal(self.states[z as usize].2)
    }

    /// The regex state of `z`.
    pub fn regex_state(&self, z: u32) -> u32 {
        self.states[z as usize].0
    }

    /// Keeps what decoding needs: explored transitions, marks, acceptance.
    pub fn freeze(mut self) -> Result<FrozenText> {
        let n = self.states.len();
        let kinds = self.machine.num_stages();
        let mut marks = vec![DEAD; n * kinds];
        for (&z, ms) in &self.marks {
            marks[z as usize * kinds..(z as usize + 1) * kinds].copy_from_slice(ms);
        }
        let mut accepting = vec![false; n];
        for z in 0..n as u32 {
            accepting[z as usize] = self.is_accepting(z)?;
        }
        let spells_content = (0..n as u32).map(|z| self.spells_content(z)).collect();
        let regex_state = self.states.iter().map(|s| s.0).collect();
        let next = self
            .next
            .iter()
            .enumerate()
            .filter(|&(_, &to)| to != DEAD && to != UNKNOWN)
            .map(|(slot, &to)| (((slot / 256) as u32, (slot % 256) as u8), to))
            .collect();
        Ok(FrozenText { kinds, next, marks, accepting, spells_content, regex_state })
    }
}

/// The explored part of a [`TextAutomaton`], immutable; what a guide walks while decoding.
#[derive(Clone, Debug)]
pub struct FrozenText {
    kinds: usize,
    next: FxHashMap<(u32, u8), u32>,
    marks: Vec<u32>,
    accepting: Vec<bool>,
    spells_content: Vec<bool>,
    regex_state: Vec<u32>,
}

impl FrozenText {
    /// The state after `bytes`, `DEAD` if the walk leaves the explored transitions.
    pub fn walk(&self, mut z: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            match self.next.get(&(z, b)) {
                Some(&to) => z = to,
                None => return DEAD,
            }
        }
        z
    }
    pub fn marks(&self, z: u32) -> &[u32] {
        &self.marks[z as usize * self.kinds..(z as usize + 1) * self.kinds]
    }
    pub fn is_accepting(&self, z: u32) -> bool {
        self.accepting[z as usize]
    }
    pub fn regex_state(&self, z: u32) -> u32 {
        self.regex_state[z as usize]
    }
    pub fn spells_content(&self, z: u32) -> bool {
        self.spells_content[z as usize]
    }
    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }
    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.next.capacity() * 16 + self.marks.len() * 4 + self.accepting.len() * 6
    }
}

impl PieceBoundaries for crate::pre_tokenizer::piece_machine::PieceMachine {
    fn num_stages(&self) -> usize {
        crate::pre_tokenizer::piece_machine::PieceMachine::num_stages(self)
    }
    fn start(&self) -> u32 {
        crate::pre_tokenizer::piece_machine::PieceMachine::start(self)
    }
    fn byte(&mut self, state: u32, byte: u8) -> Result<u32> {
        crate::pre_tokenizer::piece_machine::PieceMachine::byte(self, state, byte)
    }
    fn mark(&mut self, state: u32, kind: usize) -> Result<u32> {
        crate::pre_tokenizer::piece_machine::PieceMachine::mark(self, state, kind)
    }
    fn accepts_end(&mut self, state: u32) -> Result<bool> {
        crate::pre_tokenizer::piece_machine::PieceMachine::accepts_end(self, state)
    }
}

impl FrozenText {
    /// Serialises the automaton into `w` (part of a guide's serialisation).
    pub(crate) fn write(&self, w: &mut impl crate::util::serialize::Sink) {
        w.u32(self.kinds as u32);
        let mut next: Vec<(u32, u8, u32)> = self.next.iter().map(|(&(z, b), &to)| (z, b, to)).collect();
        next.sort_unstable();
        w.u32s(&next.iter().flat_map(|&(z, b, to)| [z, b as u32, to]).collect::<Vec<_>>());
        w.u32s(&self.marks);
        w.u32s(
            &self
                .accepting
                .iter()
                .zip(&self.spells_content)
                .map(|(&a, &s)| a as u32 | (s as u32) << 1)
                .collect::<Vec<_>>(),
        );
        w.u32s(&self.regex_state);
    }

    /// Reads an automaton written by [`FrozenText::write`], checking every index (regex states
    /// against `num_regex_states`).
    pub(crate) fn read(r: &mut crate::util::serialize::Reader<'_>, num_regex_states: usize) -> Result<FrozenText> {
        let bad = |what: &str| Error::InvalidArgument(format!("invalid serialized guide: text automaton {what}"));
        let kinds = r.u32()? as usize;
        let flat = r.u32s()?;
        let marks = r.u32s()?;
        let flags = r.u32s()?;
        let regex_state = r.u32s()?;
        let n = flags.len();
        if kinds == 0 || flat.len() % 3 != 0 || marks.len() != n * kinds || regex_state.len() != n {
            return Err(bad("sizes"));
        }
        let in_range = |z: u32| (z as usize) < n;
        let mut next = FxHashMap::default();
        for c in flat.chunks_exact(3) {
            if !in_range(c[0]) || c[1] > 255 || !in_range(c[2]) {
                return Err(bad("transition"));
            }
            next.insert((c[0], c[1] as u8), c[2]);
        }
        if marks.iter().any(|&m| m != DEAD && !in_range(m))
            || regex_state.iter().any(|&q| q as usize >= num_regex_states)
        {
            return Err(bad("state out of range"));
        }
        let accepting = flags.iter().map(|&f| f & 1 != 0).collect();
        let spells_content = flags.iter().map(|&f| f & 2 != 0).collect();
        Ok(FrozenText { kinds, next, marks, accepting, spells_content, regex_state })
    }
}
