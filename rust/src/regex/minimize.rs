//! Hopcroft's partition refinement: the coarsest partition of a DFA's states into blocks of
//! equivalent states (same language from each), i.e. the states of the minimal DFA.
//!
//! The input is a *complete* DFA as a table: `trans[s * k + c]` is the target of state `s` on
//! symbol class `c`, for `n` states and `k` classes (a partial DFA is completed by the caller with
//! an explicit sink). Start from {accepting, non-accepting}; repeatedly take a splitter — a
//! block `B` and a class `c` — and split every block `Y` into the states that go to `B` on `c`
//! and those that do not. Queueing only the smaller half of each split block ("process the
//! smaller half") gives `O(k · n · log n)` time; the inverse transitions make each splitter
//! cost what it touches.
//!
//! # Invariants
//! * Blocks are contiguous ranges of `elements`; `position[s]` is `s`'s index there and
//!   `block_of[s]` its block. A split moves the marked states to the front of their range.
//! * Two states end in one block iff no word distinguishes them (Hopcroft 1971).
//!
//! Why not regex-automata's own minimisation: on one JSONSchemaBench regex
//! (`Github_medium/o42855`, 23k states) it took 100 s, against 0.2 s to determinise; this one
//! runs on the trimmed DFA (no dead or unreachable states) and stays in the `n · k · log n` bound.

