//! The tokenizer DFA's forbidden sets: per class, the tokens that may not follow it, stored as
//! runs of consecutive tokens in the order of their bytes, and the large ones also as bitsets.
//!
//! # Why runs, in the order of the tokens' bytes
//! A pair `(l, r)` is forbidden when a merge fires across the boundary, which depends on how
//! `r` *begins*: tokens forbidden after a class are mostly "every token starting with these
//! bytes". Ranked by their bytes (lexicographically), such tokens are consecutive, so a set is a
//! few runs where by id it is thousands of scattered ids. Measured on the full sets:
//!
//! | tokenizer | ids | runs by id | runs by bytes | file, ids → runs |
//! | --- | --- | --- | --- | --- |
//! | Llama 3 | 115.6 M | 103.8 M | 13.1 M | 463 → 54 MB |
//! | o200k | 218.8 M | 202.8 M | 28.9 M | 876 → 119 MB |
//! | DeepSeek V3 | 72.7 M | 68.1 M | 10.1 M | 292 → 42 MB |
//! | Mistral-7B | 10.3 M | 9.5 M | 1.4 M | 42 → 6 MB |
//!
//! (Ordering by the left spine of each token's derivation instead gave 13.5 M runs on Llama 3:
//! the bytes are as good and need no merges.) The build interns sets in this coordinate too, so
//! its peak holds runs, not ids (Llama 3's build 621 → 225 MB at peak, the vocabulary included).
//!
//! # Layout
//! `order[i]` is the token of rank `i`, `rank` its inverse. The ranks are cut into blocks of
//! 65,536, and a run is one `u32`: its first and last rank's offsets in the block, 16 bits each
//! (a run across a block end is stored as two). Set `c`'s runs in block `b` are
//! `runs[offsets[c * blocks + b]..offsets[c * blocks + b + 1]]`, ascending and disjoint, so a
//! membership test is the token's rank and a binary search among its block's runs (as cheap as
//! the binary search among sorted ids it replaced), and clearing a set from a mask walks the
//! runs through `order` (reads in sequence, one write per token, as before). All sets' runs lie
//! in one allocation, either owned or a view into a read-only memory map of the tokenizer-DFA
//! cache file ([`U32Storage`]).
//!
//! # Why a memory map
//! Reading a large cache into memory costs a copy of the runs into fresh pages before the
//! checks (Llama 3's 463 MB of ids cost ~0.5 s that way). Mapped, the runs are used where they
//! lie in the page cache: a load is the checksum and the structural checks below (one pass
//! each), and processes that load the same cache share its pages.
//!
//! The map's contract (`crate::util::u32_storage`): the file is never changed in place while it
//! is mapped; propertok only ever replaces a cache file by renaming a complete new one over it.
//!
//! # Invariants (checked by [`ForbiddenSets::validate`] on every load)
//! * `order` is a permutation of the token ids.
//! * `offsets` has one entry per (set, block) plus one, starts at 0, never decreases and ends
//!   at the number of runs.
//! * Within a block, runs are ascending and disjoint, with `first <= last` and every rank
//!   below the vocabulary size; each set's runs hold `lens[set]` tokens.

use crate::util::bitset;
use crate::util::token_set::TokenFilter;
use crate::util::u32_storage::U32Storage;

/// Ranks per block are `1 << BLOCK_BITS`: a run stores its ends as offsets in its block.
const BLOCK_BITS: u32 = 16;
const BLOCK_MASK: u32 = (1 << BLOCK_BITS) - 1;

/// The forbidden sets as runs of consecutive ranks; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ForbiddenSets {
    /// `order[i]`: the token of rank `i` (tokens sorted by their bytes).
    order: Vec<u32>,
    /// The inverse of `order`: each token's rank.
    rank: Vec<u32>,
    /// Blocks of `1 << BLOCK_BITS` ranks (at least one).
    blocks: usize,
    /// The number of tokens in each set.
    lens: Vec<u32>,
    /// The runs of set `c` in block `b` are `runs[offsets[c * blocks + b]..offsets[c * blocks + b + 1]]`.
    offsets: Vec<u32>,
    /// One run per value: its first rank's offset in the block in the low 16 bits, its last
    /// (inclusive) in the high 16; ascending and disjoint within a block.
    runs: U32Storage,
}

