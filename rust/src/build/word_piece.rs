//! Eager guides for WordPiece tokenizers (BERT): every state of `crate::max_match` reachable from
//! the start, explored breadth first, then trimmed to those that can reach acceptance and
//! minimised into an explicit token DFA. `agnostic` guides are the same walk with no checks:
//! every token sequence whose decoded text matches.
//!
//! # Costs
//! One trie walk per state, and every transition stored: a regex of bounded words (labels,
//! numbers, short phrases) gives tens to thousands of states; free text (`[a-z]+( [a-z]+)*`)
//! has a state for each token after which a longer entry could follow, times its word length,
//! with ~20,000 transitions each, and stops at `max_direct_states` / `max_direct_transitions`.
//! Lazy guides (`crate::max_match::lazy`) build only the states decoding reaches.

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::guide::token_dfa::TokenDfa;
use crate::limits::{Deadline, TokenDfaLimits};
use crate::max_match::{counts_word_chars, EntryTrie, Language, State, Walk};
use crate::regex::byte_dfa::ByteDfa;

/// The explicit token DFA (without EOS transitions) of the regex's byte DFA over a WordPiece
/// vocabulary, trimmed and minimised: see the module docs.
pub fn build(
    trie: &EntryTrie,
    max_word_chars: usize,
    dfa: &ByteDfa,
    language: Language,
    limits: TokenDfaLimits,
    deadline: Deadline,
) -> Result<TokenDfa> {
    let count_chars = counts_word_chars(dfa, language, max_word_chars);
    let mut walk = Walk::new(trie, dfa, language, count_chars, max_word_chars);
    let start = walk.start();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;
    use crate::tokenizer::vocab::Vocabulary;

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
        build(
            &EntryTrie::new(v, model),
            model.max_word_chars,
            &dfa,
            language,
            Limits::default().token_dfa(),
            Deadline::none(),
        )
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
}
