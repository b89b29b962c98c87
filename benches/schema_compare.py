"""Recursive JSON schemas side by side: propertok (`compile_json_schema(schema, lazy=True)`:
`$ref` cycles and free values as pushdown rules, no depth bound), llguidance and xgrammar (their
JSON Schema compilers), on the JSONSchemaBench schemas of the shared corpus that recurse.

A schema *recurses* when `propertok.json_schema.schema_to_rules` writes more than one rule for it
(a `$ref` cycle or a free value `{}`); a seeded sample of them is run. For each schema and
library: a fresh compile plus the first mask ("TTFM"); then one document, propertok's own
random walk (compact JSON, keys in declared order, which every library accepts), checked with
`jsonschema`; then the masks along the tokenizer's encoding of that document on a fresh compile
of each library (first visits included). Each library runs in a process of its own, one after
another. Schemas propertok cannot convert or compile count as not compiled for it, and have no
document.

    /tmp/propertok-bench-venv/bin/python benches/schema_compare.py --tokenizers mistral7b,llama3
    python benches/schema_compare.py --libs propertok --tokenizers llama3 --slowest 20
        # where the mask p99 comes from: the slowest masks, by schema and position
    python benches/schema_compare.py --libs propertok --tokenizers llama3 --passes 3
        # each mask the fastest of three walks with fresh guides: steadier p99s for A/B runs
    /tmp/propertok-bench-venv/bin/python benches/schema_compare.py --samples 4
        # also 4 token sequences per schema drawn from each library's masks: how many are canonical
    /tmp/propertok-bench-venv/bin/python benches/schema_compare.py --flat --subset Glaiveai2K --schemas 60
        # schemas that do not recurse: compile_json_schema's regex against the peers' compilers
    python benches/schema_compare.py --coverage   # which recursive schemas each path builds
    /tmp/propertok-bench-venv/bin/python benches/schema_compare.py --compile-all --tokenizers mistral7b
        # every JSONSchemaBench schema (recursive or not): which each library compiles

(the venv of `benches/setup_peers.sh`, with propertok installed into it).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))
import compare  # noqa: E402


def sample_schemas(n: int, seed: int, flat: bool = False, subset: str = "", keyword: str = ""):
    """A seeded sample of ``n`` schemas that recurse (``flat``: that do not, one rule), from the
    JSONSchemaBench subsets whose name starts with ``subset``; with ``keyword``, of the schemas
    that use that keyword (``maxLength``), recursive or not."""
    from propertok.json_schema import schema_to_rules

    rows = [json.loads(line) for line in (compare.SHARED / "data" / "jsonschemabench_schemas.jsonl").open()]
    rows = [r for r in rows if r["subset"].startswith(subset)]
    if keyword:
        rows = [r for r in rows if f'"{keyword}"' in json.dumps(r["schema"])]
    rng = random.Random(seed)
    rng.shuffle(rows)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in rows:
            try:
                recursive = len(schema_to_rules(r["schema"], whitespace="")) > 1
                if keyword or recursive != flat:
                    out.append(r)
            except Exception:  # noqa: BLE001 - a schema the converter refuses is not sampled
                continue
            if len(out) == n:
                break
    return out


def compile_schema(lib, ad, schema):
    if lib == "propertok":
        return ad.compiler.compile_json_schema(schema, lazy=True, whitespace="")
    if lib == "llguidance":
        grammar = ad.llg.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": True})
        m = ad.llg.LLMatcher(ad.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m
    if lib == "xgrammar":
        return ad.compiler.compile_json_schema(json.dumps(schema))
    raise ValueError(lib)


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(tok: str, schemas, libs, in_process: bool = False, passes: int = 1, samples: int = 0):
    """``({lib: result}, valid, documents)``. Each library runs alone in a fresh process (spawned,
    one after another), as in ``compare.py``, so no library's threads, caches or allocator state
    are in another's timings: interleaved schema by schema in one process (before stop 47),
    propertok's median time to first mask on Llama 3 read 1.30 ms beside llguidance and 1.78 ms
    beside both peers. propertok runs first: its random walks are the documents every library's
    masks follow. ``in_process``: the same runs one after another in this process. ``passes``:
    each document is walked that many times, with a fresh compile each time, and each step keeps
    its fastest fill (a fill's noise on this machine is ±20 %; a first visit stays a first
    visit, since every walk starts from a fresh guide). ``samples``: token sequences each library
    draws per schema from its own masks (see :func:`draw_samples`)."""
    libs = ["propertok"] + [lib for lib in libs if lib != "propertok"] if "propertok" in libs else list(libs)
    results, docs, valid = {}, {}, 0
    for lib in libs:
        if in_process:
            results[lib], found, ok = run_library(tok, schemas, lib, docs, passes, samples)
        else:
            import concurrent.futures
            import multiprocessing

            with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
                results[lib], found, ok = ex.submit(run_library, tok, schemas, lib, docs, passes,
                                                            samples).result()
        if lib == "propertok":
            docs, valid = found, ok
    return results, valid, len(docs)


def run_library(tok: str, schemas, lib: str, docs: dict, passes: int = 1, samples: int = 0):
    """One library's compiles (TTFM) and mask walks along ``docs`` (``{id: text}``); propertok
    also writes the documents (a random walk of its guide, checked with ``jsonschema``);
    ``samples`` sequences per schema from :func:`draw_samples`: ``(result, docs, valid)``."""
    import jsonschema
    import propertok as pt

    orc = compare.load_oracle_module().Oracle.from_file(compare.tokenizer_path(tok), name=tok)
    vocab = pt.Vocabulary.from_file(str(compare.tokenizer_path(tok)))
    ad = compare.make_adapter("propertok-lazy" if lib == "propertok" else lib, tok,
                              vocab.eos_token_ids[:1], vocab.vocab_size)
    ad.setup()
    docs = dict(docs)
    valid = 0
    result = {"compiled": 0, "ttfm": [], "fills": [], "errors": {}, "steps": []}
    compiled = set()
    for r in schemas:
        schema = r["schema"]
        try:
            t0 = time.perf_counter()
            m = ad.matcher(compile_schema(lib, ad, schema))
            ad.fill_fn(m)()
            result["ttfm"].append(time.perf_counter() - t0)
            result["compiled"] += 1
            compiled.add(r["id"])
        except Exception as e:  # noqa: BLE001 - a refusal is a result
            key = f"{type(e).__name__}: {str(e)[:60]}"
            result["errors"][key] = result["errors"].get(key, 0) + 1
            continue
        if lib == "propertok":
            guide = ad.compiler.compile_json_schema(schema, lazy=True, whitespace="")
            walk = guide.random_walk(0, max_tokens=200)
            text = b"".join(vocab.token_bytes(t) for t in walk).decode()
            ok = jsonschema.validators.validator_for(schema)(schema).is_valid(json.loads(text))
            valid += ok
            docs[r["id"]] = text
    walks = []
    for _ in range(passes):
        steps = []
        for r in schemas:
            text = docs.get(r["id"])
            if text is None or r["id"] not in compiled:
                continue
            ids = orc.canonical(text)
            m = ad.matcher(compile_schema(lib, ad, r["schema"]))
            fill = ad.fill_fn(m)
            fill()
            before = b""
            for i, t in enumerate(ids):
                if not ad.accept(m, t):
                    break
                t0 = time.perf_counter_ns()
                fill()
                elapsed = time.perf_counter_ns() - t0
                before = (before + vocab.token_bytes(t))[-40:]
                steps.append((elapsed, r["id"], i, before))
        walks.append(steps)
    # Each step's fastest fill over the passes (the walks are the same steps in the same order).
    result["steps"] = [min(same) for same in zip(*walks)]
    result["fills"] = [step[0] for step in result["steps"]]
    result["samples"] = draw_samples(ad, lib, orc, [r for r in schemas if r["id"] in compiled], samples)
    return result, docs, valid


SAMPLE_TOKENS = 32


def draw_samples(ad, lib: str, orc, schemas, n: int, seed: int = 0) -> list:
    """``n`` token sequences per schema drawn from the library's own masks, each token uniform
    among those the mask allows, on a fresh compile, up to EOS or ``SAMPLE_TOKENS`` tokens (as
    ``compare.py --samples``): for each, whether the tokenizer encodes its text that way
    (``None``: the text ends inside a UTF-8 character, so it has no encoding to compare)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    eos = set(ad.eos_ids)
    row = ad.bm[0].numpy() if hasattr(ad.bm, "numpy") else ad.bm[0]
    checked = []
    for r in schemas:
        for _ in range(n):
            m = ad.matcher(compile_schema(lib, ad, r["schema"]))
            fill, seq = ad.fill_fn(m), []
            while len(seq) < SAMPLE_TOKENS:
                fill()
                bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: ad.vocab_size]
                allowed = np.flatnonzero(bits)
                if len(allowed) == 0:
                    break
                t = int(allowed[rng.integers(len(allowed))])
                if t in eos or not ad.accept(m, t):
                    break
                seq.append(t)
            checked.append(compare.sample_is_canonical(orc, seq))
    return checked


