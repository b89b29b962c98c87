"""Loading the regex workloads of ``shared/data`` (see its README.md)."""

from __future__ import annotations

import functools
import json
import math
import os
import random

from oracle import data_dir

# Subsets of JSONSchemaBench the oracle tests draw from (the issue: Glaiveai2K and Github_*).
JSB_SUBSETS = ("Glaiveai2K", "Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra")
JSB_MAX_LEN = 3000  # keeps CI time sane: Glaive's longest is 3311, Github's reach millions
JSB_BASE_COUNT = 200
JSB_SEED = 20240607


def oracle_scale() -> float:
    """``$PROPERTOK_ORACLE_SCALE`` (default 1.0) scales the number of regexes of the oracle tests."""
    return float(os.environ.get("PROPERTOK_ORACLE_SCALE", "1.0"))


@functools.lru_cache(maxsize=None)
def regex_suite() -> tuple[dict, ...]:
    with open(data_dir() / "regex_suite.jsonl", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


@functools.lru_cache(maxsize=None)
def jsonschemabench_regexes() -> tuple[dict, ...]:
    """Rows with a stored regex (``regex`` is null for the 637 longer than 30,000 characters)."""
    out = []
    with open(data_dir() / "jsonschemabench_regex.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row.get("regex") is not None:
                out.append(row)
    return tuple(out)


# Regexes kept out of the CI sample because compiling them takes too long. Empty since the byte
# DFA is minimised by Hopcroft's algorithm: the five that took over 90 s before a limit refused
# them (Github_easy/o9812, o9892, Github_hard/o82503, o82544, Github_medium/o50683) are refused
# in 0.5-2.4 s now.
JSB_KNOWN_SLOW: set[str] = set()


def jsonschemabench_sample(scale: float = 1.0, seed: int = JSB_SEED) -> list[dict]:
    """A fixed seeded sample of ``ceil(200 * scale)`` regexes from Glaiveai2K and Github_*,
    at most JSB_MAX_LEN characters long, in id order."""
    pool = sorted(
        (
            r
            for r in jsonschemabench_regexes()
            if r["subset"] in JSB_SUBSETS and r["regex_len"] <= JSB_MAX_LEN and r["id"] not in JSB_KNOWN_SLOW
        ),
        key=lambda r: r["id"],
    )
    n = min(len(pool), max(1, math.ceil(JSB_BASE_COUNT * scale)))
    picked = random.Random(seed).sample(pool, n)
    return sorted(picked, key=lambda r: r["id"])


def regex_suite_sample(scale: float = 1.0) -> list[dict]:
    """Every row of regex_suite.jsonl at scale >= 1, an evenly spread subset below."""
    rows = list(regex_suite())
    if scale >= 1.0:
        return rows
    n = max(1, math.ceil(len(rows) * scale))
    step = len(rows) / n
    return [rows[int(i * step)] for i in range(n)]


# Rows of the suite that regex-automata's parser rejects (outlines-core 0.2.14, itself built on
# regex-automata, recorded "Failed to build DFA error building NFA" for exactly these), with the
# reason read off the pattern by hand. `strict` ones must be refused by propertok with ValueError;
# the others are refused by regex-syntax's *default* options, which propertok may legitimately
# relax (e.g. `{,n}`), so for them either outcome is fine as long as an accepted one passes the
# oracle checks like every other regex.
EXPECTED_REJECTIONS = {
    "a{,3}": ("syntax: `{,n}` is not in regex-syntax's default grammar", False),
    "a{3,2}": ("syntax: repetition min > max", True),
    "[z-a]": ("syntax: reversed class range", True),
    "(?=a)": ("look-around", True),
    "(?!a)": ("look-around", True),
    "\\\"\\'\\a\\f\\n\\r\\t\\v\\0\\e": ("syntax: \\0 / \\e escapes are not supported", False),
    "\\u{20BB7}\\u0300\\x1F\\cJ": ("syntax: \\cJ escape is not supported", False),
    "[]": ("syntax: unclosed class (`]` first is a literal)", True),
    "(?=abc)": ("look-around", True),
    "(?!abc)": ("look-around", True),
    "(?<=abc)": ("look-around", True),
    "(?<!abc)": ("look-around", True),
    "abc)": ("syntax: unopened group", True),
    "abc((a)": ("syntax: unclosed group", True),
    "missing close paren (": ("syntax: unclosed group", True),
}
# The email pattern from xgrammar's tests has `[` inside a class (a nested class to Rust) and the
# ISBN type has look-aheads: matched by prefix because they are long.
EXPECTED_REJECTION_PREFIXES = {
    "^([\\w!#$%&'*+/=?^_`{|}~-]+(\\.": ("syntax: `[` inside a class opens an unclosed nested class", True),
    "(?:ISBN(?:-1[03])?:? )?(?=": ("look-around", True),
}


def expected_rejection(pattern: str):
    """``(reason, strict)`` when regex-automata's parser rejects ``pattern``, else None."""
    if pattern in EXPECTED_REJECTIONS:
        return EXPECTED_REJECTIONS[pattern]
    for prefix, value in EXPECTED_REJECTION_PREFIXES.items():
        if pattern.startswith(prefix):
            return value
    return None
