//! The token index of `decode⁻¹(L)` — what Outlines builds, and the first half of the
//! CartesianMerge product.
//!
//! For a byte DFA state `q` and a token `t`, `t` is a transition from `q` when running `t`'s
//! bytes from `q` stays alive; the target is where it ends. We find all of them for one state
//! by walking a byte trie of the vocabulary alongside the DFA: a trie edge whose byte is dead in
//! the DFA prunes every token below it, so the cost per state is the size of the *live* part
//! of the trie, not the vocabulary's total length.

use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::util::byte_set::ByteSet;

/// Fewest children for which [`TokenTrie::for_each_walk_narrowed`] asks which bytes a state
/// takes; below it, trying each child costs about as much as asking.
pub const NARROWED_MIN_CHILDREN: usize = 24;

/// A byte trie of token strings. Node 0 is the root.
///
/// Stored flat, nodes numbered in depth-first preorder: node `n`'s children are
/// `edge_bytes/edge_nodes[edges[n]..edges[n + 1]]` (sorted by byte) and its tokens
/// `token_ids[tokens[n]..tokens[n + 1]]`. A walk then reads memory mostly forwards, which
/// matters for pre-tokenized guides: they walk a 128k-token trie once per text state.
///
/// Per node, its parent, the byte into it and the end of its subtree (one past its last node in
/// preorder) let [`TokenTrie::for_each_walk_below`] walk the paths to chosen subtrees only.
#[derive(Clone, Debug)]
pub struct TokenTrie {
    edges: Vec<u32>,
    edge_bytes: Vec<u8>,
    edge_nodes: Vec<u32>,
    tokens: Vec<u32>,
    token_ids: Vec<u32>,
    parent: Vec<u32>,
    byte_in: Vec<u8>,
    subtree_end: Vec<u32>,
}

impl Default for TokenTrie {
    fn default() -> TokenTrie {
        TokenTrie::new(std::iter::empty())
    }
}

