//! JSON Schema → pushdown rules, in Rust, for a subset of schemas: a fast path for
//! `propertok.json_schema.schema_to_rules` (`python/propertok/json_schema/__init__.py`).
//!
//! ## The contract: byte-identical to the Python converter, or "not handled"
//! [`schema_to_rules`] returns, for a schema in the subset below, exactly the rules the Python
//! converter returns for it in its default mode (`strict=None`, no `resources`): the same rule
//! names (JSON pointers, `#any-json-value`), the same regex text, in the same order. For any
//! other schema it returns `None` — including every schema Python would refuse, warn about or
//! fail on — so that the caller falls back to Python, which then says what it says. Being
//! byte-identical (not merely equivalent) is what makes the fast path checkable: the
//! differential test `tests/json_schema/test_rust_converter.py` runs both converters on every
//! schema of JSONSchemaBench and of the JSON Schema Test Suite and compares the output, so a
//! divergence is a failing test rather than a guide that quietly accepts other text. Every
//! function here mirrors the Python function of the same name; a change to either side must be
//! made to both (or the Rust side must decline the case).
//!
//! ## The subset
//! * `type` (a name or a list); `null`, `boolean`; `integer` and `number` with `minimum`,
//!   `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (draft-4 booleans too) and a `multipleOf`
//!   of 10^-k (the one that limits digits after the point; others need Python's residue
//!   automaton, `_multiple_of.py`); `string` with
//!   `minLength`/`maxLength` and the `format`s Python generates (date, time, date-time, uuid,
//!   email, uri, uri-reference, ipv4, ipv6, hostname), or a `pattern` (`ecma_pattern`, which
//!   declines the few patterns whose Python result rests on Python's Unicode tables);
//! * objects: `properties`, `required`, `additionalProperties` (a schema; absent or `true` is a
//!   free value in maps and for required names outside `properties`, as in Python),
//!   `patternProperties` (beside `properties`, and in merges, names that Python's `re` and
//!   ECMA-262 may judge differently are declined: `ecma_pattern::python_search`),
//!   `minProperties`/`maxProperties` where Python generates rather than raises,
//!   `dependencies`/`dependentRequired`/`dependentSchemas` (Python's `anyOf` of "absent, or
//!   present with what it requires" per entry, up to [`MAX_DEPENDENCIES`] entries, and not
//!   merged with another `anyOf`, `oneOf` or dependencies, which Python multiplies out);
//! * arrays: `items` (a schema, or a draft 4-7 tuple with `additionalItems`), `prefixItems`,
//!   `minItems`/`maxItems`, `uniqueItems` other than `true`;
//! * `enum`/`const` (values filtered by the sibling keywords Python checks exactly);
//! * `anyOf` and `allOf` (branches and subschemas merged with their siblings as Python's `merge`
//!   does; two subschemas it puts together for one property or item are a `Schema::AllOf`, as
//!   Python's `_all_of` writes `{"allOf": [x, y]}`); `oneOf` whose branches Python's
//!   `disjoint` tells apart (by type, constants, or a required property's constants);
//! * `$ref` to `#` and `#/...` pointers of the document (`$defs`, `definitions`, any path); a
//!   reference already being expanded on the path is a call to its own rule, a free value
//!   (`{}`, `true`, no type) a call to the `#any-json-value` rule;
//! * the annotations Python ignores silently (`title`, `description`, `default`, `$schema`,
//!   `$comment`, `$id` at the root, ...);
//! * keywords no draft defines (`x-kubernetes-*`, `javaType`, ...): ignored, and returned as
//!   `(keyword, pointer)` in the order Python's `flatten` meets them, each once
//!   ([`Converted::ignored`]), for the caller's `IgnoredKeywordsWarning`.
//!
//! Declined (`None`): every other keyword (`not`, `if`, the other uses of
//! `dependencies` and `multipleOf`, `propertyNames`, `contains`,
//! `uniqueItems: true`, ...), `$ref` to anchors, other documents, or from under a nested `$id`,
//! values of the wrong type, integers beyond `i128` (and beyond 2^53 beside floats), and the
//! places where Python raises.
//!
//! ## Costs
//! One pass over the document (the `$id`s, as Python's `_index` reads them), then the walk,
//! memoized per (schema, reference stack) as in Python (whose memo key also holds the pointer
//! the walk reached the schema by, which does not change the result). The same size limit as
//! Python (8,000,000 characters per value) plus a bound on nesting depth and on the total text
//! generated ([`MAX_TOTAL_CHARS`]): past them the schema is declined, never expanded further.
//! On the 4,182 JSONSchemaBench schemas it handles (of 4,749), a median of 29–30 µs per schema
//! against Python's 152–153 µs (p90 0.4 ms against 3.1 ms); on the 738 of them with `pattern`
//! or `patternProperties`, 145–156 µs against 1,783–1,845 µs. A schema with n dependencies
//! costs 2^n branches, as in Python. A pointer for an ignored keyword costs one more pass over
//! the document, only when there is one. The input is JSON text, read by [`json`] (which says
//! why not through `serde_json::Value`).

mod decimal;
mod ecma_pattern;
mod jregex;
pub mod json;

use std::borrow::Cow;
use std::collections::HashSet;
use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

use json::{json_type, same_json, Json};

/// A value regex longer than this is refused by Python (`MAX_REGEX_CHARS`): declined here.
pub const MAX_REGEX_CHARS: usize = 8_000_000;
/// The text generated in all (summed over memoized values) past which a schema is declined.
pub const MAX_TOTAL_CHARS: usize = 64_000_000;
/// Nesting of values (and `$ref` chains) past which a schema is declined.
pub const MAX_NESTING: usize = 120;

const ANY: &str = "#any-json-value";
/// Python's `_DEPENDENCIES`, in its order.
const DEPENDENCIES: [&str; 3] = ["dependencies", "dependentRequired", "dependentSchemas"];
/// Entries of one `dependencies` past which a schema is declined: Python writes an `anyOf` of
/// 2^n branches, each valued.
pub const MAX_DEPENDENCIES: usize = 8;
const MAX_MERGED_EXPANSIONS: usize = 3;
const TYPES: [&str; 7] = ["null", "boolean", "integer", "number", "string", "array", "object"];
const ANNOTATIONS: [&str; 19] = [
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "$vocabulary",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "title",
    "description",
    "examples",
    "default",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "definitions",
    "$defs",
];
/// Python's `SUPPORTED | UNSUPPORTED`: the keywords some draft defines that constrain values.
/// One outside these and [`ANNOTATIONS`] is unknown: ignored, and reported.
#[rustfmt::skip]
const SPEC_VALUE_KEYWORDS: [&str; 46] = [
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "if", "then", "else",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "unevaluatedProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "not", "dependencies", "dependentRequired", "dependentSchemas",
    "$dynamicRef", "$recursiveRef", "disallow", "extends", "divisibleBy",
];
/// Keywords copied into a flattened schema, as Python copies them (the handled ones only).
#[rustfmt::skip]
const PLAIN: [&str; 20] = [
    "type", "enum", "const", "anyOf", "oneOf", "required", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format", "minProperties", "maxProperties", "pattern",
    "multipleOf",
];
/// `_TYPE_KEYWORDS`, in its order, restricted to what a flattened schema here can hold.
const TYPE_KEYWORDS: [(&str, &[&str]); 4] = [
    (
        "object",
        &["properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties"],
    ),
    ("array", &["items", "prefixItems", "minItems", "maxItems", "uniqueItems"]),
    ("string", &["minLength", "maxLength", "pattern", "format"]),
    ("number", &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]),
];

/// Why a schema is not handled (for statistics and debugging; the caller falls back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhandled(pub String);

type R<T> = std::result::Result<T, Unhandled>;

fn decline<T>(why: impl Into<String>) -> R<T> {
    Err(Unhandled(why.into()))
}

/// What the converter made of a schema: Python's `(rules, ignored)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Converted {
    /// `(name, regex)`, the first rule the whole value.
    pub rules: Vec<(String, String)>,
    /// The unknown keywords ignored, `(keyword, JSON pointer of the schema holding it)`, in the
    /// order Python meets them, each once: what `IgnoredKeywordsWarning` reports.
    pub ignored: Vec<(String, String)>,
}

/// The rules of `schema_json` (JSON text) as `propertok.json_schema.schema_to_rules(schema,
/// whitespace=whitespace)` returns them, with the keywords it ignores, or `None` when the
/// schema is outside the subset (see the module doc): then the Python converter must be used.
pub fn schema_to_rules(schema_json: &str, whitespace: &str) -> Option<Converted> {
    convert(schema_json, whitespace).ok()
}

/// [`schema_to_rules`], saying why a schema is not handled.
pub fn convert(schema_json: &str, whitespace: &str) -> R<Converted> {
    let Some(root) = json::parse(schema_json) else { return decline("not JSON as the converter reads it") };
    convert_value(&root, whitespace)
}

/// [`convert`] of a schema already read (as [`json::parse`] reads JSON text, or from a Python
/// value by the binding).
pub fn convert_value(root: &Json, whitespace: &str) -> R<Converted> {
    let ws =
        if whitespace.is_empty() || atomic(whitespace) { whitespace.to_string() } else { format!("(?:{whitespace})") };
    let mut conv = Converter::new(root, ws)?;
    let Some(regex) = conv.value(Schema::Node(root), &[])? else {
        return decline("no JSON value satisfies the schema (Python raises)");
    };
    let mut out = vec![("#".to_string(), regex)];
    while out.len() <= conv.called.len() {
        let (ptr, node) = conv.called[out.len() - 1].clone();
        let body = match node {
            None => conv.any_value_rule()?,
            Some(node) => {
                let stack = [conv.intern(&ptr)];
                conv.value(Schema::Node(node), &stack)?.unwrap_or_else(|| "[^\\x00-\\x{10FFFF}]".to_string())
            }
        };
        out.push((ptr, body));
    }
    Ok(Converted { rules: out, ignored: conv.ignored_with_pointers()? })
}

