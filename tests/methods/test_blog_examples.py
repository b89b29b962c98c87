"""The blog post's examples with Mistral-7B (papers/tran-thien-2024-blog-*.md, "Three Challenges")."""

from __future__ import annotations

import collections

from helpers import enumerate_sequences

BOOLEAN = "boolean: ((true)|(false))"
NAMES = "( William)|( Theodore)"


def count_segmentations(oracle, text: str, include_byte_tokens: bool = True) -> int:
    """Number of sequences of non-special tokens whose bytes concatenate to ``text``: what the
    agnostic guide (every token sequence that decodes to a match) must accept for that string."""
    by_bytes = collections.Counter()
    pieces = {i: p for p, i in oracle.doc["model"]["vocab"].items()}
    for t in range(oracle.num_tokens):
        if t in oracle.special_ids or not oracle.has_token(t):
            continue
        if not include_byte_tokens and pieces.get(t, "").startswith("<0x"):
            continue
        by_bytes[oracle.token_bytes(t)] += 1
    b = text.encode("utf-8")
    ways = [0] * (len(b) + 1)
    ways[len(b)] = 1
    for i in range(len(b) - 1, -1, -1):
        ways[i] = sum(by_bytes[b[i:j]] * ways[j] for j in range(i + 1, len(b) + 1))
    return ways[0]


def test_boolean_cartesian_accepts_exactly_the_canonical_encodings(mistral, record_property):
    o = mistral.oracle
    guide = mistral.guide(BOOLEAN)
    expected = sorted([o.canonical("boolean: true"), o.canonical("boolean: false")])
    got = sorted(enumerate_sequences(guide))
    assert got == expected
    assert guide.count_sequences() == 2
    # Two sequences that share everything but their last token (both encodings end with " true" /
    # " false" after the same prefix, see the oracle) form a trie with len(prefix) + 2 edges; the
    # blog's Figure 3 has 5 states and 4 transitions for the same reason.
    edges = {(tuple(seq[:i]), seq[i]) for seq in expected for i in range(len(seq))}
    assert guide.num_transitions() == len(edges)
    record_property("num_states", guide.num_states)
    print(f"boolean cartesian: {guide.num_states} states, {guide.num_transitions()} transitions")


def test_boolean_agnostic_accepts_every_decoding(mistral, record_property):
    o = mistral.oracle
    guide = mistral.guide(BOOLEAN, method="agnostic")
    n = guide.count_sequences()
    expected = count_segmentations(o, "boolean: true") + count_segmentations(o, "boolean: false")
    without_bytes = count_segmentations(o, "boolean: true", False) + count_segmentations(o, "boolean: false", False)
    print(f"boolean agnostic: {n} accepted sequences ({guide.num_states} states) vs 2 canonical")
    record_property("agnostic_sequences", n)
    assert n > 2
    assert n == expected, (
        f"agnostic accepts {n} sequences; every decoding by non-special tokens gives {expected} "
        f"({without_bytes} without the <0xNN> byte tokens)"
    )
    # both canonical encodings are among them
    for s in ("boolean: true", "boolean: false"):
        state = guide.initial_state
        for t in o.canonical(s):
            state = guide.next_state(state, t)
        assert guide.is_final(state)


def test_names_first_step(mistral):
    o = mistral.oracle
    guide = mistral.guide(NAMES)
    first = set(guide.allowed_tokens(guide.initial_state).tolist())
    assert first == {o.canonical(" William")[0], o.canonical(" Theodore")[0]}
    assert sorted(enumerate_sequences(guide)) == sorted([o.canonical(" William"), o.canonical(" Theodore")])
    # The blog's point: agnostic lets " The" start " Theodore"; the canonical guide does not.
    the = o.token_id("\u2581The")
    assert o.token_bytes(the) == b" The"
    agnostic = mistral.guide(NAMES, method="agnostic")
    agnostic_first = set(agnostic.allowed_tokens(agnostic.initial_state).tolist())
    assert the in agnostic_first and the not in first
    assert first < agnostic_first
    print(f"names: cartesian first step {len(first)} tokens, agnostic {len(agnostic_first)}")
