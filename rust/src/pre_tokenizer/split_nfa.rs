//! Pre-tokenizer `Split` patterns → priority NFAs over characters.
//!
//! Hugging Face `tokenizers` runs each `Split(regex, Isolated)` stage with Oniguruma's
//! `find_iter`: leftmost-first search with backtracking priorities (the left branch of an
//! alternation is tried first, a greedy quantifier prefers one more iteration, a lazy one
//! prefers to stop). A [`SplitNfa`] keeps exactly that information: it is a Thompson NFA whose
//! [`Node::Split`] nodes are *ordered* (`preferred` before `other`), so a Pike VM that explores
//! threads in priority order finds the same match as the backtracker (see
//! [`crate::pre_tokenizer::piece_machine`]). [`CharClasses`] partitions all Unicode scalar values into the
//! classes that no node of any stage distinguishes, so automata built from the NFAs work on
//! class ids instead of characters.
//!
//! # Supported syntax
//! Everything `regex-syntax` (Unicode mode) parses into literals, classes, alternation,
//! concatenation, groups and repetition (greedy or lazy; counted repetitions are expanded),
//! plus the zero-width assertions that only look at the *next* character, which `regex-syntax`
//! does not parse and which we therefore replace by placeholder characters before parsing:
//! * `(?!X)` / `(?=X)` with `X` one character or one class (`\S`, `[\r\n]`, `a`, `\p{L}`);
//! * `$` — Oniguruma's (Ruby syntax) end of line: at the end of the subject or before `\n`;
//! * `\z` — at the end of the subject.
//!
//! Each becomes a [`Node::Assert`]: "the next character is in `class` (XOR `negated`), or we
//! are at the end of the subject and `at_end_holds`".
//!
//! Rejected with [`Error::Unsupported`], naming the construct: look-behind, a look-ahead whose
//! body is more than one character class, backreferences, atomic groups, possessive
//! quantifiers, `^`/`\A`/`\Z`, word boundaries, byte classes, a repetition other than `?`
//! of something that can match the empty string (Oniguruma's empty-loop checks differ from a
//! Pike VM's there), any pattern that can match the empty string at all (HF's handling of
//! empty matches is not the isolated-piece rule modelled here), and NFAs over
//! [`MAX_NFA_NODES`] nodes.
//!
//! # Costs
//! The NFA is linear in the pattern after counted repetitions are expanded (`x{1,3}` costs
//! three copies of `x`). [`CharClasses::new`] sorts all range endpoints: `O(r log r)` for `r`
//! ranges, plus one signature bit per (elementary interval, distinct range set).

use std::collections::HashMap;

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use crate::error::{Error, Result};

/// Index of a node in [`SplitNfa::nodes`].
pub type NodeId = u32;

/// Largest NFA accepted (after expanding counted repetitions).
pub const MAX_NFA_NODES: usize = 10_000;

/// Sorted, non-overlapping, non-adjacent inclusive character ranges.
pub type CharRanges = Vec<(char, char)>;

/// One NFA node. Only `Class` consumes a character; the others are zero-width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Consume one character in `ranges`, then continue at `next`.
    Class { ranges: CharRanges, next: NodeId },
    /// Try `preferred` first, then `other` (backtracking priority).
    Split { preferred: NodeId, other: NodeId },
    /// Continue at `next` without consuming.
    Epsilon { next: NodeId },
    /// The pattern has matched.
    Match,
    /// Continue at `next` iff the next character is in `class` XOR `negated`, or, at the end
    /// of the subject, iff `at_end_holds`.
    Assert { class: CharRanges, negated: bool, at_end_holds: bool, next: NodeId },
}

/// A priority NFA for one pre-tokenizer pattern. See the module docs.
#[derive(Clone, Debug)]
pub struct SplitNfa {
    pub pattern: String,
    pub nodes: Vec<Node>,
    pub start: NodeId,
}

