"""The per-regex oracle check (complete and sound, DESIGN.md) and a hang-guarded runner for it.

``check_regex`` does every check for one regex and one tokenizer (see test_oracle_regex.py).
``run_guarded`` runs a list of them in a worker process (this file run as a script) and watches
it: a regex whose compile (or check) does not finish within the guard, or a worker that crashes,
becomes a failure naming that regex, and the worker is restarted on the next one. A bug that makes
one regex hang (or abort) therefore fails that regex with a message instead of stalling CI.
"""

from __future__ import annotations

import collections
import json
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from helpers import canonical_of_text, python_re_verdict, python_regex, walk  # noqa: E402
from pretok_support import normalization_form, normalized_text  # noqa: E402
from workloads import expected_rejection  # noqa: E402

SAMPLES_PER_REGEX = 50
WALKS_PER_REGEX = 50
# Random walks of a guide checked for soundness alone (see `_sound_without_dfa`).
SOUND_ONLY_WALKS = 10


def _label(row: dict) -> str:
    return row.get("id") or row.get("name") or row["regex"][:40]


def _mutations(s: str, rng: random.Random) -> list[str]:
    """Short edits of a sampled string, for the negative direction of the byte-DFA check."""
    out = [s[:-1], s + s[-1:], s + rng.choice("a0 _\"{}-.")]
    if len(s) > 1:
        i = rng.randrange(len(s))
        out.append(s[:i] + s[i + 1 :])
        out.append(s[:i] + rng.choice("a0 _\"{}-.") + s[i:])
    return out



def complete_candidates(o, form, strings, counts):
    """``(s, canonical(s), True)`` for the representable strings (the tokenizer's encoding decodes
    back to ``s``; the others, text an NFC/NFKC normalizer changes included, are counted as
    ``unrepresentable``): completeness is required for all of them (``complete_checked``)."""
    for s, ids in zip(strings, o.canonical_batch(strings)):
        if o.decode(ids) != s.encode("utf-8"):
            counts["unrepresentable"] += 1
            continue
        assert normalized_text(s, form), f"{s!r}: the tokenizer's encoding spells text its normalizer changes"
        counts["complete_checked"] += 1
        yield s, ids, True


