"""JSON Schema -> regex, for ``Compiler.compile_json_schema`` (and ``propertok.ByteDfa``).

``schema_to_regex(schema)`` returns a regex (Rust ``regex-syntax``, full match) whose language is
JSON text of instances of ``schema``. It is pure Python and imports nothing heavy: the Rust
extension calls it and compiles the result.

The guarantee is *soundness*: every string the regex matches parses as JSON and validates
against the schema. The one exception is ``oneOf`` whose branches cannot be told apart (see
below). Where a regex cannot express all the instances, a documented subset is generated; where
it cannot express a useful subset, :class:`UnsupportedSchemaError` names the keyword and its JSON
pointer rather than quietly producing something wrong.

What is generated
    * Objects: the properties of ``properties`` in declared order; required ones always present,
      optional ones may be left out. No other properties are generated, whatever
      ``additionalProperties`` says (as in outlines-core): extra properties are always optional,
      so this is a subset. Required names missing from ``properties`` come after the declared
      ones. ``minProperties`` 1 is supported; other counts must follow from ``required``. An
      object schema *without* ``properties`` is a map: any keys (or those of ``propertyNames``,
      or of a single ``patternProperties`` pattern), values from ``additionalProperties`` (any
      value when it is true or absent), ``minProperties``/``maxProperties`` as counts (keys may
      repeat: JSON parsers keep the last).
    * Arrays: ``items`` (a schema, or a list for draft 4-7 tuples with ``additionalItems``),
      ``prefixItems`` (2020-12), ``minItems``/``maxItems``; ``uniqueItems: true`` only with
      ``maxItems`` <= 1.
    * Strings: ``minLength``/``maxLength`` (counting code points, escapes included), ``pattern``
      (``_ecma_regex``: ECMA-262 syntax translated into JSON-escaped text; an alternative
      anchored at one end only is a prefix/suffix test, otherwise the whole string must match),
      ``format`` in date, time, date-time (RFC 3339: upper-case ``T`` and ``Z``, no leap second),
      uuid, email (dot-atom), uri and uri-reference (RFC 3986, no IPv6 literal), ipv4, ipv6
      (RFC 4291, no zone or embedded IPv4), hostname. ``\\uXXXX``
      escapes are allowed in text; literals (keys, ``enum``, ``const``) are spelled as
      ``json.dumps`` does, their non-ASCII characters raw or ``\\u``-escaped.
    * Numbers and integers: ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``
      (draft-4 boolean form too), exact for decimal bounds; a bounded number is written without
      an exponent (``100``, not ``1e2``); ``-0`` is not an integer spelling. ``multipleOf`` 1 and
      (numbers) 10^-k, i.e. at most k fraction digits.
    * ``enum``/``const`` (values filtered by the sibling keywords), ``type`` lists, ``null``,
      booleans, ``anyOf``. ``oneOf`` excludes from each branch the instances of the others
      where that is expressible (different types or constants, a property whose constants
      differ, branches that differ by ``required``, a single numeric bound), and is otherwise
      read as ``anyOf``: an instance matching two branches may then be generated. ``allOf``
      and ``$ref`` siblings are merged (conflicting values of a keyword raise); ``not`` of a
      type, constants, ``required`` or one numeric bound; ``dependencies``,
      ``dependentRequired`` and ``dependentSchemas`` as "absent, or present with the rest".
    * ``$ref`` to JSON pointers or anchors in the document (``$defs``, ``definitions``, or any
      path), and to subschemas by ``$id``; not to other documents. A reference already expanded
      ``max_recursion_depth`` times on the current path is cut: optional places holding it (an
      optional property, an ``anyOf`` branch, array items beyond ``minItems``) are dropped,
      which only removes instances; if a required place needs it, the schema raises.
    * A schema without ``type`` takes the types its keywords imply (``properties`` -> object
      ...). Free values (``{}``, ``true``) nest up to ``max_recursion_depth`` arrays/objects
      deep, the items and values of free arrays and maps one level less.
    * Counted repetitions are expanded by the regex compiler, so ``maxLength``, ``maxItems``,
      ``maxProperties`` and pattern repetition bounds above ``_json_regex.MAX_COUNT`` (256) are
      lowered to it (shorter strings and arrays, never invalid ones); a lower bound above it raises.
    * ``whitespace`` (a regex, default ``[ ]?``) goes between all structural tokens, so both
      ``json.dumps(x)`` and ``json.dumps(x, separators=(",", ":"))`` output match.

Always ignored (annotations): ``ANNOTATIONS`` below. Unknown keywords raise unless
``strict=False``, which ignores them (JSON Schema treats them as annotations), and unknown
``format`` values likewise. Always raising: ``UNSUPPORTED`` below, and the cases named above
(``uniqueItems``, property counts, several ``patternProperties`` on a map, ``pattern`` together
with ``format``, length bounds that a pattern or format does not imply and whose pattern has more
than one variable part, ``not`` of anything else, ``multipleOf`` other than 1 and 10^-k).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional, Tuple

from . import _json_regex as J
from ._ecma_regex import PatternError, pattern_to_regex
from ._schema_keywords import (
    _TYPE_KEYWORDS,
    InvalidSchemaError,
    UnsupportedSchemaError,
    _bound,
    _count,
    _decimal,
    _dependencies_as_any_of,
    _json_type,
    _literal_ok,
    _literal_values,
    _numbers,
    _same_json,
    _fraction_digits,
)

__all__ = ["InvalidSchemaError", "UnsupportedSchemaError", "schema_to_regex", "ANNOTATIONS", "UNSUPPORTED"]

ANNOTATIONS = frozenset({
    "$schema", "$id", "$comment", "$anchor", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor",
    "title", "description", "examples", "default", "readOnly", "writeOnly", "deprecated",
    "contentEncoding", "contentMediaType", "contentSchema", "definitions", "$defs",
})
SUPPORTED = frozenset({
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "unevaluatedProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "not", "dependencies", "dependentRequired", "dependentSchemas",
})
UNSUPPORTED = frozenset({
    "if", "then", "else", "contains", "minContains", "maxContains", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef",
})
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_DEPENDENCIES = ("dependencies", "dependentRequired", "dependentSchemas")
# A regex this long is refused: the Rust compiler would take too long or hit its limits anyway.
MAX_REGEX_CHARS = 8_000_000


def schema_to_regex(
    schema: Any, *, whitespace: str = r"[ ]?", max_recursion_depth: int = 3, strict: bool = True
) -> str:
    """The regex of JSON text of instances of ``schema`` (a dict, a bool, or JSON text).

    ``whitespace``: regex placed between structural tokens. ``max_recursion_depth``: how many
    times one ``$ref`` may be expanded on a path, and the nesting depth of free-form values.
    ``strict``: raise on unknown keywords and formats (False: ignore them).
    """
    if isinstance(schema, (bytes, bytearray)):
        schema = schema.decode("utf-8")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise InvalidSchemaError(None, "#", f"the schema is not valid JSON: {e}") from None
    if not isinstance(whitespace, str):
        raise TypeError(f"whitespace must be a str (a regex), got {type(whitespace).__name__}")
    if not isinstance(max_recursion_depth, int) or isinstance(max_recursion_depth, bool) or max_recursion_depth < 0:
        raise ValueError(f"max_recursion_depth must be an int >= 0, got {max_recursion_depth!r}")
    atomic = re.fullmatch(r"(?:\[[^\]\\]*\]|[ \t\n\r])[?*+]?", whitespace)  # e.g. "[ ]?": no group needed
    ws = whitespace if not whitespace or atomic else f"(?:{whitespace})"
    conv = _Converter(schema, ws, max_recursion_depth, bool(strict))
    regex = conv.value(schema, "#", ())
    if regex is None:
        if conv.cut_by_recursion:
            raise UnsupportedSchemaError(
                "$ref", conv.cut_by_recursion,
                f"recursion deeper than max_recursion_depth={max_recursion_depth} is required "
                "(raise max_recursion_depth)",
            )
        raise InvalidSchemaError(None, "#", "no JSON value satisfies this schema")
    return regex


def _halving(prefix: List[int], lo: int, hi: int) -> int:
    """The split point in (lo, hi) that best halves the summed lengths."""
    half = (prefix[lo] + prefix[hi]) / 2
    return min(range(lo + 1, hi), key=lambda m: abs(prefix[m] - half))


def _escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class _Converter:
    def __init__(self, root: Any, ws: str, max_depth: int, strict: bool):
        self.root, self.ws, self.max_depth, self.strict = root, ws, max_depth, strict
        self.cut_by_recursion: Optional[str] = None
        self.inexact_one_of = False
        self.pointers: Dict[int, str] = {}
        self.by_id: Dict[str, Tuple[Any, str]] = {}
        self.memo: Dict[Any, Tuple[Any, Optional[str]]] = {}
        self._index(root, "#")

    # -- document index and $ref ------------------------------------------------------------

    def _index(self, node: Any, ptr: str) -> None:
        if isinstance(node, dict):
            self.pointers[id(node)] = ptr
            for key in ("$id", "id", "$anchor"):
                value = node.get(key)
                if isinstance(value, str):
                    self.by_id.setdefault(("#" + value) if key == "$anchor" else value, (node, ptr))
            for k, v in node.items():
                self._index(v, f"{ptr}/{_escape_token(k)}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._index(v, f"{ptr}/{i}")

    def resolve(self, ref: Any, ptr: str) -> Tuple[Any, str]:
        if not isinstance(ref, str):
            raise InvalidSchemaError("$ref", ptr, f"must be a string, got {ref!r}")
        base, _, fragment = ref.partition("#")
        node, node_ptr = self.root, "#"
        if base:
            if base not in self.by_id:
                raise UnsupportedSchemaError("$ref", ptr, f"reference to another document: {ref!r}")
            node, node_ptr = self.by_id[base]
        if fragment and not fragment.startswith("/"):
            if "#" + fragment not in self.by_id:
                raise InvalidSchemaError("$ref", ptr, f"no anchor or id {ref!r} in the document")
            return self.by_id["#" + fragment]
        for token in fragment.split("/")[1:] if fragment else []:
            token = re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), token)
            token = token.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(token)] if isinstance(node, list) else node[token]
            except (KeyError, IndexError, ValueError, TypeError):
                raise InvalidSchemaError("$ref", ptr, f"{ref!r} points to nothing") from None
            node_ptr = f"{node_ptr}/{_escape_token(token)}"
        return node, node_ptr

    # -- flattening: $ref and allOf merged into one dict of known keywords --------------------

    def flatten(self, node: Any, ptr: str, stack: tuple) -> Tuple[Optional[dict], str, tuple]:
        """``(dict, pointer, stack)``: ``node`` with ``$ref`` and ``allOf`` merged in, only
        meaningful keywords kept; ``None`` for ``false``, a cut recursion or a contradiction."""
        if node is True:
            return {}, ptr, stack
        if node is False:
            return None, ptr, stack
        if not isinstance(node, dict):
            raise InvalidSchemaError(None, ptr, f"a schema must be an object or a boolean, got {node!r}")
        ptr = self.pointers.get(id(node), ptr)
        out: Optional[dict] = {}
        for k, v in node.items():
            if k in SUPPORTED:
                if k not in ("$ref", "allOf") + _DEPENDENCIES:
                    out[k] = v
            elif k in UNSUPPORTED:
                raise UnsupportedSchemaError(k, ptr, "this keyword is not supported")
            elif k in ANNOTATIONS or (k == "id" and isinstance(v, str)):
                continue
            elif self.strict:
                raise UnsupportedSchemaError(
                    k, ptr, "unknown keyword (pass strict=False to ignore unknown keywords)")
        main_ptr = ptr
        if "$ref" in node:
            target, target_ptr = self.resolve(node["$ref"], ptr)
            if stack.count(target_ptr) >= self.max_depth:
                self.cut_by_recursion = self.cut_by_recursion or ptr
                return None, ptr, stack
            flat, flat_ptr, stack = self.flatten(target, target_ptr, stack + (target_ptr,))
            if flat is None:
                return None, ptr, stack
            if not out and "allOf" not in node:
                main_ptr = flat_ptr
            out = self.merge(flat, out, ptr)
        for k in _DEPENDENCIES:
            if k in node and out is not None:
                out = self.merge(out, _dependencies_as_any_of(node[k], k, ptr), ptr)
        subs = node.get("allOf", [])
        if "allOf" in node and (not isinstance(subs, list) or not subs):
            raise InvalidSchemaError("allOf", ptr, "must be a non-empty array of schemas")
        for i, sub in enumerate(subs):
            if out is None:
                break
            flat, _, stack = self.flatten(sub, f"{ptr}/allOf/{i}", stack)
            out = None if flat is None else self.merge(out, flat, f"{ptr}/allOf/{i}")
        return out, main_ptr, stack

    def merge(self, a: dict, b: dict, ptr: str) -> Optional[dict]:
        """The conjunction of two flattened schemas as one dict (None: contradictory)."""
        out = dict(a)
        for k, v in b.items():
            if k not in out or _same_json(out[k], v):
                out[k] = v
                continue
            u = out[k]
            if k == "type":  # "number" includes "integer"
                sides = []
                for side in (u, v):
                    names = set(side if isinstance(side, list) else [side])
                    sides.append(names | ({"integer"} if "number" in names else set()))
                both = sides[0] & sides[1]
                if not both:
                    return None
                out[k] = [t for t in TYPES if t in both]
            elif k == "properties":
                props = dict(u)
                for name, sub in v.items():
                    props[name] = {"allOf": [props[name], sub]} if name in props else sub
                out[k] = props
            elif k == "required":
                out[k] = list(u) + [n for n in v if n not in u]
            elif k in ("minimum", "minLength", "minItems", "minProperties") and _numbers(u, v):
                out[k] = max(u, v)
            elif k in ("maximum", "maxLength", "maxItems", "maxProperties") and _numbers(u, v):
                out[k] = min(u, v)
            elif k == "exclusiveMinimum" and _numbers(u, v):
                out[k] = max(u, v)
            elif k == "exclusiveMaximum" and _numbers(u, v):
                out[k] = min(u, v)
            elif k == "enum":
                out[k] = [x for x in u if any(_same_json(x, y) for y in v)]
            elif k == "const":
                return None
            elif k in ("anyOf", "oneOf"):
                out[k] = [{"allOf": [x, y]} for x in u for y in v]
            elif k == "not":
                out[k] = {"anyOf": [u, v]}
            elif k in ("items", "additionalItems", "propertyNames", "unevaluatedProperties", "additionalProperties"):
                out[k] = False if False in (u, v) else v if u is True else u if v is True else {"allOf": [u, v]}
            else:
                raise UnsupportedSchemaError(k, ptr, "cannot combine two different values of this keyword (allOf/$ref)")
        return out

    # -- values ------------------------------------------------------------------------------

    def value(self, node: Any, ptr: str, stack: tuple) -> Optional[str]:
        key = (id(node), ptr, stack)
        if key in self.memo:
            return self.memo[key][1]
        flat, fptr, stack = self.flatten(node, ptr, stack)
        result = None if flat is None else self.value_flat(flat, fptr, stack)
        if result is not None and len(result) > MAX_REGEX_CHARS:
            raise UnsupportedSchemaError(None, fptr, f"the regex would be longer than {MAX_REGEX_CHARS} characters")
        self.memo[key] = (node, result)  # keep node alive: its id is part of the key
        return result

    def value_flat(self, flat: dict, ptr: str, stack: tuple) -> Optional[str]:
        for key in ("anyOf", "oneOf"):
            if key in flat:
                branches = flat[key]
                if not isinstance(branches, list) or not branches:
                    raise InvalidSchemaError(key, ptr, "must be a non-empty array of schemas")
                base = {k: v for k, v in flat.items() if k != key}
                flats = [self.flatten(b, f"{ptr}/{key}/{i}", stack) for i, b in enumerate(branches)]
                options = []
                for i, (bflat, bptr, bstack) in enumerate(flats):
                    merged = None if bflat is None else self.merge(base, bflat, f"{ptr}/{key}/{i}")
                    for j, (other, _, _) in enumerate(flats):
                        if key == "oneOf" and merged is not None and j != i:
                            merged = self.exclude(merged, other, stack, f"{ptr}/{key}/{j}", exact=False)
                    if merged is not None:
                        options.append(self.value_flat(merged, bptr if not base else ptr, bstack))
                options = [o for o in options if o is not None]
                return J.alternation(options) if options else None
        if "not" in flat:
            rest = {k: v for k, v in flat.items() if k != "not"}
            negated = self.flatten(flat["not"], f"{ptr}/not", stack)[0]
            reduced = self.exclude(rest, negated, stack, f"{ptr}/not", exact=True)
            return None if reduced is None else self.value_flat(reduced, ptr, stack)
        if "enum" in flat or "const" in flat:
            return self.literals(flat, ptr)
        types = self.types(flat, ptr)
        if types is None:
            return self.any_value(self.max_depth)
        handlers = {"null": lambda *a: J.NULL, "boolean": lambda *a: J.BOOLEAN, "integer": self.number,
                    "number": self.number, "string": self.string, "array": self.array, "object": self.object}
        options = [handlers[t](flat, ptr, stack, t) for t in types]
        options = [o for o in options if o is not None]
        return J.alternation(options) if options else None

    def exclude(self, a: dict, b: Optional[dict], stack: tuple, ptr: str, exact: bool) -> Optional[dict]:
        """``a`` without the instances of ``b`` (flattened), for ``not`` and ``oneOf``, where
        a regex can say it: disjoint types or constants, removing types or constants, a single
        numeric bound, a ``b`` about objects only (non-objects all satisfy it: a keeps its
        objects, which may then be disjoint from b), and a ``b`` that only requires properties
        (then one of them is absent). None when nothing is left. Otherwise raise (``exact``,
        for ``not``) or return ``a`` unchanged and
        set ``self.inexact_one_of`` (``oneOf`` approximated by ``anyOf``)."""
        if b is None:  # false: excludes nothing
            return a
        if not b:  # true: excludes everything
            return None
        if set(b) == {"anyOf"} and isinstance(b["anyOf"], list):
            for branch in b["anyOf"]:
                if a is not None:
                    a = self.exclude(a, self.flatten(branch, ptr, stack)[0], stack, ptr, exact)
            return a
        if self.disjoint(a, b, stack):
            return a
        va, vb = _literal_values(a), _literal_values(b)
        if va is not None and (vb is not None or set(b) == {"type"}):
            kept = [v for v in va if not (any(_same_json(v, w) for w in vb) if vb is not None
                                          else _json_type(v) in self.type_set(b, None))]
            return {**{k: v for k, v in a.items() if k != "const"}, "enum": kept} if kept else None
        if set(b) == {"type"} and va is None:
            drop = self.type_set(b, None)
            mine = self.types(a, ptr) or list(TYPES)
            if not ("number" in mine and "integer" in drop and "number" not in drop):
                kept = [t for t in mine if t not in drop]
                return {**a, "type": kept} if kept else None
        if va is None and set(b) <= set(_TYPE_KEYWORDS["object"]):
            # b constrains objects only, so every non-object satisfies it: keep a's objects
            if "object" not in (self.types(a, ptr) or TYPES):
                return None
            a = {**a, "type": ["object"]}
            if self.disjoint(a, b, stack):
                return a
        if set(b) == {"required"} and isinstance(b["required"], list) and va is None and a.get("properties"):
            # not all of them present: one of the missing ones absent (never generated)
            missing = [p for p in b["required"] if p not in a.get("required", [])]
            if not missing:
                return None
            if any(p not in a["properties"] for p in missing):
                return a  # that one is never generated anyway: no undeclared properties are
            return self.merge(a, {"anyOf": [{"properties": {p: False}} for p in missing]}, ptr)
        bounds = {"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
                  "exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}
        if len(b) == 1 and next(iter(b)) in bounds and _numbers(next(iter(b.values()))) and va is None:
            # not (x <= M) is x > M, for numbers only (other types satisfy any bound)
            (key, bound), = b.items()
            numeric = [t for t in (self.types(a, ptr) or TYPES) if t in ("integer", "number")]
            return self.merge(a, {"type": numeric, bounds[key]: bound}, ptr) if numeric else None
        if exact:
            raise UnsupportedSchemaError("not", ptr, f"cannot exclude {json.dumps(b)[:200]}")
        self.inexact_one_of = True
        return a

    def disjoint(self, a: dict, b: dict, stack: tuple) -> bool:
        """True when no instance generated from ``a`` satisfies ``b`` (checked: types,
        enum/const values, and, when one side admits only objects, a property required by one
        side whose enum/const values differ between the two)."""
        va, vb = _literal_values(a), _literal_values(b)
        if va is not None and vb is not None:
            return not any(_same_json(x, y) for x in va for y in vb)
        ta, tb = self.type_set(a, va, generated=True), self.type_set(b, vb)
        if not ta & tb:
            return True
        if not (ta <= {"object"} or tb <= {"object"}):
            return False  # the property test below says nothing about non-objects
        pa, pb = a.get("properties", {}), b.get("properties", {})
        for name in set(a.get("required", [])) | set(b.get("required", [])):
            if isinstance(pa, dict) and isinstance(pb, dict) and name in pa and name in pb:
                fa = self.flatten(pa[name], "#", stack)[0]
                fb = self.flatten(pb[name], "#", stack)[0]
                la = None if fa is None else _literal_values(fa)
                lb = None if fb is None else _literal_values(fb)
                if la is not None and lb is not None and not any(_same_json(x, y) for x in la for y in lb):
                    return True
        return False

    def type_set(self, flat: dict, values: Optional[list], generated: bool = False) -> set:
        """The JSON types of the instances of ``flat``: with ``generated``, of those this
        converter generates (types implied by keywords when ``type`` is absent); otherwise of
        all that satisfy it (every type when ``type`` is absent: ``properties`` alone says
        nothing about a string)."""
        if values is not None:
            kinds = {_json_type(v) for v in values}
            return kinds | ({"number"} if "integer" in kinds else set())
        t = flat.get("type")
        names = (self.types(flat, "#") if generated or t is not None else None) or list(TYPES)
        kinds = set(names)
        return kinds | ({"integer"} if "number" in kinds else set()) | ({"number"} if "integer" in kinds else set())

    def types(self, flat: dict, ptr: str) -> Optional[List[str]]:
        """The types to generate, in a fixed order; None for any value."""
        t = flat.get("type")
        if t is None:
            implied = [k for k, kws in _TYPE_KEYWORDS.items() if any(kw in flat for kw in kws)]
            return [x for x in TYPES if x in implied] or None
        names = t if isinstance(t, list) else [t]
        for name in names:
            if name not in TYPES:
                raise InvalidSchemaError("type", ptr, f"unknown type {name!r}")
        if "number" in names:
            names = [n for n in names if n != "integer"]  # numbers include integers
        return [x for x in TYPES if x in names]

    def any_value(self, depth: int) -> str:
        key = ("any", depth)
        if key not in self.memo:
            options = [J.string(), J.NUMBER, J.BOOLEAN, J.NULL]
            if depth > 0:
                inner = self.any_value(depth - 1)
                options.append(self.map_regex(J.string(), inner, 0, None))
                options.append(self.sequence([], inner, 0, None))
            self.memo[key] = (None, J.alternation(options))
        return self.memo[key][1]

    def literals(self, flat: dict, ptr: str) -> Optional[str]:
        values = flat["enum"] if "enum" in flat else [flat["const"]]
        if not isinstance(values, list):
            raise InvalidSchemaError("enum", ptr, "must be an array")
        if "const" in flat:
            values = [v for v in values if _same_json(v, flat["const"])]
        kept = [v for v in values if _literal_ok(v, flat, ptr, self.strict)]
        return J.alternation([J.literal(v, self.ws) for v in kept]) if kept else None

    def number(self, s: dict, ptr: str, stack: tuple, kind: str) -> Optional[str]:
        lo, lo_x = _bound(s, "minimum", "exclusiveMinimum", ptr)
        hi, hi_x = _bound(s, "maximum", "exclusiveMaximum", ptr)
        frac: Optional[int] = 0 if kind == "integer" else None
        if "multipleOf" in s:
            frac = _fraction_digits(s["multipleOf"], kind, ptr, frac)
        if frac == 0:  # integers: exact integer bounds
            ilo = None if lo is None else (math.floor(lo) + 1 if lo_x else math.ceil(lo))
            ihi = None if hi is None else (math.ceil(hi) - 1 if hi_x else math.floor(hi))
            return J.integer_range(ilo, ihi)
        return J.number_range(_decimal(lo), lo_x, _decimal(hi), hi_x, frac)

    def string(self, s: dict, ptr: str, stack: tuple, kind: str) -> Optional[str]:
        lo = _count(s, "minLength", ptr, 0)
        hi = _count(s, "maxLength", ptr, None)
        if hi is not None and hi < lo:
            return None
        fmt, pattern = s.get("format"), s.get("pattern")
        if fmt is not None and fmt not in J.FORMATS:
            if self.strict:
                raise UnsupportedSchemaError(
                    "format", ptr, f"unknown format {fmt!r} (supported: {', '.join(J.FORMATS)}; "
                    "pass strict=False to ignore it)")
            fmt = None
        if fmt is not None and pattern is not None:
            raise UnsupportedSchemaError("pattern", ptr, f"pattern together with format {fmt!r}")
        if fmt is not None:
            if not J.length_bounds(lo, hi, J.FORMAT_LENGTHS[fmt]):
                raise UnsupportedSchemaError(
                    "maxLength" if hi is not None else "minLength", ptr,
                    f"length bounds {lo}..{hi} with format {fmt!r} are not supported")
            return '"' + J.FORMATS[fmt] + '"'
        if pattern is not None:
            if not isinstance(pattern, str):
                raise InvalidSchemaError("pattern", ptr, "must be a string")
            try:
                return '"' + pattern_to_regex(pattern, lo, hi) + '"'
            except PatternError as e:
                raise UnsupportedSchemaError("pattern", ptr, str(e)) from None
        if lo > J.MAX_COUNT:
            raise UnsupportedSchemaError("minLength", ptr, f"more than {J.MAX_COUNT} characters")
        return J.string(lo, hi)

    def array(self, s: dict, ptr: str, stack: tuple, kind: str) -> Optional[str]:
        lo = _count(s, "minItems", ptr, 0)
        hi = _count(s, "maxItems", ptr, None)
        if s.get("uniqueItems") is True and (hi is None or hi > 1):
            raise UnsupportedSchemaError("uniqueItems", ptr, "uniqueItems: true cannot be expressed by a regex")
        items = s.get("items", True)
        if "prefixItems" in s:
            prefix, prefix_key, rest, rest_key = s["prefixItems"], "prefixItems", items, "items"
        elif isinstance(items, list):
            prefix, prefix_key, rest, rest_key = items, "items", s.get("additionalItems", True), "additionalItems"
        else:
            prefix, prefix_key, rest, rest_key = [], None, items, "items"
        if not isinstance(prefix, list):
            raise InvalidSchemaError(prefix_key, ptr, "must be an array of schemas")
        heads = []
        for i, sub in enumerate(prefix):
            head = self.value(sub, f"{ptr}/{prefix_key}/{i}", stack)
            if head is None:  # no value fits here: the array ends before this position
                hi = i if hi is None else min(hi, i)
                break
            heads.append(head)
        # items absent or true: any value, nested one level less than a free value (as in a map)
        tail = self.any_value(self.max_depth - 1) if rest is True else self.value(rest, f"{ptr}/{rest_key}", stack)
        if tail is None:
            hi = len(heads) if hi is None else min(hi, len(heads))
        if hi is not None and lo > hi:
            return None
        if lo > J.MAX_COUNT:
            raise UnsupportedSchemaError("minItems", ptr, f"more than {J.MAX_COUNT} items")
        return self.sequence(heads[: hi if hi is not None else len(heads)], tail, lo, hi)

    def sequence(self, heads: List[str], tail: Optional[str], lo: int, hi: Optional[int]) -> str:
        """``[h0, h1, ..., t, t, ...]`` with lo..hi items (``hi`` None: unbounded)."""
        ws, sep = self.ws, f"{self.ws},{self.ws}"
        if hi is not None:
            hi = min(hi, max(lo, J.MAX_COUNT))
        n = len(heads)
        more_lo = max(lo - n, 0)
        more_hi = None if hi is None else hi - n
        body = "" if tail is None or more_hi == 0 else J.repeat(f"(?:{sep}{tail})", more_lo, more_hi)
        if n == 0:
            if tail is None or hi == 0:
                return rf"\[{ws}\]"
            first = tail + J.repeat(f"(?:{sep}{tail})", max(lo - 1, 0), None if hi is None else hi - 1)
            return rf"\[{ws}{first}{ws}\]" if lo >= 1 else rf"\[{ws}(?:{first}{ws})?\]"
        for k in range(n - 1, -1, -1):  # nest from the last head outwards
            body = (sep if k else "") + heads[k] + body
            if k >= lo and k > 0:
                body = f"(?:{body})?"
        return rf"\[{ws}{body}{ws}\]" if lo >= 1 else rf"\[{ws}(?:{body}{ws})?\]"

    def object(self, s: dict, ptr: str, stack: tuple, kind: str) -> Optional[str]:
        props = s.get("properties", {})
        required = s.get("required", [])
        if not isinstance(props, dict):
            raise InvalidSchemaError("properties", ptr, "must be an object")
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise UnsupportedSchemaError(
                "required", ptr, "must be an array of names (draft-3 booleans are not supported)")
        # unevaluatedProperties acts as additionalProperties here (no other applicator adds any)
        extra = s.get("additionalProperties", s.get("unevaluatedProperties", True))
        patterns = s.get("patternProperties", {})
        if not isinstance(patterns, dict):
            raise InvalidSchemaError("patternProperties", ptr, "must be an object")
        min_p = _count(s, "minProperties", ptr, 0)
        max_p = _count(s, "maxProperties", ptr, None)
        if not props and not required:
            return self.map_object(s, ptr, stack, extra, patterns, min_p, max_p)
        if "propertyNames" in s:
            raise UnsupportedSchemaError("propertyNames", ptr, "propertyNames with properties is not supported")
        names = list(props) + [r for r in required if r not in props]
        entries = []
        for name in names:
            if name in props:
                sub, sub_ptr = props[name], f"{ptr}/properties/{_escape_token(name)}"
            else:
                sub, sub_ptr = extra, f"{ptr}/additionalProperties"
            for pat, pat_schema in patterns.items():
                try:
                    hit = re.search(pat, name) is not None
                except re.error as e:
                    raise UnsupportedSchemaError("patternProperties", ptr, f"pattern {pat!r}: {e}") from None
                if hit:
                    sub = {"allOf": [sub, pat_schema]}
            regex = self.value(sub, sub_ptr, stack)
            if regex is None and name in required:
                return None
            if regex is not None:
                key = '"' + J.json_string_content(name) + '"'
                entries.append((f"{key}{self.ws}:{self.ws}{regex}", name in required))
        n_required = sum(1 for _, r in entries if r)
        if min_p > n_required and not (min_p == 1 and entries):
            raise UnsupportedSchemaError(
                "minProperties", ptr, "minProperties above the number of required properties (other than 1)")
        if max_p is not None and max_p < len(entries):
            if max_p < n_required:
                return None
            raise UnsupportedSchemaError("maxProperties", ptr, "maxProperties below the number of properties")
        return self.object_regex(entries, nonempty=min_p >= 1)

    def object_regex(self, entries: List[Tuple[str, bool]], nonempty: bool = False) -> str:
        """Entries in order, required ones present, optional ones optional, commas right.

        ``rest(i)`` is the entries from i on, each after a comma. With a required entry r, the
        optional entries before it carry a trailing comma instead: ``(e0 ,)? (e1 ,)? er rest(r+1)``,
        linear in size. With none, see :meth:`nonempty_subsets`.
        """
        ws, sep = self.ws, f"{self.ws},{self.ws}"
        rest = [""] * (len(entries) + 1)
        for i in range(len(entries) - 1, -1, -1):
            entry, req = entries[i]
            rest[i] = (f"{sep}{entry}" if req else f"(?:{sep}{entry})?") + rest[i + 1]
        if not entries:
            return rf"\{{{ws}\}}"
        first_required = next((i for i, (_, req) in enumerate(entries) if req), None)
        if first_required is not None:
            body = "".join(f"(?:{entry}{sep})?" for entry, _ in entries[:first_required])
            body += entries[first_required][0] + rest[first_required + 1]
            return rf"\{{{ws}{body}{ws}\}}"
        body = self.nonempty_subsets([entry for entry, _ in entries])
        if nonempty:
            return rf"\{{{ws}{body}{ws}\}}"
        return rf"\{{{ws}(?:{body}{ws})?\}}"

    def nonempty_subsets(self, entries: List[str]) -> str:
        """Non-empty ordered subsets of ``entries``, comma-separated, in O(n log n) size.

        The usual regex, an alternation over the first present entry, copies entry i i+1 times,
        and nested all-optional objects multiply those copies level by level into regexes of
        millions of characters. Two decompositions of a range do better:

        * split at m: some entry of the left part is present (a non-empty subset of it, then
          any subset of the right part, each entry after a comma), or none is (a non-empty
          subset of the right part): right-part entries are copied twice, left ones once;
        * pivot at p: ``((L ,)? p | L) R* | R+`` with L a non-empty subset of the entries
          before p, ``R*`` any subset after p (each after a comma), ``R+`` a non-empty one:
          the pivot is written once, which suits one big nested object among small ones.

        Dynamic programming over ranges picks the shortest combination (up to 48 entries;
        beyond, the split that halves the length, or the longest entry as pivot when it
        outweighs the rest).
        """
        sep = f"{self.ws},{self.ws}"
        n = len(entries)
        cost = [len(e) + len(sep) + 5 for e in entries]  # an entry as "(?:,e)?"
        prefix = [0]
        for c in cost:
            prefix.append(prefix[-1] + c)
        best: Dict[Tuple[int, int], Tuple[int, str, int]] = {}

        def solve(lo: int, hi: int) -> Tuple[int, str, int]:  # (size, "split"|"pivot", index)
            if hi - lo == 1:
                return cost[lo], "one", lo
            if (lo, hi) not in best:
                options = []
                for m in (range(lo + 1, hi) if n <= 48 else [_halving(prefix, lo, hi)]):
                    options.append((solve(lo, m)[0] + solve(m, hi)[0] + prefix[hi] - prefix[m] + 8, "split", m))
                pivots = range(lo, hi) if n <= 48 else [max(range(lo, hi), key=lambda i: cost[i])]
                for q in pivots:
                    size = cost[q] + prefix[hi] - prefix[q + 1] + 16
                    size += 2 * solve(lo, q)[0] if q > lo else 0
                    size += solve(q + 1, hi)[0] if q + 1 < hi else 0
                    options.append((size, "pivot", q))
                best[(lo, hi)] = min(options)
            return best[(lo, hi)]

        def build(lo: int, hi: int) -> str:
            _, how, m = solve(lo, hi)
            if how == "one":
                return entries[lo]
            if how == "split":
                tail = "".join(f"(?:{sep}{e})?" for e in entries[m:hi])
                return f"(?:{build(lo, m)}{tail}|{build(m, hi)})"
            tail = "".join(f"(?:{sep}{e})?" for e in entries[m + 1 : hi])
            head = entries[m]
            if m > lo:
                left = build(lo, m)
                head = f"(?:(?:{left}{sep})?{head}|{left})"
            return f"(?:{head}{tail}|{build(m + 1, hi)})" if m + 1 < hi else f"{head}{tail}"

        return build(0, n)

    def map_object(self, s, ptr, stack, extra, patterns, min_p, max_p) -> Optional[str]:
        key_regex, value_regex = J.string(), None
        if patterns:
            if len(patterns) > 1 or extra not in (True, False):
                raise UnsupportedSchemaError(
                    "patternProperties", ptr,
                    "only one pattern, with additionalProperties absent or false, is supported")
            (pat, sub), = patterns.items()
            try:
                key_regex = '"' + pattern_to_regex(pat) + '"'
            except PatternError as e:
                raise UnsupportedSchemaError("patternProperties", ptr, str(e)) from None
            value_regex = self.value(sub, f"{ptr}/patternProperties/{_escape_token(pat)}", stack)
        elif extra is not False:
            value_regex = self.value(extra, f"{ptr}/additionalProperties", stack) if extra is not True \
                else self.any_value(self.max_depth - 1)
        if "propertyNames" in s:
            names = self.value(s["propertyNames"], f"{ptr}/propertyNames", stack)
            if patterns or names is None:
                raise UnsupportedSchemaError(
                    "propertyNames", ptr,
                    "propertyNames must be a satisfiable string schema, without patternProperties")
            key_regex = names
        if value_regex is None:
            return None if min_p > 0 else rf"\{{{self.ws}\}}"
        if max_p is not None and max_p < min_p:
            return None
        return self.map_regex(key_regex, value_regex, min_p, max_p)

    def map_regex(self, key: str, value: str, lo: int, hi: Optional[int]) -> str:
        ws, sep = self.ws, f"{self.ws},{self.ws}"
        entry = f"{key}{ws}:{ws}{value}"
        if hi == 0:
            return rf"\{{{ws}\}}"
        lo, hi = min(lo, J.MAX_COUNT), None if hi is None else min(hi, J.MAX_COUNT)
        body = entry + J.repeat(f"(?:{sep}{entry})", max(lo - 1, 0), None if hi is None else hi - 1)
        return rf"\{{{ws}{body}{ws}\}}" if lo >= 1 else rf"\{{{ws}(?:{body}{ws})?\}}"