/// A zero-width assertion found by [`preprocess`], standing in the pattern as `placeholder`.
#[derive(Clone, Debug)]
struct AssertSpec {
    placeholder: char,
    class: CharRanges,
    negated: bool,
    at_end_holds: bool,
}

fn unsupported(pattern: &str, what: &str) -> Error {
    Error::Unsupported(format!("pre-tokenizer pattern {pattern:?}: {what} is not supported"))
}

impl SplitNfa {
    /// Parses `pattern` (Oniguruma syntax as HF uses it) into a priority NFA.
    pub fn new(pattern: &str) -> Result<SplitNfa> {
        let (rewritten, asserts) = preprocess(pattern)?;
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(true)
            .utf8(true)
            .build()
            .parse(&rewritten)
            .map_err(|e| unsupported(pattern, &format!("syntax that regex-syntax rejects ({e})")))?;
        let mut b = Builder { pattern, nodes: Vec::new(), asserts: &asserts };
        let matched = b.push(Node::Match)?;
        let start = b.compile(&hir, matched)?;
        let nfa = SplitNfa { pattern: pattern.to_string(), nodes: b.nodes, start };
        if nfa.can_match_empty() {
            return Err(unsupported(pattern, "a pattern that can match the empty string"));
        }
        Ok(nfa)
    }

    /// Whether `Match` is reachable from `start` without consuming (assertions assumed to
    /// hold: conservative).
    fn can_match_empty(&self) -> bool {
        self.nullable_from(self.start)
    }

    /// Whether `Match` is reachable from `from` through zero-width nodes only.
    fn nullable_from(&self, from: NodeId) -> bool {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut seen[n as usize], true) {
                continue;
            }
            match &self.nodes[n as usize] {
                Node::Match => return true,
                Node::Class { .. } => {}
                Node::Split { preferred, other } => stack.extend([*preferred, *other]),
                Node::Epsilon { next } | Node::Assert { next, .. } => stack.push(*next),
            }
        }
        false
    }

    /// Every character set a node tests (consuming classes and assertion classes).
    pub fn char_sets(&self) -> impl Iterator<Item = &[(char, char)]> {
        self.nodes.iter().filter_map(|n| match n {
            Node::Class { ranges, .. } => Some(ranges.as_slice()),
            Node::Assert { class, .. } => Some(class.as_slice()),
            _ => None,
        })
    }
}

struct Builder<'a> {
    pattern: &'a str,
    nodes: Vec<Node>,
    asserts: &'a [AssertSpec],
}

