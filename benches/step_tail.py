#!/usr/bin/env python3
"""Where a mask p99 comes from: each step's fill, inside a JSON string or outside one.

    python benches/step_tail.py --tokenizers llama3,qwen2,o200k,mistral7b --cache-dir /tmp/ptc
    python benches/step_tail.py --tokenizers qwen2 --glaive 40 --github 0 --slowest 20

Inputs and measurement are ``compare.py``'s: its sample (200 Glaiveai2K + 100 Github_* regexes by
default, same seed), the first canonical document of each, a fresh lazy guide per schema from one
``Compiler`` (as a server would), ``Matcher.fill_next_token_bitmask`` into a NumPy bitmask timed
per step, the final EOS mask included. Each step is put in a class by the document's decoded text
before it: ``string`` (inside a JSON string, escapes followed), ``outside``, ``start`` (the first
mask) and ``end`` (the mask after the last token). Per tokenizer it prints the percentiles, then
per class the steps, those over ``--slow`` µs (as a share of all steps: what a p99 sees) and the
time in them, and the slowest steps with their text. ``--passes 2`` walks the sample again with
fresh guides in the same process and reports that pass: what each new guide pays once the
tokenizer's caches hold what any guide made (a server's steady state), without the first uses.
The last line counts those first uses in the pass reported: slice group sets walked or read from
the cache directory, regions found or read.
"""

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
import propertok as pt  # noqa: E402

CLASSES = ("string", "outside", "start", "end")


def inside_string(text: str) -> bool:
    """Whether ``text`` ends inside a JSON string."""
    inside = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif inside and ch == "\\":
            escaped = True
        elif ch == '"':
            inside = not inside
    return inside


def step_class(text: str, i: int, n: int) -> str:
    if i == 0:
        return "start"
    if i == n:
        return "end"
    return "string" if inside_string(text) else "outside"


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def run(tok: str, items, a) -> None:
    from tokenizers import Tokenizer

    paths, _, _ = compare.canonical_paths(items, compare.load_oracle_module(), tok, 1)
    path = str(compare.tokenizer_path(tok))
    vocab = pt.Vocabulary.from_file(path)
    hf = Tokenizer.from_file(path)
    compiler = pt.Compiler(vocab, cache_dir=a.cache_dir)
    compiler.compile_regex("a")  # the tokenizer's set-up, outside the steps
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    clock = time.perf_counter_ns
    for _ in range(a.passes - 1):
        walk_all(compiler, items, paths, bitmask, clock)
    before = first_uses(compiler)
    rows = [
        (schema, i, ns, step_class(hf.decode(doc[:i]), i, len(doc)), doc)
        for schema, doc, times in walk_all(compiler, items, paths, bitmask, clock)
        for i, ns in enumerate(times)
    ]
    report(tok, rows, hf, a)
    made = {k: v - before[k] for k, v in first_uses(compiler).items()}
    print("first uses in the pass reported: " + ", ".join(f"{k} {v}" for k, v in made.items()))


def first_uses(compiler):
    """The tokenizer-wide tables a compiler made so far: slice group sets walked over the vocabulary
    or read from the cache directory, regions found or read (what a new process pays once)."""
    stats = compiler.tokenizer_dfa_stats()
    keys = ("slice_sets_walked", "slice_sets_loaded", "slice_regions_found", "slice_regions_loaded")
    return {k: int(stats[k]) for k in keys}


def walk_all(compiler, items, paths, bitmask, clock):
    """Each schema's first document through a fresh guide: (schema id, tokens, ns per fill)."""
    walked = []
    for item in items:
        docs = paths.get(item["id"]) or []
        if not docs:
            continue
        doc = docs[0]
        matcher = compiler.compile_regex(item["regex"]).matcher()
        fill = matcher.fill_next_token_bitmask
        times = []
        gc.disable()
        for token in doc:
            t = clock()
            fill(bitmask, 0)
            times.append(clock() - t)
            matcher.accept_token(token)
        t = clock()
        fill(bitmask, 0)
        times.append(clock() - t)
        gc.enable()
        walked.append((item["id"], doc, times))
    return walked


def report(tok, rows, hf, a):
    if not rows:
        print(f"{tok}: no documents")
        return
    n = len(rows)
    ts = sorted(r[2] / 1e3 for r in rows)
    print(
        f"{tok}: {n} steps, median {percentile(ts, 0.5):.1f} µs, p90 {percentile(ts, 0.9):.1f}, "
        f"p99 {percentile(ts, 0.99):.1f}, max {ts[-1]:.0f}"
    )
    print(f"| class | steps | over {a.slow:g} µs | share of all steps | ms in them | ms in the class |")
    print("| --- | --- | --- | --- | --- | --- |")
    for cls in CLASSES:
        xs = [r[2] / 1e3 for r in rows if r[3] == cls]
        slow = [x for x in xs if x > a.slow]
        print(
            f"| {cls} | {len(xs)} | {len(slow)} | {100 * len(slow) / n:.1f} % | "
            f"{sum(slow) / 1e3:.0f} | {sum(xs) / 1e3:.0f} |"
        )
    for schema, i, ns, cls, doc in sorted(rows, key=lambda r: -r[2])[: a.slowest]:
        before = hf.decode(doc[max(0, i - 4) : i])
        token = hf.decode([doc[i]]) if i < len(doc) else "EOS"
        print(f"  {ns / 1e3:9.0f} µs  {cls:8} {schema} #{i}  {before[-30:]!r} -> {token!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default="llama3")
    ap.add_argument("--glaive", type=int, default=200)
    ap.add_argument("--github", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ids", default="", help="comma-separated schema ids instead of the sample")
    ap.add_argument("--cache-dir", default=None, help="the Compiler's cache_dir (default: none)")
    ap.add_argument("--slow", type=float, default=30.0, help="a slow step, in µs (issue 17's p99 target)")
    ap.add_argument("--slowest", type=int, default=5, help="slowest steps to print per tokenizer")
    ap.add_argument("--passes", type=int, default=1, help="walk the sample this many times, report the last")
    a = ap.parse_args()
    items = compare.sample_items(a.glaive, a.github, a.seed, [x for x in a.ids.split(",") if x])
    for tok in a.tokenizers.split(","):
        run(tok, items, a)


if __name__ == "__main__":
    main()
