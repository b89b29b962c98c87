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
#[derive(Clone, Debug, Default)]
pub struct TokenTrie {
    /// Children of each node as `(byte, node)`, sorted by byte.
    children: Vec<Vec<(u8, u32)>>,
    /// Tokens ending at each node.
    tokens: Vec<Vec<u32>>,
}

impl TokenTrie {
    /// A trie of the given `(token, bytes)` pairs (tokens with empty bytes are ignored).
    pub fn new<'a>(tokens: impl IntoIterator<Item = (u32, &'a [u8])>) -> TokenTrie {
        let mut trie = TokenTrie { children: vec![Vec::new()], tokens: vec![Vec::new()] };
        for (t, bytes) in tokens {
            if bytes.is_empty() {
                continue;
            }
            let mut node = 0usize;
            for &b in bytes {
                node = match trie.children[node].binary_search_by_key(&b, |c| c.0) {
                    Ok(i) => trie.children[node][i].1 as usize,
                    Err(i) => {
                        let id = trie.children.len();
                        trie.children[node].insert(i, (b, id as u32));
                        trie.children.push(Vec::new());
                        trie.tokens.push(Vec::new());
                        id
                    }
                };
            }
            trie.tokens[node].push(t);
        }
        trie
    }

    pub fn num_nodes(&self) -> usize {
        self.children.len()
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
            for &(b, child) in &self.children[node as usize] {
                let Some(next) = step(q, b)? else { continue };
                for &t in &self.tokens[child as usize] {
                    emit(t, next);
                }
                if !self.children[child as usize].is_empty() {
                    stack.push((child, next));
                }
            }
        }
        Ok(())
    }

    /// Calls `emit(token, target)` for every token that is a transition from `state`.
    pub fn for_each_transition(&self, dfa: &ByteDfa, state: u32, mut emit: impl FnMut(u32, u32)) {
        let mut stack: Vec<(u32, u32)> = vec![(0, state)];
        while let Some((node, q)) = stack.pop() {
            for &(b, child) in &self.children[node as usize] {
                let next = dfa.next(q, b);
                if next == DEAD {
                    continue;
                }
                for &t in &self.tokens[child as usize] {
                    emit(t, next);
                }
                if !self.children[child as usize].is_empty() {
                    stack.push((child, next));
                }
            }
        }
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
