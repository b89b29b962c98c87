//! Pre-tokenizer `Split` patterns → priority NFAs over characters.
//!
//! Hugging Face `tokenizers` runs each `Split(regex, Isolated)` stage with Oniguruma's
//! `find_iter`: leftmost-first search with backtracking priorities (the left branch of an
//! alternation is tried first, a greedy quantifier prefers one more iteration, a lazy one
//! prefers to stop). A [`SplitNfa`] keeps exactly that information: it is a Thompson NFA whose
//! [`Node::Split`] nodes are *ordered* (`preferred` before `other`), so a Pike VM that explores
//! threads in priority order finds the same match as the backtracker (see
//! [`crate::pre_tokenizer::piece_machine`]). [`crate::pre_tokenizer::char_classes::CharClasses`] partitions all Unicode scalar values into the
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
//! three copies of `x`). all range endpoints: `O(r log r)` for `r`
//! ranges, plus one signature bit per (elementary interval, distinct range set).

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use super::onig_syntax::{preprocess, AssertSpec};
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

pub(super) fn unsupported(pattern: &str, what: &str) -> Error {
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
}