impl ForbiddenSets {
    /// No sets yet over the tokens ranked by `order` (a permutation of the token ids); add
    /// them with [`ForbiddenSets::push_ranks`].
    pub(crate) fn new(order: Vec<u32>) -> ForbiddenSets {
        let rank = inverse(&order).expect("a permutation");
        let blocks = order.len().div_ceil(1 << BLOCK_BITS).max(1);
        ForbiddenSets { order, rank, blocks, lens: Vec::new(), offsets: vec![0], runs: U32Storage::Owned(Vec::new()) }
    }

    /// The ranks of the tokens: ids sorted by their bytes (ties by id).
    pub(crate) fn lexicographic_order<'a>(num_tokens: usize, bytes: impl Fn(u32) -> &'a [u8]) -> Vec<u32> {
        let mut order: Vec<u32> = (0..num_tokens as u32).collect();
        order.sort_by(|&a, &b| bytes(a).cmp(bytes(b)).then(a.cmp(&b)));
        order
    }

    /// Sets read back from storage; call [`ForbiddenSets::validate`] before using them.
    /// `None` when `order` is not a permutation.
    pub(crate) fn from_parts(
        order: Vec<u32>,
        lens: Vec<u32>,
        offsets: Vec<u32>,
        runs: U32Storage,
    ) -> Option<ForbiddenSets> {
        let rank = inverse(&order)?;
        let blocks = order.len().div_ceil(1 << BLOCK_BITS).max(1);
        Some(ForbiddenSets { order, rank, blocks, lens, offsets, runs })
    }

    pub(crate) fn len(&self) -> usize {
        self.lens.len()
    }

    /// Each token's rank, the coordinate the sets are stored in.
    pub(crate) fn ranks(&self) -> &[u32] {
        &self.rank
    }

    /// Appends a set (only to owned sets: those being built).
    pub(crate) fn push(&mut self, set: &EncodedSet) {
        let U32Storage::Owned(runs) = &mut self.runs else {
            unreachable!("sets are only pushed while they are built, never into a mapped file");
        };
        assert_eq!(set.block_ends.len(), self.blocks, "a set encoded for another vocabulary size");
        let base = runs.len() as u32;
        runs.extend_from_slice(&set.runs);
        self.offsets.extend(set.block_ends.iter().map(|&end| base + end));
        self.lens.push(set.len);
    }

    /// Appends the set of the ascending `ranks`.
    #[cfg(test)]
    pub(crate) fn push_ranks(&mut self, ranks: &[u32]) {
        self.push(&EncodedSet::from_ranks(self.order.len(), ranks));
    }

    /// Appends the set of the token ids `ids` (any order, no duplicates).
    #[cfg(test)]
    pub(crate) fn push_ids(&mut self, ids: impl IntoIterator<Item = u32>) {
        let mut ranks: Vec<u32> = ids.into_iter().map(|t| self.rank[t as usize]).collect();
        ranks.sort_unstable();
        self.push_ranks(&ranks);
    }

    /// Whether set `i` is `set`: the encoding is canonical, so equal sets have equal runs.
    pub(crate) fn equals(&self, i: usize, set: &EncodedSet) -> bool {
        let offsets = &self.offsets[i * self.blocks..=(i + 1) * self.blocks];
        let runs = &self.runs.as_slice()[offsets[0] as usize..offsets[self.blocks] as usize];
        self.lens[i] == set.len
            && runs == &set.runs[..]
            && offsets[1..].iter().zip(&set.block_ends).all(|(&end, &want)| end - offsets[0] == want)
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> ForbiddenSet<'_> {
        ForbiddenSet { sets: self, set: i }
    }

    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }

    pub(crate) fn lens(&self) -> &[u32] {
        &self.lens
    }

    pub(crate) fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    pub(crate) fn runs(&self) -> &[u32] {
        self.runs.as_slice()
    }

    pub(crate) fn is_mapped(&self) -> bool {
        self.runs.is_mapped()
    }

    /// Checks the module's invariants for a vocabulary of `n` tokens: one pass over the runs.
    pub(crate) fn validate(&self, n: usize) -> std::result::Result<(), &'static str> {
        let runs = self.runs.as_slice();
        if self.order.len() != n {
            return Err("token order does not cover the vocabulary");
        }
        if self.offsets.len() != self.lens.len() * self.blocks + 1
            || self.offsets.first() != Some(&0)
            || self.offsets.last().map(|&o| o as usize) != Some(runs.len())
        {
            return Err("forbidden-set offsets do not span the runs");
        }
        if self.offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err("forbidden-set offsets decrease");
        }
        for c in 0..self.lens.len() {
            let mut len = 0usize;
            for b in 0..self.blocks {
                let block = self.block_runs(c, b);
                let mut bad = false;
                let mut next_free = 0u32; // the lowest offset the next run may start at
                for &run in block {
                    let (first, last) = (run & BLOCK_MASK, run >> BLOCK_BITS);
                    // `|` rather than `||`: no early exit, so the loop stays branch-free.
                    bad |= (first < next_free) | (last < first);
                    next_free = last + 1;
                    len += (last - first + 1) as usize;
                }
                let end = (b << BLOCK_BITS) + next_free as usize;
                if bad || end > n {
                    return Err("forbidden set not ascending or out of range");
                }
            }
            if len != self.lens[c] as usize {
                return Err("forbidden-set length differs from its runs");
            }
        }
        Ok(())
    }

    #[inline]
    fn block_runs(&self, set: usize, block: usize) -> &[u32] {
        let at = set * self.blocks + block;
        &self.runs.as_slice()[self.offsets[at] as usize..self.offsets[at + 1] as usize]
    }
}

