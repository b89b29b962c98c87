"""``multipleOf`` with any decimal ``m`` (other than 1 and 10^-k), within decimal bounds, as a regex.

Used by :mod:`propertok.json_schema` for numbers and integers. Write ``m = p / 10^q`` in lowest
terms (``1.5`` is 15 / 10^1, ``6`` is 6 / 10^0). A multiple of ``m`` has at most ``q`` digits
after the point, and a number written with integer digits ``I`` and fraction digits ``F`` (at
most ``q`` of them) is a multiple exactly when ``M = I·10^q + F·10^(q-|F|)`` is divisible by
``p``: the residue of ``M`` mod ``p`` is read digit by digit, as in long division, and the
missing ``q-|F|`` zeros are applied at the end (``r·10^(q-|F|) mod p``). For integers, an
integer ``N`` is a multiple exactly when ``N`` is divisible by ``p / gcd(p, 10^q)``.

Construction:

1. a DFA over the characters of a JSON number (``-``, digits, ``.``), each state being the
   residue so far, the number of fraction digits read, and the comparison of the magnitude read
   so far with each bound (:class:`_Comparison`: less, equal or greater, decided digit by digit
   once the length of the integer part is known), built by a breadth-first search over the
   reachable states;
2. minimized (Moore's partition refinement), so that only the distinctions the language needs
   remain (divisibility by 2 or 5 needs the last digit only, by 4 the last two, ...);
3. turned into a regex by state elimination, removing first the state whose removal writes
   the fewest characters.

Spellings produced: ``-?(0|[1-9][0-9]*)(\\.[0-9]{1,q})?`` (no fraction for integers, trailing
zeros allowed, no exponent, no ``-0``), each one a multiple within the bounds: the regex is
exact for these spellings. Costs: the DFA has at most ``p·(q+1)`` residue/fraction pairs times
the bound comparisons before minimization; state elimination can produce a regex exponential in
the number of states (divisibility by 7 already needs thousands of characters), so past
:data:`MAX_STATES` DFA states or :data:`MAX_REGEX_CHARS` characters :class:`TooLarge` is raised
and the converter refuses ``multipleOf`` by name.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Dict, List, Optional, Tuple

# Residue/fraction pairs (p·(q+1)) explored at most: past this the DFA is not built at all.
MAX_RESIDUES = 20_000
# Minimized DFA states at most, and regex characters at most, for one multipleOf.
MAX_STATES = 64
MAX_REGEX_CHARS = 200_000

DIGITS = "0123456789"


class TooLarge(ValueError):
    """The regex for this ``multipleOf`` would pass one of the size limits."""


def as_ratio(m: Decimal) -> Tuple[int, int]:
    """``m > 0`` as ``(p, q)`` with ``m = p / 10^q``, ``p`` not divisible by 10 unless ``q == 0``."""
    sign, digits, exponent = m.normalize().as_tuple()
    p = int("".join(map(str, digits)))
    if exponent >= 0:
        return p * 10**exponent, 0
    return p, -exponent


def lcm(a: Decimal, b: Decimal) -> Decimal:
    """The least common multiple of two positive decimals (the multiples of both)."""
    pa, qa = as_ratio(a)
    pb, qb = as_ratio(b)
    q = max(qa, qb)
    pa, pb = pa * 10 ** (q - qa), pb * 10 ** (q - qb)
    return Decimal(pa * pb // math.gcd(pa, pb)).scaleb(-q)


class _Comparison:
    """The comparison of an unsigned decimal read character by character with a bound ``c >= 0``.

    States: ``("int", n, cmp)`` after ``n`` integer digits (capped at len+1) whose comparison with
    the bound's first ``n`` integer digits is ``cmp``; ``("frac", i)`` when equal so far with ``i``
    fraction digits read (capped at the bound's fraction length); ``("done", cmp)`` once decided.
    """

    def __init__(self, c: Decimal):
        text = format(c, "f")
        whole, _, frac = text.partition(".")
        self.whole, self.frac = whole.lstrip("0") or "0", frac.rstrip("0")

    start = ("int", 0, 0)

    def after_integer(self, state: tuple) -> tuple:
        """The state once the integer part is complete (at ``.`` or at the end)."""
        if state[0] != "int":
            return state
        _, n, cmp = state
        if n != len(self.whole):
            return ("done", -1 if n < len(self.whole) else 1)
        return ("done", cmp) if cmp else ("frac", 0)

    def digit(self, state: tuple, d: str) -> tuple:
        if state[0] == "done":
            return state
        if state[0] == "int":
            _, n, cmp = state
            if n >= len(self.whole):
                return ("done", 1)  # more integer digits than the bound
            if cmp == 0:
                cmp = (d > self.whole[n]) - (d < self.whole[n])
            return ("int", n + 1, cmp)
        i = state[1]
        bound_digit = self.frac[i] if i < len(self.frac) else "0"
        if d != bound_digit:
            return ("done", 1 if d > bound_digit else -1)
        return ("frac", min(i + 1, len(self.frac)))

    def final(self, state: tuple) -> int:
        state = self.after_integer(state)
        if state[0] == "done":
            return state[1]
        return -1 if state[1] < len(self.frac) else 0  # the bound's remaining digits are not all 0


def _ok(cmp: int, lower: bool, exclusive: bool) -> bool:
    if cmp == 0:
        return not exclusive
    return cmp > 0 if lower else cmp < 0


def _build_dfa(p: int, q: int, fraction: bool, sides: List[tuple]):
    """The DFA (start 0, a transition dict per state, the accepting set) of the module docstring.
    ``sides``: ``(sign, lower, lower_exclusive, upper, upper_exclusive)`` for each sign, bounds
    on the magnitude (``upper`` None: unbounded). A state is ``("start",)`` or ``(side, phase,
    residue, fraction digits, lower comparison, upper comparison)``, phase one of ``begin``
    (nothing read but the sign), ``zero`` (a leading 0), ``int``, ``point``, ``frac``."""
    powers = [pow(10, k, p) for k in range(q + 1)]
    bounds = [(_Comparison(lo), None if hi is None else _Comparison(hi)) for _, lo, _, hi, _ in sides]
    index: Dict[tuple, int] = {("start",): 0}
    states: List[tuple] = [("start",)]
    delta: List[Dict[str, int]] = []
    accepting = set()

    def target(state: tuple) -> int:
        if state not in index:
            if len(states) >= MAX_RESIDUES * 4:
                raise TooLarge(f"more than {MAX_RESIDUES * 4} automaton states")
            index[state] = len(states)
            states.append(state)
        return index[state]

    def digit(state: tuple, d: str) -> Optional[tuple]:
        """The state after digit ``d``; None where the spelling forbids it (a digit after a
        leading 0, more than q fraction digits) or the upper bound is already passed."""
        k, phase, r, j, lo_state, hi_state = state
        if phase == "zero" or (phase in ("point", "frac") and j >= q):
            return None
        if phase in ("begin", "int"):
            phase, j = ("zero" if phase == "begin" and d == "0" else "int"), 0
        else:
            phase, j = "frac", j + 1
        lo_cmp, hi_cmp = bounds[k]
        hi_state = None if hi_cmp is None else hi_cmp.digit(hi_state, d)
        if hi_state == ("done", 1):
            return None
        return (k, phase, (10 * r + int(d)) % p, j, lo_cmp.digit(lo_state, d), hi_state)

    def add_digits(out: Dict[str, int], state: tuple) -> None:
        for d in DIGITS:
            nxt = digit(state, d)
            if nxt is not None:
                out[d] = target(nxt)

    i = 0
    while i < len(states):
        state = states[i]
        out: Dict[str, int] = {}
        if state[0] == "start":
            for k, (sign, *_) in enumerate(sides):
                lo_cmp, hi_cmp = bounds[k]
                begin = (k, "begin", 0, 0, lo_cmp.start, None if hi_cmp is None else hi_cmp.start)
                if sign == "-":
                    out["-"] = target(begin)
                else:
                    add_digits(out, begin)
        else:
            k, phase, r, j, lo_state, hi_state = state
            lo_cmp, hi_cmp = bounds[k]
            add_digits(out, state)
            if fraction and q > 0 and phase in ("zero", "int"):
                out["."] = target((k, "point", r, 0, lo_cmp.after_integer(lo_state),
                                   None if hi_cmp is None else hi_cmp.after_integer(hi_state)))
            if phase in ("zero", "int", "frac"):
                _, _, lo_excl, _, hi_excl = sides[k]
                if (r * powers[q - j] % p == 0 and _ok(lo_cmp.final(lo_state), True, lo_excl)
                        and (hi_cmp is None or _ok(hi_cmp.final(hi_state), False, hi_excl))):
                    accepting.add(i)
        delta.append(out)
        i += 1
    return delta, accepting


def _minimize(delta: List[Dict[str, int]], accepting: set) -> Tuple[List[Dict[str, int]], set]:
    """Moore's partition refinement over the live states (those that reach acceptance)."""
    n = len(delta)
    reverse: List[List[int]] = [[] for _ in range(n)]
    for s, out in enumerate(delta):
        for t in out.values():
            reverse[t].append(s)
    live, todo = set(accepting), list(accepting)
    while todo:
        for s in reverse[todo.pop()]:
            if s not in live:
                live.add(s)
                todo.append(s)
    if 0 not in live:
        return [], set()
    block = {s: int(s in accepting) for s in live}
    while True:
        signatures: Dict[tuple, int] = {}
        new = {}
        for s in sorted(live):
            sig = (block[s],) + tuple(sorted((c, block[t]) for c, t in delta[s].items() if t in live))
            new[s] = signatures.setdefault(sig, len(signatures))
        if len(signatures) == len(set(block.values())):
            break
        block = new
    block = new
    order = {0: 0}
    for s in sorted(live):  # number the blocks from the start, in a fixed order
        order.setdefault(block[s], len(order))
    out: List[Dict[str, int]] = [dict() for _ in order]
    acc = set()
    for s in live:
        b = order[block[s]]
        for c, t in delta[s].items():
            if t in live:
                out[b][c] = order[block[t]]
        if s in accepting:
            acc.add(b)
    return out, acc


# -- state elimination -------------------------------------------------------------------------
# A regex piece is (text, kind): kind "eps" (the empty string), "atom" (needs no group), "cat"
# (a concatenation: group it before a star) or "alt" (an alternation: group it in a sequence).

_EPS = ("", "eps")


def _class(chars: List[str]) -> tuple:
    digits = sorted(c for c in chars if c in DIGITS)
    others = [c for c in chars if c not in DIGITS]
    parts = []
    runs: List[List[str]] = []
    for d in digits:
        if runs and int(d) == int(runs[-1][-1]) + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    for run in runs:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else "".join(run))
    escaped = {"-": "\\-", ".": "\\."}
    if len(chars) == 1:
        c = chars[0]
        return ("\\." if c == "." else c, "atom")
    body = "".join(parts) + "".join(escaped[c] for c in others)
    return (f"[{body}]", "atom")


