//! A pre-tokenizer's automaton explored in full into immutable tables.
//!
//! [`crate::pre_tokenizer::piece_machine::PieceMachine`] is built lazily, through `&mut self`:
//! right for one compile that owns its copy, wrong for a guide that many threads extend while
//! they decode. A [`PieceTable`] is the same automaton with every state reachable from the start
//! (by bytes and marks) already explored: its transitions are plain array reads, so walks need
//! no lock and no mutation. Built once per tokenizer and shared.
//!
//! Exploration also trims: a transition into a state from which no correctly marked text can
//! end is [`DEAD`], so `DEAD` is exact here where the lazy machine only refutes a guess when
//! its text does: 186 of DeepSeek V3's 3,389 states lead on without ever ending (a boundary
//! placed where its digit groups or a look-ahead will refute it), 22 of DeepSeek LLM's, 3 of
//! Falcon's. A lazy guide's searches then never walk into a region that only looks alive.
//!
//! # Costs
//! `states × 256` byte entries plus `states × stages` mark entries, 4 bytes each: real
//! pre-tokenizers explore to 700–3,400 states (2.7–14 MB with 4 stages or fewer)... in tens of
//! milliseconds. Exploration stops with [`Error::LimitExceeded`] past `max_states`.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::pre_tokenizer::text_automaton::PieceBoundaries;
use crate::regex::byte_dfa::DEAD;

/// See the module docs. State 0 is the start.
#[derive(Clone, Debug)]
pub struct PieceTable {
    stages: usize,
    /// `bytes[state * 256 + b]`, `DEAD` where no correctly marked text continues so.
    bytes: Box<[u32]>,
    /// `marks[state * stages + kind]`.
    marks: Box<[u32]>,
    accepts_end: Box<[bool]>,
}

impl PieceTable {
    /// Explores `machine` from its start (renumbering its states breadth-first).
    pub fn explore<M: PieceBoundaries>(machine: &mut M, max_states: usize) -> Result<PieceTable> {
        let stages = machine.num_stages();
        let mut ids: rustc_hash::FxHashMap<u32, u32> = rustc_hash::FxHashMap::default();
        let mut order: Vec<u32> = Vec::new();
        let mut queue = VecDeque::new();
        let mut number = |m: u32, order: &mut Vec<u32>, queue: &mut VecDeque<u32>| -> Result<u32> {
            if m == DEAD {
                return Ok(DEAD);
            }
            if let Some(&id) = ids.get(&m) {
                return Ok(id);
            }
            if order.len() >= max_states {
                return Err(Error::LimitExceeded {
                    limit: "max_pre_tokenizer_states",
                    value: max_states.to_string(),
                    what: "states of the pre-tokenizer's automaton, explored in full".into(),
                });
            }
            let id = order.len() as u32;
            ids.insert(m, id);
            order.push(m);
            queue.push_back(m);
            Ok(id)
        };
        number(machine.start(), &mut order, &mut queue)?;
        let (mut bytes, mut marks, mut accepts_end) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(m) = queue.pop_front() {
            for b in 0..=255u8 {
                let to = machine.byte(m, b)?;
                bytes.push(number(to, &mut order, &mut queue)?);
            }
            for kind in 0..stages {
                let to = machine.mark(m, kind)?;
                marks.push(number(to, &mut order, &mut queue)?);
            }
            accepts_end.push(machine.accepts_end(m)?);
        }
        let mut table = PieceTable {
            stages,
            bytes: bytes.into_boxed_slice(),
            marks: marks.into_boxed_slice(),
            accepts_end: accepts_end.into_boxed_slice(),
        };
        table.trim();
        Ok(table)
    }

