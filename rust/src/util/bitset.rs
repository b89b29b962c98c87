//! Token sets as bitsets of `u32` words: bit `i % 32` of word `i / 32` is token `i`.
//!
//! This is the layout of every mask the library hands out (and, reinterpreted as `i32`, the
//! layout xgrammar and llguidance use for their batch bitmasks), so masks can be copied into a
//! caller's buffer word by word.

/// A mask kept as the way to write it again: a few hundred bytes where its words are 16 KB on a
/// 128k vocabulary, at a pass over words it shares with other masks each time it is written.
pub trait Recipe: Send + Sync {
    /// Writes the mask into `out`, every word of it.
    fn write(&self, out: &mut [u32]);
    /// Heap bytes the recipe holds of its own (not what it shares).
    fn heap_bytes(&self) -> usize;
}

/// What a function that wrote a mask knows of it besides the words it wrote (a mask cache keeps
/// the cheapest form it is told of).
pub enum Filled {
    /// Nothing more: the words are all there is.
    Words,
    /// The mask's token ids, in any order, repeats allowed.
    Ids(Vec<u32>),
    /// How to write the mask again.
    Recipe(std::sync::Arc<dyn Recipe>),
}

/// A 64-bit fingerprint of `words` (equal words, equal fingerprints; a cache keyed by it must
/// still compare what it finds). One multiply and rotate per two words.
pub fn fingerprint(words: &[u32]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let (pairs, rest) = words.split_at(words.len() & !1);
    let mut h = words.len() as u64;
    for pair in pairs.chunks_exact(2) {
        h = (h ^ (pair[0] as u64 | (pair[1] as u64) << 32)).wrapping_mul(K).rotate_left(29);
    }
    for &w in rest {
        h = (h ^ w as u64).wrapping_mul(K).rotate_left(29);
    }
    h
}

/// Number of `u32` words needed for `n` bits.
#[inline]
pub fn words_for(n: usize) -> usize {
    n.div_ceil(32)
}

#[inline]
pub fn set(words: &mut [u32], i: usize) {
    words[i >> 5] |= 1 << (i & 31);
}

#[inline]
pub fn clear(words: &mut [u32], i: usize) {
    words[i >> 5] &= !(1 << (i & 31));
}

#[inline]
pub fn contains(words: &[u32], i: usize) -> bool {
    words.get(i >> 5).is_some_and(|w| w & (1 << (i & 31)) != 0)
}

/// Number of set bits, two words per population count: built for baseline x86-64 (no
/// `popcnt`), each count is a dozen instructions whatever its width.
pub fn count(words: &[u32]) -> usize {
    let pairs = words.chunks_exact(2);
    let odd = pairs.remainder().first().map_or(0, |w| w.count_ones() as usize);
    pairs.map(|p| (p[0] as u64 | (p[1] as u64) << 32).count_ones() as usize).sum::<usize>() + odd
}

/// The number of set bits, counted only until it is past `n` (then some number above `n`): a
/// dense set answers within its first few hundred words.
pub fn count_past(words: &[u32], n: usize) -> usize {
    let mut seen = 0;
    for chunk in words.chunks(COUNT_CHUNK_WORDS) {
        seen += count(chunk);
        if seen > n {
            break;
        }
    }
    seen
}

/// Words [`count_past`] counts between two checks.
const COUNT_CHUNK_WORDS: usize = 64;

/// The indices of the set bits, ascending, as ids, given their number `n` (from [`count`] or
/// [`count_past`]): it sizes the one allocation and ends the pass at the last id.
pub fn to_ids(words: &[u32], n: usize) -> Vec<u32> {
    let mut ids = Vec::with_capacity(n);
    for (wi, &w) in words.iter().enumerate() {
        if ids.len() == n {
            break;
        }
        let mut w = w;
        while w != 0 {
            ids.push((wi * 32) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    ids
}

/// Indices of the set bits, ascending.
pub fn iter_ones(words: &[u32]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(wi, &w)| {
        let mut w = w;
        std::iter::from_fn(move || {
            if w == 0 {
                return None;
            }
            let bit = w.trailing_zeros() as usize;
            w &= w - 1;
            Some(wi * 32 + bit)
        })
    })
}

/// Clears the ids `ids` from the bitset `out`: one read-modify-write per id, without a
/// data-dependent branch (grouping ids by word costs a mispredicted branch per word change,
/// which made this ~2.5 ns per id instead of ~1).
#[inline]
pub fn clear_sorted(out: &mut [u32], ids: &[u32]) {
    for &i in ids {
        out[(i >> 5) as usize] &= !(1 << (i & 31));
    }
}

/// Clears the bits of `bits` from `out` (`out &= !bits` over their common words).
#[inline]
pub fn clear_all(out: &mut [u32], bits: &[u32]) {
    for (o, &b) in out.iter_mut().zip(bits) {
        *o &= !b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_iterate() {
        let mut w = vec![0u32; words_for(70)];
        assert_eq!(w.len(), 3);
        for i in [0, 31, 32, 69] {
            set(&mut w, i);
        }
        assert!(contains(&w, 31) && contains(&w, 69) && !contains(&w, 1));
        assert!(!contains(&w, 1000), "out of range is simply absent");
        assert_eq!(iter_ones(&w).collect::<Vec<_>>(), vec![0, 31, 32, 69]);
        clear(&mut w, 31);
        assert_eq!(count(&w), 3);
        let mut all = vec![u32::MAX; 3];
        clear_sorted(&mut all, &[0, 1, 33, 69]);
        let mut other = vec![u32::MAX; 3];
        let mut bits = vec![0u32; 3];
        for i in [0, 1, 33, 69] {
            set(&mut bits, i);
        }
        clear_all(&mut other, &bits);
        assert_eq!(all, other);
        assert_eq!(count(&all), 96 - 4);
    }

    #[test]
    fn counts_and_ids_match_bit_by_bit() {
        // Odd and even lengths, chunk edges, empty and full words: against a test of each bit.
        let mut rng = crate::util::random::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
        for len in [0usize, 1, 2, 3, 63, 64, 65, 128, 129, 4008] {
            for density in [0u64, 1, 8, 31, 32] {
                let words: Vec<u32> = (0..len)
                    .map(|_| (0..32).filter(|_| rng.next_u64() % 32 < density).fold(0u32, |w, b| w | 1 << b))
                    .collect();
                let ids: Vec<u32> = (0..len * 32).filter(|&i| contains(&words, i)).map(|i| i as u32).collect();
                assert_eq!(count(&words), ids.len(), "len {len}");
                assert_eq!(to_ids(&words, ids.len()), ids, "len {len}");
                for n in [0, ids.len().saturating_sub(1), ids.len(), ids.len() + 1, len] {
                    let past = count_past(&words, n);
                    match ids.len() <= n {
                        true => assert_eq!(past, ids.len(), "len {len}, n {n}"),
                        false => assert!(past > n, "len {len}, n {n}"),
                    }
                }
            }
        }
    }
}
