"""The Rust JSON Schema converter (``_core.schema_to_rules_subset``, ``rust/src/json_schema``)
against the Python one (``propertok.json_schema.schema_to_rules``), as a differential test.

The Rust converter handles a subset of schemas and must return, for each of them, exactly the
rules the Python converter returns (same names, same regex text, same order); for every other
schema it returns ``None``. Checked on every JSONSchemaBench schema and every schema of the JSON
Schema Test Suite (draft 2020-12 and draft 7), with whitespace ``""`` and the default ``[ ]?``:

* where Rust returns rules, Python returns the same, and the same ignored unknown keywords
  (``(keyword, pointer)``, in order: what ``IgnoredKeywordsWarning`` reports; Python raising
  there is a failure: Rust must decline what Python refuses);
* every ``pattern`` of JSONSchemaBench, and the syntax corners of ``PATTERN_CORNERS``, under
  several length bounds: Rust's regex is Python's, Rust declines where Python raises, and
  declines only the cases ``PATTERN_DECLINED`` lists where Python converts;
* Rust handles at least ``MIN_BENCH`` bench schemas and ``MIN_SUITE`` suite schemas per
  whitespace, so the test cannot pass by declining everything (the counts are printed; run
  with ``-s`` to see them).

The Python converter runs only on the schemas Rust handles (that is where the two must agree),
which keeps the module to a few seconds. ``PYTHON_SKIPPED``: bench schemas on which the Python
converter currently exhausts memory or recursion; Rust still runs on them (it must decline or
stay bounded) but they are not compared.
"""

from __future__ import annotations

import json
import warnings

import pytest

from oracle import data_dir, require_shared

require_shared("JSONSchemaBench schemas and the JSON Schema Test Suite")

WHITESPACES = ("", "[ ]?")
# Bench ids whose Python conversion exhausts memory (cloudify, task, kb_1161) or recursion.
PYTHON_SKIPPED = frozenset({
    "JsonSchemaStore/cloudify", "JsonSchemaStore/task", "Kubernetes/kb_1161_Normalized",
})
# Coverage floors (what the converter reaches, minus a margin): see the module doc.
MIN_BENCH = 4160
MIN_SUITE = 370


