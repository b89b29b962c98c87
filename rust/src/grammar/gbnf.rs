//! GBNF front end: llama.cpp's grammar syntax (its `docs/grammars.md`) → [`Grammar`].
//!
//! ## What it parses
//! * Rules `name ::= body`; names are `[a-zA-Z0-9-]+` (`ws`, `json-value`). The start rule is
//!   `root` unless the caller names another.
//! * Items: string literals `"..."`, character classes `[...]` / `[^...]` with inclusive ranges
//!   `a-z` (`]` ends a class unless escaped, `-` is literal first or last), `.` (any character),
//!   rule references, groups `( ... )` with `|` alternatives inside, and the postfix operators
//!   `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, `{,n}` (spaces allowed inside the braces) on any item.
//!   Postfixes stack, innermost first: `"a"*?` is `("a"*)?`.
//! * Escapes, in literals and classes alike: `\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH`.
//! * Comments: `#` to the end of the line, wherever whitespace may stand.
//!
//! ## Lines
//! Spaces and tabs separate items anywhere. A line break ends the rule when it comes at the top
//! level of the rule's body: a rule continues onto the next line only when the line ends right
//! after `::=`, right after a `|`, or inside parentheses (llama.cpp's rule). CRLF and LF line
//! endings are both accepted; a leading byte-order mark is skipped.
//!
//! ## Output
//! Rules come in definition order; each literal is one [`Expr::Literal`] (adjacent ones are not
//! merged), `.` is a negated class with no ranges, a one-item sequence or one-alternative group is
//! the item itself, an empty alternative (`"x" |`, `()`) is `Seq(vec![])`, and a class range
//! that spans the surrogates is split around them.
//!
//! ## Refused, and why
//! * llama.cpp's negated token items `!<[123]>`, `!<|name|>` ([`Error::Unsupported`]): "any
//!   token but this one" constrains token ids, not text, so it has no canonical meaning. Token
//!   items `<[123]>` and `<|name|>` are read as [`Expr::Token`].
//! * A rule defined twice (llama.cpp lets the later one win silently; it is nearly always a
//!   mistake), a reference to an undefined rule, unknown escapes, escapes that name a surrogate or
//!   lie beyond U+10FFFF, reversed class ranges, `{m,n}` with `m > n`, and `{}`, which llama.cpp
//!   reads as "zero times" (an accident more often than an intent).
//! * A raw line break inside a literal or class: llama.cpp takes it literally, but a literal
//!   running over the end of its line is far more often a missing quote; write `\n`.
//! * Limits, so that no grammar hands the passes after this one (which recurse over [`Expr`]) an
//!   absurdly deep or large expression: parentheses and repetition operators together nest at
//!   most [`MAX_NESTING`] deep, and counts in braces are at most [`MAX_REPEAT`].
//!
//! Every error names the 1-based line (and, where it is one place, the column) and what was
//! expected there. Nothing here panics on any input: the parser walks the text a `char` at a time
//! and keeps open parentheses on an explicit stack rather than recursing (only the final
//! renumbering walk recurses, bounded by the nesting limit).

use std::collections::HashMap;

use super::{find_start, token_item, Expr, Grammar, Rule};
use crate::error::{Error, Result};

/// Deepest nesting of parentheses and repetition operators in one rule body.
pub const MAX_NESTING: u32 = 256;
/// Largest count a `{m,n}` repetition may name.
pub const MAX_REPEAT: u32 = 10_000;

/// The escapes GBNF knows, for error messages.
const ESCAPES: &str = r#"\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH"#;

/// How a rule may continue onto the next line, for error messages.
const CONTINUATION_HINT: &str =
    "a rule continues onto the next line only right after `::=`, right after `|`, or inside parentheses";

