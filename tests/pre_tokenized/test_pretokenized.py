"""Exact canonical guides for byte-level BPE tokenizers with a pre-tokenizer (GPT-2, Llama 3,
Qwen2, cl100k, o200k, DeepSeek, StarCoder2, Falcon, GPT-NeoX, Command-R, ...), held to the real
tokenizer (DESIGN.md: complete and sound). Every byte-level tokenizer of MANIFEST.json is a
parameter; GPT-2, Llama 3, Qwen2 and cl100k must be supported, any other one is either supported
(and then passes every check here) or refused with a NotImplementedError naming a component it
really has (pre-tokenizer, normalizer, added tokens, missing bytes, ignore_merges).

* ``test_main_byte_level_tokenizers_are_supported`` / ``test_unsupported_component_is_named``:
  the contract above (a refused tokenizer's agnostic guides still work).
* ``test_targeted_case``: hand-written strings that break naive approaches (runs of spaces and
  newlines before words, contractions, digit groups, punctuation runs, CJK and emoji, mixed
  scripts, JSON, code): each is in its regex's language (``test_targeted_strings_are_in_their_
  language``); its canonical encoding is accepted by the regex's guide and by the ``(?s:.*)``
  guide; its merge-only and byte-by-byte spellings (where they differ) are refused; random walks
  of the regex's guide re-encode to themselves and decode into the language.
* ``test_nonspecial_added_tokens_in_text``: texts around each non-special added token (matched in
  the raw text before the pre-tokenizer): canonical accepted, other spellings refused.
* ``test_counterexample_still_holds`` (oracle only) and ``test_counterexamples_in_guides``:
  regression strings whose canonical encoding differs from a naive one (BPE of the whole text with
  no pre-tokenizer split; for ``ignore_merges`` tokenizers also without ``ignore_merges``), found by
  ``pretok_support.find_counterexamples(seed=1)``: the one-string guide and the ``(?s:.*)`` guide
  accept the canonical ids and refuse the naive ones. ``test_live_counterexample_search`` runs the
  same search with another seed.
* ``test_random_pairs_and_triples``: every single non-special token, then random token pairs and
  triples (biased towards canonical ones and near misses: windows of canonical encodings, of
  chunked encodings, other cuts of the same bytes, merge-only encodings, mutations) walked through
  the ``(?s:.*)`` guide: accepted as a complete string iff the oracle says canonical.
  ``$PROPERTOK_PAIR_SAMPLES`` sets how many pairs and triples per tokenizer (default 20,000 for
  the four main tokenizers, 3,000 for the others).

The ``(?s:.*)`` guide (and the tests and checks that use it) is compiled for the four main
tokenizers by default, for every byte-level tokenizer with ``PROPERTOK_FULL_ORACLE=1`` or
``PROPERTOK_PAIR_SAMPLES`` set; it is compiled in a child process (its compile can peak at several
GB) and loaded with ``guide_from_bytes``. A supported tokenizer whose tokenizer DFA is too costly
to build by default (``pretok_support.COSTLY_TOKENIZER_DFA``, none at present) is tested only with
``PROPERTOK_COSTLY_TOKENIZERS=1`` (or ``PROPERTOK_FULL_ORACLE=1``). The tests run grouped by tokenizer (conftest.py), and a
tokenizer's compiler and guides are dropped when the next one starts.

NFC / NFKC tokenizers (qwen2, gpt-neox, command-r, claude-legacy): a canonical sequence decodes to
text their normalizer leaves unchanged (``pretok_support.normalized_text``); guides must accept all
of it (complete) and nothing else (sound). Other text is not representable and counted apart.
"""

from __future__ import annotations

import collections
import os
import time
import zlib

import pytest

from helpers import MaskWalker, check_walks, python_re_verdict, python_regex, walk
from oracle import oracle_for
from pretok_support import (
    CASES,
    MAIN_BYTE_LEVEL,
    TokenSequenceSampler,
    byte_level_slugs,
    encode_with,
    find_counterexamples,
    judge_token_sequences,
    naive_variants,
    named_component,
    skip_if_costly,
    normalization_form,
    present_components,
    normalized_text,
)

from oracle import require_shared  # noqa: E402

require_shared("the byte-level tokenizers")

SLUGS = byte_level_slugs()
GENERAL = r"(?s:.*)"  # every string
# The tokenizers for which the (?s:.*) guide is compiled (see the module docstring).
GENERAL_SLUGS = (
    SLUGS
    if os.environ.get("PROPERTOK_FULL_ORACLE", "") not in ("", "0") or os.environ.get("PROPERTOK_PAIR_SAMPLES")
    else [s for s in SLUGS if s in MAIN_BYTE_LEVEL]
)
# Guides here come from ``TokenizerUnderTest.generous_compiler`` (wide limits: a correctness test
# must not stop at LimitExceeded), each compiled once.
WALKS = 100


