//! Guides for WordPiece tokenizers (BERT): the regex's byte DFA walked together with the
//! vocabulary's entries, into an explicit token DFA.
//!
//! # What is built
//! A state is the regex's byte state, where the current word stands (no word yet, a word that
//! may go on, a word that stands alone and ends here), the characters of the current word so
//! far (only when the regex allows words longer than `max_input_chars_per_word`), and the
//! *pending* longest-match checks: for each token of the current word after which a longer
//! vocabulary entry could still match, the node of the entry trie its text and the text after
//! it have reached. A token's successor is found by walking its bytes through the byte DFA and
//! every pending node: reaching an entry is a longer match (the token sequence is not what the
//! tokenizer writes), falling off the trie settles that check, and a word-initial token ends the
//! word, which settles them all (`crate::tokenizer::word_piece` has the model and why this is
//! exact). The successors of a state are found for all tokens at once by walking the entry trie
//! in step with the byte DFA, pruned where the DFA dies or a check fails. The reachable states
//! are explored breadth first, then trimmed to those that can reach acceptance and minimised.
//!
//! `agnostic` guides are the same walk with no checks: every token sequence whose decoded text
//! matches.
//!
//! # Costs
//! One trie walk per state, and every transition stored: a regex of bounded words (labels,
//! numbers, short phrases) gives tens to thousands of states; free text (`[a-z]+( [a-z]+)*`)
//! has a state for each token after which a longer entry could follow, times its word length,
//! with ~20,000 transitions each, and stops at `max_direct_states` / `max_direct_transitions`.

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::guide::token_dfa::TokenDfa;
use crate::limits::{Deadline, TokenDfaLimits};
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer::word_piece::WordPiece;

const NO_TOKEN: u32 = u32::MAX;

/// The vocabulary's entries as one byte trie with two roots, the two ways Hugging Face looks a
/// piece of a word up: [`EntryTrie::WORD_START`] has every entry as it is spelt (the start of a
/// word), [`EntryTrie::CONTINUATION`] those spelt with the prefix, the prefix removed (the rest).
/// Every entry marks its node, usable as a token or not: a longer match only needs the entry to
/// exist. Tokens sit at the node of their text: a continuation below the second root.
pub struct EntryTrie {
    nodes: Vec<Node>,
}

#[derive(Default)]
struct Node {
    /// `(byte, child)`, sorted by byte.
    children: Vec<(u8, u32)>,
    /// A vocabulary entry ends here.
    entry: bool,
    /// The token a canonical guide may emit here, or [`NO_TOKEN`].
    canonical: u32,
    /// The token an agnostic guide may emit here, or [`NO_TOKEN`].
    any: u32,
    /// The token is a word of its own (punctuation, a CJK ideograph).
    stands_alone: bool,
}

impl EntryTrie {
    pub const WORD_START: u32 = 0;
    pub const CONTINUATION: u32 = 1;

    pub fn new(vocab: &Vocabulary, model: &WordPiece) -> EntryTrie {
        let root = || Node { canonical: NO_TOKEN, any: NO_TOKEN, ..Node::default() };
        let mut trie = EntryTrie { nodes: vec![root(), root()] };
        for id in 0..vocab.num_tokens() as u32 {
            let Some(entry) = vocab.token_string(id) else { continue };
            // Hugging Face looks a word's start up among all entries, and the rest of the word,
            // spelt with the prefix, too.
            let at_start = trie.insert(Self::WORD_START, entry);
            let (text, continues) = model.split_entry(entry);
            let node = if continues { trie.insert(Self::CONTINUATION, text) } else { at_start };
            let n = &mut trie.nodes[node as usize];
            if !vocab.is_never_allowed(id) {
                n.any = id;
                if model.may_emit(text, continues) {
                    n.canonical = id;
                    n.stands_alone = text.chars().count() == 1 && text.chars().all(|c| model.stands_alone(c));
                }
            }
        }
        trie
    }

