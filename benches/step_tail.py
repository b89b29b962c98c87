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

The documents are encoded in a child process, so that the process whose steps are timed holds none
of that work's memory (pages it freed would be reused by the fills instead of faulted in).
``--faults`` also reports the minor page faults and kernel time inside the fills (``getrusage``
around each, outside its timing), and ``--md5`` a digest of every mask filled, to check that two
builds give the same masks.
"""

import argparse
import concurrent.futures
import gc
import hashlib
import multiprocessing
import resource
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

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        paths = child.submit(documents, items, tok).result()
    path = str(compare.tokenizer_path(tok))
    vocab = pt.Vocabulary.from_file(path)
    hf = Tokenizer.from_file(path)
    compiler = pt.Compiler(vocab, cache_dir=a.cache_dir)
    compiler.compile_regex("a")  # the tokenizer's set-up, outside the steps
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    clock = time.perf_counter_ns
    for _ in range(a.passes - 1):
        walk_all(compiler, items, paths, bitmask, clock, Watch(False, False))
    before = first_uses(compiler)
    watch = Watch(a.faults, a.md5)
    walked = walk_all(compiler, items, paths, bitmask, clock, watch)
    rows = [
        (schema, i, ns, step_class(hf.decode(doc[:i]), i, len(doc)), doc)
        for schema, doc, times in walked
        for i, ns in enumerate(times)
    ]
    report(tok, rows, hf, a)
    watch.report([ns for _, _, times in walked for ns in times])
    made = {k: v - before[k] for k, v in first_uses(compiler).items()}
    print("first uses in the pass reported: " + ", ".join(f"{k} {v}" for k, v in made.items()))


def first_uses(compiler):
    """The tokenizer-wide tables a compiler made so far: slice group sets walked over the vocabulary
    or read from the cache directory, regions found or read (what a new process pays once)."""
    stats = compiler.tokenizer_dfa_stats()
    keys = ("slice_sets_walked", "slice_sets_loaded", "slice_regions_found", "slice_regions_loaded")
    return {k: int(stats[k]) for k in keys}


def documents(items, tok):
    """The first canonical document of each schema (run in a child process: see the module docs)."""
    paths, _, _ = compare.canonical_paths(items, compare.load_oracle_module(), tok, 1)
    return paths


class Watch:
    """What ``--faults`` and ``--md5`` add around each fill: page faults and kernel time, and a
    digest of the masks."""

    def __init__(self, faults, md5):
        self.faults, self.md5 = faults, md5
        self.step_faults, self.kernel_s = [], 0.0
        self.digest = hashlib.md5()

    def before(self):
        return resource.getrusage(resource.RUSAGE_SELF) if self.faults else None

    def after(self, usage, bitmask):
        if usage is not None:
            now = resource.getrusage(resource.RUSAGE_SELF)
            self.step_faults.append(now.ru_minflt - usage.ru_minflt)
            self.kernel_s += now.ru_stime - usage.ru_stime
        if self.md5:
            self.digest.update(bitmask.tobytes())

    def report(self, times_ns):
        if self.faults and times_ns:
            n = len(times_ns)
            slowest = sorted(range(n), key=lambda i: -times_ns[i])[: max(1, n // 100)]
            print(
                f"in the fills: {sum(self.step_faults)} page faults, {self.kernel_s * 1e3:.0f} ms in the kernel, "
                f"{sum(times_ns) / 1e6:.0f} ms in all; in the slowest 1 % of steps: "
                f"{sum(self.step_faults[i] for i in slowest)} page faults, {sum(times_ns[i] for i in slowest) / 1e6:.0f} ms"
            )
        if self.md5:
            print(f"md5 of the masks: {self.digest.hexdigest()[:12]}")


def walk_all(compiler, items, paths, bitmask, clock, watch):
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
        for token in [*doc, None]:
            usage = watch.before()
            t = clock()
            fill(bitmask, 0)
            times.append(clock() - t)
            watch.after(usage, bitmask)
            if token is not None:
                matcher.accept_token(token)
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
    ap.add_argument("--faults", action="store_true", help="page faults and kernel time inside the fills")
    ap.add_argument("--md5", action="store_true", help="a digest of every mask filled")
    a = ap.parse_args()
    items = compare.sample_items(a.glaive, a.github, a.seed, [x for x in a.ids.split(",") if x])
    for tok in a.tokenizers.split(","):
        run(tok, items, a)


if __name__ == "__main__":
    main()
