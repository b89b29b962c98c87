"""Guides and the tokenizer DFA survive a round trip through bytes; bad bytes are refused."""

from __future__ import annotations

import pickle

import pytest
from oracle import needs_shared

# Small enough that `first_difference` (which walks every transition of the product of two
# guides) stays well under a second: `{1,12}` here would mean 71,000 states and 628 M transitions.
REGEX = r'\{"name": "[A-Za-zé中 ]{1,3}", "age": [0-9]{1,3}\}'


@pytest.mark.parametrize("method", ["agnostic", "cartesian", "direct"])
def test_guide_round_trip(pt, mistral, method):
    regex = REGEX if method != "direct" else r"(yes|no|maybe)[.!?]"
    # cartesian: the lazy guide, saved through its eager guide
    guide = mistral.compiler.compile_regex(regex, method=method, lazy=True if method == "cartesian" else None)
    if guide.is_lazy:
        with pytest.raises(NotImplementedError, match=r"materialize\(\)"):
            guide.to_bytes()
        guide = guide.materialize()
        assert not guide.is_lazy
    data = guide.to_bytes()
    back = mistral.compiler.guide_from_bytes(data)
    assert back.method == guide.method and back.num_states == guide.num_states
    assert guide.first_difference(back) is None
    # A fresh compiler for the same tokenizer loads it too (the tokenizer DFA is rebuilt/shared).
    assert pt.Compiler(mistral.vocab).guide_from_bytes(data).first_difference(guide) is None


@needs_shared("the Llama 2 tokenizer")
def test_bad_guide_bytes_are_refused(mistral, llama2):
    data = mistral.compiler.compile_regex(REGEX, lazy=False).to_bytes()
    for cut in (0, 20, len(data) // 2, len(data) - 1):
        with pytest.raises(ValueError, match="(?i)invalid|truncated"):
            mistral.compiler.guide_from_bytes(data[:cut])
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF
    with pytest.raises(ValueError, match="(?i)checksum"):
        mistral.compiler.guide_from_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="(?i)different tokenizer"):
        llama2.compiler.guide_from_bytes(data)


def test_guide_pickle_says_what_to_do(mistral):
    guide = mistral.compiler.compile_regex(REGEX)
    with pytest.raises(TypeError, match="to_bytes"):
        pickle.dumps(guide)


def test_tokenizer_dfa_cache(pt, mistral, tmp_path):
    first = pt.Compiler(mistral.vocab, cache_dir=str(tmp_path))
    stats = first.tokenizer_dfa_stats()
    assert stats["cache"] == "miss"
    files = list(tmp_path.glob("tokenizer-dfa-*.bin"))
    assert len(files) == 1
    second = pt.Compiler(mistral.vocab, cache_dir=str(tmp_path))
    loaded = second.tokenizer_dfa_stats()
    assert loaded["cache"] == "hit"
    for key in ("num_classes", "num_emittable_tokens", "num_forbidden_pairs"):
        assert loaded[key] == stats[key]
    a = first.compile_regex(REGEX)
    b = second.compile_regex(REGEX)
    assert a.first_difference(b) is None
    # A corrupted or truncated cache file is rebuilt, not trusted. It is replaced by renaming a
    # new file over it, as propertok's own writes do: `second` still maps the old one, whose
    # bytes must not change in place (see `forbidden_sets` in the Rust crate).
    raw = files[0].read_bytes()
    for damaged in (raw[: len(raw) // 2] + bytes([raw[len(raw) // 2] ^ 0x01]) + raw[len(raw) // 2 + 1 :], raw[:-8]):
        tmp = tmp_path / "damaged.tmp"
        tmp.write_bytes(damaged)
        tmp.replace(files[0])
        third = pt.Compiler(mistral.vocab, cache_dir=str(tmp_path))
        assert third.tokenizer_dfa_stats()["cache"] == "miss"
        assert third.compile_regex(REGEX).first_difference(a) is None
    assert second.compile_regex(REGEX).first_difference(b) is None
