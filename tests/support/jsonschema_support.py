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
      are not generated next to them), a map with ``patternProperties`` only pattern keys, each
      value satisfying the schemas of all the patterns;
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
            node["additionalProperties"] = False
            pats = node["patternProperties"]
            every = {"allOf": list(pats.values())} if len(pats) > 1 else None  # each value: all schemas
            node["patternProperties"] = {anchor(k): every or v for k, v in pats.items()}
        if isinstance(node.get("pattern"), str):
            node["pattern"] = anchor(node["pattern"])
        for key in ("maxLength", "maxItems", "maxProperties"):
            if isinstance(node.get(key), int) and node[key] > MAX_COUNT:
                node[key] = max(MAX_COUNT, node.get(key.replace("max", "min"), 0))
        for child in schema_children(node):
            walk(child)

    walk(schema)
    return schema


# The converter's formats (propertok.json_schema._json_regex.FORMATS), restated: a schema with
# another format generates no strings (default mode), as with any keyword it cannot enforce.
FORMATS = ("date", "time", "date-time", "uuid", "email", "uri", "uri-reference", "ipv4", "ipv6", "hostname")
# Type keywords (propertok.json_schema._schema_keywords._TYPE_KEYWORDS), restated.
TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
               "minProperties", "maxProperties", "unevaluatedProperties", "dependencies", "dependentRequired",
               "dependentSchemas"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
              "minContains", "maxContains", "unevaluatedItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
# Keywords that merge other schemas into a node: the converter reads the node's types only after
# merging, so no type is implied here for such a node (its instances count as "other").
_IN_PLACE = ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "enum", "const", "type")


def _in_place(node: dict) -> bool:
    """Whether the converter merges other schemas into ``node`` before reading its types (a
    dependent schema merges in too, unless it constrains objects only)."""
    if any(k in node for k in _IN_PLACE):
        return True
    for key in ("dependentSchemas", "dependencies"):
        deps = node.get(key)
        if isinstance(deps, dict) and any(isinstance(d, dict) and not set(d) <= set(TYPE_KEYWORDS["object"])
                                          for d in deps.values()):
            return True
    return False


def with_implied_types(schema, mode: str = "default"):
    """``schema`` with the types an untyped node generates made explicit (the documented choice
    "an untyped schema generates the types its keywords name"; a format the converter does not
    know names no type, except in lax mode where it is ignored as a string format), on nodes
    the converter does not merge others into."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if not isinstance(node, dict):
            return
        if not _in_place(node):
            unknown_format = "format" in node and node["format"] not in FORMATS and mode != "lax"
            implied = [t for t, kws in TYPE_KEYWORDS.items()
                       if any(k in node for k in kws if not (unknown_format and k == "format"))]
            if implied:
                node["type"] = implied
            elif unknown_format:
                node["type"] = ["null", "boolean", "number", "array", "object"]
        for child in schema_children(node):
            walk(child)

    walk(schema)
    return schema


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)


def _numbers(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)


def _depth(value) -> int:
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return 1 + max([_depth(v) for v in items] or [0])
    return 0


def _keyword_items(node):
    """Every (key, value) of every object inside ``node``, in document order, depth first."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield k, v
            yield from _keyword_items(v)
    elif isinstance(node, list):
        for v in node:
            yield from _keyword_items(v)


def _formats(schema) -> set:
    return {v for k, v in _keyword_items(schema) if k == "format" and isinstance(v, str)}


# Format spellings the converter documents as not generated (docs/json-schema.md), per format.
def _documented_format_gap(fmt: str, text: str) -> bool:
    import re

    if fmt in ("date-time", "time"):
        return bool(re.search(r"[tz]", text)) or ":60" in text  # lower-case T/Z, leap second
    if fmt == "hostname":  # A-labels (xn--), and the label-count/length shapes not generated
        labels = text.rstrip(".").split(".")
        return any(len(l) > 3 and l[2:4] == "--" for l in labels) or text.endswith(".") or (
            len(labels) > 3 and max(map(len, labels)) > 30) or len(labels) > 8
    if fmt == "email":  # dot-atom only: no quoted local part, no address literal
        return '"' in text or "[" in text
    if fmt == "ipv6":  # no zone, no embedded IPv4
        return "%" in text or "." in text
    if fmt in ("uri", "uri-reference"):  # no IPv6 literal
        return "[" in text
    return False


def _breaks_format(fmt: str, text: str) -> bool:
    """Whether ``text`` is not a ``fmt`` string: jsonschema's checker where it has one, and for
    hostname and URIs (whose checkers need optional packages) characters they never contain."""
    import re

    if fmt == "hostname":  # LDH labels that neither start nor end with a hyphen (RFC 1123)
        labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
        return re.fullmatch(r"[A-Za-z0-9.-]+", text) is None or any(
            not label or label[0] == "-" or label[-1] == "-" for label in labels)
    if fmt == "uri" and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text) is None:
        return True  # a URI has a scheme
    if fmt in ("uri", "uri-reference"):
        return re.search(r'[\s<>"{}|\\^`]', text) is not None
    return not jsonschema.FormatChecker().conforms(text, fmt)


def rejection_reason(schema, instance, make_validator=None, mode: str = "default") -> str:
    """Why a valid ``instance`` of ``schema`` may be left out by a documented generator choice
    (docs/json-schema.md), or ``"other"``: "undeclared properties" (and the other restrictions
    of :func:`restricted`), "types not implied" (:func:`with_implied_types`), "format
    spelling", "format asserted" (a string that breaks a format: the converter asserts formats),
    "number spelling" (an exponent), "nesting depth" (free values nest 3 deep).
    ``make_validator``: schema -> validator (default :func:`validator`)."""
    make_validator = make_validator or validator
    if not make_validator(restricted(schema)).is_valid(instance):
        return "undeclared properties, unanchored pattern, counts"
    if not make_validator(with_implied_types(schema, mode)).is_valid(instance):
        return "types not implied"
    if any(_documented_format_gap(f, text) for f in _formats(schema) for text in _strings(instance)):
        return "format spelling"
    if mode != "lax" and any(_breaks_format(f, text) for f in _formats(schema) for text in _strings(instance)):
        return "format asserted"  # the spec's default reads format as an annotation only
    if any("e" in repr(float(n)) for n in _numbers(instance) if isinstance(n, float)):
        return "number spelling"
    if _depth(instance) > 3:
        return "nesting depth"
    return "other"


def property_order(schema) -> dict:
    """Property name -> rank of its first appearance in the document."""
    order: dict = {}
    for k, v in _keyword_items(schema):
        if k == "properties" and isinstance(v, dict):
            for name in v:
                order.setdefault(name, len(order))
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
