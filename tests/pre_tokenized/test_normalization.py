"""NFC / NFKC tokenizers (Qwen2, GPT-NeoX: NFC; the Claude tokenizer: NFKC) write every script.

A canonical sequence of a normalizing tokenizer decodes to text its normalizer leaves unchanged, so
a guide must allow exactly that text: every normalized string (complete), no other (sound). The
judge is the real tokenizer's own normalizer (``tokenizers.normalizers.NFC`` / ``NFKC``, Unicode 9
tables), never Python's ``unicodedata`` (Unicode 14), and the real tokenizer's encodings.

* Texts in Hindi, Bengali, Tamil, Kannada, Thai, Khmer, Hebrew with points, Arabic with harakat and
  Vietnamese: their canonical encodings are accepted inside a JSON string (they were all refused,
  Vietnamese aside, when guides kept to characters that no context changes).
* Text that is not normalized (decomposed ``é``, marks out of canonical order, Hangul jamo that
  compose, an Indic nukta that composes): the tokenizer never produces the byte-level encoding of
  its bytes, and the guide refuses it.
* Combining sequences in every order, and every string of up to 3 code points over a small
  alphabet of starters and marks: accepted iff normalized.
* Random walks of a free-text guide, weighted toward tokens with combining marks, re-encode to
  themselves.
* Lazy and eager guides give the same masks where the eager product is small enough to build.
* The normal form kept in a ``cache_dir``: new processes build it, refuse and replace a damaged
  copy, or read it, and give the same masks.
"""

from __future__ import annotations

import itertools
import json
import random
import unicodedata

import numpy as np
import pytest
from helpers import bit_is_set, walk
from oracle import require_shared
from pretok_support import normalize, normalized_text

# (tokenizer, its normalizer)
NORMALIZING = [("qwen2", "NFC"), ("gpt-neox", "NFC"), ("claude-legacy", "NFKC")]

JSON_STRING = r'"[^"\\\x00-\x1F]*"'
FREE_TEXT = r"[^\x00-\x1F]*"

SCRIPTS = [
    "नमस्ते दुनिया",
    "हिन्दी भाषा",
    "क्षत्रिय",
    "ไม่เป็นไร",
    "น้ำแข็ง",
    "שָׁלוֹם",
    "بِسْمِ اللَّهِ",
    "বাংলা ভাষা",
    "ស្វាគមន៍",
    "ಕನ್ನಡ",
    "தமிழ்",
    "Tiếng Việt",
    "한국어 텍스트",
    "ऩ क़ ड़ी",  # a composed nukta letter (U+0929), then two whose composition is excluded
    "é ẹ\u0301 ệ",  # precomposed; an acute after ẹ (no precomposed form) stays
]

# Not normalized: the tokenizer encodes something else, so no guide may produce these bytes.
NOT_NORMALIZED = [
    "e\u0301",  # decomposed é
    "a\u0301\u0323",  # marks out of order (230 before 220)
    "\u1112\u1161\u11ab",  # Hangul jamo that compose into 한
    "\u0928\u093c",  # न + nukta composes into ऩ
    "\u0bc6\u0bbe",  # Tamil vowel sign parts that compose into ொ
    "é\u0323",  # the dot below reorders before the acute, then composes with e
    "\u212b",  # ANGSTROM SIGN: a singleton, never in normalized text
]


def _raw_encoder(tut):
    """The tokenizer without its normalizer: BPE of the text's own bytes (what a guide that
    ignored normalization would allow)."""
    from tokenizers import Tokenizer

    doc = dict(tut.oracle.doc)
    doc["normalizer"] = None
    tok = Tokenizer.from_str(json.dumps(doc))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def guides(pt, tokenizer_under_test):
    """Per tokenizer: (tut, lazy JSON-string guide, lazy free-text guide, raw encoder)."""
    cache = {}

    def get(name):
        if name not in cache:
            require_shared(f"the {name} tokenizer")
            tut = tokenizer_under_test(name)
            compiler = tut.compiler
            cache[name] = (
                tut,
                compiler.compile_regex(JSON_STRING, lazy=True),
                compiler.compile_regex(FREE_TEXT, lazy=True),
                _raw_encoder(tut),
            )
        return cache[name]

    return get


@pytest.mark.parametrize("name, form", NORMALIZING)
def test_every_script_is_written(guides, name, form):
    tut, string_guide, _, _ = guides(name)
    refused = []
    for text in SCRIPTS:
        if not normalized_text(text, form):
            # Only NFKC changes one: Thai SARA AM (U+0E33) has a compatibility decomposition,
            # so the Claude tokenizer sees (and its model writes) U+0E4D U+0E32.
            assert form == "NFKC" and "\u0e33" in text, text
            text = normalize(text, form)
        ids = tut.oracle.canonical(json.dumps(text, ensure_ascii=False))
        ok, why = walk(string_guide, ids)
        if not ok:
            refused.append((text, why))
    assert not refused, refused


