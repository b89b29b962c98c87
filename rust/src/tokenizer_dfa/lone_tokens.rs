//! Lone tokens and their merge-only splits (`ignore_merges`, see the parent module).
//!
//! With `ignore_merges`, a piece that is itself a vocabulary token is emitted whole. For a token
//! the merges produce from its own text this changes nothing; the others — *lone tokens* — are
//! allowed only as a whole piece, and the merge-only split of a lone token's text must never
//! form a piece on its own: [`LoneSplits`] tracks, over the tokens of the current piece, whether
//! they still follow such a split.

use crate::tokenizer::bpe::MergeTable;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};

/// Off every lone token's split.
pub const NONE: u32 = u32::MAX;

/// The lone tokens of a vocabulary under `ignore_merges`: allowed, not special, not emittable by
/// the merges from their own text.
pub fn lone_tokens(vocab: &Vocabulary, tok: &TokenizerDfa) -> Vec<u32> {
    (0..vocab.num_tokens() as u32)
        .filter(|&t| !vocab.is_never_allowed(t) && tok.class_of(t) == NO_CLASS && tok.fallback_byte(t).is_none())
        .filter(|&t| !vocab.token_bytes(t).is_empty())
        .collect()
}

/// The merge-only splits of the lone tokens, as a trie over token ids: a piece whose tokens
/// follow a whole path spells a lone token, which `ignore_merges` emits whole instead. Node 0 is
/// the root (a piece start); `NONE` is "on no such path".
#[derive(Clone, Debug, Default)]
pub struct LoneSplits {
    pub(crate) children: Vec<Vec<(u32, u32)>>,
    pub(crate) terminal: Vec<bool>,
}

/// The root of [`LoneSplits`].
pub const ROOT: u32 = 0;
/// A projected node: on some lone token's complete split (see the state search).
pub(crate) const SPELLED: u32 = u32::MAX - 1;

impl LoneSplits {
    /// The splits the merges give the lone tokens (lone tokens whose characters are not all base
    /// symbols have none: the merges cannot spell them).
    pub fn new(vocab: &Vocabulary, lone: &[u32]) -> LoneSplits {
        let table = MergeTable::new(vocab.merges());
        let mut trie = LoneSplits { children: vec![Vec::new()], terminal: vec![false] };
        let mut symbols = Vec::new();
        for &t in lone {
            if !vocab.base_symbols(vocab.token_bytes(t), &mut symbols) {
                continue;
            }
            table.encode(&mut symbols);
            let mut node = ROOT as usize;
            for &s in &symbols {
                node = match trie.children[node].binary_search_by_key(&s, |c| c.0) {
                    Ok(i) => trie.children[node][i].1 as usize,
                    Err(i) => {
                        let id = trie.children.len();
                        trie.children[node].insert(i, (s, id as u32));
                        trie.children.push(Vec::new());
                        trie.terminal.push(false);
                        id
                    }
                };
            }
            trie.terminal[node] = true;
        }
        trie
    }
    /// The node after token `t`, `NONE` off every path.
    #[inline]
    pub fn child(&self, u: u32, t: u32) -> u32 {
        if u == NONE || u == SPELLED {
            return NONE;
        }
        let ch = &self.children[u as usize];
        ch.binary_search_by_key(&t, |c| c.0).map_or(NONE, |i| ch[i].1)
    }
    /// Tokens that continue a path from `u`, sorted, with their nodes.
    pub fn next_tokens(&self, u: u32) -> &[(u32, u32)] {
        if u == NONE || u == SPELLED {
            &[]
        } else {
            &self.children[u as usize]
        }
    }
    /// The piece so far is a whole lone token's merge-only split: it may not end here.
    #[inline]
    pub fn spells_lone_token(&self, u: u32) -> bool {
        u == SPELLED || (u != NONE && self.terminal[u as usize])
    }
    pub fn num_nodes(&self) -> usize {
        self.children.len()
    }
}