/// Block of every state in the coarsest partition compatible with `accepting` and `trans`
/// (see the module docs). Block ids are dense, `0..num_blocks`.
pub fn coarsest_partition(n: usize, k: usize, trans: &[u32], accepting: &[bool]) -> Vec<u32> {
    debug_assert_eq!(trans.len(), n * k);
    debug_assert_eq!(accepting.len(), n);
    if n == 0 {
        return Vec::new();
    }
    // Inverse transitions per class, as CSR: predecessors of `t` on `c` are
    // `inverse[start[c * (n + 1) + t]..start[c * (n + 1) + t + 1]]`.
    let mut start = vec![0u32; k * (n + 1) + 1];
    for s in 0..n {
        for c in 0..k {
            start[c * (n + 1) + trans[s * k + c] as usize + 1] += 1;
        }
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut fill = start.clone();
    let mut inverse = vec![0u32; n * k];
    for s in 0..n {
        for c in 0..k {
            let slot = &mut fill[c * (n + 1) + trans[s * k + c] as usize];
            inverse[*slot as usize] = s as u32;
            *slot += 1;
        }
    }

    // The initial partition: accepting states first.
    let mut elements: Vec<u32> = (0..n as u32).filter(|&s| accepting[s as usize]).collect();
    let num_accepting = elements.len();
    elements.extend((0..n as u32).filter(|&s| !accepting[s as usize]));
    let mut position = vec![0u32; n];
    for (i, &s) in elements.iter().enumerate() {
        position[s as usize] = i as u32;
    }
    let mut block_of = vec![0u32; n];
    // (start, end) of each block in `elements`.
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in [(0, num_accepting), (num_accepting, n)] {
        if lo < hi {
            for &s in &elements[lo..hi] {
                block_of[s as usize] = ranges.len() as u32;
            }
            ranges.push((lo as u32, hi as u32));
        }
    }

    // Worklist of splitters (block, class); `queued[b * k + c]` says whether it is in it.
    let mut queued: Vec<bool> = vec![false; ranges.len() * k];
    let mut work: Vec<(u32, u32)> = Vec::new();
    let smallest = (0..ranges.len()).min_by_key(|&b| ranges[b].1 - ranges[b].0).expect("a block");
    for c in 0..k {
        queued[smallest * k + c] = true;
        work.push((smallest as u32, c as u32));
    }
    // Per split: how many states of each touched block are marked, and which blocks.
    let mut marked = vec![0u32; ranges.len()];
    let mut touched: Vec<u32> = Vec::new();
    let mut splitter: Vec<u32> = Vec::new();
    while let Some((b, c)) = work.pop() {
        queued[b as usize * k + c as usize] = false;
        // X = predecessors on `c` of the states of block `b` (copied: `b` may be split below).
        let (lo, hi) = ranges[b as usize];
        splitter.clear();
        for &t in &elements[lo as usize..hi as usize] {
            let base = c as usize * (n + 1) + t as usize;
            splitter.extend_from_slice(&inverse[start[base] as usize..start[base + 1] as usize]);
        }
        // Move each state of X to the front of its block's unmarked part.
        for &s in &splitter {
            let y = block_of[s as usize] as usize;
            let (ylo, _) = ranges[y];
            let front = ylo + marked[y];
            let p = position[s as usize];
            if p < front {
                continue; // already marked
            }
            let other = elements[front as usize];
            elements.swap(front as usize, p as usize);
            position[other as usize] = p;
            position[s as usize] = front;
            if marked[y] == 0 {
                touched.push(y as u32);
            }
            marked[y] += 1;
        }
        for &y in &touched {
            let y = y as usize;
            let (ylo, yhi) = ranges[y];
            let m = std::mem::take(&mut marked[y]);
            if m == yhi - ylo {
                continue; // all of Y goes to B on c: no split
            }
            // Split: the marked front part becomes a new block.
            let new = ranges.len() as u32;
            ranges[y] = (ylo + m, yhi);
            ranges.push((ylo, ylo + m));
            marked.push(0);
            queued.resize(ranges.len() * k, false);
            for &s in &elements[ylo as usize..(ylo + m) as usize] {
                block_of[s as usize] = new;
            }
            let smaller = if m <= yhi - ylo - m { new as usize } else { y };
            for c2 in 0..k {
                if queued[y * k + c2] {
                    // Y was waiting as a splitter: both halves must be.
                    queued[new as usize * k + c2] = true;
                    work.push((new, c2 as u32));
                } else {
                    queued[smaller * k + c2] = true;
                    work.push((smaller as u32, c2 as u32));
                }
            }
        }
        touched.clear();
    }
    block_of
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: Moore's refinement to a fixpoint (quadratic, fine for tiny DFAs).
    fn moore(n: usize, k: usize, trans: &[u32], accepting: &[bool]) -> Vec<u32> {
        let mut block: Vec<u32> = accepting.iter().map(|&a| a as u32).collect();
        loop {
            let mut ids = std::collections::HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let sig: Vec<u32> =
                        std::iter::once(block[s]).chain((0..k).map(|c| block[trans[s * k + c] as usize])).collect();
                    let len = ids.len() as u32;
                    *ids.entry(sig).or_insert(len)
                })
                .collect();
            let before = block.iter().collect::<std::collections::HashSet<_>>().len();
            if ids.len() == before {
                return next;
            }
            block = next;
        }
    }

    /// Same partition up to renaming of blocks.
    fn same_partition(a: &[u32], b: &[u32]) -> bool {
        let mut ab = std::collections::HashMap::new();
        let mut ba = std::collections::HashMap::new();
        a.iter().zip(b).all(|(x, y)| *ab.entry(x).or_insert(y) == y && *ba.entry(y).or_insert(x) == x)
    }

    #[test]
    fn equals_moore_on_random_dfas() {
        let mut rng = crate::util::random::SplitMix64::new(7);
        for _ in 0..2_000 {
            let n = 1 + rng.below(12);
            let k = 1 + rng.below(3);
            let trans: Vec<u32> = (0..n * k).map(|_| rng.below(n) as u32).collect();
            let accepting: Vec<bool> = (0..n).map(|_| rng.one_in(3)).collect();
            let fast = coarsest_partition(n, k, &trans, &accepting);
            let slow = moore(n, k, &trans, &accepting);
            assert!(
                same_partition(&fast, &slow),
                "n={n} k={k} trans={trans:?} acc={accepting:?}: {fast:?} vs {slow:?}"
            );
        }
    }

    #[test]
    fn a_chain_is_already_minimal_and_a_cycle_collapses() {
        // 0 -a-> 1 -a-> 2 (accepting) -a-> sink 3 -a-> 3: all distinct.
        let p = coarsest_partition(4, 1, &[1, 2, 3, 3], &[false, false, true, false]);
        assert_eq!(p.iter().collect::<std::collections::HashSet<_>>().len(), 4);
        // A 3-cycle of accepting states is one state.
        let p = coarsest_partition(3, 1, &[1, 2, 0], &[true, true, true]);
        assert!(p.iter().all(|&b| b == p[0]));
    }
}