def test_manifest_lists_the_main_byte_level_tokenizers():
    assert set(MAIN_BYTE_LEVEL) <= set(SLUGS), SLUGS
    assert len(SLUGS) >= 10, SLUGS


# ---------------------------------------------------------------------------------------------
# shared
# ---------------------------------------------------------------------------------------------


def literal_regex(s: str) -> str:
    """A regex whose language is exactly ``{s}`` (every non-alphanumeric character as ``\\x{..}``)."""
    return "".join(ch if ch.isascii() and ch.isalnum() else f"\\x{{{ord(ch):X}}}" for ch in s)


def _refused_cheaply(tut) -> bool:
    """Whether canonical guides are refused for ``tut`` (read from its Vocabulary alone)."""
    return tut.vocab_any_eos.canonical_unsupported_reason is not None


@pytest.fixture(scope="module")
def byte_level(tokenizer_under_test):
    """``byte_level(slug)`` -> ``(TokenizerUnderTest, canonical_unsupported_reason)``. At the end of
    the module the guides and the generous compilers made here are dropped (memory)."""
    used = {}

    def get(slug):
        if not _refused_cheaply(tokenizer_under_test(slug)):
            skip_if_costly(slug)  # a tokenizer of COSTLY_TOKENIZER_DFA: only with PROPERTOK_COSTLY_TOKENIZERS=1
        tut = tokenizer_under_test(slug)
        for other in [o for o in used if o != slug]:  # the tests run grouped by tokenizer (conftest)
            release(used.pop(other))
        used[slug] = tut
        vocab = tut.vocab_any_eos
        assert vocab.kind == "byte-level-bpe", (slug, vocab.kind)
        return tut, vocab.canonical_unsupported_reason

    yield get
    for tut in used.values():
        release(tut)
    try:  # Linux: the peak memory of this process (children apart)
        with open("/proc/self/status") as f:
            peak = next((line.split(":")[1].strip() for line in f if line.startswith("VmHWM")), "?")
        print(f"\ntest_pretokenized: peak resident memory of the test process {peak}")
    except OSError:
        pass


_GUIDES: dict = {}


def guide_for(tut, pattern: str, in_child: bool = False):
    """The cartesian guide of ``pattern`` for ``tut`` from its generous compiler, once per module
    (compile times over a second are printed; the lazy guide where the eager one exceeds a
    limit); ``in_child``: compiled in a child process
    (``TokenizerUnderTest.large_guide``), for guides whose compile may take a lot of memory."""
    key = (tut.name, pattern)
    if key not in _GUIDES:
        tut.generous_compiler()  # its tokenizer DFA first, out of the compile time
        t0 = time.perf_counter()
        if in_child:
            guide, seconds = tut.large_guide(pattern)
        else:
            try:
                guide = tut.generous_compiler().compile_regex(pattern, method="cartesian")
            except tut.pt.LimitExceeded as e:
                # The eager guide is too big (DeepSeek V3's JSON: ~1 GB of masks); the lazy one
                # has the same masks bit for bit and builds only the states the test visits.
                print(f"{tut.name}: {pattern[:60]!r}: {e}; checking the lazy guide instead")
                guide = tut.generous_compiler().compile_regex(pattern, method="cartesian", lazy=True)
            seconds = time.perf_counter() - t0
        if seconds > 1:
            print(f"{tut.name}: {pattern[:60]!r} compiled in {seconds:.1f} s, {guide.num_states} states")
        _GUIDES[key] = guide
    return _GUIDES[key]


def release(tut) -> None:
    """Drop ``tut``'s guides and generous compiler made here (memory)."""
    for key in [k for k in _GUIDES if k[0] == tut.name]:
        del _GUIDES[key]
    tut.release_generous()


def general_guide(tut):
    """The ``(?s:.*)`` guide, compiled in a child process (``TokenizerUnderTest.large_guide``)."""
    key = (tut.name, GENERAL)
    if key not in _GUIDES:
        try:
            guide, seconds = tut.large_guide(GENERAL)
        except RuntimeError as e:
            if "LimitExceeded" not in str(e):
                raise
            # Command-R's eager (?s:.*) guide passes max_guide_bytes: the lazy one has the same
            # masks and builds only the states a test visits.
            print(f"{tut.name}: eager {GENERAL!r} exceeds a limit; checking the lazy guide instead")
            t0 = time.perf_counter()
            guide = tut.generous_compiler().compile_regex(GENERAL, method="cartesian", lazy=True)
            seconds = time.perf_counter() - t0
        print(f"{tut.name}: {GENERAL!r} compiled in {seconds:.1f} s, {guide.num_states} states")
        _GUIDES[key] = guide
    return _GUIDES[key]


