"""Bad input: every error is the documented type and its message names the problem."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from oracle import tokenizer_path
from synthetic import MergeTableBPE, no_eos_tokenizer_json

SIMPLE = "[a-z]{1,3}"


@pytest.fixture(scope="module")
def small(pt):
    """A synthetic tokenizer: cheap to build, so limits can be tried with fresh Compilers."""
    bpe = MergeTableBPE("abcd", [("a", "b"), ("c", "d"), ("ab", "cd")])
    vocab = pt.Vocabulary.from_json(bpe.to_json())
    return bpe, vocab, pt.Compiler(vocab)


# -- regexes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, fragment",
    [
        ("(", r"(?i)unclosed|unbalanced|group|parenthes|syntax|parse"),
        ("a{3,2}", r"(?i)repetition|range|invalid|syntax|parse"),
        ("[z-a]", r"(?i)range|class|invalid|syntax|parse"),
        ("(?=a)", r"(?i)look-?around|look-?ahead"),
        ("(?<!a)b", r"(?i)look-?around|look-?behind"),
        (r"(a)\1", r"(?i)back-?reference"),
    ],
)
def test_invalid_or_unsupported_regex(mistral, pt, pattern, fragment):
    with pytest.raises(ValueError, match=fragment):
        mistral.compiler.compile_regex(pattern)
    with pytest.raises(ValueError, match=fragment):
        pt.ByteDfa(pattern)


@pytest.mark.parametrize("pattern", [r"[^\s\S]", r"[a&&b]", r"a[^\s\S]b", r"(?:[a&&b])+"])
def test_empty_language(mistral, pt, pattern):
    # regex-syntax accepts an empty class (it matches nothing), so these parse but no string
    # matches them
    with pytest.raises(ValueError, match=r"(?i)empty"):
        pt.ByteDfa(pattern)
    for method in ("cartesian", "agnostic"):
        with pytest.raises(ValueError, match=r"(?i)empty"):
            mistral.compiler.compile_regex(pattern, method=method)


def test_language_of_the_empty_string_is_not_empty(mistral, pt):
    # a{0}b{0} matches exactly "" (not nothing): canonical("") = [], so the guide accepts only
    # the empty sequence, i.e. EOS right away.
    dfa = pt.ByteDfa("a{0}b{0}")
    assert dfa.matches(b"") and not dfa.matches(b"a")
    guide = mistral.compiler.compile_regex("a{0}b{0}")
    assert guide.is_final(guide.initial_state)
    assert guide.allowed_tokens(guide.initial_state).tolist() == sorted(guide.eos_token_ids)
    assert guide.count_sequences() == 1


def test_unknown_method(mistral):
    with pytest.raises(ValueError, match=r"(?i)method.*bogus|bogus.*method"):
        mistral.compiler.compile_regex(SIMPLE, method="bogus")


# -- tokenizer.json ----------------------------------------------------------------------------------


def test_not_json(pt):
    with pytest.raises(ValueError, match=r"(?i)json"):
        pt.Vocabulary.from_json("this is { not json")


def test_json_without_model(pt):
    with pytest.raises(ValueError, match=r"(?i)model"):
        pt.Vocabulary.from_json(json.dumps({"version": "1.0", "added_tokens": []}))


def test_token_id_used_twice(pt, small):
    """Two vocab strings with one id: the tokenizer.json is ambiguous, so it is refused."""
    bpe, _, _ = small
    doc = json.loads(bpe.to_json())
    vocab = doc["model"]["vocab"]
    vocab["dup"] = vocab["a"]
    with pytest.raises(ValueError, match=r"token id \d+ is used twice"):
        pt.Vocabulary.from_json(json.dumps(doc))


def test_merge_of_unknown_tokens(pt, small):
    bpe, _, _ = small
    doc = json.loads(bpe.to_json())
    doc["model"]["merges"].append("zz qq")
    with pytest.raises(ValueError, match=r"(?i)merge"):
        pt.Vocabulary.from_json(json.dumps(doc))


def test_missing_file(pt, tmp_path):
    with pytest.raises((ValueError, OSError), match=r"(?i)no such file|not found|does-not-exist"):
        pt.Vocabulary.from_file(str(tmp_path / "does-not-exist.json"))


def test_wordpiece_components_refused_by_name(pt):
    """A WordPiece tokenizer whose pre-tokenizer or normalizer canonical guides do not model is
    refused for them, naming the component; agnostic guides still work."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "[SEP]": 1, "a": 2, "##b": 3}
    tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.add_special_tokens(["[UNK]", "[SEP]"])
    for component, value in [("pre_tokenizer", tokenizers.pre_tokenizers.Whitespace()),
                              ("normalizer", tokenizers.normalizers.NFD())]:
        setattr(tok, component, value)
        v = pt.Vocabulary.from_json(tok.to_str())
        assert v.kind == "wordpiece"
        name = type(value).__name__
        assert name in (v.canonical_unsupported_reason or ""), v.canonical_unsupported_reason
        with pytest.raises(NotImplementedError, match=name):
            pt.Compiler(v).compile_regex("ab")
        guide = pt.Compiler(v).compile_regex("ab", method="agnostic")
        assert guide.allowed_tokens(guide.initial_state).tolist() == [2]


