"""Compare propertok's methods on the shared glaive-style schemas (issue 3's report).

For each regex of a seeded sample of the Glaiveai2K subset: agnostic vs cartesian vs direct vs
auto — states, transitions, compile time — and, along the canonical encodings of the subset's
valid instances, the share of *forced* steps (exactly one allowed choice, where an engine can
skip the model call). Prints a markdown table.

    python benches/methods.py --tokenizer ../shared/tokenizers/mistral7b/tokenizer.json --n 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

import propertok as pt

SHARED = Path(os.environ.get("PROPERTOK_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def continuation_encoder(path: str):
    """The real tokenizer with continuation semantics (no prepended "▁", specials as text)."""
    import tokenizers

    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    norm = spec.get("normalizer")
    if norm and norm.get("type") == "Sequence":
        norm["normalizers"] = [n for n in norm["normalizers"] if n.get("type") != "Prepend"]
    tok = tokenizers.Tokenizer.from_str(json.dumps(spec))
    tok.encode_special_tokens = True
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(SHARED / "tokenizers/mistral7b/tokenizer.json"))
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    vocab = pt.Vocabulary.from_file(args.tokenizer)
    compiler = pt.Compiler(vocab)
    t0 = time.perf_counter()
    stats = compiler.tokenizer_dfa_stats()
    print(f"tokenizer DFA: {stats['build_seconds']:.2f} s, {stats['num_classes']} classes ({time.perf_counter() - t0:.2f} s)")
    encode = continuation_encoder(args.tokenizer)

    rows = [json.loads(l) for l in open(SHARED / "data/jsonschemabench_regex.jsonl", encoding="utf-8")]
    rows = [r for r in rows if r["subset"] == "Glaiveai2K" and r["regex"]]
    random.Random(args.seed).shuffle(rows)
    rows = rows[: args.n]
    instances = {}
    for line in open(SHARED / "data/jsonschemabench_valid_instances.jsonl", encoding="utf-8"):
        r = json.loads(line)
        instances[r["id"]] = r["instances"]

    methods = ["agnostic", "cartesian", "direct", "auto"]
    table = {m: {"ms": [], "states": [], "transitions": [], "errors": 0, "forced": 0, "steps": 0, "used": {}} for m in methods}
    for row in rows:
        dfa = pt.ByteDfa(row["regex"])
        docs = [json.dumps(i) for i in instances.get(row["id"], [])]
        docs = [d for d in docs if dfa.matches(d.encode())][:3]
        paths = [encode(d) for d in docs]
        for m in methods:
            t = time.perf_counter()
            try:
                g = compiler.compile_regex(row["regex"], method=m)
            except pt.LimitExceeded:
                table[m]["errors"] += 1
                continue
            table[m]["ms"].append(1000 * (time.perf_counter() - t))
            table[m]["used"][g.method] = table[m]["used"].get(g.method, 0) + 1
            s = g.stats()
            table[m]["states"].append(s["num_states"])
            table[m]["transitions"].append(s["num_transitions"])
            for path in paths:
                state = g.initial_state
                for tok in path + [vocab.eos_token_ids[0]]:
                    allowed = g.allowed_tokens(state)
                    table[m]["steps"] += 1
                    table[m]["forced"] += len(allowed) == 1
                    if tok not in vocab.eos_token_ids:
                        state = g.next_state(state, tok)

    print(f"\n{len(rows)} Glaiveai2K regexes, tokenizer {Path(args.tokenizer).parent.name}\n")
    print("| method | compiled | compile median / p90 / max (ms) | states median / max | transitions median / max | forced steps | method used |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for m in methods:
        d = table[m]
        if not d["ms"]:
            print(f"| {m} | 0 | | | | | |")
            continue
        forced = f"{d['forced']}/{d['steps']} ({100 * d['forced'] / max(1, d['steps']):.1f} %)"
        print(
            f"| {m} | {len(d['ms'])} (limit: {d['errors']}) | {statistics.median(d['ms']):.1f} / {pct(d['ms'], .9):.1f} / {max(d['ms']):.1f} "
            f"| {statistics.median(d['states']):.0f} / {max(d['states'])} | {statistics.median(d['transitions']):.0f} / {max(d['transitions'])} "
            f"| {forced} | {d['used']} |"
        )


if __name__ == "__main__":
    main()
