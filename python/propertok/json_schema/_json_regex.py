"""Regex building blocks for JSON text: literals, strings, numbers, integer ranges and formats.

Used by :mod:`propertok.json_schema`. Every function returns a regex in the syntax of Rust's
``regex-syntax`` (what ``propertok.ByteDfa`` and ``Compiler.compile_regex`` parse), matched against
the whole text, never a prefix. Rules kept throughout, because the Rust and Python engines differ:

* no look-around and no backreferences (regex-automata has neither);
* ``[0-9]``, never ``\\d`` (Rust's ``\\d`` is every Unicode decimal digit, JSON's digits are ASCII);
* characters outside printable ASCII are written ``\\x{HEX}`` so a regex prints and diffs cleanly.

JSON strings follow RFC 8259: any Unicode scalar value except ``"``, ``\\`` and U+0000-U+001F
appears raw; those are written as the escapes ``\\" \\\\ \\b \\f \\n \\r \\t`` or ``\\uXXXX``.
Lengths (``minLength``/``maxLength``) count code points as JSON Schema does, so a string
"character" is one raw scalar value, one short escape, one ``\\uXXXX`` escape of a non-surrogate,
or one surrogate pair ``\\uD8xx\\uDCxx``; lone surrogates (not Unicode text) are never produced.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import List, Optional, Sequence, Tuple

# Characters that are special somewhere in Rust regex syntax (outside or inside a class).
_META = set("\\.+*?()|[]{}^$#&-~")
HEX = "[0-9a-fA-F]"
# \u escapes: a non-surrogate BMP code point, or a surrogate pair (one code point). \p{AHex} is
# [0-9A-Fa-f] (ASCII_Hex_Digit), written so because these units are repeated wherever a string is
# and the regexes of large schemas hold them thousands of times.
_U_NON_SURROGATE = r"(?:(?:[0-9a-cA-CeEfF]\p{AHex}|[dD][0-7])\p{AHex}{2})"
_U_PAIR = r"[dD][89abAB]\p{AHex}{2}\\u[dD][c-fC-F]\p{AHex}{2}"
# One character of a JSON string, as JSON Schema counts characters.
STRING_CHAR = r'(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u(?:' + _U_NON_SURROGATE + "|" + _U_PAIR + ")))"
# The same without surrogate-pair escapes (astral characters stay raw), for counted repetitions:
# each repetition copies the unit's DFA states (about 16 instead of 24 bytes-states per character).
BOUNDED_STRING_CHAR = r'(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u' + _U_NON_SURROGATE + "))"
# Short escapes JSON has for some control characters (json.dumps uses them, \u00XX for the rest).
SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}

NULL = "null"
BOOLEAN = "(?:true|false)"
INTEGER = "(?:0|-?[1-9][0-9]*)"  # no "-0"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"

# Counted repetitions are expanded by the regex compiler and the byte DFA grows with the count
# (a bounded string costs about 16 DFA states per character), so upper bounds past this are
# lowered to it: shorter strings and arrays are generated, never invalid ones.
MAX_COUNT = 256


def escape_char(c: str) -> str:
    """One character as a regex literal outside a class."""
    cp = ord(c)
    if c in _META:
        return "\\" + c
    if 0x20 < cp < 0x7F or c == " ":
        return c
    return "\\x{%X}" % cp


def escape_literal(text: str) -> str:
    return "".join(escape_char(c) for c in text)


def class_char(cp: int) -> str:
    """One code point inside a character class."""
    c = chr(cp)
    if c in _META:
        return "\\" + c
    if 0x20 <= cp < 0x7F:
        return c
    return "\\x{%X}" % cp


def alternation(options: Sequence[str]) -> str:
    """``(?:a|b|...)`` without duplicates (order kept); a single option is returned as is."""
    seen: List[str] = []
    for o in options:
        if o not in seen:
            seen.append(o)
    if len(seen) == 1:
        return seen[0]
    return "(?:" + "|".join(seen) + ")"


def repeat(unit: str, lo: int, hi: Optional[int]) -> str:
    """``unit`` repeated ``lo..hi`` times (``hi`` None: unbounded); ``unit`` must be atomic."""
    if hi is not None and hi == lo:
        return "" if lo == 0 else (unit if lo == 1 else f"{unit}{{{lo}}}")
    if hi is None:
        return f"{unit}*" if lo == 0 else (f"{unit}+" if lo == 1 else f"{unit}{{{lo},}}")
    if (lo, hi) == (0, 1):
        return f"{unit}?"
    return f"{unit}{{{lo},{hi}}}"


def json_string_content(text: str) -> str:
    """The characters of ``text`` as they may appear inside a JSON string literal: ASCII in the
    spelling ``json.dumps`` uses, every non-ASCII character either raw or ``\\u``-escaped (what
    ``json.dumps(..., ensure_ascii=True)``, Python's default, writes)."""
    out = []
    for c in text:
        cp = ord(c)
        if cp in SHORT_ESCAPES:
            out.append(escape_literal("\\" + SHORT_ESCAPES[cp]))
        elif cp < 0x20:
            out.append(escape_literal("\\u%04x" % cp))
        elif cp < 0x80:
            out.append(escape_char(c))
        else:
            units = [cp] if cp < 0x10000 else _surrogates(cp)
            escaped = "".join(r"\\u" + "".join(_hex_digit_class(d) for d in "%04x" % u) for u in units)
            out.append(f"(?:{escape_char(c)}|{escaped})")
    return "".join(out)


def _surrogates(cp: int) -> List[int]:
    v = cp - 0x10000
    return [0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)]