def _group(piece: tuple) -> str:
    text, kind = piece
    return f"(?:{text})" if kind in ("alt", "cat") else text


def _cat(*pieces: tuple) -> tuple:
    parts = [p for p in pieces if p[1] != "eps"]
    if not parts:
        return _EPS
    if len(parts) == 1:
        return parts[0]
    return ("".join(f"(?:{t})" if k == "alt" else t for t, k in parts), "cat")


def _star(piece: tuple) -> tuple:
    if piece[1] == "eps":
        return _EPS
    return (_group(piece) + "*", "atom")


def _alt(pieces: List[tuple]) -> tuple:
    seen: List[tuple] = []
    for piece in pieces:
        if piece not in seen:
            seen.append(piece)
    rest = [piece for piece in seen if piece[1] != "eps"]
    if not rest:
        return _EPS
    body = rest[0] if len(rest) == 1 else ("|".join(t for t, _ in rest), "alt")
    return (_group(body) + "?", "atom") if len(rest) < len(seen) else body


def _to_regex(delta: List[Dict[str, int]], accepting: set) -> Optional[str]:
    """State elimination: edges labelled by regexes, a new start and a new final state."""
    n = len(delta)
    if n == 0:
        return None
    start, final = n, n + 1
    edges: Dict[Tuple[int, int], tuple] = {}
    for s, out in enumerate(delta):
        by_target: Dict[int, List[str]] = {}
        for c, t in out.items():
            by_target.setdefault(t, []).append(c)
        for t, chars in by_target.items():
            edges[(s, t)] = _class(chars)
    edges[(start, 0)] = _EPS
    for s in accepting:
        edges[(s, final)] = _EPS
    remaining = set(range(n))
    while remaining:
        def cost(x: int) -> int:
            ins = [len(e[0]) + 1 for (u, v), e in edges.items() if v == x and u != x]
            outs = [len(e[0]) + 1 for (u, v), e in edges.items() if u == x and v != x]
            loop = len(edges.get((x, x), _EPS)[0])
            return sum(ins) * len(outs) + sum(outs) * len(ins) + loop * len(ins) * len(outs)

        x = min(sorted(remaining), key=cost)
        remaining.discard(x)
        loop = _star(edges.pop((x, x))) if (x, x) in edges else _EPS
        ins = [(u, e) for (u, v), e in edges.items() if v == x]
        outs = [(v, e) for (u, v), e in edges.items() if u == x]
        for u, _ in ins:
            del edges[(u, x)]
        for v, _ in outs:
            del edges[(x, v)]
        for u, e_in in ins:
            for v, e_out in outs:
                path = _cat(e_in, loop, e_out)
                edges[(u, v)] = _alt([edges[(u, v)], path]) if (u, v) in edges else path
                if len(edges[(u, v)][0]) > MAX_REGEX_CHARS:
                    raise TooLarge(f"the regex would be longer than {MAX_REGEX_CHARS} characters")
    result = edges.get((start, final))
    if result is None:
        return None
    return f"(?:{result[0]})" if result[1] == "alt" else result[0]  # safe to concatenate