@pytest.fixture(scope="module")
def bench():
    """``[(id, schema)]`` for every JSONSchemaBench schema."""
    rows = []
    with open(data_dir() / "jsonschemabench_schemas.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            rows.append((row["id"], row["schema"]))
    return rows


@pytest.fixture(scope="module")
def suite():
    """``[(group id, schema)]`` for every group of the JSON Schema Test Suite."""
    from json_schema_suite import groups

    return [(gid, group["schema"]) for gid, _, group in groups()]


def _python(schema, whitespace, rules=True, ignored=False):
    """The Python converter itself (``schema_to_rules`` / ``schema_to_regex`` take the Rust
    converter's rules where it has them): its rules (or regex), with ``ignored`` also the
    unknown keywords it ignored."""
    from propertok.json_schema import _convert

    converted = _convert(schema, whitespace, None if rules else 3, None, None, rules=rules)
    return converted if ignored else converted[0]


def _differences(schemas, whitespace, skipped=frozenset()):
    """(handled count, [(id, reason)] where the two converters disagree). The schema goes to
    Rust as the dict (what ``schema_to_rules`` passes) and as JSON text; where Rust has one rule
    it is also ``schema_to_regex``'s regex (which ``schema_to_regex`` then returns)."""
    from propertok import _core
    from propertok.json_schema import IgnoredKeywordsWarning, schema_to_rules

    handled, bad = 0, []
    for sid, schema in schemas:
        converted = _core.schema_to_rules_subset(schema, whitespace)
        if converted != _core.schema_to_rules_subset(json.dumps(schema), whitespace):
            bad.append((sid, "Rust reads the dict and its JSON text differently"))
        if converted is None or sid in skipped:
            continue
        handled += 1
        rust, rust_ignored = converted
        try:
            python, python_ignored = _python(schema, whitespace, ignored=True)
        except Exception as e:  # noqa: BLE001 - any refusal, including RecursionError
            bad.append((sid, f"Python raises {type(e).__name__}: {e}"[:300]))
            continue
        python = [tuple(rule) for rule in python]
        if rust != python:
            first = next((i for i, (r, p) in enumerate(zip(rust, python)) if r != p), min(len(rust), len(python)))
            bad.append((sid, f"rule {first} differs: rust {rust[first:first + 1]!r:.300} "
                             f"python {python[first:first + 1]!r:.300} ({len(rust)} vs {len(python)} rules)"))
        elif rust_ignored != python_ignored:
            bad.append((sid, f"ignored keywords differ: rust {rust_ignored!r:.300} python {python_ignored!r:.300}"))
        elif len(rust) == 1 and (rust[0][1], rust_ignored) != _python(schema, whitespace, rules=False, ignored=True):
            bad.append((sid, "the one rule is not schema_to_regex's regex, or its ignored keywords differ"))
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if schema_to_rules(schema, whitespace=whitespace) != rust:
                    bad.append((sid, "schema_to_rules does not return the Rust converter's rules"))
            reported = [w.message.ignored for w in caught if isinstance(w.message, IgnoredKeywordsWarning)]
            if reported != ([rust_ignored] if rust_ignored else []):
                bad.append((sid, f"schema_to_rules warns {reported!r:.300}, not about {rust_ignored!r:.300}"))
    return handled, bad


@pytest.mark.parametrize("whitespace", WHITESPACES)
def test_bench_schemas_match_the_python_converter(bench, whitespace):
    handled, bad = _differences(bench, whitespace, PYTHON_SKIPPED)
    print(f"\nRust converter, whitespace {whitespace!r}: {handled} of {len(bench)} bench schemas handled")
    assert not bad, f"{len(bad)} differ: " + json.dumps(bad[:20], indent=1)
    assert handled >= MIN_BENCH


@pytest.mark.parametrize("whitespace", WHITESPACES)
def test_suite_schemas_match_the_python_converter(suite, whitespace):
    handled, bad = _differences(suite, whitespace)
    print(f"\nRust converter, whitespace {whitespace!r}: {handled} of {len(suite)} suite schemas handled")
    assert not bad, f"{len(bad)} differ: " + json.dumps(bad[:20], indent=1)
    assert handled >= MIN_SUITE


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {1: {"type": "integer"}}},  # a key that is not a str
    {"enum": [1, (2, 3)]},  # a tuple (json.dumps would write a list)
    {"enum": [float("nan")]},
    {"type": "string", "maxLength": 1e400},
    b'{"type": "string"}',
])
def test_values_json_cannot_spell_exactly_go_to_the_python_converter(schema):
    """Rust takes only plain JSON data: anything else is left to the Python converter, which
    converts it or says what is wrong, as it always did."""
    from propertok import _core
    from propertok.json_schema import schema_to_rules

    assert _core.schema_to_rules_subset(schema, "") is None
    try:
        want = ("rules", _python(schema, ""))
    except Exception as e:  # noqa: BLE001 - whatever the Python converter raises
        want = ("raises", type(e))
    try:
        got = ("rules", schema_to_rules(schema, whitespace=""))
    except Exception as e:  # noqa: BLE001
        got = ("raises", type(e))
    assert got == want


