"""Byte-level BPE tokenizers (a regex pre-tokenizer splits the text before the merges): the contract.

* GPT-2, Llama 3, Qwen2 and cl100k compile exact canonical guides (``cartesian``, the default):
  complete and sound on a few regexes against the real tokenizer;
* every other shared tokenizer is either exact (and then passes the same small oracle check) or
  refuses canonical methods with a NotImplementedError naming a component it really has
  (pre-tokenizer, normalizer, added tokens, missing bytes, ignore_merges) — DESIGN.md: never
  silently differ;
* the agnostic method works on byte-level tokenizers and stays inside the language.

The thorough checks of byte-level canonical guides are in test_pretokenized.py and
test_oracle_regex.py (``test_oracle_byte_level``).
"""

from __future__ import annotations

import pytest

from helpers import check_walks, python_re_verdict, python_regex, representable_encodings, walk
from oracle import manifest
from pretok_support import (
    COSTLY_TOKENIZER_DFA,
    MAIN_BYTE_LEVEL,
    costly_enabled,
    named_component,
    normalization_form,
    present_components,
)
from regex_checks import complete_candidates

from oracle import require_shared  # noqa: E402

require_shared("the byte-level tokenizers")

BYTE_LEVEL = list(MAIN_BYTE_LEVEL)
REGEXES = [
    r"[a-z]+( [a-z]+){0,4}",
    r'\{"id": (0|[1-9][0-9]{0,4}), "name": "[A-Za-z ]{1,12}"\}',
    r"(true|false|null)",
    r"[0-9]{3}-[0-9]{4}",
    r"\p{Greek}{1,5}|[😀-😎]{1,3}",
]


def check_complete_and_sound(pt, tut, guide, pattern, seed, counts, problems, n=30, max_len=64):
    """complete: canonical(s) of the representable, normalized samples is accepted;
    sound: random walks re-encode to themselves and decode into the language."""
    o = tut.oracle
    form = normalization_form(o)
    dfa = pt.ByteDfa(pattern)
    strings = [b.decode("utf-8") for b in dfa.sample(n, seed, max_len=max_len)]
    for s, ids, required in complete_candidates(o, form, strings, counts):
        if not required:
            continue
        ok, why = walk(guide, ids)
        if not ok:
            problems.append(f"{pattern!r}: canonical({s!r}) = {ids} refused: {why}")
    check_walks(o, guide, pattern, dfa, [seed * 1000 + i for i in range(n)], problems, counts)


@pytest.mark.parametrize("name", BYTE_LEVEL)
def test_main_byte_level_tokenizers_compile_canonical_guides(pt, tokenizer_under_test, name, record_property):
    tut = tokenizer_under_test(name)
    assert tut.vocab.kind == "byte-level-bpe"
    assert tut.vocab.canonical_unsupported_reason is None, tut.vocab.canonical_unsupported_reason
    counts = {"walks": 0, "complete_checked": 0, "unrepresentable": 0}
    problems: list[str] = []
    compiler = tut.fresh_compiler()  # library default limits; its memory goes when the test ends
    for k, pattern in enumerate(REGEXES):
        guide = compiler.compile_regex(pattern)  # cartesian is the default
        assert guide.method == "cartesian"
        check_complete_and_sound(pt, tut, guide, pattern, k + 1, counts, problems)
    print(f"{name} cartesian: {counts}")
    record_property("counts", counts)
    assert counts["complete_checked"] >= 100, counts
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("name", ["gpt2", "qwen2"])
def test_tokens_always_split_never_come_out_of_the_real_tokenizer(tokenizer_under_test, name):
    """``Compiler.tokens_always_split()`` (tokens the merges emit but whose text the pre-tokenizer
    never leaves whole) against the real tokenizer: encoding a listed token's own text never
    gives that token back, while it does for most unlisted tokens (every 97th id), so the check
    can fail. The list is computed once per Compiler; ``tokenizer_dfa_stats`` counts it."""
    tut = tokenizer_under_test(name)
    compiler = tut.compiler
    listed = compiler.tokens_always_split()
    assert listed == sorted(set(listed))
    assert compiler.tokens_always_split() == listed  # the cached answer
    assert compiler.tokenizer_dfa_stats()["num_always_split_tokens"] == len(listed)
    assert listed, "each of these tokenizers has some (GPT-2: the bytes C0, C1, F5-FF)"
    texts = {}
    for t in listed:
        try:
            texts[t] = tut.oracle.decode([t]).decode("utf-8")
        except UnicodeDecodeError:
            pass  # not text on its own (GPT-2's 13 are invalid UTF-8 bytes)
    encoded = tut.oracle.canonical_batch(list(texts.values()))
    whole = [t for (t, s), ids in zip(texts.items(), encoded) if ids == [t]]
    assert not whole, f"{len(whole)} listed tokens come out whole from their own text, e.g. {whole[:5]}"
    listed_set = set(listed)
    others = [t for t in range(0, tut.vocab.vocab_size, 97) if t not in listed_set][:300]
    other_texts = []
    for t in others:
        try:
            other_texts.append((t, tut.oracle.decode([t]).decode("utf-8")))
        except UnicodeDecodeError:
            pass
    back = tut.oracle.canonical_batch([s for _, s in other_texts])
    assert sum(ids == [t] for (t, _), ids in zip(other_texts, back)) > 0.8 * len(other_texts)
    print(f"{name}: {len(listed)} always split, {len(texts)} decodable, checked against the tokenizer")


