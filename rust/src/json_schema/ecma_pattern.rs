//! `pattern` (ECMA-262 syntax) → a regex over the *JSON-encoded* string: the port of
//! `python/propertok/json_schema/_ecma_regex.py`, under the module's contract (byte-identical
//! output, or declined).
//!
//! A schema's `pattern` constrains the decoded string while the guide matches JSON text, so the
//! pattern is parsed into character sets, concatenation, alternation and repetition, and every
//! set is rendered as the JSON spellings of its members (raw where JSON allows, the escape
//! `json.dumps` writes where it must, `\uXXXX` for non-ASCII members too). The Python module's
//! docstring gives the semantics (search versus anchored alternatives, lengths, `MAX_COUNT`);
//! each function here mirrors the Python function of the same name.
//!
//! ## Declined where the Python result depends on Python's Unicode tables
//! * `\d` and `\w` are ECMA's ASCII classes intersected with Python's `re` classes ("sure")
//!   where a set adds them, and their union ("maybe") where a set removes them. The sure sets
//!   are ECMA's own (every ASCII digit and word character is one for Python too), but the
//!   unions need Python's Unicode database, whose version is the interpreter's: a pattern that
//!   needs one (`\D`, `\W`, or `\d`/`\w` inside `[^...]`) is declined. Python's `\s` (code
//!   points up to U+FFFF, as `_python_class` takes them) has been the same set for every
//!   Python 3, and is written out here ([`PYTHON_SPACE`]).
//! * Python's `str.isdigit`, `isalpha` and `isalnum` are Unicode-aware: where the parser would
//!   ask one of them about a non-ASCII character, the pattern is declined.
//! * Slices past the end (`\xA` or `\u41` closing a pattern) and counts beyond `i128` are
//!   declined, as are the places where Python raises (any exception, not only `PatternError`).
//!
//! ## Costs
//! Linear in the pattern apart from the set algebra (each set operation sorts its ranges) and
//! the length computation, which `_fit_length` repeats per item as Python does: patterns are
//! short, and this runs once per `pattern` value of a schema.

use super::jregex;
use super::{decline, Unhandled, R};

/// Code points as sorted, disjoint, inclusive ranges (surrogates never included): `Ranges`.
type Ranges = Vec<(u32, u32)>;

const MAX_CP: u32 = 0x10FFFF;
const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);
/// Python's `\s` (`str.isspace`) up to U+FFFF, as `_python_class("s")` computes it.
const PYTHON_SPACE: [(u32, u32); 10] = [
    (0x09, 0x0D),
    (0x1C, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
];
const ECMA_SPACE: [(u32, u32); 10] = [
    (9, 13),
    (32, 32),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
];
const DIGIT: [(u32, u32); 1] = [(0x30, 0x39)];
const WORD: [(u32, u32); 4] = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];
/// Code points JSON must escape.
const JSON_SPECIAL: [(u32, u32); 3] = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)];
/// The escapes `json.dumps` writes with one letter (`SHORT_ESCAPES`).
const SHORT_ESCAPES: [(u32, char); 7] =
    [(0x22, '"'), (0x5C, '\\'), (0x08, 'b'), (0x0C, 'f'), (0x0A, 'n'), (0x0D, 'r'), (0x09, 't')];

fn norm(mut ranges: Vec<(u32, u32)>) -> Ranges {
    ranges.sort_unstable();
    let mut out: Ranges = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        for (a, b) in [(lo, hi.min(SURROGATES.0 - 1)), (lo.max(SURROGATES.1 + 1), hi)] {
            if a > b {
                continue;
            }
            match out.last_mut() {
                Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
    }
    out
}

fn complement(r: &[(u32, u32)]) -> Ranges {
    let mut out = Vec::with_capacity(r.len() + 1);
    let mut start = 0;
    for &(lo, hi) in r {
        if lo > start {
            out.push((start, lo - 1));
        }
        start = hi + 1;
    }
    if start <= MAX_CP {
        out.push((start, MAX_CP));
    }
    norm(out)
}

fn intersect(a: &[(u32, u32)], b: &[(u32, u32)]) -> Ranges {
    let mut both = complement(a);
    both.extend(complement(b));
    complement(&norm(both))
}

fn chars(c: char) -> Ranges {
    norm(vec![(c as u32, c as u32)])
}

/// A set that may need Python's Unicode tables: `None` where it does (declined when used).
type MaybeSet = Option<Ranges>;

/// `_class_escape`: `(sure, maybe)` for `\d \w \s` and their complements.
fn class_escape(letter: char) -> (MaybeSet, MaybeSet) {
    let (sure, maybe) = match letter.to_ascii_lowercase() {
        'd' => (Some(norm(DIGIT.to_vec())), None),
        'w' => (Some(norm(WORD.to_vec())), None),
        _ => {
            let (ecma, python) = (norm(ECMA_SPACE.to_vec()), norm(PYTHON_SPACE.to_vec()));
            let union = norm([ecma.clone(), python.clone()].concat());
            (Some(intersect(&ecma, &python)), Some(union))
        }
    };
    if letter.is_ascii_lowercase() {
        (sure, maybe)
    } else {
        (maybe.map(|m| complement(&m)), sure.map(|s| complement(&s)))
    }
}

/// A parsed pattern (`_Parser`'s tuples).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Set(Ranges),
    Cat(Vec<Node>),
    Alt(Vec<Node>),
    Group(Box<Node>),
    Rep(Box<Node>, i128, Option<i128>),
    Start,
    End,
}

