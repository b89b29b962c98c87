"""The oracle, complete and sound (DESIGN.md), for Mistral-7B and Llama 2 on the regex suite and on
a fixed sample of JSONSchemaBench regexes (``regex_checks.check_regex`` does the work). Per regex:

* every sampled string ``s`` (``ByteDfa.sample``) is valid UTF-8, is matched by the byte DFA and,
  where Python's ``re`` compiles the pattern the same way, by ``re.fullmatch`` too (an independent
  check of the byte DFA); mutated samples get the same verdict from both;
* *complete*: for each representable ``s``, ``canonical(s)`` is accepted token by token by the
  cartesian guide, ending in a final state; the agnostic guide accepts it too (agnostic contains
  every decoding, so it contains the canonical one);
* *sound*: every ``guide.random_walk`` sequence re-encodes to itself (``is_canonical``) and decodes
  into the language (byte DFA, and Python's ``re`` where meaningful).

Regexes propertok refuses with ``ValueError`` must be ones regex-automata's parser rejects
(``workloads.expected_rejection``: look-around, invalid syntax...) or an empty language (checked:
no sample is representable); ``LimitExceeded`` is counted and printed.

The checks run in worker processes under a hang guard (``regex_checks.run_guarded``): a regex
whose compile does not finish within ``$PROPERTOK_HANG_GUARD_S`` seconds (default 240; a guard
against hangs, not a performance target) fails with its name, and the others still run.
``$PROPERTOK_ORACLE_SCALE`` (default 1.0) scales the number of regexes.
"""

from __future__ import annotations

import collections
import os

import pytest

from helpers import iter_chunks
from regex_checks import WALKS_PER_REGEX, run_guarded
from workloads import jsonschemabench_sample, oracle_scale, regex_suite_sample

TOKENIZERS = ["mistral7b", "llama2"]
CHUNK = 50
HANG_GUARD_S = float(os.environ.get("PROPERTOK_HANG_GUARD_S", "240"))

_SUITE_ALL = regex_suite_sample(oracle_scale())
# The suite's pathological rows (exponential DFAs, large counted repetitions) are checked for
# Mistral-7B only (test_pathological_regex): they are the expensive ones, and Llama 2 is the same
# tokenizer family.
PATHOLOGICAL = [r for r in _SUITE_ALL if r["category"].startswith("pathological")]
SUITE = [r for r in _SUITE_ALL if not r["category"].startswith("pathological")]
JSB = jsonschemabench_sample(oracle_scale())


def _cases():
    out = []
    for name in TOKENIZERS:
        for i, _ in enumerate(iter_chunks(SUITE, CHUNK)):
            out.append(pytest.param(name, "suite", i, id=f"{name}-suite-{i}"))
        for i, _ in enumerate(iter_chunks(JSB, CHUNK)):
            out.append(pytest.param(name, "jsb", i, id=f"{name}-jsonschemabench-{i}"))
    return out


# A summary over the whole module, printed once at the end.
_TOTALS: dict = collections.defaultdict(collections.Counter)
_TIMINGS: dict = collections.defaultdict(list)


@pytest.fixture(scope="module", autouse=True)
def _print_totals():
    yield
    for name, counts in sorted(_TOTALS.items()):
        print(f"\n[oracle totals] {name}: {dict(counts)}")
        slow = sorted(_TIMINGS[name], reverse=True)[:5]
        print(f"[oracle slowest regexes] {name}: " + ", ".join(f"{lbl} {sec:.1f}s" for sec, lbl in slow))


def _report(name: str, what: str, counts, failures, timings, record_property) -> None:
    _TOTALS[name].update(counts)
    _TIMINGS[name].extend(timings)
    print(f"\n{name} {what}: {dict(counts)}")
    for k, v in counts.items():
        record_property(k, v)


@pytest.mark.parametrize("name, dataset, chunk", _cases())
def test_oracle_complete_and_sound(pt, name, dataset, chunk, record_property):
    rows = list((SUITE if dataset == "suite" else JSB)[chunk * CHUNK : (chunk + 1) * CHUNK])
    jobs = [(1 + chunk * CHUNK + k, row) for k, row in enumerate(rows)]
    max_len = 128 if dataset == "suite" else 256
    counts, failures, timings = run_guarded(name, jobs, max_len, HANG_GUARD_S)
    _report(name, f"{dataset}[{chunk}]", counts, failures, timings, record_property)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])
    assert counts["regexes"] == len(rows)
    # not vacuous: most regexes compile and most samples are checked
    assert counts["compiled"] >= 0.8 * len(rows) - 20, dict(counts)
    assert counts["complete_checked"] >= 0.9 * counts["strings"], dict(counts)
    assert counts["walks"] == WALKS_PER_REGEX * counts["compiled"]


@pytest.mark.parametrize("row", PATHOLOGICAL, ids=lambda r: r["name"])
def test_pathological_regex(pt, row, record_property):
    """Compiles (and then passes every check) or raises LimitExceeded, within the hang guard."""
    seed = 10_000 + PATHOLOGICAL.index(row)
    counts, failures, timings = run_guarded("mistral7b", [(seed, row)], 128, HANG_GUARD_S)
    _report("mistral7b", row["name"], counts, failures, timings, record_property)
    assert not failures, "\n".join(failures[:30])
    assert counts["compiled"] + counts["skipped_limit"] == 1, dict(counts)