def guides_to_check(tut, own_name: str, own_guide) -> list:
    """``[(name, guide)]``: the test's own guide, and the ``(?s:.*)`` one where it is compiled."""
    out = [(own_name, own_guide)]
    if tut.name in GENERAL_SLUGS:
        out.append(("general", general_guide(tut)))
    return out


def assert_refused(tut, reason, pattern=GENERAL):
    """An unsupported tokenizer: never one of the four main ones, and refused by name."""
    assert tut.name not in MAIN_BYTE_LEVEL, f"{tut.name} must be supported, but: {reason}"
    with pytest.raises(NotImplementedError) as info:
        tut.generous_compiler().compile_regex(pattern, method="cartesian")
    assert named_component(tut.name, str(info.value)), str(info.value)


def naive_spellings(o, s: str, canonical: list[int]) -> dict[str, list[int]]:
    """Other token sequences that decode to ``s``: the naive variants' encodings and the
    byte-by-byte spelling, each where it differs from ``canonical``."""
    out = {}
    data = s.encode("utf-8")
    for name, tok in naive_variants(o.name).items():
        ids = encode_with(tok, [s])[0]
        if ids != canonical and o.decode(ids) == data:
            out[name] = ids
    by_byte = single_byte_ids(o.name)
    if all(b in by_byte for b in data):
        ids = [by_byte[b] for b in data]
        if ids != canonical:
            out["bytes"] = ids
    return out


_SINGLE: dict = {}


def single_byte_ids(slug: str) -> dict[int, int]:
    """byte -> the (lowest) non-special token id that is that byte alone."""
    if slug not in _SINGLE:
        o = oracle_for(slug)
        special = set(o.special_ids)
        m: dict[int, int] = {}
        for t in range(o.num_tokens):
            if o.has_token(t) and t not in special:
                b = o.token_bytes(t)
                if len(b) == 1:
                    m.setdefault(b[0], t)
        _SINGLE[slug] = m
    return _SINGLE[slug]


# ---------------------------------------------------------------------------------------------
# the contract: supported, or refused by name
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("slug", MAIN_BYTE_LEVEL)
def test_main_byte_level_tokenizers_are_supported(byte_level, slug):
    tut, reason = byte_level(slug)
    assert reason is None, f"{slug}: canonical guides refused: {reason}"
    guide = tut.generous_compiler().compile_regex("[a-z]+")  # cartesian is the default
    assert guide.method == "cartesian"
    ok, why = walk(guide, tut.oracle.canonical("hello"))
    assert ok, why


@pytest.mark.parametrize("slug", SLUGS)
def test_a_grammar_special_token_between_canonical_texts(byte_level, slug):
    """Every byte-level tokenizer: a grammar names a special token (the first that is not EOS)
    between two texts. The guide allows it exactly there, and each text run of its walks is the
    real tokenizer's own encoding (the tokenizer splits special tokens out first); a refused
    tokenizer refuses the grammar too."""
    import re

    tut, reason = byte_level(slug)
    compiler = tut.generous_compiler()
    vocab = compiler.vocabulary
    specials = [i for i in vocab.special_token_ids if i not in vocab.eos_token_ids]
    if not specials:  # GPT-2: its one special token ends every sequence
        with pytest.raises(ValueError, match="end-of-sequence token"):
            compiler.compile_grammar(f"start: /[a-z]+/ <[{vocab.eos_token_ids[0]}]>\n")
        return
    t = specials[0]
    grammar = f"start: /[a-z ]{{1,6}}/ <[{t}]> /[a-z0-9 ]{{1,6}}/\n"
    if reason is not None:
        with pytest.raises(NotImplementedError):
            compiler.compile_grammar(grammar)
        return
    o = tut.oracle
    guide = compiler.compile_grammar(grammar)
    assert walk(guide, o.canonical("ab c") + [t] + o.canonical(" x1"))[0]
    for seed in range(12):
        seq = guide.random_walk(seed, max_tokens=20)
        assert seq.count(t) == 1, seq
        left, right = seq[: seq.index(t)], seq[seq.index(t) + 1 :]
        assert all(o.is_canonical_batch([left, right])), (slug, seq)
        assert re.fullmatch(r"[a-z ]{1,6}", o.decode(left).decode()) and re.fullmatch(
            r"[a-z0-9 ]{1,6}", o.decode(right).decode()), (slug, seq)