def test_the_fast_path_gives_the_documented_results():
    """schema_to_rules / schema_to_regex / compile-side callers see the same values through the
    Rust converter: rules as (name, regex) tuples, one rule as the regex."""
    from propertok.json_schema import schema_to_regex, schema_to_rules

    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 12},
                                               "b": {"enum": ["x", None]}}, "required": ["a"]}
    rules = schema_to_rules(schema, whitespace="")
    assert rules == [("#", schema_to_regex(schema, whitespace=""))] == [tuple(r) for r in _python(schema, "")]
    import re

    regex = re.compile(rules[0][1])
    assert all(regex.fullmatch(doc) for doc in ('{"a":12}', '{"a":0,"b":null}', '{"a":7,"b":"x"}'))
    assert not any(regex.fullmatch(doc) for doc in ('{"a":13}', '{"b":"x"}', '{"a":1,"b":"y"}', '{"a":-1}'))


def test_unknown_keywords_are_reported_as_the_python_converter_reports_them():
    """Unknown keywords are ignored and reported, in the order met, with the pointer of the
    schema holding them; a dict placed twice in a schema (two pointers, of which Python names the
    last it indexed) goes to the Python converter when it holds one."""
    from propertok import _core
    from propertok.json_schema import IgnoredKeywordsWarning, schema_to_regex, schema_to_rules

    schema = {"type": "object", "properties": {"a": {"type": "integer", "x-unit": "s"}}, "x-top": 1}
    want = [("x-top", "#"), ("x-unit", "#/properties/a")]
    rules, ignored = _core.schema_to_rules_subset(schema, "")
    assert ignored == want == _python(schema, "", ignored=True)[1]
    for convert in (schema_to_rules, schema_to_regex):
        with pytest.warns(IgnoredKeywordsWarning) as caught:
            convert(schema, whitespace="")
        assert [w.message.ignored for w in caught] == [want]

    shared = {"type": "integer", "x-unit": "s"}
    aliased = {"type": "object", "properties": {"a": shared, "b": shared}}
    assert _core.schema_to_rules_subset(aliased, "") is None
    with pytest.warns(IgnoredKeywordsWarning) as caught:
        schema_to_rules(aliased, whitespace="")
    assert [w.message.ignored for w in caught] == [[("x-unit", "#/properties/b")]]
    # As JSON text every object has one place.
    assert _core.schema_to_rules_subset(json.dumps(aliased), "")[1] == [
        ("x-unit", "#/properties/a"), ("x-unit", "#/properties/b")]
    # Shared dicts without unknown keywords stay on the fast path.
    assert _core.schema_to_rules_subset({"anyOf": [{"type": "integer"}] * 2}, "") is not None


def test_no_keyword_a_draft_defines_is_reported_as_unknown():
    """The Rust converter's list of spec keywords is Python's: each one is handled, declined or
    silently ignored there, never reported as an unknown keyword."""
    from propertok import _core
    from propertok.json_schema import ANNOTATIONS, SUPPORTED, UNSUPPORTED

    for keyword in sorted(SUPPORTED | UNSUPPORTED | ANNOTATIONS):
        for value in (0, "x"):
            converted = _core.schema_to_rules_subset({"type": "null", keyword: value}, "")
            assert converted is None or converted[1] == [], (keyword, value, converted)
    # Draft 4's `id` is an annotation when it is a string; otherwise Python reports it.
    for schema in ({"type": "null", "id": "x"}, {"type": "null", "id": 0}, {"type": "null", "javaType": 0}):
        assert _core.schema_to_rules_subset(schema, "") == _python(schema, "", ignored=True), schema


