"""JSON Schema -> regex, for ``Compiler.compile_json_schema`` (and ``propertok.ByteDfa``).

``schema_to_regex(schema)`` returns a regex (Rust ``regex-syntax``, full match) whose language is
JSON text of instances of ``schema``. The Rust extension calls it and compiles the result. A
subset of schemas (no ``not``, ``if``, overlapping ``oneOf``, ...) is converted by a Rust port of this
module, ``rust/src/json_schema``, whose output (rules, and the unknown keywords it ignores) is
this module's byte for byte and ~5x faster; everything else, and every error, comes from the
Python code here.

The guarantee is *soundness*: every string the regex matches parses as JSON and validates
against the schema (in lax mode, ``strict=False``, except for unknown formats and ``oneOf``
read as ``anyOf``). Where a regex cannot express all the instances, a documented subset is
generated; where it cannot express a useful subset, :class:`UnsupportedSchemaError` names the
keyword and its JSON pointer rather than quietly producing something wrong. Checked on the
official JSON Schema Test Suite (tests/json_schema/test_json_schema_suite.py); the modes and
the way keywords combine are in docs/json-schema.md.

What is generated
    * Objects: the properties of ``properties`` in declared order; required ones always present,
      optional ones may be left out. No other properties are generated, whatever
      ``additionalProperties`` says (as in outlines-core): extra properties are always optional,
      so this is a subset. Required names missing from ``properties`` come after the declared
      ones. ``minProperties`` 1 is supported; other counts must follow from ``required``. An
      object schema *without* ``properties`` is a map: any keys (or those of ``propertyNames``),
      values from ``additionalProperties`` (any value when it is true or absent); with
      ``patternProperties``, keys matching one of its patterns only, each value satisfying the
      schemas of all the patterns (a key may match several); ``minProperties``/``maxProperties`` as counts (keys may
      repeat: JSON parsers keep the last).
    * Arrays: ``items`` (a schema, or a list for draft 4-7 tuples with ``additionalItems``),
      ``prefixItems`` (2020-12), ``minItems``/``maxItems``; ``uniqueItems: true`` with
      ``maxItems`` <= 1 or over finite item domains (every array of distinct values spelled
      out); ``contains`` with ``minContains``/``maxContains`` (no ``prefixItems``/``maxItems``);
      ``unevaluatedItems`` as ``items`` once the schema's in-place applicators are merged.
    * Strings: ``minLength``/``maxLength`` (counting code points, escapes included), ``pattern``
      (``_ecma_regex``: ECMA-262 syntax translated into JSON-escaped text; an alternative
      anchored at one end only is a prefix/suffix test, otherwise the whole string must match),
      ``format`` in date, time, date-time (RFC 3339: upper-case ``T`` and ``Z``, no leap second),
      uuid, email (dot-atom), uri and uri-reference (RFC 3986, no IPv6 literal), ipv4, ipv6
      (RFC 4291, no zone or embedded IPv4), hostname (LDH labels, none with ``--`` in its 3rd
      and 4th characters, so no ``xn--`` A-labels; at most 253 characters). ``\\uXXXX``
      escapes are allowed in text; literals (keys, ``enum``, ``const``) are spelled as
      ``json.dumps`` does, their non-ASCII characters raw or ``\\u``-escaped.
    * Numbers and integers: ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``
      (draft-4 boolean form too), exact for decimal bounds; a bounded number is written without
      an exponent (``100``, not ``1e2``); ``-0`` is not an integer spelling. ``multipleOf`` 1 and
      (numbers) 10^-k, i.e. at most k fraction digits; any other decimal through a divisibility
      automaton (``_multiple_of``: multiples within the bounds, exact for the spellings it writes;
      refused past its size limits, e.g. 13 or 0.123456789). ``allOf`` of two ``multipleOf`` is
      their least common multiple.
    * ``enum``/``const`` (values filtered by the sibling keywords), ``type`` lists, ``null``,
      booleans, ``anyOf``. ``oneOf`` excludes from each branch the instances of the others
      where that is expressible (as ``not`` below), and otherwise raises (lax mode reads it as
      ``anyOf``: an instance matching two branches may then be generated). ``allOf`` and
      ``$ref`` siblings are merged (conflicting values of a keyword raise; each side's
      ``additionalProperties`` and ``items`` apply to the names and positions the other side
      declares). ``not`` splits its schema into independent keywords (not (b1 and b2) is (not
      b1) or (not b2)) and negates each: a type, constants (numbers by the intervals between
      them; strings, arrays and objects only where the schema already rules them out), ``not``,
      ``required``, ``properties`` (some property present and failing), ``prefixItems`` (some
      position present and failing), ``items`` (via ``contains``), ``additionalProperties``
      alone, a bound (``minimum`` ... ``maxProperties``);
      ``if``/``then``/``else`` as (if and then) | (not if, and else); ``dependencies``,
      ``dependentRequired`` and ``dependentSchemas`` as "absent, or present with the rest";
      ``unevaluatedProperties`` as ``additionalProperties`` once the schema's in-place
      applicators are merged (each ``anyOf`` branch on its own).
    * ``$ref`` to JSON pointers or anchors in the document (``$defs``, ``definitions``, or any
      path), and to subschemas by ``$id``, resolved against base URIs (``urn:`` ones too); to
      other documents only when they are given (``resources={uri: schema}``: nothing is
      fetched, an absent one raises naming its URI). A reference already expanded
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

Always ignored (annotations): ``ANNOTATIONS`` below. Keywords no draft defines (not in
``SPEC_KEYWORDS``) are annotations too: ignored and reported (:class:`IgnoredKeywordsWarning`,
:func:`ignored_keywords`) by default, refused with ``strict=True``. Unknown ``format`` values are
refused where strings are generated (an untyped schema leaves strings out) unless
``strict=False``. Always raising: ``UNSUPPORTED`` below, and the cases named above
(``uniqueItems`` over infinite domains, property counts,
``pattern`` together with ``format``, length bounds that a pattern or format does not imply and
whose pattern has more than one variable part, ``not`` and ``if`` of anything else
(``pattern``, ``format``, a string constant on free strings, ``contains``, ``uniqueItems``),
``multipleOf`` whose automaton passes its size limits).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import urldefrag, urljoin, urlsplit

from . import _json_regex as J
from . import _multiple_of
from ._ecma_regex import PatternError, pattern_to_regex
from ._schema_keywords import (
    _python_search,
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
    _multiple,
    _json_key,
)

__all__ = [
    "InvalidSchemaError", "UnsupportedSchemaError", "IgnoredKeywordsWarning", "schema_to_regex",
    "ignored_keywords", "ANNOTATIONS", "UNSUPPORTED", "SPEC_KEYWORDS",
]

ANNOTATIONS = frozenset({
    "$schema", "$id", "$comment", "$anchor", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor",
    "title", "description", "examples", "default", "readOnly", "writeOnly", "deprecated",
    "contentEncoding", "contentMediaType", "contentSchema", "definitions", "$defs",
})
SUPPORTED = frozenset({
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "if", "then", "else",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "unevaluatedProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "not", "dependencies", "dependentRequired", "dependentSchemas",
})
# Spec keywords (drafts 3 to 2020-12) that constrain values and are never enforced: refused by name.
UNSUPPORTED = frozenset({"$dynamicRef", "$recursiveRef", "disallow", "extends", "divisibleBy"})
# Every keyword a JSON Schema draft defines. Others are unknown: annotations per the spec,
# ignored and reported by default, refused with strict=True.
SPEC_KEYWORDS = ANNOTATIONS | SUPPORTED | UNSUPPORTED | {"id"}
# Keywords that apply to every type; every other SUPPORTED keyword is in _TYPE_KEYWORDS, so a
# schema without ``type`` never generates a type some keyword of it constrains unchecked.
GENERIC = frozenset({"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "not",
                     "if", "then", "else"})
assert SUPPORTED <= GENERIC | {k for kws in _TYPE_KEYWORDS.values() for k in kws}
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_DEPENDENCIES = ("dependencies", "dependentRequired", "dependentSchemas")
# Read by flatten itself (rewritten into other keywords), not copied into the flattened dict.
_STRUCTURAL = frozenset(("$ref", "allOf", "if", "then", "else", "items", "additionalItems",
                         "prefixItems", "unevaluatedProperties", "unevaluatedItems") + _DEPENDENCIES)
# A regex this long is refused: the Rust compiler would take too long or hit its limits anyway.
# Checked on each subschema's regex, and before an object or an alternation is put together
# from parts that are already longer in total.
MAX_REGEX_CHARS = 8_000_000
# Alternatives one conjunction may spell out: ``allOf`` (and ``$ref`` siblings, ``if``/``then``/
# ``else``) of several ``anyOf``/``oneOf`` multiplies their branches, and ``not``/``oneOf``
# exclusion turns each excluded schema into a union of its negated keywords, multiplied over the
# schemas excluded. Both grow exponentially with the schema (JSONSchemaStore/cloudify: 125
# ``if``/``then`` in one ``allOf``, 2^125 branches), so past this many the schema is refused.
# The most any JSONSchemaBench schema that converts needs is 256 (JsonSchemaStore/minecraft-recipe).
MAX_BRANCHES = 4096
# Seconds one conversion may take (checked at each subschema it expands): past them the schema is
# refused. Every JSONSchemaBench schema that converts takes under 1.2 s on 2 cores; two took 10-53 s
# (Github_medium/o35868, JsonSchemaStore/yippee-ki-json_config_schema), longer than serving
# engines wait for a grammar.
MAX_CONVERT_SECONDS = 10.0
# uniqueItems over a finite set of values: at most this many arrays are spelled out.
MAX_UNIQUE_ARRAYS = 4096
_DEFAULT_BASE = "https://propertok.invalid/schema.json"


class IgnoredKeywordsWarning(UserWarning):
    """Unknown keywords (not defined by any JSON Schema draft) were ignored, as the spec says
    annotations are; ``.ignored`` lists ``(keyword, pointer)``. With ``strict=False`` unknown
    ``format`` values are listed too (as ``format: <name>``)."""

    __module__ = "propertok.json_schema"

    def __init__(self, ignored: List[Tuple[str, str]]):
        self.ignored = ignored
        shown = ", ".join(f"{k!r} at {p}" for k, p in ignored[:8])
        more = f" and {len(ignored) - 8} more" if len(ignored) > 8 else ""
        super().__init__(f"ignored unknown keywords (annotations): {shown}{more}")


def _mode(strict: Optional[bool]) -> str:
    return "default" if strict is None else "strict" if strict else "lax"


def schema_to_regex(
    schema: Any, *, whitespace: str = r"[ ]?", max_recursion_depth: int = 3, strict: Optional[bool] = None,
    resources: Optional[Mapping[str, Any]] = None,
) -> str:
    """The regex of JSON text of instances of ``schema`` (a dict, a bool, or JSON text).

    ``whitespace``: regex placed between structural tokens. ``max_recursion_depth``: how many
    times one ``$ref`` may be expanded on a path, and the nesting depth of free-form values.
    ``strict``: ``None`` (default) ignores keywords no JSON Schema draft defines and reports them
    in an :class:`IgnoredKeywordsWarning`; ``True`` raises on them; ``False`` (lax) also ignores
    unknown ``format`` values and reads an ambiguous ``oneOf`` as ``anyOf`` (both can accept
    invalid instances). Spec keywords that cannot be enforced always raise.
    ``resources``: other schema documents that ``$ref`` may point to, ``{absolute URI: schema}``
    (a schema as above: dict, bool or JSON text). A reference resolves against the base URIs
    and ``$id`` s of ``schema`` and of these documents; nothing is ever fetched, and a reference
    to a document that is not here raises :class:`UnsupportedSchemaError` naming its URI.
    """
    converted = None
    if type(max_recursion_depth) is int and max_recursion_depth >= 1:
        converted = _rust_rules(schema, whitespace, strict, resources)
    # One rule: no recursion and no free value, so no depth to unroll to.
    if converted is not None and len(converted[0]) == 1:
        regex, ignored = converted[0][0][1], converted[1]
    else:
        regex, ignored = _convert(schema, whitespace, max_recursion_depth, strict, resources)
    if ignored:
        warnings.warn(IgnoredKeywordsWarning(ignored), stacklevel=2)
    return regex


def schema_to_rules(
    schema: Any, *, whitespace: str = r"[ ]?", strict: Optional[bool] = None,
    resources: Optional[Mapping[str, Any]] = None,
) -> List[Tuple[str, str]]:
    """The instances of ``schema`` as the rules of a pushdown automaton, with no bound on
    recursion: ``[(name, regex), ...]``, the first the whole value. A ``$ref`` that recurses
    (its target is being expanded already) and a free value (``{}``, ``true``, no ``type``) are
    *calls* to a rule of their own, written as marker bytes (``(?-u:\\xFE..)``) that no JSON
    text contains; ``Compiler.compile_json_schema`` compiles them (lazy, by default)
    (``rust/src/lazy/pushdown.rs``). A schema without recursion or free values is one rule, the
    regex of :func:`schema_to_regex`. Options and errors as :func:`schema_to_regex`; a recursive
    ``$ref`` with other keywords beside it is expanded up to three times on a path, and raises
    :class:`UnsupportedSchemaError` past that."""
    converted = _rust_rules(schema, whitespace, strict, resources)
    if converted is not None:
        rules, ignored = converted
    else:
        rules, ignored = _convert(schema, whitespace, None, strict, resources, rules=True)
    if ignored:
        warnings.warn(IgnoredKeywordsWarning(ignored), stacklevel=2)
    return rules


def _rust_rules(
    schema: Any, whitespace: Any, strict: Optional[bool], resources: Optional[Mapping[str, Any]],
) -> Optional[Tuple[List[Tuple[str, str]], List[Tuple[str, str]]]]:
    """``(rules, ignored)`` from the Rust converter (``rust/src/json_schema``), or ``None`` where
    it does not take the schema: then this module converts it. On the schemas it takes (plain
    JSON data or JSON text, default mode, no ``resources``, no keyword that raises or that it
    does not handle; unknown keywords are ignored and reported as here) its rules and ignored
    keywords are this module's, byte for byte (``tests/json_schema/test_rust_converter.py``
    compares them on every JSONSchemaBench and JSON Schema Test Suite schema); it takes ~5x less
    time (median 28-37 against 150-170 us on the 4,182 bench schemas it takes)."""
    if strict is not None or resources is not None or not isinstance(whitespace, str):
        return None
    from .. import _core

    return _core.schema_to_rules_subset(schema, whitespace)


def ignored_keywords(
    schema: Any, *, max_recursion_depth: int = 3, strict: Optional[bool] = None,
    resources: Optional[Mapping[str, Any]] = None,
) -> List[Tuple[str, str]]:
    """The ``(keyword, pointer)`` pairs :func:`schema_to_regex` ignores for ``schema`` (the
    unknown keywords it met; unknown formats too with ``strict=False``); raises as it does."""
    return _convert(schema, "", max_recursion_depth, strict, resources)[1]


def _load(schema: Any, where: str) -> Any:
    """A schema given as a dict, a bool, or JSON text (str or bytes), as a Python value."""
    if isinstance(schema, (bytes, bytearray)):
        schema = schema.decode("utf-8")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise InvalidSchemaError(None, where, f"the schema is not valid JSON: {e}") from None
    return schema


def _documents(resources: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``resources`` checked: absolute URIs without a fragment, to loaded schemas."""
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise TypeError(f"resources must be a mapping of URI to schema, got {type(resources).__name__}")
    out = {}
    for uri, doc in resources.items():
        if not isinstance(uri, str) or not urlsplit(uri).scheme:
            raise ValueError(f"resources: {uri!r} is not an absolute URI (such as https://example.com/a.json)")
        uri, fragment = urldefrag(uri)
        if fragment:
            raise ValueError(f"resources: {uri}#{fragment} has a fragment; name the document, not a part of it")
        out[uri] = _load(doc, f"{uri}#")
    return out


