//! The priority-timeline construction of the tokenizer DFA's forbidden sets: exact for
//! Hugging Face's priority BPE on any merge table (Mistral-7B, Llama 2, the byte-level
//! tokenizers), where [`super::sequential`] (the appendix's Algorithm 3) needs a well-ordered
//! one.
//!
//! A pair `(l, r)` of emittable tokens is allowed when BPE of `text(l)·text(r)` gives `[l, r]`.
//! Each token's *derivation timeline* lists the merges that build it, by rank; the pair fails
//! exactly when some merge across the boundary fires before one side's own merges complete
//! (`boundary_fires`). Left tokens are scanned per first symbol of the right token, with the
//! right-side timelines stored next to each first-symbol list so the scan reads forward.
//!
//! # The window test
//! A replay walks both timelines from their start: ~25 ns a candidate, and Llama 3 has 381 M
//! candidates (o200k 813 M), 99.9 % of which fire. Most timelines are *monotone*: their next
//! ranks never decrease (every token of o200k, all but 107 of Llama 3's 127,412), as in any
//! table where a merge's parts come from lower-ranked merges. When both sides are monotone the
//! replay pops merges in rank order, and the boundary `(r, l)` of rank `β` fires iff
//! * the left side's *window* (the steps while `r` is its last symbol, entered by its merge of
//!   rank `e_L`, left by its merge of rank `x_L`) and the right side's (while `l` is first,
//!   `e_R`, `x_R`) overlap: neither is left before the other is entered, `x_L > e_R` and
//!   `x_R ≥ e_L` (ties pop the left side first);
//! * and neither is left below `β`: `x_L > β` and `x_R ≥ β`.
//!
//! Proof of the second point, given the overlap: while both windows are open, if `β < p` and
//! `β ≤ q` for the heads `p`, `q` the boundary fires; otherwise a head below `β` pops, and it is
//! not a window's exit (those are above `β`), so both stay open and the heads grow. Conversely
//! the firing heads satisfy `β < p ≤ x_L` and `β ≤ q ≤ x_R`, the windows' last ranks being their
//! highest. A candidate is then four comparisons read from the scanned list (`PairCheck`);
//! pairs with a non-monotone side are replayed.

use rustc_hash::FxHashMap;

use crate::tokenizer::bpe::{MergeTable, Step, NO_MERGE};
use crate::tokenizer::vocab::Vocabulary;

use super::forbidden_sets::EncodedSet;

/// Each emittable token's derivation timeline, flattened.
pub(crate) struct Derivations {
    pub emittable: Vec<bool>,
    /// Whether the token's next ranks never decrease along its timeline (module docs).
    pub monotone: Vec<bool>,
    /// `steps[start[t]..start[t+1]]` is token `t`'s timeline (empty when not emittable).
    pub start: Vec<u32>,
    pub steps: Vec<Step>,
}

impl Derivations {
    pub(super) fn compute(vocab: &Vocabulary, table: &MergeTable) -> Derivations {
        let n = vocab.num_tokens();
        let mut emittable = vec![false; n];
        let mut monotone = vec![false; n];
        let mut start = Vec::with_capacity(n + 1);
        let mut steps = Vec::new();
        let mut symbols = Vec::new();
        let mut added: Vec<u32> =
            vocab.pre_tokenizer().map(|p| p.added.iter().map(|a| a.0).collect()).unwrap_or_default();
        added.sort_unstable();
        for t in 0..n as u32 {
            start.push(steps.len() as u32);
            if vocab.is_never_allowed(t) || vocab.byte_fallback_tokens().is_some_and(|fb| fb.contains(&t)) {
                continue;
            }
            // A non-special added token is split out of the text before the merges run: they
            // never emit it, even where they could build it (`crate::build::pre_tokenized`).
            if added.binary_search(&t).is_ok() {
                continue;
            }
            if !vocab.base_symbols(vocab.token_bytes(t), &mut symbols) {
                continue;
            }
            let (out, timeline) = table.derive(&symbols);
            if out == [t] {
                emittable[t as usize] = true;
                monotone[t as usize] = timeline.windows(2).all(|w| w[0].next_rank <= w[1].next_rank);
                steps.extend(timeline);
            }
        }
        start.push(steps.len() as u32);
        Derivations { emittable, monotone, start, steps }
    }

    #[inline]
    pub fn timeline(&self, t: u32) -> &[Step] {
        &self.steps[self.start[t as usize] as usize..self.start[t as usize + 1] as usize]
    }
}