# ECMA-262 corners: anchors, classes, escapes, quantifiers, groups, non-ASCII, counts past MAX_COUNT.
PATTERN_CORNERS = [
    "", "^", "$", "^$", "a", "^a", "a$", "^a$", "^a|b$", "(^a)", "(^a|b$)", "a^b", "(?:^a$)", "((^ab))",
    "^(a|b)+$", "^a{2,4}$", "^a{2,}$", "^a{3}$", "a{,3}", "a{x}", "{", "}", "]", "a{2}?", "a+?", "a*b*",
    "^[]$", "^[^]$", "[^]", "[]", "^[a-]$", "^[-a]$", "^[\\d-x]$", "^[\\w-\\d]$", "^[a-\\d]$", "^[z-a]$",
    "^[\\s\\S]$", "^[^\\s]+$", "^\\S+$", "^\\s*$", "^[\\b]$", "\\b", "\\B", "\\1", "\\k<x>",
    "(?<name>ab)", "(?P<n>a)", "(?<n", "(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b", "(?x)", "\\p{L}", "\\P{L}",
    "\\x41", "\\x4", "\\xZZ", "\\u0041", "\\u004", "\\u{1F600}", "\\u{110000}", "\\u{}", "\\u{41",
    "\\uD83D\\uDE00", "^[\\uD800-\\uDFFF]$", "^[\\u0000-\\uFFFF]$", "^[^\\u0000-\\u007F]$", "\\cA",
    "\\c1", "\\c", "\\0", "\\01", "\\n\\r\\t\\f\\v", "\\.", "\\/", "\\-", "\\", "[\\", "[a",
    "(a", "a)", "*a", "+", "?", "a**", "^*", "$+", "[[:alpha:]]", "[[=a=]]", "[[.a.]]", "[[]", "a|", "|a", "|",
    "()", "(|)", "^(|a)$", '"', "\\\\", '["\\\\]', "^[\\x00-\\x1f]$", '^[^"]*$', "^[^\\\\]*$", "é",
    "^é+$", "^[à-ÿ]{2,5}$", "😀", "^[😀-🙏]$", "^.$", "^.{3,5}$", "^[\\u0080-\\u07FF]$",
    "^[\\u0800-\\uFFFF]$", "^[^a]$", "^[\\u00ff-\\u0100]$", "^[\\u0fff-\\u1001]$", "^a{1000}$",
    "^a{0,1000}$", "^a{256}$", "^a{257}$", "a{99999999999999999999999999999999999999999}", "^(ab){2,3}$",
    "^a(bc)*d$", "^(a|bc)$", "^(?:a(?:b)*)$", "prefix-", "-suffix$", "^\\d{3}-\\d{4}$", "^[A-Z]{2}\\d+$",
    "^((a))$", "^(a{2})$", "^(a)+(b)+$", "\\é", "a{1²}", "\\cé", "\\xA", "\\u41", "^[\\d]+$",
    "^[^\\D]+$", "^\\W$", "\\w+", "^[\\w.-]+@[\\w.-]+$", "~", "#", "&", "^[~#&]$",
]
# Converted by Python, declined by Rust on purpose (see rust/src/json_schema/ecma_pattern.rs):
# Python's Unicode tables decide them, or Python reads a hex escape past the end of the pattern.
PATTERN_DECLINED = frozenset({"\\cé", "\\u004", "\\u41", "\\x4", "\\xA", "^\\W$"})
PATTERN_LENGTHS = [(None, None), (0, None), (2, None), (0, 3), (1, 1), (3, 5), (300, None), (0, 300)]


def _collected(bench, pick):
    """Sorted strings that ``pick(dict)`` yields from every object of every bench schema."""
    found = set()

    def walk(x):
        if isinstance(x, dict):
            found.update(pick(x))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for _, schema in bench:
        walk(schema)
    return sorted(found)


def _bench_patterns(bench):
    return _collected(bench, lambda x: [x["pattern"]] if isinstance(x.get("pattern"), str) else [])


