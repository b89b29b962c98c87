//! Token sets stored sparse (sorted ids) or dense (a bitset), whichever is smaller, and the
//! mask fills that combine them with a tokenizer DFA's forbidden set.
//!
//! A pre-tokenized guide keeps, per member-set projection, the tokens with a live successor
//! (`all`) and those with one through a piece boundary (`free`). Most are small: on Llama 3's
//! glaive guides the average `all` holds ~800 of 128,256 tokens and 97 % of the `free` sets are
//! empty, so a dense 16 KB bitset each (the first layout) cost ~90 MB per guide where sorted ids
//! cost a few. Only the sets of free-text states (a JSON string's contents) are dense.
//!
//! # Invariants
//! * `Sparse` ids are strictly increasing and hold at most `words` ids (past that, `Dense` is
//!   smaller); `Dense` bitsets have exactly `words` words. [`TokenSet::from_sorted`] picks the
//!   layout, so equal sets have equal representations (sets can be deduplicated by value).
//! * Every id is below the vocabulary size the set was built for.

use crate::util::bitset;

/// A set of token ids that masks are filtered by: a tokenizer DFA's forbidden set
/// (`tokenizer_dfa::ForbiddenSet`, stored as runs) or a sorted slice of ids.
pub trait TokenFilter {
    /// The number of tokens in the set.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn contains(&self, token: u32) -> bool;
    /// Calls `f` on every token of the set, in no particular order.
    fn for_each(&self, f: impl FnMut(u32));
    /// Clears the set's tokens from the bitset `out`: one read-modify-write per token, without
    /// a data-dependent branch.
    #[inline]
    fn clear_from(&self, out: &mut [u32]) {
        self.for_each(|t| bitset::clear(out, t as usize));
    }
}

/// Strictly increasing ids.
impl TokenFilter for [u32] {
    #[inline]
    fn len(&self) -> usize {
        <[u32]>::len(self)
    }
    #[inline]
    fn contains(&self, token: u32) -> bool {
        self.binary_search(&token).is_ok()
    }
    #[inline]
    fn for_each(&self, mut f: impl FnMut(u32)) {
        for &t in self {
            f(t);
        }
    }
    #[inline]
    fn clear_from(&self, out: &mut [u32]) {
        bitset::clear_sorted(out, self);
    }
}

/// A set of token ids; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenSet {
    /// Strictly increasing ids.
    Sparse(Box<[u32]>),
    /// A bitset of `words` words.
    Dense(Box<[u32]>),
}

impl TokenSet {
    /// The set of the strictly increasing `tokens`, in the smaller layout for `words`-word
    /// masks.
    pub fn from_sorted(tokens: &[u32], words: usize) -> TokenSet {
        debug_assert!(tokens.windows(2).all(|w| w[0] < w[1]));
        if tokens.len() <= words {
            return TokenSet::Sparse(tokens.into());
        }
        let mut bits = vec![0u32; words].into_boxed_slice();
        for &t in tokens {
            bitset::set(&mut bits, t as usize);
        }
        TokenSet::Dense(bits)
    }

    /// The set of `tokens` (distinct, any order), in the smaller layout for `words`-word masks:
    /// a dense set is filled without sorting.
    pub fn from_distinct(mut tokens: Vec<u32>, words: usize) -> TokenSet {
        if tokens.len() <= words {
            tokens.sort_unstable();
            return TokenSet::Sparse(tokens.into());
        }
        let mut bits = vec![0u32; words].into_boxed_slice();
        for &t in &tokens {
            bitset::set(&mut bits, t as usize);
        }
        TokenSet::Dense(bits)
    }

    /// The set of a `words`-word bitset, in the smaller layout.
    pub fn from_bitset(bits: Box<[u32]>) -> TokenSet {
        match bitset::count_past(&bits, bits.len()) {
            n if n > bits.len() => TokenSet::Dense(bits),
            n => TokenSet::Sparse(bitset::to_ids(&bits, n).into_boxed_slice()),
        }
    }

    /// The words, when the set is dense.
    pub fn as_dense(&self) -> Option<&[u32]> {
        match self {
            TokenSet::Sparse(_) => None,
            TokenSet::Dense(bits) => Some(bits),
        }
    }

    /// The ids, when the set is sparse.
    pub fn as_sparse(&self) -> Option<&[u32]> {
        match self {
            TokenSet::Sparse(ids) => Some(ids),
            TokenSet::Dense(_) => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            TokenSet::Sparse(ids) => ids.is_empty(),
            TokenSet::Dense(bits) => bits.iter().all(|&w| w == 0),
        }
    }

    pub fn contains(&self, t: u32) -> bool {
        match self {
            TokenSet::Sparse(ids) => ids.binary_search(&t).is_ok(),
            TokenSet::Dense(bits) => bitset::contains(bits, t as usize),
        }
    }