def _convert(schema: Any, whitespace: str, max_recursion_depth: Optional[int], strict: Optional[bool],
             resources: Optional[Mapping[str, Any]] = None, rules: bool = False):
    """:func:`_convert_unchecked`, with Python's recursion limit reported as the schema's error."""
    try:
        return _convert_unchecked(schema, whitespace, max_recursion_depth, strict, resources, rules)
    except RecursionError as e:
        # the innermost subschema the converter was working on when the stack ran out
        ptr, tb = "#", e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_globals is globals() and isinstance(tb.tb_frame.f_locals.get("ptr"), str):
                ptr = tb.tb_frame.f_locals["ptr"]
            tb = tb.tb_next
        raise UnsupportedSchemaError(
            None, ptr, "the schema nests too deeply to convert: past Python's recursion limit "
            f"(sys.getrecursionlimit() = {sys.getrecursionlimit()}) while expanding its subschemas "
            "(for rules, a recursive $ref combined through allOf/anyOf with other keywords is expanded "
            "without end)", limit="recursion") from None


def _convert_unchecked(schema: Any, whitespace: str, max_recursion_depth: Optional[int], strict: Optional[bool],
                       resources: Optional[Mapping[str, Any]] = None, rules: bool = False):
    schema = _load(schema, "#")
    documents = _documents(resources)
    if not isinstance(whitespace, str):
        raise TypeError(f"whitespace must be a str (a regex), got {type(whitespace).__name__}")
    if rules:
        pass  # no bound: recursion becomes calls
    elif not isinstance(max_recursion_depth, int) or isinstance(max_recursion_depth, bool) or max_recursion_depth < 0:
        raise ValueError(f"max_recursion_depth must be an int >= 0, got {max_recursion_depth!r}")
    atomic = re.fullmatch(r"(?:\[[^\]\\]*\]|[ \t\n\r])[?*+]?", whitespace)  # e.g. "[ ]?": no group needed
    ws = whitespace if not whitespace or atomic else f"(?:{whitespace})"
    conv = _Converter(schema, ws, max_recursion_depth, _mode(strict), documents)
    regex = conv.value(schema, "#", ())
    if regex is None:
        if conv.cut_by_recursion:
            raise UnsupportedSchemaError(
                "$ref", conv.cut_by_recursion,
                f"recursion deeper than max_recursion_depth={max_recursion_depth} is required "
                "(raise max_recursion_depth)",
            )
        if conv.dropped is not None:
            raise conv.dropped
        raise InvalidSchemaError(None, "#", "no JSON value satisfies this schema")
    if not rules:
        return regex, list(dict.fromkeys(conv.ignored))
    out = [("#", regex)]
    while len(out) <= len(conv.called):
        ptr, node = conv.called[len(out) - 1]
        body = conv.any_value_rule() if ptr == _ANY else conv.value(node, ptr, (ptr,))
        if body is None:  # a rule with no instance: its calls are dead ends, which the automaton drops
            body = "[^\\x00-\\x{10FFFF}]"
        out.append((ptr, body))
    return out, list(dict.fromkeys(conv.ignored))


