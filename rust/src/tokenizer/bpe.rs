//! The reference BPE: merges applied by priority, exactly as Hugging Face `tokenizers` does.
//!
//! HF's BPE does not make one left-to-right pass per merge (the appendix's `tokenize`); it
//! repeatedly merges the adjacent pair of lowest rank present in the word, the leftmost one on
//! ties (a binary heap of `(rank, position)`). The two agree when the merge table is
//! *well-ordered* — every merge's parts are created by lower-ranked merges — and disagree
//! otherwise: with `(b, cd)` ranked before `(c, d)`, priority BPE turns `bcd` into `bcd`
//! (the pair `(b, cd)` fires the moment `cd` exists) while sequential passes give `b cd`.
//! Mistral-7B's table has 10,673 merges that use a part created by a later merge, so exactness
//! needs the priority semantics; [`MergeTable::derive`] records the derivation of one token
//! under them, which `tokenizer_dfa` uses to decide canonical token pairs.
//!
//! Duplicate pairs in the table keep the *last* rank, as HF's map construction does.

use rustc_hash::FxHashMap;

use crate::tokenizer::vocab::Merge;

/// "No further merge": the rank after a word's last merge.
pub const NO_MERGE: u32 = u32::MAX;

/// Merge pairs → (rank, merged token).
#[derive(Clone, Debug, Default)]
pub struct MergeTable {
    pairs: FxHashMap<(u32, u32), (u32, u32)>,
}

/// One moment of a word's derivation: its first and last symbol, and the rank of the merge
/// that happens next ([`NO_MERGE`] at the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub first: u32,
    pub last: u32,
    pub next_rank: u32,
}

impl MergeTable {
    pub fn new(merges: &[Merge]) -> MergeTable {
        let mut pairs = FxHashMap::default();
        for (rank, m) in merges.iter().enumerate() {
            pairs.insert((m.left, m.right), (rank as u32, m.merged));
        }
        MergeTable { pairs }
    }

    #[inline]
    pub fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        self.pairs.get(&(left, right)).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = ((u32, u32), (u32, u32))> + '_ {
        self.pairs.iter().map(|(k, v)| (*k, *v))
    }

    /// The lowest-ranked adjacent pair (leftmost on ties): `(position, rank, merged)`.
    fn best_pair(&self, symbols: &[u32]) -> Option<(usize, u32, u32)> {
        let mut best: Option<(usize, u32, u32)> = None;
        for (i, w) in symbols.windows(2).enumerate() {
            if let Some((rank, merged)) = self.get(w[0], w[1]) {
                if best.is_none_or(|b| rank < b.1) {
                    best = Some((i, rank, merged));
                }
            }
        }
        best
    }

    /// Tokenizes a sequence of base symbols in place.
    pub fn encode(&self, symbols: &mut Vec<u32>) {
        while let Some((i, _, merged)) = self.best_pair(symbols) {
            symbols[i] = merged;
            symbols.remove(i + 1);
        }
    }

    /// Tokenizes `symbols` and records every step (first symbol, last symbol, next rank).
    /// Returns the final symbols and the steps.
    pub fn derive(&self, symbols: &[u32]) -> (Vec<u32>, Vec<Step>) {
        let mut symbols = symbols.to_vec();
        let mut steps = Vec::new();
        loop {
            let best = self.best_pair(&symbols);
            steps.push(Step {
                first: symbols[0],
                last: *symbols.last().expect("non-empty word"),
                next_rank: best.map_or(NO_MERGE, |b| b.1),
            });
            let Some((i, _, merged)) = best else { break };
            symbols[i] = merged;
            symbols.remove(i + 1);
        }
        (symbols, steps)
    }

    /// Whether the table is well-ordered: each merge's parts are base symbols or produced only by
    /// lower-ranked merges. Then priority BPE equals the appendix's sequential passes.
    pub fn is_well_ordered(merges: &[Merge]) -> bool {
        // A repeated pair acts at its last rank under priority BPE (HF keeps the last) but at
        // its first under sequential passes: not well-ordered.
        let mut pairs = rustc_hash::FxHashSet::default();
        if !merges.iter().all(|m| pairs.insert((m.left, m.right))) {
            return false;
        }
        let mut last_producer: FxHashMap<u32, usize> = FxHashMap::default();
        for (rank, m) in merges.iter().enumerate() {
            last_producer.insert(m.merged, rank);
        }
        merges
            .iter()
            .enumerate()
            .all(|(rank, m)| [m.left, m.right].iter().all(|p| last_producer.get(p).is_none_or(|&r| r < rank)))
    }

    /// Whether the appendix's sequential-pass algorithms (Algorithm 3, DirectMerge) are exact
    /// for the table: it is well-ordered and every token has one producing merge (Algorithm 3's
    /// proof sends all transitions on a token to one state; a second producer would break that).
    pub fn sequential_passes_are_exact(merges: &[Merge]) -> bool {
        let mut seen = rustc_hash::FxHashSet::default();
        merges.iter().all(|m| seen.insert(m.merged)) && Self::is_well_ordered(merges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(m: &[(u32, u32, u32)]) -> MergeTable {
        MergeTable::new(&m.iter().map(|&(l, r, x)| Merge { left: l, right: r, merged: x }).collect::<Vec<_>>())
    }

    #[test]
    fn priority_not_sequential() {
        // symbols a=0 b=1 c=2 d=3; cd=4, bcd=5; (b, cd) ranks before (c, d).
        let t = table(&[(1, 4, 5), (2, 3, 4)]);
        let mut w = vec![1, 2, 3];
        t.encode(&mut w);
        assert_eq!(w, vec![5], "priority BPE merges (b, cd) as soon as cd exists");
        assert!(!MergeTable::is_well_ordered(&[
            Merge { left: 1, right: 4, merged: 5 },
            Merge { left: 2, right: 3, merged: 4 }
        ]));
    }

    #[test]
    fn aa_merges_leftmost_first() {
        // a=0, aa=1
        let t = table(&[(0, 0, 1)]);
        let mut w = vec![0, 0, 0];
        t.encode(&mut w);
        assert_eq!(w, vec![1, 0]);
        let (out, steps) = t.derive(&[0, 0, 0, 0]);
        assert_eq!(out, vec![1, 1]);
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0], Step { first: 0, last: 0, next_rank: 0 });
        assert_eq!(steps[1], Step { first: 1, last: 0, next_rank: 0 });
        assert_eq!(steps[2], Step { first: 1, last: 1, next_rank: NO_MERGE });
    }
}