def coverage(timeout: int = 10) -> dict:
    """Over every schema of the shared JSONSchemaBench: how many recurse (a `$ref` cycle, or only
    free values), and of those, how many the rules path (`schema_to_rules` + `RuleAutomaton`)
    and the regex path (`schema_to_regex`, `max_recursion_depth=3`, + `ByteDfa`) build, each
    step within `timeout` seconds. No tokenizer is involved."""
    import signal

    import propertok as pt
    from propertok import json_schema as js

    class TimedOut(Exception):
        pass

    def timed(f):
        def alarm(*_):
            raise TimedOut()

        signal.signal(signal.SIGALRM, alarm)
        signal.alarm(timeout)
        try:
            return f()
        finally:
            signal.alarm(0)

    counts: dict = {}

    def count(key):
        counts[key] = counts.get(key, 0) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for line in (compare.SHARED / "data" / "jsonschemabench_schemas.jsonl").open():
            schema = json.loads(line)["schema"]
            try:
                rules = timed(lambda: js.schema_to_rules(schema, whitespace=""))
            except Exception:  # noqa: BLE001 - refused or timed out: not counted as recursive
                count("not converted")
                continue
            if len(rules) == 1:
                count("no recursion")
                continue
            kind = "$ref cycle" if any(name not in ("#", "#any-json-value") for name, _ in rules) else "free values"
            count(f"{kind}: schemas")
            for path, build in (("rules", lambda: pt.RuleAutomaton(rules)),
                                ("regex", lambda: pt.ByteDfa(js.schema_to_regex(schema, whitespace="")))):
                try:
                    timed(build)
                    count(f"{kind}: {path} built")
                except Exception:  # noqa: BLE001 - a refusal or a timeout is a result
                    count(f"{kind}: {path} failed")
    return counts


