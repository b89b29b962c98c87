"""Recursive JSON schemas side by side: propertok (`compile_json_schema(schema, lazy=True)`:
`$ref` cycles and free values as pushdown rules, no depth bound), llguidance and xgrammar (their
JSON Schema compilers), on the JSONSchemaBench schemas of the shared corpus that recurse.

A schema *recurses* when `propertok.json_schema.schema_to_rules` writes more than one rule for it
(a `$ref` cycle or a free value `{}`); a seeded sample of them is run. For each schema and
library: a fresh compile plus the first mask ("TTFM"); then one document, propertok's own
random walk (compact JSON, keys in declared order, which every library accepts), checked with
`jsonschema`; then the masks along the tokenizer's encoding of that document on a fresh compile
of each library (first visits included). Schemas propertok cannot convert or compile count as
not compiled for it, and have no document.

    /tmp/propertok-bench-venv/bin/python benches/schema_compare.py --tokenizers mistral7b,llama3
    python benches/schema_compare.py --coverage   # which recursive schemas each path builds

(the venv of `benches/setup_peers.sh`, with propertok installed into it).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))
import compare  # noqa: E402


def recursive_schemas(n: int, seed: int):
    from propertok.json_schema import schema_to_rules

    rows = [json.loads(line) for line in (compare.SHARED / "data" / "jsonschemabench_schemas.jsonl").open()]
    rng = random.Random(seed)
    rng.shuffle(rows)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in rows:
            try:
                if len(schema_to_rules(r["schema"], whitespace="")) > 1:
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


def run(tok: str, schemas, libs):
    import jsonschema
    import propertok as pt

    orc = compare.load_oracle_module().Oracle.from_file(compare.tokenizer_path(tok), name=tok)
    vocab = pt.Vocabulary.from_file(str(compare.tokenizer_path(tok)))
    adapters = {}
    for lib in libs:
        adapters[lib] = compare.make_adapter("propertok-lazy" if lib == "propertok" else lib, tok,
                                             vocab.eos_token_ids[:1], vocab.vocab_size)
        adapters[lib].setup()
    docs = {}
    valid = 0
    result = {lib: {"compiled": 0, "ttfm": [], "fills": [], "errors": {}} for lib in libs}
    for r in schemas:
        schema = r["schema"]
        for lib in libs:
            ad = adapters[lib]
            try:
                t0 = time.perf_counter()
                m = ad.matcher(compile_schema(lib, ad, schema))
                ad.fill_fn(m)()
                result[lib]["ttfm"].append(time.perf_counter() - t0)
                result[lib]["compiled"] += 1
            except Exception as e:  # noqa: BLE001 - a refusal is a result
                key = f"{type(e).__name__}: {str(e)[:60]}"
                result[lib]["errors"][key] = result[lib]["errors"].get(key, 0) + 1
                continue
            if lib == "propertok":
                guide = ad.compiler.compile_json_schema(schema, lazy=True, whitespace="")
                walk = guide.random_walk(0, max_tokens=200)
                text = b"".join(vocab.token_bytes(t) for t in walk).decode()
                ok = jsonschema.validators.validator_for(schema)(schema).is_valid(json.loads(text))
                valid += ok
                docs[r["id"]] = text
        text = docs.get(r["id"])
        if text is None:
            continue
        ids = orc.canonical(text)
        for lib in libs:
            ad = adapters[lib]
            try:
                m = ad.matcher(compile_schema(lib, ad, schema))
            except Exception:  # noqa: BLE001 - counted above
                continue
            fill = ad.fill_fn(m)
            fill()
            for t in ids:
                if not ad.accept(m, t):
                    break
                t0 = time.perf_counter_ns()
                fill()
                result[lib]["fills"].append(time.perf_counter_ns() - t0)
    return result, valid, len(docs)


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizers", default="mistral7b,llama3")
    p.add_argument("--libs", default="propertok,llguidance,xgrammar")
    p.add_argument("--schemas", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--coverage", action="store_true",
                   help="count the recursive schemas each path builds (all of JSONSchemaBench; no tokenizer)")
    args = p.parse_args(argv)
    if args.coverage:
        for key, n in sorted(coverage().items()):
            print(f"{key}: {n}")
        return 0
    schemas = recursive_schemas(args.schemas, args.seed)
    print(f"{len(schemas)} recursive schemas: " + ", ".join(r["id"] for r in schemas[:8]) + ", ...")
    for tok in args.tokenizers.split(","):
        result, valid, docs = run(tok, schemas, args.libs.split(","))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
