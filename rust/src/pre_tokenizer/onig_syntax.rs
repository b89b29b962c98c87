//! Oniguruma syntax that `regex-syntax` does not parse: the one-character look-aheads, `$`
//! and `\z` become placeholder characters (unused supplementary private-use characters) whose
//! meaning is kept in an [`AssertSpec`]; the constructs `regex-syntax` would misread, or reject
//! with a less helpful message, are rejected here by name.

use super::split_nfa::{unsupported, CharRanges};
use regex_syntax::hir::{Class, HirKind};

use crate::error::Result;

/// A zero-width assertion found by [`preprocess`], standing in the pattern as `placeholder`.
#[derive(Clone, Debug)]
pub(super) struct AssertSpec {
    pub(super) placeholder: char,
    pub(super) class: CharRanges,
    pub(super) negated: bool,
    pub(super) at_end_holds: bool,
}

/// Replaces the one-character look-aheads, `$` and `\z` by placeholder characters (unused
/// supplementary private-use characters) and rejects the Oniguruma constructs `regex-syntax`
/// would misread or reject with a less helpful message.
pub(super) fn preprocess(pattern: &str) -> Result<(String, Vec<AssertSpec>)> {
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
