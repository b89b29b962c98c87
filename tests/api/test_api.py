"""The Python surface: Vocabulary, ByteDfa, Guide, Matcher and the bitmask helpers."""

from __future__ import annotations

import gc
import json
import math
import os

import numpy as np
import pytest
from tokenizers import Tokenizer

from helpers import enumerate_sequences, mask_bits
from oracle import manifest, tokenizer_path

BOOLEAN = "boolean: ((true)|(false))"
SIMPLE = "[a-z]{1,3}"
# Without the shared corpus, the embedded Mistral-7B tokenizer alone.
BPE_TOKENIZERS = [m["slug"] for m in manifest() if m["model_type"] == "BPE"] or ["mistral7b"]


def reachable_states(guide, limit: int = 5000) -> list[int]:
    seen, stack = {guide.initial_state}, [guide.initial_state]
    eos = set(guide.eos_token_ids)
    while stack and len(seen) < limit:
        s = stack.pop()
        for t in guide.allowed_tokens(s).tolist():
            if t not in eos:
                n = guide.next_state(s, t)
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
    return sorted(seen)


# -- Vocabulary ------------------------------------------------------------------------------------


def test_mistral_vocabulary_properties(mistral):
    v, o = mistral.vocab, mistral.oracle
    # from tokenizer.json: 32000 pieces, <unk>=0 <s>=1 </s>=2 are the special tokens, </s> is EOS
    assert v.num_tokens == 32000 == o.num_tokens
    assert v.vocab_size == 32000
    assert v.eos_token_ids == [2]
    assert sorted(v.special_token_ids) == [0, 1, 2] == o.special_ids
    assert v.kind == "sentencepiece-bpe"


@pytest.mark.parametrize("name", BPE_TOKENIZERS)
def test_token_bytes_match_the_oracle(tokenizer_under_test, name):
    """Every non-special token's bytes equal the oracle's (derived from the token strings alone and
    checked against each tokenizer's own decoder in test_oracle_helper.py)."""
    tut = tokenizer_under_test(name)
    v, o = tut.vocab_any_eos, tut.oracle
    assert v.num_tokens == o.num_tokens
    specials = set(o.special_ids)
    bad = [
        (t, v.token_bytes(t), o.token_bytes(t))
        for t in range(o.num_tokens)
        if o.has_token(t) and t not in specials and v.token_bytes(t) != o.token_bytes(t)
    ]
    assert not bad, f"{len(bad)} tokens differ, e.g. {bad[:10]}"


def test_from_tokenizer_equals_from_file(pt, mistral):
    tok = Tokenizer.from_file(str(tokenizer_path("mistral7b")))
    v = pt.Vocabulary.from_tokenizer(tok)
    assert v.num_tokens == mistral.vocab.num_tokens
    assert v.eos_token_ids == mistral.vocab.eos_token_ids
    assert v.kind == mistral.vocab.kind
    assert all(v.token_bytes(t) == mistral.vocab.token_bytes(t) for t in range(0, 32000, 7))
    v2 = pt.Vocabulary.from_tokenizer(tok, eos_token_ids=[2, 1], vocab_size=32064)
    assert sorted(v2.eos_token_ids) == [1, 2] and v2.vocab_size == 32064


def test_default_tokenizer_is_mistral(pt):
    path = pt.default_tokenizer_path()
    assert os.path.isfile(path)
    with open(path, encoding="utf-8") as f, open(tokenizer_path("mistral7b"), encoding="utf-8") as g:
        assert json.load(f) == json.load(g)
    assert pt.Vocabulary.from_file(path).num_tokens == 32000


def test_explicit_eos_ids(pt):
    v = pt.Vocabulary.from_file(str(tokenizer_path("mistral7b")), eos_token_ids=[2, 1])
    assert sorted(v.eos_token_ids) == [1, 2]
    guide = pt.Compiler(v).compile_regex("ok", method="agnostic")
    state = guide.initial_state
    for t in enumerate_sequences(guide)[0]:
        state = guide.next_state(state, t)
    allowed = set(guide.allowed_tokens(state).tolist())
    assert {1, 2} <= allowed  # every stop id is allowed in a final state


