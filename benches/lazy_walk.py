#!/usr/bin/env python3
"""Mask fills of lazy guides along real documents, one process, one ``Compiler``.

    python benches/lazy_walk.py --glaive 40                 # 40 sampled Glaiveai2K regexes
    python benches/lazy_walk.py --github 30 --tokenizer qwen2
    python benches/lazy_walk.py --ids Github_easy/o58906 --tokenizer mistral7b

For an A/B of a change: build each version, run this back to back on each, compare. Inputs are
``compare.py``'s (same seed, same canonical document paths); each schema gets a fresh lazy guide
from one shared ``Compiler``, as a server would, so per-tokenizer caches (slices) are warm after
the first documents. Prints the distribution of ``mask`` + ``next_state`` per step, the total,
every step over ``--slow`` ms, and the states each document built.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
import propertok as pt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glaive", type=int, default=0)
    ap.add_argument("--github", type=int, default=0)
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ids", default="", help="comma-separated schema ids instead of the sample")
    ap.add_argument("--slow", type=float, default=10.0, help="report steps over this many ms")
    a = ap.parse_args()
    items = compare.sample_items(a.glaive, a.github, a.seed, [x for x in a.ids.split(",") if x])
    paths, _, _ = compare.canonical_paths(items, compare.load_oracle_module(), a.tokenizer, 1)
    compiler = pt.Compiler(pt.Vocabulary.from_file(str(compare.tokenizer_path(a.tokenizer))))
    steps, first, built, failed = [], [], [], 0
    for item in items:
        docs = paths.get(item["id"]) or []
        if not docs:
            continue
        try:
            t0 = time.perf_counter()
            guide = compiler.compile_regex(item["regex"], lazy=True)
            state = guide.initial_state
            guide.mask(state)
            first.append(time.perf_counter() - t0)
            for token in docs[0]:
                t = time.perf_counter()
                guide.mask(state)
                state = guide.next_state(state, token)
                steps.append(time.perf_counter() - t)
                if steps[-1] * 1e3 > a.slow:
                    print(f"slow step {item['id']} #{len(steps)}: {steps[-1] * 1e3:.1f} ms")
            built.append((guide.num_states, len(docs[0]), guide.stats()["lazy_text_states"]))
        except pt.PropertokError as e:
            failed += 1
            print(f"failed {item['id']}: {e}")
    if not steps:
        sys.exit("no document paths")
    ordered = sorted(steps)

    def us(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6

    print(
        f"{a.tokenizer}: {len(first)} documents, {len(steps)} steps; mask fill median {us(0.5):.0f} µs, "
        f"p90 {us(0.9):.0f} µs, p99 {us(0.99):.0f} µs, max {ordered[-1] * 1e3:.1f} ms, "
        f"all {sum(steps):.2f} s; first mask median {statistics.median(first) * 1e3:.1f} ms; "
        f"{failed} failed"
    )
    states, tokens, texts = (statistics.median(column) for column in zip(*built))
    print(f"per document (median): {tokens:.0f} tokens, {states:.0f} guide states, {texts:.0f} text states")


if __name__ == "__main__":
    main()