/// Python's `c.isdigit()` (and the like) for a character that may be absent (`""`): the ASCII
/// answer, or declined for a non-ASCII character, where Python consults its Unicode tables.
fn ascii_test(c: Option<char>, test: fn(&char) -> bool) -> R<bool> {
    match c {
        None => Ok(false),
        Some(c) if c.is_ascii() => Ok(test(&c)),
        Some(_) => decline("a pattern where Python's Unicode character tests would decide"),
    }
}

fn is_hex(s: &[char]) -> bool {
    !s.is_empty() && s.iter().all(char::is_ascii_hexdigit)
}

fn hex_value(s: &[char]) -> R<u32> {
    let text: String = s.iter().collect();
    u32::from_str_radix(&text, 16).map_err(|_| Unhandled("a hexadecimal escape beyond u32".into()))
}

fn decimal(s: &[char]) -> R<i128> {
    let text: String = s.iter().collect();
    text.parse().map_err(|_| Unhandled("a repetition count beyond i128".into()))
}

fn parse_error<T>() -> R<T> {
    decline("a pattern Python refuses (PatternError or another exception)")
}

/// `_Parser`.
struct Parser {
    p: Vec<char>,
    i: usize,
    /// A class range with a class escape at one end (`[\d-z]`) was read, "-" as a literal
    /// (ECMA's Annex B; Python's `re` refuses it).
    escape_range: bool,
}

impl Parser {
    fn peek(&self, k: usize) -> Option<char> {
        self.p.get(self.i + k).copied()
    }

    fn starts_with(&self, prefix: &str) -> bool {
        (self.i..).zip(prefix.chars()).all(|(j, c)| self.p.get(j) == Some(&c))
    }

    fn parse(&mut self) -> R<Node> {
        let node = self.disjunction()?;
        if self.i < self.p.len() {
            return parse_error();
        }
        Ok(node)
    }

    fn disjunction(&mut self) -> R<Node> {
        let mut branches = vec![self.alternative()?];
        while self.peek(0) == Some('|') {
            self.i += 1;
            branches.push(self.alternative()?);
        }
        Ok(if branches.len() == 1 { branches.pop().expect("one branch") } else { Node::Alt(branches) })
    }

