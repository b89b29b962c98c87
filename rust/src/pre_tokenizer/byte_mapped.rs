//! The whole pre-tokenizer of a byte-level tokenizer: its stages over characters, then the
//! stages that run after `ByteLevel`, over the *byte-mapped* text (Falcon's `Digits` and
//! `Split([0-9]{3})`).
//!
//! # The concept
//! `ByteLevel` replaces every byte of a piece by one stand-in character (GPT-2's table: `0x30`
//! stays `0`, `0xBC` becomes `¼`, `0x85` becomes `ą`...). A stage after it splits that text, so
//! its cuts fall between *bytes*, inside UTF-8 characters too: Falcon's `Digits` sees `¼` (the
//! continuation byte of `ü`, `C3 BC`) as a digit and cuts `für` into `f` + `0xC3`, `0xBC`, `r`.
//!
//! [`PreTokenizerMachine`] pairs the character-level [`PieceMachine`] with a second
//! `PieceMachine` built from the later stages' patterns as they are, fed the stand-in character
//! of each byte. Its marks come after the character stages' kinds. This is exact because both
//! machines are: a mark of a character stage ends the byte-mapped stages' subject (they must
//! accept its end, then start afresh, as every later stage does at an earlier stage's mark); a
//! byte-mapped mark is invisible to the character stages, whose continuing segment verifies
//! that they do not cut there (as for a later stage's mark inside one machine). Without
//! byte-mapped stages the pair is the character machine itself, state for state.
//!
//! # Costs
//! States are pairs, interned on first use. Falcon's, explored in full: 5,222 pairs against
//! 1,714 states of its character stages alone, in ~80 ms (the byte-mapped side only remembers
//! digit runs).

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::pre_tokenizer::piece_machine::{PieceMachine, PieceMachineSpec, DEAD};
use crate::pre_tokenizer::text_automaton::PieceBoundaries;
use crate::util::byte_level::byte_to_unicode_table;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct PreTokenizerMachine {
    chars: PieceMachine,
    bytes: Option<ByteMappedStages>,
}

/// The stages after `ByteLevel` and the pairs of states interned so far.
#[derive(Clone, Debug)]
struct ByteMappedStages {
    machine: PieceMachine,
    pairs: Vec<(u32, u32)>,
    ids: FxHashMap<(u32, u32), u32>,
    max_states: usize,
    start: u32,
}

impl ByteMappedStages {
    fn intern(&mut self, chars: u32, bytes: u32) -> Result<u32> {
        if chars == DEAD || bytes == DEAD {
            return Ok(DEAD);
        }
        if let Some(&id) = self.ids.get(&(chars, bytes)) {
            return Ok(id);
        }
        if self.pairs.len() >= self.max_states {
            return Err(Error::LimitExceeded {
                limit: "max_pre_tokenizer_states",
                value: self.max_states.to_string(),
                what: "states of the pre-tokenizer's automaton (character stages × byte-mapped stages)".into(),
            });
        }
        let id = self.pairs.len() as u32;
        self.pairs.push((chars, bytes));
        self.ids.insert((chars, bytes), id);
        Ok(id)
    }

    /// The byte-mapped machine after the stand-in character of byte `b`.
    fn stand_in(&mut self, state: u32, b: u8) -> Result<u32> {
        let mut utf8 = [0u8; 4];
        let mut s = state;
        for &u in byte_to_unicode_table()[b as usize].encode_utf8(&mut utf8).as_bytes() {
            s = self.machine.byte(s, u)?;
        }
        Ok(s)
    }
}

impl PreTokenizerMachine {
    /// `spec`: the stages over characters; `byte_mapped`: the patterns of the stages after
    /// `ByteLevel` (none for most tokenizers). `max_states` bounds each machine and the pairs.
    pub fn new(spec: &PieceMachineSpec, byte_mapped: &[String], max_states: usize) -> Result<PreTokenizerMachine> {
        let chars = PieceMachine::new(spec, max_states)?;
        if byte_mapped.is_empty() {
            return Ok(PreTokenizerMachine { chars, bytes: None });
        }
        let spec = PieceMachineSpec { stages: byte_mapped.to_vec(), allowed_chars: None, added: Vec::new() };
        let machine = PieceMachine::new(&spec, max_states)?;
        let mut bytes =
            ByteMappedStages { start: 0, machine, pairs: Vec::new(), ids: FxHashMap::default(), max_states };
        bytes.start = bytes.intern(chars.start(), bytes.machine.start())?;
        Ok(PreTokenizerMachine { chars, bytes: Some(bytes) })
    }

    /// Whether the text read to `state` ends on a character boundary.
    pub fn at_char_boundary(&self, state: u32) -> bool {
        match &self.bytes {
            None => self.chars.at_char_boundary(state),
            Some(b) => state != DEAD && self.chars.at_char_boundary(b.pairs[state as usize].0),
        }
    }
}

impl PieceBoundaries for PreTokenizerMachine {
    fn num_stages(&self) -> usize {
        self.chars.num_stages() + self.bytes.as_ref().map_or(0, |b| b.machine.num_stages())
    }

    fn start(&self) -> u32 {
        self.bytes.as_ref().map_or(self.chars.start(), |b| b.start)
    }

