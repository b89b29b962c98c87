//! Token groups: the tokens from one text state bucketed by successor `(target text state,
//! class)`, the unit a liveness search expands and a first-token set is made from.
//!
//! A text state's groups come from one trie walk ([`Walked`]), or, when its regex state loops
//! on a slice's characters, from the slice's shared groups plus a walk of the few tokens that
//! leave the slice ([`crate::lazy::slice`]). Either way the groups hold the same tokens with the
//! same successors; only their order inside one target may differ, which changes how a search
//! explores, never an answer.
//!
//! # Invariants
//! * Every token of the trie whose walk from the text state survives is in exactly one group.
//! * Groups come in order of their target's distance to acceptance (then the target's id): a
//!   search tries the ways out first.
//!
//! # Costs
//! Grouping is a counting sort by target (a wide state has ~100,000 tokens but a few hundred
//! targets) and small sorts of plain integers within each target; a wide state walked in full
//! has groups of ~1 MB, which is why they live in a bounded cache ([`GroupCache`]) and not in
//! the memo. A state that takes a slice stores its targets and refers to the slice's groups
//! (~20,000 for a JSON string's contents) instead of copying them: copying cost ~0.15 ms and
//! ~0.5 MB per such state, the largest share of its first visit after the liveness work.

use std::ops::Range;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::slice::{SliceGroups, SliceUse};
use super::text::{TextId, TextKey};
use crate::limits::LAZY_GROUP_CACHE_BYTES;
use crate::util::bitset;
use crate::util::concurrent::BoundedCache;

/// Tokens from one text state with the same successor `(target text state, class)`.
pub(crate) struct Group {
    pub(crate) to: TextId,
    pub(crate) class: u32,
    tokens: Range<u32>,
    /// Whether `tokens` index the slice's shared tokens rather than the state's own.
    shared: bool,
}

impl Group {
    /// Whether the group comes from the slice (its tokens are in [`Groups::slice_bits`]).
    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }
}

/// One target of a text state's groups: its slice targets' groups, then its own.
struct Target {
    to: TextId,
    /// The slice targets mapped to it (a range of [`Groups::slice_targets`]).
    slice_targets: Range<u32>,
    /// Its groups from the walk (a range of [`Groups::own`]).
    own: Range<u32>,
}

/// A text state's groups, in order of the target's distance to acceptance.
///
/// Stored by target: a wide state taking a slice has ~20,000 groups over ~150 targets, nearly
/// all of them the slice's, which are read from the slice (shared by every guide of the
/// tokenizer) instead of being copied per text state.
pub(crate) struct Groups {
    targets: Box<[Target]>,
    /// `starts[i]`: the index of target `i`'s first group; one more entry, the number of groups.
    starts: Box<[u32]>,
    slice_targets: Box<[u32]>,
    /// `(class, range of tokens)`.
    own: Box<[(u32, Range<u32>)]>,
    tokens: Box<[u32]>,
    shared: Option<Arc<SliceGroups>>,
    /// How the state takes the slice (maps the slice's text states to the guide's).
    slice_use: Option<SliceUse>,
    /// The slice's targets no target of the walk maps to (where the regex dies, a counted use
    /// past its count): their tokens are not the state's.
    unmapped: Box<[u32]>,
}

/// The groups of one target (see [`Groups::by_target`]).
pub(crate) struct TargetGroups<'a> {
    groups: &'a Groups,
    /// Its index among the targets.
    index: usize,
    target: &'a Target,
}

