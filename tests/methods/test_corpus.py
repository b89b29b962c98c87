"""The in-repository corpus (``tests/corpus/*.toml``) against every method; see its README.md.

Runs without ``../shared``: the tokenizers are the embedded Mistral-7B and synthetic tables. The
Rust twin (``rust/tests/corpus.rs``) runs the same files through the crate.
"""

from __future__ import annotations

import functools

import pytest
from corpus_format import METHODS, CorpusFile, load_corpus
from helpers import bit_is_set
from oracle import Oracle

CORPUS = load_corpus()
CASES = [(f, c) for f in CORPUS for c in f.cases]
# What the Python binding raises for each error kind, and how its message starts (the core's
# `Error` variants: see rust/src/error.rs).
ERROR_PREFIX = {
    "empty_language": "empty language:",
    "invalid_regex": "invalid regex:",
    "unsupported_regex": "unsupported regex feature:",
}


def case_id(item) -> str:
    return item[1].id


@functools.lru_cache(maxsize=None)
def compiler_for(path) -> object:
    import propertok as pt

    file = next(f for f in CORPUS if f.path == path)
    return pt.Compiler(pt.Vocabulary.from_json(file.tokenizer_json()))


@functools.lru_cache(maxsize=None)
def oracle_for_file(path) -> Oracle:
    file = next(f for f in CORPUS if f.path == path)
    return Oracle(file.tokenizer_json(), name=file.tokenizer_name)


@functools.lru_cache(maxsize=None)
def guide_for(path, regex: str, method: str):
    return compiler_for(path).compile_regex(regex, method=method)


def accepts(guide, ids) -> bool:
    """Whether the guide allows ``ids`` token by token (read from the masks, and ``next_state``
    must agree) and then EOS."""
    state = guide.initial_state
    for t in ids:
        if not bit_is_set(guide.mask(state), t):
            return False
        state = guide.next_state(state, t)
    return guide.is_final(state) and all(bit_is_set(guide.mask(state), e) for e in guide.eos_token_ids)


def test_the_corpus_is_not_empty():
    assert len(CORPUS) >= 3 and len(CASES) >= 30
    assert {f.tokenizer_name for f in CORPUS} >= {"mistral7b"}
    assert sum(len(c.refuse) for _, c in CASES) >= 50


@pytest.mark.parametrize("file", CORPUS, ids=lambda f: f.path.stem)
def test_ids_are_the_tokenizers(file: CorpusFile):
    """Every accepted id list is what the real tokenizer produces, every refused one is not (a
    stale corpus fails here, not silently later)."""
    oracle = oracle_for_file(file.path)
    for case in file.cases:
        for a in case.accept:
            assert oracle.canonical(a.text) == a.ids, f"{case.name}: {a.text!r}"
        for r in case.refuse:
            if r.in_language:  # another spelling of an accepted string: never canonical
                assert not oracle.is_canonical(r.ids), f"{case.name}: {r.why}"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("item", CASES, ids=case_id)
def test_case(item, method):
    file, case = item
    if method in case.skip:
        pytest.skip(f"{case.id}: {method}: {case.skip[method]}")
    if method in case.limit:
        import propertok as pt

        with pytest.raises(pt.LimitExceeded, match=case.limit[method]):
            guide_for(file.path, case.regex, method)
        return
    if case.error is not None:
        with pytest.raises(ValueError) as info:
            guide_for(file.path, case.regex, method)
        assert str(info.value).startswith(ERROR_PREFIX[case.error]), str(info.value)
        return
    guide = guide_for(file.path, case.regex, method)
    for a in case.accept:
        assert accepts(guide, a.ids), f"{case.id} [{method}]: refused {a.text!r} = {a.ids}"
    for r in case.refuse:
        expected = method == "agnostic" and r.in_language
        assert accepts(guide, r.ids) == expected, f"{case.id} [{method}]: {r.ids} ({r.why})"


@pytest.mark.parametrize("item", [i for i in CASES if i[1].error is None], ids=case_id)
def test_canonical_methods_accept_one_language(item):
    file, case = item
    methods = [m for m in ("cartesian", "direct", "auto") if m not in case.skip and m not in case.limit]
    guides = {m: guide_for(file.path, case.regex, m) for m in methods}
    first = guides[methods[0]]
    for m in methods[1:]:
        if guides[m].method == first.method:
            continue  # `auto` fell back to the same construction: nothing to compare
        assert first.first_difference(guides[m]) is None, f"{case.id}: {methods[0]} != {m}"
    if "agnostic" not in case.skip and "agnostic" not in case.limit:
        # A superset: every canonical first token is an agnostic first token.
        agnostic = guide_for(file.path, case.regex, "agnostic")
        canonical = set(first.allowed_tokens(first.initial_state))
        assert canonical <= set(agnostic.allowed_tokens(agnostic.initial_state)), case.id


def test_a_case_is_refused_when_its_fields_are_wrong(tmp_path, monkeypatch):
    """The loader refuses unknown error kinds and methods instead of ignoring them."""
    import corpus_format

    (tmp_path / "bad.toml").write_text(
        '[tokenizer]\nname = "x"\nfile = "x"\n[[case]]\nname = "c"\nregex = "a"\nerror = "nope"\n', encoding="utf-8"
    )
    monkeypatch.setattr(corpus_format, "CORPUS_DIR", tmp_path)
    with pytest.raises(ValueError, match="unknown error kind"):
        corpus_format.load_corpus()