    fn alternative(&mut self) -> R<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek(0) {
            if c == '|' || c == ')' {
                break;
            }
            items.push(self.term()?);
        }
        Ok(Node::Cat(items))
    }

    fn term(&mut self) -> R<Node> {
        match self.peek(0) {
            Some('^') => {
                self.i += 1;
                Ok(Node::Start)
            }
            Some('$') => {
                self.i += 1;
                Ok(Node::End)
            }
            _ => {
                let atom = self.atom()?;
                self.quantified(atom)
            }
        }
    }

    fn quantified(&mut self, atom: Node) -> R<Node> {
        let (lo, hi) = match self.peek(0) {
            Some(c @ ('*' | '+' | '?')) => {
                self.i += 1;
                match c {
                    '*' => (0, None),
                    '+' => (1, None),
                    _ => (0, Some(1)),
                }
            }
            Some('{') if self.quantifier_ahead()? => self.braces()?,
            _ => return Ok(atom),
        };
        if self.peek(0) == Some('?') {
            self.i += 1; // lazy: the same language
        }
        if matches!(atom, Node::Start | Node::End) || hi.is_some_and(|h| h < lo) {
            return parse_error();
        }
        Ok(Node::Rep(Box::new(atom), lo, hi))
    }

    fn quantifier_ahead(&self) -> R<bool> {
        let digit = |j: usize| ascii_test(self.p.get(j).copied(), char::is_ascii_digit);
        let mut j = self.i + 1;
        let digits = j;
        while digit(j)? {
            j += 1;
        }
        if j == digits {
            return Ok(false);
        }
        match self.p.get(j) {
            Some('}') => Ok(true),
            Some(',') => {
                j += 1;
                while digit(j)? {
                    j += 1;
                }
                Ok(self.p.get(j) == Some(&'}'))
            }
            _ => Ok(false),
        }
    }

    fn braces(&mut self) -> R<(i128, Option<i128>)> {
        let end = self.i + self.p[self.i..].iter().position(|&c| c == '}').expect("checked ahead");
        let body = &self.p[self.i + 1..end];
        self.i = end + 1;
        match body.iter().position(|&c| c == ',') {
            None => {
                let n = decimal(body)?;
                Ok((n, Some(n)))
            }
            Some(comma) => {
                let hi = &body[comma + 1..];
                Ok((decimal(&body[..comma])?, if hi.is_empty() { None } else { Some(decimal(hi)?) }))
            }
        }
    }

    fn atom(&mut self) -> R<Node> {
        match self.peek(0) {
            Some('(') => self.group(),
            Some('.') => {
                self.i += 1;
                Ok(Node::Set(complement(&norm(vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]))))
            }
            Some('[') => Ok(Node::Set(self.char_class()?)),
            Some('\\') => self.escape_atom(),
            Some('*' | '+' | '?') => parse_error(),
            Some('{') if self.quantifier_ahead()? => parse_error(),
            Some(c) => {
                self.i += 1;
                Ok(Node::Set(chars(c)))
            }
            None => unreachable!("atom at the end of the pattern"),
        }
    }

    fn group(&mut self) -> R<Node> {
        self.i += 1;
        if self.peek(0) == Some('?') {
            if self.starts_with("?:") {
                self.i += 2;
            } else if ["?=", "?!", "?<=", "?<!"].iter().any(|p| self.starts_with(p)) {
                return parse_error();
            } else if self.starts_with("?<") || self.starts_with("?P<") {
                match self.p[self.i..].iter().position(|&c| c == '>') {
                    Some(k) => self.i += k + 1,
                    None => return parse_error(),
                }
            } else {
                return parse_error();
            }
        }
        let inner = self.disjunction()?;
        if self.peek(0) != Some(')') {
            return parse_error();
        }
        self.i += 1;
        Ok(Node::Group(Box::new(inner)))
    }

    fn escape_atom(&mut self) -> R<Node> {
        self.i += 1;
        let c = self.peek(0);
        match c {
            None | Some('b' | 'B') => return parse_error(),
            Some('k') if self.peek(1) == Some('<') => return parse_error(),
            _ => {}
        }
        if ascii_test(c, char::is_ascii_digit)? && c != Some('0') {
            return parse_error();
        }
        match self.escape_body(false)?.0 {
            Some(set) => Ok(Node::Set(set)),
            None => decline("\\D or \\W, whose sets are Python's Unicode tables"),
        }
    }

    /// `escape_body`: after a backslash, the `(sure, maybe)` sets of the escape.
    fn escape_body(&mut self, in_class: bool) -> R<(MaybeSet, MaybeSet)> {
        let c = self.peek(0);
        self.i += 1;
        match c {
            None => parse_error(), // Python: KeyError in _class_escape("")
            Some(c @ ('d' | 'D' | 'w' | 'W' | 's' | 'S')) => Ok(class_escape(c)),
            Some(c) => {
                let one = self.char_escape(c, in_class)?;
                Ok((Some(one.clone()), Some(one)))
            }
        }
    }

    fn char_escape(&mut self, c: char, in_class: bool) -> R<Ranges> {
        if !c.is_ascii() {
            // Python asks `c.isalnum()` of it (an unknown escape, or an identity escape)
            return decline("a backslash before a non-ASCII character");
        }
        let simple = match c {
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'f' => Some('\x0C'),
            'v' => Some('\x0B'),
            'b' if in_class => Some('\x08'),
            _ => None,
        };
        if let Some(s) = simple {
            return Ok(chars(s));
        }
        if c == '0' && !ascii_test(self.peek(0), char::is_ascii_digit)? {
            return Ok(chars('\0'));
        }
        if c == 'c' && ascii_test(self.peek(0), char::is_ascii_alphabetic)? {
            let letter = self.p[self.i] as u32;
            self.i += 1;
            return Ok(norm(vec![(letter % 32, letter % 32)]));
        }
        if c == 'x' {
            if let Some(one) = self.hex_digits(2)? {
                return Ok(one);
            }
        }
        if c == 'u' {
            if self.peek(0) == Some('{') {
                let Some(end) = self.p[self.i..].iter().position(|&c| c == '}').map(|k| self.i + k) else {
                    return parse_error();
                };
                if !is_hex(&self.p[self.i + 1..end]) {
                    return parse_error();
                }
                let cp = hex_value(&self.p[self.i + 1..end])?;
                if cp > MAX_CP {
                    return decline("\\u{...} beyond U+10FFFF");
                }
                self.i = end + 1;
                return Ok(norm(vec![(cp, cp)]));
            }
            if let Some(one) = self.hex_digits(4)? {
                return Ok(one);
            }
        }
        if c.is_ascii_alphanumeric() {
            return parse_error();
        }
        Ok(chars(c))
    }

    /// The code point of the next `n` hex digits (`\xHH`, `\uHHHH`), `None` when they are not
    /// hex digits; declined when fewer remain, where Python's slice reads what is there.
    fn hex_digits(&mut self, n: usize) -> R<Option<Ranges>> {
        let rest = &self.p[self.i..];
        if !is_hex(&rest[..rest.len().min(n)]) {
            return Ok(None);
        }
        if rest.len() < n {
            return decline("a hex escape cut short by the end of the pattern (Python reads past it)");
        }
        let cp = hex_value(&rest[..n])?;
        self.i += n;
        Ok(Some(norm(vec![(cp, cp)])))
    }

    fn char_class(&mut self) -> R<Ranges> {
        self.i += 1;
        let negate = self.peek(0) == Some('^');
        if negate {
            self.i += 1;
        }
        let mut sure: MaybeSet = Some(Vec::new());
        let mut maybe: MaybeSet = Some(Vec::new());
        let mut extend = |(s, m): (MaybeSet, MaybeSet)| {
            sure = sure.take().zip(s).map(|(mut a, b)| {
                a.extend(b);
                a
            });
            maybe = maybe.take().zip(m).map(|(mut a, b)| {
                a.extend(b);
                a
            });
        };
        loop {
            match self.peek(0) {
                None => return parse_error(),
                Some(']') => {
                    self.i += 1;
                    break;
                }
                Some(_) => {}
            }
            let lo = self.class_atom()?;
            if self.peek(0) == Some('-') && !matches!(self.peek(1), None | Some(']')) {
                self.i += 1;
                let hi = self.class_atom()?;
                if let (Some(a), Some(b)) = (single(&lo), single(&hi)) {
                    if a > b {
                        return parse_error();
                    }
                    extend((Some(vec![(a, b)]), Some(vec![(a, b)])));
                    continue;
                }
                self.escape_range = true;
                let dash = vec![(0x2D, 0x2D)];
                extend(lo);
                extend((Some(dash.clone()), Some(dash)));
                extend(hi);
                continue;
            }
            extend(lo);
        }
        let chosen = if negate { maybe } else { sure };
        match chosen {
            Some(set) if negate => Ok(complement(&norm(set))),
            Some(set) => Ok(norm(set)),
            None => decline("a class that needs Python's Unicode \\d or \\w tables"),
        }
    }

    fn class_atom(&mut self) -> R<(MaybeSet, MaybeSet)> {
        let c = self.peek(0).expect("checked by the caller");
        if c == '\\' {
            self.i += 1;
            return self.escape_body(true);
        }
        if c == '[' && matches!(self.peek(1), Some(':' | '=' | '.')) {
            return parse_error();
        }
        self.i += 1;
        let one = chars(c);
        Ok((Some(one.clone()), Some(one)))
    }
}

