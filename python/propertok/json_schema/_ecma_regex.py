"""JSON Schema ``pattern`` (ECMA-262 syntax) -> a Rust regex over the *JSON-encoded* string.

A schema's ``pattern`` constrains the decoded string, but the guide matches JSON text, where ``"``
and ``\\`` are escaped and control characters must be. Pasting the pattern between quotes (what
outlines-core does) lets ``[^,]+`` produce an unescaped ``"`` (broken JSON) and reads ``\\d``
as Unicode digits. So the pattern is parsed into character sets, concatenation, alternation and
repetition, and each character set is rewritten into the JSON spellings of its members: raw where
JSON allows, else the escape ``json.dumps`` writes; non-ASCII members also as ``\\uXXXX`` escapes
(what ``json.dumps(..., ensure_ascii=True)`` writes).

Semantics, chosen so that every generated string is valid (a subset where exactness is not
possible):

* JSON Schema patterns *search* (``"pattern": "a"`` accepts ``"cat"``). A top-level alternative
  anchored at both ends or at neither must match the whole string (authors who write
  ``[0-9a-f]+`` mean the whole string); one anchored only at the start (``^pkg:``) is a prefix
  (any characters may follow), one anchored only at the end a suffix; an empty one (the
  pattern ``""``) matches every string. Anchors elsewhere,
  look-around, backreferences, ``\\b`` and ``\\p{..}`` raise :class:`PatternError`.
* ``\\d \\w \\s`` are ECMA's ASCII classes, intersected with Python's ``re`` classes where they
  differ (``jsonschema`` validates with Python's ``re``), so both validators accept the output.
* Bounded repetitions above ``MAX_COUNT`` are lowered to it.
"""

from __future__ import annotations

import functools
import sys
from typing import List, Optional, Tuple

from . import _json_regex as J

MAX_CP = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
Ranges = Tuple[Tuple[int, int], ...]


class PatternError(ValueError):
    """The pattern uses something that cannot be translated (the message says what)."""


# ---------------------------------------------------------------------------------------------
# Sets of code points as sorted, disjoint, inclusive ranges (surrogates never included)
# ---------------------------------------------------------------------------------------------


def _norm(ranges) -> Ranges:
    out: List[List[int]] = []
    for lo, hi in sorted(ranges):
        for a, b in ((lo, min(hi, _SURROGATES[0] - 1)), (max(lo, _SURROGATES[1] + 1), hi)):
            if a > b:
                continue
            if out and a <= out[-1][1] + 1:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
    return tuple((a, b) for a, b in out)


def _complement(r: Ranges) -> Ranges:
    out, start = [], 0
    for lo, hi in r:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CP:
        out.append((start, MAX_CP))
    return _norm(out)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    return _complement(_norm(_complement(a) + _complement(b)))


def _contains(r: Ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in r)


def _chars(text: str) -> Ranges:
    return _norm((ord(c), ord(c)) for c in text)