impl TokenTrie {
    /// A trie of the given `(token, bytes)` pairs (tokens with empty bytes are ignored; tokens
    /// with the same bytes are listed at their node in the order given).
    ///
    /// Built from the byte strings in lexicographic order, where preorder is creation order:
    /// each string adds one node per byte past its common prefix with the previous one. No
    /// per-node allocation (a nested-vector build took ~76 ms for Llama 3's 128k tokens).
    pub fn new<'a>(tokens: impl IntoIterator<Item = (u32, &'a [u8])>) -> TokenTrie {
        let words: Vec<(&'a [u8], u32)> =
            tokens.into_iter().filter(|(_, b)| !b.is_empty()).map(|(t, b)| (b, t)).collect();
        // Sorted by bytes, equal strings in their given order. Compared by their first 8 bytes
        // as one integer first (big-endian, zero-padded: never out of the bytes' order, since
        // a padding zero is only ever below or equal to a real byte), so that most comparisons
        // read no token's bytes: comparing the slices themselves, one pointer chase each, cost
        // ~130 M instructions on Llama 3's 128k tokens, 14 % of a process's first lazy compile.
        let head = |bytes: &[u8]| {
            let mut head = [0u8; 8];
            let n = bytes.len().min(8);
            head[..n].copy_from_slice(&bytes[..n]);
            u64::from_be_bytes(head)
        };
        let mut order: Vec<(u64, u32)> = words.iter().enumerate().map(|(i, w)| (head(w.0), i as u32)).collect();
        order.sort_unstable();
        // Equal heads (a common 8-byte prefix, or a string and itself with zeros appended), in
        // their given order so far, by bytes: a stable sort keeps equal strings in that order.
        for run in order.chunk_by_mut(|a, b| a.0 == b.0).filter(|run| run.len() > 1) {
            run.sort_by(|a, b| words[a.1 as usize].0.cmp(words[b.1 as usize].0));
        }
        let words: Vec<(&'a [u8], u32)> = order.iter().map(|&(_, i)| words[i as usize]).collect();
        // Per node in preorder: its parent, the byte into it, and its depth (a path stack).
        let mut parent: Vec<u32> = vec![u32::MAX];
        let mut byte_in: Vec<u8> = vec![0];
        let mut token_node: Vec<u32> = Vec::with_capacity(words.len());
        let mut path: Vec<u32> = vec![0];
        let mut previous: &[u8] = &[];
        for &(bytes, _) in &words {
            let common = bytes.iter().zip(previous).take_while(|(a, b)| a == b).count();
            path.truncate(common + 1);
            for &b in &bytes[common..] {
                let id = parent.len() as u32;
                parent.push(*path.last().expect("the root stays on the path"));
                byte_in.push(b);
                path.push(id);
            }
            token_node.push(*path.last().expect("a non-empty path"));
            previous = bytes;
        }
        let num_nodes = parent.len();
        // Children by parent, and tokens by node: counting sorts, stable, so children stay in
        // byte order and a node's tokens in the given order.
        let mut edges = vec![0u32; num_nodes + 1];
        for &p in &parent[1..] {
            edges[p as usize + 1] += 1;
        }
        for n in 0..num_nodes {
            edges[n + 1] += edges[n];
        }
        let mut edge_bytes = vec![0u8; num_nodes - 1];
        let mut edge_nodes = vec![0u32; num_nodes - 1];
        let mut at = edges.clone();
        for child in 1..num_nodes {
            let p = parent[child] as usize;
            edge_bytes[at[p] as usize] = byte_in[child];
            edge_nodes[at[p] as usize] = child as u32;
            at[p] += 1;
        }
        let mut tokens = vec![0u32; num_nodes + 1];
        for &n in &token_node {
            tokens[n as usize + 1] += 1;
        }
        for n in 0..num_nodes {
            tokens[n + 1] += tokens[n];
        }
        let mut token_ids = vec![0u32; words.len()];
        let mut at = tokens.clone();
        for (&(_, t), &n) in words.iter().zip(&token_node) {
            token_ids[at[n as usize] as usize] = t;
            at[n as usize] += 1;
        }
        // Preorder: a subtree ends where its last child's does.
        let mut subtree_end: Vec<u32> = (1..=num_nodes as u32).collect();
        for child in (1..num_nodes).rev() {
            let p = parent[child] as usize;
            subtree_end[p] = subtree_end[p].max(subtree_end[child]);
        }
        TokenTrie { edges, edge_bytes, edge_nodes, tokens, token_ids, parent, byte_in, subtree_end }
    }

    pub fn num_nodes(&self) -> usize {
        self.edges.len() - 1
    }

    #[inline]
    fn edge_range(&self, node: u32) -> std::ops::Range<usize> {
        self.edges[node as usize] as usize..self.edges[node as usize + 1] as usize
    }

    #[inline]
    fn tokens_at(&self, node: u32) -> &[u32] {
        &self.token_ids[self.tokens[node as usize] as usize..self.tokens[node as usize + 1] as usize]
    }

    /// Calls `f` for every token of the trie.
    pub fn for_each_token(&self, mut f: impl FnMut(u32)) {
        for &t in &self.token_ids {
            f(t);
        }
    }

    /// Walks the trie alongside any automaton: `step(state, byte)` gives the next state (`None`
    /// prunes the subtree), and `emit(token, state)` is called for every token whose whole
    /// walk stays alive. `step` may fail (a lazily built automaton reaching a limit).
    pub fn for_each_walk<S: Copy, E>(
        &self,
        start: S,
        step: impl FnMut(S, u8) -> Result<Option<S>, E>,
        emit: impl FnMut(u32, S),
    ) -> Result<(), E> {
        self.for_each_walk_narrowed(start, |_| ByteSet::ALL, step, emit)
    }

    /// [`TokenTrie::for_each_walk`] told which bytes a state may take: `takes(state)` holds
    /// every byte `step` accepts from `state` (it may hold more; `step` still decides).
    ///
    /// Why: a narrow state (inside a key literal, a number) takes a few bytes, yet the root has
    /// 256 children and its first levels dozens each, and `step` refused them one by one. A node
    /// with at least [`NARROWED_MIN_CHILDREN`] children now asks `takes` once and looks its few
    /// bytes up by binary search, or skips the others with a bit test. Children are visited in
    /// byte order either way, so tokens are emitted in the same order as by a plain walk.
    pub fn for_each_walk_narrowed<S: Copy, E>(
        &self,
        start: S,
        mut takes: impl FnMut(S) -> ByteSet,
        mut step: impl FnMut(S, u8) -> Result<Option<S>, E>,
        mut emit: impl FnMut(u32, S),
    ) -> Result<(), E> {
        self.walk_subtrees(&mut vec![(0, start)], &mut takes, &mut step, &mut emit)
    }

    /// The walk of [`TokenTrie::for_each_walk_narrowed`] below the `(node, state)` pairs of
    /// `stack` (their own tokens excluded), which it leaves empty.
    fn walk_subtrees<S: Copy, E>(
        &self,
        stack: &mut Vec<(u32, S)>,
        takes: &mut impl FnMut(S) -> ByteSet,
        step: &mut impl FnMut(S, u8) -> Result<Option<S>, E>,
        emit: &mut impl FnMut(u32, S),
    ) -> Result<(), E> {
        let mut visit = |e: usize, q: S, stack: &mut Vec<(u32, S)>| -> Result<(), E> {
            if let Some(next) = step(q, self.edge_bytes[e])? {
                let child = self.edge_nodes[e];
                for &t in self.tokens_at(child) {
                    emit(t, next);
                }
                if !self.edge_range(child).is_empty() {
                    stack.push((child, next));
                }
            }
            Ok(())
        };
        while let Some((node, q)) = stack.pop() {
            let range = self.edge_range(node);
            if range.len() < NARROWED_MIN_CHILDREN {
                for e in range {
                    visit(e, q, stack)?;
                }
                continue;
            }
            let taken = takes(q);
            if taken.len() * 4 <= range.len() {
                let bytes = &self.edge_bytes[range.clone()];
                for b in taken.iter() {
                    if let Ok(i) = bytes.binary_search(&b) {
                        visit(range.start + i, q, stack)?;
                    }
                }
            } else {
                for e in range {
                    if taken.contains(self.edge_bytes[e]) {
                        visit(e, q, stack)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// [`TokenTrie::for_each_walk_narrowed`] of the tokens of the subtrees of `roots` only:
    /// the paths from the trie's root to them are stepped once each, however many roots share
    /// them, and each root's subtree is walked as a full walk would walk it. `roots` must be
    /// ascending (preorder) and none in another's subtree, nor the trie's root.
    ///
    /// Why: the exit tokens of a slice (`crate::lazy::slice`) are a few thousand subtrees of
    /// this trie; walked as tries of their own they cost a copy per slice and process, and their
    /// groups repeated the prefixes they share.
    pub fn for_each_walk_below<S: Copy, E>(
        &self,
        roots: &[u32],
        start: S,
        mut takes: impl FnMut(S) -> ByteSet,
        mut step: impl FnMut(S, u8) -> Result<Option<S>, E>,
        mut emit: impl FnMut(u32, S),
    ) -> Result<(), E> {
        // The nodes from the root to the last root's parent, with their states (`None`: dead).
        let mut path: Vec<(u32, Option<S>)> = vec![(0, Some(start))];
        let mut chain: Vec<u32> = Vec::new();
        let mut stack = Vec::new();
        for &r in roots {
            debug_assert!(r != 0 && path.iter().all(|&(n, _)| n != r), "roots ascending, disjoint");
            while let Some(&(n, _)) = path.last().filter(|&&(n, _)| !(n <= r && r < self.subtree_end[n as usize])) {
                debug_assert!(n != 0, "the root holds every node");
                path.pop();
            }
            let (top, mut q) = *path.last().expect("the root stays on the path");
            chain.clear();
            let mut n = r;
            while n != top {
                chain.push(n);
                n = self.parent[n as usize];
            }
            for &n in chain.iter().rev() {
                q = match q {
                    Some(q) => step(q, self.byte_in[n as usize])?,
                    None => None,
                };
                if n != r {
                    path.push((n, q));
                }
            }
            if let Some(q) = q {
                for &t in self.tokens_at(r) {
                    emit(t, q);
                }
                stack.push((r, q));
                self.walk_subtrees(&mut stack, &mut takes, &mut step, &mut emit)?;
            }
        }
        Ok(())
    }

    /// The tokens of node `n`'s subtree, `n`'s own first: preorder numbers a subtree's nodes,
    /// and so its tokens, contiguously.
    pub fn subtree_tokens(&self, n: u32) -> &[u32] {
        let end = self.subtree_end[n as usize] as usize;
        &self.token_ids[self.tokens[n as usize] as usize..self.tokens[end] as usize]
    }

    /// [`TokenTrie::for_each_walk`] that also reports where walks die: `leave(state, byte,
    /// node)` for each edge `step` refuses, with the node it leads to, whose subtree's tokens
    /// ([`TokenTrie::subtree_tokens`]) leave there. Each node is visited once, in preorder, so
    /// this partitions the trie's tokens by where they leave in one pass over its arrays (token
    /// by token, the same took 12-32 ms on Llama 3's 128k tokens, chasing each token's bytes),
    /// and the nodes are left in ascending order: what [`TokenTrie::for_each_walk_below`] takes.
    pub fn for_each_walk_or_leave<S: Copy>(
        &self,
        start: S,
        mut step: impl FnMut(S, u8) -> Option<S>,
        mut emit: impl FnMut(u32, S),
        mut leave: impl FnMut(S, u8, u32),
    ) {
        // Edges still to take, with the state before them: the last pushed is the next in
        // preorder, so children are pushed in descending byte order.
        let mut stack: Vec<(usize, S)> = self.edge_range(0).rev().map(|e| (e, start)).collect();
        while let Some((e, q)) = stack.pop() {
            let child = self.edge_nodes[e];
            match step(q, self.edge_bytes[e]) {
                Some(next) => {
                    for &t in self.tokens_at(child) {
                        emit(t, next);
                    }
                    stack.extend(self.edge_range(child).rev().map(|e| (e, next)));
                }
                None => leave(q, self.edge_bytes[e], child),
            }
        }
    }

    /// Calls `emit(token, state)` for every token that spells a prefix of `bytes`, shortest
    /// first, with `step` run alongside as in [`TokenTrie::for_each_walk`] (`None` ends the
    /// walk). One trie edge per byte: the cost is `bytes.len()` binary searches at most, and
    /// `bytes` is not read past the longest token that spells a prefix of it (a caller may make
    /// its bytes on demand).
    pub fn for_each_prefix_of<S: Copy>(
        &self,
        bytes: impl IntoIterator<Item = u8>,
        start: S,
        mut step: impl FnMut(S, u8) -> Option<S>,
        mut emit: impl FnMut(u32, S),
    ) {
        let (mut node, mut state) = (0u32, start);
        for b in bytes {
            let range = self.edge_range(node);
            let Ok(i) = self.edge_bytes[range.clone()].binary_search(&b) else { return };
            let Some(next) = step(state, b) else { return };
            (node, state) = (self.edge_nodes[range.start + i], next);
            for &t in self.tokens_at(node) {
                emit(t, state);
            }
        }
    }

    /// Calls `emit(token, target)` for every token that is a transition from `state`.
    pub fn for_each_transition(&self, dfa: &ByteDfa, state: u32, mut emit: impl FnMut(u32, u32)) {
        self.for_each_walk(
            state,
            |q, b| {
                let next = dfa.next(q, b);
                Ok::<_, std::convert::Infallible>((next != DEAD).then_some(next))
            },
            &mut emit,
        )
        .unwrap_or_else(|never| match never {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::DEFAULT_MAX_BYTE_DFA_STATES as DEFAULT_MAX_STATES;

    /// On random vocabularies, [`TokenTrie::for_each_walk_or_leave`] emits each token whose
    /// bytes a DFA takes, with its end state and characters, and reports each other token once,
    /// at the state before the first byte the DFA refuses, and that byte: as a token-by-token
    /// run of the DFA finds them. [`TokenTrie::for_each_walk_below`] of the subtrees left walks
    /// their tokens as a full walk does.
    #[test]
    fn walk_or_leave_partitions_the_tokens_as_runs_token_by_token() {
        let dfa = ByteDfa::from_regex("(ab|c)*", DEFAULT_MAX_STATES).unwrap();
        let mut rng = crate::util::random::SplitMix64::new(9);
        for _ in 0..200 {
            let words: Vec<Vec<u8>> =
                (0..rng.below(60)).map(|_| (0..1 + rng.below(5)).map(|_| b"abcd"[rng.below(4)]).collect()).collect();
            let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, w.as_slice())));
            let (mut emitted, mut left, mut nodes) = (Vec::new(), Vec::new(), Vec::new());
            trie.for_each_walk_or_leave(
                dfa.start(),
                |q, b| Some(dfa.next(q, b)).filter(|&n| n != DEAD),
                |t, q| emitted.push((t, q)),
                |q, b, node| {
                    nodes.push(node);
                    left.extend(trie.subtree_tokens(node).iter().map(|&t| (t, q, b)))
                },
            );
            assert!(nodes.windows(2).all(|w| w[0] < w[1]), "left in ascending order");
            let (mut want_emitted, mut want_left) = (Vec::new(), Vec::new());
            for (t, w) in words.iter().enumerate() {
                let mut q = dfa.start();
                match w.iter().find_map(|&b| match dfa.next(q, b) {
                    DEAD => Some((q, b)),
                    next => {
                        q = next;
                        None
                    }
                }) {
                    Some((at, b)) => want_left.push((t as u32, at, b)),
                    None => want_emitted.push((t as u32, q)),
                }
            }
            // The subtrees left, walked by another DFA, give what its full walk gives of their
            // tokens (every subset of them: a slice walks the exits a regex state takes).
            let other = ByteDfa::from_regex("[abc]*(d[ab]?)?", DEFAULT_MAX_STATES).unwrap();
            let step = |q: u32, b: u8| Ok::<_, ()>(Some(other.next(q, b)).filter(|&n| n != DEAD));
            let mut full = Vec::new();
            trie.for_each_walk(other.start(), step, |t, q| full.push((t, q))).unwrap();
            for subset in [nodes.clone(), nodes.iter().copied().step_by(2).collect()] {
                let below: std::collections::HashSet<u32> =
                    subset.iter().flat_map(|&n| trie.subtree_tokens(n).iter().copied()).collect();
                let mut want: Vec<(u32, u32)> = full.iter().copied().filter(|(t, _)| below.contains(t)).collect();
                let mut got = Vec::new();
                trie.for_each_walk_below(&subset, other.start(), |_| ByteSet::ALL, step, |t, q| got.push((t, q)))
                    .unwrap();
                want.sort();
                got.sort();
                assert_eq!(got, want);
            }
            for list in [&mut emitted, &mut want_emitted] {
                list.sort();
            }
            for list in [&mut left, &mut want_left] {
                list.sort();
            }
            assert_eq!(emitted, want_emitted);
            assert_eq!(left, want_left);
        }
    }

    /// On random vocabularies (shared prefixes, duplicate strings, prefixes of others, zero
    /// bytes, common 8-byte heads), every token is found at its own bytes, in the order given,
    /// and only there.
    #[test]
    fn trie_lists_every_token_at_its_bytes() {
        let mut rng = crate::util::random::SplitMix64::new(5);
        for _ in 0..200 {
            let n = rng.below(60);
            let mut words: Vec<Vec<u8>> = Vec::new();
            for _ in 0..n {
                let len = rng.below(5);
                let mut word: Vec<u8> = (0..len).map(|_| b"\0abc\xff"[rng.below(5)]).collect();
                // Half of them past 8 bytes with a common head (sorted by their whole bytes),
                // and zero bytes (a head's padding) anywhere.
                if rng.below(2) == 0 {
                    word.splice(0..0, *b"ab\0ab\xffa");
                }
                words.push(word);
            }
            let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, w.as_slice())));
            let mut found: Vec<(Vec<u8>, u32)> = Vec::new();
            let mut stack: Vec<(u32, Vec<u8>)> = vec![(0, Vec::new())];
            let mut preorder = 0;
            while let Some((node, text)) = stack.pop() {
                assert_eq!(node, preorder, "nodes are numbered in preorder");
                preorder += 1;
                assert!(
                    node == 0 || !trie.tokens_at(node).is_empty() || !trie.edge_range(node).is_empty(),
                    "no dead node"
                );
                found.extend(trie.tokens_at(node).iter().map(|&t| (text.clone(), t)));
                let children: Vec<(u8, u32)> =
                    trie.edge_range(node).map(|e| (trie.edge_bytes[e], trie.edge_nodes[e])).collect();
                assert!(children.windows(2).all(|w| w[0].0 < w[1].0), "children sorted by byte");
                for &(b, child) in children.iter().rev() {
                    let mut t = text.clone();
                    t.push(b);
                    stack.push((child, t));
                }
            }
            assert_eq!(preorder as usize, trie.num_nodes());
            let mut want: Vec<(Vec<u8>, u32)> =
                words.iter().enumerate().filter(|(_, w)| !w.is_empty()).map(|(i, w)| (w.clone(), i as u32)).collect();
            want.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(found, want);
        }
    }

    /// On random vocabularies wide enough for both of its lookups (nodes with up to 200
    /// children), a narrowed walk emits the plain walk's tokens and states in the same order,
    /// whatever superset of `step`'s bytes `takes` gives (exact, padded, or every byte).
    #[test]
    fn narrowed_walk_emits_what_a_plain_walk_emits() {
        let mut rng = crate::util::random::SplitMix64::new(17);
        for round in 0..150 {
            let alphabet = 1 + rng.below(200);
            let words: Vec<Vec<u8>> = (0..rng.below(3000))
                .map(|_| (0..1 + rng.below(4)).map(|_| (rng.below(alphabet) * 7 % 256) as u8).collect())
                .collect();
            let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, w.as_slice())));
            // A random automaton over 5 states: each state takes a random share of the bytes.
            let share = [1, 2, 8, 64, 256][round % 5];
            let table: Vec<[Option<u8>; 256]> = (0..5)
                .map(|_| std::array::from_fn(|_| rng.below(256).lt(&share).then(|| rng.below(5) as u8)))
                .collect();
            let step = |q: u8, b: u8| Ok::<_, std::convert::Infallible>(table[q as usize][b as usize]);
            let exact =
                |q: u8| -> ByteSet { (0..=255u8).filter(|&b| table[q as usize][b as usize].is_some()).collect() };
            let padding: ByteSet = (0..rng.below(100)).map(|_| rng.below(256) as u8).collect();
            let mut plain = Vec::new();
            trie.for_each_walk(0u8, step, |t, q| plain.push((t, q))).unwrap();
            for takes in [
                &exact as &dyn Fn(u8) -> ByteSet,
                &|q| {
                    let mut set = exact(q);
                    set.union(&padding);
                    set
                },
                &|_| ByteSet::ALL,
            ] {
                let mut narrowed = Vec::new();
                trie.for_each_walk_narrowed(0u8, takes, step, |t, q| narrowed.push((t, q))).unwrap();
                assert_eq!(narrowed, plain, "round {round}");
            }
        }
    }

    /// On random vocabularies and strings, the prefix walk finds exactly the tokens that spell a
    /// prefix of the string, shortest first, and stops where `step` refuses a byte.
    #[test]
    fn prefix_walk_finds_the_tokens_spelling_prefixes() {
        let mut rng = crate::util::random::SplitMix64::new(11);
        for _ in 0..300 {
            let words: Vec<Vec<u8>> =
                (0..rng.below(40)).map(|_| (0..rng.below(5)).map(|_| b"abc"[rng.below(3)]).collect()).collect();
            let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, w.as_slice())));
            let text: Vec<u8> = (0..rng.below(7)).map(|_| b"abc"[rng.below(3)]).collect();
            let stop_at = rng.below(8);
            let mut got: Vec<(u32, usize)> = Vec::new();
            trie.for_each_prefix_of(
                text.iter().copied(),
                0usize,
                |n, _| (n < stop_at).then_some(n + 1),
                |t, n| got.push((t, n)),
            );
            assert!(got.windows(2).all(|w| w[0].1 <= w[1].1), "shortest first");
            let mut want: Vec<(u32, usize)> = words
                .iter()
                .enumerate()
                .filter(|(_, w)| !w.is_empty() && w.len() <= stop_at && text.starts_with(w))
                .map(|(i, w)| (i as u32, w.len()))
                .collect();
            want.sort_by_key(|&(t, n)| (n, t));
            got.sort_by_key(|&(t, n)| (n, t));
            assert_eq!(got, want, "words {words:?} text {text:?} stop {stop_at}");
        }
    }

    #[test]
    fn trie_walk_equals_per_token_walk() {
        let words: Vec<&[u8]> = vec![b"a", b"ab", b"abc", b"b", b"bc", b"c", b"ca", b"x", b""];
        let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, *w)));
        let dfa = ByteDfa::from_regex("(ab|c)*x?", DEFAULT_MAX_STATES).unwrap();
        for q in 0..dfa.num_states() as u32 {
            let mut got = Vec::new();
            trie.for_each_transition(&dfa, q, |t, to| got.push((t, to)));
            got.sort();
            let mut want: Vec<(u32, u32)> = words
                .iter()
                .enumerate()
                .filter(|(_, w)| !w.is_empty())
                .filter_map(|(i, w)| {
                    let to = dfa.walk(q, w);
                    (to != DEAD).then_some((i as u32, to))
                })
                .collect();
            want.sort();
            assert_eq!(got, want);
        }
    }
}