impl Builder<'_> {
    fn push(&mut self, node: Node) -> Result<NodeId> {
        if self.nodes.len() >= MAX_NFA_NODES {
            return Err(unsupported(self.pattern, &format!("a pattern whose NFA has more than {MAX_NFA_NODES} nodes")));
        }
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as NodeId)
    }

    /// A node consuming `c`, or the assertion `c` stands for.
    fn char_node(&mut self, c: char, next: NodeId) -> Result<NodeId> {
        if let Some(a) = self.asserts.iter().find(|a| a.placeholder == c) {
            let node = Node::Assert { class: a.class.clone(), negated: a.negated, at_end_holds: a.at_end_holds, next };
            return self.push(node);
        }
        self.push(Node::Class { ranges: vec![(c, c)], next })
    }

    /// Compiles `hir` so that a match of it continues at `next` (continuation-passing, so
    /// alternation branches and repetition exits share their continuation).
    fn compile(&mut self, hir: &Hir, next: NodeId) -> Result<NodeId> {
        match hir.kind() {
            HirKind::Empty => Ok(next),
            HirKind::Literal(lit) => {
                let s = std::str::from_utf8(&lit.0).map_err(|_| unsupported(self.pattern, "a non-UTF-8 literal"))?;
                let mut cur = next;
                for c in s.chars().rev() {
                    cur = self.char_node(c, cur)?;
                }
                Ok(cur)
            }
            HirKind::Class(Class::Unicode(cls)) => {
                let ranges: CharRanges = cls.ranges().iter().map(|r| (r.start(), r.end())).collect();
                if let [(a, b)] = ranges[..] {
                    if a == b && self.asserts.iter().any(|s| s.placeholder == a) {
                        return self.char_node(a, next);
                    }
                }
                self.push(Node::Class { ranges, next })
            }
            HirKind::Class(Class::Bytes(_)) => Err(unsupported(self.pattern, "a byte class (?-u)")),
            HirKind::Look(look) => Err(unsupported(self.pattern, look_name(*look))),
            HirKind::Capture(cap) => self.compile(&cap.sub, next),
            HirKind::Concat(subs) => {
                let mut cur = next;
                for sub in subs.iter().rev() {
                    cur = self.compile(sub, cur)?;
                }
                Ok(cur)
            }
            HirKind::Alternation(subs) => {
                let branches = subs.iter().map(|s| self.compile(s, next)).collect::<Result<Vec<_>>>()?;
                let mut cur = *branches.last().expect("alternation has two or more branches");
                for &b in branches.iter().rev().skip(1) {
                    cur = self.push(Node::Split { preferred: b, other: cur })?;
                }
                Ok(cur)
            }
            HirKind::Repetition(rep) => {
                // Oniguruma ends a loop iteration that matched the empty string ("empty
                // check"), which a Pike VM does not model: only `x?` may have a nullable `x`.
                let checked = rep.max != Some(1);
                let copy = |b: &mut Self, cont: NodeId| -> Result<NodeId> {
                    let body = b.compile(&rep.sub, cont)?;
                    if checked && b.nullable_between(body, cont) {
                        let what = "a repetition (other than `?`) of a sub-pattern that can match the empty string";
                        return Err(unsupported(b.pattern, what));
                    }
                    Ok(body)
                };
                let mut cur = next;
                match rep.max {
                    None => {
                        // x* : a loop head that prefers one more iteration when greedy.
                        let head = self.push(Node::Epsilon { next })?;
                        let body = copy(self, head)?;
                        self.nodes[head as usize] = if rep.greedy {
                            Node::Split { preferred: body, other: next }
                        } else {
                            Node::Split { preferred: next, other: body }
                        };
                        cur = head;
                    }
                    Some(max) => {
                        // x{0,k} = (x(x(...)?)?)? : every exit continues at `next`.
                        for _ in rep.min..max {
                            let body = copy(self, cur)?;
                            cur = if rep.greedy {
                                self.push(Node::Split { preferred: body, other: next })?
                            } else {
                                self.push(Node::Split { preferred: next, other: body })?
                            };
                        }
                    }
                }
                for _ in 0..rep.min {
                    cur = copy(self, cur)?;
                }
                Ok(cur)
            }
        }
    }

    /// Whether `to` is reachable from `from` through zero-width nodes (the loop body can
    /// come back to its head without consuming).
    fn nullable_between(&self, from: NodeId, to: NodeId) -> bool {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if std::mem::replace(&mut seen[n as usize], true) {
                continue;
            }
            match &self.nodes[n as usize] {
                Node::Match | Node::Class { .. } => {}
                Node::Split { preferred, other } => stack.extend([*preferred, *other]),
                Node::Epsilon { next } | Node::Assert { next, .. } => stack.push(*next),
            }
        }
        false
    }
}

fn look_name(look: Look) -> &'static str {
    match look {
        Look::Start => "`^` / `\\A` (start anchors need look-behind)",
        Look::End => "an end anchor other than `$` / `\\z`",
        Look::StartLF | Look::StartCRLF => "a multi-line `^` (needs look-behind)",
        Look::EndLF | Look::EndCRLF => "a multi-line `$`",
        _ => "a word boundary (`\\b`, `\\B`, `\\<`, `\\>`)",
    }
}

