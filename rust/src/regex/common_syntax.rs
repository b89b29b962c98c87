//! The common regex subset, translated straight to regex-syntax's HIR: the same `Hir` that
//! `regex-syntax` gives, in a fraction of its time, or `None` (then `regex-syntax` translates it
//! and reports what is wrong).
//!
//! ## Why
//! `regex-syntax` parses to an AST, then translates the AST: about 200 ns per pattern character
//! on the JSON Schema converters' rule regexes, which was half of a recursive JSON schema's
//! compile (a median rule set is ~5,000 characters). Those regexes, a grammar's, and nearly
//! every user regex use a small subset: literals and escapes, bracketed classes, `.`, groups,
//! alternation, greedy repetition, `\p{..}`/`\d`-style classes, and the call and token markers
//! `(?-u:\xFE..)`. This module reads that subset in one pass, building each expression with
//! the same `Hir` constructors `regex-syntax`'s translator calls. Those constructors normalise
//! (they merge adjacent literals, flatten nested concatenations and alternations, turn a
//! one-character class into a literal), so the HIR is equal to the translator's, which tests
//! check on every regex of the shared corpus and on the JSON Schema converter's rules, and a
//! fuzz target (`regex_syntax`, seeded in `crate::testing`) on random patterns.
//!
//! ## Invariants
//! * `Some(hir)` only where `regex-syntax` translates the pattern without error, with
//!   `hir == regex-syntax's`: anything outside the subset (anchors, look-around, flags other than
//!   `(?-u:` with hex escapes, lazy or possessive repetition, nested classes and class set
//!   operations, octal, `\u`, named groups, nesting past [`MAX_GROUP_NESTING`]) is `None`,
//!   never a guess.
//! * `\p{..}`, `\P{..}` and the Perl classes are looked up by `regex-syntax` itself, once per
//!   escape text and thread ([`named_class`]), so their tables are never copied here.
//!
//! ## Costs
//! One pass over the characters, plus the `Hir` constructors' own work (an allocation or two per
//! expression, a run of literal characters being one): on the converters' rule regexes ~73 ns
//! per character against `regex-syntax`'s ~270 (`docs/design.md` §3).

use std::cell::RefCell;

use regex_syntax::hir::{Capture, Class, ClassUnicode, ClassUnicodeRange, Dot, Hir, HirKind, Repetition};
use rustc_hash::FxHashMap;

/// Group nesting past which a pattern is left to `regex-syntax`, whose parser refuses nesting
/// past 250 AST levels (a group level here adds at most four: group, alternation, concatenation,
/// repetition).
pub const MAX_GROUP_NESTING: usize = 60;