/// Parses GBNF text; `start` defaults to `root`.
pub fn parse(text: &str, start: Option<&str>) -> Result<Grammar> {
    let mut parser = Parser::new(text);
    parser.parse_rules()?;
    let rules = parser.finish()?;
    if rules.is_empty() {
        return Err(Error::InvalidGrammar("the grammar defines no rules".into()));
    }
    let start = find_start(&rules, start.unwrap_or("root"))?;
    Ok(Grammar { rules, start })
}

/// A 1-based (line, column) position; columns count characters.
type Pos = (usize, usize);

/// A rule name as the text mentions it, before the rules are numbered.
struct Symbol {
    name: String,
    /// Line of its definition, once seen.
    defined_at: Option<usize>,
    /// Where it is first referenced, if it is.
    first_use: Option<Pos>,
}

/// A parsed rule whose [`Expr::Rule`] indices are still symbol ids.
struct Definition {
    symbol: usize,
    line: usize,
    body: Expr,
}

/// The parser: a byte position into the text, always on a `char` boundary, with its line and
/// column.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    col: usize,
    symbols: Vec<Symbol>,
    by_name: HashMap<&'a str, usize>,
    definitions: Vec<Definition>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        let pos = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
        Parser { text, pos, line: 1, col: 1, symbols: Vec::new(), by_name: HashMap::new(), definitions: Vec::new() }
    }

    // ---- Characters and positions ----

    fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    fn at(&self) -> Pos {
        (self.line, self.col)
    }

    /// Consumes one character (a CRLF pair as one line break) and returns it.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        match c {
            '\r' | '\n' => {
                if c == '\r' && self.peek() == Some('\n') {
                    self.pos += 1;
                }
                self.line += 1;
                self.col = 1;
            }
            _ => self.col += 1,
        }
        Some(c)
    }

    fn error(&self, (line, col): Pos, message: impl std::fmt::Display) -> Error {
        Error::InvalidGrammar(format!("line {line}, column {col}: {message}"))
    }

    /// Skips spaces, tabs and comments, and line breaks too when `newlines` is set.
    fn skip_space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => {}
                '#' => self.skip_comment(),
                '\r' | '\n' if newlines => {}
                _ => return,
            }
            if c != '#' {
                self.bump();
            }
        }
    }

    /// Skips from `#` to the end of the line, leaving the line break.
    fn skip_comment(&mut self) {
        while !matches!(self.peek(), None | Some('\n' | '\r')) {
            self.bump();
        }
    }

    fn take_name(&mut self) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.bump();
        }
        self.text.get(start..self.pos).unwrap_or("")
    }

    // ---- Rules ----

    fn parse_rules(&mut self) -> Result<()> {
        loop {
            self.skip_space(true);
            match self.peek() {
                None => return Ok(()),
                Some(c) if is_name_char(c) => self.parse_rule()?,
                found => {
                    return Err(self.error(
                        self.at(),
                        format_args!(
                            "expected a rule name (`name ::= ...`), found {} ({CONTINUATION_HINT})",
                            describe(found)
                        ),
                    ))
                }
            }
        }
    }

    fn parse_rule(&mut self) -> Result<()> {
        let line = self.line;
        let name = self.take_name();
        self.skip_space(false);
        if !self.rest().starts_with("::=") {
            let found = describe(self.peek());
            return Err(self.error(self.at(), format_args!("expected `::=` after rule name `{name}`, found {found}")));
        }
        for _ in 0..3 {
            self.bump();
        }
        let symbol = self.declare(name, line)?;
        self.skip_space(true);
        let body = self.parse_body()?;
        self.end_rule(name)?;
        self.definitions.push(Definition { symbol, line, body });
        Ok(())
    }

    /// After a rule body: the end of the line or of the input.
    fn end_rule(&mut self, name: &str) -> Result<()> {
        let at = self.at();
        match self.peek() {
            None => Ok(()),
            Some('\n' | '\r') => {
                self.bump();
                Ok(())
            }
            Some(')') => Err(self.error(at, format_args!("unmatched `)` in rule `{name}`"))),
            Some(':') if self.rest().starts_with("::=") => Err(self.error(
                at,
                format_args!(
                    "unexpected `::=` in the body of rule `{name}`: a new rule must start on its own line \
                     (and a line that ends with `::=` or `|` continues onto the next)"
                ),
            )),
            found => Err(self.error(
                at,
                format_args!(
                    "expected an item, `|` or the end of the line in rule `{name}`, found {}",
                    describe(found)
                ),
            )),
        }
    }

    /// The symbol of a rule being defined on `line`; a second definition is an error.
    fn declare(&mut self, name: &'a str, line: usize) -> Result<usize> {
        let symbol = self.symbol(name);
        if let Some(first) = self.symbols[symbol].defined_at {
            return Err(Error::InvalidGrammar(format!(
                "line {line}: rule `{name}` is defined twice (first on line {first}, again on line {line})"
            )));
        }
        self.symbols[symbol].defined_at = Some(line);
        Ok(symbol)
    }

    fn symbol(&mut self, name: &'a str) -> usize {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.symbols.len();
        self.symbols.push(Symbol { name: name.to_string(), defined_at: None, first_use: None });
        self.by_name.insert(name, id);
        id
    }

    /// Numbers the rules in definition order and rewrites every reference to that numbering.
    fn finish(self) -> Result<Vec<Rule>> {
        let mut rule_of = vec![None; self.symbols.len()];
        for (index, definition) in self.definitions.iter().enumerate() {
            rule_of[definition.symbol] = Some(index);
        }
        for (symbol, rule) in self.symbols.iter().zip(&rule_of) {
            if let (None, Some((line, col))) = (rule, symbol.first_use) {
                return Err(Error::InvalidGrammar(format!(
                    "line {line}: rule `{}` is not defined (first used at column {col})",
                    symbol.name
                )));
            }
        }
        let symbols = self.symbols;
        Ok(self
            .definitions
            .into_iter()
            .map(|mut definition| {
                renumber(&mut definition.body, &rule_of);
                Rule { name: symbols[definition.symbol].name.clone(), line: definition.line, body: definition.body }
            })
            .collect())
    }

    // ---- Expressions ----

    /// A rule body: alternatives of items, up to the line break (or the end of the input, or a
    /// stray character `end_rule` reports) that ends it at the top level. Groups live on an
    /// explicit stack, not the call stack, so no input can exhaust the latter.
    fn parse_body(&mut self) -> Result<Expr> {
        let mut outer = Group::new(self.at());
        let mut open: Vec<Group> = Vec::new();
        loop {
            let nested = !open.is_empty();
            self.skip_space(nested);
            let at = self.at();
            match self.peek() {
                Some('(') => {
                    if open.len() >= MAX_NESTING as usize {
                        return Err(self.too_deep(at));
                    }
                    self.bump();
                    open.push(Group::new(at));
                }
                Some(')') if nested => {
                    self.bump();
                    if let Some(group) = open.pop() {
                        let item = self.close_group(group)?;
                        open.last_mut().unwrap_or(&mut outer).items.push(item);
                    }
                }
                Some('|') => {
                    self.bump();
                    open.last_mut().unwrap_or(&mut outer).end_alternative();
                    self.skip_space(true);
                }
                Some(c @ ('*' | '+' | '?' | '{')) => {
                    let group = open.last_mut().unwrap_or(&mut outer);
                    let Some(last) = group.items.pop() else {
                        return Err(self.error(at, format_args!("`{c}` must follow an item it repeats")));
                    };
                    group.items.push(self.parse_postfix(last, nested)?);
                }
                found => match self.parse_atom(found, at)? {
                    Some(atom) => open.last_mut().unwrap_or(&mut outer).items.push((atom, 0)),
                    None => match open.last() {
                        Some(group) => return Err(self.unclosed(group.open)),
                        None => break,
                    },
                },
            }
        }
        Ok(outer.finish().0)
    }

    /// The item a closed group makes, with its nesting height.
    fn close_group(&self, group: Group) -> Result<(Expr, u32)> {
        let open = group.open;
        let (body, height) = group.finish();
        Ok((body, self.check_height(height + 1, open)?))
    }

    fn unclosed(&self, (line, col): Pos) -> Error {
        let found = describe(self.peek());
        self.error(self.at(), format_args!("expected `)` to close the `(` at line {line}, column {col}, found {found}"))
    }

    /// A literal, class, `.` or reference starting with `c` at `at`; `None` when `c` starts no
    /// item.
    fn parse_atom(&mut self, c: Option<char>, at: Pos) -> Result<Option<Expr>> {
        let atom = match c {
            Some('"') => self.parse_literal()?,
            Some('[') => self.parse_class()?,
            Some('.') => {
                self.bump();
                Expr::Class { negated: true, ranges: vec![] }
            }
            Some('<') => {
                // One line at most: `token_item` stops at white space.
                let chars: Vec<char> = self.rest().chars().take_while(|&c| c != '\n').collect();
                let (name, end) = token_item(&chars, 0).map_err(|message| self.error(at, message))?;
                (0..end).for_each(|_| {
                    self.bump();
                });
                Expr::Token(name)
            }
            Some('!') if self.peek_second() == Some('<') => return Err(negated_token(at)),
            Some(c) if is_name_char(c) => self.parse_reference(at),
            _ => return Ok(None),
        };
        Ok(Some(atom))
    }

    fn parse_reference(&mut self, at: Pos) -> Expr {
        let name = self.take_name();
        let symbol = self.symbol(name);
        let first_use = &mut self.symbols[symbol].first_use;
        if first_use.is_none() {
            *first_use = Some(at);
        }
        Expr::Rule(symbol)
    }

    /// One postfix operator on `item`.
    fn parse_postfix(&mut self, (item, height): (Expr, u32), nested: bool) -> Result<(Expr, u32)> {
        let at = self.at();
        let (min, max) = match self.bump() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            _ => self.parse_braces(at, nested)?,
        };
        let height = self.check_height(height + 1, at)?;
        Ok((Expr::Repeat { expr: Box::new(item), min, max }, height))
    }

    /// The rest of `{m}`, `{m,}`, `{m,n}`, `{,n}` (or `{,}`), its `{` already consumed at `open`.
    fn parse_braces(&mut self, open: Pos, nested: bool) -> Result<(u32, Option<u32>)> {
        self.skip_space(nested);
        let min = self.parse_count()?;
        self.skip_space(nested);
        match self.peek() {
            Some('}') => {
                self.bump();
                let Some(min) = min else {
                    return Err(
                        self.error(open, "expected a count inside `{}` (write `{m}`, `{m,}`, `{m,n}` or `{,n}`)")
                    );
                };
                Ok((min, Some(min)))
            }
            Some(',') => {
                self.bump();
                self.skip_space(nested);
                let max = self.parse_count()?;
                self.skip_space(nested);
                if self.peek() != Some('}') {
                    let found = describe(self.peek());
                    return Err(
                        self.error(self.at(), format_args!("expected `}}` to close the repetition, found {found}"))
                    );
                }
                self.bump();
                let min = min.unwrap_or(0);
                if let Some(max) = max.filter(|&max| max < min) {
                    return Err(self
                        .error(open, format_args!("repetition `{{{min},{max}}}` has its minimum above its maximum")));
                }
                Ok((min, max))
            }
            found => Err(self.error(
                self.at(),
                format_args!("expected a count, `,` or `}}` in the repetition, found {}", describe(found)),
            )),
        }
    }

    /// A decimal count at most [`MAX_REPEAT`], or `None` when no digit comes next.
    fn parse_count(&mut self) -> Result<Option<u32>> {
        let at = self.at();
        let start = self.pos;
        let mut value: u32 = 0;
        while let Some(digit) = self.peek().and_then(|c| c.to_digit(10)) {
            value = value.saturating_mul(10).saturating_add(digit);
            self.bump();
        }
        if self.pos == start {
            return Ok(None);
        }
        if value > MAX_REPEAT {
            let digits = self.text.get(start..self.pos).unwrap_or("");
            let shown = if digits.len() <= 20 { digits } else { "(a long number)" };
            return Err(self.error(at, format_args!("repetition count {shown} is above the limit of {MAX_REPEAT}")));
        }
        Ok(Some(value))
    }

    /// `height` itself, or an error at `at` when it is above [`MAX_NESTING`].
    fn check_height(&self, height: u32, at: Pos) -> Result<u32> {
        if height > MAX_NESTING {
            return Err(self.too_deep(at));
        }
        Ok(height)
    }

    fn too_deep(&self, at: Pos) -> Error {
        self.error(
            at,
            format_args!("nested deeper than {MAX_NESTING} levels (parentheses and repetition operators count)"),
        )
    }

    // ---- Literals and classes ----

    fn parse_literal(&mut self) -> Result<Expr> {
        let open = self.at();
        self.bump();
        let mut text = String::new();
        loop {
            match self.peek() {
                None | Some('\n' | '\r') => return Err(self.unterminated(open, "string literal", '"')),
                Some('"') => {
                    self.bump();
                    return Ok(Expr::Literal(text));
                }
                Some('\\') => text.push(self.parse_escape()?),
                Some(c) => {
                    self.bump();
                    text.push(c);
                }
            }
        }
    }

    fn parse_class(&mut self) -> Result<Expr> {
        let open = self.at();
        self.bump();
        let negated = self.peek() == Some('^');
        if negated {
            self.bump();
        }
        let mut ranges = Vec::new();
        while self.peek() != Some(']') {
            let at = self.at();
            let lo = self.class_char(open)?;
            let mut hi = lo;
            if self.peek() == Some('-') && !matches!(self.peek_second(), None | Some(']')) {
                self.bump();
                hi = self.class_char(open)?;
            }
            if lo > hi {
                return Err(self.error(
                    at,
                    format_args!(
                        "reversed range {}-{} in character class (its start is above its end)",
                        show(lo),
                        show(hi)
                    ),
                ));
            }
            push_range(&mut ranges, lo, hi);
        }
        self.bump();
        Ok(Expr::Class { negated, ranges })
    }

    fn class_char(&mut self, open: Pos) -> Result<char> {
        match self.peek() {
            None | Some('\n' | '\r') => Err(self.unterminated(open, "character class", ']')),
            Some('\\') => self.parse_escape(),
            Some(c) => {
                self.bump();
                Ok(c)
            }
        }
    }

    fn unterminated(&self, open: Pos, what: &str, close: char) -> Error {
        let end = if self.peek().is_none() { "input" } else { "line" };
        self.error(open, format_args!("unterminated {what}: no closing `{close}` before the end of the {end}"))
    }

    /// One escape, at its backslash.
    fn parse_escape(&mut self) -> Result<char> {
        let at = self.at();
        self.bump();
        let c = match self.peek() {
            Some(c @ ('x' | 'u' | 'U')) => {
                self.bump();
                let digits = match c {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                return self.parse_hex(at, c, digits);
            }
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some(c @ ('\\' | '"' | '[' | ']')) => c,
            found => {
                let what = match found {
                    None | Some('\n' | '\r') => "a `\\` at the end of the line".to_string(),
                    Some(c) => format!("unknown escape `\\{c}`"),
                };
                return Err(self.error(at, format_args!("{what}; GBNF escapes are {ESCAPES}")));
            }
        };
        self.bump();
        Ok(c)
    }

    /// Exactly `digits` hex digits after `\x`, `\u` or `\U`, naming a Unicode scalar value.
    fn parse_hex(&mut self, at: Pos, letter: char, digits: usize) -> Result<char> {
        let mut value: u32 = 0;
        for _ in 0..digits {
            let Some(digit) = self.peek().and_then(|c| c.to_digit(16)) else {
                let found = describe(self.peek());
                return Err(
                    self.error(at, format_args!("expected {digits} hex digits after `\\{letter}`, found {found}"))
                );
            };
            value = value.saturating_mul(16).saturating_add(digit);
            self.bump();
        }
        char::from_u32(value).ok_or_else(|| {
            let why = if (0xD800..=0xDFFF).contains(&value) {
                "a surrogate, which is not a character"
            } else {
                "beyond the last code point U+10FFFF"
            };
            self.error(at, format_args!("the escape `\\{letter}` names U+{value:04X}, {why}"))
        })
    }
}