def test_patterns_match_the_python_converter(bench):
    """``pattern`` goes through the Rust port of ``_ecma_regex.py``: the same regex text as
    Python's for every bench pattern and every corner case, under each pair of length bounds."""
    from propertok import _core

    patterns = _bench_patterns(bench)
    assert len(patterns) > 900
    bad, handled, declined = [], 0, set()
    for pattern in patterns + PATTERN_CORNERS:
        for lo, hi in PATTERN_LENGTHS:
            schema = {"type": "string", "pattern": pattern}
            schema.update({k: v for k, v in (("minLength", lo), ("maxLength", hi)) if v is not None})
            rust = _core.schema_to_rules_subset(schema, "")
            try:
                python = (_python(schema, ""), [])
            except Exception:  # noqa: BLE001 - PatternError and whatever else Python raises
                python = None
            if rust is None:
                if python is not None:
                    declined.add(pattern)
                continue
            handled += 1
            if python is None or rust != ([tuple(r) for r in python[0]], []):
                bad.append((pattern, lo, hi, rust, python))
    assert not bad, f"{len(bad)} differ: {bad[:5]!r:.2000}"
    bench_declined = declined - set(PATTERN_CORNERS)
    assert declined - bench_declined == PATTERN_DECLINED
    assert len(bench_declined) <= 2, sorted(bench_declined)
    assert handled >= 3000, handled


@pytest.mark.parametrize("schema, handled", [
    ({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}}, True),
    ({"patternProperties": {"^[0-9]{2}$": {"type": "string"}}, "minProperties": 1, "maxProperties": 3}, True),
    ({"type": "object", "patternProperties": {"a": False}, "minProperties": 1}, False),  # Python raises
    ({"type": "object", "patternProperties": {"a": False}}, True),  # only the empty object
    ({"type": "object", "patternProperties": {"^a": {"type": "null"}}, "additionalProperties": False}, True),
    ({"allOf": [{"patternProperties": {"^a": {"type": "null"}}}, {"type": "object"}]}, True),
    ({"type": "object", "patternProperties": {"^a": {"type": "null"}, "^b": {"type": "integer"}}}, True),
    ({"type": "object", "properties": {"ab": {}}, "patternProperties": {"^a": {"type": "null"}}}, True),
    ({"type": "object", "properties": {"ab": {}, "b": {}}, "required": ["ab"],
      "patternProperties": {"^a": {"type": "null"}, "b$": {"enum": [None, 1]}}}, True),
    ({"type": "object", "properties": {"caf\u00e9": {}}, "patternProperties": {"^a": {"type": "null"}}}, False),
    ({"allOf": [{"patternProperties": {"^a": {"type": "null"}}}, {"additionalProperties": {"type": "null"}}]},
     True),
    ({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False},
                {"properties": {"ab": {"minimum": 2}, "b": {}}, "required": ["ab"]}]}, True),
    ({"allOf": [{"patternProperties": {"^a": {"minimum": 0}}}, {"patternProperties": {"^a": {"maximum": 9},
                                                                                      "^b": {"type": "null"}}}],
      "type": "object"}, True),
    ({"allOf": [{"patternProperties": {"^a": {"type": "null"}}},
                {"properties": {"caf\u00e9": {}}}]}, False),  # a name Python's re may judge otherwise
    ({"type": "object", "patternProperties": {"\\W": {"type": "null"}}}, False),  # Python's Unicode \W
])
def test_pattern_properties_match_the_python_converter(schema, handled):
    """A map's ``patternProperties`` patterns become its key regex in Rust, as in Python, its
    values satisfying every pattern's schema; beside ``properties`` a name's value also satisfies
    the schemas of the patterns it matches (names other than printable ASCII, where Python's
    ``re`` and ECMA-262 may differ, go to Python); merged with a schema that has property
    keywords, where a side's patterns and rest apply to the names the other declares, a merge
    like Python's ``merge_properties``; a name or pattern Python's ``re`` may judge otherwise than
    ECMA-262, or a pattern that needs Python's Unicode tables, sends the schema to Python."""
    from propertok import _core

    for whitespace in WHITESPACES:
        rust = _core.schema_to_rules_subset(schema, whitespace)
        assert (rust is not None) == handled, schema
        if rust is not None:
            assert rust == ([tuple(r) for r in _python(schema, whitespace)], [])


