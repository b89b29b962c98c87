"""Lazy guides (``compile_regex(..., lazy=True)``, cartesian only) against the eager construction, bit for bit.

* The API: which compiles are lazy, ``materialize()``, what a lazy guide refuses.
* Differential: masks (EOS included) of a lazy and an eager guide along canonical paths (strings
  sampled from the regex, encoded by the real tokenizer) and along random walks of both, for
  regexes of ``../shared/data`` on Mistral-7B, GPT-2, Llama 3 and Qwen2. A lazy guide builds its
  states in the order a decoder reaches them, with a liveness search that stops early; this is the
  test that keeps that fixpoint honest. Every lazy mask along the way must be non-empty (no dead
  end), and the lazy guide's own random walks must end in a final state.
* Sliced text states (a JSON string's contents, ``.*``: tokens shared per tokenizer, see
  ``rust/src/lazy/slice.rs``) give the eager masks on byte-level tokenizers, for two guides of
  one compiler (the second reuses the first one's slices).
* Threads sharing one fresh lazy guide see the masks a sequential run sees; threads with their
  own guides of one fresh compiler (filling its slices at once) see the eager masks.
* The memo's limit is reported by name, and the guide stays usable.
* A regex whose large counted repetitions are outlined into rules (Github_medium/o9942, refused
  as one automaton) is complete and sound against the real tokenizer.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from helpers import finishing_walks, walk
from oracle import require_shared

REGEX = r'\{"name": "[^"\\]{0,16}", "age": (0|[1-9][0-9]{0,2}), "ok": (true|false)\}'


def test_lazy_is_the_default_for_cartesian_only(pt, mistral):
    c = mistral.compiler
    assert c.compile_regex(REGEX).is_lazy
    assert c.compile_regex(REGEX, lazy=True).is_lazy
    assert not c.compile_regex(REGEX, lazy=False).is_lazy
    for method in ("agnostic", "auto"):
        assert not c.compile_regex(REGEX, method=method).is_lazy
    assert not c.compile_regex("(yes|no)", method="direct").is_lazy
    with pytest.raises(ValueError, match=r"lazy=True needs method='cartesian'"):
        c.compile_regex(REGEX, method="direct", lazy=True)
    assert c.compile_json_schema({"type": "boolean"}, lazy=True).is_lazy
    assert c.compile_json_schema({"type": "boolean"}).is_lazy
    assert not c.compile_json_schema({"type": "boolean"}, lazy=False).is_lazy
    guide = c.compile_regex(REGEX, lazy=True)
    assert "lazy=True" in repr(guide)
    stats = guide.stats()
    assert stats["lazy"] is True and 0 < stats["lazy_memo_bytes"] <= stats["max_lazy_memo_bytes"]


# Small enough for `first_difference`, which walks every transition of both guides.
SMALL = r'\{"name": "[A-Za-zé中 ]{1,3}", "age": [0-9]{1,3}\}'


def test_materialize_gives_the_eager_guide(pt, mistral):
    lazy = mistral.compiler.compile_regex(SMALL, lazy=True)
    eager = mistral.compiler.compile_regex(SMALL, lazy=False)
    built = lazy.materialize()
    assert not built.is_lazy and built.num_states == eager.num_states
    assert built.first_difference(eager) is None
    assert lazy.first_difference(eager) is None  # the whole language, walked on the lazy guide
    assert eager.materialize() is not None and not eager.materialize().is_lazy


def _masks_along(guide, ids):
    """Masks at every step of ``ids`` and after the last (EOS included); ``None`` once refused."""
    state, out = guide.initial_state, []
    for t in ids:
        out.append(guide.mask(state).copy())
        try:
            state = guide.next_state(state, t)
        except ValueError:
            out.append(None)
            return out
    out.append(guide.mask(state).copy())
    return out


def _compare(lazy, eager, ids, what):
    got, want = _masks_along(lazy, ids), _masks_along(eager, ids)
    assert len(got) == len(want), f"{what}: one guide refused the sequence earlier"
    for i, (a, b) in enumerate(zip(got, want)):
        if a is None or b is None:
            assert a is None and b is None, f"{what}: step {i}"
            continue
        assert np.array_equal(a, b), f"{what}: masks differ after {list(ids[:i])}"
        assert a.any(), f"{what}: empty mask after {list(ids[:i])} (a dead end)"


# (tokenizer, regexes to try): the first ones that compile eagerly within the test limits are
# compared. Byte-level tokenizers compile an eager JSON schema in ~0.5-2 s each on 2 cores.
DIFFERENTIAL = [("mistral7b", 16), ("gpt2", 6), ("llama3", 6), ("qwen2", 6)]


def _differential_regexes(n):
    from workloads import jsonschemabench_sample, regex_suite_sample

    jsb = [r["regex"] for r in jsonschemabench_sample(0.25)]
    suite = [r["regex"] for r in regex_suite_sample(0.1)]
    # Interleaved, so that a small n sees both sources.
    out = []
    for pair in zip(jsb, suite):
        out.extend(pair)
    return out[: 4 * n]


# A JSON string in both spellings (propertok's and outlines-core's character class), then free text.
LOOPS = (
    r'\{"a": "([^"\\\x00-\x1F]|\\["\\/bfnrt])*", '
    r'"b": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"\}\n(.)*'
)
LOOP_TEXTS = [
    '{"a": "Grüße aus Köln, \\"Zitat\\" und 東京タワー 🚀", "b": "x\\ny  z"}\nfree text: ça va? 😀 end',
    '{"a": "", "b": "नमस्ते دنیا ไทย   tab\\t"}\n',
    '{"a": "  leading and trailing  ", "b": "123 456.78e-9"}\n{"json": "again"}',
    # Every short escape, escapes in a row and code-like backslashes (the escape state is sliced).
    '{"a": "C:\\\\dir\\\\x \\/a\\b\\f\\r\\n\\t\\\\n", "b": "\\\"\\\\\\"print(\\\"hi\\\\n\\\")\\n"}\n',
]


# Not Qwen2: with its NFC normalizer the eager guide of free text is ~5,000 times larger (every
# state of the normal form's automaton); its sliced lazy guides are held to the oracle in
# tests/pre_tokenized/test_normalization.py and to the eager ones in the Rust brute force
# (build/pre_tokenized/tests.rs, with a normalizer).
@pytest.mark.parametrize("name", ["gpt2", "llama3"])
def test_sliced_states_equal_eager(pt, tokenizer_under_test, name):
    require_shared(f"the {name} tokenizer")
    tut = tokenizer_under_test(name)
    eager = tut.compiler.compile_regex(LOOPS, lazy=False)
    # A Compiler of its own: the session's shares first-token sets that earlier tests' guides
    # made, and a first guide of it might then walk no slice at all.
    compiler = tut.fresh_compiler(max_product_states=250_000, max_compile_seconds=20.0)
    first = compiler.compile_regex(LOOPS, lazy=True)
    walked = _compare_sliced(tut, first, eager, LOOP_TEXTS, range(4), 64, f"[{name}] guide 0")
    assert walked > 0, "the first guide took some of its text states' groups from a slice"
    # The second guide takes the first-token sets of the strings' contents that the first made
    # (shared by the `Compiler` through slice regions), so it walks fewer sliced states.
    second = compiler.compile_regex(LOOPS, lazy=True)
    again = _compare_sliced(tut, second, eager, LOOP_TEXTS, range(4), 64, f"[{name}] guide 1")
    assert again < walked, (again, walked)


def _compare_sliced(tut, lazy, eager, texts, seeds, walk_len, what):
    """``lazy`` gives ``eager``'s masks along the texts' oracle encodings and eager random walks;
    the number of its text states whose groups it took from a slice (fewer than all)."""
    for k, text in enumerate(texts):
        ids = tut.oracle.canonical(text)
        assert tut.oracle.decode(ids) == text.encode(), text
        _compare(lazy, eager, ids, f"{what}: text {k}")
    for seed in seeds:
        _compare(lazy, eager, eager.random_walk(seed, walk_len), f"{what}: eager walk {seed}")
    stats = lazy.stats()
    assert stats["lazy_sliced_text_states"] < stats["lazy_text_states"], stats
    return stats["lazy_sliced_text_states"]


# A counted JSON string: its states count characters, so they take a slice's tokens by their
# number of characters (eager guides for it cost seconds on Llama 3 and Qwen2, so GPT-2 only).
COUNTED = r'"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){0,6}"'
COUNTED_TEXTS = ['""', '"abc"', '"ab cd "', '"Köln!"', '"東京タワー"', '"\\"a\\n"', '"      "', '"😀 x"', '"abcdefg"']


def test_counted_sliced_states_equal_eager(pt, tokenizer_under_test):
    require_shared("the gpt2 tokenizer")
    tut = tokenizer_under_test("gpt2")
    eager = tut.compiler.compile_regex(COUNTED, lazy=False)
    lazy = tut.compiler.compile_regex(COUNTED, lazy=True)
    assert _compare_sliced(tut, lazy, eager, COUNTED_TEXTS, range(16), 16, "counted") > 0


def test_a_long_required_way_is_settled_by_the_probe(pt, tokenizer_under_test):
    """Github_medium/o53044 (twelve required string keys): a probe off the way to acceptance went
    round a cycle of text states until its budget ran out, and the full search then expanded
    ~42,000 nodes (2,774 text states, 15 s) to settle the start. With the probe kept off its own
    path it takes ~330 text states."""
    require_shared("the llama3 tokenizer and data/jsonschemabench_regex.jsonl")
    from oracle import data_dir

    tut = tokenizer_under_test("llama3")
    rows = [json.loads(line) for line in open(data_dir() / "jsonschemabench_regex.jsonl", encoding="utf-8")]
    regex = next(r["regex"] for r in rows if r["id"] == "Github_medium/o53044")
    guide = tut.compiler.compile_regex(regex, lazy=True)
    assert guide.stats()["lazy_text_states"] < 1000, guide.stats()
    doc = (
        '{"dc_description_s": "d", "dc_identifier_s": "i", "dc_rights_s": "Public", "dc_title_s": "t", '
        '"dct_provenance_s": "p", "georss_box_s": "b", "layer_geom_type_s": "Line", "layer_id_s": "l", '
        '"layer_modified_dt": "m", "layer_slug_s": "s", "solr_geom": "ENVELOPE(1, 2, 3, 4)", '
        '"solr_year_i": 2000, "uuid": "u"}'
    )
    ok, why = walk(guide, tut.oracle.canonical(doc))
    assert ok, why


@pytest.mark.parametrize("name, n", DIFFERENTIAL)
def test_lazy_equals_eager_on_shared_regexes(pt, tokenizer_under_test, name, n):
    require_shared(f"the {name} tokenizer and the regexes of data/")
    tut = tokenizer_under_test(name)
    o = tut.oracle
    compiled = 0
    for k, pattern in enumerate(_differential_regexes(n)):
        if compiled == n:
            break
        try:
            eager = tut.compiler.compile_regex(pattern, lazy=False)
        except (ValueError, pt.LimitExceeded):
            continue  # refused regexes (and their lazy twins) are the oracle suite's business
        compiled += 1
        lazy = tut.compiler.compile_regex(pattern, lazy=True)
        assert lazy.is_lazy
        what = f"[{name}] {pattern[:60]!r}"
        for s in pt.ByteDfa(pattern).sample(4, seed=k, max_len=96):
            text = s.decode("utf-8", errors="replace")
            ids = o.canonical(text)
            if o.decode(ids) == s:
                _compare(lazy, eager, ids, f"{what} canonical({text[:40]!r})")
        for seed in range(3):
            _compare(lazy, eager, eager.random_walk(seed, 48), f"{what} eager walk {seed}")
            _compare(lazy, eager, lazy.random_walk(seed, 48), f"{what} lazy walk {seed}")
    assert compiled == n, f"only {compiled} of the candidate regexes compiled eagerly on {name}"


def test_threads_sharing_a_fresh_guide_see_sequential_masks(pt, mistral):
    eager = mistral.compiler.compile_regex(REGEX, lazy=False)
    walks = [eager.random_walk(seed, 40) for seed in range(16)]
    want = [_masks_along(eager, w) for w in walks]
    for _ in range(3):
        _assert_threads_see(mistral.compiler.compile_regex(REGEX, lazy=True), walks, want)


def _assert_threads_see(guide, walks, want):
    """8 threads share ``guide``, thread k walking ``walks[2k]`` and ``walks[2k + 1]`` (in
    opposite orders on odd threads), and see the masks ``want`` along each."""
    assert len(walks) == 16
    got: list = [None] * len(walks)
    start = threading.Barrier(8)

    def run(k):
        start.wait()
        for i in (2 * k, 2 * k + 1) if k % 2 else (2 * k + 1, 2 * k):
            got[i] = _masks_along(guide, walks[i])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w) and all(np.array_equal(a, b) for a, b in zip(g, w)), f"walk {i}"


@pytest.mark.parametrize("name", ["mistral7b", "llama3"])
def test_prefetched_guides_see_the_eager_masks(pt, tokenizer_under_test, name):
    """``prefetch_seconds`` fills states in the compile and changes no mask: a prefetched lazy
    guide, shared by 8 threads, gives the eager guide's masks along random walks."""
    tc = tokenizer_under_test(name)
    regex = r'\{"on": (true|false), "size": (0|[1-9][0-9]*), "tags": \[("[a-z ]+"(, "[a-z ]+")*)?\]\}'
    eager = tc.compiler.compile_regex(regex, lazy=False)
    walks = [eager.random_walk(seed, 40) for seed in range(16)]
    want = [_masks_along(eager, w) for w in walks]
    compiler = pt.Compiler(tc.vocab, prefetch_seconds=5.0, **tc._cache_kwargs())
    _assert_threads_see(compiler.compile_regex(regex, lazy=True), walks, want)