/// `pattern` translated as `regex-syntax` translates it with Unicode on, `.` not matching `\n`,
/// and `utf8` as `TranslatorBuilder::utf8`; `None` outside the subset (see the module docs).
pub(crate) fn translate_common(pattern: &str, utf8: bool) -> Option<Hir> {
    let mut parser = Parser { chars: pattern.chars().collect(), at: 0, captures: 0, utf8 };
    let hir = parser.alternation(0)?;
    (parser.at == parser.chars.len()).then_some(hir)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    /// Capture groups opened so far: the next one's index is this plus one.
    captures: u32,
    utf8: bool,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        self.at += found as usize;
        found
    }

    fn eat_str(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        let found = self.chars.len() >= self.at + n && s.chars().zip(&self.chars[self.at..]).all(|(a, &b)| a == b);
        self.at += if found { n } else { 0 };
        found
    }

    fn alternation(&mut self, depth: usize) -> Option<Hir> {
        let mut branches = vec![self.concatenation(depth)?];
        while self.eat('|') {
            branches.push(self.concatenation(depth)?);
        }
        Some(if branches.len() == 1 { branches.pop()? } else { Hir::alternation(branches) })
    }

    fn concatenation(&mut self, depth: usize) -> Option<Hir> {
        let mut items = Vec::new();
        // A run of literal characters is one literal (a `Hir` per character, merged by
        // `Hir::concat`, allocated three times per character).
        let mut run: Vec<u8> = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = match self.atom(depth)? {
                Atom::Char(c) if !matches!(self.peek(), Some('*' | '+' | '?' | '{')) => {
                    run.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    continue;
                }
                Atom::Char(c) => literal(c),
                Atom::Hir(hir) => hir,
            };
            if !run.is_empty() {
                items.push(Hir::literal(std::mem::take(&mut run)));
            }
            items.push(self.repetitions(atom)?);
        }
        if !run.is_empty() {
            items.push(Hir::literal(run));
        }
        Some(Hir::concat(items))
    }

    /// The atom's repetition if one follows (one greedy operator at most; anything after it
    /// that `regex-syntax` would read as lazy, possessive or stacked is left to it).
    fn repetitions(&mut self, atom: Hir) -> Option<Hir> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.at += 1;
                let min = self.decimal()?;
                let max = if self.eat(',') {
                    if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.decimal()?)
                    }
                } else {
                    Some(min)
                };
                if self.peek() != Some('}') || max.is_some_and(|max| max < min) {
                    return None;
                }
                (min, max)
            }
            _ => return Some(atom),
        };
        self.at += 1;
        if matches!(self.peek(), Some('*' | '+' | '?' | '{')) {
            return None;
        }
        Some(Hir::repetition(Repetition { min, max, greedy: true, sub: Box::new(atom) }))
    }

    fn decimal(&mut self) -> Option<u32> {
        let start = self.at;
        let mut value: u32 = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            value = value.checked_mul(10)?.checked_add(d)?;
            self.at += 1;
        }
        (self.at > start).then_some(value)
    }

    fn atom(&mut self, depth: usize) -> Option<Atom> {
        let hir = match self.bump()? {
            '(' => self.group(depth + 1)?,
            '[' => self.class()?,
            '.' => Hir::dot(Dot::AnyCharExceptLF),
            '\\' => match self.escape()? {
                Escaped::Char(c) => return Some(Atom::Char(c)),
                Escaped::Class(class) => Hir::class(Class::Unicode(class)),
            },
            '*' | '+' | '?' | '{' | '}' | ']' | '^' | '$' => return None,
            c => return Some(Atom::Char(c)),
        };
        Some(Atom::Hir(hir))
    }

    fn group(&mut self, depth: usize) -> Option<Hir> {
        if depth > MAX_GROUP_NESTING {
            return None;
        }
        let hir = if self.eat_str("?:") {
            self.alternation(depth)?
        } else if self.eat_str("?-u:") {
            self.bytes()?
        } else if self.peek() == Some('?') {
            return None;
        } else {
            self.captures = self.captures.checked_add(1)?;
            let index = self.captures;
            let sub = self.alternation(depth)?;
            Hir::capture(Capture { index, name: None, sub: Box::new(sub) })
        };
        self.eat(')').then_some(hir)
    }

    /// The inside of `(?-u:` when it is a non-empty run of `\xHH` escapes (the markers of calls
    /// and special tokens): bytes, which ASCII ones are as characters, and others only where
    /// the translation may leave UTF-8.
    fn bytes(&mut self) -> Option<Hir> {
        let mut bytes = Vec::new();
        while self.eat_str("\\x") {
            let byte = self.hex_digits(2)? as u8;
            if byte > 0x7F && self.utf8 {
                return None;
            }
            bytes.push(byte);
        }
        (!bytes.is_empty()).then(|| Hir::literal(bytes))
    }

    fn hex_digits(&mut self, n: usize) -> Option<u32> {
        let mut value = 0;
        for _ in 0..n {
            value = value * 16 + self.bump()?.to_digit(16)?;
        }
        Some(value)
    }

    /// After a backslash, in or out of a class.
    fn escape(&mut self) -> Option<Escaped> {
        let c = self.bump()?;
        let char_of = |c: char| Some(Escaped::Char(c));
        match c {
            'n' => char_of('\n'),
            't' => char_of('\t'),
            'r' => char_of('\r'),
            'f' => char_of('\x0C'),
            'v' => char_of('\x0B'),
            'a' => char_of('\x07'),
            'x' => {
                let value = if self.eat('{') {
                    let start = self.at;
                    let mut value: u32 = 0;
                    while let Some(d) = self.peek().and_then(|c| c.to_digit(16)) {
                        value = value.checked_mul(16)?.checked_add(d)?;
                        self.at += 1;
                    }
                    if self.at == start || self.at - start > 8 || !self.eat('}') {
                        return None;
                    }
                    value
                } else {
                    self.hex_digits(2)?
                };
                char_of(char::from_u32(value)?)
            }
            'd' | 'D' | 'w' | 'W' | 's' | 'S' => named_class(&format!("\\{c}")).map(Escaped::Class),
            'p' | 'P' => {
                let start = self.at - 2;
                if self.eat('{') {
                    while self.bump()? != '}' {}
                } else {
                    self.bump()?;
                }
                let text: String = self.chars[start..self.at].iter().collect();
                named_class(&text).map(Escaped::Class)
            }
            c if c.is_ascii_punctuation() && c != '<' && c != '>' => char_of(c),
            _ => None,
        }
    }

    /// After `[`: a bracketed class of literals, ranges and named classes, maybe negated.
    fn class(&mut self) -> Option<Hir> {
        let negated = self.eat('^');
        let mut class = ClassUnicode::empty();
        let mut first = true;
        loop {
            let c = self.bump()?;
            if c == ']' && !first {
                break;
            }
            let next_closes = self.peek() == Some(']');
            let start = match c {
                '[' => return None,
                '&' | '~' if self.peek() == Some(c) => return None,
                '-' if !(first || next_closes) => return None,
                '\\' => match self.escape()? {
                    Escaped::Char(c) => c,
                    Escaped::Class(named) => {
                        class.union(&named);
                        first = false;
                        if self.peek() == Some('-') && self.peek_at(1) != Some(']') {
                            return None;
                        }
                        continue;
                    }
                },
                c => c,
            };
            first = false;
            let end = if self.peek() == Some('-') && !matches!(self.peek_at(1), Some(']') | None) {
                self.at += 1;
                match self.bump()? {
                    '-' => return None,
                    '\\' => match self.escape()? {
                        Escaped::Char(c) => c,
                        Escaped::Class(_) => return None,
                    },
                    '[' | ']' => return None,
                    c => c,
                }
            } else {
                start
            };
            if end < start {
                return None;
            }
            class.push(ClassUnicodeRange::new(start, end));
        }
        if negated {
            class.negate();
        }
        Some(Hir::class(Class::Unicode(class)))
    }
}

