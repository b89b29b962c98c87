"""The Rust JSON Schema converter (``_core.schema_to_rules_subset``, ``rust/src/json_schema``)
against the Python one (``propertok.json_schema.schema_to_rules``), as a differential test.

The Rust converter handles a subset of schemas and must return, for each of them, exactly the
rules the Python converter returns (same names, same regex text, same order); for every other
schema it returns ``None``. Checked on every JSONSchemaBench schema and every schema of the JSON
Schema Test Suite (draft 2020-12 and draft 7), with whitespace ``""`` and the default ``[ ]?``:

* where Rust returns rules, Python returns the same, and the same ignored unknown keywords
  (``(keyword, pointer)``, in order: what ``IgnoredKeywordsWarning`` reports; Python raising
  there is a failure: Rust must decline what Python refuses);
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
MIN_BENCH = 3370
MIN_SUITE = 320


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