    /// Sends every transition into a state with no accepted continuation to [`DEAD`] (see the
    /// module docs).
    fn trim(&mut self) {
        let n = self.num_states();
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, &to) in self.bytes.iter().enumerate() {
            if to != DEAD {
                preds[to as usize].push((i / 256) as u32);
            }
        }
        for (i, &to) in self.marks.iter().enumerate() {
            if to != DEAD {
                preds[to as usize].push((i / self.stages) as u32);
            }
        }
        let mut future = self.accepts_end.to_vec();
        let mut todo: Vec<u32> = (0..n as u32).filter(|&s| future[s as usize]).collect();
        while let Some(s) = todo.pop() {
            for &p in &preds[s as usize] {
                if !std::mem::replace(&mut future[p as usize], true) {
                    todo.push(p);
                }
            }
        }
        for to in self.bytes.iter_mut().chain(self.marks.iter_mut()) {
            if *to != DEAD && !future[*to as usize] {
                *to = DEAD;
            }
        }
    }

    pub fn num_states(&self) -> usize {
        self.accepts_end.len()
    }
    pub fn num_stages(&self) -> usize {
        self.stages
    }
    #[inline]
    pub fn byte(&self, state: u32, b: u8) -> u32 {
        self.bytes[state as usize * 256 + b as usize]
    }
    #[inline]
    pub fn mark(&self, state: u32, kind: usize) -> u32 {
        self.marks[state as usize * self.stages + kind]
    }
    #[inline]
    pub fn accepts_end(&self, state: u32) -> bool {
        self.accepts_end[state as usize]
    }
    /// Heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.len() * 4 + self.marks.len() * 4 + self.accepts_end.len()
    }
    /// Feeds the whole table, its state numbers included, to `h`: files keyed by these numbers
    /// (`crate::lazy::slice_store`) are only read back by a table that numbers alike.
    pub fn fingerprint_into(&self, h: &mut crate::util::serialize::Fnv64) {
        h.write_u64(self.stages as u64);
        for v in [&self.bytes[..], &self.marks[..]] {
            h.write_u64(v.len() as u64);
            h.write(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
        }
        h.write(&self.accepts_end.iter().map(|&a| a as u8).collect::<Vec<u8>>());
    }
}

impl PieceBoundaries for PieceTable {
    fn num_stages(&self) -> usize {
        self.stages
    }
    fn start(&self) -> u32 {
        0
    }
    fn byte(&mut self, state: u32, byte: u8) -> Result<u32> {
        Ok(PieceTable::byte(self, state, byte))
    }
    fn mark(&mut self, state: u32, kind: usize) -> Result<u32> {
        Ok(PieceTable::mark(self, state, kind))
    }
    fn accepts_end(&mut self, state: u32) -> Result<bool> {
        Ok(PieceTable::accepts_end(self, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pre_tokenizer::piece_machine::{PieceMachine, PieceMachineSpec};
    use crate::tokenizer::vocab::GPT2_PATTERN;

    /// The explored table and the lazy machine agree on every marked text tried.
    #[test]
    fn table_equals_the_lazy_machine() {
        let spec = PieceMachineSpec { stages: vec![GPT2_PATTERN.to_string()], allowed_chars: None, added: Vec::new() };
        let mut lazy = PieceMachine::new(&spec, 200_000).unwrap();
        let mut table = PieceTable::explore(&mut PieceMachine::new(&spec, 200_000).unwrap(), 200_000).unwrap();
        assert!(table.num_states() > 10);
        for text in ["hello world", "  x", "a1b2 c3", "don't stop", "tab\there\n\nnew", "ünï cödé", "日本語 テキスト"]
        {
            let marks = lazy.split_marks(text).unwrap();
            let expected = lazy.accepts_marked(text, &marks).unwrap();
            // Walk the table with the same marks.
            let mut state = 0u32;
            let mut at = 0;
            let bytes = text.as_bytes();
            for (pos, &b) in bytes.iter().enumerate() {
                while at < marks.len() && marks[at].0 == pos {
                    state = PieceTable::mark(&table, state, marks[at].1);
                    at += 1;
                }
                assert_ne!(state, DEAD, "{text:?} at {pos}");
                state = PieceTable::byte(&table, state, b);
            }
            assert!(expected);
            assert_ne!(state, DEAD, "{text:?}");
            assert!(PieceBoundaries::accepts_end(&mut table, state).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn exploration_stops_at_its_limit() {
        let spec = PieceMachineSpec { stages: vec![GPT2_PATTERN.to_string()], allowed_chars: None, added: Vec::new() };
        match PieceTable::explore(&mut PieceMachine::new(&spec, 200_000).unwrap(), 5) {
            Err(Error::LimitExceeded { limit: "max_pre_tokenizer_states", .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