/// What [`Parser::atom`] read: one literal character, or any other expression.
enum Atom {
    Char(char),
    Hir(Hir),
}

enum Escaped {
    Char(char),
    Class(ClassUnicode),
}

fn literal(c: char) -> Hir {
    let mut buf = [0u8; 4];
    Hir::literal(c.encode_utf8(&mut buf).as_bytes())
}

/// The class of `\d`, `\p{AHex}`, ... as `regex-syntax` reads it, remembered per thread; `None`
/// when it is not a Unicode class of several characters (or not valid).
fn named_class(text: &str) -> Option<ClassUnicode> {
    thread_local! {
        static KNOWN: RefCell<FxHashMap<String, Option<ClassUnicode>>> = RefCell::new(FxHashMap::default());
    }
    KNOWN.with(|known| {
        if let Some(class) = known.borrow().get(text) {
            return class.clone();
        }
        let class = match regex_syntax::Parser::new().parse(text).ok()?.into_kind() {
            HirKind::Class(Class::Unicode(class)) => Some(class),
            _ => None,
        };
        known.borrow_mut().insert(text.to_string(), class.clone());
        class
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::translates_as_regex_syntax as agrees;

    #[test]
    fn the_subset_translates_as_regex_syntax_does() {
        for pattern in [
            "",
            "abc",
            "a|b|",
            "(a|bc)*d+e?",
            r"(?:x{3}|y{2,}|z{0,4})\.",
            r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt])*""#,
            r"[a-z0-9_\-]+@[^\s]{1,3}\d\p{AHex}{2}\P{L}",
            r"[]a]|[-a]|[a-]|[\]\-\\^]|[^^]",
            r"\x{10FFFF}\x41\n\t\r\f\v\a\/\#\&",
            r"(?-u:\xFE\x80\x81)a(?-u:\x41)",
            "é[à-ü]+.",
            "((a)(b(c)))",
            "[a-a][\\d][\\pL]",
        ] {
            assert!(agrees(pattern, false), "{pattern:?} is in the subset");
        }
        assert!(agrees("(?-u:\\x41)", true));
    }

    #[test]
    fn everything_else_is_left_to_regex_syntax() {
        for pattern in [
            "^a$",
            r"\bx",
            "a*?",
            "a++",
            "a**",
            "(?i)a",
            "(?P<n>a)",
            "[[:alpha:]]",
            "[a&&b]",
            "[a--b]",
            "[a-c-e]",
            r"\0",
            r"\u0041",
            "a{,3}",
            "a{3,2}",
            "a{",
            "(a",
            "a)",
            "*a",
            "{1}",
            "[z-a]",
            r"[\d-z]",
            r"(?-u:\xFE)",
            r"(?-u:a)",
            r"\q",
            r"\<",
        ] {
            // (UTF-8 only: `(?-u:\xFE)` may not leave it.)
            assert!(translate_common(pattern, true).is_none(), "{pattern:?}");
        }
        let deep = format!("{}a{}", "(".repeat(MAX_GROUP_NESTING + 1), ")".repeat(MAX_GROUP_NESTING + 1));
        assert!(translate_common(&deep, true).is_none());
    }

    /// The shared corpus's regexes (the suite and JSONSchemaBench's), and the Rust JSON Schema
    /// converter's rules for every JSONSchemaBench schema (call markers included).
    #[test]
    fn corpus_regexes_translate_as_regex_syntax_does() {
        let read = crate::testing::shared_data;
        let field = |line: &str, key: &str| -> Option<serde_json::Value> {
            Some(serde_json::from_str::<serde_json::Value>(line).ok()?.get(key)?.clone())
        };
        let mut patterns: Vec<String> = Vec::new();
        // Every suite regex and every other bench one (regex-syntax takes ~10 s for all of them).
        for (name, step) in [("regex_suite.jsonl", 1), ("jsonschemabench_regex.jsonl", 2)] {
            let lines = read(name);
            patterns.extend(lines.lines().step_by(step).filter_map(|l| Some(field(l, "regex")?.as_str()?.to_string())));
        }
        let regexes = patterns.len();
        for line in read("jsonschemabench_schemas.jsonl").lines().step_by(3) {
            let Some(schema) = field(line, "schema") else { continue };
            if let Some(converted) = crate::json_schema::schema_to_rules(&schema.to_string(), "[ ]?") {
                patterns.extend(converted.rules.into_iter().map(|(_, regex)| regex));
            }
        }
        let (mut answered, mut answered_rules, mut rules) = (0, 0, 0);
        for (i, pattern) in patterns.iter().enumerate() {
            let yes = agrees(pattern, i < regexes);
            answered += yes as usize;
            if i >= regexes {
                rules += 1;
                answered_rules += yes as usize;
            }
        }
        eprintln!("common subset: {answered} of {} patterns, {answered_rules} of {rules} rules", patterns.len());
        assert!(rules > 1000 && answered_rules * 100 >= rules * 95, "{answered_rules} of {rules} rules");
        assert!(answered * 10 >= patterns.len() * 8, "{answered} of {}", patterns.len());
    }
}
