"""JSON Schema coverage: propertok's converter vs outlines-core's, on the shared JSONSchemaBench.

For a seeded sample of schemas (stratified over the subsets) and each converter:

* converted: the converter returned a regex *and* ``propertok.ByteDfa`` compiled it within its
  default limit (100,000 states) and the per-schema timeout; a regex nothing can compile is not
  usable;
* valid samples: of ``ByteDfa.sample`` strings from converted schemas, the share that parse as
  JSON and validate with ``jsonschema`` (the schema's draft, format checking on, ``multipleOf``
  checked in exact decimal arithmetic so that float rounding does not count against anyone);
* instances accepted: of the shared valid instances (``json.dumps(x, separators=(",", ":"),
  ensure_ascii=False)``) of converted schemas, the share the regex matches. Neither converter
  accepts keys out of declared order or undeclared keys, so this is a lower bound for both.

outlines-core must not be a dependency of propertok: it runs in its own virtual environment
(``--outlines-python``, default ``/tmp/benchvenv/bin/python``; create it with
``python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install outlines-core``), in a worker
process that only turns schemas into regexes. Everything else runs here, in worker processes that
are killed and restarted when a schema exceeds ``--timeout``.

    python benches/json_schema_coverage.py --schemas 300 --write benches/RESULTS.md
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import subprocess
import sys
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PROPERTOK_SHARED", ROOT.parent / "shared"))
SECTION = "## JSON Schema coverage"
CONVERTERS = ("propertok", "propertok-strict", "propertok-lax", "outlines-core")
# Our converter modes: the default ignores keywords no draft defines (with a warning), strict
# refuses them, lax also ignores what it cannot enforce.
STRICT = {"propertok": None, "propertok-strict": True, "propertok-lax": False}


# --------------------------------------------------------------------------------------------
# Workers: one JSON request per line on stdin, one JSON answer per line on stdout
# --------------------------------------------------------------------------------------------


def outlines_worker() -> None:
    """Runs in the outlines-core venv: schema -> regex (or the error)."""
    from outlines_core.json_schema import build_regex_from_schema

    for line in sys.stdin:
        schema = json.loads(line)["schema"]
        try:
            answer = {"regex": build_regex_from_schema(json.dumps(schema, ensure_ascii=False))}
        except BaseException as e:  # noqa: BLE001 - report anything (pyo3 panics included)
            answer = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        print(json.dumps(answer), flush=True)


def evaluate_worker() -> None:
    """Runs here: (converter, schema[, regex]) -> compile, sample, validate, match instances."""
    import jsonschema

    import propertok
    from propertok.json_schema import schema_to_regex

    def multiple_of(validator, m, instance, schema):
        if validator.is_type(instance, "number") and not isinstance(instance, bool):
            try:
                if Decimal(repr(instance)) % Decimal(repr(m)) != 0:
                    yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {m!r}")
            except InvalidOperation:
                yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {m!r}")

    for line in sys.stdin:
        req = json.loads(line)
        schema, answer = req["schema"], {}
        try:
            regex = req.get("regex")
            if regex is None:
                regex = schema_to_regex(schema, strict=STRICT[req["converter"]])
            answer["regex_len"] = len(regex)
            dfa = propertok.ByteDfa(regex)
        except Exception as e:  # noqa: BLE001
            answer["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            print(json.dumps(answer), flush=True)
            continue
        cls = jsonschema.validators.validator_for(schema)
        validator = jsonschema.validators.extend(cls, {"multipleOf": multiple_of})(
            schema, format_checker=cls.FORMAT_CHECKER)
        valid = 0
        samples = dfa.sample(req["samples"], req["seed"], max_len=256)
        for s in samples:
            try:
                valid += validator.is_valid(json.loads(s))
            except (ValueError, RecursionError):
                pass
        answer.update(samples=len(samples), valid=valid)
        accepted = sum(
            dfa.matches(json.dumps(x, separators=(",", ":"), ensure_ascii=False).encode())
            for x in req["instances"])
        answer.update(instances=len(req["instances"]), accepted=accepted)
        print(json.dumps(answer), flush=True)


class Worker:
    """A worker process with a per-request timeout (killed and restarted past it)."""

    def __init__(self, argv: List[str]):
        self.argv, self.proc = argv, None

    def ask(self, request: dict, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        if not ready:
            self.close()
            return {"error": f"timeout after {timeout:g} s"}
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            return {"error": "worker crashed"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def load_rows(n: int, seed: int) -> List[dict]:
    """A seeded sample of ``n`` schemas, stratified over the subsets (proportional, >= 1 each)."""
    with open(SHARED / "data" / "jsonschemabench_schemas.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    instances: Dict[str, list] = {}
    with open(SHARED / "data" / "jsonschemabench_valid_instances.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            instances[row["id"]] = row["instances"]
    by_subset: Dict[str, List[dict]] = collections.defaultdict(list)
    for row in rows:
        row["instances"] = instances.get(row["id"], [])
        by_subset[row["subset"]].append(row)
    rng = random.Random(seed)
    picked = []
    for subset in sorted(by_subset):
        pool = sorted(by_subset[subset], key=lambda r: r["id"])
        k = max(1, round(n * len(pool) / len(rows)))
        picked += rng.sample(pool, min(k, len(pool)))
    return sorted(picked, key=lambda r: r["id"])


def run(args: argparse.Namespace) -> Dict[str, Any]:
    rows = load_rows(args.schemas, args.seed)
    evaluate = Worker([sys.executable, __file__, "--worker", "evaluate"])
    outlines = Worker([args.outlines_python, __file__, "--worker", "outlines"])
    results: Dict[str, list] = {c: [] for c in CONVERTERS}
    start = time.time()
    for i, row in enumerate(rows):
        base = {"schema": row["schema"], "instances": row["instances"], "samples": args.samples, "seed": args.seed}
        for conv in CONVERTERS:
            t0 = time.perf_counter()
            if conv == "outlines-core":
                made = outlines.ask({"schema": row["schema"]}, args.timeout)
                if "error" in made:
                    answer = made
                else:
                    answer = evaluate.ask({**base, "converter": conv, "regex": made["regex"]},
                                          max(1.0, args.timeout - (time.perf_counter() - t0)))
            else:
                answer = evaluate.ask({**base, "converter": conv}, args.timeout)
            answer.update(id=row["id"], subset=row["subset"], seconds=time.perf_counter() - t0)
            results[conv].append(answer)
        if (i + 1) % 25 == 0:
            print(f"  {i + 1}/{len(rows)} schemas, {time.time() - start:.0f} s", file=sys.stderr)
    evaluate.close()
    outlines.close()
    return {"rows": len(rows), "results": results, "seconds": time.time() - start}


def summarize(res: Dict[str, Any]) -> Dict[str, dict]:
    out = {}
    ok_sets = {c: {r["id"] for r in rs if "error" not in r} for c, rs in res["results"].items()}
    both = ok_sets["propertok"] & ok_sets["outlines-core"]
    for conv, rs in res["results"].items():
        ok = [r for r in rs if "error" not in r]
        common = [r for r in ok if r["id"] in both]
        errors = collections.Counter(_error_kind(r["error"]) for r in rs if "error" in r)
        out[conv] = {
            "schemas": len(rs),
            "converted": len(ok),
            "samples": sum(r["samples"] for r in ok),
            "valid": sum(r["valid"] for r in ok),
            "all_valid_schemas": sum(1 for r in ok if r["valid"] == r["samples"]),
            "common_samples": sum(r["samples"] for r in common),
            "common_valid": sum(r["valid"] for r in common),
            "instances": sum(r["instances"] for r in ok),
            "accepted": sum(r["accepted"] for r in ok),
            "errors": errors.most_common(6),
            "by_subset": _by_subset(rs),
        }
    out["_common"] = len(both)
    return out


def _error_kind(error: str) -> str:
    if error.startswith("timeout"):
        return "timeout"
    if "max_byte_dfa_states" in error:
        return "ByteDfa state limit"
    if "UnsupportedSchemaError" in error or "InvalidSchemaError" in error:
        tail = error.split(": ", 1)[1] if ": " in error else error
        keyword = tail.split("'")[1] if tail.startswith("'") else "schema"
        return f"unsupported: {keyword}"
    return error.split(":")[0][:60]


def _by_subset(rs: list) -> Dict[str, str]:
    table: Dict[str, list] = collections.defaultdict(lambda: [0, 0])
    for r in rs:
        table[r["subset"]][1] += 1
        table[r["subset"]][0] += "error" not in r
    return {k: f"{v[0]}/{v[1]}" for k, v in sorted(table.items())}


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "n/a"


def markdown(args: argparse.Namespace, res: Dict[str, Any], summary: Dict[str, dict]) -> str:
    import importlib.metadata

    import propertok

    try:
        oc_version = subprocess.run(
            [args.outlines_python, "-c", "import importlib.metadata as m; print(m.version('outlines-core'))"],
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        oc_version = "?"
    lines = [
        SECTION,
        "",
        f"`python benches/json_schema_coverage.py --schemas {args.schemas} --samples {args.samples} "
        f"--seed {args.seed} --timeout {args.timeout:g} --write benches/RESULTS.md`",
        "",
        f"propertok {propertok.__version__}, outlines-core {oc_version} (own venv), jsonschema "
        f"{importlib.metadata.version('jsonschema')}, Python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"{res['rows']} schemas (seeded, stratified over the 10 JSONSchemaBench subsets of "
        f"`shared/data`), {res['seconds'] / 60:.0f} min. `propertok` is `schema_to_regex(schema)` "
        "(the default: keywords no draft defines are ignored with a warning), `propertok-strict` is "
        "`strict=True` (they raise), `propertok-lax` is `strict=False` (what cannot be enforced is "
        "ignored too, as outlines-core does). A timeout (per schema and converter, conversion "
        "and ByteDfa together) counts as not converted for both converters; timeouts depend on "
        f"the machine's load (1-minute load average at the end: {os.getloadavg()[0]:.1f}).",
        "",
        "| converter | converted | valid samples | schemas with all samples valid | valid samples, schemas both converted | valid instances accepted |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for conv in CONVERTERS:
        s = summary[conv]
        lines.append(
            f"| {conv} | {s['converted']}/{s['schemas']} ({_pct(s['converted'], s['schemas'])}) "
            f"| {s['valid']}/{s['samples']} ({_pct(s['valid'], s['samples'])}) "
            f"| {s['all_valid_schemas']}/{s['converted']} "
            f"| {s['common_valid']}/{s['common_samples']} ({_pct(s['common_valid'], s['common_samples'])}) "
            f"| {s['accepted']}/{s['instances']} ({_pct(s['accepted'], s['instances'])}) |")
    lines += ["", f"Schemas both `propertok` (default) and outlines-core converted: {summary['_common']}.", ""]
    subsets = sorted(summary["propertok"]["by_subset"])
    lines.append("| converted by subset | " + " | ".join(subsets) + " |")
    lines.append("| --- |" + " --- |" * len(subsets))
    for conv in CONVERTERS:
        lines.append(f"| {conv} | " + " | ".join(summary[conv]["by_subset"].get(s, "0/0") for s in subsets) + " |")
    lines += ["", "Most common reasons a schema was not converted:", ""]
    for conv in CONVERTERS:
        reasons = ", ".join(f"{k} ({v})" for k, v in summary[conv]["errors"])
        lines.append(f"- {conv}: {reasons}")
    lines += [
        "",
        "Invalid samples come from approximations: outlines-core ignores what it cannot express "
        "(`uniqueItems`, `minProperties`, formats inside patterns, ...) and pastes `pattern` "
        "between quotes unescaped; propertok's only known ones are `oneOf` read as `anyOf` where "
        "it cannot prove the branches exclusive, and, in `-lax` mode, ignored formats that "
        "`jsonschema` checks (see `python/propertok/json_schema.py`).",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    """Add or replace the ``## JSON Schema coverage`` section of ``path``, nothing else."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + ("\n" + old[end + 1 :] if end >= 0 else "")
    path.write_text(new.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=["outlines", "evaluate"], help=argparse.SUPPRESS)
    parser.add_argument("--schemas", type=int, default=300)
    parser.add_argument("--samples", type=int, default=10, help="ByteDfa samples per schema")
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per schema and converter")
    parser.add_argument("--outlines-python", default=os.environ.get("OUTLINES_PYTHON", "/tmp/benchvenv/bin/python"))
    parser.add_argument("--json", metavar="FILE", help="also write the raw results")
    parser.add_argument("--write", metavar="RESULTS_MD", help="write the table into this file's section")
    args = parser.parse_args()
    if args.worker == "outlines":
        return outlines_worker()
    if args.worker == "evaluate":
        return evaluate_worker()
    res = run(args)
    summary = summarize(res)
    text = markdown(args, res, summary)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": res, "summary": summary}, indent=1), encoding="utf-8")
    if args.write:
        write_section(Path(args.write), text)


if __name__ == "__main__":
    main()