def test_unigram_refused_by_name_for_canonical_guides(pt):
    """A Unigram tokenizer (T5, XLNet-style SentencePiece: none in the corpus) is refused for
    canonical guides with an error naming the model and why; agnostic guides work."""
    tokenizers = pytest.importorskip("tokenizers")
    pieces = [("<unk>", 0.0), ("</s>", 0.0), ("a", -1.0), ("b", -1.5), ("ab", -2.0)]
    tok = tokenizers.Tokenizer(tokenizers.models.Unigram(pieces, unk_id=0))
    tok.add_special_tokens(["<unk>", "</s>"])
    v = pt.Vocabulary.from_json(tok.to_str())
    assert v.kind == "unigram"
    assert "Unigram" in (v.canonical_unsupported_reason or ""), v.canonical_unsupported_reason
    for method in ("cartesian", "direct", "auto"):
        with pytest.raises(NotImplementedError, match="Unigram"):
            pt.Compiler(v).compile_regex("ab", method=method)
    guide = pt.Compiler(v).compile_regex("ab", method="agnostic")
    assert guide.allowed_tokens(guide.initial_state).tolist() == [2, 4]


def test_eos_missing(pt):
    text = no_eos_tokenizer_json()
    with pytest.raises(ValueError, match=r"(?i)eos"):
        pt.Vocabulary.from_json(text)
    vocab = pt.Vocabulary.from_json(text, eos_token_ids=[0])  # an explicit EOS is accepted
    assert vocab.eos_token_ids == [0]


def test_eos_out_of_range(pt):
    bpe = MergeTableBPE("ab", [("a", "b")])
    with pytest.raises(ValueError, match=r"(?i)eos|out of range|range|1000"):
        pt.Vocabulary.from_json(bpe.to_json(), eos_token_ids=[1000])


def test_vocab_size_smaller_than_tokenizer(pt):
    path = str(tokenizer_path("mistral7b"))
    with pytest.raises(ValueError, match=r"(?i)vocab_size"):
        pt.Vocabulary.from_file(path, vocab_size=31999)


# -- guide and matcher ------------------------------------------------------------------------------


def test_next_state_out_of_range_names_the_token(mistral):
    guide = mistral.guide(SIMPLE)
    bad = guide.vocab_size + 5
    with pytest.raises(ValueError, match=str(bad)):
        guide.next_state(guide.initial_state, bad)
    with pytest.raises((ValueError, OverflowError)):
        guide.next_state(guide.initial_state, -1)


def test_next_state_disallowed_names_the_token(mistral):
    o = mistral.oracle
    guide = mistral.guide(SIMPLE)
    digit = o.canonical("7")[0]  # "7" is not in [a-z]{1,8}
    assert digit not in guide.allowed_tokens(guide.initial_state).tolist()
    with pytest.raises(ValueError, match=rf"\b{digit}\b"):
        guide.next_state(guide.initial_state, digit)


def test_bad_state(mistral):
    guide = mistral.guide(SIMPLE)
    with pytest.raises((ValueError, IndexError), match=str(guide.num_states + 3)):
        guide.allowed_tokens(guide.num_states + 3)
    with pytest.raises((ValueError, IndexError)):
        guide.mask(guide.num_states)


def test_token_bytes_out_of_range(mistral):
    with pytest.raises(ValueError, match="32000"):
        mistral.vocab.token_bytes(32000)