/// A group being parsed (a rule's whole body is the outermost one): the alternatives ended so
/// far and the items of the current one, each with its nesting height.
struct Group {
    /// Where its `(` stands.
    open: Pos,
    alternatives: Vec<Expr>,
    items: Vec<(Expr, u32)>,
    /// The greatest height among the ended alternatives' items.
    height: u32,
}

impl Group {
    fn new(open: Pos) -> Group {
        Group { open, alternatives: Vec::new(), items: Vec::new(), height: 0 }
    }

    /// Ends the current alternative (at a `|` or the group's end).
    fn end_alternative(&mut self) {
        let mut sequence = Vec::with_capacity(self.items.len());
        for (item, height) in self.items.drain(..) {
            self.height = self.height.max(height);
            sequence.push(item);
        }
        self.alternatives.push(single_or(sequence, Expr::Seq));
    }

    /// The group's expression and the height of its deepest item.
    fn finish(mut self) -> (Expr, u32) {
        self.end_alternative();
        (single_or(self.alternatives, Expr::Alt), self.height)
    }
}

/// The one expression of `exprs`, or all of them wrapped.
fn single_or(mut exprs: Vec<Expr>, wrap: fn(Vec<Expr>) -> Expr) -> Expr {
    match exprs.pop() {
        Some(only) if exprs.is_empty() => only,
        Some(last) => {
            exprs.push(last);
            wrap(exprs)
        }
        None => wrap(exprs),
    }
}

