//! Lark front end: the grammar syntax of the `lark` Python package (and of llguidance), read
//! as a scannerless grammar.
//!
//! ## What it reads
//! * Rules `name: expansions` (also `?name`, `!name`, priorities `name.2`) and terminals
//!   `NAME: expansions`; alternatives `|` may continue on the next line when it starts with `|`.
//! * Items: `"literal"`, `"literal"i`, `"a".."z"`, `/regex/flags` (flags `i s m x u`), names,
//!   `( … )`, `[ … ]` (optional), postfix `?`, `*`, `+`, `~ n`, `~ n..m`; aliases `-> name`
//!   are accepted and change nothing.
//! * `%import common.NAME`, `%import common.NAME -> ALIAS`, `%import common (A, B)`: the
//!   terminals of Lark's `common.lark` (below), and `%ignore item`.
//! * Special tokens in rules, as llguidance writes them: `<|python_tag|>` (any `<…>` is the
//!   token with that text) or `<[128010]>` (by id); see [`Expr::Token`].
//! * `//` comments.
//!
//! ## What the language is
//! The language of the start rule (`start` unless told otherwise) as Lark's Earley parser with
//! `lexer="dynamic_complete"` accepts it: a terminal matches any substring in its language,
//! whatever its length or priority, and `%ignore`d text may appear between any two items of a
//! rule (never inside a terminal) and around the whole text. Lark's other lexers (standard,
//! contextual, LALR) pick one longest match per position, so on grammars where two terminals
//! compete for the same text they accept less; priorities, which only rank parses, change
//! nothing here. The `common` terminals whose Lark regexes rely on a lexer's shortest match
//! (`ESCAPED_STRING`, `C_COMMENT`) are written for the text that lexer matches: a string ends
//! at its first unescaped quote.
//!
//! ## What it refuses, by name and line
//! Templates (`name{x}`), `%declare`, `%override`, `%extend`, imports of other modules than
//! `common`, llguidance's `%regex` / `%llguidance` blocks (`%json` items are expanded before this
//! parser by the Python package, which has the JSON Schema converter), token id ranges
//! (`<[1-9]>`) and special tokens inside terminals, regexes with anchors or look-around,
//! terminals that name rules (as Lark does), undefined and twice-defined names.

use rustc_hash::FxHashMap;

use super::{check_regex, find_start, token_item, Expr, Grammar, Rule, TokenName};
use crate::error::{Error, Result};

/// Parses Lark text; `start` defaults to `start`.
pub fn parse(text: &str, start: Option<&str>) -> Result<Grammar> {
    let tokens = lex(text)?;
    let mut parser = Parser { tokens, at: 0, depth: 0 };
    let mut definitions = Definitions::default();
    while let Some(token) = parser.peek().cloned() {
        match token.kind {
            Kind::Newline => parser.at += 1,
            Kind::Directive(ref name) => parser.directive(name, token.line, &mut definitions)?,
            _ => parser.definition(&mut definitions)?,
        }
    }
    definitions.into_grammar(start.unwrap_or("start"))
}