    /// The ids, ascending.
    pub fn to_sorted(&self) -> Vec<u32> {
        match self {
            TokenSet::Sparse(ids) => ids.to_vec(),
            TokenSet::Dense(bits) => bitset::iter_ones(bits).map(|t| t as u32).collect(),
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        match self {
            TokenSet::Sparse(ids) | TokenSet::Dense(ids) => ids.len() * 4,
        }
    }

    /// Sets the set's bits in `out` (other bits are left as they are).
    pub fn or_into(&self, out: &mut [u32]) {
        match self {
            TokenSet::Sparse(ids) => {
                for &t in ids.iter() {
                    bitset::set(out, t as usize);
                }
            }
            TokenSet::Dense(bits) => {
                for (o, &b) in out.iter_mut().zip(bits.iter()) {
                    *o |= b;
                }
            }
        }
    }

    /// Writes `self \ forbidden` into `out` (every word is overwritten); `forbidden_bits`, when
    /// given, is the same set as a bitset.
    ///
    /// A small sparse set looks its ids up (in the bitset, else in `forbidden`:
    /// `|self| · log |forbidden|`); otherwise the set is written and `forbidden` cleared from
    /// it, word by word from the bitset, else a token at a time without a data-dependent branch.
    pub fn write_minus(
        &self,
        forbidden: &(impl TokenFilter + ?Sized),
        forbidden_bits: Option<&[u32]>,
        out: &mut [u32],
    ) {
        match (self, forbidden_bits) {
            (TokenSet::Sparse(ids), Some(bits)) => {
                out.fill(0);
                for &t in ids.iter() {
                    if !bitset::contains(bits, t as usize) {
                        bitset::set(out, t as usize);
                    }
                }
            }
            (TokenSet::Dense(set), Some(bits)) => {
                out.copy_from_slice(set);
                bitset::clear_all(out, bits);
            }
            (TokenSet::Sparse(ids), None) if ids.len() * 8 < forbidden.len() => {
                out.fill(0);
                for &t in ids.iter() {
                    if !forbidden.contains(t) {
                        bitset::set(out, t as usize);
                    }
                }
            }
            (TokenSet::Sparse(_), None) => {
                out.fill(0);
                self.or_into(out);
                forbidden.clear_from(out);
            }
            (TokenSet::Dense(set), None) => {
                out.copy_from_slice(set);
                forbidden.clear_from(out);
            }
        }
    }

    /// Appends the serialised set to `w`: a layout tag, then the ids or words.
    pub(crate) fn write(&self, w: &mut impl crate::util::serialize::Sink) {
        match self {
            TokenSet::Sparse(ids) => {
                w.u8(0);
                w.u32s(ids);
            }
            TokenSet::Dense(bits) => {
                w.u8(1);
                w.u32s(bits);
            }
        }
    }

    /// Reads a set written by [`TokenSet::write`], `None` when it breaks an invariant for
    /// `num_tokens` tokens in `words`-word masks (so a crafted file is refused, not trusted).
    pub(crate) fn read(
        r: &mut crate::util::serialize::Reader<'_>,
        num_tokens: usize,
        words: usize,
    ) -> crate::error::Result<Option<TokenSet>> {
        let tag = r.u8()?;
        let values = r.u32s()?;
        Ok(match tag {
            0 if values.len() <= words
                && values.windows(2).all(|w| w[0] < w[1])
                && values.last().is_none_or(|&t| (t as usize) < num_tokens) =>
            {
                Some(TokenSet::Sparse(values.into_boxed_slice()))
            }
            1 if values.len() == words
                && bitset::count_past(&values, words) > words
                && bitset::iter_ones(&values).all(|t| t < num_tokens) =>
            {
                Some(TokenSet::Dense(values.into_boxed_slice()))
            }
            _ => None,
        })
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &TokenSet) -> bool {
        match (self, other) {
            (TokenSet::Dense(a), TokenSet::Dense(b)) => a.iter().zip(b.iter()).all(|(&x, &y)| x & !y == 0),
            _ => self.to_sorted().iter().all(|&t| other.contains(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::random::SplitMix64;
    use crate::util::serialize::Sink;

    fn random_sorted(rng: &mut SplitMix64, n: usize, density: u64) -> Vec<u32> {
        (0..n as u32).filter(|_| rng.next_u64() % 1000 < density).collect()
    }

    #[test]
    fn layout_is_the_smaller_one_and_canonical() {
        let words = bitset::words_for(100);
        assert_eq!(words, 4);
        assert!(matches!(TokenSet::from_sorted(&[1, 2, 3, 4], words), TokenSet::Sparse(_)));
        assert!(matches!(TokenSet::from_sorted(&[1, 2, 3, 4, 99], words), TokenSet::Dense(_)));
        assert_eq!(TokenSet::from_sorted(&[], words), TokenSet::Sparse(Box::new([])));
    }

    /// Distinct ids in any order give the set (and layout) of the sorted ids.
    #[test]
    fn from_distinct_equals_from_sorted() {
        let mut rng = SplitMix64::new(3);
        let words = bitset::words_for(1000);
        for density in [0, 3, 30, 31, 32, 33, 200, 1000] {
            let ids = random_sorted(&mut rng, 1000, density);
            let mut shuffled = ids.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.below(i + 1));
            }
            assert_eq!(TokenSet::from_distinct(shuffled, words), TokenSet::from_sorted(&ids, words));
        }
    }

    /// Every operation against a plain `Vec<bool>` model, over densities that pick each path
    /// of `write_minus` (sparse lookup, sparse bulk, dense).
    #[test]
    fn operations_agree_with_a_boolean_model() {
        let mut rng = SplitMix64::new(7);
        let n = 1000;
        let words = bitset::words_for(n);
        for round in 0..300 {
            let density = [1, 5, 20, 60, 300, 900][round % 6];
            let ids = random_sorted(&mut rng, n, density);
            let forbidden = random_sorted(&mut rng, n, [2, 40, 500][round % 3]);
            let set = TokenSet::from_sorted(&ids, words);
            let member: Vec<bool> = (0..n as u32).map(|t| ids.binary_search(&t).is_ok()).collect();
            assert_eq!(set.to_sorted(), ids);
            assert_eq!(set.is_empty(), ids.is_empty());
            for t in 0..n as u32 {
                assert_eq!(set.contains(t), member[t as usize]);
            }
            let expected: Vec<usize> =
                (0..n).filter(|&t| member[t] && forbidden.binary_search(&(t as u32)).is_err()).collect();
            let mut forbidden_bits = vec![0u32; words];
            for &t in &forbidden {
                bitset::set(&mut forbidden_bits, t as usize);
            }
            for bits in [None, Some(&forbidden_bits[..])] {
                let mut out = vec![u32::MAX; words];
                set.write_minus(&forbidden[..], bits, &mut out);
                assert_eq!(
                    bitset::iter_ones(&out).collect::<Vec<_>>(),
                    expected,
                    "round {round}, bitset {}",
                    bits.is_some()
                );
            }
            let mut or = vec![0u32; words];
            bitset::set(&mut or, 0);
            set.or_into(&mut or);
            let mut expected_or: Vec<usize> = ids.iter().map(|&t| t as usize).collect();
            if !member[0] {
                expected_or.insert(0, 0);
            }
            assert_eq!(bitset::iter_ones(&or).collect::<Vec<_>>(), expected_or);
            let sub = TokenSet::from_sorted(&ids.iter().copied().step_by(2).collect::<Vec<_>>(), words);
            assert!(sub.is_subset(&set));
            let other = TokenSet::from_sorted(&forbidden, words);
            assert_eq!(other.is_subset(&set), forbidden.iter().all(|t| ids.binary_search(t).is_ok()));
        }
    }

    #[test]
    fn serialisation_round_trips_and_refuses_broken_sets() {
        let words = bitset::words_for(200);
        let dense: Vec<u32> = (0..150).collect();
        for set in [TokenSet::from_sorted(&[3, 9, 77], words), TokenSet::from_sorted(&dense, words)] {
            let mut w = crate::util::serialize::Writer::default();
            set.write(&mut w);
            let bytes = w.finish(b"TEST", 1, 0);
            let mut r = crate::util::serialize::Reader::open(&bytes, b"TEST", 1, 0).unwrap();
            assert_eq!(TokenSet::read(&mut r, 200, words).unwrap(), Some(set));
        }
        let refused = |tag: u8, values: &[u32], num_tokens: usize| {
            let mut w = crate::util::serialize::Writer::default();
            w.u8(tag);
            w.u32s(values);
            let bytes = w.finish(b"TEST", 1, 0);
            let mut r = crate::util::serialize::Reader::open(&bytes, b"TEST", 1, 0).unwrap();
            TokenSet::read(&mut r, num_tokens, words).unwrap().is_none()
        };
        assert!(refused(0, &[5, 5], 200), "not strictly increasing");
        assert!(refused(0, &[5, 300], 200), "past the vocabulary");
        assert!(refused(1, &[1; 3], 200), "dense set of the wrong width");
        assert!(refused(1, &[0, 0, 0, 1, 0, 0, 0], 200), "dense layout for a small set");
        assert!(refused(2, &[], 200), "unknown layout");
    }
}
