//! Expected rules written by hand from the Python converter's code (not produced by this
//! module); the differential test in `tests/json_schema/test_rust_converter.py` checks the rest.

use super::jregex::{BOOLEAN, NUMBER, STRING_CHAR};
use super::schema_to_rules;

fn rules(schema: &str, ws: &str) -> Option<Vec<(String, String)>> {
    schema_to_rules(schema, ws).map(|converted| converted.rules)
}

fn one(regex: &str) -> Option<Vec<(String, String)>> {
    Some(vec![("#".to_string(), regex.to_string())])
}

#[test]
fn bounded_integers_are_digit_ranges() {
    // integer_range(1, 12): [1-9] for one digit, 1 then [0-2] for two
    assert_eq!(rules(r#"{"type": "integer", "minimum": 1, "maximum": 12}"#, ""), one("(?:[1-9]|1(?:[0-2]))"));
    // a float bound is rounded inwards (math.ceil / math.floor)
    assert_eq!(rules(r#"{"type": "integer", "minimum": -2.5, "maximum": 0}"#, ""), one("(?:0|-(?:[1-2]))"));
}

#[test]
fn objects_put_optional_properties_before_the_first_required_one() {
    let schema = r#"{"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "boolean"}},
                     "required": ["b"], "title": "ignored"}"#;
    assert_eq!(rules(schema, ""), one(r#"\{(?:"a":null,)?"b":(?:true|false)\}"#));
    assert_eq!(rules(schema, "[ ]?"), one(r#"\{[ ]?(?:"a"[ ]?:[ ]?null[ ]?,[ ]?)?"b"[ ]?:[ ]?(?:true|false)[ ]?\}"#));
}

#[test]
fn a_recursive_reference_is_a_call_to_its_own_rule() {
    let schema = r##"{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
                      "$ref": "#/$defs/n"}"##;
    let body = r#"\{(?:"next":(?-u:\xFE\x80\x81))?\}"#;
    assert_eq!(rules(schema, ""), Some(vec![("#".into(), body.into()), ("#/$defs/n".into(), body.into())]));
}

#[test]
fn a_free_value_is_a_call_to_the_any_value_rule() {
    let call = r"(?-u:\xFE\x80\x81)";
    let string = format!("\"{STRING_CHAR}*\"");
    let map = format!(r#"\{{(?:{string}:{call}(?:,{string}:{call})*)?\}}"#);
    let list = format!(r"\[(?:{call}(?:,{call})*)?\]");
    let any = format!("(?:{string}|{NUMBER}|{BOOLEAN}|null|{map}|{list})");
    let expected = Some(vec![("#".to_string(), call.to_string()), ("#any-json-value".to_string(), any)]);
    assert_eq!(rules("{}", ""), expected);
    assert_eq!(rules("true", ""), expected);
}

#[test]
fn enum_values_are_filtered_by_their_siblings() {
    assert_eq!(rules(r#"{"type": "string", "enum": ["a", 1, "bc"], "maxLength": 1}"#, ""), one("\"a\""));
    assert_eq!(rules(r#"{"enum": [1.5, -3, null, [true]]}"#, ""), one(r"(?:1\.5|\-3|null|\[true\])"));
}

#[test]
fn whitespace_that_is_not_one_atom_is_grouped() {
    let schema = r#"{"type": "array", "items": {"type": "null"}, "maxItems": 2}"#;
    assert_eq!(rules(schema, "  "), one(r"\[(?:  )(?:null(?:(?:  ),(?:  )null)?(?:  ))?\]"));
}

#[test]
fn schemas_outside_the_subset_are_declined() {
    for schema in [
        r#"{"not": {"type": "string"}}"#,
        r#"{"type": "string", "pattern": "\\W"}"#,
        r#"{"type": "string", "pattern": "a", "format": "date"}"#,
        r##"{"type": "string", "$dynamicRef": "#a"}"##,
        r#"{"type": "strin"}"#,
        r##"{"$ref": "#anchor"}"##,
        r#"{"$ref": "other.json"}"#,
        r#"false"#,
        r#"{"type": "string", "format": "color"}"#,
        r#"not json"#,
    ] {
        assert_eq!(rules(schema, ""), None, "{schema}");
    }
}

#[test]
fn bounded_numbers_spell_the_digits_between_the_bounds() {
    // number_range(0, 1.5): 0 with any fraction, or 1 with a fraction up to .5 (trailing zeros too)
    assert_eq!(
        rules(r#"{"type": "number", "minimum": 0, "maximum": 1.5}"#, ""),
        one(r"(?:0(?:\.[0-9]+)?|1(?:\.(?:0(?:[0-9]+)?|[1-4][0-9]*|5(?:0+)?))?)")
    );
    // exclusive bounds of integers: floor(lo) + 1 and ceil(hi) - 1
    assert_eq!(rules(r#"{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3}"#, ""), one("[1-2]"));
    // draft 4: a boolean exclusiveMinimum
    assert_eq!(rules(r#"{"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 2}"#, ""), one("[1-2]"));
}

#[test]
fn all_of_merges_its_subschemas() {
    let expected = format!("\"{}{{0,2}}\"", super::jregex::BOUNDED_STRING_CHAR);
    assert_eq!(rules(r#"{"allOf": [{"type": "string"}, {"maxLength": 2}]}"#, ""), one(&expected));
    // contradictory constants: no value (Python raises)
    assert_eq!(rules(r#"{"allOf": [{"const": 1}, {"const": 2}]}"#, ""), None);
}

#[test]
fn tuples_nest_their_optional_positions() {
    let schema = r#"{"type": "array", "items": [{"type": "null"}, {"type": "boolean"}], "additionalItems": false}"#;
    assert_eq!(rules(schema, ""), one(r"\[(?:null(?:,(?:true|false))?)?\]"));
}

#[test]
fn property_counts_bound_a_map() {
    let schema = r#"{"type": "object", "additionalProperties": {"type": "null"}, "minProperties": 1,
                     "maxProperties": 2}"#;
    let entry = format!("\"{STRING_CHAR}*\":null");
    assert_eq!(rules(schema, ""), one(&format!(r"\{{{entry}(?:,{entry})?\}}")));
}

#[test]
fn one_of_disjoint_branches_is_their_alternation() {
    let expected = format!("(?:\"{STRING_CHAR}*\"|(?:0|-?[1-9][0-9]*))");
    assert_eq!(rules(r#"{"oneOf": [{"type": "string"}, {"type": "integer"}]}"#, ""), one(&expected));
    // branches an instance may satisfy together: Python rewrites them (or raises); declined here
    assert_eq!(rules(r#"{"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}"#, ""), None);
}

/// Why bench schemas are declined, most frequent first (`cargo test --release --lib
/// json_schema::tests::decline_reasons -- --ignored --nocapture`; needs the shared corpus).
#[test]
#[ignore]
fn decline_reasons() {
    let text = crate::testing::shared_data("jsonschemabench_schemas.jsonl");
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut handled = 0;
    for line in text.lines() {
        let row: serde_json::Value = serde_json::from_str(line).expect("a row");
        let start = line.find("\"schema\":").expect("a schema") + "\"schema\":".len();
        // the schema's own text, in its key order (the row ends with it, then "}")
        let schema = &line[start..line.len() - 1];
        assert!(row["schema"].is_object() || row["schema"].is_boolean());
        match super::convert(schema, "[ ]?") {
            Ok(_) => handled += 1,
            Err(super::Unhandled(why)) => {
                let why = why.split(" (").next().unwrap_or_default().to_string();
                *counts.entry(why).or_default() += 1;
            }
        }
    }
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    println!("handled {handled}");
    for (why, n) in counts.iter().take(40) {
        println!("{n:6} {why}");
    }
}

/// Integers at the ends of `i128` (as JSON text or from a Python `int`) are bounds like any
/// other: no overflow taking their magnitude (`i128::MIN.abs()` panicked in debug builds).
#[test]
fn extreme_integer_bounds_do_not_overflow() {
    for bound in [i128::MIN, i128::MAX, i128::MIN + 1] {
        for schema in [
            format!(r#"{{"type": "integer", "minimum": {bound}}}"#),
            format!(r#"{{"type": "number", "maximum": {bound}, "minimum": 0.5}}"#),
            format!(r#"{{"enum": [{bound}, 1.5], "minimum": 0}}"#),
        ] {
            // Handled or declined, never a panic; a minimum of i128::MIN bounds nothing.
            let got = rules(&schema, "");
            if bound == i128::MIN && schema.contains("integer") {
                assert!(got.is_none() || got.is_some_and(|r| r.len() == 1 && r[0].1.contains("[0-9]")));
            }
        }
    }
}

/// Unknown keywords are ignored and listed with the pointer of their schema, in the order
/// Python's `flatten` meets them (a schema's own before its properties'), each pair once; a
/// keyword some draft defines but this module does not handle is declined instead.
#[test]
fn unknown_keywords_are_ignored_and_listed_with_their_pointers() {
    let schema = r##"{"x-top": 1, "type": "object", "properties": {"a/b": {"type": "null", "x-unit": "s"},
        "c": {"$ref": "#/properties/a~1b"}}, "required": ["a/b"]}"##;
    let converted = schema_to_rules(schema, "").expect("handled");
    let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
    assert_eq!(converted.ignored, pairs(&[("x-top", "#"), ("x-unit", "#/properties/a~1b")]));
    assert_eq!(Some(converted.rules), rules(&schema.replace("x-top", "title").replace("x-unit", "description"), ""));
    assert!(schema_to_rules(r#"{"type": "string", "not": {"const": "a"}}"#, "").is_none());
    assert_eq!(schema_to_rules(r#"{"type": "null"}"#, "").expect("handled").ignored, []);
}