    /// Marks `text` as an entry below `root`; its node.
    fn insert(&mut self, root: u32, text: &str) -> u32 {
        let mut node = root;
        for &b in text.as_bytes() {
            node = self.child_or_insert(node, b);
        }
        self.nodes[node as usize].entry = true;
        node
    }

    fn child_or_insert(&mut self, node: u32, byte: u8) -> u32 {
        let children = &self.nodes[node as usize].children;
        match children.binary_search_by_key(&byte, |c| c.0) {
            Ok(i) => children[i].1,
            Err(i) => {
                let child = self.nodes.len() as u32;
                self.nodes[node as usize].children.insert(i, (byte, child));
                self.nodes.push(Node { canonical: NO_TOKEN, any: NO_TOKEN, ..Node::default() });
                child
            }
        }
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let children = &self.nodes[node as usize].children;
        children.binary_search_by_key(&byte, |c| c.0).ok().map(|i| children[i].1)
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }
}

/// Where the current word stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Word {
    /// Nothing written yet: the first word-initial token has no space before it.
    None,
    /// A word that continuation tokens may extend.
    Open,
    /// A word of its own (punctuation): the next token starts a word.
    Closed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    byte_state: u32,
    word: Word,
    /// Characters of the current word, when they are counted.
    word_chars: u16,
    /// Trie nodes of the longest-match checks still open, sorted.
    pending: Box<[u32]>,
}

/// Which guide to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// Canonical token sequences only.
    Canonical,
    /// Every token sequence whose decoded text matches.
    Agnostic,
}

/// The explicit token DFA (without EOS transitions) of the regex's byte DFA over a WordPiece
/// vocabulary, trimmed and minimised: see the module docs.
pub fn build(
    trie: &EntryTrie,
    model: &WordPiece,
    dfa: &ByteDfa,
    language: Language,
    limits: TokenDfaLimits,
    deadline: Deadline,
) -> Result<TokenDfa> {
    let canonical = language == Language::Canonical;
    let count_chars = canonical && longest_word_bytes(dfa).is_none_or(|n| n > model.max_word_chars);
    let mut walk = Walk { trie, dfa, canonical, count_chars, max_word_chars: model.max_word_chars, out: Vec::new() };
    let start = State { byte_state: dfa.start(), word: Word::None, word_chars: 0, pending: Box::new([]) };
    let mut ids: FxHashMap<State, u32> = FxHashMap::default();
    ids.insert(start.clone(), 0);
    let mut states = vec![start];
    let mut transitions: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut num_transitions = 0usize;
    while transitions.len() < states.len() {
        deadline.check("the WordPiece guide's states")?;
        let state = states[transitions.len()].clone();
        walk.successors(&state);
        let mut edges = Vec::with_capacity(walk.out.len());
        for (token, next) in walk.out.drain(..) {
            let id = match ids.get(&next) {
                Some(&id) => id,
                None => {
                    let id = states.len() as u32;
                    limits.check_states(states.len() + 1, "states of the WordPiece guide")?;
                    ids.insert(next.clone(), id);
                    states.push(next);
                    id
                }
            };
            edges.push((token, id));
        }
        edges.sort_unstable();
        num_transitions += edges.len();
        limits.check_transitions(num_transitions, "transitions of the WordPiece guide")?;
        transitions.push(edges);
    }
    let accepting = states.iter().map(|s| dfa.is_accepting(s.byte_state)).collect();
    Ok(super::direct::minimize(&TokenDfa { start: 0, accepting, transitions }.trim()))
}

/// One state's successors: the trie walked with the byte DFA (and the pending checks).
struct Walk<'a> {
    trie: &'a EntryTrie,
    dfa: &'a ByteDfa,
    canonical: bool,
    count_chars: bool,
    max_word_chars: usize,
    out: Vec<(u32, State)>,
}

