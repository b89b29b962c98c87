//! The token groups of a text state: the tokens whose walk from it stays alive, grouped by
//! (target text state, class), each group's tokens ascending.
//!
//! Every search of a pre-tokenized guide works group by group, so a text state's groups are
//! made once, from the `(token, target)` pairs of one trie walk. A *wide* text state — a JSON
//! string's contents on Llama 3 — has ~120,000 such pairs in ~36,000 groups; sorting them
//! took about half of its grouping time (~4 of 9 ms), and a glaive schema has ~30 wide text
//! states. So a wide walk is grouped without a comparison sort: its targets are written into
//! a per-token array and read back in the order of a precomputed list of every token by
//! (class, id), where a class's run only needs a (small) sort when its tokens reach more than
//! one target. A narrow walk is sorted, which is cheaper than a pass over the vocabulary.
//!
//! # Invariants
//! * Each group's tokens are ascending and non-empty; every `(token, target)` pair given is in
//!   exactly one group, that of `(target, class(token))`, and no two groups share that key.
//! * The group order is unspecified (it differs between the two ways of grouping).
//! * [`Grouper::target`] is all `DEAD` between calls.

use std::ops::Range;

use crate::regex::byte_dfa::DEAD;

/// Token transitions from one text state with the same (target text state, class).
pub(super) struct Group {
    pub(super) to: u32,
    pub(super) class: u32,
    tokens: Range<u32>,
}

/// The groups of one text state (see the module docs).
pub(super) struct TokenGroups {
    pub(super) groups: Vec<Group>,
    tokens: Box<[u32]>,
}

impl TokenGroups {
    /// The ascending tokens of `group` (one of `self.groups`).
    #[inline]
    pub(super) fn tokens(&self, group: &Group) -> &[u32] {
        &self.tokens[group.tokens.start as usize..group.tokens.end as usize]
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.groups.len() * std::mem::size_of::<Group>() + self.tokens.len() * 4
    }
}

/// Every token by (class, id), with the end of each class's run.
struct ClassOrder {
    tokens: Box<[u32]>,
    runs: Vec<(u32, u32)>,
}

/// Groups the walks of one guide's text states; reuses its per-token scratch between them.
pub(super) struct Grouper<F: Fn(u32) -> u32> {
    num_tokens: usize,
    class_of: F,
    /// Made on the first wide walk.
    order: Option<ClassOrder>,
    /// Per token, its target in the walk being grouped (`DEAD` otherwise).
    target: Vec<u32>,
}

impl<F: Fn(u32) -> u32> Grouper<F> {
    /// For tokens `0..num_tokens` whose class is `class_of(token)`.
    pub(super) fn new(num_tokens: usize, class_of: F) -> Grouper<F> {
        Grouper { num_tokens, class_of, order: None, target: Vec::new() }
    }

    /// The groups of the `(token, target)` pairs of one walk (each token at most once, every
    /// target not `DEAD`).
    pub(super) fn group(&mut self, pairs: &[(u32, u32)]) -> TokenGroups {
        // The pass over every token costs about as much as sorting a sixteenth of them.
        if pairs.len() >= 1024 && pairs.len() >= self.num_tokens / 16 {
            self.group_wide(pairs)
        } else {
            self.group_sorted(pairs)
        }
    }

    fn group_sorted(&self, pairs: &[(u32, u32)]) -> TokenGroups {
        let mut triples: Vec<(u32, u32, u32)> = pairs.iter().map(|&(t, to)| (to, (self.class_of)(t), t)).collect();
        triples.sort_unstable();
        let mut out = TokenGroups { groups: Vec::new(), tokens: triples.iter().map(|x| x.2).collect() };
        let mut start = 0;
        for run in triples.chunk_by(|a, b| a.0 == b.0 && a.1 == b.1) {
            let end = start + run.len() as u32;
            out.groups.push(Group { to: run[0].0, class: run[0].1, tokens: start..end });
            start = end;
        }
        out
    }

    fn group_wide(&mut self, pairs: &[(u32, u32)]) -> TokenGroups {
        let num_tokens = self.num_tokens;
        let class_of = &self.class_of;
        let order = self.order.get_or_insert_with(|| class_order(num_tokens, class_of));
        if self.target.is_empty() {
            self.target = vec![DEAD; num_tokens];
        }
        for &(t, to) in pairs {
            self.target[t as usize] = to;
        }
        let mut out = TokenGroups { groups: Vec::new(), tokens: Box::new([]) };
        let mut tokens: Vec<u32> = Vec::with_capacity(pairs.len());
        let mut run: Vec<(u32, u32)> = Vec::new();
        let mut start = 0usize;
        for &(class, end) in &order.runs {
            run.clear();
            for &t in &order.tokens[start..end as usize] {
                let to = std::mem::replace(&mut self.target[t as usize], DEAD);
                if to != DEAD {
                    run.push((to, t));
                }
            }
            start = end as usize;
            if run.windows(2).any(|w| w[0].0 != w[1].0) {
                run.sort_unstable();
            }
            for same in run.chunk_by(|a, b| a.0 == b.0) {
                let first = tokens.len() as u32;
                tokens.extend(same.iter().map(|x| x.1));
                out.groups.push(Group { to: same[0].0, class, tokens: first..tokens.len() as u32 });
            }
        }
        debug_assert_eq!(tokens.len(), pairs.len(), "every pair's token is in the class order once");
        out.tokens = tokens.into_boxed_slice();
        out
    }
}