/// One set in the storage's encoding, made apart from the storage, so that the build's workers
/// encode in parallel and interning a set is a comparison of slices and appending it a copy
/// (o200k: 28.9 M runs to compare and copy where there were 218.8 M ranks to encode).
/// Canonical: runs are maximal within a block, so equal sets have equal encodings. Its hash,
/// which sets are interned by, is computed with it (so by the workers too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EncodedSet {
    len: u32,
    /// The end of each block's runs in `runs` (one per block).
    block_ends: Vec<u32>,
    /// As [`ForbiddenSets`] stores them.
    runs: Vec<u32>,
    hash: u64,
}

impl EncodedSet {
    /// The set of the ranks `first..=last` of each run, for a vocabulary of `num_tokens`; runs
    /// ascending and neither overlapping nor touching.
    pub(crate) fn from_rank_runs(num_tokens: usize, rank_runs: impl IntoIterator<Item = (u32, u32)>) -> EncodedSet {
        let blocks = num_tokens.div_ceil(1 << BLOCK_BITS).max(1);
        let mut set = EncodedSet { len: 0, block_ends: Vec::with_capacity(blocks), runs: Vec::new(), hash: 0 };
        for (mut first, last) in rank_runs {
            debug_assert!(first <= last && (last as usize) < num_tokens);
            set.len += last - first + 1;
            loop {
                let block = first >> BLOCK_BITS;
                while set.block_ends.len() < block as usize {
                    set.block_ends.push(set.runs.len() as u32);
                }
                let end = last.min(block << BLOCK_BITS | BLOCK_MASK);
                set.runs.push((first & BLOCK_MASK) | ((end & BLOCK_MASK) << BLOCK_BITS));
                if end == last {
                    break;
                }
                first = end + 1;
            }
        }
        set.block_ends.resize(blocks, set.runs.len() as u32);
        set.hash = {
            use std::hash::{Hash, Hasher};
            let mut h = rustc_hash::FxHasher::default();
            (set.len, &set.block_ends, &set.runs).hash(&mut h);
            h.finish()
        };
        set
    }

    /// The set of the ascending `ranks`.
    pub(crate) fn from_ranks(num_tokens: usize, ranks: &[u32]) -> EncodedSet {
        debug_assert!(ranks.windows(2).all(|w| w[0] < w[1]));
        let mut i = 0;
        EncodedSet::from_rank_runs(
            num_tokens,
            std::iter::from_fn(|| {
                let first = *ranks.get(i)?;
                while i + 1 < ranks.len() && ranks[i + 1] == ranks[i] + 1 {
                    i += 1;
                }
                i += 1;
                Some((first, ranks[i - 1]))
            }),
        )
    }

    /// The hash sets are interned by.
    pub(crate) fn hash64(&self) -> u64 {
        self.hash
    }
}

/// The inverse of a permutation of `0..order.len()`; `None` when it is not one.
fn inverse(order: &[u32]) -> Option<Vec<u32>> {
    let mut rank = vec![u32::MAX; order.len()];
    for (i, &t) in order.iter().enumerate() {
        let slot = rank.get_mut(t as usize)?;
        if *slot != u32::MAX {
            return None;
        }
        *slot = i as u32;
    }
    Some(rank)
}

/// One class's forbidden set, read from its runs.
#[derive(Clone, Copy)]
pub struct ForbiddenSet<'a> {
    sets: &'a ForbiddenSets,
    set: usize,
}