/// Whether the boundary pair `(r, l)` of rank `beta` fires when `left` is followed by `right`.
#[inline]
fn boundary_fires(left: &[Step], right: &[Step], r: u32, l: u32, beta: u32) -> bool {
    let (mut i, mut j) = (0, 0);
    let mut seen_r = false;
    loop {
        let (a, b) = (left[i], right[j]);
        if a.last == r {
            seen_r = true;
            if b.first == l && beta < a.next_rank && beta <= b.next_rank {
                return true;
            }
        } else if seen_r {
            return false; // `r` was absorbed and never comes back
        }
        if a.next_rank == NO_MERGE && b.next_rank == NO_MERGE {
            return false;
        }
        if a.next_rank <= b.next_rank {
            i += 1;
        } else {
            j += 1;
        }
    }
}

/// How a candidate pair is judged.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PairCheck {
    /// Replay every candidate: the reference the tests hold the window test to.
    #[cfg_attr(not(test), allow(dead_code))]
    ReplayEvery,
    /// The window test where both timelines are monotone, else a replay (module docs).
    WindowsWhereMonotone,
}

/// A token whose timeline has a given first symbol `l` for a while (its window for `l`): what
/// the scan reads of it, 16 bytes.
#[derive(Clone, Copy)]
struct RightSide {
    /// The highest next rank while `l` is first; for a monotone timeline, the rank of the merge
    /// that absorbs `l` (`x_R`).
    exit: u32,
    /// One past the rank of the merge that made `l` first (`e_R + 1`); 0 when the timeline
    /// starts with `l`.
    enter_after: u32,
    /// The token's place in the forbidden sets' order (`rank` of [`build_priority_timeline`]).
    rank: u32,
    monotone: bool,
}

/// The tokens whose timeline has a given first symbol, by [`RightSide::exit`] descending, and
/// beside each its whole timeline, for a replay: `steps[spans[k].0..spans[k].1]`.
struct StartingWith {
    entries: Vec<RightSide>,
    spans: Vec<(u32, u32)>,
    steps: Vec<Step>,
}