def compile_worker(lib: str, tok: str) -> None:
    """Worker of :func:`compile_all`: reads schemas (JSON lines) on stdin, answers each with its
    compile's error or ``None`` (propertok: a fresh compile and the first mask)."""
    import propertok as pt

    vocab = pt.Vocabulary.from_file(str(compare.tokenizer_path(tok)))
    ad = compare.make_adapter("propertok-lazy" if lib == "propertok" else lib, tok,
                              vocab.eos_token_ids[:1], vocab.vocab_size)
    ad.setup()
    warnings.simplefilter("ignore")
    print("ready", flush=True)
    for line in sys.stdin:
        row = json.loads(line)
        try:
            compiled = compile_schema(lib, ad, row["schema"])
            if lib == "propertok":
                compiled.mask(compiled.initial_state)
            error = None
        except Exception as e:  # noqa: BLE001 - a refusal is the answer
            error = f"{type(e).__name__}: {str(e)[:200]}"
        print(json.dumps({"id": row["id"], "error": error}), flush=True)


def compile_all(tok: str, libs, timeout: float) -> dict:
    """Every schema of the shared JSONSchemaBench, recursive or not, compiled by each library in
    a worker process (restarted past ``timeout`` seconds, which counts as a refusal): the
    answer per library and schema id (``None``: compiled)."""
    import select
    import subprocess

    rows = [json.loads(line) for line in (compare.SHARED / "data" / "jsonschemabench_schemas.jsonl").open()]
    answers = {}
    for lib in libs:
        def start():
            w = subprocess.Popen([sys.executable, __file__, "--worker", lib, "--tokenizers", tok],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert w.stdout.readline().strip() == "ready", f"the {lib} worker did not start"
            return w

        worker, answers[lib] = start(), {}
        for r in rows:
            worker.stdin.write(json.dumps({"id": r["id"], "schema": r["schema"]}) + "\n")
            worker.stdin.flush()
            ready, _, _ = select.select([worker.stdout], [], [], timeout)
            line = worker.stdout.readline() if ready else ""
            if line:
                answers[lib][r["id"]] = json.loads(line)["error"]
                continue
            worker.kill()
            worker.wait()
            answers[lib][r["id"]] = f"timeout ({timeout:g} s)" if not ready else "worker died"
            worker = start()
        worker.kill()
    return answers


def print_compile_all(tok: str, answers: dict) -> None:
    libs = list(answers)
    ids = list(answers[libs[0]])
    print(f"\n## {tok}: every JSONSchemaBench schema ({len(ids)}), compiled\n")
    print("| library | compiled | top refusals |")
    print("| --- | --- | --- |")
    for lib in libs:
        errors = [e for e in answers[lib].values() if e]
        top: dict = {}
        for e in errors:
            # Grouped by kind: without the JSON pointer or a log's timestamp.
            kind = re.sub(r" at #[^:]*:|\[[0-9:]{8}\] \S*", "", e)[:60]
            top[kind] = top.get(kind, 0) + 1
        worst = sorted(top.items(), key=lambda kv: -kv[1])[:3]
        print(f"| {lib} | {len(ids) - len(errors)} ({100 * (len(ids) - len(errors)) / len(ids):.1f} %) | "
              + "; ".join(f"{k} ×{v}" for k, v in worst) + " |")
    if "propertok" in answers:
        for lib in libs:
            if lib == "propertok":
                continue
            only_peer = sum(1 for i in ids if answers["propertok"][i] and not answers[lib][i])
            only_us = sum(1 for i in ids if not answers["propertok"][i] and answers[lib][i])
            print(f"\nCompiled by {lib} only: {only_peer}; by propertok only: {only_us}.")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizers", default="mistral7b,llama3")
    p.add_argument("--libs", default="propertok,llguidance,xgrammar")
    p.add_argument("--schemas", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flat", action="store_true",
                   help="schemas that do not recurse (one regex through compile_json_schema) instead")
    p.add_argument("--subset", default="", help="JSONSchemaBench subsets whose name starts with this")
    p.add_argument("--keyword", default="",
                   help="schemas that use this keyword (maxLength), recursive or not, instead")
    p.add_argument("--coverage", action="store_true",
                   help="count the recursive schemas each path builds (all of JSONSchemaBench; no tokenizer)")
    p.add_argument("--compile-all", action="store_true",
                   help="compile every JSONSchemaBench schema with each library (no documents)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per schema for --compile-all")
    p.add_argument("--slowest", type=int, default=0,
                   help="also list each library's N slowest masks: schema, token index, the text before it")
    p.add_argument("--passes", type=int, default=1,
                   help="walk each document this many times with fresh guides; each step keeps its fastest fill")
    p.add_argument("--samples", type=int, default=0,
                   help="token sequences each library draws per schema from its own masks, each token "
                   "uniform among those allowed: the share the tokenizer would not have written")
    p.add_argument("--in-process", action="store_true",
                   help="run the libraries one after another in this process instead of one process each")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        compile_worker(args.worker, args.tokenizers)
        return 0
    if args.compile_all:
        for tok in args.tokenizers.split(","):
            print_compile_all(tok, compile_all(tok, args.libs.split(","), args.timeout))
        return 0
    if args.coverage:
        for key, n in sorted(coverage().items()):
            print(f"{key}: {n}")
        return 0
    schemas = sample_schemas(args.schemas, args.seed, args.flat, args.subset, args.keyword)
    kind = f"{args.keyword}" if args.keyword else "flat" if args.flat else "recursive"
    print(f"{len(schemas)} {kind} schemas: " + ", ".join(r["id"] for r in schemas[:8]) + ", ...")
    for tok in args.tokenizers.split(","):
        result, valid, docs = run(tok, schemas, args.libs.split(","), args.in_process, args.passes,
                                  args.samples)
        print(f"\n## {tok}: propertok's documents valid by jsonschema: {valid}/{docs}\n")
        print("| library | compiled | TTFM median / p90 (ms) | mask median / p99 / max (µs) | refusals |")
        print("| --- | --- | --- | --- | --- |")
        for lib, r in result.items():
            ttfm = r["ttfm"] or [float("nan")]
            fills = r["fills"] or [float("nan")]
            print(f"| {lib} | {r['compiled']}/{len(schemas)} | {statistics.median(ttfm) * 1e3:.2f} / "
                  f"{percentile(ttfm, 0.9) * 1e3:.2f} | {statistics.median(fills) / 1e3:.1f} / "
                  f"{percentile(fills, 0.99) / 1e3:.0f} / {max(fills) / 1e3:.0f} | "
                  + "; ".join(f"{k} ×{v}" for k, v in sorted(r["errors"].items(), key=lambda kv: -kv[1])[:3]) + " |")
        if args.samples:
            print(f"\nUniformly sampled token sequences (≤ {SAMPLE_TOKENS} tokens, {args.samples} per schema) "
                  "that are not canonical:\n")
            print("| library | samples | non-canonical | undecodable (not counted) |")
            print("| --- | --- | --- | --- |")
            for lib, r in result.items():
                decoded = [x for x in r["samples"] if x is not None]
                share = sum(1 for x in decoded if x is False) / len(decoded) if decoded else float("nan")
                print(f"| {lib} | {len(decoded)} | {100 * share:.1f} % | {len(r['samples']) - len(decoded)} |")
        if args.slowest:
            print_slowest(tok, result, args.slowest)
    return 0


def print_slowest(tok: str, result, n: int) -> None:
    """Each library's ``n`` slowest masks: the time, the schema, the index of the token accepted
    before it in the document's canonical tokens, and the document's last bytes up to there."""
    for lib, r in result.items():
        print(f"\n{lib}, {tok}: the {n} slowest masks (µs, schema, token index, text before)")
        for ns, sid, i, before in sorted(r["steps"], reverse=True)[:n]:
            print(f"  {ns / 1e3:9.0f}  {sid}  {i}  ...{before!r}")


if __name__ == "__main__":
    sys.exit(main())
