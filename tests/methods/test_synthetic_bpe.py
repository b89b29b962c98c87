"""Brute force on small synthetic merge tables: the appendix's Algorithm 4 (all token pairs) with
the real ``tokenizers`` library, against propertok's tokenizer DFA as seen through a cartesian
guide; plus exhaustive short strings (complete) and every short guide path (sound).

Why a char-class regex over the alphabet is the right probe: in ``[abcd]+`` every non-empty string
is in the language and every state after a token is final, so the exact guide

* allows at the start exactly the tokens that begin some canonical sequence; for a pure merge table
  those are the *emittable* tokens, ``encode(decode(t)) == [t]`` (the span of a final token is
  merged exactly as it would be alone, so a token that occurs anywhere also encodes to itself);
* allows after the single token ``t1`` exactly the ``t2`` with ``encode(decode(t1) + decode(t2)) ==
  [t1, t2]`` (canonical sequences are prefix-closed by the same span argument, so a pair that is not
  canonical cannot be extended into a canonical sequence).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from strategies import merge_tables
from synthetic import MergeTableBPE, SyntheticOracle, all_strings, char_class
from helpers import walk

FIXED_TABLES = {
    # a chain: "abc" needs (a,b) first
    "chain": ("abc", [("a", "b"), ("ab", "c")]),
    # (a,a) merges pair left to right: "aaa" -> aa a
    "aa": ("ab", [("a", "a"), ("aa", "b"), ("b", "a")]),
    "aa_aa": ("ab", [("a", "a"), ("aa", "aa"), ("aa", "a"), ("b", "b")]),
    # the blog's Table 1
    "blog_table_1": ("abc", [("a", "b"), ("a", "a"), ("a", "c")]),
    # a merge whose part is created only by a later merge (as in Mistral-7B's table)
    "out_of_order": ("bcd", [("b", "cd"), ("c", "d")]),
    "out_of_order_chain": ("abcd", [("a", "bcd"), ("b", "cd"), ("c", "d"), ("a", "b")]),
    "out_of_order_aa": ("abc", [("aa", "b"), ("a", "a"), ("b", "c"), ("aa", "bc")]),
    # the same string made by two different merges
    "two_ways": ("abc", [("a", "bc"), ("ab", "c"), ("a", "b"), ("b", "c")]),
    # "abc" = a + bc can never be produced: (a,b) always wins over (b,c)
    "unreachable": ("abc", [("a", "b"), ("b", "c"), ("a", "bc")]),
    # a table mixing all of the above on four letters
    "mixed": ("abcd", [("c", "d"), ("a", "a"), ("ab", "cd"), ("b", "cd"), ("aa", "bcd"), ("d", "a"), ("a", "b")]),
}


def compile_synthetic(pt, bpe: MergeTableBPE, regex: str, method: str = "cartesian"):
    vocab = pt.Vocabulary.from_json(bpe.to_json())
    compiler = pt.Compiler(vocab)
    return vocab, compiler, compiler.compile_regex(regex, method=method)


def check_table(pt, bpe: MergeTableBPE, regex: str | None = None, max_len: int | None = None) -> dict:
    """All the brute-force checks for one merge table; returns counts, raises on any failure."""
    oracle = SyntheticOracle(bpe)
    regex = regex or char_class(bpe.alphabet)
    vocab, compiler, guide = compile_synthetic(pt, bpe, regex)
    eos = bpe.eos_id

    # the vocabulary as propertok reads it
    assert vocab.eos_token_ids == [eos]
    assert vocab.num_tokens == eos + 1
    assert [vocab.token_bytes(t) for t in oracle.token_ids] == [bpe.pieces[t].encode() for t in oracle.token_ids]
    assert guide.eos_token_ids == [eos]

    emittable = oracle.emittable()
    pairs = oracle.canonical_pairs()
    problems = []

    # tokens that can never be emitted are never allowed; emittable ones are allowed at the start
    start = set(guide.allowed_tokens(guide.initial_state).tolist())
    assert not guide.is_final(guide.initial_state)
    if start != emittable:
        problems.append(
            f"start tokens: missing {sorted(bpe.pieces[t] for t in emittable - start)}, "
            f"extra {sorted(bpe.pieces.get(t, t) for t in start - emittable)}"
        )

    # Algorithm 4: the allowed successors of every emittable token
    for t1 in sorted(emittable & start):
        state = guide.next_state(guide.initial_state, t1)
        if not guide.is_final(state):
            problems.append(f"state after {bpe.pieces[t1]!r} is not final")
        got = set(guide.allowed_tokens(state).tolist())
        if (eos in got) != guide.is_final(state):
            problems.append(f"EOS allowed={eos in got} but is_final={guide.is_final(state)} after {bpe.pieces[t1]!r}")
        got.discard(eos)
        expected = {t2 for t2 in oracle.token_ids if (t1, t2) in pairs}
        if got != expected:
            problems.append(
                f"after {bpe.pieces[t1]!r}: missing {sorted(bpe.pieces[t] for t in expected - got)}, "
                f"extra {sorted(bpe.pieces[t] for t in got - expected)}"
            )

    # complete: every short string's canonical encoding is accepted
    max_len = max_len or (5 if len(bpe.alphabet) >= 4 else 6)
    strings = all_strings(bpe.alphabet, max_len)
    for s, ids in zip(strings, oracle.canonical_batch(strings)):
        ok, why = walk(guide, ids)
        if not ok:
            problems.append(f"canonical({s!r}) = {[bpe.pieces[t] for t in ids]} refused: {why}")

    # sound: every guide path of up to 3 tokens (all are accepted: every state is final) is canonical
    paths = []

    def dfs(state, prefix):
        if prefix:
            paths.append(list(prefix))
        if len(prefix) == 3:
            return
        for t in guide.allowed_tokens(state).tolist():
            if t != eos:
                dfs(guide.next_state(state, t), prefix + [t])

    dfs(guide.initial_state, [])
    for path, ok in zip(paths, oracle.is_canonical_batch(paths)):
        if not ok:
            problems.append(f"guide path {[bpe.pieces[t] for t in path]} is not canonical "
                            f"(canonical is {[bpe.pieces[t] for t in oracle.canonical(bpe.decode(path))]})")

    assert not problems, f"{bpe!r}, regex {regex!r}:\n  " + "\n  ".join(problems[:25])
    return {"pairs": len(emittable) * len(oracle.token_ids), "canonical_pairs": len(pairs),
            "strings": len(strings), "paths": len(paths), "unreachable": len(oracle.token_ids) - len(emittable)}


@pytest.mark.parametrize("name", sorted(FIXED_TABLES))
def test_fixed_merge_table(pt, name, record_property):
    alphabet, merges = FIXED_TABLES[name]
    bpe = MergeTableBPE(alphabet, merges)
    counts = check_table(pt, bpe)
    print(f"{name}: {counts}")
    for k, v in counts.items():
        record_property(k, v)


@pytest.mark.parametrize("name", ["chain", "out_of_order_chain", "mixed"])
def test_fixed_merge_table_with_dot_plus(pt, name):
    """Same checks with ``(?s:.+)``: the synthetic vocabulary only covers its alphabet, so the
    language the tokenizer can produce is the same as with the char class."""
    alphabet, merges = FIXED_TABLES[name]
    check_table(pt, MergeTableBPE(alphabet, merges), regex="(?s:.+)")


def test_unreachable_token_never_allowed(pt):
    bpe = MergeTableBPE(*FIXED_TABLES["unreachable"])
    abc = bpe.vocab["abc"]
    assert abc not in SyntheticOracle(bpe).emittable()  # hand reasoning in FIXED_TABLES
    _, _, guide = compile_synthetic(pt, bpe, "[abc]+")
    seen, stack = {guide.initial_state}, [guide.initial_state]
    while stack:  # every reachable state
        s = stack.pop()
        assert abc not in guide.allowed_tokens(s).tolist(), f"unreachable token 'abc' allowed in state {s}"
        for t in guide.allowed_tokens(s).tolist():
            if t != bpe.eos_id:
                n = guide.next_state(s, t)
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
    # while the agnostic guide (every decoding) does allow it
    _, _, agnostic = compile_synthetic(pt, bpe, "[abc]+", method="agnostic")
    assert abc in agnostic.allowed_tokens(agnostic.initial_state).tolist()


@pytest.mark.parametrize("method", ["agnostic", "cartesian"])
def test_no_dead_end_when_the_vocabulary_cannot_spell_a_branch(pt, method):
    """Regex ``ab|ca`` over a vocabulary without ``b``: ``ab`` cannot be spelled, so the token
    ``a`` must not be allowed first (it would lead to a state no token sequence can finish);
    found for ``agnostic`` by the regex_guide fuzzer (fuzz/regressions/regex_guide/)."""
    bpe = MergeTableBPE("ac", [("c", "a")])
    _, _, guide = compile_synthetic(pt, bpe, "ab|ca", method=method)
    first = set(guide.allowed_tokens(guide.initial_state).tolist())
    assert bpe.vocab["a"] not in first
    assert first <= {bpe.vocab["c"], bpe.vocab["ca"]} and first
    with pytest.raises(ValueError, match="empty language"):
        compile_synthetic(pt, bpe, "ab", method=method)


def test_tokenizer_dfa_construction_named(pt):
    """``tokenizer_dfa_construction`` is "priority-timeline" for well-ordered tables (every merge's
    parts exist before it) and others alike (documented in _core.pyi)."""
    well = MergeTableBPE(*FIXED_TABLES["chain"])
    bad = MergeTableBPE(*FIXED_TABLES["out_of_order"])
    assert well.is_well_ordered() and not bad.is_well_ordered()
    _, c1, _ = compile_synthetic(pt, well, "[abc]+")
    _, c2, _ = compile_synthetic(pt, bad, "[bcd]+")
    assert c1.tokenizer_dfa_construction == "priority-timeline"
    assert c2.tokenizer_dfa_construction == "priority-timeline"
    # "unreachable" has exactly one token the merges never produce ("abc", see FIXED_TABLES),
    # "out_of_order" none (b c d -> b cd -> bcd); both have the same single special token.
    _, c3, _ = compile_synthetic(pt, MergeTableBPE(*FIXED_TABLES["unreachable"]), "[abc]+")
    assert c3.tokenizer_dfa_stats()["num_unreachable_tokens"] == c2.tokenizer_dfa_stats()["num_unreachable_tokens"] + 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(table=merge_tables())
def test_random_merge_tables(pt, table):
    alphabet, merges = table
    check_table(pt, MergeTableBPE(alphabet, merges))


def test_random_tables_include_out_of_order_ones():
    """The strategy does produce the hard case (a merge ranked before the merge creating its part)."""
    from hypothesis import find

    found = find(merge_tables(), lambda t: not MergeTableBPE(*t).is_well_ordered())
    assert not MergeTableBPE(*found).is_well_ordered()
    # and (a, a) merges
    found = find(merge_tables(), lambda t: any(a == b for a, b in t[1]))
    assert any(a == b for a, b in found[1])


def test_pair_oracle_is_algorithm_4():
    """The pair oracle used above, checked by hand on the blog's Table 1 table:
    (a,b),(a,a),(a,c). After 'a', 'a' is refused (a a -> aa), 'b' refused (a b -> ab), 'c' refused
    (a c -> ac); after 'aa', 'a' is allowed (aa a is how "aaa" encodes)."""
    bpe = MergeTableBPE(*FIXED_TABLES["blog_table_1"])
    pairs = SyntheticOracle(bpe).canonical_pairs()
    v = bpe.vocab
    assert (v["a"], v["a"]) not in pairs and (v["a"], v["b"]) not in pairs and (v["a"], v["c"]) not in pairs
    assert (v["aa"], v["a"]) in pairs
    assert (v["b"], v["a"]) in pairs and (v["c"], v["a"]) in pairs
    # "ab" then "b": a b b -> ab b, canonical
    assert (v["ab"], v["b"]) in pairs