    fn byte(&mut self, state: u32, byte: u8) -> Result<u32> {
        let Some(b) = &mut self.bytes else { return self.chars.byte(state, byte) };
        if state == DEAD {
            return Ok(DEAD);
        }
        let (c, m) = b.pairs[state as usize];
        let c = self.chars.byte(c, byte)?;
        let m = if c == DEAD { DEAD } else { b.stand_in(m, byte)? };
        b.intern(c, m)
    }

    fn mark(&mut self, state: u32, kind: usize) -> Result<u32> {
        let Some(b) = &mut self.bytes else { return self.chars.mark(state, kind) };
        if state == DEAD {
            return Ok(DEAD);
        }
        let (c, m) = b.pairs[state as usize];
        let char_kinds = self.chars.num_stages();
        if kind < char_kinds {
            // A character stage cuts: the byte-mapped stages' subject ends here.
            let c = self.chars.mark(c, kind)?;
            let m = if c != DEAD && b.machine.accepts_end(m)? { b.machine.start() } else { DEAD };
            b.intern(c, m)
        } else {
            let m = b.machine.mark(m, kind - char_kinds)?;
            b.intern(c, m)
        }
    }

    fn accepts_end(&mut self, state: u32) -> Result<bool> {
        let Some(b) = &mut self.bytes else { return self.chars.accepts_end(state) };
        if state == DEAD {
            return Ok(false);
        }
        let (c, m) = b.pairs[state as usize];
        Ok(self.chars.accepts_end(c)? && b.machine.accepts_end(m)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks `text`'s bytes at the piece boundaries of `pieces` (kinds as given) and asks the
    /// machine; `pieces` as byte strings with the kind of the mark before each (the first's is
    /// ignored).
    fn accepts(m: &mut PreTokenizerMachine, pieces: &[(&[u8], usize)]) -> bool {
        let mut s = m.start();
        for (i, (piece, kind)) in pieces.iter().enumerate() {
            if i > 0 {
                s = m.mark(s, *kind).unwrap();
            }
            for &b in piece.iter() {
                s = m.byte(s, b).unwrap();
            }
        }
        m.accepts_end(s).unwrap()
    }

    fn falcon_like() -> PreTokenizerMachine {
        let spec =
            PieceMachineSpec { stages: vec![r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+".into()], ..Default::default() };
        PreTokenizerMachine::new(&spec, &[r"\p{N}+".into(), "[0-9][0-9][0-9]".into()], 10_000).unwrap()
    }

    #[test]
    fn byte_mapped_digits_cut_inside_characters() {
        let mut m = falcon_like();
        assert_eq!(m.num_stages(), 3);
        // "für": ü is C3 BC, and BC stands for ¼, a digit.
        assert!(accepts(&mut m, &[(b"f\xC3", 0), (b"\xBC", 1), (b"r", 1)]));
        assert!(!accepts(&mut m, &[(b"f\xC3\xBCr", 0)]));
        assert!(!accepts(&mut m, &[(b"f\xC3", 0), (b"\xBCr", 1)]));
        // " 12" is one character-stage piece, which Digits cuts again
        assert!(accepts(&mut m, &[(b"ab", 0), (b" ", 0), (b"12", 1)]));
        assert!(!accepts(&mut m, &[(b"ab", 0), (b" 12", 0)]));
        // where the character stage cuts, the mark is its kind
        assert!(accepts(&mut m, &[(b"12", 0), (b"ab", 0)]));
        assert!(!accepts(&mut m, &[(b"12", 0), (b"ab", 1)]));
    }

    #[test]
    fn byte_mapped_split_groups_ascii_digits_by_three() {
        let mut m = falcon_like();
        assert!(accepts(&mut m, &[(b"123", 0), (b"45", 2)]));
        assert!(!accepts(&mut m, &[(b"12345", 0)]));
        // "²1234": ² is C2 B2; C2 stands for Â (a letter), B2 for ² (a digit)
        assert!(accepts(&mut m, &[(b"\xC2", 0), (b"\xB2", 1), (b"123", 2), (b"4", 2)]));
        assert!(!accepts(&mut m, &[(b"\xC2", 0), (b"\xB21", 1), (b"23", 2), (b"4", 2)]));
        // the byte-mapped subject ends at a character stage's mark: "12 345"
        assert!(accepts(&mut m, &[(b"12", 0), (b" ", 0), (b"345", 1)]));
        assert!(!accepts(&mut m, &[(b"12", 0), (b" ", 0), (b"3", 1), (b"45", 2)]));
    }

    #[test]
    fn without_byte_mapped_stages_it_is_the_character_machine() {
        let spec = PieceMachineSpec { stages: vec![r"\s+|\S+".into()], ..Default::default() };
        let mut m = PreTokenizerMachine::new(&spec, &[], 100).unwrap();
        let mut plain = PieceMachine::new(&spec, 100).unwrap();
        assert_eq!(m.start(), plain.start());
        let (a, b) = (m.byte(m.start(), b'x').unwrap(), plain.byte(plain.start(), b'x').unwrap());
        assert_eq!(a, b);
        assert_eq!(m.mark(a, 0).unwrap(), plain.mark(b, 0).unwrap());
    }
}