impl<'a> TargetGroups<'a> {
    /// Its groups: the slice's, then the walk's.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Group> + 'a {
        let this = TargetGroups { groups: self.groups, index: self.index, target: self.target };
        self.slice_targets().iter().flat_map(move |&j| this.slice_groups(j)).chain(self.own())
    }

    /// The slice's targets mapped to it.
    pub(crate) fn slice_targets(&self) -> &'a [u32] {
        let range = &self.target.slice_targets;
        &self.groups.slice_targets[range.start as usize..range.end as usize]
    }

    /// The groups of slice target `j` (one of [`TargetGroups::slice_targets`]), in the slice's
    /// order.
    pub(crate) fn slice_groups(&self, j: u32) -> impl Iterator<Item = Group> + 'a {
        let to = self.target.to;
        let slice = self.groups.shared.as_deref().expect("slice targets come with a slice");
        slice.groups_of(j).map(move |(class, tokens)| Group { to, class, tokens, shared: true })
    }

    /// Its groups from the walk.
    pub(crate) fn own(&self) -> impl Iterator<Item = Group> + 'a {
        let to = self.target.to;
        let own = &self.target.own;
        self.groups.own[own.start as usize..own.end as usize].iter().map(move |(class, tokens)| Group {
            to,
            class: *class,
            tokens: tokens.clone(),
            shared: false,
        })
    }

    pub(crate) fn len(&self) -> usize {
        (self.groups.starts[self.index + 1] - self.groups.starts[self.index]) as usize
    }
}

impl Groups {
    /// The number of groups.
    pub(crate) fn len(&self) -> usize {
        self.starts.last().map_or(0, |&n| n as usize)
    }

    pub(crate) fn tokens(&self, g: &Group) -> &[u32] {
        let all = match (g.shared, &self.shared) {
            (true, Some(shared)) => shared.tokens(),
            _ => &self.tokens,
        };
        &all[g.tokens.start as usize..g.tokens.end as usize]
    }

