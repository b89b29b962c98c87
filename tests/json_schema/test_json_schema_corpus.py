"""``schema_to_regex`` on the shared JSONSchemaBench schemas, and canonical JSON-schema guides.

For a fixed seeded sample of Glaiveai2K and Github_easy schemas (``PROPERTOK_ORACLE_SCALE``
scales it), each schema is converted (``strict=False``, so that schemas with custom annotation
keywords are exercised too; ``strict=True`` must give the same regex or name an unknown keyword)
and compiled to a ``ByteDfa``, then:

(a) every shared valid instance that satisfies the converter's documented restrictions
    (tests/support/jsonschema_support.py: ``restricted``) is accepted in both ``json.dumps`` spellings
    (``separators=(",", ":")`` and the default ``", "``/``": "`` with ``ensure_ascii``) when its
    keys are in declared order; instances with keys in another order are counted and skipped;
(b) strings sampled from the DFA parse as JSON and validate with ``jsonschema``; the only
    failures allowed are ``oneOf`` errors (the documented oneOf-as-anyOf approximation), and
    at most 1% of the samples.

The canonical tests compile guides with the Mistral-7B tokenizer and walk the oracle's canonical
tokens of valid instances through them; the guide's own random walks must be canonical, parse
and validate.
"""

from __future__ import annotations

import json
import warnings
import math
import random

import pytest

from workloads import oracle_scale
from helpers import walk
from jsonschema_support import jsonschemabench, property_order, reordered, restricted, validator

from oracle import require_shared  # noqa: E402

require_shared("JSONSchemaBench schemas and instances")

SUBSETS = ("Glaiveai2K", "Github_easy")
BASE_COUNT = 60
SEED = 20240611
SAMPLES = 12
MAX_DFA_STATES = 20_000


def corpus_sample() -> list:
    pool = sorted(i for i, row in jsonschemabench().items() if row["subset"] in SUBSETS and row["instances"])
    n = min(len(pool), max(2, math.ceil(BASE_COUNT * oracle_scale())))
    return sorted(random.Random(SEED).sample(pool, n))


STATS = {"schemas": 0, "unsupported": 0, "too_large": 0, "accepted": 0, "key_order": 0,
         "restricted_out": 0, "invalid_instance": 0, "samples": 0, "one_of_invalid": 0}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print(f"\nJSONSchemaBench sample: {STATS}")
    converted = STATS["schemas"] - STATS["unsupported"] - STATS["too_large"]
    assert converted >= 0.8 * STATS["schemas"], f"converted only {converted} of {STATS['schemas']}"
    assert STATS["one_of_invalid"] <= 0.01 * max(STATS["samples"], 1), STATS