def check_regex(pt, tut, row: dict, seed: int, counts: collections.Counter, failures: list, max_len: int) -> None:
    o = tut.oracle
    form = normalization_form(o)
    pattern = row["regex"]
    label = _label(row)
    rejection = expected_rejection(pattern)
    counts["regexes"] += 1

    def fail(kind: str, detail: str) -> None:
        failures.append(f"[{tut.name}] {label} {pattern[:80]!r}: {kind}: {detail}")

    t0 = time.perf_counter()
    try:
        guide = tut.compiler.compile_regex(pattern, method="cartesian")
    except pt.LimitExceeded as e:
        counts["skipped_limit"] += 1
        print(f"  LimitExceeded [{tut.name}] {label}: {e}")
        return
    except ValueError as e:
        if rejection is None and "empty" in str(e).lower():
            # An empty language is an expected refusal: either no string matches at all, or none
            # the tokenizer can represent (then the exact guide accepts nothing). Check which.
            try:
                samples = pt.ByteDfa(pattern).sample(SAMPLES_PER_REGEX, seed, max_len=max_len)
            except ValueError:
                counts["skipped_empty"] += 1
                print(f"  empty language [{tut.name}] {label}: {e}")
                return
            strings = [b.decode("utf-8") for b in samples]
            if any(req for _s, _ids, req in complete_candidates(o, form, strings, collections.Counter())):
                fail("'empty language' but some samples are representable (and normalized)", str(e))
            else:
                counts["skipped_unrepresentable"] += 1
                print(f"  no representable string [{tut.name}] {label}: {e}")
            return
        if rejection is None:
            fail("unexpected ValueError", str(e))
            return
        counts["skipped_rejected"] += 1
        print(f"  rejected as expected [{tut.name}] {label} ({rejection[0]}): {e}")
        if rejection[0] == "look-around" and "look" not in str(e).lower():
            fail("ValueError does not name look-around", str(e))
        return
    except Exception as e:  # noqa: BLE001 - any other exception is a failure with its message
        fail(f"unexpected {type(e).__name__}", str(e))
        return
    counts["compile_ms"] += round(1000 * (time.perf_counter() - t0))
    if rejection is not None and rejection[1]:
        fail("compiled a regex regex-automata rejects", rejection[0])
        return

    try:
        agnostic = tut.compiler.compile_regex(pattern, method="agnostic")
        dfa = pt.ByteDfa(pattern)
    except pt.LimitExceeded as e:
        # The lazy guide determinizes a large regex on demand, but the checks' own tools, the
        # byte DFA they sample from and the agnostic guide, need the whole minimal DFA: past
        # `max_byte_dfa_states` there are no samples to check completeness with, but the
        # guide's own walks can still be checked for soundness.
        print(f"  LimitExceeded for the checks' byte DFA [{tut.name}] {label}: {e}; soundness only")
        _sound_without_dfa(pt, o, guide, pattern, seed, counts, fail)
        return
    except Exception as e:  # noqa: BLE001
        fail(f"agnostic compile raised {type(e).__name__}", str(e))
        return
    counts["compiled"] += 1
    py = python_regex(pattern)
    rng = random.Random(seed)

    # -- samples: the byte DFA against Python's re, then complete ---------------------------------
    samples = dfa.sample(SAMPLES_PER_REGEX, seed, max_len=max_len)
    if len(samples) != SAMPLES_PER_REGEX:
        fail("ByteDfa.sample", f"asked {SAMPLES_PER_REGEX}, got {len(samples)}")
    strings = []
    for b in samples:
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            fail("sample is not UTF-8", repr(b[:80]))
            continue
        if not dfa.matches(b):
            fail("ByteDfa.matches refuses its own sample", repr(s[:80]))
        verdict = python_re_verdict(py, pattern, s)
        if verdict is None:
            counts["re_unverifiable"] += 1
        else:
            counts["re_checked"] += 1
            if not verdict:
                fail("Python re refuses a sample", repr(s[:120]))
        if len(s) <= 16:  # short, so that a backtracking `re` stays fast on near misses
            for m in _mutations(s, rng):
                verdict = python_re_verdict(py, pattern, m)
                if verdict is not None:
                    counts["re_mutations_checked"] += 1
                    if verdict != dfa.matches(m.encode("utf-8")):
                        fail("byte DFA and Python re disagree", f"{m!r}: re={verdict}")
        strings.append(s)
    # A lazy guide (the default with an NFC/NFKC normalizer) builds states as the checks reach
    # them, and may pass the suite's max_product_states there instead of at compile time: then
    # the regex counts as refused at its limit (`lazy_limit`), not as compiled.
    before = {k: counts[k] for k in ("complete_checked", "unrepresentable")}
    counted_walks = 0
    try:
        counts["strings"] += len(strings)
        for s, ids, required in complete_candidates(o, form, strings, counts):
            if required:
                ok, why = walk(guide, ids)
                if not ok:
                    fail("cartesian refuses canonical(s)", f"s={s[:120]!r} ids={ids[:30]}: {why}")
            ok, why = walk(agnostic, ids)
            if not ok:
                fail("agnostic refuses canonical(s)", f"s={s[:120]!r} ids={ids[:30]}: {why}")

        # -- random walks: sound -------------------------------------------------------------------
        walks = [guide.random_walk(seed * 1000 + i) for i in range(WALKS_PER_REGEX)]
        counts["walks"] += len(walks)
        counted_walks = len(walks)
        for seq, canonical in zip(walks, o.is_canonical_batch(walks)):
            text = o.decode(seq)
            if not canonical:
                redo = canonical_of_text(o, text)
                fail("random walk is not canonical", f"walk={seq[:30]} text={text[:120]!r} canonical={redo}")
            if not dfa.matches(text):
                fail("random walk decodes outside the language", repr(text[:120]))
            elif canonical:
                verdict = python_re_verdict(py, pattern, text.decode("utf-8"))
                if verdict is False:
                    fail("Python re refuses a random walk's text", repr(text[:120]))
            ok, why = walk(guide, seq)
            if not ok:
                fail("guide refuses its own random walk", why)
    except pt.LimitExceeded as e:
        if not guide.is_lazy:
            raise
        counts["lazy_limit"] += 1
        counts["compiled"] -= 1
        counts["walks"] -= counted_walks
        counts["strings"] -= len(strings)
        for k, v in before.items():
            counts[k] = v
        print(f"  LimitExceeded while checking the lazy guide [{tut.name}] {label}: {e}")
        return
    # agnostic walks stay in the language (agnostic's own soundness, a few are enough)
    for i in range(5):
        seq = agnostic.random_walk(seed * 1000 + 500 + i)
        if not dfa.matches(o.decode(seq)):
            fail("agnostic walk decodes outside the language", repr(o.decode(seq)[:120]))


