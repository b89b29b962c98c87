"""Independent helpers for the JSON Schema tests: validation with ``jsonschema`` and the
documented restrictions of ``propertok.json_schema`` written as a schema transformation.

Nothing here imports propertok: these helpers are the yardstick the converter is measured with.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import jsonschema

from oracle import data_dir

# Where subschemas live, per keyword (drafts 4 to 2020-12).
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalItems", "additionalProperties", "not", "if", "then", "else",
               "propertyNames", "contains", "unevaluatedProperties")
# The converter's documented cap on counted repetitions (propertok.json_schema._json_regex.MAX_COUNT),
# restated here so that a change of the cap has to be made deliberately in both places.
MAX_COUNT = 256


def _multiple_of(validator, m, instance, schema):
    """``multipleOf`` in exact arithmetic (jsonschema's float division rejects 0.29 as a
    multiple of 0.01), for integers of any size."""
    if not validator.is_type(instance, "number") or isinstance(instance, bool):
        return
    exact = instance if isinstance(instance, Decimal) else Decimal(repr(instance))
    try:  # Fractions: Decimal's % fails past 28 digits of quotient
        ok = Fraction(exact) % Fraction(Decimal(repr(m))) == 0
    except (InvalidOperation, ValueError, OverflowError):  # inf, nan
        ok = False
    if not ok:
        yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {m!r}")


def _exact_float(text: str):
    """A JSON number with a fraction or exponent: a float where the float is exact to its
    text's shortest spelling (so enum/const comparisons stay as usual), else the exact Decimal
    (``974564418628516991.1`` is a multiple of 0.3; its nearest float is not)."""
    value = float(text)
    try:
        exact = Decimal(text)
    except InvalidOperation:  # an exponent beyond Decimal's range: the float (inf or 0) it is
        return value
    return value if math.isfinite(value) and Decimal(repr(value)) == exact else exact


def load_instance(text):
    """JSON text as a value for validation: numbers that a float would round are kept exact."""
    return json.loads(text, parse_float=_exact_float)


def validator(schema):
    """A validator for the schema's own draft, with format checking and exact ``multipleOf``."""
    cls = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(cls, {"multipleOf": _multiple_of})
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def schema_children(node: dict):
    for k in _SCHEMA_MAPS:
        if isinstance(node.get(k), dict):
            yield from node[k].values()
    for k in _SCHEMA_LISTS:
        if isinstance(node.get(k), list):
            yield from node[k]
    for k in _SCHEMA_ONE:
        v = node.get(k)
        if isinstance(v, list):
            yield from v
        elif isinstance(v, dict):
            yield v
    for k in ("dependencies",):
        if isinstance(node.get(k), dict):
            yield from (v for v in node[k].values() if isinstance(v, dict))


def restricted(schema):
    """``schema`` with the converter's documented restrictions made explicit, so that
    ``jsonschema`` can say which instances the regex must accept:

    * an object schema with ``properties`` admits no other properties (``patternProperties``
      are not generated next to them), a map with ``patternProperties`` only pattern keys;
    * a ``pattern`` with no anchor must match the whole string;
    * ``maxLength``/``maxItems``/``maxProperties`` above MAX_COUNT are lowered to it.
    """
    schema = copy.deepcopy(schema)

    def anchor(p):
        return p if p == "" or p.startswith("^") or p.endswith("$") else f"^(?:{p})$"

    def walk(node):
        if not isinstance(node, dict):
            return
        props = node.get("properties")
        if isinstance(props, dict) and props:
            node["additionalProperties"] = False
            node.pop("patternProperties", None)
        elif isinstance(node.get("patternProperties"), dict) and node["patternProperties"]:
            node.setdefault("additionalProperties", False)
            node["patternProperties"] = {anchor(k): v for k, v in node["patternProperties"].items()}
        if isinstance(node.get("pattern"), str):
            node["pattern"] = anchor(node["pattern"])
        for key in ("maxLength", "maxItems", "maxProperties"):
            if isinstance(node.get(key), int) and node[key] > MAX_COUNT:
                node[key] = max(MAX_COUNT, node.get(key.replace("max", "min"), 0))
        for child in schema_children(node):
            walk(child)

    walk(schema)
    return schema


def property_order(schema) -> dict:
    """Property name -> rank of its first appearance in the document."""
    order: dict = {}

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "properties" and isinstance(v, dict):
                    for name in v:
                        order.setdefault(name, len(order))
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return order


def reordered(instance, order: dict):
    """``instance`` with the keys of every object sorted by ``order`` (unknown keys last)."""
    if isinstance(instance, dict):
        keys = sorted(instance, key=lambda k: order.get(k, len(order)))
        return {k: reordered(instance[k], order) for k in keys}
    if isinstance(instance, list):
        return [reordered(v, order) for v in instance]
    return instance


@functools.lru_cache(maxsize=None)
def jsonschemabench() -> dict:
    """id -> {"subset", "schema", "instances"} for the shared JSONSchemaBench files."""
    rows = {}
    with open(data_dir() / "jsonschemabench_schemas.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            rows[row["id"]] = {"subset": row["subset"], "schema": row["schema"], "instances": []}
    with open(data_dir() / "jsonschemabench_valid_instances.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["id"] in rows:
                rows[row["id"]]["instances"] = row["instances"]
    return rows