    /// The groups, target by target, in order.
    pub(crate) fn by_target(&self) -> impl Iterator<Item = TargetGroups<'_>> {
        self.targets.iter().enumerate().map(move |(index, target)| TargetGroups { groups: self, index, target })
    }

    /// Group `i` in order (targets in order, each target's groups as [`TargetGroups::iter`]);
    /// `None` past the last.
    pub(crate) fn get(&self, i: u32) -> Option<Group> {
        let t = self.starts.partition_point(|&s| s <= i).checked_sub(1)?;
        let target = self.targets.get(t)?;
        let mut k = i - self.starts[t];
        let to = target.to;
        if let Some(slice) = self.shared.as_deref() {
            for &j in &self.slice_targets[target.slice_targets.start as usize..target.slice_targets.end as usize] {
                let n = slice.num_groups_of(j) as u32;
                if k < n {
                    let (class, tokens) = slice.group_of(j, k as usize);
                    return Some(Group { to, class, tokens, shared: true });
                }
                k -= n;
            }
        }
        let (class, tokens) = self.own.get((target.own.start + k) as usize)?.clone();
        Some(Group { to, class, tokens, shared: false })
    }

    /// The tokens of the slice groups (every group [`Group::is_shared`]) as a new bitset, when
    /// the state takes one: a first-token set starts from it and takes out the dead groups'
    /// tokens, instead of gathering ~100,000 live ones group by group. Made from the slice's
    /// own bitset at each call rather than kept: kept, it cost a second 16 KB copy per sliced
    /// state, and 16 KB of the group cache.
    ///
    /// Where the state's unmapped slice targets hold most of the slice's tokens, the bitset is
    /// made from the mapped targets' tokens instead (each token is in one group, so both give
    /// the same bits). Why: late in a counted string (`{4,20}`), every token longer than the
    /// characters left is unmapped, and clearing them one by one cost ~100,000 bit clears per
    /// first-token set (`Github_hard/o31337`'s `ScreenName`, issue 18 on Llama 3).
    pub(crate) fn slice_bits(&self) -> Option<Box<[u32]>> {
        let slice = self.shared.as_deref()?;
        let tokens_of = |j: u32| {
            slice.groups_of(j).flat_map(|(_, range)| &slice.tokens()[range.start as usize..range.end as usize])
        };
        let unmapped_tokens: usize =
            (self.unmapped.iter()).map(|&j| slice.groups_of(j).map(|(_, r)| r.len()).sum::<usize>()).sum();
        if 2 * unmapped_tokens <= slice.tokens().len() {
            let mut bits: Box<[u32]> = slice.bits().into();
            for &j in self.unmapped.iter() {
                tokens_of(j).for_each(|&t| bitset::clear(&mut bits, t as usize));
            }
            return Some(bits);
        }
        let mut bits = vec![0u32; slice.bits().len()].into_boxed_slice();
        // `unmapped` is ascending: the targets between its entries are mapped.
        let mut unmapped = self.unmapped.iter().copied().peekable();
        for j in 0..slice.targets().len() as u32 {
            if unmapped.next_if_eq(&j).is_none() {
                tokens_of(j).for_each(|&t| bitset::set(&mut bits, t as usize));
            }
        }
        Some(bits)
    }

    /// The slice's groups with their certificates, and how the state takes the slice, when
    /// there are hubs (see `crate::lazy::slice::Certificates`).
    pub(crate) fn certified(&self) -> Option<(&SliceGroups, &SliceUse)> {
        match (self.shared.as_deref(), &self.slice_use) {
            (Some(slice), Some(slice_use)) if slice.num_hubs() > 0 => Some((slice, slice_use)),
            _ => None,
        }
    }

    /// The heap bytes this state's groups own (a slice's shared tokens are counted once, by
    /// the tokenizer's slice cache).
    fn heap_bytes(&self) -> usize {
        self.targets.len() * (std::mem::size_of::<Target>() + 4)
            + self.slice_targets.len() * 4
            + self.own.len() * 12
            + self.tokens.len() * 4
            + self.unmapped.len() * 4
    }

    /// Lays out the groups of a text state: its targets (`ids[i]` for the walk's target `i`) in
    /// order of `rank`, each with first the slice groups mapped to it, then the walk's groups.
    pub(crate) fn assemble(
        walked: Walked,
        ids: &[TextId],
        rank: impl Fn(u32) -> u32,
        shared: Option<Mapped>,
    ) -> Groups {
        // Many targets (a string's ~150) are sorted as plain integers (rank, id), the index
        // beside: the key closure, called twice per comparison, cost more than the sort itself.
        // A narrow state's few are sorted in place, which spares an allocation.
        let order: Vec<u32> = if ids.len() >= SORT_KEYED_MIN_TARGETS {
            let mut keyed: Vec<(u64, u32)> =
                (0..ids.len() as u32).map(|i| ((rank(i) as u64) << 32 | ids[i as usize] as u64, i)).collect();
            keyed.sort_unstable();
            keyed.into_iter().map(|(_, i)| i).collect()
        } else {
            let mut order: Vec<u32> = (0..ids.len() as u32).collect();
            order.sort_unstable_by_key(|&i| (rank(i), ids[i as usize]));
            order
        };
        let (tokens, walk_groups) = walked.sorted(&order);
        // The slice targets mapped to each target `i`: `mapped[from[i]..from[i + 1]]`, in the
        // order of `shared.targets` (one buffer: a vector per target cost an allocation each, for
        // the 100-250 targets of a JSON string's state).
        let pairs = shared.as_ref().map_or(&[][..], |s| &s.targets[..]);
        let mut from = vec![0u32; if shared.is_some() { ids.len() + 1 } else { 0 }];
        for &(i, _) in pairs {
            from[i as usize + 1] += 1;
        }
        for i in 1..from.len() {
            from[i] += from[i - 1];
        }
        let mut mapped = vec![0u32; pairs.len()];
        let mut fill = from.clone();
        for &(i, j) in pairs {
            mapped[fill[i as usize] as usize] = j;
            fill[i as usize] += 1;
        }
        let mut targets = Vec::with_capacity(order.len());
        let mut starts = Vec::with_capacity(order.len() + 1);
        let mut slice_targets = Vec::new();
        let mut own = Vec::with_capacity(walk_groups.len());
        let mut walk_groups = walk_groups.into_iter().peekable();
        let mut next = 0u32;
        for &i in &order {
            starts.push(next);
            let first_slice_target = slice_targets.len() as u32;
            if let Some(Mapped { slice, .. }) = &shared {
                for &j in &mapped[from[i as usize] as usize..from[i as usize + 1] as usize] {
                    slice_targets.push(j);
                    next += slice.num_groups_of(j) as u32;
                }
            }
            let first_own = own.len() as u32;
            while let Some((_, class, range)) = walk_groups.next_if(|g| g.0 == i) {
                own.push((class, range));
                next += 1;
            }
            targets.push(Target {
                to: ids[i as usize],
                slice_targets: first_slice_target..slice_targets.len() as u32,
                own: first_own..own.len() as u32,
            });
        }
        starts.push(next);
        let unmapped = shared.as_ref().map_or_else(Box::default, Mapped::unmapped);
        let (shared, slice_use) = match shared {
            Some(Mapped { slice, slice_use, .. }) => (Some(slice), Some(slice_use)),
            None => (None, None),
        };
        Groups {
            targets: targets.into(),
            starts: starts.into(),
            slice_targets: slice_targets.into(),
            own: own.into(),
            tokens,
            shared,
            slice_use,
            unmapped,
        }
    }
}