impl<'a> ForbiddenSet<'a> {
    /// The number of tokens in the set.
    #[inline]
    pub fn len(&self) -> usize {
        self.sets.lens[self.set] as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `token` is in the set: its rank, then a binary search among its block's runs.
    #[inline]
    pub fn contains(&self, token: u32) -> bool {
        let Some(&r) = self.sets.rank.get(token as usize) else {
            return false;
        };
        let (block, offset) = ((r >> BLOCK_BITS) as usize, r & BLOCK_MASK);
        let runs = self.sets.block_runs(self.set, block);
        let k = runs.partition_point(|&run| run & BLOCK_MASK <= offset);
        k > 0 && runs[k - 1] >> BLOCK_BITS >= offset
    }

    /// Membership tests for tokens met mostly in ascending rank (see `ForbiddenCursor`).
    pub fn cursor(self) -> ForbiddenCursor<'a> {
        ForbiddenCursor { set: self, block: usize::MAX, runs: &[], k: 0, offset: 0 }
    }

    /// The ranks in the set, ascending.
    pub fn ranks(&self) -> impl Iterator<Item = u32> + 'a {
        let sets = self.sets;
        let set = self.set;
        (0..sets.blocks).flat_map(move |b| {
            let base = (b as u32) << BLOCK_BITS;
            sets.block_runs(set, b).iter().flat_map(move |&run| base + (run & BLOCK_MASK)..=base + (run >> BLOCK_BITS))
        })
    }

    /// Calls `f` on every token of the set (in rank order, not by id).
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(u32)) {
        let order = &self.sets.order;
        for b in 0..self.sets.blocks {
            let base = b << BLOCK_BITS;
            for &run in self.sets.block_runs(self.set, b) {
                for &t in &order[base + (run & BLOCK_MASK) as usize..=base + (run >> BLOCK_BITS) as usize] {
                    f(t);
                }
            }
        }
    }

    /// The tokens of the set, ascending by id.
    pub fn to_sorted_vec(&self) -> Vec<u32> {
        let mut ids = Vec::with_capacity(self.len());
        self.for_each(|t| ids.push(t));
        ids.sort_unstable();
        ids
    }
}

impl TokenFilter for ForbiddenSet<'_> {
    #[inline]
    fn len(&self) -> usize {
        ForbiddenSet::len(self)
    }
    #[inline]
    fn contains(&self, token: u32) -> bool {
        ForbiddenSet::contains(self, token)
    }
    #[inline]
    fn for_each(&self, f: impl FnMut(u32)) {
        ForbiddenSet::for_each(self, f)
    }
}

impl std::fmt::Debug for ForbiddenSet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.to_sorted_vec()).finish()
    }
}

/// Runs a [`ForbiddenCursor`] steps over one by one before it searches the rest.
const CURSOR_SCAN_RUNS: usize = 8;

/// Membership tests of one set for tokens met mostly in ascending rank, as a trie walk meets
/// them (in the order of their bytes, which is the ranks' order): a test looks at the runs
/// just past the previous test's before it searches, so a walk's tests read a few neighbouring
/// runs instead of a binary search each among its block's runs. Why: in the pair-condition
/// walks of narrow first visits those searches' probes were cache misses, ~60 % of the time of
/// the membership tests, which took ~13 % of those visits' time (`perf`, Llama 3). A test out
/// of order searches afresh; answers never depend on the order.
pub struct ForbiddenCursor<'a> {
    set: ForbiddenSet<'a>,
    /// The block of the previous test (`usize::MAX` before the first), its runs, the number
    /// of them starting at or before the previous offset, and that offset.
    block: usize,
    runs: &'a [u32],
    k: usize,
    offset: u32,
}

impl<'a> ForbiddenCursor<'a> {
    /// Whether `token` is in the set ([`ForbiddenSet::contains`]).
    #[inline]
    pub fn contains(&mut self, token: u32) -> bool {
        let Some(&r) = self.set.sets.rank.get(token as usize) else {
            return false;
        };
        let (block, offset) = ((r >> BLOCK_BITS) as usize, r & BLOCK_MASK);
        let starts_by = |run: &u32| run & BLOCK_MASK <= offset;
        if block != self.block || offset < self.offset {
            self.block = block;
            self.runs = self.set.sets.block_runs(self.set.set, block);
            self.k = self.runs.partition_point(starts_by);
        } else {
            let near = self.runs.len().min(self.k + CURSOR_SCAN_RUNS);
            while self.k < near && starts_by(&self.runs[self.k]) {
                self.k += 1;
            }
            if self.k == near && near < self.runs.len() {
                self.k = near + self.runs[near..].partition_point(starts_by);
            }
        }
        self.offset = offset;
        self.k > 0 && self.runs[self.k - 1] >> BLOCK_BITS >= offset
    }
}

