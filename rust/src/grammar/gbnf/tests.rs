//! The GBNF front end: IR built by hand, errors, limits.

use super::*;
use crate::grammar::TokenName;

fn lit(s: &str) -> Expr {
    Expr::Literal(s.to_string())
}

fn class(negated: bool, ranges: &[(char, char)]) -> Expr {
    Expr::Class { negated, ranges: ranges.to_vec() }
}

fn rep(expr: Expr, min: u32, max: Option<u32>) -> Expr {
    Expr::Repeat { expr: Box::new(expr), min, max }
}

fn seq(items: Vec<Expr>) -> Expr {
    Expr::Seq(items)
}

fn alt(items: Vec<Expr>) -> Expr {
    Expr::Alt(items)
}

/// The body of the start rule of `text`, which must parse.
fn root_body(text: &str) -> Expr {
    let grammar = parse(text, None).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"));
    grammar.rules[grammar.start].body.clone()
}

fn invalid(text: &str) -> String {
    match parse(text, None) {
        Err(Error::InvalidGrammar(message)) => message,
        other => panic!("{text:?} should be an invalid grammar, got {other:?}"),
    }
}

#[test]
fn literal_with_every_escape() {
    let body = root_body(r#"root ::= "a\n\r\t\\\"\[\]\x41\u00e9\U0001F600 é""#);
    assert_eq!(body, lit("a\n\r\t\\\"[]Aé😀 é"));
    assert_eq!(root_body(r#"root ::= """#), lit(""));
    assert_eq!(root_body(r##"root ::= "#not a comment""##), lit("#not a comment"));
}

#[test]
fn sequence_of_items_keeps_literals_apart() {
    assert_eq!(root_body(r#"root ::= "a" "b"	[c]"#), seq(vec![lit("a"), lit("b"), class(false, &[('c', 'c')])]));
}

#[test]
fn classes_negation_ranges_and_escapes() {
    assert_eq!(root_body("root ::= [a-z0-9_]"), class(false, &[('a', 'z'), ('0', '9'), ('_', '_')]));
    assert_eq!(
        root_body(r#"root ::= [^"\\\x7F\x00-\x1F]"#),
        class(true, &[('"', '"'), ('\\', '\\'), ('\x7f', '\x7f'), ('\0', '\x1f')])
    );
    assert_eq!(root_body(r"root ::= [\]\[\n]"), class(false, &[(']', ']'), ('[', '['), ('\n', '\n')]));
    assert_eq!(root_body(r"root ::= [\u00e0-\u00FF]"), class(false, &[('à', 'ÿ')]));
    assert_eq!(root_body("root ::= [\"(#]"), class(false, &[('"', '"'), ('(', '('), ('#', '#')]));
    assert_eq!(root_body("root ::= []"), class(false, &[]));
    assert_eq!(root_body("root ::= [^]"), class(true, &[]));
}

#[test]
fn class_dash_is_literal_first_or_last() {
    assert_eq!(root_body("root ::= [-a]"), class(false, &[('-', '-'), ('a', 'a')]));
    assert_eq!(root_body("root ::= [a-]"), class(false, &[('a', 'a'), ('-', '-')]));
    assert_eq!(root_body("root ::= [-]"), class(false, &[('-', '-')]));
    assert_eq!(root_body("root ::= [^-]"), class(true, &[('-', '-')]));
    assert_eq!(root_body("root ::= [--/]"), class(false, &[('-', '/')]));
}

#[test]
fn class_errors() {
    let message = invalid("root ::= [z-a]");
    assert!(message.contains("line 1, column 11") && message.contains("reversed range `z`-`a`"), "{message}");
    let message = invalid("root ::= [\\x00-\\uD800]");
    assert!(message.contains("surrogate"), "{message}");
}

#[test]
fn class_ranges_never_contain_surrogates() {
    assert_eq!(
        root_body(r"root ::= [\x00-\U0010FFFF]"),
        class(false, &[('\0', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')])
    );
    assert_eq!(
        root_body(r"root ::= [^\uD7FF-\uE000]"),
        class(true, &[('\u{D7FF}', '\u{D7FF}'), ('\u{E000}', '\u{E000}')])
    );
    assert_eq!(root_body(r"root ::= [\uE000-\uFFFF]"), class(false, &[('\u{E000}', '\u{FFFF}')]));
}

#[test]
fn dot_is_any_character() {
    let any = class(true, &[]);
    assert_eq!(root_body("root ::= ."), any);
    assert_eq!(root_body("root ::= .* \".\""), seq(vec![rep(any, 0, None), lit(".")]));
}

#[test]
fn references_numbered_in_definition_order() {
    let grammar = parse("root ::= b a\na ::= \"a\"\nb ::= \"b\" root?", None).unwrap();
    let names: Vec<&str> = grammar.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "a", "b"]);
    assert_eq!(grammar.start, 0);
    assert_eq!(grammar.rules.iter().map(|r| r.line).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(grammar.rules[0].body, seq(vec![Expr::Rule(2), Expr::Rule(1)]));
    assert_eq!(grammar.rules[2].body, seq(vec![lit("b"), rep(Expr::Rule(0), 0, Some(1))]));
}

#[test]
fn json_style_grammar_across_lines() {
    let text = r#"root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
        string ":" ws value
("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
        value
("," ws value)*
  )? "]" ws
string ::= "\"" [a-z]* "\"" ws
number ::= [0-9]+ ws
# Optional space
ws ::= | " " | "\n" [ \t]{0,20}
"#;
    let grammar = parse(text, None).unwrap();
    let names: Vec<&str> = grammar.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "value", "object", "array", "string", "number", "ws"]);
    let [value, object, array, string, number, ws] = [1, 2, 3, 4, 5, 6].map(Expr::Rule);
    assert_eq!(grammar.rules[0].body, object.clone());
    assert_eq!(
        grammar.rules[1].body,
        alt(vec![
            object.clone(),
            array.clone(),
            string.clone(),
            number.clone(),
            seq(vec![alt(vec![lit("true"), lit("false"), lit("null")]), ws.clone()]),
        ])
    );
    let member = vec![string.clone(), lit(":"), ws.clone(), value.clone()];
    let mut more = vec![lit(","), ws.clone()];
    more.extend(member.clone());
    let mut members = member;
    members.push(rep(seq(more), 0, None));
    assert_eq!(
        grammar.rules[2].body,
        seq(vec![lit("{"), ws.clone(), rep(seq(members), 0, Some(1)), lit("}"), ws.clone()])
    );
    let elements = seq(vec![value.clone(), rep(seq(vec![lit(","), ws.clone(), value]), 0, None)]);
    assert_eq!(grammar.rules[3].body, seq(vec![lit("["), ws.clone(), rep(elements, 0, Some(1)), lit("]"), ws.clone()]));
    assert_eq!(grammar.rules[5].body, seq(vec![rep(class(false, &[('0', '9')]), 1, None), ws]));
    assert_eq!(grammar.rules[5].line, 15);
    assert_eq!(
        grammar.rules[6].body,
        alt(vec![
            seq(vec![]),
            lit(" "),
            seq(vec![lit("\n"), rep(class(false, &[(' ', ' '), ('\t', '\t')]), 0, Some(20))])
        ])
    );
}

#[test]
fn newline_ends_a_rule_at_top_level() {
    let message = invalid("root ::= \"a\"\n  | \"b\"");
    assert!(message.starts_with("line 2, column 3: expected a rule name"), "{message}");
    assert!(message.contains("continues onto the next line only"), "{message}");
    let message = invalid("root ::= \"a\"\n  \"b\"");
    assert!(message.starts_with("line 2, column 3"), "{message}");
    // Right after `|` or `::=`, the rule goes on.
    assert_eq!(root_body("root ::= \"a\" |\n  \"b\""), alt(vec![lit("a"), lit("b")]));
    assert_eq!(root_body("root ::=\n\n  # comment\n  \"a\""), lit("a"));
}

#[test]
fn empty_alternatives_are_empty_sequences() {
    assert_eq!(root_body("root ::= \"x\" | "), alt(vec![lit("x"), seq(vec![])]));
    assert_eq!(root_body("root ::= ()"), seq(vec![]));
    assert_eq!(root_body("root ::= ( | \"a\")"), alt(vec![seq(vec![]), lit("a")]));
    assert_eq!(root_body("root ::="), seq(vec![]));
    assert_eq!(root_body("root ::= (\"a\")"), lit("a"));
}

#[test]
fn every_repetition_form() {
    let a = lit("a");
    let cases: [(&str, u32, Option<u32>); 10] = [
        ("*", 0, None),
        ("+", 1, None),
        ("?", 0, Some(1)),
        ("{3}", 3, Some(3)),
        ("{2,}", 2, None),
        ("{2,5}", 2, Some(5)),
        ("{,4}", 0, Some(4)),
        ("{ 2 , 5 }", 2, Some(5)),
        ("{0}", 0, Some(0)),
        ("{10000}", 10_000, Some(10_000)),
    ];
    for (postfix, min, max) in cases {
        assert_eq!(root_body(&format!("root ::= \"a\"{postfix}")), rep(a.clone(), min, max), "{postfix}");
    }
    assert_eq!(root_body("root ::= \"a\" {,}"), rep(a.clone(), 0, None));
    assert_eq!(root_body("root ::= \"a\" *"), rep(a.clone(), 0, None));
    assert_eq!(root_body("root ::= (\"a\" | b){2} b\nb ::= [b]").clone(), {
        seq(vec![rep(alt(vec![a.clone(), Expr::Rule(1)]), 2, Some(2)), Expr::Rule(1)])
    });
}

#[test]
fn postfixes_stack_innermost_first() {
    let a = lit("a");
    assert_eq!(root_body("root ::= \"a\"**"), rep(rep(a.clone(), 0, None), 0, None));
    assert_eq!(root_body("root ::= \"a\"+?{2}"), rep(rep(rep(a, 1, None), 0, Some(1)), 2, Some(2)));
}

#[test]
fn repetition_errors() {
    let message = invalid("root ::= \"a\"{3,1}");
    assert!(message.starts_with("line 1, column 13") && message.contains("{3,1}"), "{message}");
    let message = invalid("root ::= \"a\"{10001}");
    assert!(message.contains("10001") && message.contains("10000"), "{message}");
    let message = invalid("root ::= \"a\"{99999999999999999999999999}");
    assert!(message.contains("limit of 10000"), "{message}");
    assert!(invalid("root ::= \"a\"{}").contains("expected a count"));
    assert!(invalid("root ::= \"a\"{2").contains("expected a count, `,` or `}`"));
    assert!(invalid("root ::= \"a\"{2,3").contains("expected `}` to close"));
    assert!(invalid("root ::= \"a\"{x}").contains("found `x`"));
    let message = invalid("root ::= *\"a\"");
    assert!(message.starts_with("line 1, column 10: `*` must follow an item"), "{message}");
    assert!(invalid("root ::= \"a\" | +").contains("`+` must follow an item"));
}

#[test]
fn comments_everywhere() {
    let text = "# leading comment\nroot ::= # after ::=\n  ( # inside\n    \"a\" # item\n  | \"b\" ) # end\n# trailing";
    assert_eq!(root_body(text), alt(vec![lit("a"), lit("b")]));
}

#[test]
fn crlf_line_endings() {
    let text = "root ::= a |\r\n  \"b\"\r\na ::= (\r\n \"x\"\r\n)+\r\n";
    let grammar = parse(text, None).unwrap();
    assert_eq!(grammar.rules[0].body, alt(vec![Expr::Rule(1), lit("b")]));
    assert_eq!(grammar.rules[1].body, rep(lit("x"), 1, None));
    assert_eq!(grammar.rules[1].line, 3);
    let message = invalid("root ::= \"a\"\r\n\r\nb ::= c\r\n");
    assert_eq!(message, "line 3: rule `c` is not defined (first used at column 7)");
}

#[test]
fn dashed_and_numeric_names() {
    let grammar = parse("json-value ::= ws-1 2nd\nws-1 ::= \" \"\n2nd ::= \"2\"", Some("json-value")).unwrap();
    assert_eq!(grammar.start, 0);
    assert_eq!(grammar.rules[0].body, seq(vec![Expr::Rule(1), Expr::Rule(2)]));
    assert_eq!(grammar.rules[2].name, "2nd");
}

#[test]
fn duplicate_rule_is_refused() {
    let message = invalid("root ::= a\na ::= \"x\"\n\na ::= \"y\"");
    assert_eq!(message, "line 4: rule `a` is defined twice (first on line 2, again on line 4)");
}

#[test]
fn undefined_rule_names_its_first_use() {
    assert_eq!(invalid("root ::= \"a\" nope"), "line 1: rule `nope` is not defined (first used at column 14)");
    let message = invalid("root ::= a\na ::= \"x\" |\n  (\"y\" missing)\nb ::= missing");
    assert_eq!(message, "line 3: rule `missing` is not defined (first used at column 8)");
}

#[test]
fn unterminated_literals_and_classes() {
    assert_eq!(
        invalid("root ::= \"abc"),
        "line 1, column 10: unterminated string literal: no closing `\"` before the end of the input"
    );
    assert_eq!(
        invalid("root ::= \"abc\nx ::= \"y\""),
        "line 1, column 10: unterminated string literal: no closing `\"` before the end of the line"
    );
    assert!(invalid("root ::= [abc").contains("unterminated character class"));
    assert!(invalid("root ::= [a\\]").contains("unterminated character class"));
    assert!(invalid("root ::= [a-\n]").contains("line 1, column 10: unterminated character class"));
    assert!(invalid("root ::= \"a\\").contains("a `\\` at the end of the line"));
}

#[test]
fn bad_escapes() {
    let message = invalid("root ::= \"ok\"\nx ::= \"a\\qb\"");
    assert!(message.starts_with("line 2, column 9: unknown escape `\\q`"), "{message}");
    assert!(message.contains(ESCAPES), "{message}");
    assert!(invalid("root ::= [\\-]").contains("unknown escape `\\-`"));
    assert!(invalid("root ::= \"\\x4\"").contains("expected 2 hex digits after `\\x`, found `\"`"));
    assert!(invalid("root ::= \"\\uZZZZ\"").contains("expected 4 hex digits after `\\u`"));
    assert!(invalid("root ::= \"\\uDC00\"").contains("U+DC00, a surrogate"));
    assert!(invalid("root ::= \"\\U00110000\"").contains("U+110000, beyond the last code point"));
    assert!(invalid("root ::= \"\\UFFFFFFFF\"").contains("U+FFFFFFFF"));
}

#[test]
fn special_tokens_are_read_and_negated_ones_refused() {
    for (item, name) in [("<[123]>", TokenName::Id(123)), ("<|end|>", TokenName::Text("<|end|>".into()))] {
        let g = parse(&format!("root ::= \"a\" {item}+ \"b\""), None).unwrap();
        let want = Expr::Seq(vec![
            Expr::Literal("a".into()),
            Expr::Repeat { expr: Box::new(Expr::Token(name)), min: 1, max: None },
            Expr::Literal("b".into()),
        ]);
        assert_eq!(g.rules[0].body, want, "{item}");
    }
    for item in ["!<[123]>", "!<|end|>"] {
        match parse(&format!("root ::= \"a\"\nx ::= \"b\" {item}"), None) {
            Err(Error::Unsupported(message)) => {
                assert!(message.starts_with("line 2, column 11: negated tokens"), "{message}");
            }
            other => panic!("{item}: {other:?}"),
        }
    }
    assert!(invalid("root ::= \"a\" <|end").contains("line 1, column 14: a `<` starts a special token"));
    assert!(invalid("root ::= \"a\" !").contains("found `!`"));
}

#[test]
fn start_rule_choice() {
    let text = "root ::= \"r\"\nother ::= \"o\"";
    let grammar = parse(text, Some("other")).unwrap();
    assert_eq!(grammar.start, 1);
    assert_eq!(grammar.rules[grammar.start].body, lit("o"));
    let message = invalid("start ::= \"s\"");
    assert!(message.contains("no start rule `root`") && message.contains("start"), "{message}");
    assert!(matches!(parse(text, Some("nope")), Err(Error::InvalidGrammar(m)) if m.contains("`nope`")));
}

#[test]
fn empty_grammar() {
    for text in ["", "  \n\n", "# only a comment\n# and another\r\n", "\u{feff}"] {
        assert_eq!(invalid(text), "the grammar defines no rules", "{text:?}");
    }
}

#[test]
fn structural_errors() {
    assert_eq!(invalid("root \"a\""), "line 1, column 6: expected `::=` after rule name `root`, found `\"`");
    assert!(invalid("root\n::= \"a\"").contains("expected `::=` after rule name `root`, found the end of the line"));
    assert!(invalid("root ::= (\"a\"").contains("expected `)` to close the `(` at line 1, column 10"));
    assert!(invalid("root ::= \"a\")").contains("line 1, column 13: unmatched `)`"));
    assert!(invalid("root ::= a b ::= \"c\"").contains("unexpected `::=`"));
    assert!(invalid("root ::= \"x\" |\nb ::= \"c\"").contains("line 2, column 3: unexpected `::=`"));
    assert!(invalid("root ::= \"é\" }").contains("line 1, column 14: expected an item"));
    assert!(invalid("root ::= \"a\" \u{7}").contains("found U+0007"));
}

#[test]
fn nesting_limit() {
    let ok = format!("root ::= {}\"a\"{}", "(".repeat(256), ")".repeat(256));
    let mut body = root_body(&ok);
    assert_eq!(body, lit("a"));
    body = root_body(&format!("root ::= \"a\"{}", "*".repeat(256)));
    assert!(matches!(body, Expr::Repeat { .. }));

    let deep = format!("root ::= {}\"a\"{}", "(".repeat(257), ")".repeat(257));
    let message = invalid(&deep);
    assert!(message.starts_with("line 1, column 266: nested deeper than 256 levels"), "{message}");
    assert!(invalid(&format!("root ::= {}", "(".repeat(100_000))).contains("nested deeper than 256"));
    assert!(invalid(&format!("root ::= \"a\"{}", "*".repeat(257))).contains("nested deeper than 256"));
    assert!(invalid(&format!("root ::= ({}\"a\"{})*", "(".repeat(255), ")".repeat(255))).contains("nested deeper"));
}

#[test]
fn never_panics_on_mangled_text() {
    let text = "root ::= (\"a\\u00e9\" | [^x-z\\]é]{2,3} | .)* ws # c\r\nws ::= [ \\t]? <[1]> \"\\U0001F600\"\n";
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for &(i, _) in &chars {
        let _ = parse(&text[..i], None);
        let _ = parse(&text[i..], None);
        for &(j, c) in &chars {
            if j > i {
                let mut cut = String::from(&text[..i]);
                cut.push_str(&text[j..]);
                let _ = parse(&cut, None);
                let mut swapped = String::from(&text[..i]);
                swapped.push(c);
                swapped.push_str(&text[i..]);
                let _ = parse(&swapped, None);
            }
        }
    }
}