def test_sentencepiece_canonical_is_supported(mistral, llama2):
    for tut in (mistral, llama2):
        assert tut.vocab.kind == "sentencepiece-bpe"
        assert tut.vocab.canonical_unsupported_reason is None


@pytest.mark.parametrize("name", BYTE_LEVEL)
def test_agnostic_works_and_stays_in_the_language(pt, tokenizer_under_test, name, record_property):
    tut = tokenizer_under_test(name)
    o = tut.oracle
    counts = {"walks": 0, "complete_checked": 0, "unrepresentable": 0}
    problems = []
    for k, pattern in enumerate(REGEXES):
        guide = tut.guide(pattern, method="agnostic")
        assert guide.method == "agnostic"
        dfa = pt.ByteDfa(pattern)
        py = python_regex(pattern)
        for i in range(30):  # sound w.r.t. the byte language
            seq = guide.random_walk(100 * k + i)
            text = o.decode(seq)
            counts["walks"] += 1
            if not dfa.matches(text):
                problems.append(f"{pattern!r}: walk {seq} decodes to {text!r}, outside the language")
                continue
            try:
                verdict = python_re_verdict(py, pattern, text.decode("utf-8"))
            except UnicodeDecodeError:
                problems.append(f"{pattern!r}: walk {seq} decodes to invalid UTF-8 {text!r}")
                continue
            if verdict is False:
                problems.append(f"{pattern!r}: Python re refuses walk text {text!r}")
        # complete: the tokenizer's own encoding of a sample is one of the decodings
        strings = [b.decode("utf-8") for b in dfa.sample(30, k, max_len=64)]
        for s, ids in representable_encodings(o, strings, counts):
            ok, why = walk(guide, ids)
            if not ok:
                problems.append(f"{pattern!r}: agnostic refuses the encoding {ids} of {s!r}: {why}")
    print(f"{name} agnostic: {counts}")
    record_property("counts", counts)
    assert counts["complete_checked"] >= 100
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("name, eos", [("gpt2", [50256]), ("cl100k", [100257])])
def test_default_eos_by_name(tokenizer_under_test, name, eos):
    # gpt2's only special token is <|endoftext|> (id 50256); cl100k's tokenizer.json declares
    # <|endoftext|> with id 100257 (tiktoken's id; the `tokenizers` library renumbers it to
    # 100256 because the declared ids have a gap, but the model's id is the declared one).
    tut = tokenizer_under_test(name)
    assert tut.vocab.eos_token_ids == eos
    assert set(eos) <= set(tut.vocab.special_token_ids)


