"""What setting up a tokenizer costs (issue 19's "cheap set-up"): the tokenizer DFA's build time,
the peak memory of the process that builds it, the size of its cache file, and a fresh
``Compiler``'s load of that file. Each tokenizer runs in a child process of its own (so each peak
is its own), with a fresh cache folder.

    python benches/tokenizer_dfa_setup.py [--tokenizers llama3,o200k,deepseek-v3,tekken] [--shared DIR]

``tekken`` is Mistral's Tekken file that ``mistral_common`` ships. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tokenizer_file(name: str, shared: Path) -> str:
    if name == "tekken":
        import mistral_common

        return str(Path(mistral_common.__file__).parent / "data" / "tekken_240911.json")
    return str(shared / "tokenizers" / name / "tokenizer.json")


def measure(path: str) -> dict:
    """In this (child) process: build into a fresh cache folder (``tokenizer_dfa_stats`` also
    finds the lone and always-split tokens, in the wall time), then load with a fresh Compiler."""
    import propertok as pt

    folder = tempfile.mkdtemp(prefix="propertok-setup-")
    try:
        vocab = pt.Vocabulary.from_file(path)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        built = pt.Compiler(vocab, cache_dir=folder).tokenizer_dfa_stats()
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        size = sum(f.stat().st_size for f in Path(folder).iterdir())
        loaded = pt.Compiler(vocab, cache_dir=folder).tokenizer_dfa_stats()
        assert loaded["cache"] == "hit", loaded
        return {
            "build_s": built["build_seconds"], "wall_s": wall, "peak_mb": peak / 1024,
            # on a cache hit, build_seconds is the load: map, checksum, checks
            "vocab_mb": before / 1024, "cache_mb": size / 1e6, "load_ms": loaded["build_seconds"] * 1000,
            "classes": built["num_classes"], "pairs": built["num_forbidden_pairs"],
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default="llama3,o200k,deepseek-v3,tekken")
    ap.add_argument("--shared", default=os.environ.get("PROPERTOK_SHARED", str(ROOT.parent / "shared")))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    print("| tokenizer | build | all set-up stats, cache write included | peak memory (vocabulary alone) | cache file | cache load | classes | forbidden pairs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.tokenizers.split(","):
        path = tokenizer_file(name, Path(args.shared))
        proc = subprocess.run([sys.executable, __file__, "--child", path], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"| {name} | failed: {proc.stderr.strip().splitlines()[-1:]} | | | | | | |")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"| {name} | {r['build_s']:.2f} s | {r['wall_s']:.2f} s | {r['peak_mb']:,.0f} MB ({r['vocab_mb']:,.0f} MB) "
              f"| {r['cache_mb']:,.0f} MB | {r['load_ms']:.0f} ms | {r['classes']:,} | {r['pairs']:,} |", flush=True)


if __name__ == "__main__":
    main()
