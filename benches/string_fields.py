#!/usr/bin/env python3
"""Mask fills of fresh lazy guides along objects of free-text string fields, one ``Compiler``.

    PROPERTOK_CACHE_DIR=/tmp/ptcache python benches/string_fields.py --guides 30
    python benches/string_fields.py --tokenizer o200k --fields 4

Each round compiles a new regex (an object of ``--fields`` string fields with new key names, as a
server compiles a new tool schema per request) lazily, and walks the real tokenizer's encoding
of a document of short sentences, timing ``mask`` + ``next_state`` per step: the first visits
of JSON string bodies, where issue 17's mask p99 came from (``benches/RESULTS.md``, stop 39).
For an A/B of a change: build each version and run this back to back on each.
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
import propertok as pt  # noqa: E402

WORDS = ("alpha beta gamma delta the quick brown fox jumps over lazy dog. Hello, world! 42 items; "
         "(x) time-of-day").split()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--guides", type=int, default=30)
    ap.add_argument("--fields", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from tokenizers import Tokenizer

    path = str(compare.tokenizer_path(a.tokenizer))
    hf = Tokenizer.from_file(path)
    compiler = pt.Compiler(pt.Vocabulary.from_file(path))
    rng = random.Random(a.seed)
    steps, firsts = [], []
    for r in range(a.guides):
        keys = [f"k{r}_{i}" for i in range(a.fields)]
        regex = r"\{" + ", ".join(f'"{k}": "[^"\\\\\\x00-\\x1f]*"' for k in keys) + r"\}"
        doc = "{" + ", ".join(
            f'"{k}": "' + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) + '"' for k in keys) + "}"
        ids = hf.encode(doc, add_special_tokens=False).ids
        t0 = time.perf_counter()
        guide = compiler.compile_regex(regex, lazy=True)
        state = guide.initial_state
        guide.mask(state)
        firsts.append(time.perf_counter() - t0)
        for token in ids:
            t = time.perf_counter()
            guide.mask(state)
            state = guide.next_state(state, token)
            steps.append(time.perf_counter() - t)
        if not guide.is_final(state):
            raise SystemExit(f"guide {r}: the document did not finish the regex")
    steps.sort()

    def q(p):
        return steps[min(len(steps) - 1, int(len(steps) * p))] * 1e6

    print(f"{a.tokenizer}: {a.guides} guides, {len(steps)} steps: mask fill median {q(0.5):.1f} µs, "
          f"p90 {q(0.9):.0f} µs, p99 {q(0.99):.0f} µs, max {steps[-1] * 1e6:.0f} µs; all {sum(steps) * 1e3:.0f} ms; "
          f"first mask median {statistics.median(firsts) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
