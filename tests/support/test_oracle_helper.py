"""Tests of the test helpers themselves: the oracle (against the raw tokenizers), the synthetic
merge-table tokenizers and the data loading. None of them needs propertok."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from tokenizers import Tokenizer

from workloads import expected_rejection, jsonschemabench_sample, regex_suite
from oracle import Oracle, gpt2_bytes_to_unicode, manifest, oracle_for, tokenizer_path
from synthetic import MergeTableBPE, SyntheticOracle, all_strings
from strategies import merge_tables

from oracle import require_shared  # noqa: E402

require_shared("real tokenizers and workloads")

SENTENCEPIECE = ["mistral7b", "llama2"]
BYTE_LEVEL = ["gpt2", "llama3", "qwen2", "cl100k"]
# the tokenizers the propertok tests use, plus deepseek-coder for its byte-level added tokens
# (every BPE tokenizer of MANIFEST.json passed this check once; 7 keep CI time down)
DECODER_CHECKED = SENTENCEPIECE + BYTE_LEVEL + ["deepseek-coder"]
assert set(DECODER_CHECKED) <= {m["slug"] for m in manifest() if m["model_type"] == "BPE"}

TEXTS = [
    "hello world",
    "boolean: true",
    "The quick brown fox jumps over the lazy dog.",
    '{"name": "Ada", "age": 36, "tags": ["x", "y"]}',
    "def f(x):\n    return x ** 2\n",
    "tab\tand  two spaces,   three",
    "naïve café — 𝔘nicode ✓ 日本語 Ελληνικά",
    "numbers 1234567 3.14159 -0.5e10",
    "</s><s><unk> are plain text here",
    "emoji 🧿🙂 and 👩‍👩‍👧",
]


# --------------------------------------------------------------------------------------------
# continuation semantics of SentencePiece tokenizers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SENTENCEPIECE)
def test_continuation_differs_from_default_only_by_the_prepended_space(name):
    o = oracle_for(name)
    for s in TEXTS:
        # The default normalizer maps s -> "▁" + s.replace(" ", "▁"); ours (Prepend removed) maps
        # " " + s -> "▁" + s.replace(" ", "▁"): the same normalized text, hence the same ids.
        assert o.canonical(" " + s) == o.default_encode(s), s
        # As a continuation nothing is prepended: the ids decode to exactly s.
        assert o.decode(o.canonical(s)) == s.encode("utf-8"), s
        assert o.decode(o.default_encode(s)) == b" " + s.encode("utf-8"), s
    # hello world: the default encoding starts with a token for " hello..." (a leading space),
    # the continuation one does not, and its second word keeps its space ("▁world").
    ids = o.canonical("hello world")
    assert not o.token_bytes(ids[0]).startswith(b" ")
    assert o.token_bytes(o.default_encode("hello world")[0]).startswith(b" ")
    assert ids[-1] == o.token_id("\u2581world")


@pytest.mark.parametrize("name", SENTENCEPIECE)
def test_byte_fallback_on_a_rare_character(name):
    o = oracle_for(name)
    rare = "\U0001F9FF"  # NAZAR AMULET: not a piece of either vocabulary
    assert rare not in o.doc["model"]["vocab"]
    # byte_fallback: a character missing from the vocabulary becomes its UTF-8 bytes as <0xNN>.
    expected = [o.token_id(f"<0x{b:02X}>") for b in rare.encode("utf-8")]
    assert o.canonical(rare) == expected
    assert o.decode(expected) == rare.encode("utf-8")
    assert o.representable(rare)
    # a lone leading byte is not valid UTF-8, so it is not a canonical sequence on its own
    assert not o.is_canonical(expected[:1])
    assert o.is_canonical(expected)


@pytest.mark.parametrize("name", SENTENCEPIECE + BYTE_LEVEL)
def test_special_token_text_is_plain_text(name):
    o = oracle_for(name)
    raw = Tokenizer.from_file(str(tokenizer_path(name)))
    for sid in o.special_ids:
        text = o.token_bytes(sid).decode("utf-8")
        # (the library's runtime id, which differs from the JSON's for cl100k, see below)
        runtime_id = raw.token_to_id(text)
        # a tokenizer left with encode_special_tokens=False matches the special token in raw text
        assert raw.encode(text, add_special_tokens=False).ids == [runtime_id]
        ids = o.canonical(text)
        assert runtime_id not in ids and sid not in ids, (text, ids)
        assert o.decode(ids) == text.encode("utf-8")


def test_metaspace_symbol_is_not_representable_in_sentencepiece():
    # Replace(" ", "▁") also turns a literal "▁" into the space piece, which decodes to b" ":
    # such a string cannot be produced by the model, hence "not representable".
    o = oracle_for("mistral7b")
    assert not o.representable("a\u2581b")
    assert o.representable("a b")


# --------------------------------------------------------------------------------------------
# token bytes, decode, representable, is_canonical
# --------------------------------------------------------------------------------------------


def test_gpt2_byte_table_is_a_bijection():
    table = gpt2_bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "\u0120" and table[ord("\n")] == "\u010a" and table[ord("a")] == "a"


@pytest.mark.parametrize("name", DECODER_CHECKED)
def test_token_bytes_agree_with_the_tokenizers_decoder(name):
    """Every model token that decodes to valid UTF-8 must decode to the same text through our byte
    table as through the tokenizer's own decoder. Each token is decoded after an "a" token so that
    decoder steps acting on the start of the output (SentencePiece's Strip of one leading space,
    claude-legacy's add_prefix_space) cannot hide a difference."""
    o = oracle_for(name)
    raw = Tokenizer.from_file(str(tokenizer_path(name)))
    anchor = raw.token_to_id("a")
    assert anchor is not None and o.token_bytes(anchor) == b"a"
    # Special tokens are left out: the library renumbers cl100k's (the declared ids have gaps).
    ids = [t for t in range(o.num_tokens) if o.has_token(t) and t not in set(o.special_ids)]
    decoded = raw.decode_batch([[anchor, t] for t in ids], skip_special_tokens=False)
    compared = 0
    mismatches = []
    for t, text in zip(ids, decoded):
        try:
            ours = o.token_bytes(t).decode("utf-8")
        except UnicodeDecodeError:
            continue  # a partial UTF-8 piece: the decoder shows U+FFFD
        compared += 1
        if text != "a" + ours:
            mismatches.append((t, text, ours))
    print(f"{name}: {compared} of {len(ids)} token strings compared with the decoder, {len(mismatches)} differ")
    assert compared > 0.9 * len(ids)
    assert not mismatches, mismatches[:10]


@pytest.mark.parametrize("name", SENTENCEPIECE + BYTE_LEVEL)
def test_canonical_round_trips(name):
    o = oracle_for(name)
    for s in TEXTS:
        ids = o.canonical(s)
        assert o.representable(s), s
        assert o.is_canonical(ids)
        # another split of the same text (each character tokenized alone) is not canonical
        # whenever it differs: tokenization is a function of the text
        split = [t for ch in s for t in o.canonical(ch)]
        assert o.decode(split) == s.encode("utf-8")
        if split != ids:
            assert not o.is_canonical(split), s


def test_normalizer_makes_strings_unrepresentable():
    # Qwen2 normalizes with NFC: "e" + COMBINING ACUTE becomes "é", so the decoded bytes differ.
    assert not oracle_for("qwen2").representable("e\u0301")
    assert oracle_for("qwen2").representable("\u00e9")
    # Mistral has no Unicode normalizer: the decomposed form survives.
    assert oracle_for("mistral7b").representable("e\u0301")


def test_is_canonical_rejects_invalid_utf8_and_unknown_ids():
    o = oracle_for("mistral7b")
    assert not o.is_canonical([o.token_id("<0xF0>")])
    assert o.is_canonical([])
    assert o.is_canonical_batch([[o.token_id("<0xF0>")], o.canonical("ok")]) == [False, True]


def test_oracle_from_synthetic_json_is_plain():
    bpe = MergeTableBPE("abc", [("a", "b"), ("ab", "c")])
    o = Oracle(bpe.to_json(), name="synthetic")
    assert o.family == "plain"
    assert o.canonical("abcab") == [bpe.vocab["abc"], bpe.vocab["ab"]]
    assert o.token_bytes(bpe.eos_id) == b"</s>"


# --------------------------------------------------------------------------------------------
# the plain-Python merge-table BPE against the real library
# --------------------------------------------------------------------------------------------


def test_blog_table_1_example():
    # Table 1 of the blog: merges [(a,b), (a,a), (a,c)] turn "aaaabaacac" into
    # aa a ab aa c ac (worked by hand in the post).
    bpe = MergeTableBPE("abc", [("a", "b"), ("a", "a"), ("a", "c")])
    expected = [bpe.vocab[p] for p in ["aa", "a", "ab", "aa", "c", "ac"]]
    assert bpe.encode("aaaabaacac") == expected
    assert bpe.encode_sequential("aaaabaacac") == expected
    assert SyntheticOracle(bpe).canonical("aaaabaacac") == expected


def test_out_of_order_merge_follows_priority():
    # ("b","cd") has rank 0 but "cd" only exists after ("c","d") (rank 1). Hugging Face merges by
    # priority among the pairs present: b c d -> b cd (only pair with a merge) -> bcd (rank 0).
    # Applying merges one after the other ("b","cd") first finds nothing and stops at b cd.
    bpe = MergeTableBPE("bcd", [("b", "cd"), ("c", "d")])
    assert not bpe.is_well_ordered()
    real = SyntheticOracle(bpe).canonical("bcd")
    assert real == [bpe.vocab["bcd"]] == bpe.encode("bcd")
    assert bpe.encode_sequential("bcd") == [bpe.vocab["b"], bpe.vocab["cd"]]


def test_unreachable_token_is_not_emittable():
    # (a,b) then (b,c) then (a,bc): in "abc" the pair (a,b) wins (rank 0), leaving ab c with no
    # merge, so "abc" = a + bc can never be produced and its token is never emitted.
    bpe = MergeTableBPE("abc", [("a", "b"), ("b", "c"), ("a", "bc")])
    o = SyntheticOracle(bpe)
    assert bpe.vocab["abc"] not in o.emittable()
    assert {bpe.vocab[p] for p in ["a", "b", "c", "ab", "bc"]} <= o.emittable()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merge_tables())