@pytest.mark.parametrize("slug", SLUGS)
def test_unsupported_component_is_named(pt, byte_level, slug, record_property):
    """A refused tokenizer's reason and NotImplementedError name a component it has; the
    agnostic method still works there. A supported one compiles canonical guides."""
    tut, reason = byte_level(slug)
    record_property("canonical_unsupported_reason", reason)
    print(f"{slug}: components {sorted(present_components(slug))}, reason {reason!r}")
    pattern = r"[a-z]+( [a-z]+){0,3}"
    compiler = tut.generous_compiler()
    if reason is None:
        guide = compiler.compile_regex(pattern, method="cartesian")
        assert guide.method == "cartesian"
        return
    assert tut.name not in MAIN_BYTE_LEVEL, f"{slug} must be supported, but: {reason}"
    assert named_component(slug, reason), f"{slug}: reason names none of {sorted(present_components(slug))}: {reason}"
    for kwargs in ({"method": "cartesian"}, {}):
        with pytest.raises(NotImplementedError) as info:
            compiler.compile_regex(pattern, **kwargs)
        assert named_component(slug, str(info.value)), str(info.value)
    agnostic = compiler.compile_regex(pattern, method="agnostic")
    assert agnostic.method == "agnostic"
    dfa = pt.ByteDfa(pattern)
    for i in range(20):
        text = tut.oracle.decode(agnostic.random_walk(i))
        assert dfa.matches(text), text
    ok, why = walk(agnostic, tut.oracle.canonical("hello world"))
    assert ok, why


# ---------------------------------------------------------------------------------------------
# targeted cases
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_targeted_strings_are_in_their_language(pt, case):
    """The harness: every listed string is in its case's regex (byte DFA, and Python's re where it
    compiles the pattern the same way)."""
    pattern, strings = CASES[case]
    dfa, py = pt.ByteDfa(pattern), python_regex(pattern)
    for s in strings:
        assert dfa.matches(s.encode("utf-8")), s
        assert python_re_verdict(py, pattern, s) is not False, s


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("slug", SLUGS)
def test_targeted_case(pt, byte_level, slug, case, record_property):
    tut, reason = byte_level(slug)
    pattern, strings = CASES[case]
    if reason is not None:
        assert_refused(tut, reason, pattern)
        return
    o = tut.oracle
    form = normalization_form(o)
    guide = guide_for(tut, pattern)
    guides = guides_to_check(tut, "case", guide)
    problems: list[str] = []
    counts: collections.Counter = collections.Counter()
    for s, ids in zip(strings, o.canonical_batch(strings)):
        if o.decode(ids) != s.encode("utf-8") or not normalized_text(s, form):
            # the listed strings are representable and normalized for the four main tokenizers
            assert slug not in MAIN_BYTE_LEVEL, f"{slug}: {s!r} is not representable/normalized"
            counts["not_representable"] += 1
            continue
        counts["complete_checked"] += 1
        for name, g in guides:
            ok, why = walk(g, ids)
            if not ok:
                problems.append(f"{name} guide refuses canonical({s!r}) = {ids}: {why}")
        for how, other in naive_spellings(o, s, ids).items():
            counts[f"refused_{how}"] += 1
            for name, g in guides:
                ok, _ = walk(g, other)
                if ok:
                    problems.append(f"{name} guide accepts the {how} spelling {other} of {s!r} (canonical {ids})")
    check_walks(o, guide, pattern, pt.ByteDfa(pattern), range(1000, 1000 + WALKS), problems, counts)
    print(f"{slug} {case}: {dict(counts)}")
    record_property("counts", dict(counts))
    assert counts["complete_checked"] >= (len(strings) if slug in MAIN_BYTE_LEVEL else 1), dict(counts)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def added_token_texts(o) -> list[str]:
    """Texts around the content of every non-special added token (HF matches those in the raw
    text before the pre-tokenizer): alone, twice, between words, after a space, before a newline."""
    out = []
    for a in o.doc.get("added_tokens") or []:
        if not a.get("special"):
            c = a["content"]
            out += [c, c + c, "x" + c + " y", " " + c, c + "\n", "1" + c + "23"]
    return out