# -- ByteDfa ---------------------------------------------------------------------------------------


def test_byte_dfa_api(pt):
    dfa = pt.ByteDfa("[a-c]{2}|é+")
    assert dfa.num_states > 0
    assert dfa.matches(b"ab") and dfa.matches("éé".encode()) and not dfa.matches(b"a")
    assert not dfa.matches(b"\xc3")  # half of "é"
    samples = dfa.sample(40, 3, max_len=16)
    assert len(samples) == 40 and all(dfa.matches(s) for s in samples)
    assert samples == dfa.sample(40, 3, max_len=16)  # seeded
    assert len(set(samples)) > 5  # the language is infinite: 40 walks are not all the same
    # full-match semantics
    assert not pt.ByteDfa("abc").matches(b"xabcx")


# Text anchors in a whole-match regex: at an edge they are no constraint, inside a JSON string
# ("^#/", as schema converters write a pattern) they never hold, and otherwise the match decides.
ANCHORED = [
    "^abc$",
    r"\A(a|b)*$",
    "(^a|^b)c(d$|e)?",
    r'\{"k": ("big"|"^#/")\}',
    "a?^b",
    "(a|^b)*c",
    "(x$|y)(z?)",
    "^(ab|a)$b?",
]


@pytest.mark.parametrize("pattern", ANCHORED)
def test_byte_dfa_anchors_match_as_python_re_fullmatch(pt, pattern):
    import itertools
    import re

    dfa, python = pt.ByteDfa(pattern), re.compile(pattern)
    alphabet = sorted(set(re.sub(r"\\[Azbd]|[\^$()|?*{}\\]", "", pattern))) or ["a"]
    texts = ["".join(p) for n in range(5) for p in itertools.product(alphabet[:6], repeat=n)]
    texts += ['{"k": "big"}', '{"k": "^#/"}', '{"k": "#/"}']
    for text in texts:
        assert dfa.matches(text.encode()) == bool(python.fullmatch(text)), (pattern, text)


def test_byte_dfa_sample_respects_max_len(pt):
    dfa = pt.ByteDfa("[a-z]+")  # every prefix past the first letter is accepting
    for s in dfa.sample(50, 1, max_len=10):
        # already accepting once past max_len, so the shortest way there is to stop
        assert 1 <= len(s) <= 11


# -- Guide -----------------------------------------------------------------------------------------


def test_guide_properties(mistral):
    guide = mistral.guide(BOOLEAN)
    assert guide.vocab_size == 32000
    assert guide.eos_token_ids == [2]
    assert guide.method == "cartesian"
    assert 0 <= guide.initial_state < guide.num_states
    assert mistral.guide(BOOLEAN, method="agnostic").method == "agnostic"
    assert mistral.guide("[a-z]+").count_sequences() is None  # infinite language


@pytest.mark.parametrize("pattern", [BOOLEAN, SIMPLE])
def test_mask_consistent_with_allowed_tokens(mistral, pattern):
    guide = mistral.guide(pattern)
    words = math.ceil(guide.vocab_size / 32)
    eos = guide.eos_token_ids[0]
    states = reachable_states(guide)
    for s in states:
        mask = guide.mask(s)
        assert mask.dtype == np.uint32 and mask.shape == (words,)
        assert not mask.flags.writeable
        with pytest.raises(ValueError):
            mask[0] = 1
        allowed = guide.allowed_tokens(s)
        assert allowed.dtype == np.int32
        assert np.all(np.diff(allowed) > 0)  # sorted, no duplicates
        assert np.array_equal(np.flatnonzero(mask_bits(mask)), allowed)
        # EOS exactly on final states
        assert bool(mask_bits(mask)[eos]) == guide.is_final(s)
        if guide.is_final(s):
            assert guide.next_state(s, eos) == s


