//! Grammars: Lark and GBNF text → one [`Grammar`] of rules → a regex the guides compile.
//!
//! ## The concept
//! A grammar names rules; each rule's body is an [`Expr`] over literals, one-character classes,
//! regexes, repetitions and references to rules. Both front ends ([`lark`], [`gbnf`]) parse their
//! syntax into this one representation, resolve every reference (an undefined name is an error
//! naming it and its line) and stop there: they know nothing of tokenizers or automata. Special
//! tokens ([`Expr::Token`]) are the one place a grammar meets a tokenizer: [`resolve`] looks
//! their names up in a vocabulary.
//!
//! The language of a grammar is **scannerless**: a reference to a rule stands for any string of
//! that rule's language, characters are Unicode scalar values, and a Lark terminal is just a rule
//! whose body is regular. There is no lexer, so Lark's longest-match and priority lexing does not
//! apply (the Lark front end refuses priorities by name; see its module docs for the rest).
//!
//! ## From grammar to guide
//! [`lower::to_regex`] writes the start rule as one regex, inlining every reference. A grammar
//! without recursion is regular, and so is one whose recursive rules name each other only at one
//! end (`list ::= item | item "," list`): its equations are solved exactly. Nesting recursion
//! (`value` → `array` → `value` inside brackets) has no regex. A lazy guide takes it as it is:
//! [`lower::to_rule_regexes`] writes one regex per nesting rule, a reference to a nesting rule
//! written as a call marker, and `crate::lazy::pushdown` runs them as a pushdown automaton, the
//! regex component of the same lazy engine (so a grammar without nesting is one regex there).
//! [`lower::to_regex`] refuses nesting, naming a cycle, unless the caller allows a nesting depth
//! (`max_recursion_depth`), which keeps the strings whose derivations open each such rule at
//! most that many times inside itself: that regex goes through the regex path
//! ([`crate::compiler::Compiler::compile_regex`]) for eager guides and `grammar_to_regex`.

//! ## Invariants
//! * Every [`Expr::Rule`] index is a valid index into [`Grammar::rules`]; [`Grammar::start`] too.
//! * [`Expr::Class`] ranges are inclusive and `lo <= hi`; a range across the surrogate gap stands
//!   for the scalar values in it.
//! * [`Expr::Regex`] patterns parse with `regex_syntax` and use no look-around or anchor (the
//!   front ends check this and name the terminal otherwise).
//!
//! ## Costs
//! Parsing is linear in the text. Lowering copies each rule's regex once per reference, so the
//! regex grows with the product of nesting; [`lower::LowerOptions::max_regex_bytes`] bounds it and the
//! byte DFA's own limit (`max_byte_dfa_states`) bounds what it compiles to.

pub mod gbnf;
pub mod lark;
pub mod lower;
pub mod resolve;

use crate::error::{Error, Result};

/// Which syntax a grammar's text is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// Lark, as llguidance documents it (rules, terminals, `%import common`, `%ignore`).
    Lark,
    /// llama.cpp's GBNF.
    Gbnf,
}

impl Syntax {
    /// `"lark"` or `"gbnf"`; anything else is an [`Error::InvalidArgument`] listing both.
    pub fn parse(name: &str) -> Result<Syntax> {
        match name {
            "lark" => Ok(Syntax::Lark),
            "gbnf" => Ok(Syntax::Gbnf),
            other => Err(Error::InvalidArgument(format!("unknown grammar syntax {other:?}: use \"lark\" or \"gbnf\""))),
        }
    }
}

/// A parsed grammar: named rules and the one the language starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grammar {
    pub rules: Vec<Rule>,
    /// Index into `rules` of the start rule.
    pub start: usize,
}

/// One named rule (a Lark rule or terminal, a GBNF rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    /// 1-based line of its definition, for error messages.
    pub line: usize,
    pub body: Expr,
}

