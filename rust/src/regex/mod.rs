//! The regex side: a regex compiled (by regex-automata) to a trimmed, minimised DFA over bytes,
//! or to an NFA that a lazy automaton determinises on demand.

pub mod byte_dfa;
pub mod byte_nfa;
pub(crate) mod minimize;
