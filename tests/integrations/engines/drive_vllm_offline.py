"""Drives vLLM's offline API (``LLM.generate``) with propertok constraints; writes a JSON report.

    python drive_vllm_offline.py MODEL_DIR OUT.json [--timings]

Run as a script (vLLM's engine core is a spawned process, so the engine starts under
``__main__``). The report holds every request's constraint and output ids, the errors of the bad
requests, and, with ``--timings``, the per-call ``apply`` records of an unconstrained and a
constrained run of the same shape (16 requests x 64 tokens, EOS ignored).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(model_dir, out_path, timings):
    from engine_support import BAD, CONSTRAINTS, xargs
    from vllm import LLM, SamplingParams

    timing_file = out_path + ".apply.json"
    os.environ["PROPERTOK_TIMINGS_OUT"] = timing_file
    llm = LLM(model=model_dir, dtype="float32", max_model_len=256, enforce_eager=True, gpu_memory_utilization=0.2,
              logits_processors=["timed_processor:TimedPropertokLogitsProcessor"], seed=0)
    report = {"requests": [], "errors": {}, "runs": {}}

    # 1. several concurrent requests per constraint, plus unconstrained ones, in one batch
    prompts, params, meta = [], [], []
    for copy in range(3):
        for name, kind, spec in CONSTRAINTS:
            prompts.append(f"Request {copy} for {name}:")
            params.append(SamplingParams(temperature=1.0, max_tokens=128, seed=copy * 100 + len(params),
                                         extra_args=xargs(kind, spec)))
            meta.append((name, kind, spec))
    for copy in range(3):
        prompts.append(f"Free text {copy}:")
        params.append(SamplingParams(temperature=1.0, max_tokens=16, seed=copy))
        meta.append(("free", None, None))
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    report["batch_seconds"] = time.perf_counter() - start
    for (name, kind, spec), out in zip(meta, outputs):
        o = out.outputs[0]
        report["requests"].append({"name": name, "kind": kind, "spec": spec, "ids": list(o.token_ids),
                                   "text": o.text, "finish_reason": o.finish_reason})

    # 2. bad constraints: a clear error for that request; the engine goes on serving others
    for name, kind, spec in BAD:
        try:
            llm.generate(["Bad:"], SamplingParams(max_tokens=8, extra_args=xargs(kind, spec)))
            report["errors"][name] = None
        except Exception as e:  # noqa: BLE001
            report["errors"][name] = f"{type(e).__name__}: {e}"
    # a bad request in the middle of a batch of good ones
    name, kind, spec = CONSTRAINTS[0]
    mixed = [SamplingParams(max_tokens=32, extra_args=xargs(kind, spec)),
             SamplingParams(max_tokens=8, extra_args=xargs(BAD[0][1], BAD[0][2])),
             SamplingParams(max_tokens=32, extra_args=xargs(kind, spec))]
    try:
        llm.generate(["A:", "B:", "C:"], mixed)
        report["errors"]["mixed-batch"] = None
    except Exception as e:  # noqa: BLE001
        report["errors"]["mixed-batch"] = f"{type(e).__name__}: {e}"
    after = llm.generate(["After the errors:"], SamplingParams(max_tokens=32, extra_args=xargs(kind, spec)))
    report["requests"].append({"name": name, "kind": kind, "spec": spec, "ids": list(after[0].outputs[0].token_ids),
                               "text": after[0].outputs[0].text, "finish_reason": after[0].outputs[0].finish_reason,
                               "after_errors": True})

    # 3. the overhead: the same 16 x 64-token run without and with constraints
    if timings:
        long_constraints = [("regex", r"[a-z ]{200,300}"), ("regex", r"([0-9]{1,3}, ){50,90}[0-9]+"),
                            ("json", {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                                      "minItems": 20, "maxItems": 40})]
        for label, constrained in (("unconstrained", False), ("constrained", True), ("unconstrained2", False)):
            ps = [SamplingParams(temperature=1.0, max_tokens=64, ignore_eos=True, seed=i,
                                 extra_args=xargs(*long_constraints[i % 3]) if constrained else None)
                  for i in range(16)]
            time.sleep(0.5)
            begin = time.time()
            t0 = time.perf_counter()
            outs = llm.generate([f"Measure {i}:" for i in range(16)], ps)
            seconds = time.perf_counter() - t0
            time.sleep(1.0)  # lets the engine core write its last records
            report["runs"][label] = {"seconds": seconds, "tokens": sum(len(o.outputs[0].token_ids) for o in outs),
                                     "wall_start": begin, "perf_marker": t0}
            if constrained:
                report["runs"][label]["outputs"] = [
                    {"kind": long_constraints[i % 3][0], "spec": long_constraints[i % 3][1],
                     "ids": list(o.outputs[0].token_ids)} for i, o in enumerate(outs)]
    with open(out_path, "w") as f:
        json.dump(report, f)
    del llm


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1], sys.argv[2], "--timings" in sys.argv)