_DIGIT = _norm([(0x30, 0x39)])
_WORD = _norm([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
_SPACE_ECMA = _norm(
    [(9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
     (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)
_LINE_TERMINATORS = _chars("\n\r\u2028\u2029")
_NON_ASCII = _norm([(0x80, MAX_CP)])
_JSON_SPECIAL = _norm([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])  # must be escaped in JSON


@functools.lru_cache(maxsize=None)
def _python_class(name: str) -> Ranges:
    """Code points of Python's (Unicode) ``\\d``, ``\\w`` or ``\\s``. ``jsonschema`` checks
    patterns with Python's ``re``, where these are wider than ECMA's. Computed once, when used."""
    test = {"d": str.isdecimal, "w": lambda c: c.isalnum() or c == "_", "s": str.isspace}[name]
    top = 0xFFFF if name == "s" else sys.maxunicode
    cps = [cp for cp in range(top + 1) if not 0xD800 <= cp <= 0xDFFF and test(chr(cp))]
    return _norm((cp, cp) for cp in cps)


def _class_escape(letter: str) -> Tuple[Ranges, Ranges]:
    """``(sure, maybe)`` for ``\\d \\w \\s`` and their complements: ``sure`` is in the class
    for both ECMA and Python, ``maybe`` for either. A positive class uses ``sure`` and a negated
    one excludes ``maybe``, so what is generated matches under both engines."""
    ecma = {"d": _DIGIT, "w": _WORD, "s": _SPACE_ECMA}[letter.lower()]
    python = _python_class(letter.lower())
    sure, maybe = _intersect(ecma, python), _norm(ecma + python)
    if letter.islower():
        return sure, maybe
    return _complement(maybe), _complement(sure)


# ---------------------------------------------------------------------------------------------
# Parser: ECMA-262 pattern syntax (Annex B leniency for a literal "{", "}" and "]")
# ---------------------------------------------------------------------------------------------
# Nodes: ("set", ranges) | ("cat", [nodes]) | ("alt", [nodes]) | ("group", node)
#        | ("rep", node, lo, hi|None) | ("start",) | ("end",)


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0

    def error(self, what: str) -> PatternError:
        return PatternError(f"{what} at offset {self.i} of pattern {self.p!r}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self):
        node = self.disjunction()
        if self.i < len(self.p):
            raise self.error("unbalanced ')'")
        return node

    def disjunction(self):
        branches = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.alternative())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def alternative(self):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            items.append(self.term())
        return ("cat", items)

    def term(self):
        c = self.peek()
        if c == "^":
            self.i += 1
            return ("start",)
        if c == "$":
            self.i += 1
            return ("end",)
        atom = self.atom()
        return self.quantified(atom)

    def quantified(self, atom):
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        elif c == "{" and self.quantifier_ahead():
            lo, hi = self.braces()
        else:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        if atom[0] in ("start", "end"):
            raise self.error("quantified anchor")
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} with min > max")
        return ("rep", atom, lo, hi)

    def quantifier_ahead(self) -> bool:
        j = self.i + 1
        digits = j
        while j < len(self.p) and self.p[j].isdigit():
            j += 1
        if j == digits:
            return False
        if j < len(self.p) and self.p[j] == "}":
            return True
        if j < len(self.p) and self.p[j] == ",":
            j += 1
            while j < len(self.p) and self.p[j].isdigit():
                j += 1
            return j < len(self.p) and self.p[j] == "}"
        return False

    def braces(self) -> Tuple[int, Optional[int]]:
        end = self.p.index("}", self.i)
        body = self.p[self.i + 1 : end]
        self.i = end + 1
        if "," not in body:
            return int(body), int(body)
        lo, hi = body.split(",", 1)
        return int(lo), (int(hi) if hi else None)

    def atom(self):
        c = self.peek()
        if c == "(":
            return self.group()
        if c == ".":
            self.i += 1
            return ("set", _complement(_LINE_TERMINATORS))
        if c == "[":
            return ("set", self.char_class())
        if c == "\\":
            return self.escape_atom()
        if c in "*+?":
            raise self.error(f"nothing to repeat before {c!r}")
        if c == "{" and self.quantifier_ahead():
            raise self.error("nothing to repeat before '{'")
        self.i += 1
        return ("set", _chars(c))

    def group(self):
        self.i += 1
        if self.peek() == "?":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith(("?=", "?!", "?<=", "?<!"), self.i):
                raise self.error("look-around is not supported (regex-automata has none)")
            elif self.p.startswith("?<", self.i) or self.p.startswith("?P<", self.i):
                self.i = self.p.index(">", self.i) + 1  # named group
            else:
                raise self.error("unsupported group syntax")
        inner = self.disjunction()
        if self.peek() != ")":
            raise self.error("missing ')'")
        self.i += 1
        return ("group", inner)

    def escape_atom(self):
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.error("trailing backslash")
        if c in "bB":
            raise self.error(f"word boundary \\{c} is not supported")
        if c.isdigit() and c != "0":
            raise self.error("backreferences are not supported")
        if c == "k" and self.peek(1) == "<":
            raise self.error("named backreferences are not supported")
        return ("set", self.escape_body(in_class=False)[0])

    def escape_body(self, in_class: bool) -> Tuple[Ranges, Ranges]:
        """After a backslash: the ``(sure, maybe)`` sets of the escape (see _class_escape)."""
        c = self.peek()
        self.i += 1
        if c in "dDwWsS":
            return _class_escape(c)
        one = self.char_escape(c, in_class)
        return one, one

    def char_escape(self, c: str, in_class: bool) -> Ranges:
        if c in "pP":
            raise self.error("Unicode property escapes (\\p, \\P) are not supported")
        simple = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v"}
        if c in simple:
            return _chars(simple[c])
        if c == "b" and in_class:
            return _chars("\b")
        if c == "0" and not self.peek().isdigit():
            return _chars("\0")
        if c == "c" and self.peek().isalpha():
            self.i += 1
            return _chars(chr(ord(self.p[self.i - 1]) % 32))
        if c == "x" and _is_hex(self.p[self.i : self.i + 2]):
            self.i += 2
            return _chars(chr(int(self.p[self.i - 2 : self.i], 16)))
        if c == "u":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                if end < 0 or not _is_hex(self.p[self.i + 1 : end]):
                    raise self.error("malformed \\u{...}")
                cp = int(self.p[self.i + 1 : end], 16)
                self.i = end + 1
                return _norm([(cp, cp)])
            if _is_hex(self.p[self.i : self.i + 4]):
                cp = int(self.p[self.i : self.i + 4], 16)
                self.i += 4
                return _norm([(cp, cp)])
        if c.isalnum():
            raise self.error(f"unknown escape \\{c}")
        return _chars(c)  # identity escape: \. \/ \- ...

    def char_class(self) -> Ranges:
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        sure: List[Tuple[int, int]] = []
        maybe: List[Tuple[int, int]] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.error("unterminated character class")
            if c == "]":  # ECMA: "[]" is the empty class, "[^]" any character
                self.i += 1
                break
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_atom()
                if _single(lo) and _single(hi):
                    a, b = lo[0][0][0], hi[0][0][0]
                    if a > b:
                        raise self.error("reversed class range")
                    sure.append((a, b))
                    maybe.append((a, b))
                    continue
                for part in (lo, ((((0x2D, 0x2D),), ((0x2D, 0x2D),))), hi):  # [\d-x]: "-" literal
                    sure.extend(part[0])
                    maybe.extend(part[1])
                continue
            sure.extend(lo[0])
            maybe.extend(lo[1])
        return _complement(_norm(maybe)) if negate else _norm(sure)

    def class_atom(self) -> Tuple[Ranges, Ranges]:
        c = self.peek()
        if c == "\\":
            self.i += 1
            return self.escape_body(in_class=True)
        if c == "[" and self.peek(1) in (":", "=", "."):
            raise self.error("POSIX classes are not ECMA-262 syntax")
        self.i += 1
        return _chars(c), _chars(c)


def _single(pair: Tuple[Ranges, Ranges]) -> bool:
    sure, maybe = pair
    return sure == maybe and len(sure) == 1 and sure[0][0] == sure[0][1]


def _is_hex(s: str) -> bool:
    return bool(s) and all(ch in "0123456789abcdefABCDEF" for ch in s)


# ---------------------------------------------------------------------------------------------
# Anchors, lengths, rendering
# ---------------------------------------------------------------------------------------------


def _has_anchor(node) -> bool:
    kind = node[0]
    if kind in ("start", "end"):
        return True
    if kind in ("cat", "alt"):
        return any(_has_anchor(n) for n in node[1])
    if kind in ("group", "rep"):
        return _has_anchor(node[1])
    return False


def _alternatives(node, start: bool = False, end: bool = False) -> List[Tuple[bool, bool, object]]:
    """Top-level alternatives as ``(anchored_at_start, anchored_at_end, body)``."""
    if node[0] == "group" and _has_anchor(node):
        return _alternatives(node[1], start, end)
    if node[0] == "alt":
        return [a for b in node[1] for a in _alternatives(b, start, end)]
    if node[0] == "cat":
        items = list(node[1])
        while items and items[0][0] == "start":
            items.pop(0)
            start = True
        while items and items[-1][0] == "end":
            items.pop()
            end = True
        if len(items) == 1 and _has_anchor(items[0]) and items[0][0] in ("group", "alt", "cat"):
            return _alternatives(items[0], start, end)
        if any(_has_anchor(n) for n in items):
            raise PatternError("anchors (^, $) are only supported at the start or end of the pattern")
        return [(start, end, ("cat", items))]
    if node[0] in ("start", "end"):
        return [(start or node[0] == "start", end or node[0] == "end", ("cat", []))]
    if _has_anchor(node):
        raise PatternError("anchors (^, $) are only supported at the start or end of the pattern")
    return [(start, end, node)]


def _length(node) -> Tuple[int, Optional[int]]:
    """(min, max) number of code points the node matches (max None: unbounded)."""
    kind = node[0]
    if kind == "set":
        return (1, 1) if node[1] else (0, 0)
    if kind == "group":
        return _length(node[1])
    if kind == "cat":
        lo, hi = 0, 0
        for n in node[1]:
            a, b = _length(n)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if kind == "alt":
        ls = [_length(n) for n in node[1]]
        return min(a for a, _ in ls), (None if any(b is None for _, b in ls) else max(b for _, b in ls))
    if kind == "rep":
        a, b = _length(node[1])
        hi = None if node[3] is None or b is None else b * node[3]
        return a * node[2], (0 if b == 0 else hi)
    return 0, 0


def _encoded_set(r: Ranges) -> Optional[str]:
    """The JSON spellings of the code points in ``r`` (None when ``r`` is empty)."""
    options = []
    raw = _intersect(r, _complement(_JSON_SPECIAL))
    if raw:
        options.append(_render_class(raw))
    for lo, hi in _intersect(r, _JSON_SPECIAL):
        for cp in range(lo, hi + 1):
            if cp in J.SHORT_ESCAPES:
                options.append(J.escape_literal("\\" + J.SHORT_ESCAPES[cp]))
            else:
                options.append(J.escape_literal("\\u%04x" % cp))
    non_ascii = _intersect(r, _NON_ASCII)
    if non_ascii:
        options.append(_unicode_escapes(non_ascii))
    if not options:
        return None
    return J.alternation(options)


def _render_class(r: Ranges) -> str:
    if len(r) == 1 and r[0][0] == r[0][1]:
        return J.escape_char(chr(r[0][0]))
    comp = _complement(r)
    if len(comp) < len(r):
        return "[^" + _class_body(comp) + "]"
    return "[" + _class_body(r) + "]"


def _class_body(r: Ranges) -> str:
    parts = []
    for lo, hi in r:
        if lo == hi:
            parts.append(J.class_char(lo))
        elif hi == lo + 1:
            parts.append(J.class_char(lo) + J.class_char(hi))
        else:
            parts.append(f"{J.class_char(lo)}-{J.class_char(hi)}")
    return "".join(parts)


def _unicode_escapes(r: Ranges) -> str:
    """``\\uXXXX`` spellings (either case) of the non-ASCII code points in ``r``: BMP ranges
    exactly; astral code points (surrogate pairs) only when ``r`` holds all of them."""
    options = []
    for lo, hi in r:
        a, b = lo, min(hi, 0xFFFF)
        if a <= b:
            options.append(r"\\u" + J.group(_hex_range("%04x" % a, "%04x" % b)))
    if _contains(r, 0x10000) and _intersect(r, _norm([(0x10000, MAX_CP)])) == ((0x10000, MAX_CP),):
        options.append(r"\\u" + J._U_PAIR)
    return J.alternation(options)


def _hex_class(a: int, b: int) -> str:
    digits = "0123456789abcdef"[a : b + 1]
    letters = [d for d in digits if d.isalpha()]
    body = "".join(d for d in digits if d.isdigit())
    if letters:
        body += "".join(letters) + "".join(d.upper() for d in letters)
    return body[0] if len(body) == 1 else f"[{body}]"


def _hex_range(lo: str, hi: str) -> str:
    """Hex strings of one length between lo and hi (lower-case inputs), either case."""
    if lo == hi:
        return "".join(_hex_class(int(d, 16), int(d, 16)) for d in lo)
    if len(lo) == 1:
        return _hex_class(int(lo, 16), int(hi, 16))
    if lo[0] == hi[0]:
        return _hex_class(int(lo[0], 16), int(lo[0], 16)) + J.group(_hex_range(lo[1:], hi[1:]))
    k = len(lo) - 1
    first, last = int(lo[0], 16), int(hi[0], 16)
    parts = []
    if lo[1:] != "0" * k:
        parts.append(_hex_class(first, first) + J.group(_hex_range(lo[1:], "f" * k)))
        first += 1
    tail = None
    if hi[1:] != "f" * k:
        tail = _hex_class(last, last) + J.group(_hex_range("0" * k, hi[1:]))
        last -= 1
    if first <= last:
        parts.append(_hex_class(first, last) + (f"{J.HEX}{{{k}}}" if k > 1 else J.HEX))
    if tail:
        parts.append(tail)
    return J.alternation(parts)


def _render(node) -> str:
    kind = node[0]
    if kind == "set":
        out = _encoded_set(node[1])
        if out is None:
            raise PatternError("empty character class")
        return out
    if kind == "group":
        return f"(?:{_render(node[1])})"
    if kind == "cat":
        return "".join(_render(n) for n in node[1])
    if kind == "alt":
        return "(?:" + "|".join(_render(n) for n in node[1]) + ")"
    if kind == "rep":
        _, inner, lo, hi = node
        if lo > J.MAX_COUNT:
            raise PatternError(f"repetition of at least {lo} (more than {J.MAX_COUNT})")
        if hi is not None and hi > J.MAX_COUNT:
            hi = J.MAX_COUNT
        return J.repeat(f"(?:{_render(inner)})", lo, hi)
    raise AssertionError(kind)


def _fit_length(body, lo: int, hi: Optional[int]):
    """``body`` restricted to lengths in [lo, hi], or None when no way to do it is known.
    Returns ("empty",) when no string of ``body`` has such a length."""
    b_lo, b_hi = _length(body)
    if J.length_bounds(lo, hi, (b_lo, b_hi)):
        return body
    if (hi is not None and b_lo > hi) or (b_hi is not None and b_hi < lo):
        return ("empty",)
    items = list(body[1]) if body[0] == "cat" else [body]
    while len(items) == 1 and items[0][0] == "group":
        items = list(items[0][1][1]) if items[0][1][0] == "cat" else [items[0][1]]
    variable = [i for i, n in enumerate(items) if _length(n)[0] != _length(n)[1]]
    if len(variable) != 1:
        return None
    k = variable[0]
    node = items[k]
    if node[0] != "rep" or _length(node[1]) != (1, 1):
        return None
    fixed = sum(_length(n)[0] for j, n in enumerate(items) if j != k)
    r_lo = max(node[2], lo - fixed)
    r_hi = node[3] if hi is None else (hi - fixed if node[3] is None else min(node[3], hi - fixed))
    if r_hi is not None and r_hi < r_lo:
        return ("empty",)
    items[k] = ("rep", node[1], r_lo, r_hi)
    return ("cat", items)


def pattern_to_regex(pattern: str, min_length: int = 0, max_length: Optional[int] = None) -> str:
    """The JSON string *content* (no quotes) of strings that match ``pattern`` (see the module
    docstring for the anchor rule) and have ``min_length..max_length`` characters.

    Raises :class:`PatternError` for syntax that cannot be translated, and when the length
    bounds cannot be combined with the pattern (only when they are implied by it, or the
    pattern's one variable part is a repeated single character).
    """
    tree = _Parser(pattern).parse()
    options = []
    for start, end, body in _alternatives(tree):
        if body == ("cat", []) and not (start and end):  # "", "^" or "$": every string matches
            start, end = True, False
        if start == end:
            fitted = _fit_length(body, min_length, max_length)
            if fitted is None:
                raise PatternError(
                    f"cannot combine pattern {pattern!r} with minLength/maxLength "
                    f"{min_length}..{max_length}"
                )
            if fitted != ("empty",):
                options.append(_render(fitted))
            continue
        b_lo, b_hi = _length(body)
        if b_lo != b_hi and (min_length > b_lo or max_length is not None):
            raise PatternError(
                f"cannot combine the {'prefix' if start else 'suffix'} pattern {pattern!r} with "
                f"minLength/maxLength {min_length}..{max_length}"
            )
        any_lo = max(min_length - b_lo, 0)
        any_hi = None if max_length is None else max_length - b_lo
        if any_hi is not None and any_hi < any_lo:
            continue
        if any_hi is not None:
            any_hi = min(any_hi, max(any_lo, J.MAX_COUNT))
        filler = J.repeat(J.STRING_CHAR if any_hi is None else J.BOUNDED_STRING_CHAR, any_lo, any_hi)
        options.append(_render(body) + filler if start else filler + _render(body))
    if not options:
        raise PatternError(f"no string matches pattern {pattern!r} with length {min_length}..{max_length}")
    return J.alternation(options)