/// The terminals of Lark's `common.lark`, each as one regex (`regex_syntax` dialect).
const COMMON: &[(&str, &str)] = &[
    ("DIGIT", "[0-9]"),
    ("HEXDIGIT", "[0-9a-fA-F]"),
    ("INT", "[0-9]+"),
    ("SIGNED_INT", "[+-]?[0-9]+"),
    ("DECIMAL", r"[0-9]+\.[0-9]*|\.[0-9]+"),
    ("FLOAT", r"[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"),
    ("SIGNED_FLOAT", r"[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"),
    ("NUMBER", r"[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+"),
    ("SIGNED_NUMBER", r"[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+)"),
    ("ESCAPED_STRING", r#""(?:[^"\\\n]|\\[^\n])*""#),
    ("LCASE_LETTER", "[a-z]"),
    ("UCASE_LETTER", "[A-Z]"),
    ("LETTER", "[A-Za-z]"),
    ("WORD", "[A-Za-z]+"),
    ("CNAME", "[_A-Za-z][_A-Za-z0-9]*"),
    ("WS_INLINE", "[ \t]+"),
    ("WS", "[ \t\x0C\r\n]+"),
    ("CR", "\r"),
    ("LF", "\n"),
    ("NEWLINE", "(?:\r?\n)+"),
    ("SH_COMMENT", "#[^\n]*"),
    ("CPP_COMMENT", "//[^\n]*"),
    ("C_COMMENT", r"/\*(?:[^*]|\*+[^*/])*\*+/"),
    ("SQL_COMMENT", "--[^\n]*"),
];

/// Deepest nesting of `( … )`, `[ … ]` and postfix operators (which bounds the recursion of
/// everything that walks a rule body).
const MAX_NESTING: usize = 256;

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Name(String),
    /// A string literal's text and its `i` flag.
    Str(String, bool),
    /// A regex terminal's pattern with its flags written in.
    Regex(String),
    Number(u32),
    Directive(String),
    /// A special token item, `<|name|>` or `<[id]>`.
    Token(TokenName),
    Colon,
    Pipe,
    Open,
    Close,
    OpenOptional,
    CloseOptional,
    Question,
    Star,
    Plus,
    Bang,
    Tilde,
    Dot,
    DotDot,
    Minus,
    Arrow,
    Comma,
    Newline,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    line: usize,
}

fn error(line: usize, message: impl std::fmt::Display) -> Error {
    Error::InvalidGrammar(format!("line {line}: {message}"))
}

fn unsupported(line: usize, message: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("Lark grammar, line {line}: {message}"))
}

