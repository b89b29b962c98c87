"""Writes the corpus files of this folder from the case list below; the ids come from the real
tokenizer (the ``tokenizers`` package), never from propertok.

    python tests/corpus/generate.py            # rewrites *.toml here

Run it after changing a case; review the diff. The tests re-check every id against the tokenizer,
so a stale file fails instead of passing silently. See README.md in this folder for the format.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "support"))

from corpus_format import (  # noqa: E402
    EMBEDDED_MISTRAL,
    SYNTHETIC_TABLES,
    oracle_tokenizer,
    render_file,
)

# With the default limits, `direct` stops at this one on these (their explicit token DFA would hold
# millions of transitions: a class such as `[a-z]` or a JSON string allows thousands of tokens in
# each of many states); `auto` then falls back to `cartesian`.
WIDE = {"limit": {"direct": "max_direct_transitions"}}

# (name, regex, strings in the language, strings not in it[, options])
MISTRAL_CASES = [
    ("blog boolean", r"boolean: ((true)|(false))", ["boolean: true", "boolean: false"], ["boolean: maybe"]),
    ("blog names", r"( William)|( Theodore)", [" William", " Theodore"], [" Will"]),
    ("integer", r"-?(0|[1-9][0-9]*)", ["0", "-12", "12345", "1000000"], ["012", "-"]),
    ("number", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", ["3.14", "-0.5e-10", "42E7"], ["3."]),
    (
        "json string",
        r'"([^"\\\x00-\x1F]|\\["\\/bfnrt])*"',
        ['""', '"hello world"', '"a\\"b"', '"naïve café"', '"日本語のテキスト"', '"emoji 🙂 here"'],
        ['"unterminated', '"bad \\x"'],
        WIDE,
    ),
    (
        "flat object",
        r'\{"name":"[a-z]{1,8}","age":[0-9]{1,3}\}',
        ['{"name":"ada","age":36}', '{"name":"grace","age":101}'],
        ['{"name":"ada"}'],
        WIDE,
    ),
    (
        "object with optional spaces",
        r'\{[ ]?"id"[ ]?:[ ]?[0-9]+(,[ ]?"tags"[ ]?:[ ]?\[("[a-z]+"(,[ ]?"[a-z]+")*)?\])?[ ]?\}',
        ['{"id": 7}', '{"id":7,"tags":["a","bc"]}', '{ "id" : 12, "tags" : [] }'],
        ['{"id": }'],
        WIDE,
    ),
    ("enum", r"(red|green|blue|light blue)", ["red", "green", "light blue"], ["purple"]),
    ("email", r"[a-z]+@[a-z]+\.(com|org)", ["ada@example.com", "x@y.org"], ["ada@example"], WIDE),
    ("date", r"[0-9]{4}-[0-9]{2}-[0-9]{2}", ["2026-11-24", "1999-01-01"], ["2026-1-24"]),
    ("spaces", r"a {1,6}b", ["a b", "a   b", "a      b"], ["ab"]),
    ("lines", r"(line [0-9]\n){1,3}", ["line 1\n", "line 1\nline 2\nline 3\n"], ["line 1"]),
    ("greek", r"\p{Greek}+", ["αβγ", "λόγος"], ["abc"]),
    ("case-insensitive", r"(?i)hello world", ["hello world", "HeLLo WORLD"], ["hello  world"]),
    ("prefix alternation", r"(a|ab|abc)d", ["ad", "abd", "abcd"], ["abcdd"]),
    ("identifier", r"[A-Za-z_][A-Za-z0-9_]{0,15}", ["x", "snake_case_name", "CamelCase9"], ["9lives"], WIDE),
    ("any short text", r".{0,12}", ["", "Hello, world", "tab\there", "ünïcödé"], ["line\nbreak"], WIDE),
    ("byte fallback characters", r"[\u{1F300}-\u{1F64F}]{1,3}", ["🙂", "🌍🙂"], ["a"]),
    ("digits then letters", r"[0-9]{2,4}[a-z]{0,2}", ["12ab", "2026", "777x"], ["1a"]),
]

MISTRAL_ERRORS = [
    ("empty language", r"[^\s\S]", "empty_language"),
    ("empty language inside a concatenation", r"a[^\s\S]b", "empty_language"),
    ("unbalanced parenthesis", r"(ab", "invalid_regex"),
    ("reversed range", r"[z-a]", "invalid_regex"),
    ("look-ahead", r"(?=a)a", "unsupported_regex"),
    ("backreference", r"(a)\1", "unsupported_regex"),
]

# Synthetic tables (defined in corpus_format.SYNTHETIC_TABLES): (table, name, regex, in, out)
SYNTHETIC_CASES = [
    ("well-ordered", "a or b", r"[ab]*a", ["a", "aa", "aba", "ababa", "aaba", "bba"], ["ab"]),
    ("well-ordered", "ab runs", r"(ab)+", ["ab", "abab", "ababab"], ["aba"]),
    ("well-ordered", "counted", r"a{2,5}b?", ["aa", "aaab", "aaaaa"], ["a"]),
    ("not well-ordered", "abcd", r"[abcd]*b", ["b", "bcdb", "abcdb", "cdcdb", "dcbab"], ["bcd"]),
    ("not well-ordered", "a then bcd", r"a(bcd)+", ["abcd", "abcdbcd"], ["a"]),
    ("not well-ordered", "optional letters", r"b?c?d?a", ["a", "bcda", "cda", "ba"], ["bcd"]),
]


def main() -> None:
    mistral = oracle_tokenizer(str(EMBEDDED_MISTRAL))
    (HERE / "mistral7b.toml").write_text(
        render_file(
            "mistral7b",
            "Mistral-7B (SentencePiece BPE with byte fallback), the tokenizer embedded in the package.",
            mistral,
            MISTRAL_CASES,
            MISTRAL_ERRORS,
        ),
        encoding="utf-8",
    )
    by_table: dict[str, list] = {}
    for table, *case in SYNTHETIC_CASES:
        by_table.setdefault(table, []).append(tuple(case))
    for table, cases in by_table.items():
        spec = SYNTHETIC_TABLES[table]
        tok = oracle_tokenizer(spec)
        slug = table.replace(" ", "-")
        (HERE / f"synthetic-{slug}.toml").write_text(
            render_file(
                f"synthetic:{table}",
                f"A synthetic merge table ({table}): alphabet {spec['alphabet']!r}, merges "
                f"{json.dumps(spec['merges'])}.",
                tok,
                cases,
                [],
            ),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
