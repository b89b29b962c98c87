//! A state of a WordPiece guide and its successors: one walk of the entry trie in step with the
//! regex's byte DFA (see the module docs of `crate::max_match`).

use super::entries::{EntryTrie, NO_TOKEN};
use crate::regex::byte_dfa::{ByteDfa, DEAD};

/// Where the current word stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Word {
    /// Nothing written yet: the first word-initial token has no space before it.
    None,
    /// A word that continuation tokens may extend.
    Open,
    /// A word of its own (punctuation): the next token starts a word.
    Closed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub byte_state: u32,
    pub word: Word,
    /// Characters of the current word, when they are counted.
    pub word_chars: u16,
    /// Trie nodes of the longest-match checks still open, sorted.
    pub pending: Box<[u32]>,
}

/// Which guide to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// Canonical token sequences only.
    Canonical,
    /// Every token sequence whose decoded text matches.
    Agnostic,
}

/// One state's successors: the trie walked with the byte DFA (and the pending checks).
pub struct Walk<'a> {
    pub trie: &'a EntryTrie,
    pub dfa: &'a ByteDfa,
    pub canonical: bool,
    /// The current word's characters are counted (the regex allows words past the limit).
    pub count_chars: bool,
    pub max_word_chars: usize,
    /// The successors found by [`Walk::successors`], `(token, state)`.
    pub out: Vec<(u32, State)>,
}

impl<'a> Walk<'a> {
    /// A walk for `language` guides of `dfa`; `count_chars` from [`counts_word_chars`].
    pub fn new(
        trie: &'a EntryTrie,
        dfa: &'a ByteDfa,
        language: Language,
        count_chars: bool,
        max_word_chars: usize,
    ) -> Walk<'a> {
        Walk { trie, dfa, canonical: language == Language::Canonical, count_chars, max_word_chars, out: Vec::new() }
    }

    /// The state before any token.
    pub fn start(&self) -> State {
        State { byte_state: self.dfa.start(), word: Word::None, word_chars: 0, pending: Box::new([]) }
    }

    /// The successor of `state` by `token`, `None` when the walk would not emit it there: the
    /// same as [`Walk::successors`] for that one token, by walking its bytes only.
    pub fn step(&self, state: &State, token: u32) -> Option<State> {
        let entry = self.trie.token(token)?;
        let continues = entry.continues;
        let (root, mut q, mut chars, mut pending) = if continues {
            if self.canonical && state.word != Word::Open {
                return None;
            }
            (EntryTrie::CONTINUATION, state.byte_state, state.word_chars as usize, state.pending.to_vec())
        } else {
            (EntryTrie::WORD_START, word_start(self.dfa, state)?, 0, Vec::new())
        };
        let mut node = root;
        for &b in entry.text.iter() {
            if q == DEAD {
                return None;
            }
            q = self.dfa.next(q, b);
            chars += usize::from(b & 0xC0 != 0x80);
            if self.count_chars && chars > self.max_word_chars {
                return None;
            }
            pending = self.advance(&pending, b)?;
            node = self.trie.child(node, b)?;
        }
        let n = &self.trie.nodes[node as usize];
        let emitted = if self.canonical { n.canonical } else { n.any };
        (q != DEAD && emitted == token).then(|| self.target(node, q, chars, &pending, continues))
    }

    /// Appends the successors of `state` to `out`.
    pub fn successors(&mut self, state: &State) {
        if let Some(start) = word_start(self.dfa, state) {
            self.starting_word(start);
        }
        self.continuing(state);
    }

    /// Appends the successors by a token that starts a word at `start` (see [`word_start`]).
    pub fn starting_word(&mut self, start: u32) {
        self.walk(EntryTrie::WORD_START, start, 0, Vec::new());
    }

    /// Appends the successors of `state` by a token that continues its word.
    pub fn continuing(&mut self, state: &State) {
        if state.word == Word::Open || !self.canonical {
            self.walk(EntryTrie::CONTINUATION, state.byte_state, state.word_chars as usize, state.pending.to_vec());
        }
    }

    /// Walks the subtree of `root` from `byte_state`; the current word has `word_chars`
    /// characters before it and the checks `pending` open.
    fn walk(&mut self, root: u32, byte_state: u32, word_chars: usize, pending: Vec<u32>) {
        let continues = root == EntryTrie::CONTINUATION;
        let mut stack = vec![(root, byte_state, word_chars, pending)];
        while let Some((node, q, chars, pending)) = stack.pop() {
            for &(byte, child) in &self.trie.nodes[node as usize].children {
                let q = self.dfa.next(q, byte);
                if q == DEAD {
                    continue;
                }
                let chars = chars + usize::from(byte & 0xC0 != 0x80);
                if self.count_chars && chars > self.max_word_chars {
                    continue;
                }
                let Some(pending) = self.advance(&pending, byte) else { continue };
                let n = &self.trie.nodes[child as usize];
                let token = if self.canonical { n.canonical } else { n.any };
                if token != NO_TOKEN {
                    self.out.push((token, self.target(child, q, chars, &pending, continues)));
                }
                if !n.children.is_empty() {
                    stack.push((child, q, chars, pending));
                }
            }
        }
    }

    /// The pending checks after one more byte of the word, `None` when one finds a longer
    /// entry.
    fn advance(&self, pending: &[u32], byte: u8) -> Option<Vec<u32>> {
        let mut next = Vec::with_capacity(pending.len());
        for &p in pending {
            if let Some(c) = self.trie.child(p, byte) {
                if self.trie.nodes[c as usize].entry {
                    return None;
                }
                next.push(c);
            }
        }
        Some(next)
    }

    /// The state after the token ending at `node`.
    fn target(&self, node: u32, byte_state: u32, chars: usize, pending: &[u32], continues: bool) -> State {
        if !self.canonical {
            return State { byte_state, word: Word::Open, word_chars: 0, pending: Box::new([]) };
        }
        let n = &self.trie.nodes[node as usize];
        if n.stands_alone {
            return State { byte_state, word: Word::Closed, word_chars: 0, pending: Box::new([]) };
        }
        // A word-initial token settles the checks of the word before (`pending` is empty then).
        let mut open: Vec<u32> = if continues { pending.to_vec() } else { Vec::new() };
        if !n.children.is_empty() {
            open.push(node);
        }
        open.sort_unstable();
        open.dedup();
        let word_chars = if self.count_chars { chars as u16 } else { 0 };
        State { byte_state, word: Word::Open, word_chars, pending: open.into_boxed_slice() }
    }
}