@pytest.mark.parametrize("slug", SLUGS)
def test_nonspecial_added_tokens_in_text(pt, byte_level, slug, record_property):
    """Texts containing non-special added tokens (gpt-neox's runs of spaces, deepseek's accented
    letters and FIM tokens, command-r's turn tokens...): the canonical encoding is accepted when
    the text is representable and normalized, and every other spelling (the naive variants', byte by
    byte) is refused, also for the texts that are not representable (deepseek's "ö" is an added
    token that decodes to byte F6: no token sequence may spell "ö" there)."""
    tut, reason = byte_level(slug)
    o = tut.oracle
    texts = added_token_texts(o)
    if not texts:
        assert not o.nonspecial_added_ids
        return
    # "x" keeps the language non-empty where no text is representable (deepseek-llm)
    pattern = "|".join(literal_regex(t) for t in sorted(set(texts)) + ["x"])
    if reason is not None:
        assert_refused(tut, reason, pattern)
        return
    form = normalization_form(o)
    guides = guides_to_check(tut, "alternation", guide_for(tut, pattern, in_child=True))
    counts: collections.Counter = collections.Counter()
    problems: list[str] = []
    added = set(o.nonspecial_added_ids)
    for s, ids in zip(texts, o.canonical_batch(texts)):
        if o.decode(ids) == s.encode("utf-8") and normalized_text(s, form):
            counts["complete_checked"] += 1
            counts["with_added_token"] += bool(added & set(ids))
            for name, g in guides:
                ok, why = walk(g, ids)
                if not ok:
                    problems.append(f"{name} guide refuses canonical({s!r}) = {ids}: {why}")
        else:
            counts["not_representable"] += 1
        for how, other in naive_spellings(o, s, ids).items():
            counts[f"refused_{how}"] += 1
            for name, g in guides:
                if walk(g, other)[0]:
                    problems.append(f"{name} guide accepts the {how} spelling {other} of {s!r} (canonical {ids})")
    check_walks(o, guides[0][1], pattern, pt.ByteDfa(pattern), range(2000, 2000 + WALKS), problems, counts)
    print(f"{slug} added tokens: {dict(counts)}")
    record_property("counts", dict(counts))
    assert counts["complete_checked"] + counts["not_representable"] == len(texts)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


# ---------------------------------------------------------------------------------------------
# counter-examples: canonical != naive
# ---------------------------------------------------------------------------------------------

