"""Small helpers over the propertok Guide API used by several test modules (no propertok import)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np

from oracle import Oracle, oracle_for, tokenizer_path


def mask_bits(mask: np.ndarray, width: Optional[int] = None) -> np.ndarray:
    """A ``uint32`` mask (bit i of word i//32 = token i) as a bool array, one entry per token id."""
    words = np.ascontiguousarray(mask).astype("<u4", copy=False)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
    return bits if width is None else bits[:width]


def bit_is_set(mask: np.ndarray, token_id: int) -> bool:
    return bool((int(mask[token_id >> 5]) >> (token_id & 31)) & 1)


def representable_encodings(oracle, strings: Sequence[str], counts) -> Iterator[tuple[str, list[int]]]:
    """``(s, canonical(s))`` for the strings the tokenizer can spell (its encoding decodes back to
    ``s``); counts ``unrepresentable`` and ``complete_checked`` in ``counts``."""
    for s, ids in zip(strings, oracle.canonical_batch(strings)):
        if oracle.decode(ids) != s.encode("utf-8"):
            counts["unrepresentable"] += 1
            continue
        counts["complete_checked"] += 1
        yield s, ids


def walk(guide, ids: Sequence[int]) -> tuple[bool, str]:
    """Feed ``ids`` to ``guide`` from its initial state, then require a final state.

    Returns ``(True, "")`` or ``(False, why)``; "allowed" is read from the mask bit (not from
    ``next_state``), and ``next_state`` must agree with it.
    """
    state = guide.initial_state
    for i, t in enumerate(ids):
        if not bit_is_set(guide.mask(state), t):
            return False, f"token #{i} (id {t}) not allowed in state {state}"
        state = guide.next_state(state, t)
    if not guide.is_final(state):
        return False, f"state {state} after all {len(ids)} tokens is not final"
    return True, ""


class MaskWalker:
    """Walks token sequences through a guide: allowed = the token's bit in ``guide.mask(state)``
    (the single-token sweep reads the initial mask once, as a bool array), target = ``next_state``."""

    def __init__(self, guide):
        self.guide = guide
        self.initial_bits = mask_bits(guide.mask(guide.initial_state), guide.vocab_size)

    def allowed(self, state: int, token: int) -> bool:
        if state == self.guide.initial_state:
            return bool(self.initial_bits[token])
        return bit_is_set(self.guide.mask(state), token)

    def run(self, seq):
        """``(accepted as a complete string, index of the refused token or None, last state)``."""
        g = self.guide
        state = g.initial_state
        for i, t in enumerate(seq):
            if not self.allowed(state, t):
                return False, i, state
            state = g.next_state(state, t)
        return g.is_final(state), None, state


def finishing_walks(guide, seeds: int, max_tokens: int) -> list[list[int]]:
    """``guide.random_walk(seed, max_tokens)`` for each seed, each checked to be a walk with no
    dead end: every mask along it is non-empty and it ends in a final state."""
    walks = [guide.random_walk(seed, max_tokens=max_tokens) for seed in range(seeds)]
    for w in walks:
        state = guide.initial_state
        for t in w:
            assert len(guide.allowed_tokens(state)) > 0, w
            state = guide.next_state(state, t)
        assert guide.is_final(state), w
    return walks


def enumerate_sequences(guide, limit: int = 100_000, max_depth: int = 64) -> list[list[int]]:
    """Every accepted token sequence (EOS excluded) by depth-first search over the guide.

    Raises AssertionError past ``limit`` sequences or ``max_depth`` tokens (the caller expects a
    small finite language)."""
    eos = set(guide.eos_token_ids)
    out: list[list[int]] = []

    def dfs(state: int, prefix: list[int]) -> None:
        assert len(prefix) <= max_depth, f"path longer than {max_depth} tokens: {prefix[:10]}..."
        if guide.is_final(state):
            out.append(list(prefix))
            assert len(out) <= limit, f"more than {limit} accepted sequences"
        for t in guide.allowed_tokens(state).tolist():
            if t in eos:
                continue
            prefix.append(t)
            dfs(guide.next_state(state, t), prefix)
            prefix.pop()

    dfs(guide.initial_state, [])
    return out


# ---------------------------------------------------------------------------------------------
# Python's `re` as an independent check of the byte DFA
# ---------------------------------------------------------------------------------------------

# Constructs whose meaning depends on Unicode tables, where Python's `re` and Rust's regex-syntax
# legitimately disagree on some characters (Python's \s has \x1c-\x1f, Rust's \w has combining
# marks, the two use different Unicode versions, case folding differs beyond ASCII).
_UNICODE_SENSITIVE = re.compile(r"\\[wWsSdDbBpP]|\(\?[a-z]*i")
# Escapes Rust reads as assertions (word boundaries) and Python as literals.
_RUST_ONLY_SYNTAX = re.compile(r"\\[<>]|\\b\{")
# Characters outside of which the two engines agree on those classes.
_SAFE_TEXT = re.compile(r"[\x00-\x1b\x20-\x7f]*")


def python_regex(pattern: str) -> Optional[re.Pattern]:
    """``re.compile(pattern)``, or None when Python cannot compile it the same way (error, or a
    FutureWarning about nested sets / set operations, which Python and Rust read differently)."""
    if _RUST_ONLY_SYNTAX.search(pattern):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return re.compile(pattern)
        except (re.error, FutureWarning, DeprecationWarning, OverflowError, RecursionError):
            return None


def python_re_verdict(compiled: Optional[re.Pattern], pattern: str, text: str) -> Optional[bool]:
    """Python's full-match verdict on ``text`` where it is meaningful to compare with Rust's,
    else None (pattern not compilable by Python, or a Unicode-sensitive construct on text outside
    the characters where both engines provably agree)."""
    if compiled is None:
        return None
    if _UNICODE_SENSITIVE.search(pattern) and not _SAFE_TEXT.fullmatch(text):
        return None
    return compiled.fullmatch(text) is not None


def canonical_of_text(o, text: bytes):
    """The tokenizer's own encoding of a walk's decoded bytes, for a failure message ("not
    UTF-8" when they are not text)."""
    try:
        return o.canonical(text.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"


def check_walks(o, guide, pattern: str, dfa, seeds, problems: list, counts) -> None:
    """Sound: every random walk re-encodes to itself and decodes into the language."""
    py = python_regex(pattern)
    walks = [guide.random_walk(seed) for seed in seeds]
    counts["walks"] += len(walks)
    for seq, canonical in zip(walks, o.is_canonical_batch(walks)):
        text = o.decode(seq)
        if not canonical:
            redo = canonical_of_text(o, text)
            problems.append(f"{pattern!r}: walk {seq[:20]} text {text[:80]!r} is not canonical (canonical: {redo})")
        if not dfa.matches(text):
            problems.append(f"{pattern!r}: walk {seq[:20]} decodes outside the language: {text[:80]!r}")
        elif canonical and python_re_verdict(py, pattern, text.decode("utf-8")) is False:
            problems.append(f"{pattern!r}: Python re refuses walk text {text[:80]!r}")


def iter_chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# ---------------------------------------------------------------------------------------------
# a shared tokenizer under test
# ---------------------------------------------------------------------------------------------


TOKENIZER_DFA_CACHE_ENV = "PROPERTOK_TEST_TOKENIZER_DFA_CACHE"


class TokenizerUnderTest:
    """A shared tokenizer: its oracle and, built lazily once, its Vocabulary, Compiler and guides."""

    def __init__(self, pt, name: str):
        self.pt = pt
        self.name = name
        self.path = tokenizer_path(name)
        self.oracle: Oracle = oracle_for(name)
        self._vocab = None
        self._vocab_any_eos = None
        self._compiler = None
        self._generous = None
        self._guides: dict = {}

    @property
    def vocab(self):
        if self._vocab is None:
            self._vocab = self.pt.Vocabulary.from_file(str(self.path))
        return self._vocab

    @property
    def vocab_any_eos(self):
        """``vocab``, or, for a tokenizer whose EOS propertok does not find by name (e.g.
        deepseek's ``<｜end▁of▁sentence｜>``), the Vocabulary with its first special token as EOS.
        A ValueError about anything else propagates."""
        if self._vocab_any_eos is None:
            try:
                self._vocab_any_eos = self.vocab
            except ValueError as e:
                if "eos" not in str(e).lower() or not self.oracle.special_ids:
                    raise
                self._vocab_any_eos = self.pt.Vocabulary.from_file(
                    str(self.path), eos_token_ids=[self.oracle.special_ids[0]]
                )
        return self._vocab_any_eos

    def _cache_kwargs(self) -> dict:
        """``cache_dir``: the session's tokenizer-DFA cache (``$PROPERTOK_TEST_TOKENIZER_DFA_CACHE``,
        a temporary folder conftest.py creates per session, inherited by the oracle workers) for
        byte-level tokenizers, whose tokenizer DFA takes seconds to build; none otherwise.

        The first time, the tokenizer DFA is built in a child process that writes it to the
        cache, and this process loads it: building one takes GBs at its peak (o200k about
        3 GB, cl100k 1.4 GB) that the allocator keeps, while a loaded one takes about 0.4 GB, and a
        test session holds a dozen tokenizers."""
        cache = os.environ.get(TOKENIZER_DFA_CACHE_ENV)
        if not cache or self.oracle.family != "byte-level":
            return {}
        marker = Path(cache) / f"{self.name}.built"
        if not marker.exists():
            # (a tokenizer whose canonical guides are refused has no tokenizer DFA to build: the
            # child does nothing)
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--build-tokenizer-dfa", self.name, cache],
                capture_output=True, text=True, timeout=1800,
            )
            if proc.returncode != 0:
                raise RuntimeError(
                    f"building the tokenizer DFA of {self.name} in a child process failed with status "
                    f"{proc.returncode} (-9: killed, e.g. out of memory):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
                )
            marker.touch()
        return {"cache_dir": cache}

    @property
    def compiler(self):
        if self._compiler is None:
            # The library's default product budget (2,000,000 states, 30 s) is sized for one
            # server compile; the oracle suite compiles hundreds of regexes on 2 cores, so it
            # refuses the few huge ones earlier (they are counted as LimitExceeded).
            # vocab_any_eos: the same Vocabulary as `vocab` wherever propertok finds the EOS by name.
            self._compiler = self.pt.Compiler(
                self.vocab_any_eos, max_product_states=250_000, max_compile_seconds=20.0, **self._cache_kwargs()
            )
        return self._compiler

    def generous_compiler(self, max_product_states: int = 50_000_000, max_compile_seconds: float = 600.0):
        """A second Compiler (created once, until ``release_generous``) with wide limits, for the
        guides a test needs whole (e.g. ``(?s:.*)``); it shares the session's tokenizer-DFA cache."""
        if self._generous is None:
            self._generous = self.fresh_compiler(
                max_product_states=max_product_states,
                max_compile_seconds=max_compile_seconds,
                max_mask_cache_bytes=64 << 20,
            )
        return self._generous

    def release_generous(self) -> None:
        """Drop the generous compiler (a loaded byte-level tokenizer DFA takes 0.3-2 GB)."""
        self._generous = None

    def fresh_compiler(self, **limits):
        """A new Compiler (not kept here) over ``vocab_any_eos`` with the session's tokenizer-DFA
        cache: for a test that wants its memory back when it is done."""
        return self.pt.Compiler(self.vocab_any_eos, **limits, **self._cache_kwargs())

    def guide(self, regex: str, method: str = "cartesian"):
        """A compiled guide, cached for the session (guides are immutable)."""
        key = (regex, method)
        if key not in self._guides:
            self._guides[key] = self.compiler.compile_regex(regex, method=method)
        return self._guides[key]

    def large_guide(self, pattern: str):
        """``generous_compiler().compile_regex(pattern, lazy=False)`` (the whole eager guide), compiled
        in a child process when the session has a tokenizer-DFA cache folder and loaded here with ``guide_from_bytes``:
        a large guide's compile can peak at several GB (Command-R's ``(?s:.*)``: about 6 GB) that
        the allocator would keep for the rest of the session. The child's errors are raised here
        (as RuntimeError with its output). Returns ``(guide, compile_seconds)``."""
        cache = os.environ.get(TOKENIZER_DFA_CACHE_ENV)
        if not cache or self.oracle.family != "byte-level":
            t0 = time.perf_counter()
            guide = self.generous_compiler().compile_regex(pattern, method="cartesian", lazy=False)
            return guide, time.perf_counter() - t0
        self._cache_kwargs()  # the tokenizer DFA, built once into the cache
        out = Path(cache) / f"guide-{self.name}-{hashlib.sha256(pattern.encode()).hexdigest()[:16]}.bin"
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--compile-guide", self.name, cache, pattern, str(out)],
            capture_output=True, text=True, timeout=1800,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {pattern!r} for {self.name} in a child process failed:\n{proc.stdout}{proc.stderr}")
        seconds = float(proc.stdout.split()[-1])
        guide = self.generous_compiler().guide_from_bytes(out.read_bytes())
        out.unlink()
        return guide, seconds

    def __repr__(self) -> str:
        return f"TokenizerUnderTest({self.name!r})"


if __name__ == "__main__" and sys.argv[1:2] == ["--build-tokenizer-dfa"]:
    # `python helpers.py --build-tokenizer-dfa NAME CACHE_DIR` (TokenizerUnderTest._cache_kwargs)
    import propertok

    _name, _cache = sys.argv[2], sys.argv[3]
    _vocab = TokenizerUnderTest(propertok, _name).vocab_any_eos
    if _vocab.canonical_unsupported_reason is None:
        propertok.Compiler(_vocab, cache_dir=_cache).tokenizer_dfa_stats()

if __name__ == "__main__" and sys.argv[1:2] == ["--compile-guide"]:
    # `python helpers.py --compile-guide NAME CACHE_DIR PATTERN OUT` (TokenizerUnderTest.large_guide):
    # prints the compile seconds last
    import propertok

    os.environ[TOKENIZER_DFA_CACHE_ENV] = sys.argv[3]
    _tut = TokenizerUnderTest(propertok, sys.argv[2])
    _compiler = _tut.generous_compiler()
    _compiler.tokenizer_dfa_stats()
    _t0 = time.perf_counter()
    _guide = _compiler.compile_regex(sys.argv[4], method="cartesian", lazy=False)
    _seconds = time.perf_counter() - _t0
    Path(sys.argv[5]).write_bytes(_guide.to_bytes())
    print(_seconds)