@pytest.mark.parametrize("lazy", [True, False])
def test_mask_keeps_guide_alive(mistral, lazy):
    guide = mistral.compiler.compile_regex(BOOLEAN, lazy=lazy)  # a fresh guide, not the cached one
    assert guide.count_sequences() == 2  # (builds every state of a lazy guide)
    masks = [guide.mask(s) for s in range(guide.num_states)]
    copies = [m.copy() for m in masks]
    del guide
    gc.collect()
    junk = [np.ones(1 << 16, dtype=np.uint32) for _ in range(64)]  # reuse freed memory, if any
    for m, c in zip(masks, copies):
        assert np.array_equal(m, c)
    del junk


def test_releasing_freed_memory_keeps_guides_and_masks(pt, mistral):
    """``_core._release_freed_memory`` (mimalloc's collect, used before resident-set readings)
    returns only freed pages: live guides and the mask views they handed out stay intact."""
    guide = mistral.compiler.compile_regex(BOOLEAN)
    assert guide.count_sequences() == 2  # (builds every state of the lazy guide)
    masks = [guide.mask(s) for s in range(guide.num_states)]
    copies = [m.copy() for m in masks]
    dropped = [mistral.compiler.compile_regex(BOOLEAN) for _ in range(8)]
    del dropped
    gc.collect()
    pt._core._release_freed_memory()
    for s, (m, c) in enumerate(zip(masks, copies)):
        assert np.array_equal(m, c)
        assert np.array_equal(guide.mask(s), c)
    assert guide.first_difference(mistral.compiler.compile_regex(BOOLEAN)) is None


def test_random_walk_is_seeded(mistral):
    guide = mistral.guide(SIMPLE)
    assert guide.random_walk(5) == guide.random_walk(5)
    assert len({tuple(guide.random_walk(i)) for i in range(30)}) > 5


# -- Matcher ---------------------------------------------------------------------------------------


def _common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def test_matcher_walkthrough(mistral):
    o = mistral.oracle
    guide = mistral.guide(BOOLEAN)
    true_ids, false_ids = o.canonical("boolean: true"), o.canonical("boolean: false")
    prefix = _common_prefix(true_ids, false_ids)
    eos = guide.eos_token_ids[0]
    m = guide.matcher()
    assert m.state == guide.initial_state and m.num_accepted_tokens == 0
    assert not m.is_accepting() and not m.is_terminated()
    # forced: the canonical prefix up to the branch (the two encodings differ right after it)
    assert m.forced_tokens() == prefix
    assert m.num_accepted_tokens == 0  # forced_tokens does not move the matcher
    assert m.accept_tokens(prefix)
    assert sorted(m.allowed_tokens().tolist()) == sorted({true_ids[len(prefix)], false_ids[len(prefix)]})
    assert m.forced_tokens() == []
    state_at_branch = m.state
    assert m.accept_tokens(true_ids[len(prefix):])
    assert m.is_accepting() and not m.is_terminated()
    assert m.forced_tokens() == [eos]  # only EOS is left
    m.rollback(len(true_ids) - len(prefix))
    assert m.state == state_at_branch and m.num_accepted_tokens == len(prefix)
    assert m.accept_tokens(false_ids[len(prefix):]) and m.is_accepting()
    assert m.accept_token(eos)
    assert m.is_terminated()
    bitmask = np.zeros((1, math.ceil(guide.vocab_size / 32)), dtype=np.int32)
    m.fill_next_token_bitmask(bitmask)
    assert np.flatnonzero(mask_bits(bitmask[0].view(np.uint32))).tolist() == [eos]  # terminated: EOS only
    # ... and consistently with that mask, EOS is accepted again (padding of a finished batch
    # row) without changing anything, while every other token is refused.
    accepted = m.num_accepted_tokens
    assert m.accept_token(eos) and m.is_terminated() and m.num_accepted_tokens == accepted
    assert not m.accept_token(false_ids[0]) and m.num_accepted_tokens == accepted
    m.reset()
    assert m.state == guide.initial_state and m.num_accepted_tokens == 0 and not m.is_terminated()
    # rollback to the start is allowed, one more is not
    m.accept_tokens(true_ids)
    m.rollback(len(true_ids))
    assert m.state == guide.initial_state