# (slug, naive variant, text, canonical ids, naive ids): found by
# pretok_support.find_counterexamples(oracle, naive_variants(slug)[variant], seed=1, n_texts=3000, keep=6)
# with tokenizers 0.23.3, plus a few by hand.
COUNTEREXAMPLES = [
    # by hand: a run of spaces before a word, digit groups, o200k's contractions after a letter
    ('llama3', 'merge-only', 'a  b', [64, 220, 293], [64, 256, 65]),
    ('llama3', 'merge-only', '1234567', [4513, 10961, 22], [4513, 1774, 3080]),
    ('qwen2', 'merge-only', 'a  b', [64, 220, 293], [64, 256, 65]),
    ('cl100k', 'merge-only', 'a  b', [64, 220, 293], [64, 256, 65]),
    ('cl100k', 'merge-only', '1234567', [4513, 10961, 22], [4513, 1774, 3080]),
    ('o200k', 'merge-only', "S'me", [50, 11146, 68], [50, 6, 1047]),
    ('o200k', 'merge-only', " I'", [357, 6], [3413]),
    # found by the search
    ('llama3', 'merge-only', ' ²', [220, 30556], [2188, 110]),
    ('llama3', 'merge-only', '\t\t!', [197, 197, 0], [298, 0]),
    ('llama3', 'merge-only', '\t\ta', [197, 11575], [298, 64]),
    ('llama3', 'merge-only', '\t\tڛ', [197, 197, 150, 249], [298, 150, 249]),
    ('llama3', 'merge-only', '!<s', [88032, 82], [0, 45147]),
    ('llama3', 'merge-only', '".T', [3343, 51], [1, 844]),
    ('llama3', 'merge-only-no-ignore', '토토', [119927], [100757, 58260, 228, 254]),
    ('llama3', 'merge-only-no-ignore', '\t\t\x00', [197, 197, 188], [298, 188]),
    ('llama3', 'merge-only-no-ignore', '\t\tڛ', [197, 197, 150, 249], [298, 150, 249]),
    ('llama3', 'merge-only-no-ignore', "'Th", [17773, 71], [6, 1016]),
    ('llama3', 'merge-only-no-ignore', '0033', [6268, 18], [410, 1644]),
    ('llama3', 'merge-only-no-ignore', '.::.::', [114282], [13, 58204, 487]),
    ('llama3', 'split-no-ignore', '토토', [119927], [100757, 58260, 228, 254]),
    ('llama3', 'split-no-ignore', ' 스타', [114833], [80307, 45780, 225, 222]),
    ('llama3', 'split-no-ignore', 'kyně', [119709], [74, 1910, 22161]),
    ('llama3', 'split-no-ignore', ' Hiệp', [124254], [21694, 26298, 79]),
    ('llama3', 'split-no-ignore', ' ÜNİVERSİTESİ', [123981], [123073, 48880, 29584, 48880]),
    ('llama3', 'split-no-ignore', ' .**************\n', [123046], [662, 601, 65171]),
    ('gpt2', 'merge-only', '√陳', [24861, 248, 165, 247, 111], [24861, 21253, 247, 111]),
    ('gpt2', 'merge-only', '\n\nA', [198, 198, 32], [628, 32]),
    ('gpt2', 'merge-only', '\n\na', [198, 198, 64], [628, 64]),
    ('gpt2', 'merge-only', '\n\xa0.', [198, 1849, 13], [44320, 13]),
    ('gpt2', 'merge-only', ' \xa0W', [220, 1849, 54], [5624, 54]),
    ('gpt2', 'merge-only', "''s", [7061, 82], [6, 338]),
    ('qwen2', 'merge-only', 'กิ', [25200, 30785], [124903]),
    ('qwen2', 'merge-only', '１０', [20109, 26022], [77150]),
    ('qwen2', 'merge-only', '\t\ta', [197, 11323], [298, 64]),
    ('qwen2', 'merge-only', '".T', [3263, 51], [1, 836]),
    ('qwen2', 'merge-only', '<s>', [44047, 29], [128245]),
    ('qwen2', 'merge-only', 'ก็คือ', [25200, 83282, 40327, 83581], [132973]),
    ('cl100k', 'merge-only', ' ²', [220, 30556], [2188, 110]),
    ('cl100k', 'merge-only', '\t\t!', [197, 197, 0], [298, 0]),
    ('cl100k', 'merge-only', '\t\ta', [197, 11575], [298, 64]),
    ('cl100k', 'merge-only', '\t\tڛ', [197, 197, 150, 249], [298, 150, 249]),
    ('cl100k', 'merge-only', '!<s', [88032, 82], [0, 45147]),
    ('cl100k', 'merge-only', '".T', [3343, 51], [1, 844]),
    ('cl100k', 'merge-only-no-ignore', ' ²', [220, 30556], [2188, 110]),
    ('cl100k', 'merge-only-no-ignore', '\t\t!', [197, 197, 0], [298, 0]),
    ('cl100k', 'merge-only-no-ignore', '\t\ta', [197, 11575], [298, 64]),
    ('cl100k', 'merge-only-no-ignore', '\t\tڛ', [197, 197, 150, 249], [298, 150, 249]),
    ('cl100k', 'merge-only-no-ignore', '!<s', [88032, 82], [0, 45147]),
    ('cl100k', 'merge-only-no-ignore', '".T', [3343, 51], [1, 844]),
    ('o200k', 'merge-only', '\t\ta', [197, 24292], [335, 64]),
    ('o200k', 'merge-only', '\t\tڛ', [197, 197, 150, 249], [335, 150, 249]),
    ('o200k', 'merge-only', '\n//', [198, 393], [3914]),
    ('o200k', 'merge-only', '0033', [11822, 18], [504, 2546]),
    ('o200k', 'merge-only', '½241', [27124, 1494, 16], [27124, 24865]),
    ('o200k', 'merge-only', '亚洲AV', [6199, 5345], [193819]),
    ('o200k', 'merge-only-no-ignore', '\t\ta', [197, 24292], [335, 64]),
    ('o200k', 'merge-only-no-ignore', '\t\tڛ', [197, 197, 150, 249], [335, 150, 249]),
    ('o200k', 'merge-only-no-ignore', '\n//', [198, 393], [3914]),
    ('o200k', 'merge-only-no-ignore', '0033', [11822, 18], [504, 2546]),
    ('o200k', 'merge-only-no-ignore', '½241', [27124, 1494, 16], [27124, 24865]),
    ('o200k', 'merge-only-no-ignore', '亚洲AV', [6199, 5345], [193819]),
    ('deepseek-llm', 'merge-only', ' ²', [207, 12094], [2706, 110]),
    ('deepseek-llm', 'merge-only', '§ ', [43448, 207], [65781]),
    ('deepseek-llm', 'merge-only', 'ȕカ', [130, 230, 9156, 104], [130, 66130, 104]),
    ('deepseek-llm', 'merge-only', '\t\t!', [184, 184, 0], [486, 0]),
    ('deepseek-llm', 'merge-only', '\t\te', [184, 44540], [486, 68]),
    ('deepseek-llm', 'merge-only', ' § ', [31425, 207], [41013]),
    ('deepseek-coder', 'merge-only', ' ²', [207, 12124], [2688, 110]),
    ('deepseek-coder', 'merge-only', '\t\t!', [184, 184, 0], [459, 0]),
    ('deepseek-coder', 'merge-only', '\t\tA', [184, 184, 32], [459, 32]),
    ('deepseek-coder', 'merge-only', '\t\te', [184, 184, 68], [459, 68]),
    ('deepseek-coder', 'merge-only', '\t\tڛ', [184, 184, 148, 236], [459, 148, 236]),
    ('starcoder2', 'merge-only', '\t\tA', [221, 221, 70], [313, 70]),
    ('starcoder2', 'merge-only', '\t\n"', [221, 222, 39], [15767, 39]),
    ('starcoder2', 'merge-only', '\n\nᔯ', [222, 222, 193, 266, 145], [499, 193, 266, 145]),
    ('starcoder2', 'merge-only', '\n #', [222, 607], [353, 40]),
    ('starcoder2', 'merge-only', '\n d', [222, 362], [353, 105]),
    ('starcoder2', 'merge-only', '\r\n̊', [225, 222, 172, 256], [455, 172, 256]),
    ('refact', 'merge-only', '\t\tA', [202, 202, 51], [294, 51]),
    ('refact', 'merge-only', '\t\n"', [202, 203, 20], [15773, 20]),
    ('refact', 'merge-only', '\n\nᔯ', [203, 203, 174, 247, 126], [478, 174, 247, 126]),
    ('refact', 'merge-only', '\n #', [203, 588], [334, 21]),
    ('refact', 'merge-only', '\n d', [203, 343], [334, 86]),
    ('refact', 'merge-only', '\r\n̊', [206, 203, 153, 237], [437, 153, 237]),
    ('falcon', 'merge-only', '\t\tD', [192, 192, 47], [663, 47]),
    ('falcon', 'merge-only', '\t\tڛ', [192, 192, 160, 233], [663, 160, 233]),
    ('falcon', 'merge-only', '\n\na', [193, 193, 76], [1001, 76]),
    ('falcon', 'merge-only', '\n\n❤', [193, 193, 35816], [1001, 35816]),
    ('falcon', 'merge-only', '\n ע', [193, 24419, 107], [1212, 157, 107]),
    ('falcon', 'merge-only', ' \nی', [204, 193, 44174], [4610, 44174]),
    ('gpt-neox', 'merge-only', '\n\nⅨ', [187, 187, 158, 216, 103], [535, 158, 216, 103]),
    ('gpt-neox', 'merge-only', '\n\x0cB', [187, 189, 35], [8675, 35]),
    ('gpt-neox', 'merge-only', '\n \x7f', [187, 209, 210], [586, 210]),
    ('gpt-neox', 'merge-only', '\n ي', [187, 32443], [586, 6463]),
    ('gpt-neox', 'merge-only', ' \n0', [209, 187, 17], [2490, 17]),
    ('gpt-neox', 'merge-only', ' \nA', [209, 187, 34], [2490, 34]),
    ('command-r', 'merge-only', 'З׀', [6864, 155, 230], [148, 4208, 230]),
    ('command-r', 'merge-only', '\t\tA', [205, 205, 40], [1957, 40]),
    ('command-r', 'merge-only', '\t\n"', [205, 206, 9], [34777, 9]),
    ('command-r', 'merge-only', '\n\na', [206, 206, 72], [2126, 72]),
    ('command-r', 'merge-only', '\n #', [206, 2777], [1868, 10]),
    ('command-r', 'merge-only', '\n i', [206, 2305], [1868, 80]),
    ('claude-legacy', 'merge-only', '\t\t0', [202, 202, 20], [418, 20]),
    ('claude-legacy', 'merge-only', '\n\nA', [203, 203, 37], [448, 37]),
    ('claude-legacy', 'merge-only', '\n\nท', [203, 203, 10508, 250], [448, 10508, 250]),
    ('claude-legacy', 'merge-only', '\n\x0c1', [203, 205, 21], [23490, 21]),
    ('claude-legacy', 'merge-only', '\n\x0cB', [203, 205, 38], [23490, 38]),
    ('claude-legacy', 'merge-only', ' \n\u0602', [225, 203, 153, 229], [2891, 153, 229]),
    ('deepseek-v3', 'merge-only', ' \u200b', [223, 35020], [663, 236]),
    ('deepseek-v3', 'merge-only', '沞ב', [609, 255, 5579], [609, 2100, 242]),
    ('deepseek-v3', 'merge-only', '\t\t!', [200, 200, 3], [998, 3]),
    ('deepseek-v3', 'merge-only', '\t\ta', [200, 46422], [998, 67]),
    ('deepseek-v3', 'merge-only', '!%e', [3, 7, 71], [3, 104713]),
    ('deepseek-v3', 'merge-only', '½355', [23951, 1810, 23], [23951, 19663]),
]