@pytest.mark.parametrize("schema_id", corpus_sample())
def test_jsonschemabench_schema(pt, schema_id):
    from propertok.json_schema import IgnoredKeywordsWarning, UnsupportedSchemaError, schema_to_regex

    row = jsonschemabench()[schema_id]
    schema = row["schema"]
    STATS["schemas"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IgnoredKeywordsWarning)
            regex = schema_to_regex(schema, strict=False)
    except UnsupportedSchemaError as e:
        STATS["unsupported"] += 1
        assert e.keyword is None or e.keyword in json.dumps(schema), e  # names something real
        return
    try:  # the default mode differs from lax only by refusing what lax approximates
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IgnoredKeywordsWarning)
            default = schema_to_regex(schema)
        assert default == regex or '"format"' in json.dumps(schema)
    except UnsupportedSchemaError as e:
        assert e.keyword in ("oneOf", "format"), e
    try:
        schema_to_regex(schema, strict=True)
    except UnsupportedSchemaError as e:
        assert e.keyword is not None, e
    try:  # a lower state limit than the default keeps the slowest determinisations to seconds
        dfa = pt.ByteDfa(regex, max_states=MAX_DFA_STATES)
    except pt.LimitExceeded:
        STATS["too_large"] += 1
        return

    full, closed = validator(schema), validator(restricted(schema))
    order = property_order(schema)
    for instance in row["instances"]:
        if not full.is_valid(instance):  # e.g. a format the data's producer did not check
            STATS["invalid_instance"] += 1
            continue
        if not closed.is_valid(instance):  # outside the documented restrictions
            STATS["restricted_out"] += 1
            continue
        for text in (json.dumps(instance, separators=(",", ":"), ensure_ascii=False), json.dumps(instance)):
            if dfa.matches(text.encode()):
                STATS["accepted"] += 1
            elif dfa.matches(json.dumps(reordered(instance, order), ensure_ascii=False).encode()):
                STATS["key_order"] += 1
            else:
                pytest.fail(f"valid instance rejected: {text[:300]}")

    for seed in (1, 2):
        for s in dfa.sample(SAMPLES // 2, seed, max_len=160):
            STATS["samples"] += 1
            value = json.loads(s)  # must parse
            errors = list(full.iter_errors(value))
            if errors and all(e.validator == "oneOf" for e in errors) and "oneOf" in json.dumps(schema):
                STATS["one_of_invalid"] += 1
                continue
            assert not errors, f"sample {s[:300]!r}: {errors[0].message}"


# ---------------------------------------------------------------------------------------------
# Canonical guides (Mistral-7B) from JSON schemas
# ---------------------------------------------------------------------------------------------

CANONICAL_IDS = [
    "Glaiveai2K/calculate_area_0bc8b268",  # oneOf over required sets, nested object
    "Glaiveai2K/create_invoice_15695e22",
    "Glaiveai2K/search_hotels_37ba3f1e",
    "Github_easy/o10008",
]


@pytest.mark.parametrize("schema_id", CANONICAL_IDS)
def test_canonical_guide_from_schema(mistral, schema_id):
    from propertok.json_schema import schema_to_regex

    row = jsonschemabench()[schema_id]
    schema = row["schema"]
    guide = mistral.compiler.compile_json_schema(schema)
    assert guide.method == "cartesian" and guide.is_lazy
    regex_guide = mistral.compiler.compile_regex(schema_to_regex(schema), lazy=False)
    assert guide.materialize().num_states == regex_guide.num_states  # the same regex underneath
    oracle, full, closed = mistral.oracle, validator(schema), validator(restricted(schema))
    order = property_order(schema)
    walked = 0
    for instance in row["instances"]:
        if not (full.is_valid(instance) and closed.is_valid(instance)):
            continue
        for text in (json.dumps(reordered(instance, order), ensure_ascii=False),
                     json.dumps(reordered(instance, order), separators=(",", ":"), ensure_ascii=False)):
            if not pt_dfa(schema).matches(text.encode()):
                continue  # e.g. an instance key order the schema order cannot express
            ok, why = walk(guide, oracle.canonical(text))
            assert ok, f"{text!r}: {why}"
            walked += 1
    assert walked > 0, "no instance was checked"
    for seed in range(20):
        seq = guide.random_walk(seed, max_tokens=96)
        assert oracle.is_canonical(seq), seq
        text = oracle.decode(seq).decode("utf-8")
        errors = [e for e in full.iter_errors(json.loads(text)) if e.validator != "oneOf"]
        assert not errors, (text, errors[0].message)


def pt_dfa(schema):
    import propertok
    from propertok.json_schema import schema_to_regex

    return propertok.ByteDfa(schema_to_regex(schema))


def test_compile_json_schema_options_and_errors(mistral):
    from propertok.json_schema import UnsupportedSchemaError

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    compact = mistral.compiler.compile_json_schema(json.dumps(schema), whitespace="")
    tokens = mistral.oracle.canonical('{"ok":true}')
    assert walk(compact, tokens)[0]
    assert not walk(compact, mistral.oracle.canonical('{"ok": true}'))[0]
    agnostic = mistral.compiler.compile_json_schema(schema, method="agnostic")
    assert agnostic.method == "agnostic" and walk(agnostic, tokens)[0]
    with pytest.raises(UnsupportedSchemaError, match="not") as e:
        mistral.compiler.compile_json_schema({"type": "string", "not": {"pattern": "a"}})
    assert isinstance(e.value, ValueError)
    with pytest.raises(TypeError):
        mistral.compiler.compile_json_schema(schema, whitespaces="")  # a misspelt option