def _sound_without_dfa(pt, o, guide, pattern: str, seed: int, counts: collections.Counter, fail) -> None:
    """Soundness alone, for a regex whose byte DFA the checks cannot build: each of
    ``SOUND_ONLY_WALKS`` random walks of ``guide`` must be the tokenizer's own encoding of its
    text, that text must match (by Python's ``re``, where it can tell), and the guide must accept
    the walk again. Counted as ``sound_only`` (its walks apart from the complete checks'); a
    limit met while walking counts the regex as ``skipped_limit``."""
    try:
        walks = [guide.random_walk(seed * 1000 + i) for i in range(SOUND_ONLY_WALKS)]
    except pt.LimitExceeded as e:
        counts["skipped_limit"] += 1
        print(f"  LimitExceeded while walking the lazy guide: {e}")
        return
    counts["sound_only"] += 1
    counts["sound_only_walks"] += len(walks)
    py = python_regex(pattern)
    for seq, canonical in zip(walks, o.is_canonical_batch(walks)):
        text = o.decode(seq)
        if not canonical:
            fail("random walk is not canonical", f"walk={seq[:30]} text={text[:120]!r} canonical={canonical_of_text(o, text)}")
        try:
            verdict = python_re_verdict(py, pattern, text.decode("utf-8"))
        except UnicodeDecodeError:
            fail("random walk decodes to invalid UTF-8", repr(text[:120]))
            continue
        if verdict is False:
            fail("Python re refuses a random walk's text", repr(text[:120]))
        elif verdict:
            counts["sound_only_re_checked"] += 1
        ok, why = walk(guide, seq)
        if not ok:
            fail("guide refuses its own random walk", why)


# ---------------------------------------------------------------------------------------------
# worker process and its guard
# ---------------------------------------------------------------------------------------------


def _worker_main(name: str, max_len: int) -> None:
    import propertok as pt

    from helpers import TokenizerUnderTest

    jobs = json.loads(sys.stdin.read())
    tut = TokenizerUnderTest(pt, name)
    tut.compiler.tokenizer_dfa_stats()  # build the tokenizer DFA before the per-regex clock
    print("@READY", flush=True)
    for k, (seed, row) in enumerate(jobs):
        print(f"@START {k}", flush=True)
        counts: collections.Counter = collections.Counter()
        failures: list[str] = []
        t0 = time.perf_counter()
        check_regex(pt, tut, row, seed=seed, counts=counts, failures=failures, max_len=max_len)
        result = {"k": k, "counts": counts, "failures": failures, "seconds": time.perf_counter() - t0}
        print("@DONE " + json.dumps(result), flush=True)


def run_guarded(name: str, jobs: list, max_len: int, guard_s: float, startup_s: float = 300.0):
    """Run ``check_regex`` on ``jobs`` = [(seed, row), ...] for tokenizer ``name`` in worker
    processes. Returns ``(counts, failures, timings)``; timings = [(seconds, label)]."""
    counts: collections.Counter = collections.Counter()
    failures: list[str] = []
    timings: list[tuple[float, str]] = []
    pending = list(jobs)
    while pending:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), name, str(max_len)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        lines: queue.Queue = queue.Queue()

        def pump(stream=proc.stdout, q=lines):
            for line in stream:
                q.put(line)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        proc.stdin.write(json.dumps(pending))
        proc.stdin.close()
        deadline = time.monotonic() + startup_s
        started = None  # index in `pending` of the regex being checked
        finished = 0
        tail: collections.deque = collections.deque(maxlen=40)
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                proc.kill()  # our own worker, stuck on one regex
                proc.wait()
                if started is None:
                    failures.append(f"[{name}] worker did not start within {startup_s:.0f} s:\n" + "".join(tail))
                    return counts, failures, timings
                row = pending[started][1]
                counts["regexes"] += 1
                counts["hung"] += 1
                failures.append(
                    f"[{name}] {_label(row)} {row['regex'][:80]!r}: did not finish within {guard_s:.0f} s "
                    "(compile, or its LimitExceeded, must come in bounded time)"
                )
                pending = pending[started + 1 :]
                break
            if line is None:  # the worker exited
                rc = proc.wait()
                if finished == len(pending):
                    pending = []
                    break
                at = started if started is not None else 0
                row = pending[at][1]
                counts["regexes"] += 1
                counts["crashed"] += 1
                failures.append(
                    f"[{name}] {_label(row)} {row['regex'][:80]!r}: worker exited with status {rc} while "
                    "checking it; last output:\n" + "".join(tail)
                )
                pending = pending[at + 1 :]
                break
            if line.startswith("@READY"):
                deadline = time.monotonic() + guard_s
            elif line.startswith("@START "):
                started = int(line.split()[1])
                deadline = time.monotonic() + guard_s
            elif line.startswith("@DONE "):
                result = json.loads(line[len("@DONE ") :])
                counts.update(result["counts"])
                failures.extend(result["failures"])
                timings.append((result["seconds"], _label(pending[result["k"]][1])))
                finished += 1
            else:
                tail.append(line)
                print(line, end="")
    return counts, failures, timings


if __name__ == "__main__":
    _worker_main(sys.argv[1], int(sys.argv[2]))