/// A slice's groups for a text state, and where its targets go: `(target of the walk, slice
/// target)` pairs.
pub(crate) struct Mapped {
    pub(crate) slice: Arc<SliceGroups>,
    pub(crate) slice_use: SliceUse,
    pub(crate) targets: Vec<(u32, u32)>,
}

impl Mapped {
    /// The slice targets no target of the walk maps to (where the regex dies, a counted use
    /// past its count, a slice target has none).
    fn unmapped(&self) -> Box<[u32]> {
        let mut mapped = vec![false; self.slice.targets().len()];
        self.targets.iter().for_each(|&(_, j)| mapped[j as usize] = true);
        (0..mapped.len() as u32).filter(|&j| !mapped[j as usize]).collect()
    }
}

/// Targets from which on [`Groups::assemble`] sorts them by keys computed once.
const SORT_KEYED_MIN_TARGETS: usize = 16;

/// A group of a walk: `(target, class, range of the sorted tokens)`.
pub(crate) type WalkGroup = (u32, u32, Range<u32>);

/// A trie walk with its targets numbered apart from any guide (see [`Walked::by_target_number`]):
/// `(target number, class << 32 | token)`, sorted.
pub(crate) type NumberedWalk = Vec<(u32, u64)>;

/// The tokens a trie walk met, by successor: targets numbered in the order met (neighbours in
/// the trie usually share one), and per token its target's number and class.
#[derive(Default)]
pub(crate) struct Walked {
    pub(crate) targets: Vec<TextKey>,
    local: FxHashMap<TextKey, u32>,
    last: Option<(TextKey, u32)>,
    /// `(target, class << 32 | token)`.
    found: Vec<(u32, u64)>,
    /// Whether `found` is sorted by target number of first push, then key.
    presorted: bool,
}

impl Walked {
    /// The number of target `to`, numbered now if new.
    pub(crate) fn target(&mut self, to: TextKey) -> u32 {
        match self.last {
            Some((k, i)) if k == to => i,
            _ => {
                let targets = &mut self.targets;
                let i = *self.local.entry(to).or_insert_with(|| {
                    targets.push(to);
                    targets.len() as u32 - 1
                });
                self.last = Some((to, i));
                i
            }
        }
    }

    pub(crate) fn push(&mut self, token: u32, to: TextKey, class: u32) {
        self.push_key(to, (class as u64) << 32 | token as u64);
    }

    /// The tokens pushed so far.
    pub(crate) fn num_tokens(&self) -> usize {
        self.found.len()
    }