/// Rewrites symbol ids into rule indices (every symbol is defined by now).
fn renumber(expr: &mut Expr, rule_of: &[Option<usize>]) {
    match expr {
        Expr::Rule(index) => {
            if let Some(&Some(rule)) = rule_of.get(*index) {
                *index = rule;
            }
        }
        Expr::Seq(items) | Expr::Alt(items) => items.iter_mut().for_each(|item| renumber(item, rule_of)),
        Expr::Repeat { expr, .. } => renumber(expr, rule_of),
        _ => {}
    }
}

/// Adds `lo..=hi`, split around the surrogates when it spans them (`lo` and `hi` are `char`s,
/// so neither is one).
fn push_range(ranges: &mut Vec<(char, char)>, lo: char, hi: char) {
    if (lo as u32) < 0xD800 && (hi as u32) > 0xDFFF {
        ranges.push((lo, '\u{D7FF}'));
        ranges.push(('\u{E000}', hi));
    } else {
        ranges.push((lo, hi));
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

fn negated_token((line, col): Pos) -> Error {
    Error::Unsupported(format!(
        "line {line}, column {col}: negated tokens (`!<[123]>`) stand for any other token, whatever text it \
         spells, which has no canonical tokenization; write the text the rule allows instead"
    ))
}

/// What the parser found, for error messages.
fn describe(found: Option<char>) -> String {
    match found {
        None => "the end of the input".into(),
        Some('\n' | '\r') => "the end of the line".into(),
        Some(c) => show(c),
    }
}

fn show(c: char) -> String {
    if c.is_control() || c == '`' {
        format!("U+{:04X}", c as u32)
    } else {
        format!("`{c}`")
    }
}

#[cfg(test)]
mod tests;