/// Python's test for a whitespace regex that needs no group: `(?:\[[^\]\\]*\]|[ \t\n\r])[?*+]?`.
fn atomic(ws: &str) -> bool {
    let c: Vec<char> = ws.chars().collect();
    let mut i = if " \t\n\r".contains(c[0]) {
        1
    } else if c[0] == '[' {
        let mut j = 1;
        while j < c.len() && c[j] != ']' && c[j] != '\\' {
            j += 1;
        }
        if j >= c.len() || c[j] != ']' {
            return false;
        }
        j + 1
    } else {
        return false;
    };
    if i < c.len() && "?*+".contains(c[i]) {
        i += 1;
    }
    i == c.len()
}

fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// A subschema: a node of the document, or what merging makes (`_all_of`): a boolean, or the
/// conjunction `{"allOf": [...]}` of subschemas.
#[derive(Clone, Debug)]
enum Schema<'a> {
    Bool(bool),
    Node(&'a Json),
    AllOf(Rc<[Schema<'a>]>),
}

impl Schema<'_> {
    /// Python's `x is True`.
    fn is_true(&self) -> bool {
        matches!(self, Schema::Bool(true) | Schema::Node(Json::Bool(true)))
    }
    fn is_false(&self) -> bool {
        matches!(self, Schema::Bool(false) | Schema::Node(Json::Bool(false)))
    }
    /// `x == {}`.
    fn is_empty_object(&self) -> bool {
        matches!(self, Schema::Node(Json::Obj(o)) if o.is_empty())
    }
}

/// `_all_of` of two optional subschemas.
fn all_of<'a>(x: Option<Schema<'a>>, y: Option<Schema<'a>>) -> R<Schema<'a>> {
    let mut present: Vec<Schema<'a>> =
        [x, y].into_iter().flatten().filter(|s| !s.is_true() && !s.is_empty_object()).collect();
    if present.iter().any(Schema::is_false) {
        return Ok(Schema::Bool(false));
    }
    Ok(match present.len() {
        0 => Schema::Bool(true),
        1 => present.pop().expect("one"),
        _ => Schema::AllOf(present.into()),
    })
}

/// A flattened schema (Python's `flatten` result): keywords, with `properties`,
/// `additionalProperties` and `items` as subschemas; `call` for a recursive reference.
#[derive(Clone, Default, Debug)]
struct Flat<'a> {
    plain: Vec<(&'static str, Cow<'a, Json>)>,
    properties: Option<Vec<(&'a str, Schema<'a>)>>,
    additional: Option<Schema<'a>>,
    /// `patternProperties`: (pattern, subschema) in order.
    patterns: Option<Vec<(&'a str, Schema<'a>)>>,
    items: Option<Schema<'a>>,
    /// `prefixItems` (a draft 4-7 `items` list becomes this, `additionalItems` its `items`).
    prefix: Option<Vec<Schema<'a>>>,
    call: Option<(String, &'a Json)>,
    /// `dependencies` (or `dependentRequired`, `dependentSchemas`): Python merges them in as an
    /// `anyOf` of "absent, or present with the rest" per entry ([`Dependency`]).
    dependencies: Option<Vec<Dependency<'a>>>,
}

/// One entry of `dependencies`: a property name and what its presence requires.
#[derive(Clone, Debug)]
struct Dependency<'a> {
    name: &'a str,
    requires: Requires<'a>,
}

#[derive(Clone, Debug)]
enum Requires<'a> {
    /// `{"required": [name, others...]}`: the other names (without `name`) in order.
    Names(Vec<&'a str>),
    /// `{"allOf": [{"required": [name]}, schema]}`.
    Schema(Schema<'a>),
}

impl<'a> Flat<'a> {
    fn get(&self, key: &str) -> Option<&Json> {
        self.plain.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_ref())
    }
    fn has(&self, key: &str) -> bool {
        match key {
            "properties" => self.properties.is_some(),
            "additionalProperties" => self.additional.is_some(),
            "patternProperties" => self.patterns.is_some(),
            "items" => self.items.is_some(),
            "prefixItems" => self.prefix.is_some(),
            _ => self.get(key).is_some(),
        }
    }
    fn set(&mut self, key: &'static str, value: Cow<'a, Json>) {
        match self.plain.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.plain.push((key, value)),
        }
    }
    fn is_empty(&self) -> bool {
        self.plain.is_empty()
            && self.properties.is_none()
            && self.additional.is_none()
            && self.patterns.is_none()
            && self.items.is_none()
            && self.prefix.is_none()
            && self.call.is_none()
            && self.dependencies.is_none()
    }
    /// The keys present, for the family check of `_literal_ok`.
    fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.plain.iter().map(|(k, _)| *k).collect();
        for (k, present) in [
            ("properties", self.properties.is_some()),
            ("additionalProperties", self.additional.is_some()),
            ("patternProperties", self.patterns.is_some()),
            ("items", self.items.is_some()),
            ("prefixItems", self.prefix.is_some()),
        ] {
            if present {
                keys.push(k);
            }
        }
        keys
    }
}

/// Exact comparison of two JSON numbers as Python compares `int`/`float`.
fn cmp_num(a: &Json, b: &Json) -> R<std::cmp::Ordering> {
    const EXACT: i128 = 1 << 53;
    let ord = match (a, b) {
        (Json::Int(x), Json::Int(y)) => Some(x.cmp(y)),
        (Json::Float(x), Json::Float(y)) => x.partial_cmp(y),
        (Json::Int(x), Json::Float(y)) if x.unsigned_abs() <= EXACT as u128 => (*x as f64).partial_cmp(y),
        (Json::Float(x), Json::Int(y)) if y.unsigned_abs() <= EXACT as u128 => x.partial_cmp(&(*y as f64)),
        _ => None,
    };
    ord.map_or_else(|| decline("numbers not compared here"), Ok)
}

/// `_numbers`: a number, not a boolean.
fn is_number(v: &Json) -> bool {
    matches!(v, Json::Int(_) | Json::Float(_))
}

/// Python's truthiness of a JSON value.
fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Int(i) => *i != 0,
        Json::BigInt => true,
        Json::Float(f) => *f != 0.0,
        Json::Str(s) => !s.is_empty(),
        Json::Arr(a) => !a.is_empty(),
        Json::Obj(o) => !o.is_empty(),
    }
}

/// A count keyword (`_count`): absent → `default`; declined where Python raises.
fn count(flat: &Flat, key: &str, default: Option<i128>) -> R<Option<i128>> {
    match flat.get(key) {
        None => Ok(default),
        Some(Json::Null) if default.is_none() => Ok(None),
        Some(Json::Int(i)) if *i >= 0 => Ok(Some(*i)),
        Some(Json::Float(f)) if *f >= 0.0 && f.fract() == 0.0 && *f < 1e18 => Ok(Some(*f as i128)),
        Some(_) => decline(format!("{key} is not a count")),
    }
}

/// A number value of a keyword: `None` when absent or null, declined when not a number.
fn number_value<'j>(flat: &'j Flat, key: &str) -> R<Option<&'j Json>> {
    match flat.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) if is_number(v) => Ok(Some(v)),
        Some(_) => decline(format!("{key} is not a number")),
    }
}

/// `_bound`: the tightest bound of `key`/`exclusive_key` and whether it is exclusive (draft 4:
/// a boolean exclusive flag).
fn bound<'j>(flat: &'j Flat, key: &str, exclusive_key: &str) -> R<(Option<&'j Json>, bool)> {
    let value = number_value(flat, key)?;
    let excl = match flat.get(exclusive_key) {
        Some(Json::Bool(b)) => return Ok((value, *b && value.is_some())),
        _ => number_value(flat, exclusive_key)?,
    };
    let Some(excl) = excl else { return Ok((value, false)) };
    let Some(value) = value else { return Ok((Some(excl), true)) };
    let ord = cmp_num(excl, value)?;
    if if key == "minimum" { ord.is_ge() } else { ord.is_le() } {
        Ok((Some(excl), true))
    } else {
        Ok((Some(value), false))
    }
}

/// Integers from here on are declined as bounds (the digit arithmetic stays within `i128`).
const LARGE: i128 = 10i128.pow(30);

/// An integer bound rounded inwards (`math.floor(lo) + 1` / `math.ceil(lo)`, and for upper
/// bounds `math.ceil(hi) - 1` / `math.floor(hi)`).
fn integer_bound(v: Option<&Json>, exclusive: bool, lower: bool) -> R<Option<i128>> {
    let (floor, ceil) = match v {
        None => return Ok(None),
        Some(Json::Int(i)) if i.unsigned_abs() < LARGE as u128 => (*i, *i),
        Some(Json::Float(f)) if f.abs() < 1e18 => (f.floor() as i128, f.ceil() as i128),
        Some(_) => return decline("a bound too large"),
    };
    Ok(Some(match (lower, exclusive) {
        (true, true) => floor + 1,
        (true, false) => ceil,
        (false, true) => ceil - 1,
        (false, false) => floor,
    }))
}