def test_matcher_refusals(mistral):
    o = mistral.oracle
    guide = mistral.guide(SIMPLE)
    m = guide.matcher()
    digit = o.canonical("7")[0]
    assert m.accept_token(digit) is False
    assert m.state == guide.initial_state and m.num_accepted_tokens == 0
    with pytest.raises(ValueError, match=str(guide.vocab_size + 1)):
        m.accept_token(guide.vocab_size + 1)
    assert m.accept_tokens(o.canonical("abc")) is True
    with pytest.raises(ValueError, match=r"(?i)rollback|accepted|only|past"):
        m.rollback(len(o.canonical("abc")) + 1)
    assert m.num_accepted_tokens == len(o.canonical("abc"))  # a refused rollback changes nothing
    # accept_tokens stops at the first refused token
    m.reset()
    assert m.accept_tokens([o.canonical("ab")[0], digit, o.canonical("ab")[0]]) is False
    assert m.num_accepted_tokens == 1


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda w: np.zeros((1, w + 1), dtype=np.int32), r"(?i)shape|words|width|columns"),
        (lambda w: np.zeros((1, w - 1), dtype=np.int32), r"(?i)shape|words|width|columns"),
        (lambda w: np.zeros((1, w), dtype=np.int64), r"(?i)dtype|int32"),
        (lambda w: np.zeros((1, w), dtype=np.float32), r"(?i)dtype|int32"),
        (lambda w: np.zeros((1, 2 * w), dtype=np.int32)[:, ::2], r"(?i)contiguous"),
        (lambda w: np.zeros((w, 3), dtype=np.int32).T, r"(?i)contiguous"),
        (lambda w: np.zeros((1, 1, w), dtype=np.int32), r"(?i)shape|dimension|2-?d"),
        (lambda w: np.broadcast_to(np.zeros(w, dtype=np.int32), (1, w)), r"(?i)writeable|read-only"),
        (lambda w: np.frombuffer(bytearray(4 * w + 1), dtype=np.int32, offset=1).reshape(1, w), r"(?i)aligned"),
    ],
)
def test_bad_bitmask(mistral, pt, make, fragment):
    guide = mistral.guide(SIMPLE)
    words = (guide.vocab_size + 31) // 32
    m = guide.matcher()
    bitmask = make(words)
    with pytest.raises(ValueError, match=fragment):
        m.fill_next_token_bitmask(bitmask)
    with pytest.raises(ValueError, match=fragment):
        pt.fill_next_token_bitmask(m, bitmask)


def test_bitmask_row_out_of_range(mistral, pt):
    guide = mistral.guide(SIMPLE)
    bitmask = pt.allocate_token_bitmask(2, guide.vocab_size)
    with pytest.raises((ValueError, IndexError), match="2"):
        guide.matcher().fill_next_token_bitmask(bitmask, 2)
    with pytest.raises((ValueError, IndexError), match="2"):
        pt.fill_next_token_bitmask(guide.matcher(), bitmask, 2)


# -- limits -------------------------------------------------------------------------------------------


def test_byte_dfa_limit(pt, small):
    _, vocab, _ = small
    with pytest.raises(pt.LimitExceeded, match=r"max_byte_dfa_states") as exc:
        pt.Compiler(vocab, max_byte_dfa_states=10).compile_regex("[abcd]{50}")
    assert isinstance(exc.value, pt.PropertokError)
    assert "10" in str(exc.value)
    with pytest.raises(pt.LimitExceeded, match=r"(?i)max_states|states"):
        pt.ByteDfa("[abcd]{50}", max_states=10)
    # the same regex under the default limit is fine
    assert pt.ByteDfa("[abcd]{50}").matches(b"a" * 50)


def test_product_limit(pt, small):
    bpe, vocab, _ = small
    with pytest.raises(pt.LimitExceeded, match=r"max_product_states") as exc:
        pt.Compiler(vocab, max_product_states=5).compile_regex("[abcd]{20}", lazy=False)
    assert "5" in str(exc.value)
    guide = pt.Compiler(vocab).compile_regex("[abcd]{20}", lazy=False)  # default limit: fine
    assert guide.num_states > 5


def test_limit_on_exponential_dfa():
    """(a|b)*a(a|b){20} needs about 2**21 DFA states (the 21st symbol from the end must be
    remembered), past the default max_byte_dfa_states of 250,000: LimitExceeded, and in bounded
    time (run in a subprocess under a hang guard, PROPERTOK_HANG_GUARD_S, default 240 s)."""
    code = (
        "import propertok as pt\n"
        "try:\n"
        "    pt.ByteDfa('(a|b)*a(a|b){20}')\n"
        "except pt.LimitExceeded as e:\n"
        "    print('LimitExceeded:', e)\n"
    )
    guard = float(os.environ.get("PROPERTOK_HANG_GUARD_S", "240"))
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=guard)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ByteDfa('(a|b)*a(a|b){{20}}') neither built nor raised LimitExceeded within {guard:.0f} s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"LimitExceeded: .*max_byte_dfa_states|LimitExceeded: .*max_states", proc.stdout), proc.stdout