def test_threads_filling_one_compilers_slices_see_eager_masks(pt, tokenizer_under_test):
    """Slices are shared by every lazy guide of a Compiler and filled on first use: 8 threads,
    each with its own fresh guide of one fresh Compiler (cold slice cache), walk the same texts at
    once and must see the eager masks."""
    require_shared("the gpt2 tokenizer")
    tut = tokenizer_under_test("gpt2")
    eager = tut.compiler.compile_regex(LOOPS, lazy=False)
    walks = [tut.oracle.canonical(text) for text in LOOP_TEXTS] + [eager.random_walk(s, 48) for s in range(5)]
    want = [_masks_along(eager, w) for w in walks]
    compiler = tut.fresh_compiler()
    got: list = [None] * 8
    start = threading.Barrier(8)

    def run(k):
        guide = compiler.compile_regex(LOOPS, lazy=True)
        start.wait()
        order = walks[k % len(walks) :] + walks[: k % len(walks)]
        got[k] = (guide, [_masks_along(guide, w) for w in order])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (guide, masks) in enumerate(got):
        order = want[k % len(want) :] + want[: k % len(want)]
        for i, (g, w) in enumerate(zip(masks, order)):
            assert len(g) == len(w) and all(np.array_equal(a, b) for a, b in zip(g, w)), f"thread {k}, walk {i}"
    # The first guide to reach a string's contents walks its slice; the others may take the
    # first-token sets it made (shared through slice regions) and walk none.
    assert any(guide.stats()["lazy_sliced_text_states"] > 0 for guide, _ in got), [g.stats() for g, _ in got]


