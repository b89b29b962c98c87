"""Recursive JSON schemas without a depth bound: ``compile_json_schema(schema, lazy=True)`` turns
``$ref`` cycles and free values into the rules of a pushdown automaton
(``propertok.json_schema.schema_to_rules``, run by ``rust/src/lazy/pushdown.rs``).

The oracles: ``jsonschema`` (every walk's JSON is a valid instance), the real tokenizer (every walk
is its own canonical encoding; instances nested 8 deep are accepted as the tokenizer encodes
them) and, for the automaton alone, the official test suite (``test_json_schema_suite.py``).
"""

from __future__ import annotations

import json
import random

import pytest

jsonschema = pytest.importorskip("jsonschema")

from helpers import finishing_walks, walk  # noqa: E402

TREE = {
    "$defs": {"node": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 6},
                       "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["name", "children"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}
FREE = {"type": "object", "properties": {"id": {"type": "integer"}, "extra": {}}, "required": ["id", "extra"],
        "additionalProperties": False}
TOKENIZERS = ["mistral7b", "llama3"]


def tree(rng: random.Random, depth: int) -> dict:
    kids = [] if depth == 0 else [tree(rng, depth - 1)] + [tree(rng, rng.randint(0, depth - 1))
                                                             for _ in range(rng.randint(0, 1))]
    return {"name": rng.choice(["a", "bc", "root", "x y"]), "children": kids}


def free(rng: random.Random, depth: int):
    if depth == 0:
        return rng.choice([1, "s", None, True, 2.5])
    return rng.choice([[free(rng, depth - 1)], {"k": free(rng, depth - 1)}])


@pytest.fixture(scope="module")
def guides(tokenizer_under_test):
    cache = {}

    def get(tokenizer, name):
        if (tokenizer, name) not in cache:
            schema = {"tree": TREE, "free": FREE}[name]
            cache[tokenizer, name] = tokenizer_under_test(tokenizer).compiler.compile_json_schema(schema, lazy=True)
        return cache[tokenizer, name]

    return get


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("name", ["tree", "free"])
def test_instances_nested_deep_are_accepted_as_encoded(tokenizer_under_test, guides, tokenizer, name):
    """Complete: 8 instances nested 8 deep (past the default ``max_recursion_depth=3``), in the
    generator's spelling (``", "``, ``": "``), accepted as the tokenizer encodes them."""
    o, guide = tokenizer_under_test(tokenizer).oracle, guides(tokenizer, name)
    schema = {"tree": TREE, "free": FREE}[name]
    rng = random.Random(3)
    for _ in range(8):
        value = tree(rng, 8) if name == "tree" else {"id": rng.randint(0, 99), "extra": free(rng, 8)}
        jsonschema.validate(value, schema)
        text = json.dumps(value, separators=(", ", ": "))
        ok, why = walk(guide, o.canonical(text))
        assert ok, f"{text}: {why}"


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("name", ["tree", "free"])
def test_walks_are_valid_canonical_and_can_finish(tokenizer_under_test, guides, tokenizer, name):
    """Sound and no dead end: 24 random walks never meet an empty mask, end final, are their own
    canonical encoding, and are valid instances."""
    o, guide = tokenizer_under_test(tokenizer).oracle, guides(tokenizer, name)
    validator = jsonschema.Draft202012Validator({"tree": TREE, "free": FREE}[name])
    walks = finishing_walks(guide, 24, 60)
    for w in walks:
        assert validator.is_valid(json.loads(o.decode(w))), o.decode(w)
    assert all(o.is_canonical_batch(walks))


def test_the_converter_writes_calls_only_for_recursion_and_free_values(pt):
    from propertok.json_schema import schema_to_regex, schema_to_rules

    flat = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert schema_to_rules(flat) == [("#", schema_to_regex(flat))]
    rules = schema_to_rules(TREE)
    assert [name for name, _ in rules] == ["#", "#/$defs/node"]
    assert [name for name, _ in schema_to_rules(FREE)] == ["#", "#any-json-value"]
    automaton = pt.RuleAutomaton(schema_to_rules(TREE, whitespace=""))
    deep = json.dumps(tree(random.Random(1), 12), separators=(",", ":"))
    assert automaton.matches(deep.encode()) and not automaton.matches(deep[:-1].encode())


def test_bounds_and_refusals(mistral):
    compiler, o = mistral.compiler, mistral.oracle
    bounded = compiler.compile_json_schema(TREE, lazy=True, max_recursion_depth=2)   # the regex path
    unbounded = compiler.compile_json_schema(TREE, lazy=True)
    # Two expansions of the $ref on a path: a node and its children, no grandchildren.
    one, two = (json.dumps(tree(random.Random(5), d), separators=(", ", ": ")) for d in (1, 2))
    assert walk(bounded, o.canonical(one))[0] and not walk(bounded, o.canonical(two))[0]
    assert walk(unbounded, o.canonical(two))[0]
    with pytest.raises(NotImplementedError, match="nests without bound|walks every state"):
        unbounded.count_sequences()
    # The default guide is lazy and unbounded; an eager one keeps max_recursion_depth's default, 3.
    three = o.canonical(json.dumps(tree(random.Random(5), 3), separators=(", ", ": ")))
    default, eager = compiler.compile_json_schema(TREE), compiler.compile_json_schema(TREE, lazy=False)
    assert default.is_lazy and walk(default, three)[0]
    assert not eager.is_lazy and walk(eager, o.canonical(two))[0] and not walk(eager, three)[0]
    from propertok.json_schema import UnsupportedSchemaError, schema_to_rules

    merged = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n", "minItems": 1}}}, "$ref": "#/$defs/n"}
    with pytest.raises(UnsupportedSchemaError, match=r"recursive \$ref with keywords beside it"):
        schema_to_rules(merged)
