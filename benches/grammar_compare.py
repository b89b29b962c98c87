"""Grammars side by side: propertok (`compile_grammar`), llguidance (Lark) and xgrammar (GBNF /
EBNF) on the same grammars and tokenizers, in one process per library run back to back.

For each grammar: compile (median of 3 fresh compiles; propertok's includes its first mask),
then the masks along the tokenizer's own encoding of each example (fill time per step, first
visits included: a fresh compile per example). The grammars are those of
`tests/grammar/test_grammar.py` (their Lark and GBNF spellings) plus llama.cpp-style JSON.
propertok's eager and lazy guides bound nesting recursion at the case's `max_recursion_depth`
(eager: the grammar unrolled into one regex; lazy: a pushdown automaton with that stack bound);
`propertok-nesting` is the lazy guide with unbounded nesting, as the peers parse it (they admit
non-canonical token sequences; every propertok guide is exactly canonical).

    /tmp/propertok-bench-venv/bin/python benches/grammar_compare.py --tokenizers mistral7b,llama3

(the venv of `benches/setup_peers.sh`, with propertok installed into it).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compare = _load("compare", ROOT / "benches" / "compare.py")
cases_module = _load("grammar_cases", ROOT / "tests" / "support" / "grammar_cases.py")

JSON_GBNF = r'''
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ("," ws string ws ":" ws value ws)* )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= [ \t\n]*
'''
JSON_LARK = r'''
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" WS? (STRING WS? ":" WS? value WS? ("," WS? STRING WS? ":" WS? value WS?)*)? "}"
array: "[" WS? (value WS? ("," WS? value WS?)*)? "]"
STRING: /"([^"\\\x00-\x1F]|\\(["\\\/bfnrt]|u[0-9a-fA-F]{4}))*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/
WS: /[ \t\n]+/
'''


# A tool call: free text, or a special token then JSON arguments (`%json`, as llguidance writes
# it). `{token}` is the tokenizer's special token of TOOL_TOKEN; examples are lists of texts and
# TOKEN (that token).
TOOL_CALL_LARK = r'''
start: ANSWER | {token} %json {{"type": "object", "properties": {{"name": {{"enum": ["get_weather", "get_time"]}},
  "arguments": {{"type": "object", "properties": {{"city": {{"type": "string", "maxLength": 30}},
  "days": {{"type": "integer", "minimum": 1, "maximum": 14}}}}, "required": ["city", "days"]}}}},
  "required": ["name", "arguments"]}}
ANSWER: /[A-Za-z ,.]{{1,60}}/
'''
TOOL_TOKEN = {"mistral7b": "<s>", "llama3": "<|start_header_id|>", "qwen2": "<|im_start|>"}
TOKEN = object()


def grammars(tok: str = ""):
    out = []
    for c in cases_module.CASES:
        if c.gbnf is not None:
            out.append({"name": c.name, "lark": c.lark, "gbnf": c.gbnf, "depth": c.depth, "examples": c.positives})
    out.append({
        "name": "JSON (llama.cpp style)",
        "lark": JSON_LARK,
        "gbnf": JSON_GBNF,
        "depth": 3,
        "examples": ['{"a": [1, 2.5, "x"], "b": null}', '[{"k": -1e3}, true]', '{"name": "Ada", "tags": ["x"]}'],
    })
    if tok in TOOL_TOKEN:
        out.append({
            "name": f"tool call ({TOOL_TOKEN[tok]} + %json)",
            "lark": TOOL_CALL_LARK.format(token=TOOL_TOKEN[tok]),
            "gbnf": None,
            "depth": None,
            "examples": [[TOKEN, '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'],
                         ["It will be sunny, no call needed."]],
        })
    return out


def compile_grammar(lib: str, ad, g):
    if lib.startswith("propertok"):
        depth = None if lib == "propertok-nesting" else g["depth"]
        return ad.compiler.compile_grammar(g["lark"], max_recursion_depth=depth, **ad.options)
    if lib == "llguidance":
        m = ad.llg.LLMatcher(ad.tokenizer, ad.llg.LLMatcher.grammar_from_lark(g["lark"]), log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m
    if lib == "xgrammar":
        if g["gbnf"] is None:
            raise ValueError("no GBNF spelling (special tokens, %json)")
        return ad.compiler.compile_grammar(g["gbnf"])
    raise ValueError(lib)


def run(lib: str, tok: str, repeats: int, only: str = ""):
    import propertok as pt

    # The tokenizer's own continuation encoding (tests/support/oracle.py), as a decoder emits it.
    orc = compare.load_oracle_module().Oracle.from_file(compare.tokenizer_path(tok), name=tok)
    vocab = pt.Vocabulary.from_file(str(compare.tokenizer_path(tok)))
    adapter = "propertok-lazy" if lib == "propertok-nesting" else lib
    ad = compare.make_adapter(adapter, tok, vocab.eos_token_ids[:1], vocab.vocab_size)
    ad.setup()
    rows = []
    token = vocab.special_token_ids[[vocab.token_bytes(i) for i in vocab.special_token_ids].index(
        TOOL_TOKEN[tok].encode())] if tok in TOOL_TOKEN else None
    for g in grammars(tok):
        if only not in g["name"]:
            continue
        row = {"grammar": g["name"]}
        try:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                handle = compile_grammar(lib, ad, g)
                m = ad.matcher(handle)
                ad.fill_fn(m)()
                times.append(time.perf_counter() - t0)
            row["compile_first_mask_ms"] = statistics.median(times) * 1e3
            fills = []
            for text in g["examples"]:
                parts = [text] if isinstance(text, str) else text
                ids = [i for part in parts for i in ([token] if part is TOKEN else orc.canonical(part))]
                m = ad.matcher(compile_grammar(lib, ad, g))
                fill = ad.fill_fn(m)
                fill()
                for t in ids:
                    if not ad.accept(m, t):
                        raise ValueError(f"{text!r}: token {t} refused")
                    t0 = time.perf_counter_ns()
                    fill()
                    fills.append(time.perf_counter_ns() - t0)
            row["mask_median_us"] = statistics.median(fills) / 1e3
            row["mask_max_us"] = max(fills) / 1e3
        except Exception as e:  # noqa: BLE001 - reported, not raised: one grammar's failure is a result
            row["error"] = f"{type(e).__name__}: {str(e)[:120]}"
        rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizers", default="mistral7b,llama3")
    p.add_argument("--libs", default="propertok-eager,propertok-lazy,propertok-nesting,llguidance,xgrammar")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", default="", help="run the grammars whose name contains this text")
    args = p.parse_args(argv)
    for tok in args.tokenizers.split(","):
        print(f"\n## {tok}\n")
        results = {lib: run(lib, tok, args.repeats, args.only) for lib in args.libs.split(",")}
        libs = list(results)
        print("| grammar | " + " | ".join(f"{lib} compile+1st mask / mask median (max)" for lib in libs) + " |")
        print("| --- |" + " --- |" * len(libs))
        for i, g in enumerate(g for g in grammars(tok) if args.only in g["name"]):
            cells = []
            for lib in libs:
                r = results[lib][i]
                if "error" in r:
                    cells.append(r["error"])
                else:
                    cells.append(f"{r['compile_first_mask_ms']:.2f} ms / {r['mask_median_us']:.1f} µs ({r['mask_max_us']:.0f})")
            print(f"| {g['name']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