def _all_of(*schemas: Any) -> Any:
    """The conjunction of subschemas (``None``: absent), simplified for true/false."""
    present = [x for x in schemas if x is not None and x is not True and x != {}]
    if any(x is False for x in present):
        return False
    if not present:
        return True
    return present[0] if len(present) == 1 else {"allOf": present}


def _branches(flat: Optional[dict]) -> int:
    """How many alternatives a union built by :func:`_union` holds (nested unions counted
    through)."""
    if isinstance(flat, dict) and len(flat) == 1 and isinstance(flat.get("anyOf"), list):
        return sum(_branches(x) for x in flat["anyOf"])
    return 1


def _too_many_branches(keyword: Optional[str], ptr: str, what: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(
        keyword, ptr, f"{what} alternatives: past the converter's limit MAX_BRANCHES = {MAX_BRANCHES:,} "
        "(combining anyOf/oneOf/if branches, or excluding schemas for not/oneOf, multiplies them)",
        limit="MAX_BRANCHES")


def _bounded_union(parts, ptr: str) -> Optional[dict]:
    """:func:`_union` of exclusion results (an iterable, consumed here), refused as soon as they
    hold more than ``MAX_BRANCHES`` alternatives."""
    kept, n = [], 0
    for x in parts:
        if x is not None:
            n += _branches(x)
            if n > MAX_BRANCHES:
                raise _too_many_branches(None, ptr, f"more than {MAX_BRANCHES:,}")
            kept.append(x)
    return _union(kept)


def _union(parts: List[Optional[dict]]) -> Optional[dict]:
    """The union of flattened schemas (``None``: empty), as one ``anyOf``."""
    kept = [x for x in parts if x is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else {"anyOf": kept}


# Keywords whose meaning depends on each other: negated together (see _Converter.exclude).
_COUPLED = (frozenset(("properties", "patternProperties", "additionalProperties")), frozenset(("prefixItems", "items")),
            frozenset(("contains", "minContains", "maxContains")), frozenset(("minimum", "exclusiveMinimum")),
            frozenset(("maximum", "exclusiveMaximum")))
# Keywords _literal_ok judges exactly for a constant (others raise there, or are not read).
_LITERAL_CHECKED = frozenset(("type", "enum", "const", "minLength", "maxLength", "pattern", "format", "minimum",
                              "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
                              "maxItems", "uniqueItems", "required"))


def _keyword_groups(flat: dict) -> List[dict]:
    """``flat`` split into independent parts whose conjunction it is."""
    groups: List[dict] = []
    seen: set = set()
    for k in flat:
        if k not in seen:
            together = next((c for c in _COUPLED if k in c), frozenset((k,)))
            seen |= together
            groups.append({x: v for x, v in flat.items() if x in together})
    return groups


def _halving(prefix: List[int], lo: int, hi: int) -> int:
    """The split point in (lo, hi) that best halves the summed lengths."""
    half = (prefix[lo] + prefix[hi]) / 2
    return min(range(lo + 1, hi), key=lambda m: abs(prefix[m] - half))


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986). ``urljoin`` knows only hierarchical
    schemes: against ``urn:...`` it drops a fragment-only or relative reference, so those two
    cases are written out here."""
    if urlsplit(ref).scheme:
        return ref
    if ref.startswith("#") or not ref:
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


def _escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# Rules mode: a flattened schema that is a call ({_CALL: pointer, _CALL_NODE: schema}), the
# pointer of the free-value rule, and how often a recursive $ref with siblings is expanded.
_CALL = "$call"
_CALL_NODE = "$call-node"
_ANY = "#any-json-value"
_MAX_MERGED_EXPANSIONS = 3


class _Converter:
    def __init__(self, root: Any, ws: str, max_depth: int, mode: str, documents: Optional[Dict[str, Any]] = None):
        self.root, self.ws, self.max_depth, self.mode = root, ws, max_depth, mode
        self.deadline = time.monotonic() + MAX_CONVERT_SECONDS
        self.strict = mode == "strict"  # unknown formats raise (default: refused where generated)
        self.cut_by_recursion: Optional[str] = None
        self.dropped: Optional[UnsupportedSchemaError] = None  # the first place left out as unsupported
        self.ignored: List[Tuple[str, str]] = []
        self.pointers: Dict[int, str] = {}
        self.bases: Dict[int, str] = {}
        self.outer_bases: Dict[int, str] = {}  # the base before a node's own $id
        # per schema holding $ref: whether its $id is ignored (drafts up to 7 ignore every
        # sibling of $ref), from the nearest $schema; None when no $schema names the draft
        self.ref_ignores_id: Dict[int, Optional[bool]] = {}
        self.by_id: Dict[str, Tuple[Any, str]] = {}
        self.memo: Dict[Any, Tuple[Any, Optional[str]]] = {}
        # rules mode (max_depth None): the rules called so far, (pointer, target schema); rule
        # i + 1 of the result is called[i]
        self.called: List[Tuple[str, Any]] = []
        self._index(root, "#", _DEFAULT_BASE, None)
        # other documents (``resources``): reached by their URI, or by an $id inside them; the
        # root's own URIs win over theirs
        for uri, doc in (documents or {}).items():
            self.by_id.setdefault(uri, (doc, f"{uri}#"))
            self._index(doc, f"{uri}#", uri, None)

    # -- document index and $ref ------------------------------------------------------------

    def _index(self, node: Any, ptr: str, base: str, legacy: Optional[bool]) -> None:
        """Pointers, base URIs (``$id``, draft-4 ``id``) and anchors of every subschema. An
        anchor is registered under its base URI, so equal anchors under different ``$id`` s are
        told apart; the first of two equal full URIs wins."""
        if isinstance(node, dict):
            self.pointers[id(node)] = ptr
            self.outer_bases[id(node)] = base
            dialect = node.get("$schema")
            if isinstance(dialect, str):
                legacy = True if "draft-0" in dialect else False if re.search(r"20\d\d-\d\d", dialect) else None
            if "$ref" in node:
                self.ref_ignores_id[id(node)] = legacy
            for key in ("$id", "id"):
                value = node.get(key)
                if isinstance(value, str) and not (key == "id" and "$id" in node):
                    if value.startswith("#"):  # draft 6/7 plain-name fragment: an anchor
                        self.by_id.setdefault(_join(base, value), (node, ptr))
                    else:
                        base = urldefrag(_join(base, value))[0]
                        self.by_id.setdefault(base, (node, ptr))
                        self.by_id.setdefault(value, (node, ptr))  # as written, too
                    break
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.by_id.setdefault(f"{base}#{anchor}", (node, ptr))
            self.bases[id(node)] = base
            for k, v in node.items():
                self._index(v, f"{ptr}/{_escape_token(k)}", base, legacy)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._index(v, f"{ptr}/{i}", base, legacy)

    def resolve(self, ref: Any, ptr: str, base: str) -> Tuple[Any, str]:
        if not isinstance(ref, str):
            raise InvalidSchemaError("$ref", ptr, f"must be a string, got {ref!r}")
        full = _join(base, ref)
        doc, fragment = urldefrag(full)
        if doc == _DEFAULT_BASE or (doc == urldefrag(base)[0] and doc not in self.by_id):
            node, node_ptr = self.root, "#"
        elif doc in self.by_id:
            node, node_ptr = self.by_id[doc]
        elif ref.partition("#")[0] in self.by_id:
            node, node_ptr = self.by_id[ref.partition("#")[0]]
        else:
            raise UnsupportedSchemaError(
                "$ref", ptr, f"reference to another document, {doc!r}"
                + ("" if doc == ref.partition("#")[0] else f" (from {ref!r})")
                + ", which is not given: pass it in resources={uri: schema} (nothing is fetched)")
        if fragment and not fragment.startswith("/"):
            key = f"{self.bases.get(id(node), doc)}#{fragment}" if isinstance(node, dict) else None
            for candidate in (key, f"{doc}#{fragment}"):
                if candidate in self.by_id:
                    return self.by_id[candidate]
            raise InvalidSchemaError("$ref", ptr, f"no anchor or id {ref!r} in the document")
        for token in fragment.split("/")[1:] if fragment else []:
            token = re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), token)
            token = token.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(token)] if isinstance(node, list) else node[token]
            except (KeyError, IndexError, ValueError, TypeError):
                raise InvalidSchemaError("$ref", ptr, f"{ref!r} points to nothing") from None
            node_ptr = f"{node_ptr}/{_escape_token(token)}"
        return node, node_ptr

    def other_target(self, ref: str, ptr: str, base: str) -> Optional[str]:
        try:
            return self.resolve(ref, ptr, base)[1]
        except UnsupportedSchemaError:
            return None

    # -- flattening: $ref and allOf merged into one dict of known keywords --------------------

    def flatten(self, node: Any, ptr: str, stack: tuple) -> Tuple[Optional[dict], str, tuple]:
        """``(dict, pointer, stack)``: ``node`` with ``$ref``, ``allOf``, the dependencies,
        ``if``/``then``/``else`` and ``unevaluated*`` rewritten into the other keywords; tuples
        as ``prefixItems`` + ``items``; ``None`` for ``false``, a cut recursion or a contradiction."""
        if time.monotonic() > self.deadline:
            raise UnsupportedSchemaError(
                None, ptr, f"converting the schema takes longer than the converter's limit "
                f"MAX_CONVERT_SECONDS = {MAX_CONVERT_SECONDS:g} s", limit="MAX_CONVERT_SECONDS")
        if node is True:
            return {}, ptr, stack
        if node is False:
            return None, ptr, stack
        if not isinstance(node, dict):
            raise InvalidSchemaError(None, ptr, f"a schema must be an object or a boolean, got {node!r}")
        ptr = self.pointers.get(id(node), ptr)
        out: Optional[dict] = {}
        for k, v in node.items():
            if k == "$if":  # internal: the "not if" branch of if/then/else
                out[k] = v
            elif k in SUPPORTED:
                if k not in _STRUCTURAL:
                    out[k] = v
            elif k in UNSUPPORTED:
                raise UnsupportedSchemaError(k, ptr, "this keyword is not supported")
            elif k in ANNOTATIONS or (k == "id" and isinstance(v, str)):
                continue
            elif self.mode == "strict":
                raise UnsupportedSchemaError(
                    k, ptr, "unknown keyword (leave strict unset to ignore unknown keywords)")
            else:
                self.ignored.append((k, ptr))
        items = node.get("items")
        if isinstance(items, list):  # draft 4-7 tuple: the same as prefixItems + items
            out["prefixItems"] = items
            if "additionalItems" in node:
                out["items"] = node["additionalItems"]
        else:
            if "prefixItems" in node:
                out["prefixItems"] = node["prefixItems"]
            if "items" in node:
                out["items"] = items
        main_ptr = ptr
        if "$ref" in node:
            base = self.bases.get(id(node), _DEFAULT_BASE)
            outer = self.outer_bases.get(id(node), _DEFAULT_BASE)
            legacy = self.ref_ignores_id.get(id(node))
            if legacy:
                base = outer
            target, target_ptr = self.resolve(node["$ref"], ptr, base)
            if base != outer and legacy is None and self.other_target(node["$ref"], ptr, outer) != target_ptr:
                raise UnsupportedSchemaError(
                    "$ref", ptr, "an $id beside $ref changes the target in draft 2019-09 and later but not "
                    "in draft 7 and earlier: name the draft in $schema")
            if self.max_depth is None and target_ptr in stack:
                pure = all(k == "$ref" or k in ANNOTATIONS for k in node)
                if pure:
                    return {_CALL: target_ptr, _CALL_NODE: target}, ptr, stack
                if stack.count(target_ptr) >= _MAX_MERGED_EXPANSIONS:
                    raise UnsupportedSchemaError(
                        "$ref", ptr, f"a recursive $ref with keywords beside it is expanded "
                        f"{_MAX_MERGED_EXPANSIONS} times on a path and no more (pass max_recursion_depth "
                        "to bound the recursion instead)")
            elif self.max_depth is not None and stack.count(target_ptr) >= self.max_depth:
                self.cut_by_recursion = self.cut_by_recursion or ptr
                return None, ptr, stack
            flat, flat_ptr, stack = self.flatten(target, target_ptr, stack + (target_ptr,))
            if flat is None:
                return None, ptr, stack
            if not out and "allOf" not in node and not any(k in node for k in _STRUCTURAL if k != "$ref"):
                main_ptr = flat_ptr
            out = self.merge(flat, out, ptr)
        for k in _DEPENDENCIES:
            if k in node and out is not None:
                out = self.merge(out, _dependencies_as_any_of(node[k], k, ptr), ptr)
        if "if" in node and ("then" in node or "else" in node) and out is not None:
            # if/then/else as the union (if and then) | (not if, and else)
            cond = node["if"]
            then, other = node.get("then", True), node.get("else", True)
            out = self.merge(out, {"anyOf": [{"allOf": [cond, then]},
                                             {"allOf": [{"not": cond, "$if": True}, other]}]}, ptr)
        subs = node.get("allOf", [])
        if "allOf" in node and (not isinstance(subs, list) or not subs):
            raise InvalidSchemaError("allOf", ptr, "must be a non-empty array of schemas")
        for i, sub in enumerate(subs):
            if out is None:
                break
            flat, _, stack = self.flatten(sub, f"{ptr}/allOf/{i}", stack)
            out = None if flat is None else self.merge(out, flat, f"{ptr}/allOf/{i}")
        uneval = {k: node[k] for k in ("unevaluatedProperties", "unevaluatedItems") if k in node}
        if uneval and out is not None:
            out = self.close(out, uneval, ptr, stack)
        return out, main_ptr, stack

    def close(self, flat: dict, uneval: dict, ptr: str, stack: tuple) -> Optional[dict]:
        """``unevaluatedProperties``/``unevaluatedItems`` of a schema whose in-place applicators
        are all merged into ``flat``: the properties (items) ``flat`` declares are the evaluated
        ones, so they become ``additionalProperties`` (``items``). Pending ``anyOf`` branches
        evaluate more: each is merged in first, and closed on its own."""
        if "oneOf" in flat:
            raise UnsupportedSchemaError(
                next(iter(uneval)), ptr, "unevaluated keywords with a oneOf in place are not supported")
        if "anyOf" in flat:
            branches = flat["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise InvalidSchemaError("anyOf", ptr, "must be a non-empty array of schemas")
            base = {k: v for k, v in flat.items() if k != "anyOf"}
            options = []
            for i, branch in enumerate(branches):
                bflat = self.flatten(branch, f"{ptr}/anyOf/{i}", stack)[0]
                merged = None if bflat is None else self.merge(base, bflat, f"{ptr}/anyOf/{i}")
                closed = None if merged is None else self.close(merged, uneval, ptr, stack)
                if closed is not None:
                    options.append(closed)
            return {"anyOf": options} if options else None
        out = dict(flat)
        props = uneval.get("unevaluatedProperties")
        if props is not None and "additionalProperties" not in out:
            out["additionalProperties"] = props
        items = uneval.get("unevaluatedItems")
        if items is not None and "items" not in out:
            if "contains" in out:
                raise UnsupportedSchemaError(
                    "unevaluatedItems", ptr, "unevaluatedItems with contains is not supported")
            out["items"] = items
        return out

    def merge(self, a: dict, b: dict, ptr: str) -> Optional[dict]:
        """The conjunction of two flattened schemas as one dict (None: contradictory).

        ``additionalProperties`` sees only the properties (and patterns) of its own schema, and
        ``items`` only its own ``prefixItems``: each side's are applied to the names and
        positions the other side declares before the two are put together."""
        if _CALL in a or _CALL in b:
            if not b or not a:
                return a if b == {} or not b else b
            a, b = self.unfold(a), self.unfold(b)
            if a is None or b is None:
                return None
        out = dict(a)
        if any(k in a or k in b for k in ("properties", "additionalProperties", "patternProperties")):
            for k, v in self.merge_properties(a, b, ptr).items():
                out[k] = v
        if any(k in a or k in b for k in ("prefixItems", "items")):
            for k, v in self.merge_items(a, b).items():
                out[k] = v
        for k, v in b.items():
            if k in ("properties", "additionalProperties", "patternProperties", "prefixItems", "items"):
                continue
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
            elif k == "multipleOf" and _numbers(u, v) and u > 0 and v > 0:
                both = _multiple_of.lcm(_decimal(u), _decimal(v))  # the multiples of both
                out[k] = int(both) if both == both.to_integral_value() else float(both)
                if _decimal(out[k]) != both:
                    raise UnsupportedSchemaError(k, ptr, f"the common multiple of {u!r} and {v!r} is not a float")
            elif k == "uniqueItems":
                out[k] = bool(u) or bool(v)
            elif k == "enum":
                out[k] = [x for x in u if any(_same_json(x, y) for y in v)]
            elif k == "const":
                return None
            elif k in ("anyOf", "oneOf"):
                if isinstance(u, list) and isinstance(v, list) and len(u) * len(v) > MAX_BRANCHES:
                    raise _too_many_branches(k, ptr, f"{len(u)} x {len(v)}")
                out[k] = [{"allOf": [x, y]} for x in u for y in v]
            elif k == "not":
                out[k] = {"anyOf": [u, v]}
            elif k == "propertyNames":
                out[k] = _all_of(u, v)
            else:
                raise UnsupportedSchemaError(k, ptr, "cannot combine two different values of this keyword (allOf/$ref)")
        return out

    def merge_properties(self, a: dict, b: dict, ptr: str) -> dict:
        out: dict = {}
        sides = []
        for x in (a, b):
            props, pats = x.get("properties", {}), x.get("patternProperties", {})
            if not isinstance(props, dict):
                raise InvalidSchemaError("properties", ptr, "must be an object")
            if not isinstance(pats, dict):
                raise InvalidSchemaError("patternProperties", ptr, "must be an object")
            sides.append((props, pats, x.get("additionalProperties")))

        def side_schema(side, name):
            props, pats, extra = side
            if name in props:
                return props[name]
            for pat in pats:  # a pattern's schema is applied through the merged patternProperties
                if _python_search(pat, name, ptr, "patternProperties", "the property name"):
                    return True
            return extra

        names = list(dict.fromkeys(list(sides[0][0]) + list(sides[1][0])))
        if names:
            out["properties"] = {n: _all_of(side_schema(sides[0], n), side_schema(sides[1], n)) for n in names}
        pats = dict(sides[0][1])
        for pat, sub in sides[1][1].items():
            pats[pat] = _all_of(pats[pat], sub) if pat in pats else sub
        if pats and not names:
            # a map: its keys match one side's pattern, which the other side's
            # additionalProperties may cover (it does unless a pattern of that side matches the
            # key too): each side's additionalProperties joins the other side's pattern schemas
            for mine, other in ((sides[0], sides[1]), (sides[1], sides[0])):
                if other[2] is not None:
                    for pat in mine[1]:
                        if pat not in other[1]:
                            pats[pat] = _all_of(pats[pat], other[2])
        if pats:
            out["patternProperties"] = pats
        if sides[0][2] is not None or sides[1][2] is not None:
            out["additionalProperties"] = _all_of(sides[0][2], sides[1][2])
        return out

    def merge_items(self, a: dict, b: dict) -> dict:
        out: dict = {}
        pa, pb = a.get("prefixItems", []), b.get("prefixItems", [])
        ia, ib = a.get("items"), b.get("items")
        if not isinstance(pa, list) or not isinstance(pb, list):
            raise InvalidSchemaError("prefixItems", "#", "must be an array of schemas")
        n = max(len(pa), len(pb))
        if n:
            out["prefixItems"] = [
                _all_of(pa[i] if i < len(pa) else ia, pb[i] if i < len(pb) else ib) for i in range(n)]
        if ia is not None or ib is not None:
            out["items"] = _all_of(ia, ib)
        return out

    # -- values ------------------------------------------------------------------------------

    def value(self, node: Any, ptr: str, stack: tuple) -> Optional[str]:
        key = (id(node), ptr, stack)
        if key in self.memo:
            return self.memo[key][1]
        flat, fptr, stack = self.flatten(node, ptr, stack)
        result = None if flat is None else self.value_flat(flat, fptr, stack)
        if result is not None:
            self.check_size((result,), fptr)
        self.memo[key] = (node, result)  # keep node alive: its id is part of the key
        return result

    @staticmethod
    def check_size(parts, ptr: str) -> None:
        """Refuse regexes (or the parts of one, before they are joined) longer in all than
        ``MAX_REGEX_CHARS``."""
        if sum(len(p) for p in parts) > MAX_REGEX_CHARS:
            raise UnsupportedSchemaError(
                None, ptr, f"the regex would be longer than {MAX_REGEX_CHARS} characters "
                f"(the converter's limit MAX_REGEX_CHARS = {MAX_REGEX_CHARS:,})", limit="MAX_REGEX_CHARS")

    def value_flat(self, flat: dict, ptr: str, stack: tuple) -> Optional[str]:
        if _CALL in flat:
            return self.call(flat[_CALL], flat[_CALL_NODE])
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
                self.check_size(options, ptr)
                return J.alternation(options) if options else None
        if "not" in flat:
            rest = {k: v for k, v in flat.items() if k not in ("not", "$if")}
            negated = self.flatten(flat["not"], f"{ptr}/not", stack)[0]
            try:
                reduced = self.exclude(rest, negated, stack, f"{ptr}/not", exact=True)
            except UnsupportedSchemaError as e:
                if "$if" not in flat:
                    raise
                raise UnsupportedSchemaError(
                    "if", ptr, f"the else branch needs the negation of if, which {e.reason}") from None
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

    def exclude(self, a: Optional[dict], b: Optional[dict], stack: tuple, ptr: str, exact: bool) -> Optional[dict]:
        """``a`` without the instances of ``b`` (both flattened), for ``not``, ``if`` (its
        negation) and ``oneOf``: ``a`` and not ``b``, where a regex can say it, else raise.
        None when nothing is left.

        ``b`` is split into its independent keywords (``properties`` with ``patternProperties``
        and ``additionalProperties``, ``prefixItems`` with ``items``, a bound with its exclusive
        form, ``contains`` with its counts): not (b1 and b2) is (not b1) or (not b2), a union.
        One keyword is excluded by the rules of :meth:`exclude_keyword`. The result may be a
        subset of ``a`` and not ``b`` (only where the generator's own choices already drop
        instances: undeclared properties), never more. When ``b`` cannot be excluded, raise
        (``exact``: ``not`` and ``if``), or for ``oneOf`` raise too, except in lax mode
        (``oneOf`` approximated by ``anyOf``: ``a`` unchanged)."""
        try:
            return self.exclude_exact(a, b, stack, ptr)
        except UnsupportedSchemaError as e:
            if exact or (self.mode != "lax" and e.limit):
                raise
            if self.mode != "lax":
                raise UnsupportedSchemaError(
                    "oneOf", ptr, "branches that an instance may satisfy together cannot be told apart "
                    f"({e.reason}; strict=False reads such a oneOf as anyOf)") from None
            return a

    def exclude_exact(self, a: Optional[dict], b: Optional[dict], stack: tuple, ptr: str) -> Optional[dict]:
        a, b = self.unfold(a), self.unfold(b)
        if a is None or b is None:  # nothing to exclude from; false excludes nothing
            return a
        b = {k: v for k, v in b.items() if k != "$if"}
        if not b:  # true: excludes everything
            return None
        if set(a) == {"anyOf"} and isinstance(a["anyOf"], list):  # a union: each branch on its own
            return _bounded_union((self.exclude_exact(self.flatten(x, ptr, stack)[0], b, stack, ptr)
                                   for x in a["anyOf"]), ptr)
        if set(b) == {"anyOf"} and isinstance(b["anyOf"], list):
            for branch in b["anyOf"]:
                a = self.exclude_exact(a, self.flatten(branch, ptr, stack)[0], stack, ptr)
            return a
        if self.disjoint(a, b, stack):
            return a
        va, vb = _literal_values(a), _literal_values(b)
        if va is not None and (vb is not None or set(b) == {"type"}):
            kept = [v for v in va if not (any(_same_json(v, w) for w in vb) if vb is not None
                                          else _json_type(v) in self.type_set(b, None))]
            return {**{k: v for k, v in a.items() if k != "const"}, "enum": kept} if kept else None
        if va is not None and set(b) <= _LITERAL_CHECKED:
            # constants: keep those that fail b (_literal_ok judges every keyword of b)
            kept = [v for v in va if not _literal_ok(v, b, ptr, True)]
            return {**{k: v for k, v in a.items() if k != "const"}, "enum": kept} if kept else None
        if set(b) == {"type"} and va is None:
            drop = self.type_set(b, None)
            mine = self.types(a, ptr) or list(TYPES)
            if not ("number" in mine and "integer" in drop and "number" not in drop):
                kept = [t for t in mine if t not in drop]
                return {**a, "type": kept} if kept else None
        groups = _keyword_groups(b)
        if len(groups) > 1:
            return _bounded_union((self.exclude_exact(a, g, stack, ptr) for g in groups), ptr)
        return self.exclude_keyword(a, b, va, stack, ptr)

    def exclude_keyword(self, a: dict, b: dict, va: Optional[list], stack: tuple, ptr: str) -> Optional[dict]:
        """``a`` and not ``b``, ``b`` one keyword (or one coupled group of keywords)."""
        refuse = UnsupportedSchemaError("not", ptr, f"cannot exclude {json.dumps(b)[:200]}")
        if set(b) == {"not"}:  # not not c: c
            c = self.flatten(b["not"], ptr, stack)[0]
            return None if c is None else self.merge(a, c, ptr)
        family = next((t for t, kws in _TYPE_KEYWORDS.items() if set(b) <= set(kws)), None)
        if va is None and family is not None:
            # b constrains one type only, so every other type satisfies it: keep a's of that type
            members = ("integer", "number") if family == "number" else (family,)
            mine = [t for t in (self.types(a, ptr) or TYPES) if t in members]
            if not mine:
                return None
            a = {**a, "type": mine}
            if self.disjoint(a, b, stack):
                return a
        if va is not None:
            raise refuse
        (key, value), *more = b.items()
        if set(b) == {"required"} and isinstance(value, list) and (a.get("properties") or a.get("required")):
            # not all of them present: one of the missing ones absent. The generator writes
            # only the names of properties and required, so a name outside both is never there.
            missing = [p for p in value if p not in a.get("required", [])]
            if not missing:
                return None
            if any(p not in a.get("properties", {}) for p in missing):
                return a
            return self.merge(a, {"anyOf": [{"properties": {p: False}} for p in missing]}, ptr)
        if set(b) == {"properties"} and isinstance(value, dict):
            # some property present whose value fails its schema
            return _union([self.merge(a, {"required": [name], "properties": {name: {"not": sub}}}, ptr)
                           for name, sub in value.items() if sub is not True and sub != {}])
        if set(b) == {"additionalProperties"}:
            # b declares no property: some property (any is additional to b) fails the schema;
            # written as: every property fails it, and there is one (a subset)
            return self.merge(a, {"additionalProperties": {"not": value}, "minProperties": 1}, ptr)
        if set(b) == {"prefixItems"} and isinstance(value, list):
            # some position present whose item fails its schema
            return _union([self.merge(a, {"minItems": i + 1, "prefixItems": [True] * i + [{"not": sub}]}, ptr)
                           for i, sub in enumerate(value) if sub is not True and sub != {}])
        if set(b) == {"items"} and not isinstance(value, list):
            return self.merge(a, {"minItems": 1} if value is False else {"contains": {"not": value}}, ptr)
        counts = {"minLength": "maxLength", "minItems": "maxItems", "minProperties": "maxProperties"}
        if key in counts and not more and _numbers(value):
            return None if value <= 0 else self.merge(a, {counts[key]: math.ceil(value) - 1}, ptr)
        if key in counts.values() and not more and _numbers(value):
            low = next(k for k, v in counts.items() if v == key)
            return self.merge(a, {low: math.floor(value) + 1}, ptr)
        for low, x_low, flip, x_flip in (("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"),
                                         ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum")):
            if set(b) <= {low, x_low}:
                bound, excl = _bound(b, low, x_low, ptr)
                if bound is None:
                    break
                # not (x >= m) is x < m, not (x > m) is x <= m (and the same for upper bounds)
                return self.merge(a, {flip: bound} if excl else {x_flip: bound}, ptr)
        if set(b) <= {"const", "enum"}:
            return self.exclude_values(a, _literal_values(b) or [], ptr, refuse)
        raise refuse

    def exclude_values(self, a: dict, values: list, ptr: str, refuse: Exception) -> Optional[dict]:
        """``a`` (not a set of constants) without the given values: per type, null and booleans
        by what is left, numbers by the open intervals between the values, and strings, arrays
        and objects only when ``a`` already rules the values out."""
        parts = []
        for t in self.types(a, ptr) or [t for t in TYPES if t != "integer"]:
            mine = [v for v in values if _json_type(v) == t or (t == "number" and _json_type(v) == "integer")]
            at = {**a, "type": [t]}
            if not mine:
                parts.append(at)
            elif t == "boolean":
                rest = [x for x in (True, False) if not any(_same_json(x, v) for v in mine)]
                parts.append({**at, "enum": rest} if rest else None)
            elif t in ("integer", "number"):
                cuts = sorted({_decimal(v): v for v in mine}.items())
                pieces = [{"exclusiveMaximum": cuts[0][1]}, {"exclusiveMinimum": cuts[-1][1]}]
                pieces += [{"exclusiveMinimum": lo[1], "exclusiveMaximum": hi[1]} for lo, hi in zip(cuts, cuts[1:])]
                parts += [self.merge(at, piece, ptr) for piece in pieces]
            elif t != "null":
                if any(_literal_ok(v, at, ptr, True) for v in mine):
                    raise refuse
                parts.append(at)
        return _union(parts)

    def disjoint(self, a: dict, b: dict, stack: tuple) -> bool:
        """True when no instance generated from ``a`` satisfies ``b`` (checked: types,
        enum/const values, and, when one side admits only objects, a property required by one
        side whose enum/const values differ between the two)."""
        a, b = self.unfold(a), self.unfold(b)
        if a is None or b is None:
            return True
        va, vb = _literal_values(a), _literal_values(b)
        if va is not None and vb is not None:
            return not any(_same_json(x, y) for x in va for y in vb)
        ta, tb = self.type_set(a, va, generated=True), self.type_set(b, vb)
        if not ta & tb:
            return True
        if not (ta <= {"object"} or tb <= {"object"}):
            return False  # the property test below says nothing about non-objects
        pa, pb = a.get("properties", {}), b.get("properties", {})
        # In a fixed order (a set's would change from run to run which subschemas are flattened
        # here, and so the order of the ignored keywords reported).
        for name in dict.fromkeys([*a.get("required", []), *b.get("required", [])]):
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
            fmt = flat.get("format")
            unknown = fmt is not None and fmt not in J.FORMATS and self.mode != "lax"
            # an unknown format does not make a string (other types ignore it): strings are
            # then left out, where no other keyword asks for them
            implied = [k for k, kws in _TYPE_KEYWORDS.items()
                       if any(kw in flat for kw in kws if not (unknown and kw == "format"))]
            if not implied and unknown:
                return [x for x in TYPES if x != "string"]
            return [x for x in TYPES if x in implied] or None
        names = t if isinstance(t, list) else [t]
        for name in names:
            if name not in TYPES:
                raise InvalidSchemaError("type", ptr, f"unknown type {name!r}")
        if "number" in names:
            names = [n for n in names if n != "integer"]  # numbers include integers
        return [x for x in TYPES if x in names]

    # -- rules mode: calls ------------------------------------------------------------------

    def call(self, ptr: str, node: Any) -> str:
        """The call marker of the rule of ``ptr`` (``node`` its schema), numbered on first use
        (rule 0 is the whole value): ``0xFE`` then two bytes naming the rule, as
        ``crate::grammar::lower`` writes calls."""
        ids = [p for p, _ in self.called]
        if ptr in ids:
            i = ids.index(ptr) + 1
        else:
            if len(self.called) + 1 >= 4096:
                raise UnsupportedSchemaError("$ref", ptr, "more than 4,095 recursive schemas")
            self.called.append((ptr, node))
            i = len(self.called)
        return "(?-u:\\xFE\\x%02X\\x%02X)" % (0x80 + (i >> 6), 0x80 + (i & 63))

    def unfold(self, flat: Optional[dict]) -> Optional[dict]:
        """A call's schema flattened one level (its own recursion calls again), for the checks
        that read keywords; anything else as it is."""
        if flat is None or _CALL not in flat:
            return flat
        ptr = flat[_CALL]
        return self.flatten(flat[_CALL_NODE], ptr, (ptr,))[0]

    def any_value_rule(self) -> str:
        """The body of the free-value rule: any JSON value, containers holding calls to it."""
        inner = self.call(_ANY, None)
        options = [J.string(), J.NUMBER, J.BOOLEAN, J.NULL,
                   self.map_regex(J.string(), inner, 0, None), self.sequence([], inner, 0, None)]
        return J.alternation(options)

    def any_value_inside(self) -> str:
        """A free value one container down (``items: true``, undeclared properties)."""
        return self.any_value(self.max_depth - 1 if self.max_depth is not None else 0)

    def any_value(self, depth: int) -> str:
        if self.max_depth is None:
            return self.call(_ANY, None)
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
        kept = [v for v in values if _literal_ok(v, flat, ptr, self.mode != "lax")]
        return J.alternation([J.literal(v, self.ws) for v in kept]) if kept else None

    def number(self, s: dict, ptr: str, stack: tuple, kind: str) -> Optional[str]:
        lo, lo_x = _bound(s, "minimum", "exclusiveMinimum", ptr)
        hi, hi_x = _bound(s, "maximum", "exclusiveMaximum", ptr)
        frac: Optional[int] = 0 if kind == "integer" else None
        if "multipleOf" in s:
            m = _multiple(s["multipleOf"], ptr)
            p, q = _multiple_of.as_ratio(m)
            if kind == "integer":
                p //= math.gcd(p, 10**q)  # an integer N is a multiple of p/10^q when p/gcd divides N
            if p != 1:
                try:
                    return _multiple_of.multiples_regex(m, kind == "integer", _decimal(lo), lo_x, _decimal(hi), hi_x)
                except _multiple_of.TooLarge as e:
                    raise UnsupportedSchemaError(
                        "multipleOf", ptr, f"the regex of the multiples of {s['multipleOf']!r} is too large: {e}") from None
            if kind == "number":
                frac = q  # m = 10^-q: at most q digits after the point
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
            if self.mode != "lax":
                raise UnsupportedSchemaError(
                    "format", ptr, f"unknown format {fmt!r} (supported: {', '.join(J.FORMATS)}; "
                    "pass strict=False to ignore it)")
            self.ignored.append((f"format: {fmt}", ptr))
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
        prefix, rest = s.get("prefixItems", []), s.get("items", True)
        if not isinstance(prefix, list):
            raise InvalidSchemaError("prefixItems", ptr, "must be an array of schemas")
        if "contains" in s:
            return self.contains(s, ptr, stack, prefix, rest, lo, hi)
        if s.get("uniqueItems") is True and (hi is None or hi > 1):
            return self.unique(s, ptr, stack, prefix, rest, lo, hi)
        heads = []
        for i, sub in enumerate(prefix):
            head = self.value(sub, f"{ptr}/prefixItems/{i}", stack)
            if head is None:  # no value fits here: the array ends before this position
                hi = i if hi is None else min(hi, i)
                break
            heads.append(head)
        # items absent or true: any value, nested one level less than a free value (as in a map)
        tail = self.any_value_inside() if rest is True else self.value(rest, f"{ptr}/items", stack)
        if tail is None:
            hi = len(heads) if hi is None else min(hi, len(heads))
        if hi is not None and lo > hi:
            return None
        if lo > J.MAX_COUNT:
            raise UnsupportedSchemaError("minItems", ptr, f"more than {J.MAX_COUNT} items")
        return self.sequence(heads[: hi if hi is not None else len(heads)], tail, lo, hi)

    def finite_values(self, node: Any, ptr: str, stack: tuple) -> Optional[list]:
        """The values of a schema with finitely many (enum/const, boolean, null), else None."""
        flat = self.flatten(node, ptr, stack)[0]
        if flat is None:
            return []
        if set(flat) - {"type", "enum", "const"}:
            return None
        values = _literal_values(flat)
        if values is None:
            types = self.types(flat, ptr) or TYPES
            if not set(types) <= {"boolean", "null"}:
                return None
            values = ([True, False] if "boolean" in types else []) + ([None] if "null" in types else [])
        kept = [v for v in values if _literal_ok(v, flat, ptr, True)]
        return list({_json_key(v): v for v in kept}.values())

    def unique(self, s, ptr, stack, prefix, rest, lo, hi) -> Optional[str]:
        """``uniqueItems: true`` over finitely many values: every array of distinct values
        spelled out (a tuple's positions each from their own set, then ``items``)."""
        refuse = UnsupportedSchemaError(
            "uniqueItems", ptr, "uniqueItems: true is supported on finite item domains (enum, const, "
            "boolean, null, or a tuple of them closed by items: false / maxItems), with at most "
            f"{MAX_UNIQUE_ARRAYS} arrays")
        domains = [self.finite_values(sub, f"{ptr}/prefixItems/{i}", stack) for i, sub in enumerate(prefix)]
        tail = None if rest is False else self.finite_values(rest, f"{ptr}/items", stack)
        if rest is not False and tail is None and (hi is None or hi > len(prefix)):
            raise refuse
        if any(d is None for d in domains):
            raise refuse
        counter = itertools.count()

        def build(position: int, used: frozenset) -> Optional[str]:
            """The rest of the array from ``position`` on, given the values used so far."""
            options = []
            if position >= lo:
                options.append("")
            if hi is None or position < hi:
                domain = domains[position] if position < len(domains) else (tail or [])
                for v in domain:
                    key = _json_key(v)
                    if key in used:
                        continue
                    if next(counter) > MAX_UNIQUE_ARRAYS:
                        raise refuse
                    more = build(position + 1, used | {key})
                    if more is not None:
                        sep = f"{self.ws},{self.ws}" if position else ""
                        options.append(sep + J.literal(v, self.ws) + more)
            if not options:
                return None
            return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"

        body = build(0, frozenset())
        return None if body is None else rf"\[{self.ws}{body}{self.ws}\]"

    def contains(self, s, ptr, stack, prefix, rest, lo, hi) -> Optional[str]:
        """``contains`` with ``minContains``/``maxContains``: items that match it (between the
        two counts) among items that do not. Without ``maxContains`` the others are any items;
        with it they must be shown not to match (else none are generated)."""
        c_lo = _count(s, "minContains", ptr, 1)
        c_hi = _count(s, "maxContains", ptr, None)
        c_hi = None if c_hi is None else min(c_hi, max(c_lo, J.MAX_COUNT))  # fewer hits: still valid
        if prefix or s.get("uniqueItems") is True:
            raise UnsupportedSchemaError("contains", ptr, "contains with prefixItems or uniqueItems is not supported")
        if c_hi is not None and c_hi < c_lo:
            return None
        if c_lo == 0 and c_hi is None:
            return self.array({k: v for k, v in s.items() if k != "contains"}, ptr, stack, "array")
        if lo > c_lo or hi is not None:
            raise UnsupportedSchemaError(
                "contains", ptr, "contains with minItems above minContains, or maxItems, is not supported")
        if c_lo > J.MAX_COUNT:
            raise UnsupportedSchemaError("minContains", ptr, f"more than {J.MAX_COUNT} items")
        item = self.flatten(rest, f"{ptr}/items", stack)[0] if rest is not True else {}
        if item is None:
            return None if c_lo > 0 else rf"\[{self.ws}\]"
        cond = self.flatten(s["contains"], f"{ptr}/contains", stack)[0]
        hit_flat = None if cond is None else self.merge(item, cond, f"{ptr}/contains")
        hit = None if hit_flat is None else self.value_flat(hit_flat, ptr, stack)
        if hit is None:
            return None if c_lo > 0 else rf"\[{self.ws}\]"
        if c_hi is None:
            other = self.any_value_inside() if rest is True else self.value_flat(item, ptr, stack)
        else:
            try:
                other_flat = self.exclude(item, cond, stack, f"{ptr}/contains", exact=True)
            except UnsupportedSchemaError:
                other_flat = None  # only matching items: their count is the array's length
            other = None if other_flat is None else self.value_flat(other_flat, ptr, stack)
        sep = f"{self.ws},{self.ws}"
        # [ o* (c o*){c_lo,c_hi} ] with commas: each unit is "an item, after a comma"
        o = "" if other is None else f"(?:{sep}{other})*"
        unit = f"(?:{sep}{hit}{o})"
        if c_lo >= 1:
            first = f"(?:{hit}|(?:{other}){o}{sep}{hit})" if other is not None else hit
            body = f"{first}{o}" + J.repeat(unit, c_lo - 1, None if c_hi is None else c_hi - 1)
            return rf"\[{self.ws}{body}{self.ws}\]"
        # c_lo == 0 with a maximum: no items, or some
        if other is not None:
            # at most c_hi hits: o* (c o*){0,c_hi} written from the first item on
            body = f"(?:{other}{o}" + J.repeat(unit, 0, c_hi) + f"|{hit}{o}" + J.repeat(unit, 0, c_hi - 1) + ")" \
                if c_hi >= 1 else f"{other}{o}"
        else:
            if c_hi == 0:
                return rf"\[{self.ws}\]"
            body = hit + J.repeat(unit, 0, c_hi - 1)
        return rf"\[{self.ws}(?:{body}{self.ws})?\]"

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
                if _python_search(pat, name, ptr, "patternProperties", "the property name"):
                    sub = {"allOf": [sub, pat_schema]}
            regex = self.value(sub, sub_ptr, stack)
            if regex is None and name in required:
                return None
            if regex is not None:
                key = '"' + J.json_string_content(name) + '"'
                entries.append((f"{key}{self.ws}:{self.ws}{regex}", name in required))
        self.check_size((e for e, _ in entries), ptr)
        n_required = sum(1 for _, r in entries if r)
        if min_p > len(entries):
            # only declared names are written, and all of them are too few: none of the objects
            # written here qualifies. Nothing is generated here (an anyOf branch, an optional
            # property drop out); the schema is refused if that leaves nothing at all.
            self.dropped = self.dropped or UnsupportedSchemaError(
                "minProperties", ptr, f"minProperties {min_p} above the {len(entries)} declared properties "
                "(only declared properties are generated)")
            return None
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
        if not entries:
            return rf"\{{{ws}\}}"
        first_required = next((i for i, (_, req) in enumerate(entries) if req), None)
        if first_required is not None:
            # only the suffix after the first required entry is written: building every suffix
            # (as a list) would hold a quadratic amount of text for a wide object
            body = "".join(f"(?:{entry}{sep})?" for entry, _ in entries[:first_required])
            body += entries[first_required][0]
            body += "".join(f"{sep}{entry}" if req else f"(?:{sep}{entry})?" for entry, req in entries[first_required + 1:])
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
            # keys matching some pattern (only those: other keys are optional whatever
            # additionalProperties says), each value satisfying every pattern's schema, since
            # a key may match several (a subset where the patterns do not overlap)
            keys = []
            for pat in patterns:
                try:
                    keys.append(J.group(pattern_to_regex(pat)))
                except PatternError as e:
                    raise UnsupportedSchemaError("patternProperties", ptr, str(e)) from None
            key_regex = '"' + (keys[0] if len(keys) == 1 else "(?:" + "|".join(keys) + ")") + '"'
            if len(patterns) == 1:
                (pat, sub), = patterns.items()
                value_regex = self.value(sub, f"{ptr}/patternProperties/{_escape_token(pat)}", stack)
            else:
                value_regex = self.value({"allOf": list(patterns.values())}, f"{ptr}/patternProperties", stack)
        elif extra is not False:
            value_regex = self.value(extra, f"{ptr}/additionalProperties", stack) if extra is not True \
                else self.any_value_inside()
        if "propertyNames" in s:
            names = self.value({"allOf": [{"type": "string"}, s["propertyNames"]]}, f"{ptr}/propertyNames", stack)
            if names is None and not patterns:  # no name is allowed: only the empty object
                return None if min_p > 0 else rf"\{{{self.ws}\}}"
            if patterns or names is None:
                raise UnsupportedSchemaError(
                    "propertyNames", ptr,
                    "propertyNames must be a satisfiable string schema, without patternProperties")
            key_regex = names
        if value_regex is None:
            if min_p > 0 and patterns:  # other keys may exist, but only pattern keys are written
                self.dropped = self.dropped or UnsupportedSchemaError(
                    "patternProperties", ptr, "no value satisfies the patterns' schemas, and only keys "
                    "matching a pattern are generated")
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
