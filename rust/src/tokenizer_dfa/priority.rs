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

use rustc_hash::FxHashMap;

use crate::tokenizer::bpe::{MergeTable, Step, NO_MERGE};
use crate::tokenizer::vocab::Vocabulary;

/// Each emittable token's derivation timeline, flattened.
pub(crate) struct Derivations {
    pub emittable: Vec<bool>,
    /// `steps[start[t]..start[t+1]]` is token `t`'s timeline (empty when not emittable).
    pub start: Vec<u32>,
    pub steps: Vec<Step>,
}

impl Derivations {
    pub(super) fn compute(vocab: &Vocabulary, table: &MergeTable) -> Derivations {
        let n = vocab.num_tokens();
        let mut emittable = vec![false; n];
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
                steps.extend(timeline);
            }
        }
        start.push(steps.len() as u32);
        Derivations { emittable, start, steps }
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

/// The hash forbidden sets are interned by (`ClassInterner` in the parent module).
pub(super) fn set_hash(set: &[u32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    set.hash(&mut h);
    h.finish()
}

/// The tokens whose timeline has a given first symbol: `(highest next rank while it is first,
/// token, range of its timeline in steps)`, by that rank descending.
struct StartingWith {
    entries: Vec<(u32, u32, u32, u32)>,
    steps: Vec<Step>,
}

/// Forbidden next tokens of every emittable token under priority BPE (see module docs).
/// Hands every token's forbidden set, as the ascending `rank`s of its tokens, with its
/// [`set_hash`], to `sink`, in token order,
/// as the workers finish them: only the chunks not yet handed over are held, never every
/// token's set at once (Llama 3: 380 M ids counted per token, 1.5 GB, against 115 M distinct).
pub(super) fn build_priority_timeline(
    table: &MergeTable,
    words: &Derivations,
    rank: &[u32],
    mut sink: impl FnMut(u32, &[u32], u64),
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
    let mut starting_with: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    for t in 0..n as u32 {
        let timeline = words.timeline(t);
        let mut i = 0;
        while i < timeline.len() {
            let l = timeline[i].first;
            let mut high = 0;
            while i < timeline.len() && timeline[i].first == l {
                high = high.max(timeline[i].next_rank);
                i += 1;
            }
            starting_with[l as usize].push((high, t));
        }
    }
    for list in &mut starting_with {
        list.sort_unstable_by(|a, b| b.cmp(a));
    }
    // The right sides' timelines copied next to each list, in its order: a scan then reads
    // them forwards instead of jumping across all tokens' timelines (a cache miss per
    // candidate, ~380 M candidates for Llama 3).
    let starting_with: Vec<StartingWith> = starting_with
        .into_iter()
        .map(|list| {
            let mut steps = Vec::with_capacity(list.iter().map(|&(_, t)| words.timeline(t).len()).sum());
            let entries = list
                .into_iter()
                .map(|(high, t)| {
                    let start = steps.len() as u32;
                    steps.extend_from_slice(words.timeline(t));
                    (high, t, start, steps.len() as u32)
                })
                .collect();
            StartingWith { entries, steps }
        })
        .collect();
    let work = |range: std::ops::Range<usize>| -> Vec<(Vec<u32>, u64)> {
        // The forbidden set being found, as a bitset over ranks: a membership test before each
        // replay, and read back in ascending order without a sort.
        let mut found = vec![0u64; n.div_ceil(64)];
        let mut touched: Vec<u32> = Vec::new();
        let mut out = Vec::with_capacity(range.len());
        for t1 in range {
            let left = words.timeline(t1 as u32);
            let mut i = 0;
            while i < left.len() {
                // The window where `r` is the left side's last symbol, and its highest next rank:
                // the boundary can only fire while `β < p`.
                let r = left[i].last;
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
                    for &(q_high, t2, start, end) in &list.entries {
                        if q_high < beta {
                            break;
                        }
                        let r2 = rank[t2 as usize];
                        let (word, bit) = (r2 as usize / 64, 1u64 << (r2 % 64));
                        if found[word] & bit != 0 {
                            continue;
                        }
                        if boundary_fires(left, &list.steps[start as usize..end as usize], r, l, beta) {
                            if found[word] == 0 {
                                touched.push(word as u32);
                            }
                            found[word] |= bit;
                        }
                    }
                }
            }
            // The touched words in order: sorted when few, else found by a scan of all words.
            if touched.len() * 32 < found.len() {
                touched.sort_unstable();
            } else {
                touched.clear();
                touched.extend((0..found.len() as u32).filter(|&w| found[w as usize] != 0));
            }
            let mut f = Vec::with_capacity(touched.iter().map(|&w| found[w as usize].count_ones() as usize).sum());
            for &w in &touched {
                let mut bits = std::mem::take(&mut found[w as usize]);
                while bits != 0 {
                    f.push(w * 64 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
            touched.clear();
            let hash = set_hash(&f);
            out.push((f, hash));
        }
        out
    };
    // Small chunks taken in order: a worker that races ahead leaves few chunks waiting for
    // their turn to be handed over.
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).clamp(1, 16);
    let chunk = n.div_ceil(threads * 64).max(1);
    let ranges: Vec<_> = (0..n).step_by(chunk).map(|s| s..(s + chunk).min(n)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (done, finished) = std::sync::mpsc::channel::<(usize, Vec<(Vec<u32>, u64)>)>();
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
        let mut waiting: FxHashMap<usize, Vec<(Vec<u32>, u64)>> = FxHashMap::default();
        let mut turn = 0;
        for (k, sets) in finished {
            waiting.insert(k, sets);
            while let Some(sets) = waiting.remove(&turn) {
                for (i, (f, hash)) in sets.into_iter().enumerate() {
                    sink((ranges[turn].start + i) as u32, &f, hash);
                }
                turn += 1;
            }
        }
        assert_eq!(turn, ranges.len(), "every chunk handed over");
    });
}