/// Tokens `0..num_tokens` by (class, id): a counting sort on the classes, whose values are
/// dense from 0 except for a few reserved ones near `u32::MAX`.
fn class_order(num_tokens: usize, class_of: &impl Fn(u32) -> u32) -> ClassOrder {
    let classes: Vec<u32> = (0..num_tokens as u32).map(class_of).collect();
    let mut distinct: Vec<u32> = classes.iter().copied().filter(|&c| c as usize >= num_tokens).collect();
    distinct.sort_unstable();
    distinct.dedup();
    // Slot of a class: itself when below `num_tokens`, else after them by rank.
    let slot = |c: u32| {
        if (c as usize) < num_tokens {
            c as usize
        } else {
            num_tokens + distinct.binary_search(&c).expect("listed")
        }
    };
    let mut count = vec![0u32; num_tokens + distinct.len() + 1];
    for &c in &classes {
        count[slot(c) + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut runs = Vec::new();
    for s in 0..count.len() - 1 {
        if count[s + 1] > count[s] {
            let class = if s < num_tokens { s as u32 } else { distinct[s - num_tokens] };
            runs.push((class, count[s + 1]));
        }
    }
    let mut tokens = vec![0u32; num_tokens];
    for (t, &c) in classes.iter().enumerate() {
        let at = &mut count[slot(c)];
        tokens[*at as usize] = t as u32;
        *at += 1;
    }
    ClassOrder { tokens: tokens.into_boxed_slice(), runs }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::random::SplitMix64;

    /// Both ways of grouping give the same groups as a direct grouping of the pairs, on walks
    /// narrow and wide, with classes that are dense, reserved (near `u32::MAX`) or shared.
    #[test]
    fn groups_equal_a_direct_grouping() {
        let mut rng = SplitMix64::new(11);
        for round in 0..60 {
            let num_tokens = 1 + rng.below(3000);
            let num_classes = 1 + rng.below(if round % 2 == 0 { 8 } else { num_tokens });
            let classes: Vec<u32> = (0..num_tokens)
                .map(
                    |_| if rng.one_in(10) { u32::MAX - 3 - rng.below(2) as u32 } else { rng.below(num_classes) as u32 },
                )
                .collect();
            let mut grouper = Grouper::new(num_tokens, |t: u32| classes[t as usize]);
            for _ in 0..4 {
                let density = 1 + rng.below(4);
                let targets = 1 + rng.below(5);
                let mut pairs: Vec<(u32, u32)> = Vec::new();
                for t in 0..num_tokens as u32 {
                    if rng.below(4) < density {
                        pairs.push((t, rng.below(targets) as u32 * 7));
                    }
                }
                let mut want: Vec<(u32, u32, Vec<u32>)> = Vec::new();
                let mut sorted = pairs.clone();
                sorted.sort_unstable_by_key(|&(t, to)| (to, classes[t as usize], t));
                for run in sorted.chunk_by(|a, b| a.1 == b.1 && classes[a.0 as usize] == classes[b.0 as usize]) {
                    want.push((run[0].1, classes[run[0].0 as usize], run.iter().map(|x| x.0).collect()));
                }
                // A random order of the pairs, as a trie walk gives them.
                for i in (1..pairs.len()).rev() {
                    pairs.swap(i, rng.below(i + 1));
                }
                let wide = pairs.len() >= 1024 && pairs.len() >= num_tokens / 16;
                let got = grouper.group(&pairs);
                let mut got: Vec<(u32, u32, Vec<u32>)> =
                    got.groups.iter().map(|g| (g.to, g.class, got.tokens(g).to_vec())).collect();
                got.sort_unstable();
                assert_eq!(got, want, "round {round}, wide {wide}");
                assert!(grouper.target.iter().all(|&x| x == DEAD), "the scratch is reset");
            }
        }
    }

    #[test]
    fn the_class_order_lists_every_token_once_by_class_then_id() {
        let classes = [3u32, u32::MAX - 3, 0, 3, u32::MAX, 0, 1];
        let order = class_order(classes.len(), &|t: u32| classes[t as usize]);
        assert_eq!(&*order.tokens, &[2, 5, 6, 0, 3, 1, 4]);
        assert_eq!(order.runs, vec![(0, 2), (1, 3), (3, 5), (u32::MAX - 3, 6), (u32::MAX, 7)]);
    }
}