/// `_single`: the code point of a one-character class atom.
fn single((sure, maybe): &(MaybeSet, MaybeSet)) -> Option<u32> {
    match (sure, maybe) {
        (Some(s), Some(m)) if s == m && s.len() == 1 && s[0].0 == s[0].1 => Some(s[0].0),
        _ => None,
    }
}

fn has_anchor(node: &Node) -> bool {
    match node {
        Node::Start | Node::End => true,
        Node::Cat(items) | Node::Alt(items) => items.iter().any(has_anchor),
        Node::Group(inner) | Node::Rep(inner, ..) => has_anchor(inner),
        Node::Set(_) => false,
    }
}

/// `_alternatives`: top-level alternatives as `(anchored at start, anchored at end, body)`.
fn alternatives(node: &Node, start: bool, end: bool, out: &mut Vec<(bool, bool, Node)>) -> R<()> {
    let misplaced = || decline("anchors elsewhere than at the start or end of the pattern");
    match node {
        Node::Group(inner) if has_anchor(node) => alternatives(inner, start, end, out),
        Node::Alt(branches) => branches.iter().try_for_each(|b| alternatives(b, start, end, out)),
        Node::Cat(items) => {
            let (mut start, mut end) = (start, end);
            let mut items = &items[..];
            while let [Node::Start, rest @ ..] = items {
                items = rest;
                start = true;
            }
            while let [rest @ .., Node::End] = items {
                items = rest;
                end = true;
            }
            if let [only @ (Node::Group(_) | Node::Alt(_) | Node::Cat(_))] = items {
                if has_anchor(only) {
                    return alternatives(only, start, end, out);
                }
            }
            if items.iter().any(has_anchor) {
                return misplaced();
            }
            out.push((start, end, Node::Cat(items.to_vec())));
            Ok(())
        }
        Node::Start | Node::End => {
            out.push((start || *node == Node::Start, end || *node == Node::End, Node::Cat(Vec::new())));
            Ok(())
        }
        _ if has_anchor(node) => misplaced(),
        _ => {
            out.push((start, end, node.clone()));
            Ok(())
        }
    }
}