SEARCHED_NAMES = ["", "a", "ab", "x-foo", "X-Foo", "foo_bar", "123", "a b", "a.b", "$ref", "@type", "a-b-c",
                  "~", "[x]", "{}", "0x1F", "name\n", "caf\u00e9", "a\rb"]


def _pattern_property_patterns(bench):
    return _collected(bench, lambda x: x["patternProperties"] if isinstance(x.get("patternProperties"), dict) else [])


def test_property_names_are_searched_as_python_searches_them(bench):
    """Beside ``properties``, each name's value also satisfies the schemas of the patterns the
    name matches, which Python decides with ``re.search``. Rust searches with the pattern's own
    tree where the two engines agree: on every bench ``patternProperties`` pattern and the corner
    cases, against names with and without a match, it gives Python's rules or declines, and it
    handles printable-ASCII names for most patterns."""
    from propertok import _core

    patterns = _pattern_property_patterns(bench)
    assert len(patterns) > 100
    bad, handled, asked = [], 0, 0
    for pattern in patterns + PATTERN_CORNERS:
        for name in SEARCHED_NAMES:
            schema = {"type": "object", "properties": {name: {}}, "patternProperties": {pattern: {"type": "integer"}}}
            asked += 1
            rust = _core.schema_to_rules_subset(schema, "")
            if rust is None:
                continue
            handled += 1
            try:
                python = ([tuple(r) for r in _python(schema, "")], [])
            except Exception as e:  # noqa: BLE001 - Rust must decline what Python refuses
                python = f"raises {type(e).__name__}: {e}"
            if rust != python:
                bad.append((pattern, name, rust, python))
    assert not bad, f"{len(bad)} differ: {bad[:5]!r:.2000}"
    assert handled >= asked // 2, (handled, asked)
    # the two outcomes both occur: matched names get the pattern's schema, others do not
    from propertok import _core as core

    matched = core.schema_to_rules_subset(
        {"properties": {"x-a": {}}, "patternProperties": {"^x-": {"type": "integer"}}, "required": ["x-a"]}, "")
    unmatched = core.schema_to_rules_subset(
        {"properties": {"y-a": {}}, "patternProperties": {"^x-": {"type": "integer"}}, "required": ["y-a"]}, "")
    assert matched is not None and unmatched is not None and matched[0] != unmatched[0]


@pytest.mark.parametrize("schema, handled", [
    ({"type": "object", "properties": {"a": {}, "b": {"type": "integer"}}, "dependencies": {"a": ["b"]}}, True),
    ({"properties": {"a": {}, "b": {}}, "dependencies": {"a": ["b", "a", "c"], "b": {"x-note": 1, "required": ["c"]}},
      "x-top": 0}, True),
    ({"type": "object", "properties": {"a": {"type": "null"}}, "required": ["a"], "dependentRequired": {"a": ["z"]}},
     True),
    ({"type": "object", "properties": {"a": {}}, "dependentSchemas": {"a": False}}, True),
    ({"type": "object", "properties": {"a": {}}, "dependentSchemas": {"a": {"$ref": "#/$defs/n"}},
      "$defs": {"n": {"properties": {"a": {"type": "null"}}}}}, True),
    ({"type": "object", "properties": {"a": {}}, "dependencies": {}}, True),
    ({"type": "object", "dependencies": {"a": "b"}}, False),  # draft 3's string form: Python raises
    ({"type": "object", "dependencies": {"a": ["b"]}, "dependentRequired": {"b": ["a"]}}, False),
    ({"anyOf": [{"type": "object"}, {"type": "null"}], "dependencies": {"a": ["b"]}}, False),
    ({"type": "object", "dependencies": {c: [] for c in "abcdefghi"}}, False),  # 2^9 branches
])
def test_dependencies_match_the_python_converter(schema, handled):
    """``dependencies`` (``dependentRequired``, ``dependentSchemas``) are Python's ``anyOf`` of
    "absent, or present with what it requires" per entry, branch for branch and with the
    ignored keywords in Python's order; combined with another ``anyOf``, ``oneOf`` or
    dependencies (which Python multiplies out), or past ``MAX_DEPENDENCIES`` entries, the schema
    goes to Python."""
    from propertok import _core

    for whitespace in WHITESPACES:
        rust = _core.schema_to_rules_subset(schema, whitespace)
        assert (rust is not None) == handled, schema
        if rust is not None:
            rules, ignored = _python(schema, whitespace, ignored=True)
            assert rust == ([tuple(r) for r in rules], ignored)


