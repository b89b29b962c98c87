//! A partition of the Unicode scalar values into the classes that no pattern of any stage
//! distinguishes, so the pre-tokenizer's automata work on class ids instead of characters (as
//! regex-automata's byte classes do for bytes).

use std::collections::HashMap;

/// A partition of all Unicode scalar values into classes that no given character set
/// distinguishes. Class ids are dense, `0..num_classes()`.
#[derive(Clone, Debug)]
pub struct CharClasses {
    /// Start code point of each maximal interval of equal class, ascending, first is 0.
    starts: Vec<u32>,
    /// Class of each interval.
    ids: Vec<u32>,
    num_classes: usize,
}

impl CharClasses {
    /// The coarsest partition refining every set in `sets`.
    pub fn new<'a>(sets: impl IntoIterator<Item = &'a [(char, char)]>) -> CharClasses {
        let mut distinct: HashMap<&'a [(char, char)], usize> = HashMap::new();
        for s in sets {
            let k = distinct.len();
            distinct.entry(s).or_insert(k);
        }
        let mut bounds: Vec<u32> = vec![0, 0x11_0000];
        for s in distinct.keys() {
            for &(a, b) in s.iter() {
                bounds.push(a as u32);
                bounds.push(b as u32 + 1);
            }
        }
        bounds.sort_unstable();
        bounds.dedup();
        let intervals = bounds.len() - 1;
        let words = distinct.len().div_ceil(64).max(1);
        let mut sig = vec![0u64; intervals * words];
        for (s, &k) in &distinct {
            for &(a, b) in s.iter() {
                let lo = bounds.partition_point(|&x| x < a as u32);
                let hi = bounds.partition_point(|&x| x < b as u32 + 1);
                for iv in lo..hi {
                    sig[iv * words + k / 64] |= 1 << (k % 64);
                }
            }
        }
        let mut by_sig: HashMap<&[u64], u32> = HashMap::new();
        let mut starts = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        for iv in 0..intervals {
            let k = by_sig.len() as u32;
            let id = *by_sig.entry(&sig[iv * words..(iv + 1) * words]).or_insert(k);
            if ids.last() != Some(&id) {
                starts.push(bounds[iv]);
                ids.push(id);
            }
        }
        CharClasses { starts, ids, num_classes: by_sig.len() }
    }

    /// The partition given as runs: `starts` (ascending, the first 0) and each run's class in
    /// `ids`, classes dense in `0..num_classes`. Adjacent runs of one class are merged.
    pub fn from_runs(starts: &[u32], ids: &[u32], num_classes: usize) -> CharClasses {
        debug_assert!(starts.first() == Some(&0) && starts.len() == ids.len());
        let (mut s, mut i) = (Vec::with_capacity(starts.len()), Vec::with_capacity(ids.len()));
        for (&start, &id) in starts.iter().zip(ids) {
            if i.last() != Some(&id) {
                s.push(start);
                i.push(id);
            }
        }
        CharClasses { starts: s, ids: i, num_classes }
    }

    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The partition as runs, as [`CharClasses::from_runs`] takes them back.
    pub fn run_starts_and_ids(&self) -> (&[u32], &[u32]) {
        (&self.starts, &self.ids)
    }

    /// The class of code point `cp` (`cp < 0x110000`).
    pub fn class_of(&self, cp: u32) -> u32 {
        self.ids[self.starts.partition_point(|&s| s <= cp) - 1]
    }

    /// Which classes lie inside `set` (each class is wholly inside or outside of every set
    /// the partition was built from).
    pub fn member_classes(&self, set: &[(char, char)]) -> Vec<bool> {
        let mut member = vec![false; self.num_classes];
        for &(a, b) in set {
            let (a, b) = (a as u32, b as u32);
            let mut iv = self.starts.partition_point(|&s| s <= a) - 1;
            while iv < self.starts.len() && self.starts[iv] <= b {
                member[self.ids[iv] as usize] = true;
                iv += 1;
            }
        }
        member
    }

    /// The classes over `lo..=hi` as runs `(first code point, class)`, ascending.
    pub fn runs(&self, lo: u32, hi: u32) -> Vec<(u32, u32)> {
        let mut iv = self.starts.partition_point(|&s| s <= lo) - 1;
        let mut out = vec![(lo, self.ids[iv])];
        iv += 1;
        while iv < self.starts.len() && self.starts[iv] <= hi {
            out.push((self.starts[iv], self.ids[iv]));
            iv += 1;
        }
        out
    }
}

