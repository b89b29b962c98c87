"""Compiled guides and the compiler are shared across threads.

The Rust core is ``Send + Sync`` and releases the GIL during compilation and the other long
calls, so (a) many threads compiling and stepping matchers at once must give exactly the results
of a sequential run, and (b) another Python thread keeps running while a long compile is in
progress.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from oracle import require_shared

REGEXES = [
    r"boolean: ((true)|(false))",
    r"( William)|( Theodore)",
    r"[a-z]{1,8}( [0-9]{1,3})?",
    r'\{"name": "[A-Za-z ]{1,12}", "age": [0-9]{1,3}\}',
    r"(yes|no|maybe)[.!?]",
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
]
THREADS = 8
ROUNDS = 4


def _signature(guide, seeds=range(5)):
    """What a guide does: sizes, the initial mask, and the states along a few random walks."""
    walks = [tuple(guide.random_walk(seed)) for seed in seeds]
    states = []
    for walk in walks:
        m = guide.matcher()
        for t in walk:
            assert m.accept_token(t)
        states.append(m.state)
    return guide.num_states, guide.mask(guide.initial_state).tobytes(), tuple(walks), tuple(states)


def test_threads_compile_and_step_like_a_sequential_run(mistral):
    compiler = mistral.compiler
    sequential = {r: _signature(compiler.compile_regex(r)) for r in REGEXES}

    def job(i):
        r = REGEXES[i % len(REGEXES)]
        return r, _signature(compiler.compile_regex(r))

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(job, range(THREADS * ROUNDS)))
    assert len(results) == THREADS * ROUNDS
    for r, sig in results:
        assert sig == sequential[r], r


def test_one_guide_shared_by_many_matchers(mistral):
    guide = mistral.compiler.compile_regex(REGEXES[3])
    walks = [guide.random_walk(seed) for seed in range(THREADS)]
    words = (guide.vocab_size + 31) // 32

    def job(walk):
        m = guide.matcher()
        bitmask = np.zeros((1, words), dtype=np.int32)
        for t in walk:
            m.fill_next_token_bitmask(bitmask, 0)
            assert (bitmask[0, t // 32] >> (t % 32)) & 1
            assert m.accept_token(t)
        return m.is_accepting()

    with ThreadPoolExecutor(THREADS) as pool:
        assert all(pool.map(job, walks * ROUNDS))


def test_threads_fill_rows_of_one_bitmask(pt, mistral):
    """A batch's rows filled by a thread pool, one row per thread, each from its own fresh lazy
    guide of a fresh Compiler: a first visit that walks a slice releases the GIL, so fills into
    one bitmask overlap, and each row must be what a sequential run writes. The numpy borrow checker the
    binding used held the whole array for the call: an overlapping fill panicked inside it
    (``AlreadyBorrowed``)."""
    regexes = REGEXES + [r'"[^"\\]{0,40}"', r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+@[a-z]+\.com"]
    walks = {r: mistral.compiler.compile_regex(r).random_walk(7) for r in regexes}
    expected = {}
    for r, walk in walks.items():
        m = mistral.compiler.compile_regex(r).matcher()
        expected[r] = []
        for t in walk + [None]:
            expected[r].append(m.allowed_tokens().tolist())
            if t is not None:
                assert m.accept_token(t)
    bitmask = pt.allocate_token_bitmask(THREADS, mistral.vocab.vocab_size)
    lock = threading.Lock()
    in_fill = overlaps = 0

    def job(i):
        nonlocal in_fill, overlaps
        mine = []
        for k in range(ROUNDS):
            r = regexes[(i + k) % len(regexes)]
            # A fresh Compiler: its first string contents walk the slice, which releases the GIL
            # however fast (a fill keeps it for short work, so warm fills would rarely overlap).
            m = mistral.fresh_compiler().compile_regex(r).matcher()
            for t in walks[r] + [None]:
                with lock:
                    overlaps += in_fill > 0
                    in_fill += 1
                m.fill_next_token_bitmask(bitmask, i)
                with lock:
                    in_fill -= 1
                mine.append((r, np.flatnonzero(np.unpackbits(bitmask[i].view(np.uint8), bitorder="little")).tolist()))
                if t is not None:
                    assert m.accept_token(t)
        return mine

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(job, range(THREADS)))
    assert overlaps > 0  # fills did run at the same time
    for i, mine in enumerate(results):
        rows = {}
        for r, row in mine:
            rows.setdefault(r, []).append(row)
        for r, got in rows.items():
            assert got == expected[r] * (len(got) // len(expected[r])), (i, r)


def test_a_long_first_visit_releases_the_gil(pt, tokenizer_under_test, tmp_path):
    """A fill keeps the GIL while its work is short and releases it once the work turns out long
    (``rust/src/python/detach.rs``): here the first mask inside a JSON string on a Compiler whose
    slice cache is empty, which walks the string's slice (10-20 ms on Llama 3). A spinning Python
    thread advances meanwhile, and the mask is the one a warm Compiler gives."""
    require_shared("the llama3 tokenizer")
    tut = tokenizer_under_test("llama3")
    # The session's tokenizer DFA without its slice sets: those are walked.
    session_cache = Path(tut._cache_kwargs()["cache_dir"])
    for dfa in session_cache.glob("tokenizer-dfa-*.bin"):
        (tmp_path / dfa.name).symlink_to(dfa)
    compiler = pt.Compiler(tut.vocab_any_eos, cache_dir=str(tmp_path))
    regex = r'"[^"\\]*"'
    quote = tut.oracle.canonical('"')
    m = compiler.compile_regex(regex).matcher()
    assert m.accept_tokens(quote)
    warm = tut.fresh_compiler().compile_regex(regex).matcher()
    assert warm.accept_tokens(quote)
    # The spinner notes the time at each turn. Had the fill kept the GIL, the spinner could
    # not turn before the call returned, and takes the GIL back at most a switch interval (5 ms)
    # after that, before `elapsed` is read: so no turn falls in the first half of a fill that
    # computes for over 5 ms. Released early (the slice walk is long from its start), the
    # spinner turns while the fill computes.
    stamps: list = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    bitmask = pt.allocate_token_bitmask(1, tut.vocab.vocab_size)
    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.01)
        start = time.perf_counter()
        m.fill_next_token_bitmask(bitmask)
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        spinner.join()
    walked = compiler.tokenizer_dfa_stats()["slice_sets_walked"]
    # (A fill computing for under 5 ms could let a kept GIL pass unnoticed, never fail this.)
    assert walked > 0 and elapsed > 0.002, f"not the long first visit this test needs ({elapsed * 1e3:.1f} ms)"
    early = sum(start < t < start + elapsed / 2 for t in stamps)
    assert early > 0, f"the spinning thread did not turn in the first half of a {elapsed * 1e3:.1f} ms fill: the GIL was held"
    expected = pt.allocate_token_bitmask(1, tut.vocab.vocab_size)
    warm.fill_next_token_bitmask(expected)
    assert np.array_equal(bitmask, expected)


def test_compile_releases_the_gil(pt, mistral):
    """A counting thread makes progress while a (deliberately large) compile runs."""
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    compiles = 0
    try:
        start = time.perf_counter()
        # Fresh compilers until 0.3 s have passed: each one's first canonical compile builds the
        # tokenizer DFA (~0.1 s on Mistral-7B, under it on a fast machine), so the time the GIL
        # could be held for does not hang on one compile's length.
        while time.perf_counter() - start < 0.3:
            pt.Compiler(mistral.vocab).compile_regex(r'\{"a": "[^"]{0,8}", "b": [0-9]{1,5}\}')
            compiles += 1
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        counter.join()
    # With the GIL held through each compile, the counter could tick only between compiles.
    assert ticks >= 20 + compiles, f"only {ticks} ticks in {elapsed:.2f} s over {compiles} compiles: the GIL was held"
