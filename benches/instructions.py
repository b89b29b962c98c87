#!/usr/bin/env python3
"""Instructions executed by mask fills of lazy guides, counted by callgrind: an A/B that noise cannot move.

    python benches/instructions.py --glaive 60                        # the installed build
    python benches/instructions.py --glaive 60 --build a.so --build b.so
    python benches/instructions.py --ids Github_easy/o58906 --tokenizer mistral7b --reps 2

Why: on a shared 2-core machine, two timed runs of one build differ by 5-10 %, and a change worth
1-3 % needs many alternating runs to show (`benches/RESULTS.md`, stops 69-70). Instruction counts
of the same work are the same in every run, so one run per build decides.

What is counted: ``compare.py``'s inputs (same sample, same canonical document paths), each schema
compiled into a fresh lazy guide by one shared ``Compiler`` and walked along its document with
``Matcher.fill_next_token_bitmask`` and ``accept_token``, as ``compare.py`` does. A first round
warms the ``Compiler`` (slices, shared first-token sets; the disk cache with ``--cache-dir``) on as
many *other* schemas (the next seed's sample; none with ``--ids``), as a server has seen others
before; only the rounds after it (``--reps``) are counted: every guide's own first visits, and
first-token sets shared only where another schema had the same shape. ``--warm same`` warms on the
counted schemas themselves (every shareable set is then shared: an upper bound on what sharing
gives); ``--warm none`` counts a new process's first round, as ``compare.py`` times it (with a
``--cache-dir``, what the tokenizer's disk cache holds is read, not made). Each ``--build`` (a ``_core.abi3.so``) runs from a copy of the package beside it; with a
``--cache-dir``, each build first walks the same inputs without valgrind, so that every
counted build finds the disk cache as full. Needs
``valgrind``; ~50x slower than a plain run (40 Glaiveai2K + 20 Github_* schemas: ~25 s a build).

Prints per build the instructions of the counted rounds: all of them, the compiles, the mask
fills, the steps (``accept_token``), and within the fills the first-token sets (keys and
searches) and the liveness searches.
"""

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# (label, how the Rust symbol whose inclusive count is reported ends)
PARTS = [
    # The binding's entry point: a Rust function the compiler may inline, and did.
    ("compile", "PyCompiler::__pymethod_compile_regex__ "),
    ("mask fills", "Matcher::write_mask "),
    ("steps", "Guide::step "),
    ("  first-token sets", "Engine::first_tokens "),
    ("  liveness", "Engine::live "),
]