/// A rule body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// Exactly this text (empty = the empty string).
    Literal(String),
    /// This text with every letter in either case (Lark's `"select"i`).
    CaseInsensitiveLiteral(String),
    /// One character in (or, `negated`, not in) the union of these inclusive ranges.
    Class { negated: bool, ranges: Vec<(char, char)> },
    /// A regex in `regex_syntax`'s dialect, matched as a whole (a Lark `/.../` terminal, flags
    /// already written into it as `(?i:...)`); `origin` names it in errors.
    Regex { pattern: String, origin: String },
    /// Any string of the rule with this index.
    Rule(usize),
    /// Concatenation (empty = the empty string).
    Seq(Vec<Expr>),
    /// Union (empty = no string at all).
    Alt(Vec<Expr>),
    /// `min` to `max` (unbounded when `None`) copies, concatenated.
    Repeat { expr: Box<Expr>, min: u32, max: Option<u32> },
    /// One special token (a tool-call or turn marker), named as the grammar wrote it. It is not
    /// text: the tokenizer splits special tokens out before it tokenizes, so the text on either
    /// side is tokenized on its own (`crate::compiler::Compiler::compile_grammar` resolves the
    /// name against a vocabulary; `lower::to_regex` has no way to write it).
    Token(TokenName),
}

/// How a grammar names a token: `<[128010]>` by id, `<|python_tag|>` by its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TokenName {
    Id(u32),
    /// The token's text, angle brackets included (`<|python_tag|>`, `<think>`).
    Text(String),
}

impl std::fmt::Display for TokenName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenName::Id(id) => write!(f, "<[{id}]>"),
            TokenName::Text(text) => f.write_str(text),
        }
    }
}

/// Reads a token item starting at `<` in `chars[at..]`: `<[ID]>` or `<TEXT>` (no white space or
/// `>` inside). Returns the name and the index past `>`, or a message for the caller to place.
pub(crate) fn token_item(chars: &[char], at: usize) -> std::result::Result<(TokenName, usize), String> {
    let end = (at + 1..chars.len()).find(|&j| chars[j] == '>' || chars[j].is_whitespace());
    let Some(end) = end.filter(|&j| chars[j] == '>') else {
        return Err("a `<` starts a special token (`<|name|>`, `<[id]>`), which needs a closing `>` on the same line \
                    and no white space"
            .into());
    };
    let inner: String = chars[at + 1..end].iter().collect();
    let name = match inner.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(digits) => match digits.parse::<u32>() {
            Ok(id) if digits.bytes().all(|b| b.is_ascii_digit()) => TokenName::Id(id),
            _ => return Err(format!("`<{inner}>`: a token id is `<[N]>` with one decimal number (no ranges)")),
        },
        None if inner.is_empty() => return Err("`<>` names no token".into()),
        None => TokenName::Text(format!("<{inner}>")),
    };
    Ok((name, end + 1))
}

/// Parses `text` in `syntax`; `start` names the start rule (default: `start` for Lark, `root`
/// for GBNF).
pub fn parse(text: &str, syntax: Syntax, start: Option<&str>) -> Result<Grammar> {
    match syntax {
        Syntax::Lark => lark::parse(text, start),
        Syntax::Gbnf => gbnf::parse(text, start),
    }
}

/// Finds `name` among `rules` as the start rule, or says which rules there are.
pub(crate) fn find_start(rules: &[Rule], name: &str) -> Result<usize> {
    rules.iter().position(|r| r.name == name).ok_or_else(|| {
        let mut names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        names.truncate(10);
        Error::InvalidGrammar(format!("no start rule `{name}` (rules defined: {})", names.join(", ")))
    })
}

/// Checks a front end's regex (a Lark `/.../` terminal): it must parse, and match text only
/// (no anchors, look-around or word boundaries, which a scannerless grammar cannot honour).
pub(crate) fn check_regex(pattern: &str, origin: &str) -> Result<()> {
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .map_err(|e| Error::InvalidGrammar(format!("{origin}: invalid regex /{pattern}/: {e}")))?;
    if !hir.properties().look_set().is_empty() {
        return Err(Error::InvalidGrammar(format!(
            "{origin}: the regex /{pattern}/ uses an anchor or look-around (^, $, \\b, ...), \
             which has no meaning inside a grammar"
        )));
    }
    Ok(())
}

/// Parses `text` and writes its start rule as one regex (see [`lower::to_regex`]).
pub fn grammar_to_regex(
    text: &str,
    syntax: Syntax,
    start: Option<&str>,
    options: lower::LowerOptions,
) -> Result<String> {
    lower::to_regex(&parse(text, syntax, start)?, options)
}
