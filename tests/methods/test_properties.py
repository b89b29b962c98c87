"""Hypothesis property tests at the Python level, on the real Mistral-7B tokenizer:

* random regexes from a small grammar (literals with spaces, digits, punctuation, accents, CJK,
  classes, alternation, optional / star / plus / counted repetition): every compiled canonical
  guide is sound (random walks decode to a match and re-encode to themselves with the real
  tokenizer) and complete (the real tokenization of sampled matching strings is accepted);
* random token ids, in range and out of it: the matcher and the guide either accept exactly the
  ids the mask allows or raise ``ValueError`` — never crash, never disagree with the mask;
* random API call sequences (a hypothesis state machine over accept / rollback / reset / bitmask
  / forced tokens), checked against a model that is just the list of accepted tokens.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from helpers import bit_is_set, python_re_verdict

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

# Literal pieces chosen to sit near token boundaries of a SentencePiece vocabulary: words with
# and without a leading space, digits, JSON punctuation, accented letters and CJK.
LITERALS = [" the", "the", " a", "ing", "1", "42", "{", '"', '":', ",", " ", "  ", "\n", "é", "café", "中文", "x", "ab"]
CLASSES = ["[a-c]", "[0-9]", "[ a]", "[^\"\\n]", "[éè]", r"\d", "[a-z ]"]


def _escape(s: str) -> str:
    return re.escape(s)


@st.composite
def regexes(draw, depth: int = 0):
    """A regex (Rust and Python syntax agree on every construct drawn)."""
    kind = draw(st.sampled_from(["literal", "class", "concat", "alt", "repeat"] if depth < 3 else ["literal", "class"]))
    if kind == "literal":
        return _escape(draw(st.sampled_from(LITERALS)))
    if kind == "class":
        return draw(st.sampled_from(CLASSES))
    if kind == "concat":
        parts = draw(st.lists(regexes(depth + 1), min_size=2, max_size=3))
        return "".join(f"(?:{p})" for p in parts)
    if kind == "alt":
        parts = draw(st.lists(regexes(depth + 1), min_size=2, max_size=3))
        return "|".join(f"(?:{p})" for p in parts)
    inner = draw(regexes(depth + 1))
    low = draw(st.integers(0, 2))
    op = draw(st.sampled_from(["?", "*", "+", f"{{{low},{low + draw(st.integers(0, 3))}}}"]))
    return f"(?:{inner}){op}"


@PROPERTY_SETTINGS
@given(pattern=regexes(), seed=st.integers(0, 2**32 - 1))
def test_random_regexes_are_sound_and_complete(pt, mistral, pattern, seed):
    oracle = mistral.oracle
    try:
        guide = mistral.guide(pattern)
    except ValueError as e:
        # Only a language with no representable string may be refused.
        assert "empty language" in str(e), (pattern, e)
        return
    compiled = re.compile(pattern)
    byte_dfa = pt.ByteDfa(pattern)
    walks = [guide.random_walk(seed + i, max_tokens=48) for i in range(8)]
    for ids in walks:
        text = oracle.decode(ids).decode("utf-8")
        # Python's verdict where its Unicode tables provably agree with Rust's (\d in Python
        # 3.11 lacks digits added in Unicode 16), regex-automata's elsewhere.
        verdict = python_re_verdict(compiled, pattern, text)
        assert verdict if verdict is not None else byte_dfa.matches(text.encode()), (pattern, ids, text)
        assert oracle.canonical(text) == ids, (pattern, text, ids)
    matcher = guide.matcher()
    for raw in pt.ByteDfa(pattern).sample(8, seed, max_len=40):
        text = raw.decode("utf-8")
        if not oracle.representable(text):
            continue
        matcher.reset()
        ids = oracle.canonical(text)
        assert matcher.accept_tokens(ids) and matcher.is_accepting(), (pattern, text, ids)


@PROPERTY_SETTINGS
@given(ids=st.lists(st.one_of(st.integers(-3, 32_010), st.sampled_from([0, 1, 2, 28705, 31999, 32000])), max_size=30))
def test_random_token_ids_agree_with_the_mask(pt, mistral, ids):
    guide = mistral.guide(r'\{"id": [0-9]{1,4}, "tag": "[a-z]{1,6}"\}')
    vocab_size = mistral.vocab.vocab_size
    matcher = guide.matcher()
    words = (vocab_size + 31) // 32
    bitmask = np.zeros((1, words), np.int32)
    for token in ids:
        state = matcher.state
        if not 0 <= token < vocab_size:
            with pytest.raises((ValueError, OverflowError)):
                matcher.accept_token(token)
            with pytest.raises((ValueError, OverflowError)):
                guide.next_state(state, token)
            assert matcher.state == state
            continue
        matcher.fill_next_token_bitmask(bitmask)
        allowed = bool(bit_is_set(bitmask[0], token))
        assert allowed == (token in set(matcher.allowed_tokens().tolist()))
        terminated = matcher.is_terminated()
        assert matcher.accept_token(token) == allowed
        if not allowed:
            assert matcher.state == state
        if not terminated and token not in mistral.vocab.eos_token_ids:
            if allowed:
                assert guide.next_state(state, token) == matcher.state
            else:
                with pytest.raises(ValueError, match="not allowed"):
                    guide.next_state(state, token)


class MatcherMachine(RuleBasedStateMachine):
    """A matcher driven by random API calls, against a model: the list of accepted tokens."""

    guide = None  # set by the test below (one compiled guide for all runs)
    eos: list[int] = []

    @initialize()
    def start(self):
        self.matcher = self.guide.matcher()
        self.accepted: list[int] = []

    def _replayed_state(self) -> int:
        state = self.guide.initial_state
        for t in self.accepted:
            if t not in self.eos:
                state = self.guide.next_state(state, t)
        return state

    @rule(choice=st.integers(0, 10**6))
    def accept_an_allowed_token(self, choice):
        allowed = self.matcher.allowed_tokens()
        if len(allowed) == 0:
            return
        token = int(allowed[choice % len(allowed)])
        terminated = self.matcher.is_terminated()
        assert self.matcher.accept_token(token)
        if not terminated:  # EOS again after termination is accepted and changes nothing
            self.accepted.append(token)

    @rule(token=st.integers(0, 31_999))
    def accept_any_token(self, token):
        allowed = token in set(self.matcher.allowed_tokens().tolist())
        terminated = self.matcher.is_terminated()
        assert self.matcher.accept_token(token) == allowed
        if allowed and not terminated:
            self.accepted.append(token)

    @rule(n=st.integers(0, 6))
    def rollback(self, n):
        if n > len(self.accepted):
            with pytest.raises(ValueError, match="roll back"):
                self.matcher.rollback(n)
        else:
            self.matcher.rollback(n)
            del self.accepted[len(self.accepted) - n :]

    @rule()
    def reset(self):
        self.matcher.reset()
        self.accepted.clear()

    @precondition(lambda self: not self.matcher.is_terminated())
    @rule()
    def follow_forced_tokens(self):
        forced = self.matcher.forced_tokens()
        before = self.matcher.state
        for t in forced:
            assert self.matcher.allowed_tokens().tolist() in ([t], sorted([t] + [e for e in self.eos if e != t]))
            assert self.matcher.accept_token(t)
            self.accepted.append(t)
        assert forced or before == self.matcher.state

    @invariant()
    def state_matches_the_model(self):
        if not hasattr(self, "matcher"):
            return
        assert self.matcher.num_accepted_tokens == len(self.accepted)
        assert self.matcher.is_terminated() == bool(self.accepted and self.accepted[-1] in self.eos)
        assert self.matcher.state == self._replayed_state()
        words = (self.guide.vocab_size + 31) // 32
        bitmask = np.full((2, words), -1, np.int32)
        self.matcher.fill_next_token_bitmask(bitmask, 1)
        assert (bitmask[0] == -1).all()  # other rows untouched
        ones = np.flatnonzero(np.unpackbits(bitmask[1].view(np.uint8), bitorder="little"))
        assert ones.tolist() == self.matcher.allowed_tokens().tolist()
        if self.matcher.is_terminated():
            assert ones.tolist() == sorted(self.eos)


@pytest.mark.parametrize("method", ["cartesian", "direct"])
def test_random_api_call_sequences(mistral, method):
    MatcherMachine.guide = mistral.guide(r"(true|false|null|[0-9]{1,3}) ?(, )?(yes|no)?", method=method)
    MatcherMachine.eos = list(mistral.vocab.eos_token_ids)
    machine = MatcherMachine.TestCase
    machine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
    machine().runTest()