/// Code point runs of a partial UTF-8 character: `(offset from the first code point the
/// prefix can still become, value)`, ascending from offset 0, adjacent values distinct.
pub type Runs = Box<[(u32, u32)]>;

/// Class of the code points no valid UTF-8 sequence encodes, in [`CharClasses::utf8_lead_runs`].
pub const INVALID_CLASS: u32 = u32::MAX;

impl CharClasses {
    /// For each lead byte of a multi-byte character: continuation bytes still to come and the
    /// class runs (`INVALID_CLASS` for overlong forms, surrogates, past U+10FFFF) over the code
    /// points it can start (`None` for other bytes). An automaton over bytes keeps these runs
    /// (or a coarsening) as its state inside a character: the code points sharing a UTF-8 prefix
    /// are a contiguous range, so a prefix is fully described by them.
    pub fn utf8_lead_runs(&self) -> Vec<Option<(u32, Runs)>> {
        let classes = self;
        (0..=255u8)
            .map(|b| {
                let (k, base, min) = match b {
                    0xC2..=0xDF => (1, ((b & 0x1F) as u32) << 6, 0x80),
                    0xE0..=0xEF => (2, ((b & 0x0F) as u32) << 12, 0x800),
                    0xF0..=0xF4 => (3, ((b & 0x07) as u32) << 18, 0x1_0000),
                    _ => return None,
                };
                let last = base + (1 << (6 * k)) - 1;
                let mut runs: Vec<(u32, u32)> = Vec::new();
                let mut push = |from: u32, class: u32| {
                    if runs.last().map(|r| r.1) != Some(class) {
                        runs.push((from - base, class));
                    }
                };
                let mut cp = base;
                for (lo, hi) in [(min, 0xD7FF), (0xE000, 0x10_FFFF)] {
                    let (lo, hi) = (lo.max(base), hi.min(last));
                    if lo > hi {
                        continue;
                    }
                    if cp < lo {
                        push(cp, INVALID_CLASS);
                    }
                    for (from, class) in classes.runs(lo, hi) {
                        push(from, class);
                    }
                    cp = hi + 1;
                }
                if cp <= last {
                    push(cp, INVALID_CLASS);
                }
                Some((k, runs.into_boxed_slice()))
            })
            .collect()
    }
}

/// The runs of `runs` (over `64^(k+1)` code points) under continuation byte `b`, re-based.
pub fn restrict_utf8_runs(runs: &[(u32, u32)], k: u32, b: u8) -> Vec<(u32, u32)> {
    let size = 1u32 << (6 * k);
    let lo = (b & 0x3F) as u32 * size;
    let first = runs.partition_point(|r| r.0 <= lo) - 1;
    std::iter::once((0, runs[first].1))
        .chain(runs[first + 1..].iter().take_while(|r| r.0 < lo + size).map(|r| (r.0 - lo, r.1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pre_tokenizer::split_nfa::CharRanges;

    #[test]
    fn split_pattern_char_classes_partition() {
        let a: CharRanges = vec![('a', 'z')];
        let b: CharRanges = vec![('m', 'p'), ('0', '9')];
        let cc = CharClasses::new([a.as_slice(), b.as_slice()]);
        // {a-l,q-z}, {m-p}, {0-9}, rest.
        assert_eq!(cc.num_classes(), 4);
        assert_eq!(cc.class_of('a' as u32), cc.class_of('z' as u32));
        assert_ne!(cc.class_of('a' as u32), cc.class_of('m' as u32));
        assert_eq!(cc.class_of(' ' as u32), cc.class_of(0x10FFFF));
        let m = cc.member_classes(&b);
        assert_eq!(m.iter().filter(|&&x| x).count(), 2);
        assert_eq!(cc.runs('k' as u32, 'n' as u32).len(), 2);
    }
}