    /// Room for `n` more pushes.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.found.reserve(n);
    }

    /// Room for `n` more targets: a sliced state numbers its slice's ~150 targets first, which
    /// grew the table seven times.
    pub(crate) fn reserve_targets(&mut self, n: usize) {
        self.targets.reserve(n);
        self.local.reserve(n);
    }

    /// Pushes `tokens`, each with target number `i` (of [`Walked::target`]) and `class`.
    pub(crate) fn push_group(&mut self, i: u32, class: u32, tokens: &[u32]) {
        self.found.extend(tokens.iter().map(|&t| (i, (class as u64) << 32 | t as u64)));
    }

    /// [`Walked::push`] of `class << 32 | token`.
    pub(crate) fn push_key(&mut self, to: TextKey, key: u64) {
        let i = self.target(to);
        self.found.push((i, key));
    }

    /// Marks the pushes so far as sorted by target, then key: [`Walked::sorted`] need not sort
    /// each target's tokens.
    pub(crate) fn presorted(&mut self) {
        debug_assert!(self.found.windows(2).all(|w| w[0].0 != w[1].0 || w[0].1 < w[1].1));
        self.presorted = true;
    }

    /// The pushes as `(number(target), key)`, sorted: what [`Walked::push_key`] and
    /// [`Walked::presorted`] replay for another text state with the same walk.
    pub(crate) fn by_target_number(&self, number: impl Fn(TextKey) -> u32) -> NumberedWalk {
        let numbers: Vec<u32> = self.targets.iter().map(|&k| number(k)).collect();
        let mut out: Vec<(u32, u64)> = self.found.iter().map(|&(i, key)| (numbers[i as usize], key)).collect();
        out.sort_unstable();
        out
    }

    /// The tokens bucketed by target in `order` (every target once), by (class, id) within each;
    /// and the groups as `(target, class, range of those tokens)`, in that order.
    pub(crate) fn sorted(self, order: &[u32]) -> (Box<[u32]>, Vec<WalkGroup>) {
        let n = self.targets.len();
        let mut count = vec![0u32; n];
        for &(i, _) in &self.found {
            count[i as usize] += 1;
        }
        let mut at = vec![0u32; n];
        let mut next = 0;
        for &i in order {
            at[i as usize] = next;
            next += count[i as usize];
        }
        let mut keys = vec![0u64; self.found.len()];
        for &(i, key) in &self.found {
            keys[at[i as usize] as usize] = key;
            at[i as usize] += 1;
        }
        let mut groups = Vec::with_capacity(n);
        let mut start = 0usize;
        for &i in order {
            let end = start + count[i as usize] as usize;
            let bucket = &mut keys[start..end];
            if !self.presorted {
                bucket.sort_unstable();
            }
            let mut from = start as u32;
            for run in bucket.chunk_by(|a, b| a >> 32 == b >> 32) {
                let to = from + run.len() as u32;
                groups.push((i, (run[0] >> 32) as u32, from..to));
                from = to;
            }
            start = end;
        }
        (keys.iter().map(|&k| k as u32).collect(), groups)
    }
}

/// The groups of recently walked text states, within [`LAZY_GROUP_CACHE_BYTES`] (see
/// [`BoundedCache`]): groups are recomputed on demand, identically.
pub(crate) struct GroupCache(BoundedCache<TextId, Arc<Groups>>);

impl Default for GroupCache {
    fn default() -> Self {
        GroupCache(BoundedCache::new(LAZY_GROUP_CACHE_BYTES))
    }
}

impl GroupCache {
    pub(crate) fn get(&self, z: TextId) -> Option<Arc<Groups>> {
        self.0.get(&z)
    }

