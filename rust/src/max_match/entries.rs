//! The vocabulary's entries as a byte trie, as WordPiece looks them up.

use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer::word_piece::WordPiece;

/// No token ends at a node.
pub(crate) const NO_TOKEN: u32 = u32::MAX;

/// The vocabulary's entries as one byte trie with two roots, the two ways Hugging Face looks a
/// piece of a word up: [`EntryTrie::WORD_START`] has every entry as it is spelt (the start of a
/// word), [`EntryTrie::CONTINUATION`] those spelt with the prefix, the prefix removed (the rest).
/// Every entry marks its node, usable as a token or not: a longer match only needs the entry to
/// exist. Tokens sit at the node of their text: a continuation below the second root.
pub struct EntryTrie {
    pub(crate) nodes: Vec<Node>,
    /// `tokens[id]`: a token guides may emit (agnostic or canonical), `None` for the others.
    tokens: Vec<Option<TokenEntry>>,
}

/// Where a token sits in the trie.
#[derive(Clone, Debug)]
pub(crate) struct TokenEntry {
    /// Its text: the entry without the prefix.
    pub(crate) text: Box<[u8]>,
    /// It continues a word (its node is below [`EntryTrie::CONTINUATION`]).
    pub(crate) continues: bool,
}

#[derive(Default)]
pub(crate) struct Node {
    /// `(byte, child)`, sorted by byte.
    pub(crate) children: Vec<(u8, u32)>,
    /// A vocabulary entry ends here.
    pub(crate) entry: bool,
    /// The token a canonical guide may emit here, or [`NO_TOKEN`].
    pub(crate) canonical: u32,
    /// The token an agnostic guide may emit here, or [`NO_TOKEN`].
    pub(crate) any: u32,
    /// The token is a word of its own (punctuation, a CJK ideograph).
    pub(crate) stands_alone: bool,
}

impl EntryTrie {
    pub const WORD_START: u32 = 0;
    pub const CONTINUATION: u32 = 1;

    pub fn new(vocab: &Vocabulary, model: &WordPiece) -> EntryTrie {
        let root = || Node { canonical: NO_TOKEN, any: NO_TOKEN, ..Node::default() };
        let mut trie = EntryTrie { nodes: vec![root(), root()], tokens: vec![None; vocab.num_tokens()] };
        for id in 0..vocab.num_tokens() as u32 {
            let Some(entry) = vocab.token_string(id) else { continue };
            // Hugging Face looks a word's start up among all entries, and the rest of the word,
            // spelt with the prefix, too.
            let at_start = trie.insert(Self::WORD_START, entry);
            let (text, continues) = model.split_entry(entry);
            let node = if continues { trie.insert(Self::CONTINUATION, text) } else { at_start };
            let n = &mut trie.nodes[node as usize];
            if !vocab.is_never_allowed(id) {
                trie.tokens[id as usize] = Some(TokenEntry { text: text.as_bytes().into(), continues });
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

    /// A token guides may emit: its text and whether it continues a word.
    pub(crate) fn token(&self, token: u32) -> Option<&TokenEntry> {
        self.tokens.get(token as usize).and_then(Option::as_ref)
    }

    pub(crate) fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let children = &self.nodes[node as usize].children;
        children.binary_search_by_key(&byte, |c| c.0).ok().map(|i| children[i].1)
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }
}
