#!/usr/bin/env python3
"""Mask fills of fresh lazy guides along a long counted string (``{0,N}``), one ``Compiler``.

    python benches/counted_strings.py --tokenizer llama3 --max 255 --guides 3 --cache-dir /tmp/ptcache
    python benches/counted_strings.py --tokenizer llama3 --words 99 --guides 3 --cache-dir /tmp/ptcache

Each guide compiles the same regex (a JSON object whose first field is a string of at most
``--max`` characters, with escapes) and walks the canonical encoding of one document whose
string is ``--repeat`` copies of an English sentence, filling a bitmask at each step. Every
position of a counted string is a regex state of its own, so each step is a first visit in
every guide; ``docs/design.md`` §8 ("Counted strings judged at their horizon") has the figures.
With ``--words N`` the string is counted by words instead, as JSONSchemaBench's
``Github_hard/o21072`` writes it: a schema whose string has the ``pattern``
``^(?:\S+\s+){0,N}\S+$``, compiled by ``compile_json_schema`` (``docs/design.md`` §8, "Counted
words take the previous word's walk").
The first guide also walks the tokenizer's slices (with a new ``--cache-dir``): read the
later ones. For an A/B of a change, run each build back to back (``PYTHONPATH`` at a copy of
the package).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402

SENTENCE = "The quick brown fox jumps over the lazy dog. "


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--max", type=int, default=255, help="the string's most characters")
    ap.add_argument("--repeat", type=int, default=4, help="copies of the sentence in the string")
    ap.add_argument("--words", type=int, default=None, help="count words instead, at most this many plus one")
    ap.add_argument("--guides", type=int, default=3)
    ap.add_argument("--cache-dir", default=None)
    a = ap.parse_args()
    import numpy as np
    import propertok as pt

    body = SENTENCE * a.repeat
    if a.words is not None:
        body = body.strip()
        text = '{"a":"' + body + '"}'
        if len(body.split()) > a.words + 1:
            sys.exit(f"the string has {len(body.split())} words, more than --words {a.words} + 1")
        pattern = r"^(?:\S+\s+){0,%d}\S+$" % a.words
        schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}, "required": ["a"],
                  "additionalProperties": False}
    else:
        text = '{"a": "' + body + '", "b": 5}'
        if len(body) > a.max:
            sys.exit(f"the string has {len(body)} characters, more than --max {a.max}")
        regex = r'\{"a": "([^"\\\x00-\x1F]|\\["\\/bfnrt]){0,%d}", "b": [0-9]\}' % a.max
    path = compare.tokenizer_path(a.tokenizer)
    oracle = compare.load_oracle_module().Oracle.from_file(path, name=a.tokenizer)
    ids = oracle.canonical(text)
    vocab = pt.Vocabulary.from_file(str(path))
    compiler = pt.Compiler(vocab, cache_dir=a.cache_dir)
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    counted = f"{{0,{a.max}}}" if a.words is None else f"{{0,{a.words}}} words"
    print(f"{a.tokenizer}, {counted}, {len(ids)} tokens; per guide: sum, median and largest step (µs)")
    for g in range(a.guides):
        if a.words is None:
            matcher = compiler.compile_regex(regex).matcher()
        else:
            matcher = compiler.compile_json_schema(schema, whitespace="").matcher()
        steps = []
        for t in ids:
            t0 = time.perf_counter_ns()
            matcher.fill_next_token_bitmask(bitmask, 0)
            steps.append((time.perf_counter_ns() - t0) / 1e3)
            if not matcher.accept_token(t):
                sys.exit(f"guide {g} refused token {t} of the canonical encoding")
        print(f"guide {g}: sum {sum(steps):8.0f}  median {statistics.median(steps):6.0f}  max {max(steps):6.0f}")


if __name__ == "__main__":
    main()