def test_memo_limit_is_reported_by_name_and_the_guide_stays_usable(pt, mistral):
    after_compile = mistral.compiler.compile_regex(REGEX, lazy=True).stats()["lazy_memo_bytes"]
    eager = mistral.compiler.compile_regex(REGEX, lazy=False)
    tight = pt.Compiler(mistral.vocab, max_guide_bytes=after_compile + 64)
    guide = tight.compile_regex(REGEX, lazy=True)
    m = guide.matcher()
    bitmask = pt.allocate_token_bitmask(1, guide.vocab_size)
    with pytest.raises(pt.LimitExceeded, match=r"max_guide_bytes = \d+ .*lazy guide"):
        for t in eager.random_walk(5, 40):
            assert m.accept_token(t)
            m.fill_next_token_bitmask(bitmask)
    # What was built stays: the initial mask is the eager one.
    assert np.array_equal(guide.mask(guide.initial_state), eager.mask(eager.initial_state))


def test_a_large_regex_is_determinized_on_demand(pt, mistral):
    """A regex whose DFA passes the lazy compile's bound (`Compiler::LAZY_DFA_BOUND`: 10,000
    states before minimisation; here 64 fields with 150-byte keys, 10,487 states) is not
    determinized by the compile: its DFA is built as decoding reaches it. Same masks as the
    eager guide along walks, and ``materialize()`` builds the eager guide from the regex."""
    regex = r"\{" + ", ".join(f'"field_{i}_{"x" * 140}": (true|false|"[a-z]?")' for i in range(64)) + r"\}"
    c = mistral.compiler
    lazy, eager = c.compile_regex(regex, lazy=True), c.compile_regex(regex, lazy=False)
    assert lazy.stats()["lazy_text_automaton"] == "DFA on demand"
    assert c.compile_regex(SMALL, lazy=True).stats()["lazy_text_automaton"] == "minimal DFA"
    for seed in range(6):
        _compare(lazy, eager, eager.random_walk(seed, 300), f"eager walk {seed}")
        _compare(lazy, eager, lazy.random_walk(seed, 300), f"lazy walk {seed}")
    built = lazy.materialize()
    assert not built.is_lazy and built.num_states == eager.num_states
    assert built.first_difference(eager) is None


