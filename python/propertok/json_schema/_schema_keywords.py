"""Reading keyword values for :mod:`propertok.json_schema`: the error types, numeric bounds,
counts, ``multipleOf``, ``dependencies``, and whether an ``enum``/``const`` value satisfies its
sibling keywords. Kept apart from the schema walker so that each stays short; nothing here
builds regexes except through :mod:`propertok._json_regex`.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Optional, Tuple

from . import _json_regex as J

# The keywords that constrain one JSON type only (other types satisfy them). A schema without
# ``type`` generates the types its keywords name here; every value-constraining keyword the
# converter accepts is either here or applies to all types (json_schema.GENERIC).
_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "patternProperties",
               "propertyNames", "minProperties", "maxProperties", "unevaluatedProperties",
               "dependencies", "dependentRequired", "dependentSchemas"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
              "contains", "minContains", "maxContains", "unevaluatedItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


class UnsupportedSchemaError(ValueError):
    """The schema uses a keyword (or a value of it) that cannot be turned into a regex.

    ``keyword`` is the keyword, ``pointer`` the JSON pointer (``#/properties/a``) of the
    schema that holds it. ``limit`` names the converter's own limit that refused the schema
    (``"MAX_BRANCHES"``, ``"MAX_REGEX_CHARS"``, ``"MAX_CONVERT_SECONDS"``, ``"recursion"``: the
    schema may be fine, only too large to convert), ``None`` for any other refusal.
    """

    __module__ = "propertok.json_schema"  # where users import it from

    def __init__(self, keyword: Optional[str], pointer: str, reason: str, *, limit: Optional[str] = None):
        self.keyword, self.pointer, self.reason, self.limit = keyword, pointer, reason, limit
        where = f"'{keyword}' at {pointer}" if keyword else pointer
        super().__init__(f"{where}: {reason}")


class InvalidSchemaError(UnsupportedSchemaError):
    """The schema is malformed (not JSON, a keyword with a value of the wrong type, a dangling
    ``$ref``) or no JSON value satisfies it."""

    __module__ = "propertok.json_schema"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and _json_type(a) == _json_type(b)


# ---------------------------------------------------------------------------------------------
# Keyword values
# ---------------------------------------------------------------------------------------------


def _dependencies_as_any_of(deps: Any, key: str, ptr: str) -> dict:
    """``{"a": ["b"]}`` (or ``{"a": schema}``) as "a absent, or a and b present (or a present
    and the schema)": an ``anyOf`` per entry, which ``merge`` multiplies out."""
    if not isinstance(deps, dict):
        raise InvalidSchemaError(key, ptr, "must be an object")
    out: dict = {}
    for name, dep in deps.items():
        if isinstance(dep, list):
            present: Any = {"required": [name] + [d for d in dep if d != name]}
        else:
            present = {"allOf": [{"required": [name]}, dep]}
        absent = {"properties": {name: False}}
        out = {"anyOf": [{"allOf": [x, y]} for x in out.get("anyOf", [{}]) for y in (absent, present)]}
    return out


def _literal_values(flat: dict) -> Optional[list]:
    """The values an ``enum``/``const`` schema allows, None when it has neither."""
    if "const" in flat:
        return [flat["const"]]
    enum = flat.get("enum")
    return enum if isinstance(enum, list) else None


def _decimal(value: Any) -> Optional[Decimal]:
    """A bound as the decimal its JSON text shows (``0.1`` is 0.1, not the binary float)."""
    return None if value is None else Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _count(s: dict, key: str, ptr: str, default: Optional[int]) -> Optional[int]:
    v = s.get(key, default)
    if v is None:
        return None
    if not _numbers(v) or v < 0 or not float(v).is_integer():
        raise InvalidSchemaError(key, ptr, f"must be a non-negative integer, got {v!r}")
    return int(v)