/// Replaces the one-character look-aheads, `$` and `\z` by placeholder characters (unused
/// supplementary private-use characters) and rejects the Oniguruma constructs `regex-syntax`
/// would misread or reject with a less helpful message.
fn preprocess(pattern: &str) -> Result<(String, Vec<AssertSpec>)> {
    let chars: Vec<char> = pattern.chars().collect();
    let n = chars.len();
    let mut out = String::with_capacity(pattern.len());
    let mut asserts: Vec<AssertSpec> = Vec::new();
    let mut next_placeholder = 0x10_0000u32;
    let mut new_placeholder = |asserts: &Vec<AssertSpec>| -> char {
        loop {
            let c = char::from_u32(next_placeholder).expect("private use plane 16");
            next_placeholder += 1;
            if !chars.contains(&c) && !asserts.iter().any(|a| a.placeholder == c) {
                return c;
            }
        }
    };
    // Case-insensitivity in effect, and the value to restore at each `)`.
    let mut ci = false;
    let mut group_stack: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < n {
        let c = chars[i];
        match c {
            '\\' => {
                let end = escape_end(&chars, i);
                match chars.get(i + 1) {
                    Some('1'..='9') => return Err(unsupported(pattern, "a backreference")),
                    Some('k') if chars.get(i + 2) == Some(&'<') => {
                        return Err(unsupported(pattern, "a named backreference"))
                    }
                    Some('z') => {
                        let p = new_placeholder(&asserts);
                        let spec = AssertSpec { placeholder: p, class: vec![], negated: false, at_end_holds: true };
                        asserts.push(spec);
                        out.push(p);
                    }
                    Some('Z') => return Err(unsupported(pattern, "`\\Z` (end or before a final newline)")),
                    Some('G') => return Err(unsupported(pattern, "`\\G`")),
                    _ => out.extend(&chars[i..end]),
                }
                i = end;
            }
            '[' => {
                let end =
                    class_end(&chars, i).ok_or_else(|| unsupported(pattern, "an unterminated character class"))?;
                out.extend(&chars[i..end]);
                i = end;
            }
            '$' => {
                let p = new_placeholder(&asserts);
                asserts.push(AssertSpec {
                    placeholder: p,
                    class: vec![('\n', '\n')],
                    negated: false,
                    at_end_holds: true,
                });
                out.push(p);
                i += 1;
            }
            '(' if chars.get(i + 1) == Some(&'?') => {
                let rest: String = chars[i + 2..n.min(i + 4)].iter().collect();
                if rest.starts_with('!') || rest.starts_with('=') {
                    let negated = rest.starts_with('!');
                    let body_start = i + 3;
                    let body_end = atom_end(&chars, body_start);
                    let ok = body_end.is_some_and(|e| chars.get(e) == Some(&')'));
                    if !ok {
                        return Err(unsupported(pattern, "a look-ahead whose body is not a single character or class"));
                    }
                    let body_end = body_end.unwrap();
                    let body: String = chars[body_start..body_end].iter().collect();
                    let class = atom_class(pattern, &body, ci)?;
                    let p = new_placeholder(&asserts);
                    // (?!X) holds at the end (no X follows); (?=X) does not.
                    asserts.push(AssertSpec { placeholder: p, class, negated, at_end_holds: negated });
                    out.push(p);
                    i = body_end + 1;
                    continue;
                }
                if rest.starts_with("<=") || rest.starts_with("<!") {
                    return Err(unsupported(pattern, "look-behind"));
                }
                if rest.starts_with('>') {
                    return Err(unsupported(pattern, "an atomic group `(?>...)`"));
                }
                if rest.starts_with('~') {
                    return Err(unsupported(pattern, "the absent operator `(?~...)`"));
                }
                if rest.starts_with('#') {
                    return Err(unsupported(pattern, "a comment group `(?#...)`"));
                }
                // A flag group `(?flags)` or `(?flags:...)`, or a named group.
                let mut j = i + 2;
                while j < n && (chars[j].is_ascii_alphabetic() || chars[j] == '-') {
                    j += 1;
                }
                let flags: String = chars[i + 2..j].iter().collect();
                let is_flags = j < n && (chars[j] == ':' || chars[j] == ')') && !flags.is_empty();
                if is_flags {
                    if flags.contains('x') {
                        return Err(unsupported(pattern, "extended mode `(?x)`"));
                    }
                    let mut on = true;
                    let mut new_ci = ci;
                    for f in flags.chars() {
                        match f {
                            '-' => on = false,
                            'i' => new_ci = on,
                            _ => {}
                        }
                    }
                    if chars[j] == ':' {
                        group_stack.push(ci);
                    }
                    ci = new_ci;
                } else {
                    group_stack.push(ci);
                }
                out.extend(&chars[i..=j.min(n - 1)]);
                i = j + 1;
            }
            '(' => {
                group_stack.push(ci);
                out.push(c);
                i += 1;
            }
            ')' => {
                ci = group_stack.pop().unwrap_or(ci);
                out.push(c);
                i += 1;
            }
            '*' | '+' | '?' | '{' => {
                // A quantifier: for `{`, only a well-formed `{n}`, `{n,}`, `{n,m}` (otherwise a
                // literal brace).
                let end = if c == '{' { counted_end(&chars, i) } else { Some(i + 1) };
                let end = end.unwrap_or(i + 1);
                out.extend(&chars[i..end]);
                i = end;
                let quantifier = c != '{' || chars[end - 1] == '}';
                if quantifier && chars.get(i) == Some(&'+') {
                    // Possessive (`*+`, `++`, `?+`); after `{n,m}` Ruby syntax reads a
                    // repetition of a repetition instead. Neither is modelled.
                    return Err(unsupported(pattern, "a possessive quantifier (or `{n,m}+`)"));
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok((out, asserts))
}

/// End (exclusive) of the counted repetition `{n}`, `{n,}` or `{n,m}` at `i`, if it is one.
fn counted_end(chars: &[char], i: usize) -> Option<usize> {
    let close = i + chars[i..].iter().position(|&c| c == '}')?;
    let body: String = chars[i + 1..close].iter().collect();
    let (lo, hi) = body.split_once(',').unwrap_or((&body, "0"));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    (!lo.is_empty() && digits(lo) && digits(hi)).then_some(close + 1)
}

/// End (exclusive) of the escape sequence starting with the `\` at `i`.
fn escape_end(chars: &[char], i: usize) -> usize {
    let n = chars.len();
    let Some(&e) = chars.get(i + 1) else { return n };
    let braced = |from: usize| match chars[from..].iter().position(|&c| c == '}') {
        Some(k) => from + k + 1,
        None => n,
    };
    match e {
        'p' | 'P' | 'x' | 'u' | 'U' if chars.get(i + 2) == Some(&'{') => braced(i + 2),
        'p' | 'P' => (i + 3).min(n),
        'x' => (i + 4).min(n),
        'u' => (i + 6).min(n),
        'U' => (i + 10).min(n),
        _ => i + 2,
    }
}

/// End (exclusive) of the bracketed class starting at `i`, or `None` if unterminated.
fn class_end(chars: &[char], mut i: usize) -> Option<usize> {
    let n = chars.len();
    let mut depth = 0;
    // At a class opening: skip `[`, an optional `^`, and a leading literal `]`.
    let open = |i: &mut usize| {
        *i += 1;
        if chars.get(*i) == Some(&'^') {
            *i += 1;
        }
        if chars.get(*i) == Some(&']') {
            *i += 1;
        }
    };
    open(&mut i);
    depth += 1;
    while i < n {
        match chars[i] {
            '\\' => i = escape_end(chars, i),
            '[' => {
                open(&mut i);
                depth += 1;
            }
            ']' => {
                i += 1;
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// End (exclusive) of the single atom (one character, escape or class) at `i`.
fn atom_end(chars: &[char], i: usize) -> Option<usize> {
    match chars.get(i)? {
        '\\' => Some(escape_end(chars, i)),
        '[' => class_end(chars, i),
        '(' | ')' | '|' | '*' | '+' | '?' | '{' | '}' | '^' | '$' => None,
        _ => Some(i + 1),
    }
}

/// The character set of one atom (`\S`, `[\r\n]`, `a`, `.`), case-folded under `(?i)`.
fn atom_class(pattern: &str, atom: &str, ci: bool) -> Result<CharRanges> {
    let wrapped = if ci { format!("(?i:{atom})") } else { atom.to_string() };
    let bad = || unsupported(pattern, &format!("the look-ahead body {atom:?}"));
    let hir = regex_syntax::ParserBuilder::new().unicode(true).utf8(true).build().parse(&wrapped).map_err(|_| bad())?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(cls)) => Ok(cls.ranges().iter().map(|r| (r.start(), r.end())).collect()),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).map_err(|_| bad())?;
            let mut it = s.chars();
            match (it.next(), it.next()) {
                (Some(c), None) => Ok(vec![(c, c)]),
                _ => Err(bad()),
            }
        }
        _ => Err(bad()),
    }
}

/// A partition of all Unicode scalar values into classes that no given character set
/// distinguishes. Class ids are dense, `0..num_classes()`.
#[derive(Clone, Debug)]
pub struct CharClasses {
    /// Start code point of each maximal interval of equal class, ascending, first is 0.
    starts: Vec<u32>,
    /// Class of each interval.
    ids: Vec<u32>,
    num_classes: usize,
}

impl CharClasses {
    /// The coarsest partition refining every set in `sets`.
    pub fn new<'a>(sets: impl IntoIterator<Item = &'a [(char, char)]>) -> CharClasses {
        let mut distinct: HashMap<&'a [(char, char)], usize> = HashMap::new();
        for s in sets {
            let k = distinct.len();
            distinct.entry(s).or_insert(k);
        }
        let mut bounds: Vec<u32> = vec![0, 0x11_0000];
        for s in distinct.keys() {
            for &(a, b) in s.iter() {
                bounds.push(a as u32);
                bounds.push(b as u32 + 1);
            }
        }
        bounds.sort_unstable();
        bounds.dedup();
        let intervals = bounds.len() - 1;
        let words = distinct.len().div_ceil(64).max(1);
        let mut sig = vec![0u64; intervals * words];
        for (s, &k) in &distinct {
            for &(a, b) in s.iter() {
                let lo = bounds.partition_point(|&x| x < a as u32);
                let hi = bounds.partition_point(|&x| x < b as u32 + 1);
                for iv in lo..hi {
                    sig[iv * words + k / 64] |= 1 << (k % 64);
                }
            }
        }
        let mut by_sig: HashMap<&[u64], u32> = HashMap::new();
        let mut starts = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        for iv in 0..intervals {
            let k = by_sig.len() as u32;
            let id = *by_sig.entry(&sig[iv * words..(iv + 1) * words]).or_insert(k);
            if ids.last() != Some(&id) {
                starts.push(bounds[iv]);
                ids.push(id);
            }
        }
        CharClasses { starts, ids, num_classes: by_sig.len() }
    }

    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The class of code point `cp` (`cp < 0x110000`).
    pub fn class_of(&self, cp: u32) -> u32 {
        self.ids[self.starts.partition_point(|&s| s <= cp) - 1]
    }

    /// Which classes lie inside `set` (each class is wholly inside or outside of every set
    /// the partition was built from).
    pub fn member_classes(&self, set: &[(char, char)]) -> Vec<bool> {
        let mut member = vec![false; self.num_classes];
        for &(a, b) in set {
            let (a, b) = (a as u32, b as u32);
            let mut iv = self.starts.partition_point(|&s| s <= a) - 1;
            while iv < self.starts.len() && self.starts[iv] <= b {
                member[self.ids[iv] as usize] = true;
                iv += 1;
            }
        }
        member
    }

    /// The classes over `lo..=hi` as runs `(first code point, class)`, ascending.
    pub fn runs(&self, lo: u32, hi: u32) -> Vec<(u32, u32)> {
        let mut iv = self.starts.partition_point(|&s| s <= lo) - 1;
        let mut out = vec![(lo, self.ids[iv])];
        iv += 1;
        while iv < self.starts.len() && self.starts[iv] <= hi {
            out.push((self.starts[iv], self.ids[iv]));
            iv += 1;
        }
        out
    }
}

/// Code point runs of a partial UTF-8 character: `(offset from the first code point the
/// prefix can still become, value)`, ascending from offset 0, adjacent values distinct.
pub type Runs = Box<[(u32, u32)]>;

/// Class of the code points no valid UTF-8 sequence encodes, in [`CharClasses::utf8_lead_runs`].
pub const INVALID_CLASS: u32 = u32::MAX;

impl CharClasses {
    /// For each lead byte of a multi-byte character: continuation bytes still to come and the
    /// class runs (`INVALID_CLASS` for overlong forms, surrogates, past U+10FFFF) over the code
    /// points it can start (`None` for other bytes). An automaton over bytes keeps these runs
    /// (or a coarsening) as its state inside a character: the code points sharing a UTF-8 prefix
    /// are a contiguous range, so a prefix is fully described by them.
    pub fn utf8_lead_runs(&self) -> Vec<Option<(u32, Runs)>> {
        let classes = self;
        (0..=255u8)
            .map(|b| {
                let (k, base, min) = match b {
                    0xC2..=0xDF => (1, ((b & 0x1F) as u32) << 6, 0x80),
                    0xE0..=0xEF => (2, ((b & 0x0F) as u32) << 12, 0x800),
                    0xF0..=0xF4 => (3, ((b & 0x07) as u32) << 18, 0x1_0000),
                    _ => return None,
                };
                let last = base + (1 << (6 * k)) - 1;
                let mut runs: Vec<(u32, u32)> = Vec::new();
                let mut push = |from: u32, class: u32| {
                    if runs.last().map(|r| r.1) != Some(class) {
                        runs.push((from - base, class));
                    }
                };
                let mut cp = base;
                for (lo, hi) in [(min, 0xD7FF), (0xE000, 0x10_FFFF)] {
                    let (lo, hi) = (lo.max(base), hi.min(last));
                    if lo > hi {
                        continue;
                    }
                    if cp < lo {
                        push(cp, INVALID_CLASS);
                    }
                    for (from, class) in classes.runs(lo, hi) {
                        push(from, class);
                    }
                    cp = hi + 1;
                }
                if cp <= last {
                    push(cp, INVALID_CLASS);
                }
                Some((k, runs.into_boxed_slice()))
            })
            .collect()
    }
}

/// The runs of `runs` (over `64^(k+1)` code points) under continuation byte `b`, re-based.
pub fn restrict_utf8_runs(runs: &[(u32, u32)], k: u32, b: u8) -> Vec<(u32, u32)> {
    let size = 1u32 << (6 * k);
    let lo = (b & 0x3F) as u32 * size;
    let first = runs.partition_point(|r| r.0 <= lo) - 1;
    std::iter::once((0, runs[first].1))
        .chain(runs[first + 1..].iter().take_while(|r| r.0 < lo + size).map(|r| (r.0 - lo, r.1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pattern_gpt2_parses_with_assert() {
        let p = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
        let nfa = SplitNfa::new(p).unwrap();
        let asserts: Vec<_> = nfa.nodes.iter().filter(|n| matches!(n, Node::Assert { .. })).collect();
        assert_eq!(asserts.len(), 1);
        let Node::Assert { class, negated, at_end_holds, .. } = asserts[0] else { unreachable!() };
        assert!(*negated && *at_end_holds);
        // \S is everything but white space: contains 'a', not ' '.
        assert!(class.iter().any(|&(a, b)| a <= 'a' && 'a' <= b));
        assert!(!class.iter().any(|&(a, b)| a <= ' ' && ' ' <= b));
    }

    #[test]
    fn split_pattern_rejections_name_the_construct() {
        let cases = [
            (r"(?<=a)b", "look-behind"),
            (r"a(?!bc)", "look-ahead"),
            (r"(a)\1", "backreference"),
            (r"\bfoo", "word boundary"),
            (r"a*", "empty string"),
            (r"(?:a|)+b", "empty string"),
            (r"(?:a?){2}b", "empty string"),
            (r"a{2}+", "possessive"),
            (r"^a", "start anchors"),
            (r"(?>a)", "atomic"),
            (r"a++", "possessive"),
            (r"a\Z", "\\Z"),
            (r"[a-z]{20000}", "more than"),
        ];
        for (p, what) in cases {
            match SplitNfa::new(p) {
                Err(Error::Unsupported(msg)) => {
                    assert!(msg.contains(what), "{p}: {msg}");
                    assert!(msg.contains("is not supported"), "{p}: {msg}");
                }
                other => panic!("{p}: expected Unsupported, got {other:?}"),
            }
        }
    }

    #[test]
    fn split_pattern_counted_repetition_is_expanded() {
        let nfa = SplitNfa::new(r"\p{N}{1,3}").unwrap();
        let classes = nfa.nodes.iter().filter(|n| matches!(n, Node::Class { .. })).count();
        assert_eq!(classes, 3);
        // A brace that is no quantifier is a literal, and `}+` after it is no possessive.
        assert!(SplitNfa::new(r"a}+").is_ok());
        assert!(SplitNfa::new(r"(?:a?)?b").is_ok());
        let lazy = SplitNfa::new(r"a+?").unwrap();
        assert!(lazy.nodes.iter().any(|n| matches!(n, Node::Split { .. })));
    }

    #[test]
    fn split_pattern_dollar_and_lookahead_in_case_insensitive_group() {
        let nfa = SplitNfa::new(r"\s+$").unwrap();
        assert!(nfa.nodes.iter().any(|n| matches!(n,
            Node::Assert { class, negated: false, at_end_holds: true, .. } if class == &vec![('\n', '\n')])));
        let nfa = SplitNfa::new(r"(?i:x(?=k))").unwrap();
        let Some(Node::Assert { class, .. }) = nfa.nodes.iter().find(|n| matches!(n, Node::Assert { .. })) else {
            panic!()
        };
        // k, K and the Kelvin sign.
        assert_eq!(class.iter().map(|&(a, b)| b as u32 - a as u32 + 1).sum::<u32>(), 3);
    }

    #[test]
    fn split_pattern_char_classes_partition() {
        let a: CharRanges = vec![('a', 'z')];
        let b: CharRanges = vec![('m', 'p'), ('0', '9')];
        let cc = CharClasses::new([a.as_slice(), b.as_slice()]);
        // {a-l,q-z}, {m-p}, {0-9}, rest.
        assert_eq!(cc.num_classes(), 4);
        assert_eq!(cc.class_of('a' as u32), cc.class_of('z' as u32));
        assert_ne!(cc.class_of('a' as u32), cc.class_of('m' as u32));
        assert_eq!(cc.class_of(' ' as u32), cc.class_of(0x10FFFF));
        let m = cc.member_classes(&b);
        assert_eq!(m.iter().filter(|&&x| x).count(), 2);
        assert_eq!(cc.runs('k' as u32, 'n' as u32).len(), 2);
    }
}