def test_python_bpe_matches_real_library(table):
    alphabet, merges = table
    bpe = MergeTableBPE(alphabet, merges)
    o = SyntheticOracle(bpe)
    strings = all_strings(alphabet, 5 if len(alphabet) == 4 else 6)
    for s, ids in zip(strings, o.canonical_batch(strings)):
        assert bpe.encode(s) == ids, (table, s)


def test_synthetic_tokenizer_json_shape():
    bpe = MergeTableBPE("abcd", [("b", "cd"), ("c", "d"), ("a", "a")])
    doc = json.loads(bpe.to_json())
    assert doc["model"]["type"] == "BPE"
    assert doc["normalizer"] is None and doc["pre_tokenizer"] is None
    assert doc["added_tokens"] == [
        {"id": bpe.eos_id, "content": "</s>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
    ]


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def test_expected_rejections_match_outlines_core_record():
    """Our hand-made list of the suite's regexes that regex-automata's parser rejects is exactly
    the set outlines-core (built on regex-automata) failed to parse."""
    rows = regex_suite()
    assert len(rows) == 167
    theirs = {r["regex"] for r in rows if r["outlines_core_0_2_14_index"].startswith("error: ValueError: Failed to build DFA")}
    ours = {r["regex"] for r in rows if expected_rejection(r["regex"])}
    assert ours == theirs


def test_jsonschemabench_sample_is_fixed():
    a, b = jsonschemabench_sample(), jsonschemabench_sample()
    assert [r["id"] for r in a] == [r["id"] for r in b]
    assert len(a) == 200
    assert all(r["regex"] and r["regex_len"] <= 3000 for r in a)
    assert {r["subset"] for r in a} >= {"Glaiveai2K", "Github_easy"}
    assert len(jsonschemabench_sample(scale=2.0)) == 400


# --------------------------------------------------------------------------------------------
# guide helpers
# --------------------------------------------------------------------------------------------


def test_mask_bits_layout():
    import numpy as np

    from helpers import bit_is_set, mask_bits

    words = np.zeros(3, dtype=np.uint32)
    for t in (0, 31, 33, 95):  # bit t % 32 of word t // 32
        words[t // 32] |= np.uint32(1 << (t % 32))
    assert np.flatnonzero(mask_bits(words)).tolist() == [0, 31, 33, 95]
    assert mask_bits(words, 40).shape == (40,)
    assert bit_is_set(words, 33) and not bit_is_set(words, 32)
    assert np.flatnonzero(mask_bits(words.view(np.int32))).tolist() == [0, 31, 33, 95]


def test_python_re_policy():
    from helpers import python_re_verdict, python_regex

    assert python_regex(r"\p{L}+") is None  # Python has no \p
    assert python_regex(r"[[:alpha:]]+") is None  # a nested set to Rust, a FutureWarning to Python
    assert python_regex(r"[a-z--b]") is None
    assert python_regex(r"\<ab") is None  # a word boundary to Rust, a literal "<" to Python
    p = python_regex(r"\w+")
    assert python_re_verdict(p, r"\w+", "abc_1") is True
    assert python_re_verdict(p, r"\w+", "a-b") is False
    assert python_re_verdict(p, r"\w+", "é") is None  # Unicode tables differ: no verdict
    assert python_re_verdict(p, r"\w+", "a\x1c") is None  # \x1c is \s to Python only
    q = python_regex(r"[^a]+")
    assert python_re_verdict(q, r"[^a]+", "é\x1c") is True  # no Unicode-sensitive construct
