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

Byte-level BPE tokenizers with a pre-tokenizer (``test_oracle_byte_level``): in CI, GPT-2, Llama 3,
Qwen2 and cl100k on a seeded share of the regexes (``BYTE_LEVEL_CI_SUITE`` suite rows and
``BYTE_LEVEL_CI_JSB`` JSONSchemaBench rows each, a different share per tokenizer, scaled by
``$PROPERTOK_ORACLE_SCALE``). With ``PROPERTOK_FULL_ORACLE=1``: every byte-level tokenizer of
MANIFEST.json (one whose canonical guides are refused must be refused with NotImplementedError, and
must not be one of those four), every row of regex_suite.jsonl (pathological ones included) and the
JSONSchemaBench sample (at least 200), 50 samples and 50 walks each; the totals are printed per
tokenizer at the end. For NFC/NFKC tokenizers completeness is required for the representable
samples their normalizer leaves unchanged (the others are not representable).
"""

from __future__ import annotations

import collections
import math
import os
import random
import zlib

import pytest

from helpers import iter_chunks
from oracle import oracle_for
from pretok_support import MAIN_BYTE_LEVEL, byte_level_slugs, missing_utf8_bytes, normalization_form
from regex_checks import WALKS_PER_REGEX, run_guarded
from workloads import jsonschemabench_sample, oracle_scale, regex_suite_sample

from oracle import require_shared  # noqa: E402

require_shared("the regex suite and JSONSchemaBench regexes")

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
    """Compiles (and then passes every check, or the soundness checks where the checks' own
    byte DFA is past its limit) or raises LimitExceeded, within the hang guard."""
    seed = 10_000 + PATHOLOGICAL.index(row)
    counts, failures, timings = run_guarded("mistral7b", [(seed, row)], 128, HANG_GUARD_S)
    _report("mistral7b", row["name"], counts, failures, timings, record_property)
    assert not failures, "\n".join(failures[:30])
    assert counts["compiled"] + counts["sound_only"] + counts["skipped_limit"] == 1, dict(counts)


# ---------------------------------------------------------------------------------------------
# byte-level BPE tokenizers with a pre-tokenizer
# ---------------------------------------------------------------------------------------------

FULL_ORACLE = os.environ.get("PROPERTOK_FULL_ORACLE", "") not in ("", "0")
BYTE_LEVEL_CI_SUITE = 12
BYTE_LEVEL_CI_JSB = 8
JSB_FULL = jsonschemabench_sample(max(1.0, oracle_scale()))


def _byte_level_rows(name: str) -> list[tuple[str, dict]]:
    """``[(dataset, row)]`` checked for tokenizer ``name``: everything in full mode, else a seeded
    share that differs per tokenizer."""
    if FULL_ORACLE:
        return [("suite", r) for r in _SUITE_ALL] + [("jsb", r) for r in JSB_FULL]
    rng = random.Random(zlib.crc32(name.encode()))
    n_suite = min(len(SUITE), math.ceil(BYTE_LEVEL_CI_SUITE * oracle_scale()))
    n_jsb = min(len(JSB), math.ceil(BYTE_LEVEL_CI_JSB * oracle_scale()))
    return [("suite", r) for r in rng.sample(SUITE, n_suite)] + [("jsb", r) for r in rng.sample(JSB, n_jsb)]


def _byte_level_cases():
    names = byte_level_slugs() if FULL_ORACLE else list(MAIN_BYTE_LEVEL)
    out = []
    for name in names:
        for i, _ in enumerate(iter_chunks(_byte_level_rows(name), CHUNK)):
            out.append(pytest.param(name, i, id=f"{name}-{i}"))
    return out


def _clean(name: str) -> bool:
    """No normalizer and every byte that occurs in UTF-8 is a token: almost every sample is
    representable."""
    o = oracle_for(name)
    return normalization_form(o) is None and not missing_utf8_bytes(o) and not o.nonspecial_added_ids


@pytest.mark.parametrize("name, chunk", _byte_level_cases())
def test_oracle_byte_level(pt, tokenizer_under_test, name, chunk, record_property):
    tut = tokenizer_under_test(name)
    reason = tut.vocab_any_eos.canonical_unsupported_reason
    if reason is not None:
        assert name not in MAIN_BYTE_LEVEL, f"{name} must be supported, but: {reason}"
        with pytest.raises(NotImplementedError):
            tut.compiler.compile_regex("[a-z]+", method="cartesian")
        _TOTALS[name]["refused_tokenizer"] = 1
        print(f"\n{name}: canonical guides refused: {reason}")
        return
    rows = _byte_level_rows(name)[chunk * CHUNK : (chunk + 1) * CHUNK]
    counts: collections.Counter = collections.Counter()
    failures: list[str] = []
    timings: list = []
    for dataset, max_len in (("suite", 128), ("jsb", 256)):
        jobs = [
            (zlib.crc32(f"{name}/{row.get('id') or row.get('name') or row['regex']}".encode()) % 1_000_000, row)
            for d, row in rows
            if d == dataset
        ]
        if jobs:
            c, f, t = run_guarded(name, jobs, max_len, HANG_GUARD_S)
            counts.update(c)
            failures.extend(f)
            timings.extend(t)
    _report(name, f"byte-level[{chunk}]", counts, failures, timings, record_property)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])
    assert counts["regexes"] == len(rows)
    # not vacuous: most regexes compile and many samples are checked
    assert counts["compiled"] >= 0.6 * len(rows), dict(counts)
    assert counts["walks"] == WALKS_PER_REGEX * counts["compiled"]
    checked = counts["complete_checked"]
    assert checked + counts["unrepresentable"] == counts["strings"], dict(counts)
    # (NFKC makes most random characters unrepresentable: claude-legacy keeps about a quarter)
    assert checked >= (0.9 if _clean(name) else 0.15) * counts["strings"], dict(counts)