@pytest.mark.parametrize("name, form", NORMALIZING)
def test_text_that_is_not_normalized_stays_impossible(guides, name, form):
    tut, string_guide, free_guide, raw = guides(name)
    for text in NOT_NORMALIZED:
        assert not normalized_text(text, form), text
        for guide, spelled in [(string_guide, json.dumps(text, ensure_ascii=False)), (free_guide, text)]:
            ids = raw(spelled)
            assert tut.oracle.decode(ids) == spelled.encode()
            assert tut.oracle.canonical(spelled) != ids, "the tokenizer would encode it as it is"
            ok, _ = walk(guide, ids)
            assert not ok, f"[{name}] {text!r}: the guide allows text the normalizer changes"
        # Its normalized form is allowed.
        fixed = normalize(text, form)
        ok, why = walk(free_guide, tut.oracle.canonical(fixed))
        assert ok, (fixed, why)


@pytest.mark.parametrize("name, form", NORMALIZING)
def test_combining_sequences_in_every_order(guides, name, form):
    tut, _, free_guide, raw = guides(name)
    seen = {True: 0, False: 0}
    for base in ["a", "e", "o", "u", "ư", "ש"]:
        for marks in itertools.permutations(["\u0323", "\u0301", "\u031b", "\u0302", "\u05b8"], 3):
            text = base + "".join(marks)
            normalized = normalized_text(text, form)
            ids = raw(text)
            ok, why = walk(free_guide, ids)
            assert ok == normalized, f"[{name}] {text!r} {[hex(ord(c)) for c in text]}: {why}"
            if normalized:
                assert tut.oracle.canonical(text) == ids
            seen[normalized] += 1
    assert seen[True] > 10 and seen[False] > 10, seen


# Starters (some compose with the marks), marks of several classes, Hangul and Indic corner cases.
ALPHABET = ["a", "e", "é", " ", "\u0301", "\u0323", "\u0308", "\u1100", "\u1161", "\u0928", "\u093c", "\u0e48"]


@pytest.mark.parametrize("name, form", NORMALIZING)
def test_every_short_string_is_accepted_iff_normalized(guides, name, form):
    tut, _, free_guide, raw = guides(name)
    counts = {True: 0, False: 0}
    for n in (1, 2, 3):
        for chars in itertools.product(ALPHABET, repeat=n):
            text = "".join(chars)
            normalized = normalized_text(text, form)
            # Every character here is older than Unicode 9, where Python's tables agree.
            assert unicodedata.is_normalized(form, text) == normalized, text
            ok, why = walk(free_guide, raw(text))
            assert ok == normalized, f"[{name}] {[hex(ord(c)) for c in text]}: {why}"
            counts[normalized] += 1
    assert counts[True] > 300 and counts[False] > 300, counts


# Combining marks added after Unicode 9 are starters in the tokenizer's tables (98 of class > 1
# are marks in Python's Unicode 14): the guide follows the tokenizer. U+07FD NKO DANTAYALAN (220 in
# Unicode 14) before U+0334 (class 1) is normalized for the tokenizer, not for Python.
NEWER_MARKS = ["a\u07fd\u0334", "\u0898\u0334", "e\u1ac1\u0334"]


@pytest.mark.parametrize("name, form", NORMALIZING)
def test_marks_newer_than_the_tokenizers_tables_follow_the_tokenizer(guides, name, form):
    tut, _, free_guide, raw = guides(name)
    for text in NEWER_MARKS:
        assert not unicodedata.is_normalized(form, text), text
        normalized = normalized_text(text, form)
        assert normalized, f"{text!r}: the tokenizer's tables now know this mark"
        ok, why = walk(free_guide, tut.oracle.canonical(text))
        assert ok, (text, why)


def _has_mark(tut, t):
    try:
        return any(unicodedata.combining(c) for c in tut.oracle.token_bytes(t).decode("utf-8"))
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("name, form", NORMALIZING)
def test_random_walks_weighted_to_marks_re_encode_to_themselves(guides, name, form):
    tut, _, free_guide, _ = guides(name)
    marked = np.array([t for t in range(tut.vocab_any_eos.vocab_size) if tut.oracle.has_token(t) and _has_mark(tut, t)])
    rng = random.Random(16)
    with_marks = 0
    for walk_no in range(12):
        state, ids = free_guide.initial_state, []
        for _ in range(24):
            mask = free_guide.mask(state)
            allowed_marked = [int(t) for t in marked if bit_is_set(mask, int(t))]
            if allowed_marked and rng.random() < 0.7:
                t = rng.choice(allowed_marked)
            else:
                t = int(rng.choice(free_guide.allowed_tokens(state)))
                if t in free_guide.eos_token_ids:
                    break
            ids.append(t)
            state = free_guide.next_state(state, t)
        text = tut.oracle.decode(ids).decode("utf-8", errors="strict") if ids else ""
        with_marks += any(unicodedata.combining(c) for c in text)
        assert normalized_text(text, form), (walk_no, text)
        assert tut.oracle.canonical(text) == ids, (walk_no, text)
    assert with_marks >= 8, with_marks