    pub(crate) fn insert(&self, z: TextId, groups: Arc<Groups>) -> Arc<Groups> {
        let bytes = groups.heap_bytes();
        self.0.insert(z, groups, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lazy::text::TextSpace;
    use crate::pre_tokenizer::text_automaton::ContentTrie;
    use crate::regex::byte_dfa::ByteDfa;
    use crate::tokenizer_dfa::side::LONE;

    /// The text space of `[a-z]*` with no pre-tokenizer, whose text keys the tests make up.
    fn letters_space() -> TextSpace {
        let dfa = ByteDfa::from_regex("[a-z]*", crate::limits::DEFAULT_MAX_BYTE_DFA_STATES).unwrap();
        TextSpace::new(dfa, None, Arc::new(ContentTrie::default()), None).unwrap()
    }

    /// A text state's groups from a slice (one of its targets unmapped) and a walk of its own:
    /// read group by group (as searches do) or target by target (as first-token sets do), they
    /// are the same groups, and together they hold each token once with its target.
    #[test]
    fn groups_read_by_index_and_by_target_agree_and_hold_every_token_once() {
        let space = letters_space();
        let key = |q: u32| space.start().with_regex_state(q);
        let words = bitset::words_for(200);
        let mut in_slice = Walked::default();
        for t in 0..60u32 {
            let class = if t % 7 == 0 { LONE } else { t % 3 };
            in_slice.push(t, key(100 + t % 5), class);
        }
        let slice = Arc::new(SliceGroups::from_walk(in_slice, words));
        let mut walked = Walked::default();
        for t in 150..170u32 {
            walked.push(t, key(t % 3), t % 2);
        }
        // Slice targets 0..4 go to the walk's targets (two to the same one); 4 is unmapped.
        let targets: Vec<(u32, u32)> = (0..4u32).map(|j| (walked.target(key(j % 3)), j)).collect();
        let ids: Vec<TextId> = (0..walked.targets.len() as u32).map(|i| 10 + i).collect();
        let rank = |i: u32| (i * 7) % 3;
        let groups = Groups::assemble(
            walked,
            &ids,
            rank,
            Some(Mapped { slice: slice.clone(), slice_use: SliceUse::unmapped(), targets: targets.clone() }),
        );

        let view = |g: &Group| (g.to, g.class, groups.tokens(g).to_vec(), g.is_shared());
        let by_index: Vec<_> = (0..).map_while(|i| groups.get(i)).map(|g| view(&g)).collect();
        let by_target: Vec<_> =
            groups.by_target().flat_map(|t| t.iter().collect::<Vec<_>>()).map(|g| view(&g)).collect();
        assert_eq!(by_index, by_target);
        assert_eq!(groups.by_target().map(|t| t.len()).sum::<usize>(), by_index.len());
        let mut got: Vec<(TextId, u32)> =
            by_index.iter().flat_map(|(to, _, tokens, _)| tokens.iter().map(move |&t| (*to, t))).collect();
        got.sort_unstable();
        let walk_target = |k: TextKey| ids[(0..3).position(|q| key(q) == k).unwrap()];
        let mut want: Vec<(TextId, u32)> = (150..170u32).map(|t| (walk_target(key(t % 3)), t)).collect();
        for &(i, j) in &targets {
            let to = ids[i as usize];
            want.extend((0..60u32).filter(|t| slice.targets()[j as usize] == key(100 + t % 5)).map(|t| (to, t)));
        }
        want.sort_unstable();
        assert_eq!(got, want);
        let mut shared: Vec<u32> = got.iter().map(|&(_, t)| t).filter(|&t| t < 60).collect();
        shared.sort_unstable();
        let bits: Vec<u32> = bitset::iter_ones(&groups.slice_bits().unwrap()).map(|t| t as u32).collect();
        assert_eq!(bits, shared);
        // Groups come in order of rank, then id.
        let order: Vec<TextId> = groups.by_target().map(|t| t.iter().next().unwrap().to).collect();
        let mut sorted = order.clone();
        sorted.sort_by_key(|&id| (rank(id - 10), id));
        assert_eq!(order, sorted);
    }

    /// The slice's bitset for a state is its mapped targets' tokens, whether few or most of the
    /// slice's tokens are unmapped (taken out of the slice's bits, or put in from zero).
    #[test]
    fn slice_bits_hold_the_mapped_targets_tokens() {
        let space = letters_space();
        let key = |q: u32| space.start().with_regex_state(q);
        let words = bitset::words_for(200);
        let mut in_slice = Walked::default();
        for t in 0..100u32 {
            in_slice.push(t, key(100 + t % 5), t % 3);
        }
        let slice = Arc::new(SliceGroups::from_walk(in_slice, words));
        // Slice target `j` is `key(100 + j)`, holding the tokens `t` with `t % 5 == j`.
        for mapped in [vec![], vec![3], vec![0, 4], vec![1, 2, 3], vec![0, 1, 2, 3, 4]] {
            let mut walked = Walked::default();
            walked.push(150, key(0), 0);
            let targets: Vec<(u32, u32)> = mapped.iter().map(|&j| (walked.target(key(0)), j)).collect();
            let mapping = Mapped { slice: slice.clone(), slice_use: SliceUse::unmapped(), targets };
            let groups = Groups::assemble(walked, &[10], |_| 0, Some(mapping));
            let bits: Vec<u32> = bitset::iter_ones(&groups.slice_bits().unwrap()).map(|t| t as u32).collect();
            let want: Vec<u32> = (0..100u32).filter(|t| mapped.contains(&(t % 5))).collect();
            assert_eq!(bits, want, "mapped targets {mapped:?}");
        }
    }
}