type Key = (usize, Vec<u32>);

struct Converter<'a> {
    ws: String,
    sep: String,
    /// The pointers of `$ref` targets met so far: a reference stack holds their indices.
    targets: HashMap<String, u32>,
    /// Objects under (or with) a nested `$id`: their `$ref`s are declined.
    foreign: HashSet<usize>,
    root: &'a Json,
    memo: HashMap<Key, Option<String>>,
    /// The merged subschemas (`Schema::AllOf`) valued so far, kept so that the address a memo
    /// key holds is never reused.
    synthetic: Vec<Rc<[Schema<'a>]>>,
    /// The rules called so far: pointer and target (`None`: the free-value rule).
    called: Vec<(String, Option<&'a Json>)>,
    call_index: HashMap<String, usize>,
    depth: usize,
    total: usize,
    /// Unknown keywords met by `flatten`, with the address of the object holding each.
    ignored: Vec<(&'a str, usize)>,
}

fn addr(v: &Json) -> usize {
    v as *const Json as usize
}

impl<'a> Converter<'a> {
    fn new(root: &'a Json, ws: String) -> R<Self> {
        let sep = format!("{ws},{ws}");
        let mut conv = Converter {
            ws,
            sep,
            targets: HashMap::default(),
            foreign: HashSet::new(),
            root,
            memo: HashMap::default(),
            synthetic: Vec::new(),
            called: Vec::new(),
            call_index: HashMap::default(),
            depth: 0,
            total: 0,
            ignored: Vec::new(),
        };
        conv.index(root, false, true)?;
        Ok(conv)
    }

    /// Python's `_index`, for what the subset needs: where a nested `$id` changes the base URI
    /// (`foreign`). An `$id` Python's URL functions might reject is declined. (Python also
    /// records every object's pointer: the walk's pointers only name schemas in its error
    /// messages and memo keys, never in the rules, so they are not computed here.)
    fn index(&mut self, node: &'a Json, mut foreign: bool, is_root: bool) -> R<()> {
        match node {
            Json::Obj(o) => {
                let id = match (o.get("$id"), o.get("id")) {
                    (Some(Json::Str(s)), _) => Some(s),
                    (Some(_), _) => None,
                    (None, Some(Json::Str(s))) => Some(s),
                    _ => None,
                };
                if let Some(id) = id {
                    if !id.bytes().all(|b| (0x21..0x7F).contains(&b) && b != b'[' && b != b']') {
                        return decline("an $id URL functions may reject");
                    }
                    if !id.starts_with('#') && !is_root {
                        foreign = true;
                    }
                }
                if foreign {
                    self.foreign.insert(addr(node));
                }
                for (_, v) in o.iter() {
                    self.index(v, foreign, false)?;
                }
            }
            Json::Arr(items) => {
                for v in items {
                    self.index(v, foreign, false)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The ignored keywords with the JSON pointer of the object holding each (where Python's
    /// `_index` found it; the binding declines a Python value whose dicts are shared, the one
    /// case where a document position is not unique), each pair once, first meeting first.
    fn ignored_with_pointers(&self) -> R<Vec<(String, String)>> {
        if self.ignored.is_empty() {
            return Ok(Vec::new());
        }
        let mut pointers: HashMap<usize, String> = HashMap::default();
        let mut todo: Vec<(&Json, String)> = vec![(self.root, "#".to_string())];
        while let Some((node, ptr)) = todo.pop() {
            match node {
                Json::Obj(o) => {
                    todo.extend(o.iter().map(|(k, v)| (v, format!("{ptr}/{}", escape_token(k)))));
                    pointers.insert(addr(node), ptr);
                }
                Json::Arr(items) => todo.extend(items.iter().enumerate().map(|(i, v)| (v, format!("{ptr}/{i}")))),
                _ => {}
            }
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for &(k, node) in &self.ignored {
            let Some(ptr) = pointers.get(&node) else { return decline("an ignored keyword outside the document") };
            let pair = (k.to_string(), ptr.clone());
            if seen.insert(pair.clone()) {
                out.push(pair);
            }
        }
        Ok(out)
    }

    /// `resolve` for `#` and `#/...` references: the target and its pointer.
    fn resolve(&self, reference: &Json) -> R<(&'a Json, String)> {
        let Some(r) = reference.as_str() else { return decline("$ref is not a string") };
        let Some(fragment) = r.strip_prefix('#') else { return decline("$ref to another document") };
        if r.chars().any(|c| (c as u32) < 0x21 || c as u32 == 0x7F) {
            return decline("$ref with characters URL parsing may drop");
        }
        if !fragment.is_empty() && !fragment.starts_with('/') {
            return decline("$ref to an anchor");
        }
        let mut node = self.root;
        let mut node_ptr = "#".to_string();
        if fragment.is_empty() {
            return Ok((node, node_ptr));
        }
        for token in fragment.split('/').skip(1) {
            let token = percent_decode(token).replace("~1", "/").replace("~0", "~");
            node = match node {
                Json::Arr(items) => {
                    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
                        return decline("$ref with an unusual array index");
                    }
                    match token.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        Some(v) => v,
                        None => return decline("$ref points to nothing"),
                    }
                }
                Json::Obj(o) => match o.get(&token) {
                    Some(v) => v,
                    None => return decline("$ref points to nothing"),
                },
                _ => return decline("$ref points to nothing"),
            };
            node_ptr = format!("{node_ptr}/{}", escape_token(&token));
        }
        Ok((node, node_ptr))
    }

    /// The index of a target pointer, for reference stacks.
    fn intern(&mut self, ptr: &str) -> u32 {
        if let Some(&i) = self.targets.get(ptr) {
            return i;
        }
        let i = self.targets.len() as u32;
        self.targets.insert(ptr.to_string(), i);
        i
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return decline("nesting deeper than MAX_NESTING");
        }
        Ok(())
    }

    /// `flatten`: the node's keywords, its `$ref` merged in.
    #[allow(clippy::type_complexity)]
    fn flatten(&mut self, node: Schema<'a>, stack: &[u32]) -> R<(Option<Flat<'a>>, Vec<u32>)> {
        let o = match node {
            Schema::Bool(b) | Schema::Node(&Json::Bool(b)) => {
                return Ok((b.then(Flat::default), stack.to_vec()));
            }
            Schema::Node(Json::Obj(o)) => o,
            Schema::Node(_) => return decline("a schema that is not an object or a boolean"),
            Schema::AllOf(parts) => return self.flatten_all_of(&parts, stack),
        };
        let Schema::Node(node_value) = node else { unreachable!() };
        let mut out = Flat::default();
        for (k, v) in o.iter() {
            let k = k.as_str();
            if let Some(&plain) = PLAIN.iter().find(|p| **p == k) {
                out.plain.push((plain, Cow::Borrowed(v)));
            } else if k == "properties" {
                out.properties = Some(properties(v)?);
            } else if k == "additionalProperties" {
                out.additional = Some(subschema(v)?);
            } else if DEPENDENCIES.contains(&k) {
                // read below
            } else if k == "patternProperties" {
                out.patterns = Some(properties(v)?);
            } else if ["$ref", "items", "allOf", "prefixItems", "additionalItems"].contains(&k) {
                // read below
            } else if ANNOTATIONS.contains(&k) || (k == "id" && matches!(v, Json::Str(_))) {
                continue;
            } else if SPEC_VALUE_KEYWORDS.contains(&k) || k == "$if" {
                return decline(format!("keyword {k:?}"));
            } else {
                self.ignored.push((k, addr(node_value)));
            }
        }
        match o.get("items") {
            Some(Json::Arr(tuple)) => {
                // draft 4-7 tuple: the same as prefixItems + items (additionalItems)
                out.prefix = Some(tuple.iter().map(subschema).collect::<R<_>>()?);
                if let Some(extra) = o.get("additionalItems") {
                    out.items = Some(subschema(extra)?);
                }
            }
            items => {
                if let Some(prefix) = o.get("prefixItems") {
                    let Json::Arr(prefix) = prefix else { return decline("prefixItems not an array") };
                    out.prefix = Some(prefix.iter().map(subschema).collect::<R<_>>()?);
                }
                if let Some(items) = items {
                    out.items = Some(subschema(items)?);
                }
            }
        }
        let mut stack = stack.to_vec();
        if let Some(reference) = o.get("$ref") {
            if self.foreign.contains(&addr(node_value)) {
                return decline("$ref under a nested $id");
            }
            let (target, target_ptr) = self.resolve(reference)?;
            let target_id = self.intern(&target_ptr);
            if stack.contains(&target_id) {
                let pure = o.iter().all(|(k, _)| k == "$ref" || ANNOTATIONS.contains(&k.as_str()));
                if pure {
                    out.call = Some((target_ptr, target));
                    return Ok((Some(Flat { call: out.call, ..Flat::default() }), stack));
                }
                if stack.iter().filter(|p| **p == target_id).count() >= MAX_MERGED_EXPANSIONS {
                    return decline("a recursive $ref with siblings expanded too often (Python raises)");
                }
            }
            stack.push(target_id);
            let Some(flat) = self.flatten_nested(Schema::Node(target), &mut stack)? else { return Ok((None, stack)) };
            match self.merge(flat, out)? {
                Some(merged) => out = merged,
                None => return Ok((None, stack)),
            }
        }
        for key in DEPENDENCIES {
            let Some(deps) = o.get(key) else { continue };
            let Some(deps) = dependencies(deps)? else { continue };
            match self.merge(out, Flat { dependencies: Some(deps), ..Flat::default() })? {
                Some(merged) => out = merged,
                None => return Ok((None, stack)),
            }
        }
        if let Some(subs) = o.get("allOf") {
            let Json::Arr(subs) = subs else { return decline("allOf not an array (Python raises)") };
            if subs.is_empty() {
                return decline("empty allOf (Python raises)");
            }
            for sub in subs {
                let merged = match self.flatten_nested(Schema::Node(sub), &mut stack)? {
                    None => None,
                    Some(flat) => self.merge(out, flat)?,
                };
                match merged {
                    Some(merged) => out = merged,
                    None => return Ok((None, stack)),
                }
            }
        }
        Ok((Some(out), stack))
    }

    /// `flatten` of a schema nested in the one being flattened (a `$ref` target, an `allOf`
    /// part), one level deeper, the reference stack carried on to the next part.
    fn flatten_nested(&mut self, node: Schema<'a>, stack: &mut Vec<u32>) -> R<Option<Flat<'a>>> {
        self.enter()?;
        let flattened = self.flatten(node, stack);
        self.depth -= 1;
        let (flat, new_stack) = flattened?;
        *stack = new_stack;
        Ok(flat)
    }

    /// `merge`: the conjunction of two flattened schemas (`None`: contradictory).
    fn merge(&mut self, a: Flat<'a>, b: Flat<'a>) -> R<Option<Flat<'a>>> {
        if a.call.is_some() || b.call.is_some() {
            if b.is_empty() {
                return Ok(Some(a));
            }
            if a.is_empty() {
                return Ok(Some(b));
            }
            return decline("a recursive call merged with keywords");
        }
        let mut out = a.clone();
        if a.dependencies.is_some() || b.dependencies.is_some() {
            let alternatives = |f: &Flat| f.dependencies.is_some() || f.has("anyOf") || f.has("oneOf");
            if (a.dependencies.is_some() && alternatives(&b)) || (b.dependencies.is_some() && alternatives(&a)) {
                return decline("dependencies merged with an anyOf, a oneOf or dependencies (Python multiplies them)");
            }
            out.dependencies = a.dependencies.clone().or_else(|| b.dependencies.clone());
        }
        let names_keys = |f: &Flat| f.properties.is_some() || f.additional.is_some() || f.patterns.is_some();
        if names_keys(&a) || names_keys(&b) {
            // `merge_properties`: each side's `additionalProperties` (and patterns) apply to the
            // names the other side declares, before the two are put together
            let no_props = Vec::new();
            let (pa, pb) = (a.properties.as_ref().unwrap_or(&no_props), b.properties.as_ref().unwrap_or(&no_props));
            let (qa, qb) = (a.patterns.as_ref().unwrap_or(&no_props), b.patterns.as_ref().unwrap_or(&no_props));
            // `side_schema`: a name's own schema, else `true` where one of the side's patterns
            // matches it (its schema comes through the merged patterns), else the side's rest
            let side = |props: &[(&'a str, Schema<'a>)],
                        patterns: &[(&'a str, Schema<'a>)],
                        extra: &Option<Schema<'a>>,
                        name: &str|
             -> R<Option<Schema<'a>>> {
                if let Some((_, s)) = props.iter().find(|(n, _)| *n == name) {
                    return Ok(Some(s.clone()));
                }
                for (pattern, _) in patterns {
                    if ecma_pattern::python_search(pattern, name)? {
                        return Ok(Some(Schema::Bool(true)));
                    }
                }
                Ok(extra.clone())
            };
            let mut names: Vec<&'a str> = Vec::new();
            for (n, _) in pa.iter().chain(pb.iter()) {
                if !names.contains(n) {
                    names.push(n);
                }
            }
            let has_names = !names.is_empty();
            if has_names {
                let mut merged = Vec::with_capacity(names.len());
                for n in names {
                    merged.push((n, all_of(side(pa, qa, &a.additional, n)?, side(pb, qb, &b.additional, n)?)?));
                }
                out.properties = Some(merged);
            }
            let mut patterns: Vec<(&'a str, Schema<'a>)> = qa.clone();
            for (pattern, sub) in qb {
                match patterns.iter_mut().find(|(p, _)| p == pattern) {
                    Some(slot) => slot.1 = all_of(Some(slot.1.clone()), Some(sub.clone()))?,
                    None => patterns.push((pattern, sub.clone())),
                }
            }
            if !patterns.is_empty() && !has_names {
                // a map: each side's additionalProperties joins the other side's patterns
                for (mine, other, extra) in [(qa, qb, &b.additional), (qb, qa, &a.additional)] {
                    let Some(extra) = extra else { continue };
                    for (pattern, _) in mine {
                        if !other.iter().any(|(p, _)| p == pattern) {
                            let slot = patterns.iter_mut().find(|(p, _)| p == pattern).expect("merged");
                            slot.1 = all_of(Some(slot.1.clone()), Some(extra.clone()))?;
                        }
                    }
                }
            }
            if !patterns.is_empty() {
                out.patterns = Some(patterns);
            }
            if a.additional.is_some() || b.additional.is_some() {
                out.additional = Some(all_of(a.additional.clone(), b.additional.clone())?);
            }
        }
        if a.items.is_some() || b.items.is_some() || a.prefix.is_some() || b.prefix.is_some() {
            let empty = Vec::new();
            let (pa, pb) = (a.prefix.as_ref().unwrap_or(&empty), b.prefix.as_ref().unwrap_or(&empty));
            let n = pa.len().max(pb.len());
            if n > 0 {
                let mut merged = Vec::with_capacity(n);
                for i in 0..n {
                    merged
                        .push(all_of(pa.get(i).cloned().or(a.items.clone()), pb.get(i).cloned().or(b.items.clone()))?);
                }
                out.prefix = Some(merged);
            }
            if a.items.is_some() || b.items.is_some() {
                out.items = Some(all_of(a.items, b.items)?);
            }
        }
        for (k, v) in b.plain {
            let Some(u) = out.get(k) else {
                out.set(k, v);
                continue;
            };
            if same_json(u, &v).ok_or_else(|| Unhandled("a big integer".into()))? {
                out.set(k, v);
                continue;
            }
            let combined: Json = match k {
                "type" => {
                    let mut sides = Vec::new();
                    for side in [u, v.as_ref()] {
                        let names: Vec<&str> = match side {
                            Json::Str(s) => vec![s.as_str()],
                            Json::Arr(items) if items.iter().all(|x| matches!(x, Json::Str(_))) => {
                                items.iter().filter_map(Json::as_str).collect()
                            }
                            _ => return decline("type of another form"),
                        };
                        let mut set: HashSet<&str> = names.into_iter().collect();
                        if set.contains("number") {
                            set.insert("integer");
                        }
                        sides.push(set);
                    }
                    let both: Vec<Json> = TYPES
                        .iter()
                        .filter(|t| sides[0].contains(**t) && sides[1].contains(**t))
                        .map(|t| Json::Str(t.to_string()))
                        .collect();
                    if both.is_empty() {
                        return Ok(None);
                    }
                    Json::Arr(both)
                }
                "required" => {
                    let (Json::Arr(x), Json::Arr(y)) = (u, v.as_ref()) else { return decline("required not a list") };
                    if !x.iter().chain(y.iter()).all(|n| matches!(n, Json::Str(_))) {
                        return decline("required names that are not strings");
                    }
                    let mut all = x.clone();
                    for n in y {
                        if !x.contains(n) {
                            all.push(n.clone());
                        }
                    }
                    Json::Arr(all)
                }
                "minimum" | "minLength" | "minItems" | "minProperties" | "maximum" | "maxLength" | "maxItems"
                | "maxProperties" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    if !is_number(u) || !is_number(&v) {
                        return decline("bounds that are not numbers");
                    }
                    let ord = cmp_num(&v, u)?;
                    let lower = k.starts_with("min") || k == "exclusiveMinimum";
                    let take_v = if lower { ord.is_gt() } else { ord.is_lt() };
                    if take_v {
                        v.as_ref().clone()
                    } else {
                        u.clone()
                    }
                }
                "uniqueItems" => Json::Bool(truthy(u) || truthy(&v)),
                "enum" => {
                    let (Json::Arr(x), Json::Arr(y)) = (u, v.as_ref()) else { return decline("enum not a list") };
                    let mut kept = Vec::new();
                    for item in x {
                        let mut found = false;
                        for other in y {
                            if same_json(item, other).ok_or_else(|| Unhandled("a big integer".into()))? {
                                found = true;
                                break;
                            }
                        }
                        if found {
                            kept.push(item.clone());
                        }
                    }
                    Json::Arr(kept)
                }
                "const" => return Ok(None),
                _ => return decline(format!("two different values of {k} (Python raises or builds allOf)")),
            };
            out.set(k, Cow::Owned(combined));
        }
        Ok(Some(out))
    }

    /// `value`: the regex of a subschema (`None`: no value), memoized.
    fn value(&mut self, node: Schema<'a>, stack: &[u32]) -> R<Option<String>> {
        let id = match &node {
            Schema::Bool(b) => *b as usize + 1,
            Schema::Node(v) => addr(v),
            Schema::AllOf(parts) => parts.as_ptr() as usize,
        };
        let key = (id, stack.to_vec());
        if let Some(found) = self.memo.get(&key) {
            return Ok(found.clone());
        }
        if let Schema::AllOf(parts) = &node {
            // Python keeps the dict alive beside its memo entry, so its id stays unique
            self.synthetic.push(parts.clone());
        }
        self.enter()?;
        let result = self.value_uncached(node, stack);
        self.depth -= 1;
        let result = result?;
        self.check_size(&result)?;
        self.memo.insert(key, result.clone());
        Ok(result)
    }

    /// `check_size` of a value's regex, and the text generated in all.
    fn check_size(&mut self, result: &Option<String>) -> R<()> {
        if let Some(r) = result {
            let chars = if self.ws.is_ascii() { r.len() } else { r.chars().count() };
            if chars > MAX_REGEX_CHARS {
                return decline("a regex longer than MAX_REGEX_CHARS (Python raises)");
            }
            self.total += r.len();
            if self.total > MAX_TOTAL_CHARS {
                return decline("more text than MAX_TOTAL_CHARS");
            }
        }
        Ok(())
    }

    /// `flatten` of `{"allOf": parts}`: each part flattened in order and merged into the
    /// conjunction so far, up to the first contradiction.
    #[allow(clippy::type_complexity)]
    fn flatten_all_of(&mut self, parts: &[Schema<'a>], stack: &[u32]) -> R<(Option<Flat<'a>>, Vec<u32>)> {
        let mut stack = stack.to_vec();
        let mut out = Flat::default();
        for part in parts {
            let flat = self.flatten_nested(part.clone(), &mut stack)?;
            match flat.map(|flat| self.merge(out, flat)).transpose()?.flatten() {
                Some(merged) => out = merged,
                None => return Ok((None, stack)),
            }
        }
        Ok((Some(out), stack))
    }

    fn value_uncached(&mut self, node: Schema<'a>, stack: &[u32]) -> R<Option<String>> {
        let (flat, stack) = self.flatten(node, stack)?;
        match flat {
            None => Ok(None),
            Some(flat) => self.value_flat(flat, &stack),
        }
    }

    fn value_flat(&mut self, flat: Flat<'a>, stack: &[u32]) -> R<Option<String>> {
        if let Some((target_ptr, target)) = &flat.call {
            return self.call(target_ptr, Some(target)).map(Some);
        }
        if let Some(deps) = &flat.dependencies {
            // Python's `anyOf` branch loop: every branch flattened first, then each merged with
            // the rest of the schema and valued
            let mut base = flat.clone();
            base.dependencies = None;
            let branches = 1u32 << deps.len();
            let mut flats = Vec::with_capacity(branches as usize);
            for present in 0..branches {
                flats.push(self.dependency_branch(deps, present, stack)?);
            }
            let mut options = Vec::new();
            for (bflat, bstack) in flats {
                let Some(bflat) = bflat else { continue };
                let Some(merged) = self.merge(base.clone(), bflat)? else { continue };
                options.extend(self.value_flat(merged, &bstack)?);
            }
            return Ok((!options.is_empty()).then(|| jregex::alternation(options)));
        }
        for key in ["anyOf", "oneOf"] {
            let Some((_, branches)) = flat.plain.iter().find(|(k, _)| *k == key) else { continue };
            // the branches are nodes of the document (an anyOf is never merged with another)
            let Cow::Borrowed(Json::Arr(nodes)) = branches.clone() else {
                return decline("anyOf/oneOf not an array (Python raises)");
            };
            if nodes.is_empty() {
                return decline("empty anyOf/oneOf (Python raises)");
            }
            let mut base = flat.clone();
            base.plain.retain(|(k, _)| *k != key);
            let mut flats = Vec::with_capacity(nodes.len());
            for b in nodes {
                flats.push(self.flatten(Schema::Node(b), stack)?);
            }
            let mut options = Vec::new();
            for (i, (bflat, bstack)) in flats.iter().enumerate() {
                let Some(bflat) = bflat.clone() else { continue };
                let mut merged = self.merge(base.clone(), bflat)?;
                if key == "oneOf" {
                    // each branch without the instances of the others: here only where they
                    // are disjoint already (Python's exclude goes further, or raises)
                    for (j, (other, _)) in flats.iter().enumerate() {
                        if let Some(m) = merged.take() {
                            merged = if j == i { Some(m) } else { self.exclude_disjoint(m, other.clone(), stack)? };
                        }
                    }
                }
                let Some(merged) = merged else { continue };
                if let Some(o) = self.value_flat(merged, bstack)? {
                    options.push(o);
                }
            }
            return Ok((!options.is_empty()).then(|| jregex::alternation(options)));
        }
        if flat.has("enum") || flat.has("const") {
            return self.literals(&flat);
        }
        let Some(types) = self.types(&flat)? else { return self.call(ANY, None).map(Some) };
        let mut options = Vec::new();
        for t in types {
            let option = match t {
                "null" => Some(jregex::NULL.to_string()),
                "boolean" => Some(jregex::BOOLEAN.to_string()),
                "integer" | "number" => self.number(&flat, t)?,
                "string" => self.string(&flat)?,
                "array" => self.array(&flat, stack)?,
                _ => self.object(&flat, stack)?,
            };
            options.extend(option);
        }
        Ok((!options.is_empty()).then(|| jregex::alternation(options)))
    }

    /// The flattened branch of `_dependencies_as_any_of`'s `anyOf` in which the entries whose bit
    /// is set in `present` (the first entry the highest bit, as Python's product orders them)
    /// are present and the others absent: the entries' parts merged in order, as `flatten`
    /// merges the nested `allOf`s, stopping at the first contradiction.
    #[allow(clippy::type_complexity)]
    fn dependency_branch(
        &mut self,
        deps: &[Dependency<'a>],
        present: u32,
        stack: &[u32],
    ) -> R<(Option<Flat<'a>>, Vec<u32>)> {
        let mut stack = stack.to_vec();
        let mut so_far = Flat::default();
        for (i, dep) in deps.iter().enumerate() {
            let required = |names: Vec<&str>| {
                let names = names.into_iter().map(|n| Json::Str(n.to_string())).collect();
                Flat { plain: vec![("required", Cow::Owned(Json::Arr(names)))], ..Flat::default() }
            };
            let part = if present >> (deps.len() - 1 - i) & 1 == 0 {
                Some(Flat { properties: Some(vec![(dep.name, Schema::Bool(false))]), ..Flat::default() })
            } else {
                match &dep.requires {
                    Requires::Names(others) => Some(required([&[dep.name][..], others].concat())),
                    Requires::Schema(schema) => match self.flatten_nested(schema.clone(), &mut stack)? {
                        None => None,
                        Some(flat) => self.merge(required(vec![dep.name]), flat)?,
                    },
                }
            };
            let merged = match part {
                None => None,
                Some(part) => self.merge(so_far, part)?,
            };
            match merged {
                Some(merged) => so_far = merged,
                None => return Ok((None, stack)),
            }
        }
        Ok((Some(so_far), stack))
    }

    /// `unfold`: a call's schema flattened one level; anything else as it is.
    fn unfold(&mut self, flat: Option<Flat<'a>>) -> R<Option<Flat<'a>>> {
        match flat {
            Some(Flat { call: Some((ptr, node)), .. }) => {
                let stack = [self.intern(&ptr)];
                Ok(self.flatten(Schema::Node(node), &stack)?.0)
            }
            other => Ok(other),
        }
    }

    /// `exclude_exact(a, b)` as far as it goes without rewriting `a`: `b` false (nothing to
    /// exclude), `b` true (everything), `b` disjoint from `a` (`a` as it is); declined beyond.
    fn exclude_disjoint(&mut self, a: Flat<'a>, b: Option<Flat<'a>>, stack: &[u32]) -> R<Option<Flat<'a>>> {
        let Some(a) = self.unfold(Some(a))? else { return Ok(None) };
        let Some(b) = self.unfold(b)? else { return Ok(Some(a)) };
        if b.is_empty() {
            return Ok(None);
        }
        let only_any_of = |f: &Flat| f.keys() == ["anyOf"];
        if only_any_of(&a) || only_any_of(&b) {
            return decline("oneOf over an anyOf");
        }
        if self.disjoint(&a, &b, stack)? {
            return Ok(Some(a));
        }
        decline("oneOf branches that are not disjoint")
    }

    /// `disjoint`: no instance generated from `a` satisfies `b` (types, constants, and a
    /// required property whose constants differ).
    fn disjoint(&mut self, a: &Flat<'a>, b: &Flat<'a>, stack: &[u32]) -> R<bool> {
        if a.dependencies.is_some() || b.dependencies.is_some() {
            return decline("dependencies in a oneOf branch (Python's anyOf of them meets exclude)");
        }
        let (va, vb) = (literal_values(a), literal_values(b));
        if let (Some(va), Some(vb)) = (&va, &vb) {
            return Ok(!any_same(va, vb)?);
        }
        let ta = self.type_set(a, va.as_deref(), true)?;
        let tb = self.type_set(b, vb.as_deref(), false)?;
        if ta.is_disjoint(&tb) {
            return Ok(true);
        }
        let only_objects = |t: &HashSet<&str>| t.iter().all(|x| *x == "object");
        if !(only_objects(&ta) || only_objects(&tb)) {
            return Ok(false);
        }
        let mut names: Vec<&str> = Vec::new();
        for side in [a, b] {
            match side.get("required") {
                None => {}
                Some(Json::Arr(items)) if items.iter().all(|n| matches!(n, Json::Str(_))) => {
                    let new: Vec<&str> = items.iter().filter_map(Json::as_str).filter(|n| !names.contains(n)).collect();
                    names.extend(new);
                }
                Some(_) => return decline("required of another form in a oneOf"),
            }
        }
        let empty = Vec::new();
        let (pa, pb) = (a.properties.as_ref().unwrap_or(&empty), b.properties.as_ref().unwrap_or(&empty));
        let find = |p: &Vec<(&'a str, Schema<'a>)>, n: &str| p.iter().find(|(k, _)| *k == n).map(|(_, s)| s.clone());
        // In Python's order (a's required names, then b's new ones), to the first name that tells
        // the two apart: which subschemas are flattened decides which ignored keywords are met.
        for name in names {
            if let (Some(sa), Some(sb)) = (find(pa, name), find(pb, name)) {
                let fa = self.flatten(sa, stack)?.0;
                let fb = self.flatten(sb, stack)?.0;
                if let (Some(la), Some(lb)) =
                    (fa.as_ref().and_then(literal_values), fb.as_ref().and_then(literal_values))
                {
                    if !any_same(&la, &lb)? {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// `type_set`: the JSON types of the instances of `flat` (`generated`: of those generated).
    fn type_set(&self, flat: &Flat, values: Option<&[Json]>, generated: bool) -> R<HashSet<&'static str>> {
        let mut kinds: HashSet<&'static str> = HashSet::new();
        if let Some(values) = values {
            kinds.extend(values.iter().map(json_type));
            if kinds.contains("integer") {
                kinds.insert("number");
            }
            return Ok(kinds);
        }
        let typed = !matches!(flat.get("type"), None | Some(Json::Null));
        let names = if generated || typed { self.types(flat)? } else { None };
        // Python's `... or list(TYPES)`: no types (None or empty) is every type
        kinds.extend(names.filter(|n| !n.is_empty()).unwrap_or_else(|| TYPES.to_vec()));
        if kinds.contains("number") {
            kinds.insert("integer");
        }
        if kinds.contains("integer") {
            kinds.insert("number");
        }
        Ok(kinds)
    }

    /// `types`: the types to generate, in a fixed order; `None` for any value.
    fn types(&self, flat: &Flat) -> R<Option<Vec<&'static str>>> {
        match flat.get("type") {
            None | Some(Json::Null) => {
                let unknown = match flat.get("format") {
                    None | Some(Json::Null) => false,
                    Some(Json::Str(f)) => jregex::format(f).is_none(),
                    Some(_) => return decline("format not a string"),
                };
                let implied: Vec<&str> = TYPE_KEYWORDS
                    .iter()
                    .filter(|(_, kws)| kws.iter().any(|kw| flat.has(kw) && !(unknown && *kw == "format")))
                    .map(|(family, _)| *family)
                    .collect();
                if implied.is_empty() && unknown {
                    return Ok(Some(TYPES.iter().copied().filter(|t| *t != "string").collect()));
                }
                let types: Vec<&'static str> = TYPES.iter().copied().filter(|t| implied.contains(t)).collect();
                Ok((!types.is_empty()).then_some(types))
            }
            Some(t) => {
                let names: Vec<&Json> = match t {
                    Json::Arr(items) => items.iter().collect(),
                    other => vec![other],
                };
                let mut out: Vec<&str> = Vec::new();
                for name in names {
                    match name.as_str() {
                        Some(n) if TYPES.contains(&n) => out.push(n),
                        _ => return decline("an unknown type (Python raises)"),
                    }
                }
                let number = out.contains(&"number");
                Ok(Some(TYPES.iter().copied().filter(|t| out.contains(t) && !(number && *t == "integer")).collect()))
            }
        }
    }

    /// `call`: the marker of the rule of `ptr`, numbered on first use.
    fn call(&mut self, ptr: &str, node: Option<&'a Json>) -> R<String> {
        let i = match self.call_index.get(ptr) {
            Some(&i) => i,
            None => {
                if self.called.len() + 1 >= 4096 {
                    return decline("more than 4,095 recursive schemas (Python raises)");
                }
                self.called.push((ptr.to_string(), node));
                self.call_index.insert(ptr.to_string(), self.called.len());
                self.called.len()
            }
        };
        Ok(format!("(?-u:\\xFE\\x{:02X}\\x{:02X})", 0x80 + (i >> 6), 0x80 + (i & 63)))
    }

    /// `any_value_rule`: the body of the free-value rule.
    fn any_value_rule(&mut self) -> R<String> {
        let inner = self.call(ANY, None)?;
        let options = vec![
            jregex::string(0, None),
            jregex::NUMBER.to_string(),
            jregex::BOOLEAN.to_string(),
            jregex::NULL.to_string(),
            self.map_regex(&jregex::string(0, None), &inner, 0, None),
            self.sequence(&[], Some(&inner), 0, None),
        ];
        Ok(jregex::alternation(options))
    }

    /// `literals`: `enum`/`const` values that satisfy their siblings.
    fn literals(&self, flat: &Flat) -> R<Option<String>> {
        let values: Vec<&Json> = match (flat.get("enum"), flat.get("const")) {
            (Some(Json::Arr(values)), _) => values.iter().collect(),
            (Some(_), _) => return decline("enum not an array"),
            (None, Some(c)) => vec![c],
            (None, None) => unreachable!("literals without enum or const"),
        };
        let mut kept = Vec::new();
        for v in values {
            if let Some(c) = flat.get("const") {
                if !same_json(v, c).ok_or_else(|| Unhandled("a big integer".into()))? {
                    continue;
                }
            }
            if literal_ok(v, flat)? {
                kept.push(jregex::literal(v, &self.ws).ok_or_else(|| Unhandled("a big integer".into()))?);
            }
        }
        Ok((!kept.is_empty()).then(|| jregex::alternation(kept)))
    }

    fn number(&self, flat: &Flat, kind: &str) -> R<Option<String>> {
        let (lo, lo_x) = bound(flat, "minimum", "exclusiveMinimum")?;
        let (hi, hi_x) = bound(flat, "maximum", "exclusiveMaximum")?;
        let mut fraction_digits = (kind == "integer").then_some(0);
        if let Some(m) = flat.get("multipleOf") {
            // `multipleOf` 10^-q: at most q digits after the point (integers: any whose p divides
            // 10^q); any other needs Python's residue automaton (`_multiple_of.py`)
            let m = if is_number(m) { decimal::Dec::of(m)? } else { return decline("multipleOf not a number") };
            if !m.is_positive() {
                return decline("multipleOf not above 0 (Python raises)");
            }
            let Some((mut p, q)) = m.as_ratio() else { return decline("a multipleOf beyond u128") };
            if kind == "integer" {
                let Some(power) = 10u128.checked_pow(q) else { return decline("a multipleOf beyond u128") };
                p /= gcd(p, power);
            }
            if p != 1 {
                return decline("multipleOf other than 10^-k (Python builds a residue automaton)");
            }
            if kind == "number" {
                fraction_digits = Some(q as usize);
            }
        }
        if fraction_digits == Some(0) {
            return Ok(jregex::integer_range(integer_bound(lo, lo_x, true)?, integer_bound(hi, hi_x, false)?));
        }
        let lo = lo.map(decimal::Dec::of).transpose()?;
        let hi = hi.map(decimal::Dec::of).transpose()?;
        Ok(decimal::number_range(lo, lo_x, hi, hi_x, fraction_digits))
    }

    fn string(&self, flat: &Flat) -> R<Option<String>> {
        let lo = count(flat, "minLength", Some(0))?.expect("a default");
        let hi = count(flat, "maxLength", None)?;
        if hi.is_some_and(|h| h < lo) {
            return Ok(None);
        }
        match flat.get("format") {
            None | Some(Json::Null) => {}
            Some(Json::Str(f)) => {
                let Some((regex, w_lo, w_hi)) = jregex::format(f) else {
                    return decline("an unknown format (Python raises)");
                };
                if !jregex::length_bounds(lo, hi, (w_lo, w_hi)) {
                    return decline("length bounds with a format (Python raises)");
                }
                if !matches!(flat.get("pattern"), None | Some(Json::Null)) {
                    return decline("pattern together with format (Python raises)");
                }
                return Ok(Some(format!("\"{regex}\"")));
            }
            Some(_) => return decline("format not a string"),
        }
        match flat.get("pattern") {
            None | Some(Json::Null) => {}
            Some(Json::Str(pattern)) => {
                return Ok(Some(format!("\"{}\"", ecma_pattern::pattern_to_regex(pattern, lo, hi)?)));
            }
            Some(_) => return decline("pattern not a string (Python raises)"),
        }
        if lo > jregex::MAX_COUNT {
            return decline("minLength above MAX_COUNT (Python raises)");
        }
        Ok(Some(jregex::string(lo, hi)))
    }

    fn array(&mut self, flat: &Flat<'a>, stack: &[u32]) -> R<Option<String>> {
        let lo = count(flat, "minItems", Some(0))?.expect("a default");
        let mut hi = count(flat, "maxItems", None)?;
        if matches!(flat.get("uniqueItems"), Some(Json::Bool(true))) {
            return decline("uniqueItems: true");
        }
        let mut heads = Vec::new();
        for sub in flat.prefix.clone().unwrap_or_default() {
            match self.value(sub, stack)? {
                // no value fits here: the array ends before this position
                None => {
                    let i = heads.len() as i128;
                    hi = Some(hi.map_or(i, |h| h.min(i)));
                    break;
                }
                Some(head) => heads.push(head),
            }
        }
        let rest = flat.items.clone().unwrap_or(Schema::Bool(true));
        let tail = if rest.is_true() { Some(self.call(ANY, None)?) } else { self.value(rest, stack)? };
        if tail.is_none() {
            let n = heads.len() as i128;
            hi = Some(hi.map_or(n, |h| h.min(n)));
        }
        if hi.is_some_and(|h| lo > h) {
            return Ok(None);
        }
        if lo > jregex::MAX_COUNT {
            return decline("minItems above MAX_COUNT (Python raises)");
        }
        if let Some(h) = hi {
            heads.truncate(h as usize);
        }
        if heads.len() as i128 > jregex::MAX_COUNT {
            return decline("a tuple longer than MAX_COUNT");
        }
        Ok(Some(self.sequence(&heads, tail.as_deref(), lo, hi)))
    }

    /// `sequence`: `[h0, h1, ..., t, t, ...]` with lo..hi items.
    fn sequence(&self, heads: &[String], tail: Option<&str>, lo: i128, hi: Option<i128>) -> String {
        let (ws, sep) = (&self.ws, &self.sep);
        let hi = hi.map(|h| h.min(lo.max(jregex::MAX_COUNT)));
        let n = heads.len() as i128;
        if n > 0 {
            let more_lo = (lo - n).max(0);
            let more_hi = hi.map(|h| h - n);
            let mut body = match tail {
                Some(tail) if more_hi != Some(0) => jregex::repeat(&format!("(?:{sep}{tail})"), more_lo, more_hi),
                _ => String::new(),
            };
            for k in (0..heads.len()).rev() {
                body = format!("{}{}{body}", if k > 0 { sep.as_str() } else { "" }, heads[k]);
                if k as i128 >= lo && k > 0 {
                    body = format!("(?:{body})?");
                }
            }
            return if lo >= 1 { format!("\\[{ws}{body}{ws}\\]") } else { format!("\\[{ws}(?:{body}{ws})?\\]") };
        }
        let Some(tail) = tail else { return format!("\\[{ws}\\]") };
        if hi == Some(0) {
            return format!("\\[{ws}\\]");
        }
        let first =
            format!("{tail}{}", jregex::repeat(&format!("(?:{sep}{tail})"), (lo - 1).max(0), hi.map(|h| h - 1)));
        if lo >= 1 {
            format!("\\[{ws}{first}{ws}\\]")
        } else {
            format!("\\[{ws}(?:{first}{ws})?\\]")
        }
    }

    fn object(&mut self, flat: &Flat<'a>, stack: &[u32]) -> R<Option<String>> {
        let props: Vec<(&'a str, Schema<'a>)> = flat.properties.clone().unwrap_or_default();
        let required: Vec<&str> = match flat.get("required") {
            None => Vec::new(),
            Some(Json::Arr(items)) => {
                let mut names = Vec::with_capacity(items.len());
                for item in items {
                    match item.as_str() {
                        Some(s) => names.push(s),
                        None => return decline("required names that are not strings (Python raises)"),
                    }
                }
                names
            }
            Some(_) => return decline("required not an array (Python raises)"),
        };
        let extra = flat.additional.clone().unwrap_or(Schema::Bool(true));
        let min_p = count(flat, "minProperties", Some(0))?.expect("a default");
        let max_p = count(flat, "maxProperties", None)?;
        let patterns = flat.patterns.as_deref().unwrap_or_default();
        if props.is_empty() && required.is_empty() && !patterns.is_empty() {
            // map_object: only keys matching a pattern are generated, whatever
            // additionalProperties says, each value satisfying every pattern's schema
            let mut keys = Vec::with_capacity(patterns.len());
            for (pattern, _) in patterns {
                keys.push(jregex::group(&ecma_pattern::pattern_to_regex(pattern, 0, None)?));
            }
            let key = match &keys[..] {
                [one] => format!("\"{one}\""),
                _ => format!("\"(?:{})\"", keys.join("|")),
            };
            let value = match patterns {
                [(_, sub)] => self.value(sub.clone(), stack)?,
                _ => self.value(Schema::AllOf(patterns.iter().map(|(_, sub)| sub.clone()).collect()), stack)?,
            };
            let Some(value) = value else {
                return Ok((min_p == 0).then(|| format!("\\{{{}\\}}", self.ws)));
            };
            if max_p.is_some_and(|h| h < min_p) {
                return Ok(None);
            }
            return Ok(Some(self.map_regex(&key, &value, min_p, max_p)));
        }
        if props.is_empty() && required.is_empty() {
            // map_object without patternProperties and propertyNames
            let value = if extra.is_false() {
                None
            } else if extra.is_true() {
                Some(self.call(ANY, None)?)
            } else {
                self.value(extra, stack)?
            };
            let Some(value) = value else {
                return Ok((min_p == 0).then(|| format!("\\{{{}\\}}", self.ws)));
            };
            if max_p.is_some_and(|h| h < min_p) {
                return Ok(None);
            }
            return Ok(Some(self.map_regex(&jregex::string(0, None), &value, min_p, max_p)));
        }
        let mut names: Vec<&str> = props.iter().map(|(n, _)| *n).collect();
        names.extend(required.iter().filter(|r| !props.iter().any(|(n, _)| n == *r)));
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            let sub = match props.iter().find(|(n, _)| *n == name) {
                Some((_, s)) => s.clone(),
                None => extra.clone(),
            };
            // the name's value satisfies the schemas of the patterns it matches too
            let mut parts = vec![sub];
            for (pattern, pattern_schema) in patterns {
                if ecma_pattern::python_search(pattern, name)? {
                    parts.push(pattern_schema.clone());
                }
            }
            let regex = match parts.len() {
                1 => self.value(parts.pop().expect("one"), stack)?,
                _ => self.value(Schema::AllOf(parts.into()), stack)?,
            };
            let is_required = required.contains(&name);
            match regex {
                None if is_required => return Ok(None),
                None => {}
                Some(regex) => {
                    let key = format!("\"{}\"", jregex::json_string_content(name));
                    entries.push((format!("{key}{ws}:{ws}{regex}", ws = self.ws), is_required));
                }
            }
        }
        let n_entries = entries.len() as i128;
        let n_required = entries.iter().filter(|(_, r)| *r).count() as i128;
        if min_p > n_entries {
            return Ok(None); // Python also records why, and raises it if nothing is left
        }
        if min_p > n_required && !(min_p == 1 && n_entries > 0) {
            return decline("minProperties above the required properties (Python raises)");
        }
        if let Some(max_p) = max_p {
            if max_p < n_entries {
                if max_p < n_required {
                    return Ok(None);
                }
                return decline("maxProperties below the number of properties (Python raises)");
            }
        }
        Ok(Some(self.object_regex(&entries, min_p >= 1)))
    }

    /// `object_regex`: entries in order, required ones present, optional ones optional.
    fn object_regex(&self, entries: &[(String, bool)], nonempty: bool) -> String {
        let (ws, sep) = (&self.ws, &self.sep);
        if entries.is_empty() {
            return format!("\\{{{ws}\\}}");
        }
        if let Some(first) = entries.iter().position(|(_, req)| *req) {
            let mut rest = String::new();
            for (entry, req) in entries[first + 1..].iter().rev() {
                rest = if *req { format!("{sep}{entry}{rest}") } else { format!("(?:{sep}{entry})?{rest}") };
            }
            let mut body: String = entries[..first].iter().map(|(e, _)| format!("(?:{e}{sep})?")).collect();
            body.push_str(&entries[first].0);
            body.push_str(&rest);
            return format!("\\{{{ws}{body}{ws}\\}}");
        }
        let plain: Vec<&str> = entries.iter().map(|(e, _)| e.as_str()).collect();
        let body = self.nonempty_subsets(&plain);
        if nonempty {
            return format!("\\{{{ws}{body}{ws}\\}}");
        }
        format!("\\{{{ws}(?:{body}{ws})?\\}}")
    }

    /// `nonempty_subsets`: non-empty ordered subsets of `entries`, comma-separated, choosing
    /// splits and pivots by the same dynamic programme (and tie-breaks) as Python.
    fn nonempty_subsets(&self, entries: &[&str]) -> String {
        let sep = &self.sep;
        let n = entries.len();
        let sep_len = sep.chars().count();
        let cost: Vec<usize> = entries.iter().map(|e| e.chars().count() + sep_len + 5).collect();
        let mut prefix = vec![0usize];
        for c in &cost {
            prefix.push(prefix.last().unwrap() + c);
        }
        // (size, how, index); how: 0 "one", 1 "pivot", 2 "split" (Python compares the names)
        struct Dp<'c> {
            n: usize,
            cost: &'c [usize],
            prefix: &'c [usize],
            best: HashMap<(usize, usize), (usize, u8, usize)>,
        }
        impl Dp<'_> {
            fn solve(&mut self, lo: usize, hi: usize) -> (usize, u8, usize) {
                if hi - lo == 1 {
                    return (self.cost[lo], 0, lo);
                }
                if let Some(b) = self.best.get(&(lo, hi)) {
                    return *b;
                }
                let mut options = Vec::new();
                let splits: Vec<usize> = if self.n <= 48 {
                    (lo + 1..hi).collect()
                } else {
                    let twice_half = self.prefix[lo] + self.prefix[hi];
                    let mut best_m = lo + 1;
                    for m in lo + 1..hi {
                        if (2 * self.prefix[m]).abs_diff(twice_half) < (2 * self.prefix[best_m]).abs_diff(twice_half) {
                            best_m = m;
                        }
                    }
                    vec![best_m]
                };
                for m in splits {
                    let size = self.solve(lo, m).0 + self.solve(m, hi).0 + self.prefix[hi] - self.prefix[m] + 8;
                    options.push((size, 2, m));
                }
                let pivots: Vec<usize> = if self.n <= 48 {
                    (lo..hi).collect()
                } else {
                    let mut best_q = lo;
                    for q in lo..hi {
                        if self.cost[q] > self.cost[best_q] {
                            best_q = q;
                        }
                    }
                    vec![best_q]
                };
                for q in pivots {
                    let mut size = self.cost[q] + self.prefix[hi] - self.prefix[q + 1] + 16;
                    if q > lo {
                        size += 2 * self.solve(lo, q).0;
                    }
                    if q + 1 < hi {
                        size += self.solve(q + 1, hi).0;
                    }
                    options.push((size, 1, q));
                }
                let b = *options.iter().min().expect("options");
                self.best.insert((lo, hi), b);
                b
            }
        }
        let mut dp = Dp { n, cost: &cost, prefix: &prefix, best: HashMap::default() };
        fn build(dp: &mut Dp, entries: &[&str], sep: &str, lo: usize, hi: usize) -> String {
            let (_, how, m) = dp.solve(lo, hi);
            match how {
                0 => entries[lo].to_string(),
                2 => {
                    let tail: String = entries[m..hi].iter().map(|e| format!("(?:{sep}{e})?")).collect();
                    format!("(?:{}{tail}|{})", build(dp, entries, sep, lo, m), build(dp, entries, sep, m, hi))
                }
                _ => {
                    let tail: String = entries[m + 1..hi].iter().map(|e| format!("(?:{sep}{e})?")).collect();
                    let mut head = entries[m].to_string();
                    if m > lo {
                        let left = build(dp, entries, sep, lo, m);
                        head = format!("(?:(?:{left}{sep})?{head}|{left})");
                    }
                    if m + 1 < hi {
                        format!("(?:{head}{tail}|{})", build(dp, entries, sep, m + 1, hi))
                    } else {
                        format!("{head}{tail}")
                    }
                }
            }
        }
        build(&mut dp, entries, sep, 0, n)
    }

    /// `map_regex`: `key: value` entries, `lo..=hi` of them (capped at `MAX_COUNT`).
    fn map_regex(&self, key: &str, value: &str, lo: i128, hi: Option<i128>) -> String {
        let (ws, sep) = (&self.ws, &self.sep);
        let entry = format!("{key}{ws}:{ws}{value}");
        if hi == Some(0) {
            return format!("\\{{{ws}\\}}");
        }
        let (lo, hi) = (lo.min(jregex::MAX_COUNT), hi.map(|h| h.min(jregex::MAX_COUNT)));
        let more = jregex::repeat(&format!("(?:{sep}{entry})"), (lo - 1).max(0), hi.map(|h| h - 1));
        if lo >= 1 {
            format!("\\{{{ws}{entry}{more}{ws}\\}}")
        } else {
            format!("\\{{{ws}(?:{entry}{more}{ws})?\\}}")
        }
    }
}

/// `_literal_values`: the values an `enum`/`const` schema allows.
fn literal_values(flat: &Flat) -> Option<Vec<Json>> {
    if let Some(c) = flat.get("const") {
        return Some(vec![c.clone()]);
    }
    match flat.get("enum") {
        Some(Json::Arr(values)) => Some(values.clone()),
        _ => None,
    }
}

/// Whether some value of `a` is the same JSON as some value of `b`.
fn any_same(a: &[Json], b: &[Json]) -> R<bool> {
    for x in a {
        for y in b {
            if same_json(x, y).ok_or_else(|| Unhandled("a big integer".into()))? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `_dependencies_as_any_of`'s entries (`None` for an empty object, which adds nothing).
fn dependencies(v: &Json) -> R<Option<Vec<Dependency<'_>>>> {
    let Json::Obj(entries) = v else { return decline("dependencies not an object (Python raises)") };
    if entries.len() > MAX_DEPENDENCIES {
        return decline("more dependencies than MAX_DEPENDENCIES (an anyOf of 2^n branches)");
    }
    let mut out = Vec::with_capacity(entries.len());
    for (name, dep) in entries.iter() {
        let requires = match dep {
            Json::Arr(names) => {
                let mut others = Vec::with_capacity(names.len());
                for n in names {
                    match n.as_str() {
                        Some(n) if n == name.as_str() => {}
                        Some(n) => others.push(n),
                        None => return decline("a dependency on a name that is not a string (Python raises)"),
                    }
                }
                Requires::Names(others)
            }
            other => Requires::Schema(subschema(other)?),
        };
        out.push(Dependency { name: name.as_str(), requires });
    }
    Ok((!out.is_empty()).then_some(out))
}

/// `properties` as subschemas in order (an object, else declined).
fn properties(v: &Json) -> R<Vec<(&str, Schema<'_>)>> {
    let Json::Obj(o) = v else { return decline("properties not an object") };
    o.iter().map(|(k, v)| Ok((k.as_str(), subschema(v)?))).collect()
}

/// A subschema value: an object or a boolean (others are declined).
fn subschema(v: &Json) -> R<Schema<'_>> {
    match v {
        Json::Obj(_) | Json::Bool(_) => Ok(Schema::Node(v)),
        _ => decline("a subschema that is not an object or a boolean"),
    }
}

/// `%XX` decoded to the code point XX (Python's `re.sub` in `resolve`, not UTF-8 decoding).
fn percent_decode(token: &str) -> String {
    let c: Vec<char> = token.chars().collect();
    let mut out = String::with_capacity(token.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '%' && i + 2 < c.len() && c[i + 1].is_ascii_hexdigit() && c[i + 2].is_ascii_hexdigit() {
            let v = u32::from_str_radix(&format!("{}{}", c[i + 1], c[i + 2]), 16).expect("hex");
            out.push(char::from_u32(v).expect("a byte value"));
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `_literal_ok` for the handled keywords: whether a constant satisfies its siblings.
fn literal_ok(value: &Json, s: &Flat) -> R<bool> {
    let t = json_type(value);
    if let Some(types) = s.get("type").filter(|t| !matches!(t, Json::Null)) {
        let names: Vec<&Json> = match types {
            Json::Arr(items) => items.iter().collect(),
            other => vec![other],
        };
        let has = |n: &str| names.iter().any(|x| x.as_str() == Some(n));
        if !(has(t) || (t == "integer" && has("number"))) {
            return Ok(false);
        }
    }
    let mut checked = vec!["type", "enum", "const"];
    // `s.get(key, default) <= n` with Python's comparison; declined where Python raises
    let within = |key: &str, n: usize, low: bool| -> R<bool> {
        match s.get(key) {
            None => Ok(true),
            Some(v) if is_number(v) => {
                let ord = cmp_num(v, &Json::Int(n as i128))?;
                Ok(if low { ord.is_le() } else { ord.is_ge() })
            }
            Some(_) => decline(format!("{key} not a number beside enum")),
        }
    };
    match value {
        Json::Str(text) => {
            checked.extend(["minLength", "maxLength", "pattern"]);
            if s.get("pattern").is_some() {
                // even a null one: Python hands it to `re.search`, which raises
                return decline("a pattern checked against a constant (Python's re decides)");
            }
            let n = text.chars().count();
            if !(within("minLength", n, true)? && within("maxLength", n, false)?) {
                return Ok(false);
            }
            match s.get("format") {
                Some(Json::Str(f)) if jregex::format(f).is_some() => {
                    return decline("a format checked against a constant");
                }
                Some(Json::Arr(_) | Json::Obj(_)) => return decline("format not a string"),
                _ => {}
            }
        }
        Json::Int(_) | Json::BigInt | Json::Float(_) => {
            checked.extend(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]);
            if s.get("multipleOf").is_some() {
                return decline("a multipleOf checked against a constant");
            }
            let (lo, lo_x) = bound(s, "minimum", "exclusiveMinimum")?;
            let (hi, hi_x) = bound(s, "maximum", "exclusiveMaximum")?;
            if let Some(lo) = lo {
                let ord = cmp_num(value, lo)?;
                if if lo_x { ord.is_le() } else { ord.is_lt() } {
                    return Ok(false);
                }
            }
            if let Some(hi) = hi {
                let ord = cmp_num(value, hi)?;
                if if hi_x { ord.is_ge() } else { ord.is_gt() } {
                    return Ok(false);
                }
            }
        }
        Json::Arr(items) => {
            checked.extend(["minItems", "maxItems", "uniqueItems"]);
            if !(within("minItems", items.len(), true)? && within("maxItems", items.len(), false)?) {
                return Ok(false);
            }
            if matches!(s.get("uniqueItems"), Some(Json::Bool(true))) {
                return decline("uniqueItems beside enum");
            }
        }
        Json::Obj(o) => {
            checked.push("required");
            let missing = match s.get("required") {
                None => false,
                Some(Json::Arr(names)) if names.iter().all(|n| matches!(n, Json::Str(_))) => {
                    names.iter().any(|n| !o.contains_key(n.as_str().expect("a string")))
                }
                Some(_) => return decline("required of another form beside enum"),
            };
            if missing {
                return Ok(false);
            }
        }
        _ => {}
    }
    let family = if t == "integer" { "number" } else { t };
    if let Some((_, kws)) = TYPE_KEYWORDS.iter().find(|(f, _)| *f == family) {
        for k in s.keys() {
            if !checked.contains(&k) && kws.contains(&k) {
                return decline(format!("{k} beside enum/const (Python raises)"));
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