def multiples_regex(m: Decimal, integer: bool, lo: Optional[Decimal], lo_excl: bool,
                    hi: Optional[Decimal], hi_excl: bool) -> Optional[str]:
    """The JSON numbers (integers when ``integer``) that are multiples of ``m`` with
    ``lo <(=) x <(=) hi`` (None: unbounded), spelled as the module docstring says; None when
    there are none. Raises :class:`TooLarge` past the size limits."""
    p, q = as_ratio(m)
    if integer:
        p, q = p // math.gcd(p, 10**q), 0
    if p * (q + 1) > MAX_RESIDUES:
        raise TooLarge(f"{p * (q + 1)} residues (at most {MAX_RESIDUES})")
    zero = Decimal(0)
    sides = []
    # x >= 0: the magnitude in [max(lo, 0), hi]
    if hi is None or hi > 0 or (hi == 0 and not hi_excl):
        a, a_excl = (lo, lo_excl) if lo is not None and lo >= 0 else (zero, False)
        sides.append(("+", a, a_excl, hi, hi_excl))
    # x < 0: the magnitude -x in (max(-hi, 0), -lo]; never 0 ("-0" is not written)
    if lo is None or lo < 0:
        a, a_excl = (-hi, hi_excl) if hi is not None and hi < 0 else (zero, True)
        sides.append(("-", a, a_excl, None if lo is None else -lo, lo_excl))
    if not sides:
        return None
    delta, accepting = _build_dfa(p, q, not integer, sides)
    delta, accepting = _minimize(delta, accepting)
    if len(delta) > MAX_STATES:
        raise TooLarge(f"{len(delta)} automaton states (at most {MAX_STATES})")
    return _to_regex(delta, accepting)