/// `_length`: (min, max) code points the node matches (max `None`: unbounded).
fn length(node: &Node) -> R<(i128, Option<i128>)> {
    let overflow = || Unhandled("a pattern length beyond i128".into());
    Ok(match node {
        Node::Set(r) => {
            if r.is_empty() {
                (0, Some(0))
            } else {
                (1, Some(1))
            }
        }
        Node::Group(inner) => length(inner)?,
        Node::Cat(items) => {
            let (mut lo, mut hi) = (0i128, Some(0i128));
            for n in items {
                let (a, b) = length(n)?;
                lo = lo.checked_add(a).ok_or_else(overflow)?;
                hi = match (hi, b) {
                    (Some(h), Some(b)) => Some(h.checked_add(b).ok_or_else(overflow)?),
                    _ => None,
                };
            }
            (lo, hi)
        }
        Node::Alt(branches) => {
            let ls = branches.iter().map(length).collect::<R<Vec<_>>>()?;
            let lo = ls.iter().map(|l| l.0).min().expect("two branches or more");
            let hi = if ls.iter().any(|l| l.1.is_none()) { None } else { ls.iter().filter_map(|l| l.1).max() };
            (lo, hi)
        }
        Node::Rep(inner, lo, hi) => {
            let (a, b) = length(inner)?;
            let rep_hi = match (hi, b) {
                (Some(h), Some(b)) => Some(b.checked_mul(*h).ok_or_else(overflow)?),
                _ => None,
            };
            (a.checked_mul(*lo).ok_or_else(overflow)?, if b == Some(0) { Some(0) } else { rep_hi })
        }
        Node::Start | Node::End => (0, Some(0)),
    })
}

/// `J.class_char`: one code point inside a character class.
fn class_char(cp: u32, out: &mut String) {
    let c = char::from_u32(cp).expect("no surrogates in a set");
    if jregex::is_meta(c) {
        out.push('\\');
        out.push(c);
    } else if (0x20..0x7F).contains(&cp) {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{cp:X}}}"));
    }
}

/// `_encoded_set`: the JSON spellings of the code points of `r` (`None` when it is empty).
fn encoded_set(r: &[(u32, u32)]) -> Option<String> {
    let mut options = Vec::new();
    let raw = intersect(r, &complement(&JSON_SPECIAL));
    if !raw.is_empty() {
        options.push(render_class(&raw));
    }
    for (lo, hi) in intersect(r, &JSON_SPECIAL) {
        for cp in lo..=hi {
            let spelled = match SHORT_ESCAPES.iter().find(|(c, _)| *c == cp) {
                Some((_, letter)) => format!("\\{letter}"),
                None => format!("\\u{cp:04x}"),
            };
            options.push(jregex::escape_literal(&spelled));
        }
    }
    let non_ascii = intersect(r, &[(0x80, MAX_CP)]);
    if !non_ascii.is_empty() {
        options.push(unicode_escapes(&non_ascii));
    }
    (!options.is_empty()).then(|| jregex::alternation(options))
}

fn render_class(r: &[(u32, u32)]) -> String {
    if r.len() == 1 && r[0].0 == r[0].1 {
        let mut out = String::new();
        jregex::escape_char(char::from_u32(r[0].0).expect("no surrogates in a set"), &mut out);
        return out;
    }
    let comp = complement(r);
    if comp.len() < r.len() {
        format!("[^{}]", class_body(&comp))
    } else {
        format!("[{}]", class_body(r))
    }
}

fn class_body(r: &[(u32, u32)]) -> String {
    let mut out = String::new();
    for &(lo, hi) in r {
        class_char(lo, &mut out);
        if hi == lo + 1 {
            class_char(hi, &mut out);
        } else if hi > lo {
            out.push('-');
            class_char(hi, &mut out);
        }
    }
    out
}

/// `_unicode_escapes`: `\uXXXX` spellings of the non-ASCII code points of `r`.
fn unicode_escapes(r: &[(u32, u32)]) -> String {
    let mut options = Vec::new();
    for &(lo, hi) in r {
        let (a, b) = (lo, hi.min(0xFFFF));
        if a <= b {
            let range = hex_range(format!("{a:04x}").as_bytes(), format!("{b:04x}").as_bytes());
            options.push(format!("\\\\u{}", jregex::group(&range)));
        }
    }
    let contains_astral = r.iter().any(|&(lo, hi)| lo <= 0x10000 && 0x10000 <= hi);
    if contains_astral && intersect(r, &[(0x10000, MAX_CP)]) == [(0x10000, MAX_CP)] {
        options.push(format!("\\\\u{}", jregex::U_PAIR));
    }
    jregex::alternation(options)
}

/// `_hex_class`: the hex digits `a..=b`, letters in either case.
fn hex_class(a: usize, b: usize) -> String {
    let digits = &b"0123456789abcdef"[a..=b];
    let mut body: String = digits.iter().filter(|d| d.is_ascii_digit()).map(|&d| d as char).collect();
    let letters: Vec<char> = digits.iter().filter(|d| d.is_ascii_alphabetic()).map(|&d| d as char).collect();
    body.extend(letters.iter());
    body.extend(letters.iter().map(char::to_ascii_uppercase));
    if body.len() == 1 {
        body
    } else {
        format!("[{body}]")
    }
}