/// Forbidden next tokens of every emittable token under priority BPE (see module docs).
/// Hands every token's forbidden set, over the `rank`s of its tokens and encoded by the workers,
/// to `sink`, in token order, as the workers finish them: only the chunks not yet handed over
/// are held, never every token's set at once.
pub(super) fn build_priority_timeline(
    table: &MergeTable,
    words: &Derivations,
    rank: &[u32],
    check: PairCheck,
    mut sink: impl FnMut(u32, &EncodedSet),
) {
    let n = words.emittable.len();
    // merges by left part, and emittable tokens by the first symbols of their timelines.
    let mut by_left: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    for ((l, r), (rank, _)) in table.iter() {
        by_left[l as usize].push((r, rank));
    }
    // Tokens by the first symbols of their timelines, with the highest next rank seen while
    // that symbol was first; sorted by it, descending. The boundary `(r, l)` of rank `β` can
    // only fire while `β ≤ q` for the right side's next rank `q`, so a scan stops at the first
    // token whose highest `q` under `l` is below `β`.
    let mut starting_with: Vec<Vec<(RightSide, u32)>> = vec![Vec::new(); n];
    for t in 0..n as u32 {
        let timeline = words.timeline(t);
        let mut i = 0;
        while i < timeline.len() {
            let l = timeline[i].first;
            let enter_after = if i == 0 { 0 } else { timeline[i - 1].next_rank + 1 };
            let mut exit = 0;
            while i < timeline.len() && timeline[i].first == l {
                exit = exit.max(timeline[i].next_rank);
                i += 1;
            }
            let side = RightSide { exit, enter_after, rank: rank[t as usize], monotone: words.monotone[t as usize] };
            starting_with[l as usize].push((side, t));
        }
    }
    // The right sides' timelines copied next to each list, in its order: a replay then reads
    // them forwards instead of jumping across all tokens' timelines (a cache miss per
    // candidate).
    let starting_with: Vec<StartingWith> = starting_with
        .into_iter()
        .map(|mut list| {
            list.sort_unstable_by(|(a, s), (b, t)| (b.exit, t).cmp(&(a.exit, s)));
            let mut steps = Vec::with_capacity(list.iter().map(|&(_, t)| words.timeline(t).len()).sum());
            let mut spans = Vec::with_capacity(list.len());
            for &(_, t) in &list {
                let start = steps.len() as u32;
                steps.extend_from_slice(words.timeline(t));
                spans.push((start, steps.len() as u32));
            }
            StartingWith { entries: list.into_iter().map(|(side, _)| side).collect(), spans, steps }
        })
        .collect();
    let work = |range: std::ops::Range<usize>| -> Vec<EncodedSet> {
        // The forbidden set being found, as a bitset over ranks: a membership test before each
        // replay, and read back in ascending order without a sort.
        let mut found = vec![0u64; n.div_ceil(64)];
        let mut touched: Vec<u32> = Vec::new();
        let mut out = Vec::with_capacity(range.len());
        for t1 in range {
            let left = words.timeline(t1 as u32);
            let windows = check == PairCheck::WindowsWhereMonotone && words.monotone[t1];
            let mut i = 0;
            while i < left.len() {
                // The window where `r` is the left side's last symbol, the rank of the merge that
                // opened it (`e_L`, 0 for none) and its highest next rank (`x_L` when monotone):
                // the boundary can only fire while `β < x_L`.
                let r = left[i].last;
                let enter = if i == 0 { 0 } else { left[i - 1].next_rank };
                let mut high = 0;
                while i < left.len() && left[i].last == r {
                    high = high.max(left[i].next_rank);
                    i += 1;
                }
                for &(l, beta) in &by_left[r as usize] {
                    if beta >= high {
                        continue;
                    }
                    let list = &starting_with[l as usize];
                    for (k, side) in list.entries.iter().enumerate() {
                        if side.exit < beta {
                            break;
                        }
                        let (word, bit) = (side.rank as usize / 64, 1u64 << (side.rank % 64));
                        if found[word] & bit != 0 {
                            continue;
                        }
                        let fires = if windows && side.monotone {
                            high >= side.enter_after && side.exit >= enter
                        } else {
                            let (start, end) = list.spans[k];
                            boundary_fires(left, &list.steps[start as usize..end as usize], r, l, beta)
                        };
                        if fires {
                            if found[word] == 0 {
                                touched.push(word as u32);
                            }
                            found[word] |= bit;
                        }
                    }
                }
            }
            // The touched words in order: sorted when few, else found by a scan of all words;
            // then the set bits as runs of consecutive ranks, clearing `found` for the next token.
            if touched.len() * 32 < found.len() {
                touched.sort_unstable();
            } else {
                touched.clear();
                touched.extend((0..found.len() as u32).filter(|&w| found[w as usize] != 0));
            }
            let mut runs: Vec<(u32, u32)> = Vec::new();
            for &w in &touched {
                let mut bits = std::mem::take(&mut found[w as usize]);
                while bits != 0 {
                    let zeros = bits.trailing_zeros();
                    let ones = (bits >> zeros).trailing_ones();
                    let (first, last) = (w * 64 + zeros, w * 64 + zeros + ones - 1);
                    match runs.last_mut() {
                        Some(run) if run.1 + 1 == first => run.1 = last,
                        _ => runs.push((first, last)),
                    }
                    bits = if zeros + ones == 64 { 0 } else { bits & (u64::MAX << (zeros + ones)) };
                }
            }
            touched.clear();
            out.push(EncodedSet::from_rank_runs(n, runs));
        }
        out
    };
    // Small chunks taken in order: a worker that races ahead leaves few chunks waiting for
    // their turn to be handed over.
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).clamp(1, 16);
    let chunk = n.div_ceil(threads * 64).max(1);
    let ranges: Vec<_> = (0..n).step_by(chunk).map(|s| s..(s + chunk).min(n)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (done, finished) = std::sync::mpsc::channel::<(usize, Vec<EncodedSet>)>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let done = done.clone();
            let (next, ranges, work) = (&next, &ranges, &work);
            scope.spawn(move || loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(r) = ranges.get(k) else { break };
                if done.send((k, work(r.clone()))).is_err() {
                    break;
                }
            });
        }
        drop(done);
        let mut waiting: FxHashMap<usize, Vec<EncodedSet>> = FxHashMap::default();
        let mut turn = 0;
        for (k, sets) in finished {
            waiting.insert(k, sets);
            while let Some(sets) = waiting.remove(&turn) {
                for (i, f) in sets.into_iter().enumerate() {
                    sink((ranges[turn].start + i) as u32, &f);
                }
                turn += 1;
            }
        }
        assert_eq!(turn, ranges.len(), "every chunk handed over");
    });
}