@pytest.mark.parametrize("schema", [
    {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 3, "x-u": 1}}}]},
    {"allOf": [{"properties": {"a": {"type": "string"}}, "additionalProperties": {"maxLength": 3}},
               {"properties": {"b": {"type": "string"}}, "additionalProperties": {"minLength": 1}}]},
    {"allOf": [{"items": {"type": "integer"}}, {"items": {"maximum": 9}, "type": "array"},
               {"prefixItems": [{"minimum": 1}]}]},
    {"$ref": "#/$defs/a", "properties": {"x": {"enum": [1, 2]}},
     "$defs": {"a": {"properties": {"x": {"enum": [2, 3]}}, "required": ["x"]}}},
])
def test_merged_subschemas_match_the_python_converter(schema):
    """Where a merge puts two subschemas together for one property, item or the rest, Python
    writes ``{"allOf": [x, y]}``; Rust merges them the same way, with the same ignored keywords."""
    from propertok import _core

    for whitespace in WHITESPACES:
        rust = _core.schema_to_rules_subset(schema, whitespace)
        assert rust is not None, schema
        rules, ignored = _python(schema, whitespace, ignored=True)
        assert rust == ([tuple(r) for r in rules], ignored)


@pytest.mark.parametrize("schema, handled", [
    ({"type": "number", "multipleOf": 0.01}, True),
    ({"type": "number", "multipleOf": 0.01, "minimum": -1.5, "exclusiveMaximum": 20.125}, True),
    ({"type": "number", "multipleOf": 0.1, "exclusiveMinimum": 0, "maximum": 1}, True),
    ({"type": "number", "multipleOf": 0.001, "minimum": 0.0005}, True),
    ({"type": "number", "multipleOf": 1, "minimum": 0.5}, True),  # integers
    ({"type": "number", "multipleOf": 1.0, "maximum": -2.5}, True),
    ({"type": "integer", "multipleOf": 0.25, "maximum": 7}, True),  # every integer
    ({"type": ["number", "null"], "multipleOf": 0.01}, True),
    ({"multipleOf": 0.5}, False),  # 5 / 10^1: Python's residue automaton
    ({"type": "integer", "multipleOf": 2}, False),
    ({"type": "integer", "multipleOf": 2.5}, False),
    ({"type": "number", "multipleOf": 0}, False),  # Python raises
    ({"type": "number", "multipleOf": 0.01, "enum": [0.5, 0.123]}, False),
    ({"enum": ["a", "b"], "pattern": None}, False),  # Python's re.search(None, ...) raises
    ({"allOf": [{"multipleOf": 0.1}, {"multipleOf": 0.01}]}, False),  # Python takes their lcm
])
def test_multiple_of_powers_of_ten_match_the_python_converter(schema, handled):
    """``multipleOf`` 10^-q (0.01, 0.1, 1) limits the digits after the point, as in Python; an
    integer's ``multipleOf`` whose multiples include every integer is no limit. Every other
    ``multipleOf`` needs Python's residue automaton, and goes to Python."""
    from propertok import _core

    for whitespace in WHITESPACES:
        rust = _core.schema_to_rules_subset(schema, whitespace)
        assert (rust is not None) == handled, schema
        if rust is not None:
            assert rust == ([tuple(r) for r in _python(schema, whitespace)], [])