fn hex_digit(d: u8) -> usize {
    (d as char).to_digit(16).expect("a hex digit") as usize
}

/// `_hex_range`: hex strings of one length between `lo` and `hi` (lower case), either case.
fn hex_range(lo: &[u8], hi: &[u8]) -> String {
    if lo == hi {
        return lo.iter().map(|&d| hex_class(hex_digit(d), hex_digit(d))).collect();
    }
    if lo.len() == 1 {
        return hex_class(hex_digit(lo[0]), hex_digit(hi[0]));
    }
    let (first_lo, first_hi) = (hex_digit(lo[0]), hex_digit(hi[0]));
    if first_lo == first_hi {
        return hex_class(first_lo, first_lo) + &jregex::group(&hex_range(&lo[1..], &hi[1..]));
    }
    let k = lo.len() - 1;
    let (zeros, effs) = (vec![b'0'; k], vec![b'f'; k]);
    let (mut first, mut last) = (first_lo, first_hi);
    let mut parts = Vec::new();
    if lo[1..] != zeros[..] {
        parts.push(hex_class(first, first) + &jregex::group(&hex_range(&lo[1..], &effs)));
        first += 1;
    }
    let mut tail = None;
    if hi[1..] != effs[..] {
        tail = Some(hex_class(last, last) + &jregex::group(&hex_range(&zeros, &hi[1..])));
        last -= 1;
    }
    if first <= last {
        let rest = if k > 1 { format!("{}{{{k}}}", jregex::HEX) } else { jregex::HEX.to_string() };
        parts.push(hex_class(first, last) + &rest);
    }
    parts.extend(tail);
    jregex::alternation(parts)
}

/// `_render`.
fn render(node: &Node) -> R<String> {
    Ok(match node {
        Node::Set(r) => match encoded_set(r) {
            Some(out) => out,
            None => return parse_error(), // an empty character class
        },
        Node::Group(inner) => format!("(?:{})", render(inner)?),
        Node::Cat(items) => items.iter().map(render).collect::<R<String>>()?,
        Node::Alt(branches) => format!("(?:{})", branches.iter().map(render).collect::<R<Vec<_>>>()?.join("|")),
        Node::Rep(inner, lo, hi) => {
            if *lo > jregex::MAX_COUNT {
                return parse_error();
            }
            let hi = hi.map(|h| h.min(jregex::MAX_COUNT));
            jregex::repeat(&format!("(?:{})", render(inner)?), *lo, hi)
        }
        Node::Start | Node::End => return parse_error(),
    })
}

/// `J.length_bounds` over these lengths: whether every length in `within` lies in `[lo, hi]`.
fn lengths_within(lo: i128, hi: Option<i128>, (w_lo, w_hi): (i128, Option<i128>)) -> bool {
    w_lo >= lo && hi.is_none_or(|h| w_hi.is_some_and(|w| w <= h))
}

/// What `_fit_length` makes of a body.
enum Fitted {
    Body(Node),
    /// No string of the body has an allowed length (`("empty",)`).
    Empty,
    /// No way to combine them is known (`None`: Python raises).
    Unknown,
}

/// `_fit_length`: `body` restricted to lengths in `[lo, hi]`.
fn fit_length(body: &Node, lo: i128, hi: Option<i128>) -> R<Fitted> {
    let (b_lo, b_hi) = length(body)?;
    if lengths_within(lo, hi, (b_lo, b_hi)) {
        return Ok(Fitted::Body(body.clone()));
    }
    if hi.is_some_and(|h| b_lo > h) || b_hi.is_some_and(|b| b < lo) {
        return Ok(Fitted::Empty);
    }
    let mut items = match body {
        Node::Cat(items) => items.clone(),
        other => vec![other.clone()],
    };
    while let [Node::Group(inner)] = &items[..] {
        items = match &**inner {
            Node::Cat(inner_items) => inner_items.clone(),
            other => vec![other.clone()],
        };
    }
    let lengths = items.iter().map(length).collect::<R<Vec<_>>>()?;
    let variable: Vec<usize> = (0..items.len()).filter(|&i| Some(lengths[i].0) != lengths[i].1).collect();
    let [k] = variable[..] else { return Ok(Fitted::Unknown) };
    let Node::Rep(inner, rep_lo, rep_hi) = &items[k] else { return Ok(Fitted::Unknown) };
    if length(inner)? != (1, Some(1)) {
        return Ok(Fitted::Unknown);
    }
    let overflow = || Unhandled("a pattern length beyond i128".into());
    let mut fixed = 0i128;
    for (j, l) in lengths.iter().enumerate() {
        if j != k {
            fixed = fixed.checked_add(l.0).ok_or_else(overflow)?;
        }
    }
    let r_lo = (*rep_lo).max(lo - fixed);
    let r_hi = match (hi, rep_hi) {
        (None, _) => *rep_hi,
        (Some(h), None) => Some(h - fixed),
        (Some(h), Some(r)) => Some((*r).min(h - fixed)),
    };
    if r_hi.is_some_and(|h| h < r_lo) {
        return Ok(Fitted::Empty);
    }
    items[k] = Node::Rep(inner.clone(), r_lo, r_hi);
    Ok(Fitted::Body(Node::Cat(items)))
}