def child(a):
    import numpy as np

    import compare
    import propertok as pt

    d = json.loads(Path(a.inputs).read_text())
    items, warm_items, paths = d["items"], d["warm_items"], d["paths"]
    vocab = pt.Vocabulary.from_file(str(compare.tokenizer_path(a.tokenizer)))
    compiler = pt.Compiler(vocab, cache_dir=a.cache_dir or None)
    bm = np.zeros((1, (compiler.vocabulary.vocab_size + 31) // 32), dtype=np.int32)

    def walk(items):
        for item in items:
            doc = (paths.get(item["id"]) or [[]])[0]
            m = compiler.compile_regex(item["regex"], lazy=True).matcher()
            for t in doc:
                m.fill_next_token_bitmask(bm, 0)
                if not m.accept_token(t):
                    sys.exit(f"{item['id']}: token {t} refused")

    walk(warm_items)
    gc.collect()
    gc.disable()
    if not a.prime:
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
    for _ in range(a.reps):
        walk(items)
    if not a.prime:
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, capture_output=True)


def package_env(build, dest: Path) -> dict:
    """A copy of the installed package in `dest` with `build`'s extension (`None`: the installed
    one), and the environment that imports it."""
    import propertok

    shutil.copytree(Path(propertok.__file__).resolve().parent, dest / "propertok",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if build is not None:
        shutil.copyfile(build, dest / "propertok" / "_core.abi3.so")
    return dict(os.environ, PYTHONPATH=f"{dest}{os.pathsep}{HERE}")


def child_args(a, inputs) -> list:
    return [sys.executable, __file__, "--child", "--inputs", inputs, "--tokenizer", a.tokenizer,
            "--reps", str(a.reps), "--cache-dir", a.cache_dir]


def prime(i, build, a, inputs, work):
    """The same walks as a counted run of `build`, without valgrind, so that the counted run finds
    the cache directory full: a build that fills it (slice sets, derived slices' tables) pays walks
    that every later build reads from disk (a first A/B at stop 74 read -30 % for a change worth
    +0.7 %). Every build is primed, since a build that changes a file format keys its own files
    (stop 87: a second build left unprimed walked its sets, +52 %)."""
    env = package_env(build, Path(work) / f"prime{i}")
    subprocess.run(child_args(a, inputs) + ["--prime"], check=True, env=env, stderr=subprocess.DEVNULL)


def count(i, build, a, inputs, work):
    """Inclusive instruction counts of PARTS (and the total) for build `i` (`None`: the installed one)."""
    env = package_env(build, Path(work) / f"build{i}")
    out = Path(work) / f"callgrind.out.{i}"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"] + child_args(a, inputs)
    subprocess.run(cmd, check=True, env=env, stderr=subprocess.DEVNULL)
    if a.keep:
        Path(a.keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, Path(a.keep) / f"callgrind.out.{i}")
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)], check=True, capture_output=True,
                            text=True).stdout
    counts = {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)", line)
        if not m:
            continue
        n, what = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in what:
            counts["all"] = n
        for label, symbol in PARTS:
            if what.split("[")[0].rstrip().endswith(symbol.strip()):
                counts[label] = max(counts.get(label, 0), n)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glaive", type=int, default=0)
    ap.add_argument("--github", type=int, default=0)
    ap.add_argument("--ids", default="", help="comma-separated schema ids instead of the sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--reps", type=int, default=1, help="counted rounds after the warm one")
    ap.add_argument("--warm", choices=["others", "same", "none"], default="others",
                    help="warm the Compiler on other schemas (default), on the counted ones, or not at all")
    ap.add_argument("--build", action="append", default=[], help="a _core.abi3.so to count (repeatable)")
    ap.add_argument("--cache-dir", default=os.environ.get("PROPERTOK_BENCH_CACHE_DIR", ""),
                    help="the Compiler's cache_dir, as compare.py's --cache-dir (default: none, or "
                         "$PROPERTOK_BENCH_CACHE_DIR)")
    ap.add_argument("--keep", help="copy each build's callgrind output into this folder (callgrind_annotate reads it)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--prime", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("needs valgrind (callgrind): apt-get install valgrind")
    import compare

    items = compare.sample_items(a.glaive, a.github, a.seed, [x for x in a.ids.split(",") if x])
    if not items:
        sys.exit("no inputs: give --glaive, --github or --ids")
    warm_items = items if a.warm == "same" else []
    if a.warm == "others":
        ids = {r["id"] for r in items}
        warm_items = [r for r in compare.sample_items(a.glaive, a.github, a.seed + 1, []) if r["id"] not in ids]
    paths, _, _ = compare.canonical_paths(items + warm_items, compare.load_oracle_module(), a.tokenizer, 1)
    # A schema with no document (its regex matches nothing, as `compare.py` reports it) is left out.
    dropped = [r["id"] for r in items if not paths.get(r["id"])]
    items = [r for r in items if paths.get(r["id"])]
    warm_items = [r for r in warm_items if paths.get(r["id"])]
    if dropped:
        print(f"left out, no document: {', '.join(dropped)}")
    with tempfile.TemporaryDirectory(prefix="propertok-instr-") as work:
        inputs = str(Path(work) / "inputs.json")
        Path(inputs).write_text(json.dumps({"items": items, "warm_items": warm_items, "paths": dict(paths)}))
        builds = a.build or [None]
        warmed = {"same": "warmed on the same schemas", "none": "not warmed"}.get(a.warm, f"warmed on {len(warm_items)} other schemas")
        print(f"{len(items)} schemas, {a.tokenizer}, {warmed}, {a.reps} counted round(s); millions of instructions")
        print(f"{'':22}" + "".join(f"{Path(b).name if b else 'installed':>16}" for b in builds))
        if a.cache_dir:
            for i, b in enumerate(builds):
                prime(i, b, a, inputs, work)
        rows = [count(i, b, a, inputs, work) for i, b in enumerate(builds)]
        for label in ["all"] + [p[0] for p in PARTS]:
            cells = [r.get(label) for r in rows]
            line = "".join(f"{c / 1e6:>16.2f}" if c is not None else f"{'-':>16}" for c in cells)
            if len(rows) > 1 and cells[0] and cells[-1]:
                line += f"   {100 * (cells[-1] - cells[0]) / cells[0]:+.1f} %"
            print(f"{label:22}{line}")


if __name__ == "__main__":
    main()