impl Walk<'_> {
    fn successors(&mut self, state: &State) {
        // A word-initial token: a space first, except at the start of the text.
        let after_space = match state.word {
            Word::None => state.byte_state,
            _ => self.dfa.next(state.byte_state, b' '),
        };
        if after_space != DEAD {
            self.walk(EntryTrie::WORD_START, after_space, 0, Vec::new());
        }
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
    use crate::limits::Limits;

    /// A WordPiece tokenizer over `entries` (ids in order, then `[UNK]` and `[SEP]`).
    fn vocab(entries: &[&str]) -> Vocabulary {
        let mut map = serde_json::Map::new();
        for (i, e) in entries.iter().chain(["[UNK]", "[SEP]"].iter()).enumerate() {
            map.insert(e.to_string(), i.into());
        }
        let n = entries.len();
        let json = serde_json::json!({
            "added_tokens": [{"id": n, "content": "[UNK]", "special": true}, {"id": n + 1, "content": "[SEP]", "special": true}],
            "normalizer": {"type": "BertNormalizer", "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": map, "max_input_chars_per_word": 5},
        });
        Vocabulary::from_json(&json.to_string(), None, None).unwrap()
    }

    fn guide(v: &Vocabulary, pattern: &str, language: Language) -> TokenDfa {
        let model = v.word_piece().unwrap();
        let dfa = ByteDfa::from_regex(pattern, 10_000).unwrap();
        build(&EntryTrie::new(v, model), model, &dfa, language, Limits::default().token_dfa(), Deadline::none())
            .unwrap()
    }

    #[test]
    fn a_longer_entry_two_tokens_ahead_is_found() {
        let v = vocab(&["a", "##b", "##c", "abc", "b"]);
        let g = guide(&v, "abc|ab", Language::Canonical);
        assert!(g.accepts(&[3]) && g.accepts(&[0, 1]));
        assert!(!g.accepts(&[0, 1, 2]), "abc is one entry: `a ##b ##c` is never written");
        let any = guide(&v, "abc|ab", Language::Agnostic);
        assert!(any.accepts(&[0, 1, 2]) && any.accepts(&[3]));
    }

    #[test]
    fn words_are_joined_by_one_space_and_punctuation_stands_alone() {
        let v = vocab(&["a", "##b", "b", ".", "##.", "a.", "ab"]);
        let g = guide(&v, "a b|a \\. b|ab", Language::Canonical);
        assert!(g.accepts(&[0, 2]) && g.accepts(&[0, 3, 2]) && g.accepts(&[6]));
        assert!(!g.accepts(&[0, 1]), "ab is an entry");
        let none = guide(&v, "a b( b)*", Language::Canonical);
        assert!(none.accepts(&[0, 2, 2, 2]));
        // `a.` and `##.` never appear: punctuation is a word of its own.
        assert!(guide(&v, "a\\.", Language::Canonical).num_states() == 0);
    }

    #[test]
    fn a_word_past_the_length_limit_is_never_written() {
        let v = vocab(&["a", "##a"]);
        let g = guide(&v, "a+", Language::Canonical);
        assert!(g.accepts(&[0, 1, 1, 1, 1]));
        assert!(!g.accepts(&[0, 1, 1, 1, 1, 1]), "six characters: the unknown token");
    }

    #[test]
    fn upper_case_is_never_written() {
        let v = vocab(&["a", "A"]);
        assert_eq!(guide(&v, "A", Language::Canonical).num_states(), 0);
        assert!(guide(&v, "A", Language::Agnostic).accepts(&[1]));
    }

    #[test]
    fn longest_word() {
        let bound = |p: &str| longest_word_bytes(&ByteDfa::from_regex(p, 1000).unwrap());
        assert_eq!(bound("ab cde"), Some(3));
        assert_eq!(bound("a+ b"), None);
        assert_eq!(bound("(ab ){0,9}abcd"), Some(4));
    }
}