def _python_search(pattern: Any, text: str, ptr: str, keyword: str = "pattern", what: str = "the constant"):
    """``pattern`` (ECMA-262) searched in ``text`` with Python's ``re``, where the two agree.

    They differ on ``$`` before a final newline (Python matches there), on ``.`` against
    ``\\r``, U+2028 and U+2029 (ECMA excludes them), and on ``\\d``/``\\w``/``\\b`` against
    non-ASCII text (Unicode in Python, ASCII in ECMA): such a pair raises (naming ``keyword``)
    rather than be judged wrongly in either direction. ``what`` says what ``text`` is."""
    if isinstance(pattern, str) and (
            (text.endswith("\n") and "$" in pattern)
            or ("." in pattern and any(c in text for c in "\r\u2028\u2029"))
            or (not text.isascii() and re.search(r"\\[dDwWsSbB]", pattern))):
        raise UnsupportedSchemaError(
            keyword, ptr, f"cannot check {what} {text!r} against {pattern!r} exactly (ECMA-262 and "
            "Python regexes differ there)")
    try:
        return re.search(pattern, text)
    except (re.error, TypeError) as e:
        raise UnsupportedSchemaError(keyword, ptr, f"cannot check {what} {text!r} against {pattern!r}: {e}") from None


def _multiple(m: Any, ptr: str) -> Decimal:
    """``multipleOf`` as the decimal its JSON text shows."""
    if not _numbers(m) or m <= 0:
        raise InvalidSchemaError("multipleOf", ptr, f"must be a number > 0, got {m!r}")
    return _decimal(m)


def _bound(s: dict, key: str, exclusive_key: str, ptr: str) -> Tuple[Optional[float], bool]:
    """The tightest bound of ``key``/``exclusive_key`` (draft 4: a boolean exclusive flag)."""
    value, excl = s.get(key), s.get(exclusive_key)
    if value is not None and not _numbers(value):
        raise InvalidSchemaError(key, ptr, f"must be a number, got {value!r}")
    if isinstance(excl, bool):
        return value, excl and value is not None
    if excl is not None and not _numbers(excl):
        raise InvalidSchemaError(exclusive_key, ptr, f"must be a number, got {excl!r}")
    if excl is None:
        return value, False
    if value is None:
        return excl, True
    lower = key == "minimum"
    if (excl >= value) if lower else (excl <= value):
        return excl, True
    return value, False


def _json_key(value: Any) -> str:
    """A key equal for equal JSON values (``1`` and ``1.0`` alike, ``true`` and ``1`` not)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "n" + str(Decimal(repr(value)).normalize()) if isinstance(value, float) else "n" + str(Decimal(value).normalize())
    if isinstance(value, list):
        return "[" + ",".join(_json_key(v) for v in value) + "]"
    return "{" + ",".join(json.dumps(k) + ":" + _json_key(value[k]) for k in sorted(value)) + "}"


def _literal_ok(value: Any, s: dict, ptr: str, strict: bool) -> bool:
    """Whether an ``enum``/``const`` value satisfies the sibling keywords of its schema."""
    t = _json_type(value)
    types = s.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if t not in names and not (t == "integer" and "number" in names):
            return False
    checked = {"type", "enum", "const"}
    if t == "string":
        checked |= {"minLength", "maxLength", "pattern"}
        if not (s.get("minLength", 0) <= len(value) <= s.get("maxLength", math.inf)):
            return False
        if "pattern" in s and _python_search(s["pattern"], value, ptr) is None:
            return False
        fmt = s.get("format")
        if fmt in J.FORMATS:
            checked.add("format")
            if re.fullmatch(J.FORMATS[fmt], value) is None:
                return False
    if t in ("integer", "number"):
        checked |= set(_TYPE_KEYWORDS["number"])
        if "multipleOf" in s and Fraction(_decimal(value)) % Fraction(_multiple(s["multipleOf"], ptr)) != 0:
            return False
        lo, lo_x = _bound(s, "minimum", "exclusiveMinimum", ptr)
        hi, hi_x = _bound(s, "maximum", "exclusiveMaximum", ptr)
        if lo is not None and (value <= lo if lo_x else value < lo):
            return False
        if hi is not None and (value >= hi if hi_x else value > hi):
            return False
    if t == "array":
        checked |= {"minItems", "maxItems", "uniqueItems"}
        if not (s.get("minItems", 0) <= len(value) <= s.get("maxItems", math.inf)):
            return False
        if s.get("uniqueItems") is True and len({_json_key(v) for v in value}) < len(value):
            return False
    if t == "object":
        checked |= {"required"}
        if any(r not in value for r in s.get("required", [])):
            return False
    family = "number" if t == "integer" else t
    for k in s:
        if k not in checked and k in _TYPE_KEYWORDS.get(family, ()):
            if k == "format" and not strict:
                continue
            raise UnsupportedSchemaError(k, ptr, "this keyword alongside enum/const is not supported")
    return True
