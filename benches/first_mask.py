"""Time to first mask (compile + the initial mask) of lazy guides for JSONSchemaBench regexes.

One ``Compiler`` per run, its tokenizer DFA cached (``PROPERTOK_CACHE_DIR``) and set up by a
warm-up compile first, so each figure is the regex's own cost. For an A/B of two builds, run the
same ids under each (``PYTHONPATH`` set to an unzipped wheel) and compare the two files::

    PROPERTOK_SHARED=../shared python benches/first_mask.py --tokenizer mistral7b \\
        --subsets Github_hard,Github_medium --json /tmp/b.json
    PYTHONPATH=/tmp/Awheel/pkg python benches/first_mask.py --ids-from /tmp/b.json --json /tmp/a.json
    python benches/first_mask.py --compare /tmp/a.json /tmp/b.json --kind "outlined rules"

Each row records the guide's ``lazy_text_automaton`` (``"outlined rules"`` for a regex whose
counted repetitions are outlined), or the error's type and message.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def rows_of_data(shared: Path) -> list[dict]:
    path = shared / "data" / "jsonschemabench_regex.jsonl"
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def measure(args) -> None:
    sys.path.insert(0, str(REPO / "benches"))
    import compare  # the tokenizer paths
    import propertok as pt

    shared = Path(os.environ.get("PROPERTOK_SHARED", REPO.parent / "shared"))
    rows = [r for r in rows_of_data(shared) if isinstance(r.get("regex"), str)]
    if args.ids_from:
        wanted = [r["id"] for r in json.loads(Path(args.ids_from).read_text())["rows"]]
    elif args.ids.startswith("@"):
        wanted = Path(args.ids[1:]).read_text().split()
    elif args.ids:
        wanted = args.ids.split(",")
    else:
        subsets = set(args.subsets.split(","))
        wanted = [r["id"] for r in rows if r["subset"] in subsets][: args.limit]
    by_id = {r["id"]: r["regex"] for r in rows}
    compiler = pt.Compiler(pt.Vocabulary.from_file(str(compare.tokenizer_path(args.tokenizer))))
    warm = compiler.compile_regex(r'"[^"]{0,10}"', lazy=True)
    warm.mask(warm.initial_state)
    out = []
    for item_id in wanted:
        started = time.perf_counter()
        row = {"id": item_id}
        try:
            guide = compiler.compile_regex(by_id[item_id], lazy=True)
            guide.mask(guide.initial_state)
            row["ms"] = 1e3 * (time.perf_counter() - started)
            row["kind"] = guide.stats()["lazy_text_automaton"]
        except Exception as e:  # noqa: BLE001 - every refusal is a row of the result
            row["ms"] = 1e3 * (time.perf_counter() - started)
            row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        out.append(row)
        print(f"{item_id:45s} {row['ms']:9.1f} ms  {row.get('kind') or row['error']}", flush=True)
    run = {"tokenizer": args.tokenizer, "extension": pt._core.__file__, "rows": out}
    if args.json:
        Path(args.json).write_text(json.dumps(run, indent=1))


def compare_runs(a_path: str, b_path: str, kind: str) -> None:
    a = {r["id"]: r for r in json.loads(Path(a_path).read_text())["rows"]}
    b = {r["id"]: r for r in json.loads(Path(b_path).read_text())["rows"]}
    ids = [i for i in b if i in a and (not kind or b[i].get("kind") == kind)]
    both = [i for i in ids if "error" not in a[i] and "error" not in b[i]]
    fixed = [i for i in ids if "error" in a[i] and "error" not in b[i]]
    broken = [i for i in ids if "error" not in a[i] and "error" in b[i]]
    print(f"{len(ids)} regexes{f' whose B guide is {kind!r}' if kind else ''}: both compile {len(both)}, "
          f"refused by A only {len(fixed)}, refused by B only {len(broken)}")
    if both:
        ratio = math.exp(sum(math.log(b[i]["ms"] / a[i]["ms"]) for i in both) / len(both))
        total_a, total_b = sum(a[i]["ms"] for i in both), sum(b[i]["ms"] for i in both)
        print(f"  B/A geometric mean {ratio:.2f}; total {total_a:.0f} -> {total_b:.0f} ms; "
              f"max {max(a[i]['ms'] for i in both):.0f} -> {max(b[i]['ms'] for i in both):.0f} ms")
    for i in fixed:
        print(f"  {i}: A {a[i]['error'][:60]}; B {b[i]['ms']:.0f} ms")
    for i in broken:
        print(f"  {i}: B {b[i]['error'][:80]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="mistral7b")
    ap.add_argument("--ids", default="", help="comma-separated JSONSchemaBench ids, or @FILE of ids")
    ap.add_argument("--ids-from", default="", help="the ids of an earlier run's --json file")
    ap.add_argument("--subsets", default="Github_easy,Github_medium,Github_hard,Github_ultra,Snowplow,Kubernetes")
    ap.add_argument("--limit", type=int, default=100_000, help="at most this many ids from --subsets")
    ap.add_argument("--json", default="")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --json files")
    ap.add_argument("--kind", default="", help="with --compare: only ids whose B guide is of this kind")
    args = ap.parse_args()
    if args.compare:
        compare_runs(*args.compare, args.kind)
    else:
        measure(args)


if __name__ == "__main__":
    main()
