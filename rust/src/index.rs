//! The token index of `decode⁻¹(L)` — what Outlines builds, and the first half of the
//! CartesianMerge product.
//!
//! For a byte DFA state `q` and a token `t`, `t` is a transition from `q` when running `t`'s
//! bytes from `q` stays alive; the target is where it ends. We find all of them for one state
//! by walking a byte trie of the vocabulary alongside the DFA: a trie edge whose byte is dead in
//! the DFA prunes every token below it, so the cost per state is the size of the *live* part
//! of the trie, not the vocabulary's total length.

use crate::bytedfa::{ByteDfa, DEAD};

/// A byte trie of token strings. Node 0 is the root.
///
/// Stored flat, nodes numbered in depth-first preorder: node `n`'s children are
/// `edge_bytes/edge_nodes[edges[n]..edges[n + 1]]` (sorted by byte) and its tokens
/// `token_ids[tokens[n]..tokens[n + 1]]`. A walk then reads memory mostly forwards, which
/// matters for pre-tokenized guides: they walk a 128k-token trie once per text state.
#[derive(Clone, Debug)]
pub struct TokenTrie {
    edges: Vec<u32>,
    edge_bytes: Vec<u8>,
    edge_nodes: Vec<u32>,
    tokens: Vec<u32>,
    token_ids: Vec<u32>,
}

impl Default for TokenTrie {
    fn default() -> TokenTrie {
        TokenTrie::new(std::iter::empty())
    }
}

impl TokenTrie {
    /// A trie of the given `(token, bytes)` pairs (tokens with empty bytes are ignored).
    pub fn new<'a>(tokens: impl IntoIterator<Item = (u32, &'a [u8])>) -> TokenTrie {
        // Built as nested vectors, then laid out flat in preorder.
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut ends: Vec<Vec<u32>> = vec![Vec::new()];
        for (t, bytes) in tokens {
            if bytes.is_empty() {
                continue;
            }
            let mut node = 0usize;
            for &b in bytes {
                node = match children[node].binary_search_by_key(&b, |c| c.0) {
                    Ok(i) => children[node][i].1 as usize,
                    Err(i) => {
                        let id = children.len();
                        children[node].insert(i, (b, id as u32));
                        children.push(Vec::new());
                        ends.push(Vec::new());
                        id
                    }
                };
            }
            ends[node].push(t);
        }
        let mut order = Vec::with_capacity(children.len());
        let mut renumber = vec![0u32; children.len()];
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            renumber[n as usize] = order.len() as u32;
            order.push(n);
            stack.extend(children[n as usize].iter().rev().map(|c| c.1));
        }
        let mut trie = TokenTrie {
            edges: vec![0],
            edge_bytes: Vec::new(),
            edge_nodes: Vec::new(),
            tokens: vec![0],
            token_ids: Vec::new(),
        };
        for &n in &order {
            for &(b, child) in &children[n as usize] {
                trie.edge_bytes.push(b);
                trie.edge_nodes.push(renumber[child as usize]);
            }
            trie.edges.push(trie.edge_bytes.len() as u32);
            trie.token_ids.extend_from_slice(&ends[n as usize]);
            trie.tokens.push(trie.token_ids.len() as u32);
        }
        trie
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

    /// Walks the trie alongside any automaton: `step(state, byte)` gives the next state (`None`
    /// prunes the subtree), and `emit(token, state)` is called for every token whose whole
    /// walk stays alive. `step` may fail (a lazily built automaton reaching a limit).
    pub fn for_each_walk<S: Copy, E>(
        &self,
        start: S,
        mut step: impl FnMut(S, u8) -> Result<Option<S>, E>,
        mut emit: impl FnMut(u32, S),
    ) -> Result<(), E> {
        let mut stack: Vec<(u32, S)> = vec![(0, start)];
        while let Some((node, q)) = stack.pop() {
            for e in self.edge_range(node) {
                let Some(next) = step(q, self.edge_bytes[e])? else { continue };
                let child = self.edge_nodes[e];
                for &t in self.tokens_at(child) {
                    emit(t, next);
                }
                if !self.edge_range(child).is_empty() {
                    stack.push((child, next));
                }
            }
        }
        Ok(())
    }

    /// Calls `emit(token, target)` for every token that is a transition from `state`.
    pub fn for_each_transition(&self, dfa: &ByteDfa, state: u32, mut emit: impl FnMut(u32, u32)) {
        self.for_each_walk(
            state,
            |q, b| {
                let next = dfa.next(q, b);
                Ok::<_, std::convert::Infallible>((next != DEAD).then_some(next))
            },
            |t, q| emit(t, q),
        )
        .unwrap_or_else(|never| match never {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytedfa::DEFAULT_MAX_STATES;

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