# Github_medium/o9942: an array of user objects, each with role arrays of up to 1,000 objects and
# e-mail strings of up to 1,024 characters. As one automaton its Thompson NFA is past 256 MB (it
# was refused at max_byte_dfa_states); outlined (rust/src/regex/outline.rs), each repeated
# object is a rule that the repetitions call.
O9942_DOCS = [
    '[{"id": "0123456789abcdefABCDEF01", "email": "x@y.z", "role": "admin"}]',
    '[{"id": "0123456789abcdefABCDEF01", "email": "Grüße, 東京", "role": "view", "applicationRoles": '
    '[{"resourceId": "aaaaaaaaaaaaaaaaaaaaaaaa", "role": "none"}, {"resourceId": "bbbbbbbbbbbbbbbbbbbbbbbb", '
    '"role": "view"}]}, {"role": "edit"}]',
    '[{"email":"a"},{"role":"none"}]',
]


@pytest.mark.parametrize("name", ["mistral7b", "llama3"])
def test_large_counted_repetitions_are_outlined_and_exact(pt, tokenizer_under_test, name):
    """Complete: each document's canonical encoding walks to a final state. Sound: finishing
    random walks of the guide re-encode to themselves and decode into the regex (Python's
    ``re``), with no empty mask on the way."""
    import re

    require_shared(f"the {name} tokenizer and data/jsonschemabench_regex.jsonl")
    from oracle import data_dir

    tut = tokenizer_under_test(name)
    rows = [json.loads(line) for line in open(data_dir() / "jsonschemabench_regex.jsonl", encoding="utf-8")]
    regex = next(r["regex"] for r in rows if r["id"] == "Github_medium/o9942")
    guide = tut.compiler.compile_regex(regex, lazy=True)
    assert guide.stats()["lazy_text_automaton"] == "outlined rules"
    python = re.compile(regex)
    for doc in O9942_DOCS:
        assert python.fullmatch(doc), doc
        ok, why = walk(guide, tut.oracle.canonical(doc))
        assert ok, f"{doc[:40]!r}: {why}"
    walks = finishing_walks(guide, 6, 120)
    for seq, canonical in zip(walks, tut.oracle.is_canonical_batch(walks)):
        text = tut.oracle.decode(seq).decode("utf-8")
        assert canonical, f"not canonical: {text[:80]!r}"
        assert python.fullmatch(text), text[:80]