/// Forbidden sets of at least this many ids per word of a bitset over the tokens also get
/// the bitset: clearing the set from a mask is then one pass over the mask's words (~0.5 µs
/// for 128k tokens) instead of a step per id (~1 ns each; Llama 3 has sets of up to 120,000),
/// for at most a quarter of the memory of the ids. On Llama 3, 443 of the 36,464 classes
/// qualify: 7 MB, made in ~11 ms when the DFA is built or loaded.
const BITSET_MIN_IDS_PER_WORD: usize = 4;

/// Bitsets of the large forbidden sets: class `c`'s is
/// `bits[slot[c] * words..(slot[c] + 1) * words]` when `slot[c] != u32::MAX`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ForbiddenBits {
    words: usize,
    slot: Vec<u32>,
    bits: Vec<u32>,
}

impl ForbiddenBits {
    pub(crate) fn new(sets: &ForbiddenSets, num_tokens: usize) -> ForbiddenBits {
        let words = bitset::words_for(num_tokens).max(1);
        let mut out = ForbiddenBits { words, slot: vec![u32::MAX; sets.len()], bits: Vec::new() };
        for c in 0..sets.len() {
            let set = sets.get(c);
            if set.len() >= BITSET_MIN_IDS_PER_WORD * words {
                out.slot[c] = (out.bits.len() / words) as u32;
                let start = out.bits.len();
                out.bits.resize(start + words, 0);
                let bits = &mut out.bits[start..];
                set.for_each(|t| bitset::set(bits, t as usize));
            }
        }
        out
    }