/// `pattern_to_regex`: the JSON string *content* (no quotes) of the strings that match
/// `pattern` and have `min_length..=max_length` code points; declined wherever Python raises.
pub fn pattern_to_regex(pattern: &str, min_length: i128, max_length: Option<i128>) -> R<String> {
    let tree = Parser { p: pattern.chars().collect(), i: 0, escape_range: false }.parse()?;
    let mut alts = Vec::new();
    alternatives(&tree, false, false, &mut alts)?;
    let mut options = Vec::new();
    for (mut start, mut end, body) in alts {
        if body == Node::Cat(Vec::new()) && !(start && end) {
            (start, end) = (true, false);
        }
        if start == end {
            match fit_length(&body, min_length, max_length)? {
                Fitted::Unknown => return decline("length bounds the pattern cannot be combined with"),
                Fitted::Empty => {}
                Fitted::Body(fitted) => options.push(render(&fitted)?),
            }
            continue;
        }
        let (b_lo, b_hi) = length(&body)?;
        if Some(b_lo) != b_hi && (min_length > b_lo || max_length.is_some()) {
            return decline("length bounds with a prefix or suffix pattern");
        }
        let any_lo = (min_length - b_lo).max(0);
        let mut any_hi = max_length.map(|m| m - b_lo);
        if any_hi.is_some_and(|h| h < any_lo) {
            continue;
        }
        any_hi = any_hi.map(|h| h.min(any_lo.max(jregex::MAX_COUNT)));
        let unit = if any_hi.is_none() { jregex::STRING_CHAR } else { jregex::BOUNDED_STRING_CHAR };
        let filler = jregex::repeat(unit, any_lo, any_hi);
        let rendered = render(&body)?;
        options.push(if start { rendered + &filler } else { filler + &rendered });
    }
    if options.is_empty() {
        return decline("no string matches the pattern with these lengths (Python raises)");
    }
    Ok(jregex::alternation(options))
}

/// Longest text [`python_search`] judges, and the most copies a repetition may require there.
const MAX_SEARCH_TEXT: usize = 1024;
const MAX_SEARCH_COUNT: i128 = 4096;