@pytest.mark.parametrize(
    "slug, variant, text, canonical, naive", COUNTEREXAMPLES, ids=[f"{c[0]}-{c[1]}-{c[2]!r}" for c in COUNTEREXAMPLES]
)
def test_counterexample_still_holds(slug, variant, text, canonical, naive):
    """The harness (no propertok): the real tokenizer and the naive variant still give these ids,
    both spell ``text`` exactly, and ``text`` is one a guide must accept (normalized)."""
    o = oracle_for(slug)
    assert o.canonical(text) == canonical
    assert encode_with(naive_variants(slug)[variant], [text])[0] == naive
    assert o.decode(canonical) == o.decode(naive) == text.encode("utf-8")
    assert normalized_text(text, normalization_form(o))


def test_every_byte_level_tokenizer_has_counterexamples():
    missing = set(SLUGS) - {c[0] for c in COUNTEREXAMPLES}
    assert not missing, f"no regression counter-examples for {sorted(missing)}"


def check_counterexamples(tut, cases, problems: list) -> None:
    """Each ``(variant, text, canonical, naive)``: the guide of the one-string regex ``text`` and
    the ``(?s:.*)`` guide (where compiled) accept ``canonical`` and refuse ``naive``."""
    for variant, text, canonical, naive in cases:
        for name, g in guides_to_check(tut, "literal", guide_for(tut, literal_regex(text))):
            ok, why = walk(g, canonical)
            if not ok:
                problems.append(f"{name} guide refuses canonical({text!r}) = {canonical}: {why}")
            ok, _ = walk(g, naive)
            if ok:
                problems.append(f"{name} guide accepts the {variant} ids {naive} of {text!r} (canonical {canonical})")


