"""Random small grammars, written in Lark and in GBNF, against lark (Earley, dynamic_complete) on
every string of up to 5 characters over ``a b c``: the regex of each spelling matches exactly
what lark accepts when the grammar has no nesting recursion, and a subset of it when
``max_recursion_depth=1`` unrolls it."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

lark = pytest.importorskip("lark", reason="lark is a test dependency (pip install -e '.[test]')")

ALPHABET = "abc"
STRINGS = ["".join(p) for n in range(6) for p in itertools.product(ALPHABET, repeat=n)]
LITERALS = ["a", "b", "ab", "ba", "c"]


def random_grammar(rng: random.Random):
    """Rules as nested tuples: ("lit", s) | ("range",) | ("ref", i) | ("seq", [..]) |
    ("alt", [..]) | ("rep", e, min, max)."""
    n_rules = rng.randint(1, 3)

    def expr(depth, refs=True):
        roll = rng.random()
        if depth >= 3 or roll < 0.35:
            if refs and (rng.random() < 0.3 and n_rules > 1 or rng.random() < 0.1):
                return ("ref", rng.randrange(n_rules))
            if rng.random() < 0.15:
                return ("range",)
            return ("lit", rng.choice(LITERALS))
        if roll < 0.6:
            return ("seq", [expr(depth + 1, refs) for _ in range(rng.randint(2, 3))])
        if roll < 0.8:
            return ("alt", [expr(depth + 1, refs) for _ in range(rng.randint(2, 3))])
        lo = rng.randint(0, 2)
        hi = rng.choice([None, lo, lo + 1, lo + 2])
        # No rule under a repetition: `(r)*` with an r that can be empty is infinitely
        # ambiguous, and lark's Earley then runs for minutes.
        return ("rep", expr(depth + 1, refs=False), lo, hi)

    return [expr(0) for _ in range(n_rules)]


def render(e, start: str, range_text: str, repetition) -> str:
    """One rule body in either syntax; ``repetition(item, lo, hi)`` writes a repetition of the
    rendered ``item``."""
    kind = e[0]
    if kind == "lit":
        return f'"{e[1]}"'
    if kind == "range":
        return range_text
    if kind == "ref":
        return start if e[1] == 0 else f"r{e[1]}"
    if kind == "seq":
        return " ".join(render(x, start, range_text, repetition) for x in e[1])
    if kind == "alt":
        return "(" + " | ".join(render(x, start, range_text, repetition) for x in e[1]) + ")"
    _, inner, lo, hi = e
    return repetition(f"({render(inner, start, range_text, repetition)})", lo, hi)


def lark_text(rules) -> str:
    """Each repetition becomes a rule of its own: Lark expands `~ m..n` (and `?`) into
    alternatives inside the rule that holds them, so nested counted repetitions in one rule
    multiply into thousands of alternatives and hours of grammar compilation."""
    helpers: list = []

    def repetition(item, lo, hi):
        if (lo, hi) == (0, None):
            body = item + "*"
        elif hi is None:
            body = f"{item} ~ {lo} {item}*"
        elif hi == 0:
            body = ""  # the empty string (Lark has no empty literal)
        else:
            body = f"{item} ~ {lo}..{hi}" if lo > 0 else f"[{item} ~ 1..{hi}]"
        helpers.append(body)
        return f"h{len(helpers)}"

    ranges = '"a".."b"'
    text = "".join(
        f"{'start' if i == 0 else f'r{i}'}: {render(e, 'start', ranges, repetition)}\n" for i, e in enumerate(rules)
    )
    return text + "".join(f"h{k + 1}: {body}\n" for k, body in enumerate(helpers))


def gbnf_text(rules) -> str:
    def repetition(item, lo, hi):
        return f"{item}{{{lo},{'' if hi is None else hi}}}"

    return "".join(
        f"{'root' if i == 0 else f'r{i}'} ::= {render(e, 'root', '[a-b]', repetition)}\n" for i, e in enumerate(rules)
    )


def lark_language(text: str):
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete")
    accepted = set()
    for s in STRINGS:
        try:
            parser.parse(s)
            accepted.add(s)
        except lark.exceptions.LarkError:
            pass
    return accepted


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_random_grammar_regex_is_lark_language(pt, seed):
    rules = random_grammar(random.Random(seed))
    lark_src, gbnf_src = lark_text(rules), gbnf_text(rules)
    expected = lark_language(lark_src)
    depth = None
    try:
        regexes = [pt.grammar_to_regex(lark_src), pt.grammar_to_regex(gbnf_src, "gbnf")]
    except NotImplementedError as e:
        assert "is recursive" in str(e)
        depth = 1
        try:
            regexes = [pt.grammar_to_regex(src, syn, max_recursion_depth=depth)
                       for src, syn in ((lark_src, "lark"), (gbnf_src, "gbnf"))]
        except ValueError as e:
            assert "empty language" in str(e)
            return
    except ValueError as e:
        assert "empty language" in str(e) and not expected, (lark_src, e)
        return
    for regex in regexes:
        dfa = pt.ByteDfa(regex)  # (unrolled nesting stays far below max_byte_dfa_states at depth 1)
        ours = {s for s in STRINGS if dfa.matches(s.encode())}
        if depth is None:
            assert ours == expected, (lark_src, sorted(ours ^ expected)[:10])
        else:
            assert ours <= expected, (lark_src, sorted(ours - expected)[:10])