/// The tokens of `text`. A newline is kept only where it ends a definition: one followed by
/// `|` (an alternative on the next line) is dropped.
fn lex(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens: Vec<Token> = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let start_line = line;
        let kind = match c {
            '\n' => {
                line += 1;
                i += 1;
                Kind::Newline
            }
            ' ' | '\t' | '\r' | '\x0C' => {
                i += 1;
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '"' => {
                let (value, next) = string(&chars, i, line)?;
                i = next;
                let insensitive = chars.get(i) == Some(&'i') && !chars.get(i + 1).is_some_and(|c| is_name_char(*c));
                i += usize::from(insensitive);
                Kind::Str(value, insensitive)
            }
            '/' => {
                let (pattern, next) = regex(&chars, i, line)?;
                i = next;
                Kind::Regex(pattern)
            }
            '%' => {
                let end = (i + 1..chars.len()).find(|&j| !is_name_char(chars[j])).unwrap_or(chars.len());
                let name: String = chars[i + 1..end].iter().collect();
                if name == "json" {
                    // Expanded before parsing by the Python package (`propertok._lark_json`).
                    return Err(unsupported(
                        line,
                        "%json items are expanded by the Python package (propertok.grammar_to_regex, \
                         Compiler.compile_grammar), not by the Rust parser",
                    ));
                }
                if matches!(name.as_str(), "regex" | "llguidance" | "lark") {
                    // Refused here: their `{…}` bodies are not Lark tokens.
                    return Err(unsupported(line, format!("llguidance's %{name} blocks are not supported yet")));
                }
                i = end;
                Kind::Directive(name)
            }
            '0'..='9' => {
                let end = (i..chars.len()).find(|&j| !chars[j].is_ascii_digit()).unwrap_or(chars.len());
                let digits: String = chars[i..end].iter().collect();
                i = end;
                Kind::Number(digits.parse().map_err(|_| error(line, format!("number {digits} is too large")))?)
            }
            c if is_name_char(c) => {
                let end = (i..chars.len()).find(|&j| !is_name_char(chars[j])).unwrap_or(chars.len());
                let name: String = chars[i..end].iter().collect();
                i = end;
                Kind::Name(name)
            }
            '<' => {
                let (name, end) = token_item(&chars, i).map_err(|message| error(line, message))?;
                i = end;
                Kind::Token(name)
            }
            '{' => return Err(unsupported(line, "templates and `{…}` blocks are not supported")),
            _ => {
                let (kind, width) = match (c, chars.get(i + 1)) {
                    ('.', Some('.')) => (Kind::DotDot, 2),
                    ('-', Some('>')) => (Kind::Arrow, 2),
                    (':', _) => (Kind::Colon, 1),
                    ('|', _) => (Kind::Pipe, 1),
                    ('(', _) => (Kind::Open, 1),
                    (')', _) => (Kind::Close, 1),
                    ('[', _) => (Kind::OpenOptional, 1),
                    (']', _) => (Kind::CloseOptional, 1),
                    ('?', _) => (Kind::Question, 1),
                    ('*', _) => (Kind::Star, 1),
                    ('+', _) => (Kind::Plus, 1),
                    ('!', _) => (Kind::Bang, 1),
                    ('~', _) => (Kind::Tilde, 1),
                    ('.', _) => (Kind::Dot, 1),
                    ('-', _) => (Kind::Minus, 1),
                    (',', _) => (Kind::Comma, 1),
                    _ => return Err(error(line, format!("unexpected character {c:?}"))),
                };
                i += width;
                kind
            }
        };
        if kind == Kind::Pipe {
            while tokens.last().is_some_and(|t| t.kind == Kind::Newline) {
                tokens.pop();
            }
        }
        tokens.push(Token { kind, line: start_line });
    }
    Ok(tokens)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A `"…"` literal starting at `chars[at]`: its value and the index after the closing quote.
fn string(chars: &[char], at: usize, line: usize) -> Result<(String, usize)> {
    let mut out = String::new();
    let mut i = at + 1;
    loop {
        match chars.get(i) {
            None | Some('\n') => return Err(error(line, "unterminated string literal")),
            Some('"') => return Ok((out, i + 1)),
            Some('\\') => {
                let (c, next) = escape(chars, i + 1, line)?;
                out.push(c);
                i = next;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// The escape after a backslash at `chars[at]`: its character and the index after it.
fn escape(chars: &[char], at: usize, line: usize) -> Result<(char, usize)> {
    let simple = |c| Ok((c, at + 1));
    match chars.get(at) {
        Some('n') => simple('\n'),
        Some('t') => simple('\t'),
        Some('r') => simple('\r'),
        Some('f') => simple('\x0C'),
        Some('v') => simple('\x0B'),
        Some('0') => simple('\0'),
        Some(&c @ ('\\' | '"' | '\'')) => simple(c),
        Some(&kind @ ('x' | 'u' | 'U')) => {
            let width = match kind {
                'x' => 2,
                'u' => 4,
                _ => 8,
            };
            let digits: String = chars.get(at + 1..at + 1 + width).unwrap_or(&[]).iter().collect();
            let code = (digits.len() == width).then(|| u32::from_str_radix(&digits, 16).ok()).flatten();
            let c =
                code.and_then(char::from_u32).ok_or_else(|| error(line, format!("invalid escape \\{kind}{digits}")))?;
            Ok((c, at + 1 + width))
        }
        Some(c) => Err(error(line, format!("unknown escape \\{c} in a string literal"))),
        None => Err(error(line, "unterminated string literal")),
    }
}

/// A `/…/flags` regex starting at `chars[at]`: its pattern with the flags written in, and the
/// index after it.
fn regex(chars: &[char], at: usize, line: usize) -> Result<(String, usize)> {
    let mut pattern = String::new();
    let mut i = at + 1;
    loop {
        match chars.get(i) {
            None | Some('\n') => return Err(error(line, "unterminated regex")),
            Some('/') => break,
            Some('\\') if chars.get(i + 1) == Some(&'/') => {
                pattern.push('/');
                i += 2;
            }
            Some('\\') => {
                pattern.push('\\');
                if let Some(&c) = chars.get(i + 1) {
                    pattern.push(c);
                }
                i += 2;
            }
            Some(&c) => {
                pattern.push(c);
                i += 1;
            }
        }
    }
    i += 1;
    let mut flags = String::new();
    while let Some(&c) = chars.get(i).filter(|c| c.is_ascii_alphabetic()) {
        match c {
            'i' | 's' | 'm' | 'x' => flags.push(c),
            'u' => {}
            _ => return Err(unsupported(line, format!("regex flag `{c}` is not supported (use i, s, m, x or u)"))),
        }
        i += 1;
    }
    let pattern = if flags.is_empty() { pattern } else { format!("(?{flags}:{pattern})") };
    Ok((pattern, i))
}

/// What the definitions parsed so far say. A name gets its rule index on first sight, used or
/// defined; a name used but never defined is reported with the line of its first use.
#[derive(Default)]
struct Definitions {
    /// `None` until defined: (name, line of first use).
    rules: Vec<std::result::Result<Rule, (String, usize)>>,
    by_name: FxHashMap<String, usize>,
    /// Names used inside terminals, with the line: checked to be terminals once all is defined.
    used_in_terminals: Vec<(usize, usize)>,
    ignore: Vec<Expr>,
}

impl Definitions {
    fn define(&mut self, name: String, line: usize, body: Expr) -> Result<()> {
        let index = self.index(&name, line);
        if let Ok(first) = &self.rules[index] {
            return Err(error(line, format!("`{name}` is defined twice (first on line {})", first.line)));
        }
        self.rules[index] = Ok(Rule { name, line, body });
        Ok(())
    }

    fn index(&mut self, name: &str, line: usize) -> usize {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        self.by_name.insert(name.to_string(), self.rules.len());
        self.rules.push(Err((name.to_string(), line)));
        self.rules.len() - 1
    }

    /// A reference to `name` on `line`.
    fn use_name(&mut self, name: &str, line: usize, in_terminal: bool) -> Expr {
        let index = self.index(name, line);
        if in_terminal {
            self.used_in_terminals.push((index, line));
        }
        Expr::Rule(index)
    }

    fn into_grammar(self, start: &str) -> Result<Grammar> {
        if self.rules.is_empty() {
            return Err(Error::InvalidGrammar("the grammar defines no rules".into()));
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for rule in self.rules {
            match rule {
                Ok(rule) => rules.push(rule),
                Err((name, line)) => return Err(error(line, format!("`{name}` is not defined"))),
            }
        }
        for &(index, line) in &self.used_in_terminals {
            if !is_terminal(&rules[index].name) {
                return Err(error(
                    line,
                    format!("a terminal cannot name the rule `{}` (Lark forbids it)", rules[index].name),
                ));
            }
        }
        let start = find_start(&rules, start)?;
        if !self.ignore.is_empty() {
            let ignored = Expr::Repeat { expr: Box::new(Expr::Alt(self.ignore)), min: 0, max: None };
            for rule in rules.iter_mut().filter(|r| !is_terminal(&r.name)) {
                rule.body = with_ignored(std::mem::replace(&mut rule.body, Expr::Seq(vec![])), &ignored);
            }
            let body = std::mem::replace(&mut rules[start].body, Expr::Seq(vec![]));
            rules[start].body = Expr::Seq(vec![ignored.clone(), body, ignored]);
        }
        Ok(Grammar { rules, start })
    }
}

fn is_terminal(name: &str) -> bool {
    name.trim_start_matches('_').starts_with(|c: char| c.is_ascii_uppercase())
}

/// `expr` with `ignored` allowed between any two of its items, including between the copies of
/// a repetition.
fn with_ignored(expr: Expr, ignored: &Expr) -> Expr {
    match expr {
        Expr::Seq(items) => {
            let mut out = Vec::with_capacity(items.len() * 2);
            for (k, item) in items.into_iter().enumerate() {
                if k > 0 {
                    out.push(ignored.clone());
                }
                out.push(with_ignored(item, ignored));
            }
            Expr::Seq(out)
        }
        Expr::Alt(items) => Expr::Alt(items.into_iter().map(|e| with_ignored(e, ignored)).collect()),
        Expr::Repeat { expr, min, max } => {
            if max == Some(0) {
                return Expr::Seq(vec![]);
            }
            let item = with_ignored(*expr, ignored);
            let more = Expr::Repeat {
                expr: Box::new(Expr::Seq(vec![ignored.clone(), item.clone()])),
                min: min.saturating_sub(1),
                max: max.map(|m| m - 1),
            };
            let at_least_one = Expr::Seq(vec![item, more]);
            if min == 0 {
                Expr::Repeat { expr: Box::new(at_least_one), min: 0, max: Some(1) }
            } else {
                at_least_one
            }
        }
        leaf => leaf,
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn peek_kind(&self) -> Option<&Kind> {
        self.peek().map(|t| &t.kind)
    }

    fn line(&self) -> usize {
        self.peek().or(self.tokens.last()).map_or(1, |t| t.line)
    }

    fn eat(&mut self, kind: &Kind) -> bool {
        if self.peek_kind() == Some(kind) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_end_of_line(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(Token { kind: Kind::Newline, .. }) => {
                self.at += 1;
                Ok(())
            }
            Some(t) => Err(error(t.line, format!("unexpected {} at the end of a definition", describe(&t.kind)))),
        }
    }

    /// `[?!]name[.N]: expansions` or `NAME[.N]: expansions`.
    fn definition(&mut self, definitions: &mut Definitions) -> Result<()> {
        let line = self.line();
        let _ = self.eat(&Kind::Question) || self.eat(&Kind::Bang);
        let name = match self.peek_kind() {
            Some(Kind::Name(n)) => n.clone(),
            Some(other) => {
                return Err(error(line, format!("expected a rule or terminal name, found {}", describe(other))))
            }
            None => return Err(error(line, "expected a rule or terminal name")),
        };
        self.at += 1;
        if self.eat(&Kind::Dot) {
            let _ = self.eat(&Kind::Minus);
            if !matches!(self.peek_kind(), Some(Kind::Number(_))) {
                return Err(error(line, format!("expected a priority number after `{name}.`")));
            }
            self.at += 1;
        }
        if !self.eat(&Kind::Colon) {
            return Err(error(line, format!("expected `:` after `{name}`")));
        }
        let in_terminal = is_terminal(&name);
        let body = self.expansions(in_terminal, definitions)?;
        self.expect_end_of_line()?;
        definitions.define(name, line, body)
    }

    fn directive(&mut self, name: &str, line: usize, definitions: &mut Definitions) -> Result<()> {
        self.at += 1;
        match name {
            "import" => self.import(line, definitions)?,
            "ignore" => {
                let item = self.expansions(true, definitions)?;
                definitions.ignore.push(item);
            }
            "declare" | "override" | "extend" => {
                return Err(unsupported(line, format!("%{name} is not supported")));
            }
            other => return Err(error(line, format!("unknown directive %{other}"))),
        }
        self.expect_end_of_line()
    }

    /// `%import common.NAME [-> ALIAS]` or `%import common (A, B, …)`.
    fn import(&mut self, line: usize, definitions: &mut Definitions) -> Result<()> {
        match self.peek_kind() {
            Some(Kind::Name(module)) if module == "common" => self.at += 1,
            Some(Kind::Name(module)) => {
                return Err(unsupported(line, format!("%import of `{module}`: only `common` is built in")))
            }
            _ => return Err(unsupported(line, "%import: only `common` is built in")),
        }
        let mut imports = Vec::new();
        if self.eat(&Kind::Dot) {
            let name = self.name(line)?;
            let alias = if self.eat(&Kind::Arrow) { self.name(line)? } else { name.clone() };
            imports.push((name, alias));
        } else if self.eat(&Kind::Open) {
            loop {
                let name = self.name(line)?;
                imports.push((name.clone(), name));
                if self.eat(&Kind::Close) {
                    break;
                }
                if !self.eat(&Kind::Comma) {
                    return Err(error(line, "expected `,` or `)` in %import"));
                }
            }
        } else {
            return Err(error(line, "expected `.NAME` or `(NAMES)` after %import common"));
        }
        for (name, alias) in imports {
            let Some((_, pattern)) = COMMON.iter().find(|(n, _)| *n == name) else {
                let known: Vec<&str> = COMMON.iter().map(|(n, _)| *n).collect();
                return Err(error(line, format!("common has no `{name}` (it has {})", known.join(", "))));
            };
            let body = Expr::Regex { pattern: (*pattern).into(), origin: format!("common.{name}") };
            definitions.define(alias, line, body)?;
        }
        Ok(())
    }

    fn name(&mut self, line: usize) -> Result<String> {
        match self.peek_kind() {
            Some(Kind::Name(n)) => {
                let n = n.clone();
                self.at += 1;
                Ok(n)
            }
            _ => Err(error(line, "expected a name")),
        }
    }

    /// `alternative ("|" alternative)*`.
    fn expansions(&mut self, in_terminal: bool, definitions: &mut Definitions) -> Result<Expr> {
        let mut alternatives = vec![self.alternative(in_terminal, definitions)?];
        while self.eat(&Kind::Pipe) {
            alternatives.push(self.alternative(in_terminal, definitions)?);
        }
        Ok(if alternatives.len() == 1 { alternatives.pop().unwrap() } else { Expr::Alt(alternatives) })
    }

    /// `item* ["->" alias]`.
    fn alternative(&mut self, in_terminal: bool, definitions: &mut Definitions) -> Result<Expr> {
        let mut items = Vec::new();
        while let Some(item) = self.item(in_terminal, definitions)? {
            items.push(item);
        }
        if self.eat(&Kind::Arrow) {
            self.name(self.line())?;
        }
        Ok(if items.len() == 1 { items.pop().unwrap() } else { Expr::Seq(items) })
    }

    /// An atom and its postfix operators, or `None` where the alternative ends.
    fn item(&mut self, in_terminal: bool, definitions: &mut Definitions) -> Result<Option<Expr>> {
        let Some(mut expr) = self.atom(in_terminal, definitions)? else { return Ok(None) };
        let mut postfixes = 0;
        loop {
            let line = self.line();
            postfixes += 1;
            if self.depth + postfixes > MAX_NESTING {
                return Err(error(line, format!("groups and repetitions nest deeper than {MAX_NESTING}")));
            }
            let (min, max) = match self.peek_kind() {
                Some(Kind::Question) => (0, Some(1)),
                Some(Kind::Star) => (0, None),
                Some(Kind::Plus) => (1, None),
                Some(Kind::Tilde) => {
                    self.at += 1;
                    let min = self.number(line)?;
                    let max = if self.eat(&Kind::DotDot) { self.number(line)? } else { min };
                    if min > max {
                        return Err(error(line, format!("repetition ~ {min}..{max}: the minimum exceeds the maximum")));
                    }
                    expr = Expr::Repeat { expr: Box::new(expr), min, max: Some(max) };
                    continue;
                }
                _ => return Ok(Some(expr)),
            };
            self.at += 1;
            expr = Expr::Repeat { expr: Box::new(expr), min, max };
        }
    }

    fn number(&mut self, line: usize) -> Result<u32> {
        match self.peek_kind() {
            Some(&Kind::Number(n)) if n <= 10_000 => {
                self.at += 1;
                Ok(n)
            }
            Some(Kind::Number(n)) => Err(error(line, format!("repetition count {n} is above 10000"))),
            _ => Err(error(line, "expected a number after `~`")),
        }
    }

    fn atom(&mut self, in_terminal: bool, definitions: &mut Definitions) -> Result<Option<Expr>> {
        let Some(token) = self.peek().cloned() else { return Ok(None) };
        let line = token.line;
        let expr = match token.kind {
            Kind::Str(text, insensitive) => {
                self.at += 1;
                if self.eat(&Kind::DotDot) {
                    let Some(Kind::Str(hi, _)) = self.peek_kind().cloned() else {
                        return Err(error(line, "expected a string after `..`"));
                    };
                    self.at += 1;
                    let (mut a, mut b) = (text.chars(), hi.chars());
                    match (a.next(), a.next(), b.next(), b.next()) {
                        (Some(lo), None, Some(hi), None) if lo <= hi => {
                            Expr::Class { negated: false, ranges: vec![(lo, hi)] }
                        }
                        _ => {
                            return Err(error(line, "a range \"a\"..\"z\" needs one character on each side, in order"))
                        }
                    }
                } else if insensitive {
                    Expr::CaseInsensitiveLiteral(text)
                } else {
                    Expr::Literal(text)
                }
            }
            Kind::Regex(pattern) => {
                self.at += 1;
                let origin = format!("line {line}: regex /{pattern}/");
                check_regex(&pattern, &origin)?;
                Expr::Regex { pattern, origin }
            }
            Kind::Name(name) => {
                self.at += 1;
                definitions.use_name(&name, line, in_terminal)
            }
            Kind::Token(name) => {
                if in_terminal {
                    return Err(error(
                        line,
                        format!("special token {name} inside a terminal: a terminal is text; name the token in a rule"),
                    ));
                }
                self.at += 1;
                Expr::Token(name)
            }
            Kind::Open | Kind::OpenOptional => {
                self.at += 1;
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    return Err(error(line, format!("groups and repetitions nest deeper than {MAX_NESTING}")));
                }
                let inner = self.expansions(in_terminal, definitions)?;
                self.depth -= 1;
                let close = if token.kind == Kind::Open { Kind::Close } else { Kind::CloseOptional };
                if !self.eat(&close) {
                    let found = self.peek_kind().map_or("the end of the grammar".into(), describe);
                    return Err(error(
                        self.line(),
                        format!("expected {} to close line {line}'s group, found {found}", describe(&close)),
                    ));
                }
                if close == Kind::CloseOptional {
                    Expr::Repeat { expr: Box::new(inner), min: 0, max: Some(1) }
                } else {
                    inner
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(expr))
    }
}

fn describe(kind: &Kind) -> String {
    match kind {
        Kind::Name(n) => format!("`{n}`"),
        Kind::Str(s, _) => format!("{s:?}"),
        Kind::Regex(p) if p.chars().count() > 40 => {
            format!("/{}…/ (a regex of {} characters)", p.chars().take(30).collect::<String>(), p.chars().count())
        }
        Kind::Regex(p) => format!("/{p}/"),
        Kind::Number(n) => n.to_string(),
        Kind::Token(t) => format!("the special token {t}"),
        Kind::Directive(d) => format!("%{d}"),
        Kind::Newline => "the end of the line".into(),
        Kind::Colon => "`:`".into(),
        Kind::Pipe => "`|`".into(),
        Kind::Open => "`(`".into(),
        Kind::Close => "`)`".into(),
        Kind::OpenOptional => "`[`".into(),
        Kind::CloseOptional => "`]`".into(),
        Kind::Question => "`?`".into(),
        Kind::Star => "`*`".into(),
        Kind::Plus => "`+`".into(),
        Kind::Bang => "`!`".into(),
        Kind::Tilde => "`~`".into(),
        Kind::Dot => "`.`".into(),
        Kind::DotDot => "`..`".into(),
        Kind::Minus => "`-`".into(),
        Kind::Arrow => "`->`".into(),
        Kind::Comma => "`,`".into(),
    }
}

#[cfg(test)]
mod tests;