def test_slice_sets_kept_in_the_cache_dir_give_the_eager_masks(pt, mistral, tmp_path):
    """A lazy guide's slice group sets (a JSON string's contents after each kind of text) are kept
    in ``cache_dir`` beside the tokenizer DFA, and the next compiler reads them instead of walking
    the vocabulary again, each file of contents once, with the eager guide's masks."""
    regex = r'\{"note": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"\}'
    ids = mistral.oracle.canonical('{"note": "Grüß 2024, \\"x\\" at 10:30 東京"}')
    eager = mistral.compiler.compile_regex(regex, lazy=False)
    made = []
    for round in range(2):
        compiler = pt.Compiler(mistral.vocab, cache_dir=str(tmp_path))
        _compare(compiler.compile_regex(regex, lazy=True), eager, ids, f"round {round}")
        stats = compiler.tokenizer_dfa_stats()
        made.append((stats["slice_sets_walked"], stats["slice_sets_loaded"]))
    walked = made[0][0]
    assert walked > 0 and made == [(walked, 0), (0, walked)], made
    # One key's file per set, naming its contents' file (sets of the same contents share one).
    assert len(list(tmp_path.glob("slices-*/*.bin"))) == walked
    contents = len(list(tmp_path.glob("slices-*/*.set")))
    assert 1 <= contents <= walked
    assert stats["slice_set_contents_read"] == contents


def test_regions_kept_in_the_cache_dir_are_read_by_the_next_compiler(pt, tokenizer_under_test, tmp_path):
    """The regions that shared first-token sets are keyed by (a string's contents from one start)
    are kept in ``cache_dir`` and read by the next compiler instead of explored, with the same
    masks (GPT-2: Mistral-7B has no pre-tokenizer, so no region)."""
    require_shared("the gpt2 tokenizer")
    tut = tokenizer_under_test("gpt2")
    regex = r'\{"a": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*", "b": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"\}'
    ids = tut.oracle.canonical('{"a": "Grüß 2024, x at 10:30", "b": "東京 12 go"}')
    made, masks = [], []
    for round in range(2):
        compiler = pt.Compiler(tut.vocab, cache_dir=str(tmp_path))
        masks.append(_masks_along(compiler.compile_regex(regex, lazy=True), ids))
        stats = compiler.tokenizer_dfa_stats()
        made.append((stats["slice_regions_found"], stats["slice_regions_loaded"]))
    found = made[0][0]
    assert found > 0 and made == [(found, 0), (0, found)], made
    assert len(list(tmp_path.glob("slices-*/*.region"))) == found
    assert len(masks[0]) == len(masks[1]) == len(ids) + 1
    for i, (a, b) in enumerate(zip(*masks)):
        assert np.array_equal(a, b), f"masks differ after {ids[:i]}"
