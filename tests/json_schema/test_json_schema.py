"""``propertok.json_schema``: keyword by keyword, error by error, and property tests.

Every keyword test checks both directions against independent judges: hand-written JSON texts
that must or must not match, and ``jsonschema`` (tests/support/jsonschema_support.py) on strings sampled
from the regex's own byte DFA (``ByteDfa.sample``), which must all be valid instances. The
shared JSONSchemaBench corpus and canonical guides are in test_json_schema_corpus.py.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jsonschema_support import load_instance, validator

js = pytest.importorskip("propertok.json_schema")  # always present: a failure here is an error
schema_to_regex = js.schema_to_regex
Unsupported = js.UnsupportedSchemaError
Invalid = js.InvalidSchemaError


@pytest.fixture(scope="module", autouse=True)
def _pt(pt):
    global ByteDfa
    ByteDfa = pt.ByteDfa


def dfa(schema, **options):
    return ByteDfa(schema_to_regex(schema, **options))


def check(schema, accept=(), reject=(), samples=40, **options):
    """Texts in ``accept`` match, texts in ``reject`` do not, and sampled strings validate."""
    d = dfa(schema, **options)
    for text in accept:
        assert d.matches(text.encode()), f"should accept {text!r}"
    for text in reject:
        assert not d.matches(text.encode()), f"should reject {text!r}"
    v = validator(schema)
    out = []
    for seed in range(2):
        for s in d.sample(samples // 2, seed, max_len=96):
            value = load_instance(s)
            errors = [e.message for e in v.iter_errors(value)]
            assert not errors, f"sample {s!r} is invalid: {errors}"
            out.append(value)
    return out


# ---------------------------------------------------------------------------------------------
# Types and literals
# ---------------------------------------------------------------------------------------------


def test_scalar_types():
    check({"type": "null"}, ["null"], ["", "nul", "0"])
    check({"type": "boolean"}, ["true", "false"], ["True", "1"])
    check({"type": "integer"}, ["0", "-7", "120"], ["01", "-0", "1.5", "1e3", "+1"])
    check({"type": "number"}, ["0", "-0.5", "1e10", "2.5E-3", "-0"], ["01", ".5", "1.", "NaN", "1e"])
    check({"type": "string"}, ['""', '"a b"', r'"\"\\\/\b\f\n\r\t"', r'"\u00e9\uD83D\uDE00"', '"é"'],
          ['"\n"', '"\\x"', r'"\ud800"', '"a', "'a'"])


def test_type_list_and_no_type():
    samples = check({"type": ["string", "null"]}, ['"x"', "null"], ["1"])
    assert {type(s) for s in samples} == {str, type(None)}
    check({"type": ["integer", "number"]}, ["1", "1.5"])
    check({}, ["null", "1", '"a"', "[]", '{"a":[1,{"b":null}]}'])
    check(True, ["[true]"])
    check({"minLength": 2}, ['"ab"'], ["12", '"a"'])  # type implied by the keyword
    check({"properties": {"a": {"type": "integer"}}}, ['{"a":1}', "{}"], ["1"])


def test_enum_and_const():
    check({"enum": ["a", 1, None, True, [1, 2], {"k": "v"}]},
          ['"a"', "1", "null", "true", "[1,2]", "[1, 2]", '{"k":"v"}', '{"k": "v"}'],
          ["1.0", '"b"', "false", "[2,1]"])
    check({"const": "x\"y\n"}, [r'"x\"y\n"'], ['"x"'])
    check({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}, ['"a"'], ["1", '"bb"'])
    check({"const": 2.5}, ["2.5"], ["2.50", "2"])


def test_literals_accept_both_json_dumps_spellings_of_non_ascii():
    schema = {"enum": ["café", "日本", "😀"]}
    d = dfa(schema)
    for value in schema["enum"]:
        upper_hex = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), json.dumps(value))
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), upper_hex):
            assert d.matches(text.encode()), text
    key = {"type": "object", "properties": {"é": {"type": "integer"}}, "required": ["é"]}
    check(key, [json.dumps({"é": 1}), json.dumps({"é": 1}, ensure_ascii=False)])


# ---------------------------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
}


@pytest.mark.parametrize("required", [[], ["a"], ["b"], ["c"], ["a", "c"], ["a", "b", "c"]])
def test_object_every_subset_in_declared_order_with_required(required):
    """All 8 subsets of 3 properties x both separators: exactly those holding the required
    names are accepted, and commas are right (no leading, trailing or double comma)."""
    import itertools

    schema = {**PERSON, "required": required}
    d = dfa(schema)
    values = {"a": 1, "b": "x", "c": True}
    for r in range(4):
        for names in itertools.combinations("abc", r):
            obj = {n: values[n] for n in names}
            expected = set(required) <= set(names)
            for text in (json.dumps(obj), json.dumps(obj, separators=(",", ":"))):
                assert d.matches(text.encode()) == expected, text
    for bad in ['{,"a":1}', '{"a":1,}', '{"a":1,,"b":"x"}', '{"b":"x","a":1}', '{"a":1,"a":1}']:
        assert not d.matches(bad.encode()), bad
    check(schema)


@pytest.mark.parametrize("n, heavy", [(1, 0), (2, 1), (4, 0), (5, 2), (6, 5), (7, 3), (9, None)])
def test_all_optional_objects_every_subset(n, heavy):
    """The O(n log n) decomposition of "non-empty ordered subset" (splits and pivots chosen by
    length): with one much longer property at each position, every subset in order is
    accepted, in both spellings, and nothing out of order or with a stray comma."""
    import itertools

    big = {"type": "object", "properties": {f"x{i}": {"type": "array", "items": {"enum": ["aa", "bb"]}}
                                            for i in range(6)}}
    props = {f"p{i}": (big if i == heavy else {"type": "integer"}) for i in range(n)}
    d = dfa({"type": "object", "properties": props})
    value = {f"p{i}": ({"x5": ["bb"]} if i == heavy else i) for i in range(n)}
    names = list(props)
    for r in range(n + 1):
        for subset in itertools.combinations(names, r):
            obj = {k: value[k] for k in subset}
            for text in (json.dumps(obj), json.dumps(obj, separators=(",", ":"))):
                assert d.matches(text.encode()), text
            if r >= 2:
                swapped = {k: obj[k] for k in (subset[1], subset[0]) + subset[2:]}
                assert not d.matches(json.dumps(swapped).encode())
                assert not d.matches(json.dumps(obj).replace(", ", ", , ", 1).encode())
    assert not d.matches(b'{,"p0":0}') and not d.matches(b'{"p0":0,}')


def test_object_no_extra_properties_whatever_additional_properties_says():
    for extra in (True, False, {"type": "string"}, None):
        schema = dict(PERSON) if extra is None else {**PERSON, "additionalProperties": extra}
        check(schema, ['{"a":1}'], ['{"a":1,"z":2}', '{"z":"s"}'])


def test_required_names_outside_properties_come_last():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["z"],
              "additionalProperties": {"type": "string"}}
    check(schema, ['{"z":"s"}', '{"a":1,"z":"s"}'], ['{"z":1}', "{}", '{"z":"s","a":1}'])
    with pytest.raises(Invalid, match="no JSON value"):
        schema_to_regex({**schema, "additionalProperties": False})


def test_maps_and_free_form_objects():
    samples = check({"type": "object"}, ["{}", '{"x":{"y":[1]}}', '{"a":1,"b":"c"}'], ["[]"])
    assert any(s for s in samples)
    check({"type": "object", "additionalProperties": {"type": "integer"}},
          ['{"x":1,"y":2}', "{}"], ['{"x":"1"}'])
    check({"type": "object", "additionalProperties": False}, ["{}"], ['{"x":1}'])
    check({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1,
           "maxProperties": 2}, ['{"x":1}', '{"x":1,"y":2}'], ["{}", '{"x":1,"y":2,"z":3}'])
    check({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, ['{"ab":1}'], ['{"A":1}'])
    check({"type": "object", "patternProperties": {"^x-[0-9]+$": {"type": "boolean"}}},
          ['{"x-1":true}', "{}"], ['{"y":true}', '{"x-1":1}'])


def test_several_pattern_properties_on_a_map():
    # keys of any pattern; each value satisfies every pattern's schema (a key may match several)
    schema = {"type": "object", "patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}}
    check(schema, ['{"a":3}', '{"aaaa":18}', '{"a":1,"aa":2}'], ['{"aaaa":31}', '{"a":"x"}', '{"a":21}'])
    # additionalProperties does not matter: only pattern keys are written
    check({"type": "object", "patternProperties": {"^x": {"type": "null"}, "^y": {}},
           "additionalProperties": {"type": "string"}}, ['{"x":null}', '{"y1":null}'], ['{"z":"s"}', '{"x":1}'])
    # allOf: each side's additionalProperties covers the other side's pattern keys
    check({"allOf": [{"patternProperties": {"^x": {}}}, {"additionalProperties": False}]}, ["{}"], ['{"x1":1}'])
    check({"allOf": [{"patternProperties": {"^x": {}}}, {"additionalProperties": {"type": "string"}}]},
          ['{"x1":"s"}'], ['{"x1":1}'])
    check({"allOf": [{"patternProperties": {"^x": {}}, "additionalProperties": False},
                     {"patternProperties": {"^x": {"type": "integer"}}}]}, ['{"x1":1}'], ['{"x1":"s"}'])
    # {"y":"s"} is valid, but only pattern keys are written: refused, not "no value satisfies"
    for schema in ({"type": "object", "patternProperties": {"^x": {"type": "integer"}},
                    "not": {"additionalProperties": {"type": "integer"}}},
                   {"type": "object", "patternProperties": {"^x": False}, "minProperties": 1}):
        with pytest.raises(Unsupported, match="only keys matching a pattern") as e:
            schema_to_regex(schema)
        assert e.value.keyword == "patternProperties" and not isinstance(e.value, Invalid)
    # no value satisfies both: only the empty object
    check({"type": "object", "patternProperties": {"f.*": True, "b.*": False}}, ["{}"], ['{"foo":1}'])


def test_pattern_properties_next_to_properties_are_merged_into_matching_names():
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {}},
              "patternProperties": {"^i": {"minimum": 10}}}
    check(schema, ['{"id":10,"name":"x"}'], ['{"id":9}'])


def test_min_and_max_properties_on_declared_properties():
    check({**PERSON, "minProperties": 1}, ['{"b":"x"}'], ["{}"])
    check({**PERSON, "required": ["a"], "maxProperties": 3}, ['{"a":1,"b":"x","c":true}'])
    with pytest.raises(Unsupported, match="minProperties"):
        schema_to_regex({**PERSON, "minProperties": 2})
    with pytest.raises(Unsupported, match="maxProperties"):
        schema_to_regex({**PERSON, "maxProperties": 1})
    # more than the declared names: nothing is written there; refused if nothing is left at all
    with pytest.raises(Unsupported, match="above the 1 declared") as e:
        schema_to_regex({"properties": {"a": {}}, "minProperties": 2})
    assert (e.value.keyword, e.value.pointer) == ("minProperties", "#")
    check({"type": "object", "anyOf": [{"required": ["a"], "minProperties": 3}, {"required": ["b"]}]},
          ['{"b":1}'], ['{"a":1}'])
    check({"dependentSchemas": {"a": {"minProperties": 4}}}, ["{}"], ['{"a":1}'])


def test_dependencies_and_dependent_required():
    for schema in (
        {**PERSON, "dependencies": {"a": ["b"]}},
        {**PERSON, "dependentRequired": {"a": ["b"]}},
        {**PERSON, "dependentSchemas": {"a": {"required": ["b"]}}},
    ):
        check(schema, ['{"a":1,"b":"x"}', '{"b":"x"}', '{"c":true}', "{}"], ['{"a":1}', '{"a":1,"c":true}'])


# ---------------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------------


def test_arrays_items_and_bounds():
    check({"type": "array", "items": {"type": "integer"}}, ["[]", "[1]", "[1, 2, 3]"], ["[1,]", "[,1]", '["a"]'])
    check({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
          ["[1,2]", "[1,2,3]"], ["[1]", "[1,2,3,4]", "[]"])
    check({"type": "array", "maxItems": 0}, ["[]"], ["[1]"])
    check({"type": "array"}, ['[1,"a",null,[{}]]'])


def test_tuples_prefix_items_and_items_lists():
    check({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
          ["[]", "[1]", '[1,"a"]'], ['[1,"a",2]', '["a"]'])
    check({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}, "minItems": 2},
          ["[1,true]", "[1,true,false]"], ["[1]", "[1,2]"])
    check({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
           "items": [{"type": "integer"}, {"type": "null"}], "additionalItems": False, "minItems": 1},
          ["[1]", "[1,null]"], ["[]", "[1,null,1]"])


def test_unique_items():
    check({"type": "array", "uniqueItems": True, "maxItems": 1}, ["[]", "[1]"], ["[1,2]"])
    check({"type": "array", "uniqueItems": False}, ["[1,1]"])
    with pytest.raises(Unsupported, match="uniqueItems") as e:
        schema_to_regex({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}})
    assert e.value.keyword == "uniqueItems" and e.value.pointer == "#/properties/tags"


# ---------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [
    {"minimum": 0}, {"exclusiveMinimum": 0}, {"minimum": -3, "maximum": 7}, {"maximum": -10},
    {"minimum": 0, "exclusiveMinimum": True}, {"maximum": 5, "exclusiveMaximum": True},
    {"minimum": 0.5, "maximum": 2.25}, {"exclusiveMinimum": -1.5, "exclusiveMaximum": 0.1},
    {"minimum": 1, "maximum": 1}, {"minimum": 100, "multipleOf": 1}, {"multipleOf": 0.01, "minimum": 0},
    {"multipleOf": 0.01},
])
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_numeric_bounds_against_a_brute_force_judge(kind, kw):
    schema = {"type": kind, **kw}
    if kw.get("exclusiveMinimum") is True or kw.get("exclusiveMaximum") is True:
        schema["$schema"] = "http://json-schema.org/draft-04/schema#"
    d = dfa(schema)
    v = validator(schema)
    texts = {f"{n}{f}" for n in range(-15, 16) for f in ("", ".5", ".25", ".0", ".05", ".125", ".1")}
    texts |= {"-0.5", "-0.25", "0.01", "0.001", "102", "99", "2.2", "2.26", "-1.49", "-1.5"}
    for t in sorted(texts):
        if t.startswith("-0") and Decimal(t) == 0:
            continue  # -0 is not produced (it is valid where 0 is)
        value = json.loads(t)
        if kind == "integer" and "." in t:
            continue  # integers are written without a fraction
        assert d.matches(t.encode()) == v.is_valid(value), (t, schema)
    check(schema, samples=60)


def _number_texts(kind: str):
    """Integers from -160 to 160, and (numbers) those with fractions of 1 to 3 digits."""
    fractions = [""] if kind == "integer" else ["", ".5", ".25", ".0", ".05", ".125", ".1", ".3", ".75", ".45", ".6", ".00"]
    for n in range(-160, 161):
        for f in fractions:
            yield f"{n}{f}"
    if kind == "number":
        yield from ["-0.5", "-0.25", "-0.3", "-0.75", "-0.6", "0.5", "0.3"]


@pytest.mark.parametrize("m", [2, 3, 7, 30, 1.5, 0.3, 2.5, 0.75, 12])
@pytest.mark.parametrize("bounds", [{}, {"minimum": 0}, {"exclusiveMinimum": -21, "maximum": 45},
                                    {"minimum": -7.5, "exclusiveMaximum": 100.25}, {"maximum": -3}])
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_multiple_of_against_exact_arithmetic(kind, m, bounds):
    """A text the generator can write (no exponent, no -0, no fraction for integers, at most as
    many fraction digits as m has) matches exactly when it is valid (exact multipleOf); others
    never match."""
    schema = {"type": kind, "multipleOf": m, **bounds}
    d, v = dfa(schema), validator(schema)
    allowed = 0 if kind == "integer" else max(-Decimal(repr(m)).normalize().as_tuple().exponent, 0)
    for t in _number_texts(kind):
        if t.startswith("-0") and Decimal(t) == 0:
            continue  # -0 is never written
        if len(t.partition(".")[2]) > allowed:
            assert not d.matches(t.encode()), t
        else:
            assert d.matches(t.encode()) == v.is_valid(json.loads(t)), (t, schema)
    for t in ("1e0", "-0", "00", "01", "2.", ".5", "-"):
        assert not d.matches(t.encode()), t
    check(schema, samples=40)


def test_multiple_of_combined_and_refused():
    # allOf / $ref siblings: the multiples of both (least common multiple)
    check({"allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}, ["12", "-24", "0"], ["4", "6", "18", "12.0"])
    check({"allOf": [{"multipleOf": 0.3}, {"multipleOf": 0.2}]}, ["0.6", "1.2", "6"], ["0.3", "0.2", "0.4"])
    # every integer is a multiple of 1/2; an integer is a multiple of 2.5 when it is one of 5
    check({"type": "integer", "multipleOf": 0.5}, ["3"])
    check({"type": "integer", "multipleOf": 2.5}, ["5", "-10"], ["2", "7"])
    check({"enum": [1, 3, 4.5, 6, "a"], "multipleOf": 1.5}, ["3", "4.5", "6", '"a"'], ["1"])
    # the automaton or its regex past the size limits: refused by name
    for m in (0.123456789, 13):
        with pytest.raises(Unsupported, match="too large") as e:
            schema_to_regex({"type": "integer", "multipleOf": m})
        assert (e.value.keyword, e.value.pointer) == ("multipleOf", "#")
    with pytest.raises(Invalid, match="> 0"):
        schema_to_regex({"type": "integer", "multipleOf": 0})


# ---------------------------------------------------------------------------------------------
# Strings: lengths, patterns, formats
# ---------------------------------------------------------------------------------------------


def test_string_lengths_count_characters_not_bytes_or_escapes():
    check({"type": "string", "minLength": 2, "maxLength": 3},
          ['"ab"', '"abc"', '"é日"', r'"\n\t"', r'"a\u00e9"'], ['"a"', '"abcd"', r'"\n"'])


def test_pattern_translation_escapes_json_and_anchors():
    check({"type": "string", "pattern": "^[^,]+$"}, ['"a\\"b"', r'"\\"'], ['"a,b"', '"a"b"'])
    check({"type": "string", "pattern": "[0-9a-f]+"}, ['"0af"'], ['"0ag"', '"x0"'])  # whole string
    check({"type": "string", "pattern": "^pkg:"}, ['"pkg:npm/x"', '"pkg:"'], ['"xpkg:"'])  # prefix
    check({"type": "string", "pattern": "\\.json$"}, ['"a.json"'], ['"a.jsonx"'])  # suffix
    check({"type": "string", "pattern": "^a|b$"}, ['"a"', '"ax"', '"xb"'], ['"xa"'])
    check({"type": "string", "pattern": ""}, ['""', '"anything"'])
    check({"type": "string", "pattern": "^\\d{3}\\s\\w$"}, ['"123 _"', r'"123\tz"'], ['"١٢٣ a"'])
    check({"type": "string", "pattern": "^[\\S]+$"}, ['"ab"'], ['"a b"', '"a\\u001fb"'])
    named = dfa({"type": "string", "pattern": "^(?<year>[0-9]{4})-x{1,2}?$"})  # Python's re lacks (?<name>
    assert named.matches(b'"2024-x"') and not named.matches(b'"2024-xxx"')


def test_pattern_with_length_bounds():
    check({"type": "string", "pattern": "^[a-f0-9]+$", "minLength": 4, "maxLength": 4}, ['"abcd"'], ['"abc"'])
    check({"type": "string", "pattern": "^[a-z][a-z0-9]{1,30}$", "maxLength": 4}, ['"ab12"'], ['"ab123"'])
    check({"type": "string", "pattern": "^[A-F]{24}$", "maxLength": 30}, ["\"" + "A" * 24 + "\""])
    check({"type": "string", "pattern": "^id-", "maxLength": 5}, ['"id-ab"', '"id-"'], ['"id-abc"'])
    with pytest.raises(Unsupported, match="cannot combine") as e:
        schema_to_regex({"type": "string", "pattern": "^(ab|c)+$", "maxLength": 4})
    assert e.value.keyword == "pattern"


@pytest.mark.parametrize("pattern, what", [
    ("(?=a)b", "look-around"), ("a(?!b)", "look-around"), ("(?<=a)b", "look-around"),
    ("(a)\\1", "backreference"), ("\\bword", "word boundary"), ("a^b", "anchors"),
    ("\\p{L}", "property"), ("(a", "missing"), ("[b-a]", "reversed"),
])
def test_pattern_errors_are_clear(pattern, what):
    with pytest.raises(Unsupported, match=what) as e:
        schema_to_regex({"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}})
    assert e.value.keyword == "pattern" and e.value.pointer == "#/properties/p"


@pytest.mark.parametrize("fmt, good, bad", [
    ("date", ["2024-02-29", "2023-12-31", "0001-01-01"], ["2023-02-29", "2023-13-01", "0000-01-01", "2023-1-01"]),
    ("time", ["23:59:59Z", "00:00:00.123+05:30"], ["24:00:00Z", "12:00:00", "12:00:60Z"]),
    ("date-time", ["2024-01-31T10:00:00Z", "1999-12-31T23:59:59.5-08:00"], ["2024-01-31 10:00:00Z", "2024-01-31T10:00Z"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    ("email", ["john.doe+x@example.com", "a@b"], ["john@", "@x.com", "a b@c.d"]),
    ("uri", ["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c"], ["example.com", "http://a b"]),
    ("ipv4", ["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "01.1.1.1", "1.1.1"]),
    ("ipv6", ["::1", "::", "2001:db8::ff00:42:8329", "fe80:0:0:0:0:0:0:1", "1::"], ["1:2", ":::", "12345::", "1::2::3"]),
    ("uri-reference", ["../a/b?c#d", "", "//host/p", "https://x.y/z", "a/b:c"], ["a:b c", "%zz", "[x]"]),
    ("hostname", ["example.com", "a-b.c"], ["-a.com", "a..b"]),
])
def test_formats(fmt, good, bad):
    samples = check({"type": "string", "format": fmt}, [json.dumps(g) for g in good], [json.dumps(b) for b in bad])
    if fmt in ("uri", "uri-reference"):  # jsonschema checks these only with rfc3987: a look here
        from urllib.parse import urlsplit

        for s in samples:
            assert fmt == "uri-reference" or re.fullmatch(r"[a-zA-Z][a-zA-Z0-9+.-]*", urlsplit(s).scheme), s
            assert re.fullmatch(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*", s), s
            assert not re.search(r"%(?![0-9a-fA-F]{2})", s), s


def test_format_with_length_and_unknown_formats():
    check({"type": "string", "format": "date", "maxLength": 10}, ['"2024-01-01"'])
    with pytest.raises(Unsupported, match="length bounds") as e:
        schema_to_regex({"type": "string", "format": "email", "maxLength": 100})
    assert e.value.keyword == "maxLength"
    with pytest.raises(Unsupported, match="unknown format 'sha1'") as e:
        schema_to_regex({"type": "string", "format": "sha1"})
    assert e.value.keyword == "format"
    with pytest.warns(js.IgnoredKeywordsWarning, match="format: sha1"):
        check({"type": "string", "format": "sha1"}, ['"abc"'], strict=False)


# ---------------------------------------------------------------------------------------------
# Combinators and references
# ---------------------------------------------------------------------------------------------


def test_any_of_with_sibling_keywords_is_distributed():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    check(schema, ['{"a":1}', '{"b":1}', '{"a":1,"b":2}'], ["{}"])


@pytest.mark.parametrize("schema, exclusive, shared", [
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, ['"a"', "1"], []),
    ({"type": "object", "properties": {"r": {"type": "number"}, "w": {"type": "number"}},
      "oneOf": [{"required": ["r"]}, {"required": ["w"]}]}, ['{"r":1}', '{"w":2}'], ['{"r":1,"w":2}']),
    ({"oneOf": [{"properties": {"k": {"const": "a"}, "x": {"type": "integer"}}, "required": ["k"]},
                {"properties": {"k": {"const": "b"}}, "required": ["k"]}]}, ['{"k":"a","x":1}', '{"k":"b"}'], []),
    ({"type": "number", "oneOf": [{"maximum": 2}, {"maximum": 5}]}, ["2.5", "5"], ["1"]),
    # the branches constrain objects only: null satisfies both, so it must go (GeoJSON's crs)
    ({"type": ["object", "null"], "properties": {"k": {"type": "string"}}, "required": ["k"],
      "oneOf": [{"properties": {"k": {"const": "a"}}}, {"properties": {"k": {"const": "b"}}}]},
     ['{"k":"a"}', '{"k":"b"}'], ["null"]),
])
def test_one_of_is_exclusive_where_provable(schema, exclusive, shared):
    check(schema, exclusive, shared, samples=80)


def test_one_of_whose_overlap_is_not_provable_is_refused_unless_lax():
    schema = {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"}]}
    for strict in (None, True):
        with pytest.raises(Unsupported) as e:
            schema_to_regex(schema, strict=strict)
        assert e.value.keyword == "oneOf" and "strict=False" in e.value.reason
    d = dfa(schema, strict=False)
    assert d.matches(b'"ab"')  # in both branches: documented approximation of lax mode (oneOf as anyOf)
    assert d.matches(b'"abcde"') and d.matches(b'"xy"')


def test_all_of_merges_subschemas():
    schema = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
                        {"properties": {"a": {"maximum": 5}, "b": {"type": "string"}}}]}
    check(schema, ['{"a":5}', '{"a":0,"b":"x"}'], ['{"a":6}', '{"b":"x"}'])
    check({"allOf": [{"type": ["string", "null"]}, {"type": ["null", "integer"]}]}, ["null"], ['"a"', "1"])
    check({"allOf": [{"type": "number"}, {"type": "integer"}]}, ["3"], ["3.5"])
    with pytest.raises(Invalid, match="no JSON value"):
        schema_to_regex({"allOf": [{"const": 1}, {"const": 2}]})
    with pytest.raises(Unsupported, match="cannot combine") as e:
        schema_to_regex({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})
    assert e.value.keyword == "pattern"


def test_not():
    check({"type": ["string", "null"], "not": {"type": "null"}}, ['"a"'], ["null"])
    check({"enum": ["a", "b", "c"], "not": {"enum": ["b"]}}, ['"a"', '"c"'], ['"b"'])
    check({**PERSON, "not": {"required": ["a", "b"]}}, ['{"a":1}', '{"b":"x"}'], ['{"a":1,"b":"x"}'])
    check({"type": "number", "not": {"minimum": 3}}, ["2.5"], ["3"])
    with pytest.raises(Invalid):
        schema_to_regex({"not": {}})
    with pytest.raises(Unsupported, match="cannot exclude") as e:
        schema_to_regex({"type": "string", "not": {"pattern": "^a"}})
    assert e.value.keyword == "not"


@pytest.mark.parametrize("schema, accept, reject", [
    # not (b1 and b2) is (not b1) or (not b2): a type, or a property whose value fails
    ({"not": {"type": "object", "properties": {"foo": {"type": "string"}}}},
     ["1", '"a"', "null", '{"foo":1}'], ["{}", '{"foo":"a"}']),
    ({"not": {"not": {"type": "integer"}}}, ["1", "-3"], ['"a"', "1.5", "null"]),
    ({"type": "object", "not": {"additionalProperties": False}}, ['{"a":1}'], ["{}"]),
    ({"type": "array", "items": {"type": "integer"}, "not": {"prefixItems": [True, {"const": 2}]}},
     ["[1,3]", "[5,3,7]"], ["[1,2]", "[5,2,7]", "[1]", "[]"]),  # [1] has no 2nd item: it satisfies b
    ({"type": "array", "not": {"items": {"type": "integer"}}}, ['["a"]', '[1,"a"]'], ["[]", "[1]"]),
    ({"type": "string", "not": {"maxLength": 2}}, ['"abc"'], ['"ab"', '""']),
    ({"type": "array", "not": {"minItems": 2}}, ["[]", "[1]"], ["[1,2]"]),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number",
      "not": {"minimum": 3, "exclusiveMinimum": True}}, ["3", "2.5"], ["3.5"]),
    ({"type": "integer", "not": {"exclusiveMaximum": 3}}, ["3", "4"], ["2"]),
    ({"not": {"const": 1}}, ["2", "0.5", "1.5", '"a"', "true", "null", "[]", "{}"], ["1", "1.0"]),
    ({"type": "number", "not": {"enum": [1, 2.5, "x"]}}, ["2", "0", "3"], ["1", "2.5"]),
    ({"type": ["boolean", "null"], "not": {"enum": [True, None]}}, ["false"], ["true", "null"]),
    ({"enum": ["a", "abcdef", 3], "not": {"maxLength": 3}}, ['"abcdef"'], ['"a"', "3"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
      "not": {"not": {"properties": {"a": {"minimum": 5}}}}}, ['{"a":5}'], ['{"a":4}']),
])
def test_not_of_each_keyword(schema, accept, reject):
    check(schema, accept, reject, samples=60)


def test_constants_are_judged_against_patterns_only_where_python_and_ecma_agree():
    # Python's $ matches before a final newline, ECMA-262's does not: "a\n" must not be kept
    check({"enum": ["a", "b"], "pattern": "^a$"}, ['"a"'], ['"b"'])
    for schema in ({"enum": ["a\n", "a"], "pattern": "^a$"}, {"enum": ["\u0661"], "pattern": "^\\d$"},
                   {"type": "string", "enum": ["a\n", "b"], "not": {"pattern": "^a$"}}):
        with pytest.raises(Unsupported, match="exactly") as e:
            schema_to_regex(schema)
        assert e.value.keyword == "pattern"


def test_property_names_are_judged_against_patterns_only_where_python_and_ecma_agree():
    # `é` is `\w` for Python, not for ECMA-262: whether the pattern's schema applies is refused,
    # in a plain object and where allOf merges one side's patternProperties with the other's names.
    check({"type": "object", "properties": {"a": {}}, "patternProperties": {"^\\w$": {"type": "integer"}},
           "required": ["a"], "additionalProperties": False}, ['{"a":1}'], ['{"a":"x"}'])
    for schema in (
        {"type": "object", "properties": {"é": {}}, "patternProperties": {"^\\w$": {"type": "integer"}},
         "required": ["é"]},
        {"allOf": [{"type": "object", "properties": {"é": {}}, "required": ["é"]},
                   {"patternProperties": {"^\\w$": {"type": "integer"}}}]},
    ):
        with pytest.raises(Unsupported, match="the property name 'é'.*exactly") as e:
            schema_to_regex(schema)
        assert e.value.keyword == "patternProperties"


def test_not_of_what_a_regex_cannot_say_is_refused():
    for schema in ({"type": "string", "not": {"const": "a"}}, {"type": "string", "not": {"pattern": "^a"}},
                   {"type": "array", "not": {"contains": {"const": 1}}}):
        with pytest.raises(Unsupported, match="cannot exclude") as e:
            schema_to_regex(schema)
        assert e.value.keyword == "not"


@pytest.mark.parametrize("schema, accept, reject", [
    ({"type": "string", "oneOf": [{"minLength": 2}, {"maxLength": 4}]}, ['"a"', '"abcde"'], ['"ab"', '"abcd"']),
    ({"type": "object", "oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]},
     ['{"foo":1,"bar":2}', '{"foo":1,"baz":2}'], ['{"foo":1,"bar":2,"baz":3}']),
    ({"if": {"maxLength": 4}, "then": {"const": "yes"}, "else": {"const": "other"}},
     ['"yes"', '"other"'], ['"no"', '"otherwise"']),
    ({"if": {"const": 1}, "then": False}, ["2", '"a"'], ["1"]),
])
def test_one_of_and_if_by_negating_one_keyword_at_a_time(schema, accept, reject):
    check(schema, accept, reject, samples=60)


def test_refs_defs_definitions_anchors_and_ids():
    check({"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}}, ["[1]"], ['["a"]'])
    check({"definitions": {"a~b/c": {"type": "null"}}, "$ref": "#/definitions/a~0b~1c"}, ["null"])
    check({"$defs": {"x": {"$anchor": "X", "type": "boolean"}}, "$ref": "#X"}, ["true"])
    check({"$defs": {"x": {"$id": "thing.json", "type": "boolean"}}, "$ref": "thing.json"}, ["false"])
    check({"$id": "https://e.x/s.json", "$defs": {"n": {"type": "null"}}, "$ref": "https://e.x/s.json#/$defs/n"}, ["null"])
    check({"properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"}}, "required": ["b"]}, ['{"b":2}'])


def test_refs_against_a_urn_base():
    # urljoin drops "#..." against a urn: base; the converter must not
    urn = "urn:uuid:deadbeef-1234-00ff-ff00-4321feebdaed"
    check({"$id": urn, "$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}},
           "required": ["a"]}, ['{"a":"x"}'], ['{"a":1}'])
    check({"$id": urn, "$defs": {"s": {"$anchor": "S", "type": "null"}}, "$ref": f"{urn}#S"}, ["null"], ["1"])


REMOTE = "https://schemas.example/"
RESOURCES = {
    f"{REMOTE}int.json": {"type": "integer", "minimum": 0},
    f"{REMOTE}pair.json": json.dumps({  # JSON text is accepted too
        "$defs": {"name": {"$anchor": "name", "type": "string", "maxLength": 3}},
        "type": "array", "prefixItems": [{"$ref": "#name"}, {"$ref": "int.json"}], "items": False}),
    f"{REMOTE}tree.json": {"$id": "https://elsewhere.example/tree", "type": "object",
                           "properties": {"kids": {"type": "array", "items": {"$ref": "tree"}}}},
}


def check_with_resources(schema, accept, reject):
    """``check`` for a schema that refers to ``RESOURCES``: jsonschema is given them too."""
    import referencing
    import referencing.jsonschema

    d = dfa(schema, resources=RESOURCES)
    for text in accept:
        assert d.matches(text.encode()), f"should accept {text!r}"
    for text in reject:
        assert not d.matches(text.encode()), f"should reject {text!r}"
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(json.loads(doc) if isinstance(doc, str) else doc,
                                                 default_specification=referencing.jsonschema.DRAFT202012))
        for uri, doc in RESOURCES.items())
    plain = validator(schema)
    v = type(plain)(schema, format_checker=plain.format_checker, registry=registry)
    for s in d.sample(30, 0, max_len=96):
        assert v.is_valid(load_instance(s)), s


def test_refs_to_other_documents_given_as_resources():
    check_with_resources({"$ref": f"{REMOTE}int.json"}, ["0", "12"], ["-1", '"a"', "1.5"])
    # inside a resource, references resolve against its own URI: "#name", "int.json"
    check_with_resources({"$ref": f"{REMOTE}pair.json"}, ['["ab",3]'], ['["abcd",3]', '["a",-1]', '["a",1,2]'])
    check_with_resources({"$ref": f"{REMOTE}pair.json#/$defs/name"}, ['"abc"'], ['"abcd"'])
    # relative to the schema's own $id
    check_with_resources({"$id": f"{REMOTE}main.json", "type": "array", "items": {"$ref": "int.json"}},
                         ["[1,2]"], ["[-1]"])
    # a resource's $id is a URI of it too, and its relative references resolve against that $id
    check_with_resources({"$ref": "https://elsewhere.example/tree"},
                         ['{"kids":[{"kids":[]}]}'], ['{"kids":[1]}'])


def test_resources_are_never_fetched_and_are_checked():
    with pytest.raises(Unsupported, match="https://schemas.example/missing.json") as e:
        schema_to_regex({"properties": {"a": {"$ref": "missing.json"}}, "$id": f"{REMOTE}main.json"},
                        resources=RESOURCES)
    assert (e.value.keyword, e.value.pointer) == ("$ref", "#/properties/a")
    assert "resources=" in str(e.value)
    with pytest.raises(Invalid, match="points to nothing") as e:
        schema_to_regex({"$ref": f"{REMOTE}int.json#/nope"}, resources=RESOURCES)
    with pytest.raises(ValueError, match="not an absolute URI"):
        schema_to_regex({}, resources={"int.json": {}})
    with pytest.raises(ValueError, match="fragment"):
        schema_to_regex({}, resources={f"{REMOTE}a.json#/x": {}})
    with pytest.raises(TypeError, match="mapping"):
        schema_to_regex({}, resources=[RESOURCES])
    with pytest.raises(Invalid, match="not valid JSON") as e:
        schema_to_regex({}, resources={f"{REMOTE}a.json": "{"})
    assert e.value.pointer == f"{REMOTE}a.json#"
    # the schema's own URIs win over a resource of the same URI
    # (the resource int.json has no $defs: resolving there would point to nothing)
    own = {"$id": f"{REMOTE}int.json", "$defs": {"n": {"type": "null"}}, "$ref": f"{REMOTE}int.json#/$defs/n"}
    assert dfa(own, resources=RESOURCES).matches(b"null")


def test_recursion_is_cut_at_max_recursion_depth():
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"]}}, "$ref": "#/$defs/node"}
    deep = {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}
    check(tree, [json.dumps(deep)], max_recursion_depth=3)
    assert not dfa(tree, max_recursion_depth=2).matches(json.dumps(deep).encode())
    assert dfa(tree, max_recursion_depth=2).matches(b'{"v":1,"kids":[{"v":2}]}')
    required_loop = {"$defs": {"n": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}},
                                     "required": ["n"]}}, "$ref": "#/$defs/n"}
    with pytest.raises(Unsupported, match="max_recursion_depth") as e:
        schema_to_regex(required_loop)
    assert e.value.keyword == "$ref"


# ---------------------------------------------------------------------------------------------
# Options and errors
# ---------------------------------------------------------------------------------------------


def test_whitespace_option_and_json_text_input():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    compact = dfa(schema, whitespace="")
    assert compact.matches(b'{"a":[1,2]}') and not compact.matches(b'{"a": [1, 2]}')
    spaced = dfa(json.dumps(schema), whitespace=r"[ \n]*")
    assert spaced.matches(json.dumps({"a": [1, 2]}, indent=2).encode())


def test_annotations_are_ignored_and_unknown_keywords_are_reported():
    annotated = {"type": "integer", "title": "t", "description": "d", "examples": [1], "default": 0,
                 "$comment": "c", "$schema": "http://json-schema.org/draft-07/schema#", "deprecated": False}
    assert schema_to_regex(annotated) == schema_to_regex({"type": "integer"})
    custom = {"type": "object", "properties": {"a": {"type": "integer", "x-unit": "cm", "_format": "x"}}}
    plain = schema_to_regex({"type": "object", "properties": {"a": {"type": "integer"}}})
    with pytest.warns(js.IgnoredKeywordsWarning) as w:  # default: ignored (the spec's rule), reported
        assert schema_to_regex(custom) == plain
    assert w[0].message.ignored == [("x-unit", "#/properties/a"), ("_format", "#/properties/a")]
    assert js.ignored_keywords(custom) == w[0].message.ignored
    with pytest.warns(js.IgnoredKeywordsWarning):
        assert schema_to_regex(custom, strict=False) == plain
    with pytest.raises(Unsupported, match="unknown keyword") as e:
        schema_to_regex(custom, strict=True)
    assert (e.value.keyword, e.value.pointer) == ("x-unit", "#/properties/a")


@pytest.mark.parametrize("keyword", sorted(js.UNSUPPORTED))
def test_every_unsupported_keyword_raises_naming_it_and_its_pointer(keyword):
    schema = {"type": "object", "properties": {"x": {"type": "array", keyword: {}}}}
    for strict in (True, None, False):
        with pytest.raises(Unsupported) as e:
            schema_to_regex(schema, strict=strict)
        assert e.value.keyword == keyword and e.value.pointer == "#/properties/x"
        assert isinstance(e.value, ValueError) and keyword in str(e.value)


@pytest.mark.parametrize("schema, keyword, match", [
    ('{"type": ', None, "not valid JSON"),
    ({"type": "str"}, "type", "unknown type"),
    ({"type": "string", "minLength": -1}, "minLength", "non-negative"),
    ({"type": "integer", "minimum": "0"}, "minimum", "must be a number"),
    ({"$ref": "#/$defs/missing"}, "$ref", "points to nothing"),
    ({"$ref": "https://example.com/other.json"}, "$ref", "another document"),
    ({"allOf": []}, "allOf", "non-empty"),
    ({"anyOf": {"type": "null"}}, "anyOf", "non-empty"),
    ({"type": "object", "required": True}, "required", "draft-3"),
    ([1, 2], None, "must be an object or a boolean"),
])
def test_malformed_schemas(schema, keyword, match):
    with pytest.raises(ValueError, match=match) as e:
        schema_to_regex(schema)
    assert isinstance(e.value, Unsupported) and e.value.keyword == keyword


def test_option_errors():
    with pytest.raises(ValueError, match="max_recursion_depth"):
        schema_to_regex({}, max_recursion_depth=-1)
    with pytest.raises(TypeError, match="whitespace"):
        schema_to_regex({}, whitespace=None)


# ---------------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------------

bounds = st.one_of(st.none(), st.decimals(min_value=-50, max_value=50, places=2, allow_nan=False))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lo=bounds, hi=bounds, lo_x=st.booleans(), hi_x=st.booleans(), kind=st.sampled_from(["integer", "number"]),
       texts=st.lists(st.decimals(min_value=-60, max_value=60, places=3, allow_nan=False), min_size=10, max_size=30))
def test_number_ranges_match_jsonschema(lo, hi, lo_x, hi_x, kind, texts):
    schema = {"type": kind}
    if lo is not None:
        schema["exclusiveMinimum" if lo_x else "minimum"] = float(lo)
    if hi is not None:
        schema["exclusiveMaximum" if hi_x else "maximum"] = float(hi)
    try:
        d = dfa(schema)
    except Invalid:  # empty range: then no value in the grid may be valid
        d = None
    v = validator(schema)
    for t in texts:
        text = format(t.normalize(), "f") if kind == "number" else str(int(t))
        if Decimal(text) == 0 and text.startswith("-"):
            continue
        expected = v.is_valid(json.loads(text))
        assert (d is not None and d.matches(text.encode())) == expected, (schema, text)


_ATOMS = ["a", "b", "[ab]", "[^a]", "\\d", "\\w", "\\s", ".", '"', "\\\\", "é", "\\n", "[\\s,]", "\\S", "\\W", "\\D"]


@st.composite
def patterns(draw, depth=0):
    kind = draw(st.sampled_from(["atom", "atom", "cat", "alt", "rep"] if depth < 3 else ["atom"]))
    if kind == "atom":
        return draw(st.sampled_from(_ATOMS))
    if kind == "cat":
        return "".join(draw(st.lists(patterns(depth + 1), min_size=2, max_size=3)))
    if kind == "alt":
        return "(?:" + "|".join(draw(st.lists(patterns(depth + 1), min_size=2, max_size=3))) + ")"
    inner = draw(patterns(depth + 1))
    return "(?:" + inner + ")" + draw(st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,}"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns(), texts=st.lists(st.text(alphabet='ab1 _,"\\\n\t€\x01', max_size=6), max_size=25))
def test_patterns_agree_with_python_re_on_json_strings(pattern, texts):
    """The JSON text of a string matches iff Python's ``re.fullmatch`` accepts the string, and
    samples of the regex decode to strings ``re.search`` accepts. The texts avoid characters
    where ECMA-262 and Python classes differ (``é`` is ``\\w`` for Python, not for ECMA): there
    the converter keeps only what both accept, which the sample check covers."""
    d = dfa({"type": "string", "pattern": f"^{pattern}$"})
    compiled = re.compile(pattern)
    for s in texts:
        for text in (json.dumps(s), json.dumps(s, ensure_ascii=False)):
            assert d.matches(text.encode()) == (compiled.fullmatch(s) is not None), (pattern, text)
    for s in d.sample(10, 0, max_len=40):
        assert compiled.fullmatch(json.loads(s)), (pattern, s)
