//! The Lark front end, judged through the language of its regex on chosen strings.

use super::*;
use crate::grammar::lower::{to_regex, LowerOptions};
use crate::regex::byte_dfa::ByteDfa;

fn language(text: &str) -> ByteDfa {
    let grammar = parse(text, None).unwrap();
    let regex = to_regex(&grammar, LowerOptions::default()).unwrap();
    ByteDfa::from_regex(&regex, 100_000).unwrap()
}

fn assert_language(text: &str, accepted: &[&str], refused: &[&str]) {
    let dfa = language(text);
    for s in accepted {
        assert!(dfa.matches(s.as_bytes()), "{s:?} should match {text}");
    }
    for s in refused {
        assert!(!dfa.matches(s.as_bytes()), "{s:?} should not match {text}");
    }
}

fn parse_error(text: &str) -> String {
    match parse(text, None).and_then(|g| to_regex(&g, LowerOptions::default())) {
        Ok(regex) => panic!("{text} parsed, as {regex}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn rules_terminals_and_operators() {
    let g = r#"
// a comment
start: greeting NAME ("," NAME)* "!"?
?greeting: "hello"i " " | "hi "
NAME: ("a".."z")+
"#;
    assert_language(g, &["hello bob", "HeLLo bob,al!", "hi x,y,z"], &["hi", "hi Bob", "hello bob,", "hi x!!"]);
}

#[test]
fn alternatives_on_following_lines_aliases_and_priorities() {
    let g = "start: a\n     | b -> second\n     | \"c\" \"d\"\nA.2: \"x\"\n!a: A\nb.-1: \"y\"\n";
    assert_language(g, &["x", "y", "cd"], &["c", "xy", ""]);
}

#[test]
fn optional_brackets_and_counted_repetitions() {
    let g = "start: [\"-\"] D ~ 2 (\"/\" D ~ 1..3)?\nD: \"0\"..\"9\"\n";
    assert_language(g, &["12", "-12", "12/1", "-99/123"], &["1", "123", "12/", "12/1234", "--12"]);
}

#[test]
fn regex_terminals_and_flags() {
    let g = "start: WORD \":\" /[0-9]+/ /abc/i\nWORD: /[a-z]+/\n";
    assert_language(g, &["key:12abc", "k:0ABC"], &["key:abc", "Key:1abc", "k:1ab"]);
}

#[test]
fn ignore_allows_text_between_items_and_around() {
    let g = r#"
start: "[" [item ("," item)*] "]"
item: NUMBER | "x" "y"
%import common.NUMBER
%import common.WS
%ignore WS
"#;
    assert_language(
        g,
        &["[1,2]", " [ 1 , 2.5e3 ] ", "[]", "[ ]", "[x y, xy]", "\n[1]\n"],
        &["[1 2]", "[1,]", "[1 .5]", "[ x y z ]"],
    );
    // Not inside a terminal: "1 2" is not a NUMBER.
    assert_language(g, &["[12]"], &["[1 2]"]);
}

#[test]
fn ignore_between_repetitions() {
    let g = "start: A+ B*\nA: \"a\"\nB: \"b\"\n%ignore \" \"\n";
    assert_language(g, &["a a a", "a b b", " a  ab "], &["", "b", "a c"]);
}

#[test]
fn common_imports_in_every_form() {
    let g = "start: SIGNED_NUMBER \" \" ESCAPED_STRING \" \" NAME\n%import common (SIGNED_NUMBER, ESCAPED_STRING)\n%import common.CNAME -> NAME\n";
    assert_language(
        g,
        &[r#"-1.5e3 "a\"b" _x1"#, r#"7 "" y"#, r#".5 "\\" z"#],
        &[r#"1 "a"b" x"#, r#"1 "a" 1x"#, "1 \"\n\" x", r#"1. "a x"#],
    );
}

#[test]
fn recursion_is_refused_or_unrolled() {
    let g = "start: value\nvalue: \"[\" [value (\",\" value)*] \"]\" | \"1\"\n";
    let err = parse_error(g);
    assert!(err.contains("value → value") && err.contains("max_recursion_depth"), "{err}");
    let grammar = parse(g, None).unwrap();
    let regex = to_regex(&grammar, LowerOptions { max_recursion_depth: Some(2), ..LowerOptions::default() }).unwrap();
    let dfa = ByteDfa::from_regex(&regex, 100_000).unwrap();
    assert!(dfa.matches(b"[1,[1,[]]]") && !dfa.matches(b"[[[[]]]]") && !dfa.matches(b"[1,]"));
}

#[test]
fn right_recursion_is_exact() {
    let g = "start: list\nlist: \"a\" | \"a\" \",\" list\n";
    assert_language(g, &["a", "a,a,a,a,a,a,a,a,a,a,a,a"], &["", "a,", ",a"]);
}

#[test]
fn custom_start_rule() {
    let grammar = parse("a: \"x\"\nb: \"y\"\n", Some("b")).unwrap();
    assert_eq!(to_regex(&grammar, LowerOptions::default()).unwrap(), "y");
    let err = parse("a: \"x\"\n", None).unwrap_err().to_string();
    assert!(err.contains("no start rule `start`") && err.contains("a"), "{err}");
}

#[test]
fn errors_name_the_line_and_the_problem() {
    let cases: &[(&str, &str)] = &[
        ("start: a\n", "line 1: `a` is not defined"),
        ("start: \"x\"\nstart: \"y\"\n", "line 2: `start` is defined twice (first on line 1)"),
        ("start: A\nA: b\nb: \"x\"\n", "line 2: a terminal cannot name the rule `b`"),
        ("start: \"abc\n", "line 1: unterminated string literal"),
        ("start: \"\\q\"\n", "line 1: unknown escape \\q"),
        ("start: /a\n", "line 1: unterminated regex"),
        ("start: /^a/\n", "anchor or look-around"),
        ("start: /a(/\n", "invalid regex"),
        ("start: (\"a\"\n", "expected `)`"),
        ("start: \"a\" ~ 3..1\n", "the minimum exceeds the maximum"),
        ("start: \"a\" ~ 20000\n", "above 10000"),
        ("start \"a\"\n", "expected `:` after `start`"),
        ("start: \"a\" )\n", "unexpected `)`"),
        ("start: \"a\" <|python_tag\n", "needs a closing `>`"),
        ("start: <[1-9]>\n", "a token id is `<[N]>` with one decimal number"),
        ("start: <>\n", "`<>` names no token"),
        ("start: A\nA: \"a\" <[7]>\n", "line 2: special token <[7]> inside a terminal"),
        ("start: sep{\"a\"}\n", "templates"),
        ("%json {}\n", "%json"),
        ("%declare X\n", "%declare"),
        ("%import other.X\n", "only `common`"),
        ("%import common.NOPE\n", "common has no `NOPE`"),
        ("start: /a/l\n", "regex flag `l`"),
        ("start: $\n", "unexpected character '$'"),
        ("", "defines no rules"),
        ("start: \"a\" \"b\"..\"c\"\nx: \"ab\"..\"c\"\n", "one character on each side"),
    ];
    for (text, expected) in cases {
        let err = parse_error(text);
        assert!(err.contains(expected), "{text:?}: {err:?} lacks {expected:?}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let text = format!("start: {}\"a\"{}\n", "(".repeat(10_000), ")".repeat(10_000));
    assert!(parse_error(&text).contains("nest deeper than 256"));
    let text = format!("start: \"a\"{}\n", "?".repeat(10_000));
    assert!(parse_error(&text).contains("nest deeper than 256"));
}

#[test]
fn special_tokens_by_text_and_by_id() {
    let g = parse("start: <|python_tag|> \"x\" (<[128010]> | <think>)*\n", None).unwrap();
    let token = |name: &str| Expr::Token(TokenName::Text(name.into()));
    let want = Expr::Seq(vec![
        token("<|python_tag|>"),
        Expr::Literal("x".into()),
        Expr::Repeat {
            expr: Box::new(Expr::Alt(vec![Expr::Token(TokenName::Id(128010)), token("<think>")])),
            min: 0,
            max: None,
        },
    ]);
    assert_eq!(g.rules[g.start].body, want);
}