@pytest.mark.parametrize("slug", SLUGS)
def test_counterexamples_in_guides(byte_level, slug):
    tut, reason = byte_level(slug)
    cases = [c[1:] for c in COUNTEREXAMPLES if c[0] == slug]
    assert cases
    if reason is not None:
        assert_refused(tut, reason, literal_regex(cases[0][1]))
        return
    problems: list[str] = []
    check_counterexamples(tut, cases, problems)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


@pytest.mark.parametrize("slug", SLUGS)
def test_live_counterexample_search(byte_level, slug, record_property):
    """The search behind the regression list, with another seed, checked in the same guides."""
    tut, reason = byte_level(slug)
    o = tut.oracle
    found = {}
    for variant, tok in naive_variants(slug).items():
        found[variant] = find_counterexamples(
            o, tok, seed=2, n_texts=1500, keep=10, vocabulary=(variant == "split-no-ignore")
        )
    print(f"{slug}: " + "; ".join(f"{v}: {[c[0] for c in cs]}" for v, cs in found.items()))
    record_property("found", {v: len(cs) for v, cs in found.items()})
    assert found["merge-only"], f"{slug}: the search found no counter-example"
    if reason is not None:
        assert_refused(tut, reason)
        return
    problems: list[str] = []
    check_counterexamples(tut, [(v, *c) for v, cs in found.items() for c in cs], problems)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# random token pairs and triples
# ---------------------------------------------------------------------------------------------


def pair_samples(slug: str) -> int:
    """``$PROPERTOK_PAIR_SAMPLES`` pairs and as many triples per tokenizer (default 20,000 for the
    four main tokenizers, 3,000 for the others)."""
    env = os.environ.get("PROPERTOK_PAIR_SAMPLES")
    if env:
        return int(env)
    return 20_000 if slug in MAIN_BYTE_LEVEL else 3_000


@pytest.mark.parametrize("slug", GENERAL_SLUGS)
def test_random_pairs_and_triples(byte_level, slug, record_property):
    """A sequence is accepted by the ``(?s:.*)`` guide as a complete string (every token allowed
    by the mask at its step, a final state at the end) iff the oracle says it is canonical. Every single non-special token, then the sampled pairs and triples."""
    tut, reason = byte_level(slug)
    if reason is not None:
        assert_refused(tut, reason)
        return
    o = tut.oracle
    walker = MaskWalker(general_guide(tut))
    sampler = TokenSequenceSampler(o, list(naive_variants(slug).values()), seed=zlib.crc32(slug.encode()))
    n_samples = pair_samples(slug)
    report, problems = judge_token_sequences(o, walker, sampler, n_samples)
    report["disagreements"] = len(problems)
    print(f"{slug} random sequences ({n_samples} of each length): {report}")
    record_property("report", report)
    assert not problems, f"{len(problems)} disagreements with the oracle:\n" + "\n".join(problems[:30])