def test_lazy_equals_eager_with_marks(pt, tokenizer_under_test):
    """Where the eager product stays small (a few characters, some of them marks), the eager
    guide (the normalizer folded into the pre-tokenizer's automaton) and the lazy one (its own
    component of the text state) give the same masks, bit for bit."""
    require_shared("the qwen2 tokenizer")
    tut = tokenizer_under_test("qwen2")
    pattern = "[ae\u0301\u0323\u0302\u1100\u1161\u0928\u093c ]{0,5}!"
    eager = tut.compiler.compile_regex(pattern, lazy=False)
    lazy = tut.compiler.compile_regex(pattern, lazy=True)
    assert eager.first_difference(lazy.materialize()) is None
    o = tut.oracle
    for seed in range(20):
        for ids in (eager.random_walk(seed, 8), lazy.random_walk(seed, 8)):
            s_e, s_l = eager.initial_state, lazy.initial_state
            for t in ids:
                assert np.array_equal(eager.mask(s_e), lazy.mask(s_l)), ids
                s_e, s_l = eager.next_state(s_e, t), lazy.next_state(s_l, t)
            text = o.decode(ids).decode()
            assert normalized_text(text, "NFC") and o.canonical(text) == ids, text


def test_normalizing_tokenizers_compile_lazily_by_default(pt, tokenizer_under_test):
    """The eager product of a free-text field takes every state of the normal form's automaton
    (a JSON string passes ``max_guide_bytes`` on Qwen2): canonical compiles are lazy unless
    asked otherwise, as on every tokenizer; other methods are eager."""
    require_shared("the qwen2 tokenizer")
    tut = tokenizer_under_test("qwen2")
    assert tut.compiler.compile_regex(JSON_STRING).is_lazy
    assert tut.compiler.compile_json_schema({"type": "string"}).is_lazy
    assert not tut.compiler.compile_regex("(yes|no)", lazy=False).is_lazy
    assert not tut.compiler.compile_regex(JSON_STRING, method="agnostic").is_lazy
    with pytest.raises(pt.LimitExceeded, match="max_guide_bytes"):
        tut.fresh_compiler(max_guide_bytes=64 << 20).compile_regex(JSON_STRING, lazy=False)
    gpt2 = tokenizer_under_test("gpt2")
    assert gpt2.compiler.compile_regex(JSON_STRING).is_lazy
    assert not gpt2.compiler.compile_regex(JSON_STRING, lazy=False).is_lazy


_MASKS_IN_A_NEW_PROCESS = r"""
import json, sys
import numpy as np
import propertok as pt
path, cache_dir, regex, ids = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
guide = pt.Compiler(pt.Vocabulary.from_file(path), cache_dir=cache_dir).compile_regex(regex, lazy=True)
state, masks = guide.initial_state, []
for t in ids + [None]:
    masks.append(np.flatnonzero(guide.mask(state)).tolist())
    if t is not None:
        state = guide.next_state(state, t)
print(json.dumps(masks))
"""


def test_the_normal_form_is_kept_in_the_cache_dir_and_a_damaged_one_replaced(pt, tokenizer_under_test, tmp_path):
    """The normal form's DFA (built once per process from the Unicode tables, ~0.3 s) is kept in
    ``cache_dir`` beside the tokenizer DFA. Each new process here reads it or builds it: a
    damaged file is refused and replaced, and every process's masks are this one's."""
    import subprocess
    import sys
    from pathlib import Path

    require_shared("the qwen2 tokenizer")
    tut = tokenizer_under_test("qwen2")
    session = tut._cache_kwargs().get("cache_dir")
    for dfa in Path(session).glob("tokenizer-dfa-*.bin") if session else []:
        (tmp_path / dfa.name).symlink_to(dfa)  # spares each child the tokenizer DFA's build
    text = "नमस्ते, ไม่เป็นไร"
    ids = tut.oracle.canonical(json.dumps(text, ensure_ascii=False))
    guide = tut.compiler.compile_regex(JSON_STRING, lazy=True)
    state, want = guide.initial_state, []
    for t in ids + [None]:
        want.append(np.flatnonzero(guide.mask(state)).tolist())
        if t is not None:
            state = guide.next_state(state, t)

    def masks_in_a_new_process():
        args = [sys.executable, "-c", _MASKS_IN_A_NEW_PROCESS, str(tut.path), str(tmp_path), JSON_STRING, json.dumps(ids)]
        out = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout)

    assert masks_in_a_new_process() == want  # builds it, keeps it
    (kept,) = tmp_path.glob("normal-form-nfc-*.bin")
    good = kept.read_bytes()
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0x01
    kept.write_bytes(bytes(damaged))
    assert masks_in_a_new_process() == want  # refuses it, builds, replaces it
    assert kept.read_bytes() == good
    assert masks_in_a_new_process() == want  # reads it
    assert kept.read_bytes() == good
