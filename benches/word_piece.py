#!/usr/bin/env python3
"""WordPiece (BERT) guides: time to first mask and mask fills along the tokenizer's own encoding.

    python benches/word_piece.py                # the regexes below, 3 rounds
    python benches/word_piece.py --rounds 5

For each regex and round: per text, a fresh lazy guide from one shared ``Compiler`` (compile +
first mask timed), then ``mask`` at every step of the text's canonical encoding (first visits:
every state is new). Prints the median time to first mask and the median / p90 / max mask fill
per round; and, for the regexes an eager guide can hold, the eager compile. Reads the BERT
tokenizer from ``$PROPERTOK_SHARED`` (default ``../shared``).
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import propertok as pt
from tokenizers import Tokenizer

TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "unaffable people rarely believe in constrained decoding",
    "hello there general kenobi",
]
# (regex, whether eager guides hold it)
REGEXES = [
    (r"[a-z]+( [a-z]+)*", False),
    (r"[a-z0-9]{1,12}( [a-z0-9]{1,12}){0,9}", False),
    (r"(the|a|hello|unaffable|people) [a-z]{1,4}", True),
]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    shared = Path(os.environ.get("PROPERTOK_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    path = str(shared / "tokenizers" / "bert-wordpiece" / "tokenizer.json")
    vocab, tok = pt.Vocabulary.from_file(path), Tokenizer.from_file(path)
    compiler = pt.Compiler(vocab)
    compiler.compile_regex("a")  # the entry trie, once per Compiler
    print("| regex | round | first mask median (ms) | mask median / p90 / max (ms) | steps | eager compile (ms) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for pattern, eager_ok in REGEXES:
        for r in range(args.rounds):
            firsts, fills = [], []
            for text in TEXTS:
                ids = tok.encode(text, add_special_tokens=False).ids
                start = time.perf_counter()
                guide = compiler.compile_regex(pattern)
                firsts.append(time.perf_counter() - start)
                state = guide.initial_state
                for t in ids:
                    start = time.perf_counter()
                    guide.mask(state)
                    fills.append(time.perf_counter() - start)
                    if t not in guide.allowed_tokens(state):
                        break  # the text leaves the regex here
                    state = guide.next_state(state, t)
            fills.sort()
            eager = "-"
            if eager_ok:
                start = time.perf_counter()
                compiler.compile_regex(pattern, lazy=False)
                eager = ms(time.perf_counter() - start)
            print(f"| `{pattern}` | {r + 1} | {ms(statistics.median(firsts))} | {ms(statistics.median(fills))} / "
                  f"{ms(fills[int(len(fills) * 0.9)])} / {ms(fills[-1])} | {len(fills)} | {eager} |")


if __name__ == "__main__":
    main()