    pub(crate) fn get(&self, class: usize) -> Option<&[u32]> {
        match self.slot.get(class) {
            Some(&s) if s != u32::MAX => Some(&self.bits[s as usize * self.words..(s as usize + 1) * self.words]),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets over `n` tokens in id order, from their parts (one block: runs are `first | last << 16`).
    fn sets(n: u32, lens: &[u32], offsets: &[u32], runs: &[u32]) -> ForbiddenSets {
        ForbiddenSets::from_parts((0..n).collect(), lens.to_vec(), offsets.to_vec(), U32Storage::Owned(runs.to_vec()))
            .unwrap()
    }

    fn run(first: u32, last: u32) -> u32 {
        first | last << 16
    }

    #[test]
    fn forbidden_sets_are_validated() {
        assert_eq!(sets(4, &[0, 2], &[0, 0, 1], &[run(1, 2)]).validate(4), Ok(()));
        assert!(sets(4, &[0], &[0], &[]).validate(4).is_err(), "offsets do not cover the sets");
        assert!(sets(4, &[2], &[1, 1], &[run(1, 2)]).validate(4).is_err(), "does not start at 0");
        assert!(sets(4, &[1], &[0, 1], &[run(1, 1), run(3, 3)]).validate(4).is_err(), "does not end at the runs' end");
        assert!(sets(4, &[2, 0], &[0, 2, 1], &[run(1, 1), run(3, 3)]).validate(4).is_err(), "decreasing offsets");
        assert!(sets(4, &[2], &[0, 2], &[run(3, 3), run(1, 1)]).validate(4).is_err(), "unsorted");
        assert!(sets(4, &[3], &[0, 2], &[run(1, 2), run(2, 2)]).validate(4).is_err(), "overlapping runs");
        assert!(sets(4, &[0], &[0, 1], &[run(2, 1)]).validate(4).is_err(), "a run ending before its start");
        assert!(sets(4, &[2], &[0, 1], &[run(3, 4)]).validate(4).is_err(), "out of range");
        assert!(sets(4, &[3], &[0, 1], &[run(1, 2)]).validate(4).is_err(), "length differs from the runs");
        assert!(sets(5, &[2], &[0, 1], &[run(1, 2)]).validate(4).is_err(), "order of another vocabulary");
        assert!(ForbiddenSets::from_parts(vec![0, 0, 1], vec![], vec![0], U32Storage::Owned(vec![])).is_none());
        assert!(ForbiddenSets::from_parts(vec![0, 3], vec![], vec![0], U32Storage::Owned(vec![])).is_none());
        // A bad run anywhere in a long set is found (the check has no early exit).
        let mut long: Vec<u32> = (0..1000).map(|i| run(2 * i, 2 * i)).collect();
        assert_eq!(sets(2000, &[1000], &[0, 1000], &long).validate(2000), Ok(()));
        long.swap(517, 518);
        assert!(sets(2000, &[1000], &[0, 1000], &long).validate(2000).is_err(), "unsorted in the middle");
    }

    /// Random sets over 200,000 tokens (four blocks) in a random order, with runs across block
    /// ends: membership, iteration and equality agree with the sets they were made from.
    #[test]
    fn sets_read_back_as_written() {
        use crate::util::random::SplitMix64;
        let n = 200_000u32;
        let mut rng = SplitMix64::new(7);
        let mut order: Vec<u32> = (0..n).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut sets = ForbiddenSets::new(order.clone());
        let mut want: Vec<Vec<u32>> = Vec::new();
        for k in 0..12 {
            let mut ranks: Vec<u32> = match k {
                0 => vec![],
                1 => (0..n).collect(),
                2 => (65_530..65_545).chain(131_071..131_073).chain([n - 1]).collect(),
                _ => (0..n).filter(|_| rng.below(1 << (k - 2)) == 0).collect(),
            };
            if k > 2 {
                // whole runs too, as real sets have
                ranks.extend((0..40).flat_map(|_| {
                    let s = rng.below(n as usize - 300) as u32;
                    s..s + 1 + rng.below(300) as u32
                }));
                ranks.sort_unstable();
                ranks.dedup();
            }
            let ids: Vec<u32> = ranks.iter().map(|&r| order[r as usize]).collect();
            if k % 2 == 0 {
                sets.push_ranks(&ranks);
            } else {
                sets.push_ids(ids.iter().copied());
            }
            let mut sorted = ids;
            sorted.sort_unstable();
            want.push(sorted);
        }
        assert_eq!(sets.validate(n as usize), Ok(()));
        for (c, ids) in want.iter().enumerate() {
            let set = sets.get(c);
            assert_eq!(set.len(), ids.len());
            assert_eq!(&set.to_sorted_vec(), ids, "set {c}");
            let ranks: Vec<u32> = set.ranks().collect();
            assert!(ranks.windows(2).all(|w| w[0] < w[1]));
            let equals_ranks = |ranks: &[u32]| sets.equals(c, &EncodedSet::from_ranks(n as usize, ranks));
            assert!(equals_ranks(&ranks));
            if let Some((_, fewer)) = ranks.split_last() {
                assert!(!equals_ranks(fewer));
            }
            if let Some(outside) = (0..n).find(|&r| ranks.binary_search(&r).is_err()) {
                let mut other = ranks.clone();
                other.pop();
                other.push(outside);
                other.sort_unstable();
                assert!(other.is_empty() || !equals_ranks(&other), "set {c} equals a set with another rank");
            }
            for t in 0..n {
                assert_eq!(set.contains(t), ids.binary_search(&t).is_ok(), "set {c}, token {t}");
            }
            // A cursor's tests: every rank in order, then runs of ranks in order with jumps
            // forward and back (across blocks too), as a trie walk's tests come.
            let mut cursor = set.cursor();
            for r in 0..n {
                let t = order[r as usize];
                assert_eq!(cursor.contains(t), ids.binary_search(&t).is_ok(), "set {c}, rank {r} in order");
            }
            let mut cursor = set.cursor();
            let mut r = rng.below(n as usize) as u32;
            for _ in 0..20_000 {
                r = match rng.below(10) {
                    0 => rng.below(n as usize) as u32,
                    1..=3 => (r + 1 + rng.below(2_000) as u32).min(n - 1),
                    _ => (r + 1).min(n - 1),
                };
                let t = order[r as usize];
                assert_eq!(cursor.contains(t), ids.binary_search(&t).is_ok(), "set {c}, rank {r} in a walk");
            }
            assert!(!cursor.contains(n), "a token past the vocabulary is in no set");
            assert!(!set.contains(n), "a token past the vocabulary is in no set");
            let mut mask = vec![u32::MAX; bitset::words_for(n as usize)];
            set.clear_from(&mut mask);
            assert_eq!(bitset::count(&mask), n as usize - ids.len());
        }
        let back = ForbiddenSets::from_parts(
            sets.order().to_vec(),
            sets.lens().to_vec(),
            sets.offsets().to_vec(),
            U32Storage::Owned(sets.runs().to_vec()),
        )
        .unwrap();
        assert_eq!(back.validate(n as usize), Ok(()));
        assert_eq!(back, sets);
    }
}
