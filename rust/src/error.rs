//! Error types of the core. Every failure a caller can cause is a variant here with a message
//! that names the offending input and, where there is one, the way out. The Python binding maps
//! each variant onto one Python exception class (see `python.rs`); nothing in the core panics on
//! bad input.

use thiserror::Error;

/// Everything that can go wrong while loading a tokenizer or compiling / using a guide.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The regex does not parse.
    #[error("invalid regex: {0}")]
    InvalidRegex(String),
    /// The regex parses but uses a feature a finite automaton cannot express (look-around,
    /// backreferences, Unicode word boundaries).
    #[error("unsupported regex feature: {0}")]
    UnsupportedRegex(String),
    /// A grammar does not parse, or names a rule it does not define (the message gives the
    /// line and the rule).
    #[error("invalid grammar: {0}")]
    InvalidGrammar(String),
    /// No string at all matches the regex (or none that the vocabulary can spell).
    #[error("empty language: {0}")]
    EmptyLanguage(String),
    /// The tokenizer.json is not what we expect.
    #[error("malformed tokenizer.json: {0}")]
    MalformedTokenizer(String),
    /// A valid tokenizer.json whose model this library cannot use at all.
    #[error("unsupported tokenizer.json: {0}")]
    UnsupportedTokenizer(String),
    /// The tokenizer is valid but the requested construction cannot be made exact for it.
    #[error("{0}")]
    Unsupported(String),
    /// A documented size limit was reached during construction.
    #[error("limit exceeded: {limit} = {value} reached ({what}); raise it with the `{limit}` argument if the machine can afford it")]
    LimitExceeded { limit: &'static str, value: String, what: String },
    /// A caller-supplied argument is invalid (token id out of range, unknown method, ...).
    #[error("{0}")]
    InvalidArgument(String),
}

pub type Result<T> = std::result::Result<T, Error>;
