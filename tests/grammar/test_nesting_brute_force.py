"""Brute force on synthetic merge tables with tiny nesting grammars (Dyck words with content,
nested lists), against the real ``tokenizers`` library and an enumeration of the language.

* Complete and exact from below: every string of the language up to 16 characters is generated
  by a plain-Python recursion (not the grammar engine); the set of their canonical encodings
  gives, for every prefix of up to 4 tokens, tokens that must be allowed. The guide's mask there
  must contain exactly those, plus only tokens whose sequence the guide can finish (next check).
* Sound, no dead end: every guide path of up to 4 tokens, finished by a breadth-first search over
  the guide's own masks, is the real tokenizer's encoding of its text, and the text is in the
  language.
"""

from __future__ import annotations

import functools
from collections import deque

import pytest

from synthetic import MergeTableBPE, SyntheticOracle

# (name, GBNF, language generator over lengths)
TABLES = {
    "chain": ("abc", [("a", "b"), ("ab", "c")]),
    "blog_table_1": ("abc", [("a", "b"), ("a", "a"), ("a", "c")]),
    "two_ways": ("abc", [("a", "bc"), ("ab", "c"), ("a", "b"), ("b", "c")]),
    "unreachable": ("abc", [("a", "b"), ("b", "c"), ("a", "bc")]),
    "closers": ("abc", [("b", "b"), ("bb", "b"), ("c", "b"), ("a", "a")]),
}


@functools.lru_cache(maxsize=None)
def dyck(n: int) -> frozenset:
    """``root ::= "a" root "b" root | "c"``: the strings of length ``n``."""
    out = {"c"} if n == 1 else set()
    for i in range(1, n - 2):
        for x in dyck(i):
            for y in dyck(n - 2 - i):
                out.add("a" + x + "b" + y)
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def lists(n: int) -> frozenset:
    """``root ::= "a" (root ("c" root)*)? "b"`` (a list: a/b brackets, c separators)."""
    return frozenset("a" + body + "b" for body in items(n - 2)) if n >= 2 else frozenset()


@functools.lru_cache(maxsize=None)
def items(n: int) -> frozenset:
    """The inside of a list: empty, or roots separated by ``c``, ``n`` characters in all."""
    out = {""} if n == 0 else set()
    for i in range(2, n + 1):
        for first in lists(i):
            if i == n:
                out.add(first)
            for rest in items(n - i - 1) if n - i - 1 >= 2 else ():
                out.add(first + "c" + rest)
    return frozenset(out)


GRAMMARS = {
    "dyck": ('root ::= "a" root "b" root | "c"\n', dyck),
    "lists": ('root ::= "a" (root ("c" root)*)? "b"\n', lists),
}
MAX_CHARS = 16
MAX_PREFIX = 4


def finish(guide, state, max_tokens: int = 40):
    """A shortest token sequence from ``state`` to a final state, over the guide's masks."""
    eos = set(guide.eos_token_ids)
    parent = {state: None}
    queue = deque([state])
    while queue:
        s = queue.popleft()
        if guide.is_final(s):
            path = []
            while parent[s] is not None:
                s, t = parent[s]
                path.append(t)
            return path[::-1]
        for t in guide.allowed_tokens(s).tolist():
            if t in eos:
                continue
            n = guide.next_state(s, t)
            if n not in parent:
                parent[n] = (s, t)
                queue.append(n)
        if len(parent) > 10_000:
            break
    return None


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
def test_masks_on_synthetic_tables(pt, table, grammar):
    alphabet, merges = TABLES[table]
    bpe = MergeTableBPE(alphabet, merges)
    oracle = SyntheticOracle(bpe)
    text, language = GRAMMARS[grammar]
    guide = pt.Compiler(pt.Vocabulary.from_json(bpe.to_json())).compile_grammar(text, "gbnf")
    eos = bpe.eos_id

    strings = sorted(s for n in range(1, MAX_CHARS + 1) for s in language(n))
    members = set(strings)
    encodings = oracle.canonical_batch(strings)
    must = {}  # prefix -> tokens (EOS for a whole encoding) that some encoding continues it with
    for ids in encodings:
        for i in range(min(len(ids), MAX_PREFIX) + 1):
            must.setdefault(tuple(ids[:i]), set()).add(ids[i] if i < len(ids) else eos)

    problems = []
    paths = []

    def visit(state, prefix):
        allowed = set(guide.allowed_tokens(state).tolist())
        missing = must.get(prefix, set()) - allowed
        if missing:
            problems.append(f"after {[bpe.pieces[t] for t in prefix]}: missing {sorted(missing)}")
        if len(prefix) == MAX_PREFIX:
            return
        for t in sorted(allowed - {eos}):
            paths.append(prefix + (t,))
            visit(guide.next_state(state, t), prefix + (t,))

    visit(guide.initial_state, ())
    finished = []
    for p in paths:
        state = guide.initial_state
        for t in p:
            state = guide.next_state(state, t)
        rest = finish(guide, state)
        if rest is None:
            problems.append(f"dead end after {[bpe.pieces[t] for t in p]}")
            continue
        finished.append(list(p) + rest)
    for seq, ok in zip(finished, oracle.is_canonical_batch(finished)):
        text_of = oracle.decode(seq)
        if not ok:
            problems.append(f"{[bpe.pieces[t] for t in seq]} is not the encoding of {text_of!r}")
        if len(text_of) <= MAX_CHARS and text_of not in members:
            problems.append(f"{text_of!r} is not in the language")
        elif len(text_of) > MAX_CHARS and len(language(len(text_of))) and text_of not in language(len(text_of)):
            problems.append(f"{text_of!r} is not in the language")
    assert not problems, "\n".join(problems[:20])
    assert len(paths) >= 8 and len(must) >= 10, (len(paths), len(must))