def test_matcher_state_follows_next_state(mistral):
    o = mistral.oracle
    guide = mistral.guide(SIMPLE)
    m = guide.matcher()
    state = guide.initial_state
    ids = o.canonical("qzx")  # rare letters: several tokens
    assert len(ids) >= 2
    for t in ids:
        state = guide.next_state(state, t)
        assert m.accept_token(t) and m.state == state
        assert np.array_equal(m.allowed_tokens(), guide.allowed_tokens(state))


# -- bitmask helpers -------------------------------------------------------------------------------


def test_fill_and_apply_numpy(pt, mistral):
    guide = mistral.guide(BOOLEAN)
    V = guide.vocab_size
    bitmask = pt.allocate_token_bitmask(3, V)
    assert bitmask.dtype == np.int32 and bitmask.shape == (3, math.ceil(V / 32))
    before = bitmask.copy()
    m = guide.matcher()
    pt.fill_next_token_bitmask(m, bitmask, index=1)
    assert np.array_equal(bitmask[1].view(np.uint32), guide.mask(guide.initial_state))
    assert np.array_equal(bitmask[0], before[0]) and np.array_equal(bitmask[2], before[2])
    # the method on the matcher writes the same row
    other = np.zeros_like(bitmask)
    m.fill_next_token_bitmask(other, 2)
    assert np.array_equal(other[2], bitmask[1]) and not other[:2].any()

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, V)).astype(np.float32)
    original = logits.copy()
    pt.apply_token_bitmask_inplace(logits, bitmask)
    allowed = guide.allowed_tokens(guide.initial_state)
    row = logits[1]
    assert np.array_equal(np.flatnonzero(np.isfinite(row)), allowed)
    assert np.array_equal(row[allowed], original[1][allowed])
    assert np.isneginf(np.delete(row, allowed)).all()
    # a freshly allocated row allows everything
    if (before[0] == -1).all():
        assert np.array_equal(logits[0], original[0])


def test_fill_and_apply_torch(pt, mistral):
    torch = pytest.importorskip("torch")
    guide = mistral.guide(BOOLEAN)
    V = guide.vocab_size
    bitmask = torch.zeros((2, math.ceil(V / 32)), dtype=torch.int32)
    pt.fill_next_token_bitmask(guide.matcher(), bitmask, index=0)
    assert np.array_equal(bitmask[0].numpy().view(np.uint32), guide.mask(guide.initial_state))
    logits = torch.randn(2, V)
    pt.apply_token_bitmask_inplace(logits, bitmask)
    allowed = guide.allowed_tokens(guide.initial_state)
    assert np.array_equal(np.flatnonzero(torch.isfinite(logits[0]).numpy()), allowed)
    assert torch.isneginf(logits[1]).all()  # an all-zero row allows nothing


# -- padding past the tokenizer --------------------------------------------------------------------


def test_vocab_size_padding(pt, mistral):
    padded = pt.Vocabulary.from_file(str(tokenizer_path("mistral7b")), vocab_size=32064)
    assert padded.vocab_size == 32064 and padded.num_tokens == 32000
    guide = pt.Compiler(padded).compile_regex(SIMPLE)
    plain = mistral.guide(SIMPLE)
    assert guide.vocab_size == 32064
    assert guide.mask(guide.initial_state).shape == (1002,)  # 32064 / 32
    assert plain.mask(plain.initial_state).shape == (1000,)
    # same allowed tokens, the padding ids are never allowed
    assert np.array_equal(guide.allowed_tokens(guide.initial_state), plain.allowed_tokens(plain.initial_state))
    for s in reachable_states(guide, limit=200):
        assert not mask_bits(guide.mask(s))[32000:].any()
    with pytest.raises(ValueError, match="32010"):
        guide.next_state(guide.initial_state, 32010)
    m = guide.matcher()
    try:  # a padding id is either "not allowed" or "out of range"; never accepted
        assert m.accept_token(32010) is False
    except ValueError as e:
        assert "32010" in str(e)
    bitmask = pt.allocate_token_bitmask(1, 32064)
    assert bitmask.shape == (1, 1002)
    m.fill_next_token_bitmask(bitmask)
    assert not mask_bits(bitmask[0].view(np.uint32))[32000:].any()
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(np.zeros((1, 1000), dtype=np.int32))