/// The byte state where a word-initial token's text starts after `state`: past a space, except
/// at the start of the text; `None` when the regex allows no new word there. A token that starts
/// a word has the same successor from every state with the same word start (the word before
/// settles all its checks).
pub fn word_start(dfa: &ByteDfa, state: &State) -> Option<u32> {
    let q = match state.word {
        Word::None => state.byte_state,
        _ => dfa.next(state.byte_state, b' '),
    };
    (q != DEAD).then_some(q)
}

/// Whether canonical guides of `dfa` count the characters of words: when the regex allows a
/// word longer than `max_word_chars` (which the tokenizer writes as the unknown token).
pub fn counts_word_chars(dfa: &ByteDfa, language: Language, max_word_chars: usize) -> bool {
    language == Language::Canonical && longest_word_bytes(dfa).is_none_or(|n| n > max_word_chars)
}

/// The most bytes between two spaces in a string of the regex's byte DFA (`None`: unbounded, a
/// loop without a space). Counted over every state, reachable or not.
fn longest_word_bytes(dfa: &ByteDfa) -> Option<usize> {
    let n = dfa.num_states();
    let mut targets: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (s, out) in targets.iter_mut().enumerate() {
        for b in (0..=255u8).filter(|&b| b != b' ') {
            let t = dfa.next(s as u32, b);
            if t != DEAD && !out.contains(&t) {
                out.push(t);
                indegree[t as usize] += 1;
            }
        }
    }
    // Kahn's order; a state left out lies on a loop.
    let mut order: Vec<u32> = (0..n as u32).filter(|&s| indegree[s as usize] == 0).collect();
    let mut i = 0;
    while i < order.len() {
        let s = order[i] as usize;
        i += 1;
        for &t in &targets[s] {
            indegree[t as usize] -= 1;
            if indegree[t as usize] == 0 {
                order.push(t);
            }
        }
    }
    if order.len() < n {
        return None;
    }
    let mut longest = vec![0usize; n];
    for &s in order.iter().rev() {
        longest[s as usize] = targets[s as usize].iter().map(|&t| longest[t as usize] + 1).max().unwrap_or(0);
    }
    longest.into_iter().max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_word() {
        let bound = |p: &str| longest_word_bytes(&ByteDfa::from_regex(p, 1000).unwrap());
        assert_eq!(bound("ab cde"), Some(3));
        assert_eq!(bound("a+ b"), None);
        assert_eq!(bound("(ab ){0,9}abcd"), Some(4));
    }
}
