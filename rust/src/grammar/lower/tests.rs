//! `to_regex` against an independent reference: a direct interpreter of the grammar
//! (`crate::testing::grammar::Reference`: the end positions each expression can reach, with a
//! nesting budget), on every string up to a length over each grammar's alphabet.

use super::*;
use crate::grammar::Rule;
use crate::regex::byte_dfa::ByteDfa;
use crate::testing::grammar::{marked, sentinel, strings, Reference};

fn lit(s: &str) -> Expr {
    Expr::Literal(s.into())
}
fn r(i: usize) -> Expr {
    Expr::Rule(i)
}
fn seq(items: Vec<Expr>) -> Expr {
    Expr::Seq(items)
}
fn alt(items: Vec<Expr>) -> Expr {
    Expr::Alt(items)
}
fn rep(e: Expr, min: u32, max: Option<u32>) -> Expr {
    Expr::Repeat { expr: Box::new(e), min, max }
}
fn grammar(rules: Vec<(&str, Expr)>) -> Grammar {
    Grammar {
        rules: rules.into_iter().enumerate().map(|(i, (n, body))| Rule { name: n.into(), line: i + 1, body }).collect(),
        start: 0,
    }
}

/// Checks the regex of `g` (with `depth`) against the reference on every string over
/// `alphabet` up to `max_len`; `limited` names the rules whose nesting `depth` bounds.
fn check(g: &Grammar, depth: Option<u32>, limited: &[usize], alphabet: &[char], max_len: usize) -> usize {
    let options = LowerOptions { max_recursion_depth: depth, ..LowerOptions::default() };
    let GrammarRegex { regex, tokens } = to_regex_with_tokens(g, options).unwrap();
    let dfa = ByteDfa::from_regex_with_markers(&regex, 100_000).unwrap();
    let mut limit = vec![u32::MAX; g.rules.len()];
    for &i in limited {
        limit[i] = depth.unwrap();
    }
    let mut accepted = 0;
    let mut reference = Reference::new(g, limit);
    for s in strings(alphabet, max_len) {
        let expected = reference.accepts(&s).expect("the reference decides these grammars");
        assert_eq!(dfa.matches(&marked(&s, &tokens)), expected, "{s:?} with regex {regex:?}");
        accepted += usize::from(expected);
    }
    assert!(accepted > 0, "the reference accepts something");
    accepted
}

#[test]
fn regular_grammar_inlines_rules() {
    // start ::= word ("," word){0,2} ; word ::= [a-b]+ | "Ok"i
    let g = grammar(vec![
        ("start", seq(vec![r(1), rep(seq(vec![lit(","), r(1)]), 0, Some(2))])),
        (
            "word",
            alt(vec![
                rep(Expr::Class { negated: false, ranges: vec![('a', 'b')] }, 1, None),
                Expr::CaseInsensitiveLiteral("Ok".into()),
            ]),
        ),
    ]);
    check(&g, None, &[], &['a', 'b', ',', 'o', 'K'], 6);
}

#[test]
fn negated_and_empty_classes() {
    let any = Expr::Class { negated: true, ranges: vec![] };
    let not_a = Expr::Class { negated: true, ranges: vec![('a', 'a')] };
    let none = Expr::Class { negated: false, ranges: vec![] };
    let g = grammar(vec![("start", alt(vec![seq(vec![any, not_a]), seq(vec![none, lit("b")])]))]);
    check(&g, None, &[], &['a', 'b', '\n', 'é'], 3);
}

#[test]
fn right_linear_recursion_is_exact() {
    // list ::= "a" | "a" "," list
    let g = grammar(vec![("list", alt(vec![lit("a"), seq(vec![lit("a"), lit(","), r(0)])]))]);
    assert_eq!(check(&g, None, &[], &['a', ','], 7), 4);
}

#[test]
fn left_linear_recursion_is_exact() {
    // sum ::= sum "+" num | num ; num ::= [0-1]
    let g = grammar(vec![
        ("sum", alt(vec![seq(vec![r(0), lit("+"), r(1)]), r(1)])),
        ("num", Expr::Class { negated: false, ranges: vec![('0', '1')] }),
    ]);
    check(&g, None, &[], &['0', '1', '+'], 6);
}

#[test]
fn mutual_right_linear_recursion_and_optional_tails() {
    // a ::= "a" b? | "" ; b ::= ("b" | "c") a
    let g = grammar(vec![
        ("a", alt(vec![seq(vec![lit("a"), rep(r(1), 0, Some(1))]), lit("")])),
        ("b", seq(vec![alt(vec![lit("b"), lit("c")]), r(0)])),
    ]);
    check(&g, None, &[], &['a', 'b', 'c'], 6);
}

#[test]
fn epsilon_loops_add_nothing() {
    // x ::= x | "a" | y ; y ::= x  (both right- and left-linear)
    let g = grammar(vec![("x", alt(vec![r(0), lit("a"), r(1)])), ("y", r(0))]);
    assert_eq!(check(&g, None, &[], &['a'], 3), 1);
}

