//! The regex side: a regex compiled (by regex-automata) to a trimmed, minimised DFA over bytes.

pub mod byte_dfa;
pub(crate) mod minimize;
