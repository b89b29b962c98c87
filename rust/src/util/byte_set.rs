//! A set of bytes as 256 bits: what an automaton state takes, asked once and then tested per byte
//! in a couple of instructions.

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    /// Every byte.
    pub const ALL: ByteSet = ByteSet([u64::MAX; 4]);

    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize >> 6] |= 1 << (b & 63);
    }

    /// Inserts the bytes `lo..=hi`.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for (i, word) in self.0.iter_mut().enumerate() {
            let (first, last) = (i as u32 * 64, i as u32 * 64 + 63);
            let (a, b) = ((lo as u32).max(first), (hi as u32).min(last));
            if a <= b {
                let bits = (b - a + 1) as u64;
                *word |= (if bits == 64 { u64::MAX } else { (1 << bits) - 1 }) << (a - first);
            }
        }
    }

    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[b as usize >> 6] & (1 << (b & 63)) != 0
    }

    #[inline]
    pub fn union(&mut self, other: &ByteSet) {
        for (w, o) in self.0.iter_mut().zip(other.0) {
            *w |= o;
        }
    }

    /// The bytes in both sets.
    #[inline]
    pub fn intersection(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] & other.0[i]))
    }

    /// The least byte of the set at or above `from` (at most 256: none).
    #[inline]
    pub fn first_from(&self, from: u32) -> Option<u8> {
        (from as usize >> 6..4).find_map(|i| {
            let below = if i == from as usize >> 6 { (1u64 << (from & 63)) - 1 } else { 0 };
            let w = self.0[i] & !below;
            (w != 0).then(|| (i as u32 * 64 + w.trailing_zeros()) as u8)
        })
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The bytes below 0x80.
    pub fn ascii_len(&self) -> usize {
        (self.0[0].count_ones() + self.0[1].count_ones()) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The bytes, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros();
                    w &= w - 1;
                    (i as u32 * 64 + bit) as u8
                })
            })
        })
    }
}

impl FromIterator<u8> for ByteSet {
    fn from_iter<I: IntoIterator<Item = u8>>(bytes: I) -> ByteSet {
        let mut set = ByteSet::default();
        bytes.into_iter().for_each(|b| set.insert(b));
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_set_lists_its_bytes_ascending() {
        let mut rng = crate::util::random::SplitMix64::new(3);
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.below(256) as u8).collect();
            let set: ByteSet = bytes.iter().copied().collect();
            let mut want = bytes.clone();
            want.sort_unstable();
            want.dedup();
            assert_eq!(set.iter().collect::<Vec<u8>>(), want);
            assert_eq!(set.len(), want.len());
            assert_eq!(set.is_empty(), want.is_empty());
            assert!((0..=255u8).all(|b| set.contains(b) == want.binary_search(&b).is_ok()));
            let mut union = set;
            union.union(&ByteSet::ALL);
            assert_eq!(union, ByteSet::ALL);
            // Against a second set: the bytes in both, and the first at or above each start.
            let other: ByteSet = (0..rng.below(300)).map(|_| rng.below(256) as u8).collect();
            let both = set.intersection(&other);
            assert!((0..=255u8).all(|b| both.contains(b) == (set.contains(b) && other.contains(b))));
            for from in 0..=256u32 {
                let want = want.iter().copied().find(|&b| b as u32 >= from);
                assert_eq!(set.first_from(from), want, "from {from}");
            }
        }
    }

    /// A range holds exactly its bytes, across word boundaries and at both ends.
    #[test]
    fn ranges_insert_their_bytes() {
        let mut rng = crate::util::random::SplitMix64::new(5);
        let mut cases = vec![(0u8, 255u8), (0, 0), (255, 255), (63, 64), (64, 127), (0, 63), (128, 191)];
        cases.extend((0..300).map(|_| {
            let (a, b) = (rng.below(256) as u8, rng.below(256) as u8);
            (a.min(b), a.max(b))
        }));
        for (lo, hi) in cases {
            let mut set = ByteSet::default();
            set.insert_range(lo, hi);
            assert_eq!(set, (lo..=hi).collect::<ByteSet>(), "{lo}..={hi}");
        }
    }
}
