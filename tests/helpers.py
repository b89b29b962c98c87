"""Small helpers over the propertok Guide API used by several test modules (no propertok import)."""

from __future__ import annotations

import re
import warnings
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


def iter_chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# ---------------------------------------------------------------------------------------------
# a shared tokenizer under test
# ---------------------------------------------------------------------------------------------


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

    @property
    def compiler(self):
        if self._compiler is None:
            # The library's default product budget (2,000,000 states, 30 s) is sized for one
            # server compile; the oracle suite compiles hundreds of regexes on 2 cores, so it
            # refuses the few huge ones earlier (they are counted as LimitExceeded).
            # vocab_any_eos: the same Vocabulary as `vocab` wherever propertok finds the EOS by name.
            self._compiler = self.pt.Compiler(
                self.vocab_any_eos, max_product_states=250_000, max_compile_seconds=20.0
            )
        return self._compiler

    def guide(self, regex: str, method: str = "cartesian"):
        """A compiled guide, cached for the session (guides are immutable)."""
        key = (regex, method)
        if key not in self._guides:
            self._guides[key] = self.compiler.compile_regex(regex, method=method)
        return self._guides[key]

    def __repr__(self) -> str:
        return f"TokenizerUnderTest({self.name!r})"