@pytest.mark.parametrize("value", [-0.001, float("nan"), float("inf")])
def test_prefetch_seconds_must_be_finite_and_non_negative(pt, mistral, value):
    with pytest.raises(ValueError, match=r"prefetch_seconds must be a finite, non-negative number"):
        pt.Compiler(mistral.vocab, prefetch_seconds=value)


def test_compile_time_limit(pt, mistral):
    """A compile past max_compile_seconds stops with LimitExceeded naming the limit and the
    stage it was in; the same regex compiles without the limit."""
    vocab = mistral.vocab
    pattern = '"[^"]{0,30}"'  # ~280k product states: far more than 1 ms of search
    compiler = pt.Compiler(vocab, max_compile_seconds=0.001)
    compiler.tokenizer_dfa_stats()  # builds the tokenizer DFA, which is never charged to a compile
    with pytest.raises(pt.LimitExceeded, match=r"max_compile_seconds = 0\.001 .*(byte DFA|CartesianMerge)") as exc:
        compiler.compile_regex(pattern, lazy=False)
    assert isinstance(exc.value, pt.PropertokError)
    # A lazy compile (the default) is checked too, here right after the regex's automaton.
    with pytest.raises(pt.LimitExceeded, match=r"max_compile_seconds = 0 .*the regex's automaton"):
        pt.Compiler(vocab, max_compile_seconds=0.0).compile_regex(pattern)
    with pytest.raises(pt.LimitExceeded, match=r"max_compile_seconds"):
        pt.Compiler(vocab, max_compile_seconds=0.0).compile_regex(pattern, method="agnostic")
    unlimited = mistral.compiler.compile_regex('"[^"]{0,3}"')
    assert pt.Compiler(vocab, max_compile_seconds=None).compile_regex('"[^"]{0,3}"').first_difference(unlimited) is None


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_compile_time_limit_must_be_a_duration(pt, small, bad):
    _, vocab, _ = small
    with pytest.raises(ValueError, match="max_compile_seconds"):
        pt.Compiler(vocab, max_compile_seconds=bad)


def test_guide_memory_limit(pt, mistral):
    """max_guide_bytes bounds the estimated size of a guide's tables: one mask of vocab/8 bytes
    per byte state reached plus ~48 bytes per product state."""
    vocab = mistral.vocab
    # A 40-character literal has ~40 byte states, each a 4,000-byte mask for 32,000 tokens.
    pattern = "x" * 40
    with pytest.raises(pt.LimitExceeded, match=r"max_guide_bytes = 50000 .*byte-state masks") as exc:
        pt.Compiler(vocab, max_guide_bytes=50_000).compile_regex(pattern, lazy=False)
    assert isinstance(exc.value, pt.PropertokError)
    with pytest.raises(pt.LimitExceeded, match=r"max_guide_bytes"):
        pt.Compiler(vocab, max_guide_bytes=50_000).compile_regex(pattern, method="agnostic")
    assert pt.Compiler(vocab, max_guide_bytes=1_000_000).compile_regex(pattern).num_states > 0


def test_mask_cache_budget_changes_cost_not_results(pt, mistral):
    """With max_mask_cache_bytes=0 nothing is cached, and every mask, bitmask and step is the
    same as with the default cache."""
    pattern = r'\{"name": "[A-Za-z ]{1,12}", "age": [0-9]{1,3}\}'
    cached = mistral.compiler.compile_regex(pattern)
    uncached = pt.Compiler(mistral.vocab, max_mask_cache_bytes=0).compile_regex(pattern)
    assert uncached.stats()["max_mask_cache_bytes"] == 0
    words = (mistral.vocab.vocab_size + 31) // 32
    for seed in range(5):
        walk = cached.random_walk(seed)
        a, b = cached.matcher(), uncached.matcher()
        for token in walk:
            assert np.array_equal(a.allowed_tokens(), b.allowed_tokens())
            bits_a, bits_b = np.zeros((1, words), np.int32), np.zeros((1, words), np.int32)
            a.fill_next_token_bitmask(bits_a)
            b.fill_next_token_bitmask(bits_b)
            assert np.array_equal(bits_a, bits_b)
            assert a.accept_token(token) and b.accept_token(token)
        for state in range(min(cached.num_states, 50)):
            assert np.array_equal(cached.mask(state), uncached.mask(state))
    assert uncached.stats()["mask_cache_bytes"] == 0
    assert cached.stats()["mask_cache_bytes"] > 0
    assert cached.stats()["mask_cache_bytes"] <= cached.stats()["max_mask_cache_bytes"]
