//! The regex side: a regex compiled (parsed by regex-syntax, or its common subset by
//! `common_syntax`; turned into an NFA by `thompson`, or by regex-automata for look-around;
//! determinised by our subset construction) to a trimmed, minimised DFA over bytes, or to an
//! NFA that a lazy automaton determinises on demand.

pub mod byte_dfa;
pub mod byte_nfa;
pub(crate) mod common_syntax;
pub(crate) mod determinize;
pub(crate) mod minimize;
pub mod outline;
pub(crate) mod syntax;
pub(crate) mod thompson;