#[test]
fn self_embedding_is_refused_naming_the_cycle() {
    // value ::= "[" (value ("," value)*)? "]" | "1" ; reached through start ::= value
    let g = grammar(vec![
        ("start", r(1)),
        (
            "value",
            alt(vec![
                seq(vec![
                    lit("["),
                    rep(seq(vec![r(2), rep(seq(vec![lit(","), r(2)]), 0, None)]), 0, Some(1)),
                    lit("]"),
                ]),
                lit("1"),
            ]),
        ),
        ("element", r(1)),
    ]);
    let err = to_regex(&g, LowerOptions::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported(m) if m.contains("value → element → value") && m.contains("max_recursion_depth")),
        "{err}"
    );
}

#[test]
fn self_embedding_unrolls_to_the_depth() {
    // s ::= "(" s ")" s | ""   (Dyck)
    let g = grammar(vec![("s", alt(vec![seq(vec![lit("("), r(0), lit(")"), r(0)]), lit("")]))]);
    let counts: Vec<usize> = (0..4).map(|d| check(&g, Some(d), &[0], &['(', ')'], 8)).collect();
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "deeper admits more: {counts:?}");
}

#[test]
fn linear_component_inside_a_self_embedding_one() {
    // v ::= "[" items? "]" | "1" ; items ::= v | v "," items
    let g = grammar(vec![
        ("v", alt(vec![seq(vec![lit("["), rep(r(1), 0, Some(1)), lit("]")]), lit("1")])),
        ("items", alt(vec![r(0), seq(vec![r(0), lit(","), r(1)])])),
    ]);
    // One component {v, items}: not linear (v is named inside brackets), so both are limited.
    for d in 0..3 {
        check(&g, Some(d), &[0, 1], &['[', ']', '1', ','], 7);
    }
}

#[test]
fn depth_too_small_for_any_string_is_an_empty_language() {
    // s ::= "(" s ")"   (no base case)
    let g = grammar(vec![("s", seq(vec![lit("("), r(0), lit(")")]))]);
    let err = to_regex(&g, LowerOptions { max_recursion_depth: Some(3), ..LowerOptions::default() }).unwrap_err();
    assert!(matches!(err, Error::EmptyLanguage(_)), "{err}");
    let g = grammar(vec![("s", alt(vec![]))]);
    assert!(matches!(to_regex(&g, LowerOptions::default()), Err(Error::EmptyLanguage(_))));
}

#[test]
fn regex_size_is_limited() {
    let g = grammar(vec![("s", alt(vec![seq(vec![lit("(abc"), r(0), lit(")"), r(0)]), lit("")]))]);
    let options = LowerOptions { max_recursion_depth: Some(12), max_regex_bytes: 10_000 };
    let err = to_regex(&g, options).unwrap_err();
    assert!(matches!(err, Error::LimitExceeded { limit: "max_regex_bytes", .. }), "{err}");
}

#[test]
fn unreachable_recursion_is_ignored() {
    let g = grammar(vec![("start", lit("x")), ("loop", seq(vec![lit("("), r(1), lit(")")]))]);
    assert_eq!(to_regex(&g, LowerOptions::default()).unwrap(), "x");
}

#[test]
fn long_rule_chains_are_an_error_not_a_stack_overflow() {
    let n = 5_000;
    let rules = (0..n).map(|i| if i + 1 < n { (format!("r{i}"), r(i + 1)) } else { (format!("r{i}"), lit("x")) });
    let g = Grammar {
        rules: rules.enumerate().map(|(i, (name, body))| Rule { name, line: i + 1, body }).collect(),
        start: 0,
    };
    let err = to_regex(&g, LowerOptions::default()).unwrap_err();
    assert!(err.to_string().contains("nest more than 1000 deep"), "{err}");
}

#[test]
fn special_tokens_are_markers_and_have_no_plain_regex() {
    // start ::= "a"+ (<[1]> "b" | <[2]>)* <[1]>? ; tokens inside a right-linear recursion too.
    let token = |k: u32| Expr::Token(TokenName::Id(k));
    let g = grammar(vec![
        ("start", seq(vec![rep(lit("a"), 1, None), r(1), rep(token(1), 0, Some(1))])),
        ("tail", alt(vec![lit(""), seq(vec![alt(vec![seq(vec![token(1), lit("b")]), token(2)]), r(1)])])),
    ]);
    let (t1, t2) = (sentinel(&TokenName::Id(1)), sentinel(&TokenName::Id(2)));
    check(&g, None, &[], &['a', 'b', t1, t2], 6);
    let lowered = to_regex_with_tokens(&g, LowerOptions::default()).unwrap();
    assert_eq!(lowered.tokens, vec![TokenName::Id(1), TokenName::Id(2)], "numbered in order of first use");
    assert!(lowered.regex.contains(r"(?-u:\xFF\x80)") && lowered.regex.contains(r"(?-u:\xFF\x81)"));
    match to_regex(&g, LowerOptions::default()) {
        Err(Error::Unsupported(m)) => assert!(m.contains("special token <[1]>"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A user's regex cannot spell a marker.
    assert!(ByteDfa::from_regex(&lowered.regex, 1000).is_err());
    let many = grammar(vec![("start", seq((0..=MAX_GRAMMAR_TOKENS as u32).map(token).collect()))]);
    match to_regex_with_tokens(&many, LowerOptions::default()) {
        Err(Error::LimitExceeded { limit, .. }) => assert_eq!(limit, "special tokens of a grammar"),
        other => panic!("{other:?}"),
    }
}