/// `_python_search(pattern, text)`, Python's `re.search`, for a text of printable ASCII
/// characters and a pattern that Python's `re` and ECMA-262 read alike. Declined otherwise:
/// other texts, `{,n}` (a quantifier for Python, literal text for ECMA), `[]` and `[^]` (an
/// empty and a full class for ECMA, not for Python), `(?<name>`, `\u{...}` and `\cX` (not
/// Python syntax), a class range with a class escape at one end, and whatever [`pattern_to_regex`]'s
/// parser refuses. On such texts the two engines also agree on `\d \w \s` (ASCII there), `.`
/// and `$` (no line terminator in the text), so the pattern's tree decides: each top-level
/// alternative (see `alternatives`) is searched, anchored where it is.
pub fn python_search(pattern: &str, text: &str) -> R<bool> {
    if text.len() > MAX_SEARCH_TEXT || !text.bytes().all(|b| (0x20..0x7F).contains(&b)) {
        return decline("a text other than printable ASCII searched with Python's re");
    }
    if ["{,", "[]", "[^]", "(?<", "\\u{", "\\c"].iter().any(|s| pattern.contains(s)) {
        return decline("syntax Python's re reads otherwise than ECMA-262");
    }
    let mut parser = Parser { p: pattern.chars().collect(), i: 0, escape_range: false };
    let tree = parser.parse()?;
    if parser.escape_range {
        return decline("a class range ending in a class escape (Python's re refuses it)");
    }
    let mut alts = Vec::new();
    alternatives(&tree, false, false, &mut alts)?;
    let text: Vec<u32> = text.bytes().map(u32::from).collect();
    for (start, end, body) in alts {
        let mut from = vec![!start; text.len() + 1];
        from[0] = true;
        let to = ends(&body, &from, &text)?;
        if if end { to[text.len()] } else { to.contains(&true) } {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The positions of `text` where a match of `node` starting at a position in `from` can end.
fn ends(node: &Node, from: &[bool], text: &[u32]) -> R<Vec<bool>> {
    Ok(match node {
        Node::Set(r) => {
            let mut to = vec![false; from.len()];
            for (p, &c) in text.iter().enumerate() {
                to[p + 1] = from[p] && r.iter().any(|&(lo, hi)| lo <= c && c <= hi);
            }
            to
        }
        Node::Group(inner) => ends(inner, from, text)?,
        Node::Cat(items) => {
            let mut at = from.to_vec();
            for item in items {
                at = ends(item, &at, text)?;
            }
            at
        }
        Node::Alt(branches) => {
            let mut to = vec![false; from.len()];
            for b in branches {
                for (t, e) in to.iter_mut().zip(ends(b, from, text)?) {
                    *t |= e;
                }
            }
            to
        }
        Node::Rep(inner, lo, hi) => {
            if *lo > MAX_SEARCH_COUNT {
                return decline("a repetition too long to search");
            }
            let mut at = from.to_vec();
            for _ in 0..*lo {
                at = ends(inner, &at, text)?;
            }
            let mut reached = at.clone();
            match hi {
                None => loop {
                    // a least fixpoint: the image of a union is the union of the images
                    let next = ends(inner, &reached, text)?;
                    let mut grew = false;
                    for (r, e) in reached.iter_mut().zip(next) {
                        grew |= e && !*r;
                        *r |= e;
                    }
                    if !grew {
                        break reached;
                    }
                },
                Some(hi) => {
                    // More copies than the text has characters add nothing: a path with more
                    // has empty ones, which can be dropped (down to `lo` copies).
                    for _ in 0..(hi - lo).min(text.len() as i128 + 1) {
                        at = ends(inner, &at, text)?;
                        if !at.contains(&true) {
                            break;
                        }
                        reached.iter_mut().zip(&at).for_each(|(r, a)| *r |= *a);
                    }
                    reached
                }
            }
        }
        Node::Start | Node::End => return decline("an anchor inside the pattern"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_space_class_is_written_out_as_python_computes_it() {
        // what `_class_escape("s")` returns (checked against Python 3.11)
        let (sure, maybe) = class_escape('s');
        assert_eq!(
            sure.unwrap(),
            vec![
                (9, 13),
                (32, 32),
                (160, 160),
                (5760, 5760),
                (8192, 8202),
                (8232, 8233),
                (8239, 8239),
                (8287, 8287),
                (12288, 12288)
            ]
        );
        assert_eq!(maybe.unwrap().last(), Some(&(65279, 65279)));
    }

    #[test]
    fn the_surrogate_pair_unit_is_the_one_json_strings_use() {
        assert!(jregex::STRING_CHAR.contains(&format!("|{})))", jregex::U_PAIR)));
    }

    #[test]
    fn the_unicode_tables_of_python_are_declined_not_guessed() {
        for pattern in [r"\D", r"\W", r"[^\d]", r"[^a\w]", r"^\W+$"] {
            assert!(pattern_to_regex(pattern, 0, None).is_err(), "{pattern}");
        }
        for pattern in [r"\d", r"\w", r"[^\D]", r"[\d\w]", r"\S", r"[^\s]", "[^\\W]"] {
            assert!(pattern_to_regex(pattern, 0, None).is_ok(), "{pattern}");
        }
        for pattern in ["\\é", "a{1²}", "\\c\u{e9}", "\\xA", "\\u41"] {
            assert!(pattern_to_regex(pattern, 0, None).is_err(), "{pattern}");
        }
    }

    #[test]
    fn a_search_is_python_s_on_printable_ascii() {
        for (pattern, text, want) in [
            ("^x-", "x-foo", true),
            ("^x-", "ax-", false),
            ("a$", "ba", true),
            ("a$", "ab", false),
            ("a{2,3}", "aa", true),
            ("^a{2,3}$", "aaaa", false),
            ("^a{2,}$", "aaaa", true),
            ("(ab)*c", "ababc", true),
            ("^(a|b)*$", "", true),
            ("^(a|)*b$", "aab", true),
            ("^(a?){3,5}$", "a", true),
            ("x*", "", true),
            ("[^a]", "a", false),
            (r"\d", "a1", true),
            (r"^\w+$", "a_1", true),
            (r"^\w+$", "a-1", false),
            ("^.$", "~", true),
            ("^a|b$", "ab", true),
            ("^a|c$", "ba", false),
        ] {
            assert_eq!(python_search(pattern, text), Ok(want), "{pattern} in {text:?}");
        }
        for (pattern, text) in
            [("a{,3}", "a"), ("[]", "a"), ("a", "caf\u{e9}"), ("a", "a\n"), (r"[\d-z]", "-"), (r"\D", "a")]
        {
            assert!(python_search(pattern, text).is_err(), "{pattern} in {text:?}");
        }
    }

    #[test]
    fn a_rendered_pattern_matches_the_json_text_of_its_strings() {
        let regex = pattern_to_regex(r"^[a-c\x22]\d{2}$", 0, None).unwrap();
        let re = regex_automata::meta::Regex::new(&format!("^(?:{regex})$")).unwrap();
        for (text, want) in [("a12", true), (r#"\"07"#, true), ("d12", false), ("a1", false), ("\"07", false)] {
            assert_eq!(re.is_match(text), want, "{text} against {regex}");
        }
    }
}
