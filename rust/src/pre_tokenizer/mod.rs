//! The pre-tokenizer as an automaton over text: its `Split` regexes as priority NFAs
//! ([`split_nfa`]), the lazy DFA of texts marked exactly at its piece boundaries
//! ([`piece_machine`]), paired with the stages that run after `ByteLevel` ([`byte_mapped`]),
//! and that DFA combined with a regex's byte DFA and the added tokens' contents
//! ([`text_automaton`]). Nothing here knows about token ids.

pub mod byte_mapped;
pub mod char_classes;
pub mod normal_form;
mod onig_syntax;
pub mod piece_machine;
pub mod piece_table;
pub mod split_nfa;
pub mod text_automaton;