# Small, so that every exact tokenizer compiles them in seconds (bounded repetitions of "any
# character" multiply a pre-tokenized guide's states: (?s:.{1,12}) has 380,000 on Llama 3).
MINI_REGEXES = [r"[a-z]+( [a-z]+){0,3}", r'\{"k": "[^"\\]*", "n": -?[0-9]{1,4}\}', r"(?s:.{1,4})"]
# The verdicts, pinned: a tokenizer that becomes exact (or refused) must be a deliberate change.
# (DeepSeek V3, DeepSeek Coder and Command-R became exact with added tokens handled as Hugging
# Face handles them; BERT's WordPiece with guides of its own.)
EXPECTED_REFUSED: set = set()


@pytest.mark.parametrize("name", [m["slug"] for m in manifest()])
def test_every_shared_tokenizer_is_exact_or_says_why(pt, tokenizer_under_test, name, record_property):
    """DESIGN.md: where a tokenizer feature makes exactness impossible or not yet done, the library
    must say so. Each shared tokenizer either loads with a ``canonical_unsupported_reason`` (and
    canonical compiles raise NotImplementedError saying which component of a byte-level
    tokenizer is not supported), or is claimed exact, and then a small oracle check (complete and
    sound) must pass on it."""
    entry = next(m for m in manifest() if m["slug"] == name)
    tut = tokenizer_under_test(name)
    try:
        vocab = tut.vocab_any_eos
    except ValueError as e:  # only a model type propertok does not read at all may be refused here
        assert entry["model_type"] != "BPE" and entry["model_type"].lower() in str(e).lower(), str(e)
        assert name in EXPECTED_REFUSED, f"{name} is refused: {e}"
        return
    assert vocab.num_tokens == entry["max_token_id"] + 1
    reason = vocab.canonical_unsupported_reason
    record_property("canonical_unsupported_reason", reason)
    print(f"{name}: kind={vocab.kind}, canonical_unsupported_reason={reason!r}")
    byte_level = vocab.kind == "byte-level-bpe"
    assert byte_level == entry["family"].lower().startswith("byte-level"), (vocab.kind, entry["family"])

    assert (reason is not None) == (name in EXPECTED_REFUSED), f"{name}: {reason!r}; update EXPECTED_REFUSED"
    if vocab.kind == "wordpiece":
        # Its token sequences decode with a space between words, not by concatenating token
        # bytes as the check below does: its oracle is tests/methods/test_word_piece.py.
        return
    if reason is None and name in COSTLY_TOKENIZER_DFA and not costly_enabled():
        print(f"{name}: exact; tokenizer DFA not built ({COSTLY_TOKENIZER_DFA[name]})")
        return
    # wide limits: this is a correctness check (a LimitExceeded here would hide the answer)
    compiler = tut.fresh_compiler(max_product_states=20_000_000, max_compile_seconds=600.0)
    if reason is not None:
        assert reason.strip()
        assert name not in MAIN_BYTE_LEVEL, f"{name} must be supported, but: {reason}"
        with pytest.raises(NotImplementedError) as info:
            compiler.compile_regex(MINI_REGEXES[0])
        if byte_level:
            components = sorted(present_components(name))
            assert named_component(name, reason), f"reason names none of {components}: {reason}"
            assert named_component(name, str(info.value)), f"error names none of {components}: {info.value}"
        return
    counts: dict = {"walks": 0, "complete_checked": 0, "unrepresentable": 0}
    problems: list[str] = []
    for k, pattern in enumerate(MINI_REGEXES):
        try:
            guide = compiler.compile_regex(pattern)
        except pt.LimitExceeded:  # (?s:.{1,4}) on DeepSeek V3: the same masks, built on demand
            guide = compiler.compile_regex(pattern, lazy=True)
        check_complete_and_sound(pt, tut, guide, pattern, k + 1, counts, problems, n=20, max_len=32)
    print(f"{name}: {counts}")
    assert not problems, f"{name} is claimed exact but:\n" + "\n".join(problems[:20])