def _hex_digit_class(d: str) -> str:
    return f"[{d.lower()}{d.upper()}]" if d.isalpha() else d


def literal(value, ws: str) -> str:
    """A JSON value as a regex: ``ws`` between structural tokens, numbers spelled as
    ``json.dumps`` does (``1`` and ``1.0`` differ: draft 4 has no integer ``1.0``), strings as
    :func:`json_string_content`."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return escape_literal(str(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        return escape_literal(json.dumps(value))
    if isinstance(value, str):
        return '"' + json_string_content(value) + '"'
    if isinstance(value, list):
        if not value:
            return rf"\[{ws}\]"
        sep = f"{ws},{ws}"
        return rf"\[{ws}" + sep.join(literal(v, ws) for v in value) + rf"{ws}\]"
    if isinstance(value, dict):
        if not value:
            return rf"\{{{ws}\}}"
        sep = f"{ws},{ws}"
        items = [f'"{json_string_content(k)}"{ws}:{ws}{literal(v, ws)}' for k, v in value.items()]
        return rf"\{{{ws}" + sep.join(items) + rf"{ws}\}}"
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def string(min_length: int = 0, max_length: Optional[int] = None) -> str:
    """A JSON string of ``min_length..max_length`` characters (upper bound capped at MAX_COUNT)."""
    if max_length is None:
        return '"' + repeat(STRING_CHAR, min_length, None) + '"'
    max_length = min(max_length, max(min_length, MAX_COUNT))
    return '"' + repeat(BOUNDED_STRING_CHAR, min_length, max_length) + '"'


# ---------------------------------------------------------------------------------------------
# Integer ranges: the decimal spellings (no leading zeros, no "-0") of the integers in [lo, hi]
# ---------------------------------------------------------------------------------------------


def integer_range(lo: Optional[int], hi: Optional[int]) -> Optional[str]:
    """Regex for the integers in ``[lo, hi]`` (None: unbounded); None when the range is empty."""
    if lo is not None and hi is not None and lo > hi:
        return None
    if lo is None and hi is None:
        return INTEGER
    parts = []
    if hi is None or hi >= 0:  # the non-negative part
        parts.append(_uint_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:  # the negative part, as "-" and a magnitude in [max(-hi, 1), -lo]
        mag_lo = max(-hi, 1) if hi is not None else 1
        parts.append("-" + group(_uint_range(mag_lo, -lo if lo is not None else None)))
    return alternation(parts)


def group(regex: str) -> str:
    """``regex`` as one atom: itself when it already is one group, else wrapped in ``(?:...)``."""
    return regex if regex.startswith("(?:") and _is_one_group(regex) else f"(?:{regex})"


def _is_one_group(regex: str) -> bool:
    """Whether ``regex`` is one group ``(...)`` from its first to its last character."""
    depth, i = 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # skip a class
            i += 1
            while i < len(regex) and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and i != len(regex) - 1:
                return False
        i += 1
    return regex.endswith(")")


def _uint_range(lo: int, hi: Optional[int]) -> str:
    """Non-negative integers in [lo, hi] (hi None: unbounded), lo <= hi."""
    if hi is None and lo <= 1:
        return "(?:0|[1-9][0-9]*)" if lo == 0 else "[1-9][0-9]*"
    parts = []
    top = len(str(lo)) if hi is None else len(str(hi))
    for n in range(len(str(lo)), top + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = 10**n - 1 if hi is None else min(hi, 10**n - 1)
        if a <= b:
            parts.append(_same_length(str(a), str(b)))
    if hi is None:  # every number with more digits than lo
        parts.append(f"[1-9][0-9]{{{len(str(lo))},}}")
    return alternation(parts)


def _same_length(lo: str, hi: str) -> str:
    """Digit strings of one length between lo and hi (inclusive, lexicographic = numeric)."""
    if lo == hi:
        return lo
    if len(lo) == 1:
        return f"[{lo}-{hi}]"
    if lo[0] == hi[0]:
        return lo[0] + group(_same_length(lo[1:], hi[1:]))
    k = len(lo) - 1
    parts = []
    first, last = int(lo[0]), int(hi[0])
    if lo[1:] != "0" * k:
        parts.append(lo[0] + group(_same_length(lo[1:], "9" * k)))
        first += 1
    if hi[1:] != "9" * k:
        tail = hi[0] + group(_same_length("0" * k, hi[1:]))
        last -= 1
    else:
        tail = None
    if first <= last:
        digit = str(first) if first == last else f"[{first}-{last}]"
        parts.append(f"{digit}[0-9]{{{k}}}" if k > 1 else f"{digit}[0-9]")
    if tail is not None:
        parts.append(tail)
    return alternation(parts)


# ---------------------------------------------------------------------------------------------
# Numbers with bounds
# ---------------------------------------------------------------------------------------------

def number_range(
    lo: Optional[Decimal], lo_excl: bool, hi: Optional[Decimal], hi_excl: bool, max_fraction_digits: Optional[int]
) -> Optional[str]:
    """JSON numbers x with ``lo <(=) x <(=) hi`` (None: unbounded), exact for decimal bounds.

    Without bounds the exponent form is allowed; with a bound it is not (a subset: ``1e2`` is
    written ``100``). ``max_fraction_digits`` limits the digits after the point (``multipleOf``
    10^-k; 0 for integers). None when no number satisfies the bounds. ``-0`` is not produced.
    """
    if lo is None and hi is None:
        if max_fraction_digits is None:
            return NUMBER
        # "-0.5" is a number ("-0" alone too; INTEGER has no "-0")
        return r"-?(?:0|[1-9][0-9]*)" + (rf"(?:\.[0-9]{{1,{max_fraction_digits}}})?" if max_fraction_digits else "")
    parts = []
    zero = Decimal(0)
    if hi is None or hi > 0 or (hi == 0 and not hi_excl):  # x >= 0: magnitude in [max(lo, 0), hi]
        a, a_excl = (lo, lo_excl) if lo is not None and lo >= 0 else (zero, False)
        parts.append(_magnitude(a, a_excl, hi, hi_excl, max_fraction_digits))
    if lo is None or lo < 0:  # x < 0: magnitude -x in (max(-hi, 0), -lo]
        a, a_excl = (-hi, hi_excl) if hi is not None and hi < 0 else (zero, True)
        mag = _magnitude(a, a_excl, None if lo is None else -lo, lo_excl, max_fraction_digits)
        if mag is not None:
            parts.append("-" + group(mag))
    parts = [p for p in parts if p is not None]
    return alternation(parts) if parts else None


def _split(d: Decimal) -> Tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    text = format(d, "f")
    whole, _, frac = text.partition(".")
    return int(whole), frac.rstrip("0")


def _magnitude(
    a: Decimal, a_excl: bool, b: Optional[Decimal], b_excl: bool, budget: Optional[int]
) -> Optional[str]:
    """Unsigned decimals m = I[.F] with a <(=) m <(=) b (0 <= a), at most ``budget`` digits in F."""
    if b is not None and (b < a or (b == a and (a_excl or b_excl))):
        return None
    ai, af = _split(a)
    parts = []
    if b is not None:
        bi, bf = _split(b)
        if ai == bi:
            return _with_fraction(str(ai), _fractions(af, not a_excl, bf, not b_excl, budget))
    parts.append(_with_fraction(str(ai), _fractions(af, not a_excl, None, False, budget)))
    inner_hi = None if b is None else bi - 1
    if inner_hi is None or inner_hi >= ai + 1:
        parts.append(_with_fraction(group(_uint_range(ai + 1, inner_hi)), _fractions("", True, None, False, budget)))
    if b is not None:
        parts.append(_with_fraction(str(bi), _fractions("", True, bf, not b_excl, budget)))
    parts = [p for p in parts if p is not None]
    return alternation(parts) if parts else None


def _with_fraction(integer: str, fractions: Tuple[Optional[str], bool]) -> Optional[str]:
    digits, bare = fractions
    if digits is None:
        return integer if bare else None
    return integer + (rf"(?:\.{digits})?" if bare else rf"\.{digits}")


def _fractions(
    lo: str, lo_incl: bool, hi: Optional[str], hi_incl: bool, budget: Optional[int]
) -> Tuple[Optional[str], bool]:
    """Fraction digit strings D with lo <(=) 0.D <(=) hi (``lo``/``hi`` digit strings without
    trailing zeros, "" = 0; ``hi`` None: no upper bound), at most ``budget`` digits.
    Returns (regex of the non-empty D that qualify or None, whether no fraction at all does)."""
    bare = (lo == "" and lo_incl) and (hi is None or hi != "" or hi_incl)
    if budget == 0:
        return None, bare
    anything = repeat("[0-9]", 0, None if budget is None else budget - 1)
    if lo == "" and hi is None:
        if lo_incl:
            return repeat("[0-9]", 1, budget), bare
        if budget is None:
            return "[0-9]*[1-9][0-9]*", bare
        return alternation([f"0{{{z}}}[1-9]" + repeat("[0-9]", 0, budget - z - 1) for z in range(budget)]), bare
    if lo == "" and hi == "":
        return (repeat("0", 1, budget), bare) if lo_incl and hi_incl else (None, bare)
    l1, lrest = (int(lo[0]), lo[1:]) if lo else (0, "")
    h1, hrest = (10, None) if hi is None else ((int(hi[0]), hi[1:]) if hi else (0, ""))
    sub = None if budget is None else budget - 1
    options = []
    if l1 == h1:
        options.append(_digit_then(str(l1), _fractions(lrest, lo_incl, hrest, hi_incl, sub)))
    else:
        options.append(_digit_then(str(l1), _fractions(lrest, lo_incl, None, False, sub)))
        if l1 + 1 <= h1 - 1:
            digit = str(l1 + 1) if l1 + 1 == h1 - 1 else f"[{l1 + 1}-{h1 - 1}]"
            options.append(digit + anything)
        if h1 <= 9:
            options.append(_digit_then(str(h1), _fractions("", True, hrest, hi_incl, sub)))
    options = [o for o in options if o is not None]
    return (alternation(options) if options else None), bare


def _digit_then(digit: str, rest: Tuple[Optional[str], bool]) -> Optional[str]:
    digits, bare = rest
    if digits is None:
        return digit if bare else None
    return digit + (f"(?:{digits})?" if bare else group(digits))


# ---------------------------------------------------------------------------------------------
# Formats (the string content, without quotes). All ASCII, so no JSON escaping is involved.
# ---------------------------------------------------------------------------------------------

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # 0001-9999: year 0 is invalid
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
# RFC 3339 full-time; seconds 00-59 (validators reject the leap second 60), upper-case Z.
TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
DATE_TIME = f"{DATE}T{TIME}"
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"


def _ldh_label(max_len: int) -> str:
    """An RFC 1123 label of at most ``max_len`` characters that is not *reserved*: no ``--`` in
    its 3rd and 4th characters (RFC 5891 4.2.3.1), so no ``xn--`` A-label, whose Punycode and
    IDNA rules a regular language cannot state."""
    a, m = "[a-zA-Z0-9]", "[a-zA-Z0-9-]"
    return f"{a}(?:{a}|{m}{a}|{m}[a-zA-Z0-9-]{a}|{m}(?:{a}{m}|-{a}){m}{{0,{max_len - 5}}}{a})?"


_LABEL = _ldh_label(63)
# At most 253 characters in all (RFC 1034): up to 3 labels of 63 characters, or 4 to 8 of 30.
HOSTNAME = rf"(?:{_LABEL}(?:\.{_LABEL}){{0,2}}|{_ldh_label(30)}(?:\.{_ldh_label(30)}){{3,7}})"
# RFC 5321 dot-atom local part @ a hostname (no quoted local parts, no address literals).
_ATOM = r"[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\-]+"
EMAIL = rf"{_ATOM}(?:\.{_ATOM})*@{HOSTNAME}"
# RFC 3986 URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ], IPv6 literals left out.
_PCT = "%[0-9a-fA-F]{2}"
_UNRESERVED_SUB = r"[a-zA-Z0-9\-._~!$&'()*+,;=]"
_PCHAR = f"(?:{_UNRESERVED_SUB}|{_PCT}|[:@])"
_AUTHORITY = (
    rf"(?:(?:{_UNRESERVED_SUB}|{_PCT}|:)*@)?(?:{IPV4}|(?:{_UNRESERVED_SUB}|{_PCT})*)(?::[0-9]*)?"
)
_HIER = rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR}+(?:/{_PCHAR}*)*)?"
_QUERY_FRAGMENT = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
URI = rf"[a-zA-Z][a-zA-Z0-9+\-.]*:{_HIER}{_QUERY_FRAGMENT}"
# RFC 3986 relative-ref: like hier-part, but a first segment without ":" (path-noscheme).
_SEGMENT_NC = rf"(?:{_UNRESERVED_SUB}|{_PCT}|@)+"
_RELATIVE = rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_SEGMENT_NC}(?:/{_PCHAR}*)*)?"
URI_REFERENCE = rf"(?:{URI}|{_RELATIVE}{_QUERY_FRAGMENT})"
# RFC 4291 text forms (no zone index, no embedded IPv4).
_H16 = "[0-9a-fA-F]{1,4}"
IPV6 = (
    f"(?:(?:{_H16}:){{7}}{_H16}|(?:{_H16}:){{1,7}}:|(?:{_H16}:){{1,6}}:{_H16}"
    f"|(?:{_H16}:){{1,5}}(?::{_H16}){{1,2}}|(?:{_H16}:){{1,4}}(?::{_H16}){{1,3}}"
    f"|(?:{_H16}:){{1,3}}(?::{_H16}){{1,4}}|(?:{_H16}:){{1,2}}(?::{_H16}){{1,5}}"
    f"|{_H16}:(?::{_H16}){{1,6}}|:(?::{_H16}){{1,7}}|::)"
)

FORMATS = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "uuid": UUID,
    "email": EMAIL,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "hostname": HOSTNAME,
}
# (min, max) length of each format's strings, None when unbounded (to check minLength/maxLength).
FORMAT_LENGTHS = {
    "date": (10, 10),
    "uuid": (36, 36),
    "ipv4": (7, 15),
    "ipv6": (2, 39),
    "uri-reference": (0, None),
    "time": (14, None),
    "date-time": (25, None),
    "email": (3, None),
    "uri": (2, None),
    "hostname": (1, 247),
}


def length_bounds(lo: int, hi: Optional[int], within: Tuple[int, Optional[int]]) -> bool:
    """Whether every length in ``within`` lies in ``[lo, hi]``."""
    w_lo, w_hi = within
    return w_lo >= lo and (hi is None or (w_hi is not None and w_hi <= hi))
