"""Hypothesis strategies shared by the test modules."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def merge_tables(draw, min_merges: int = 3, max_merges: int = 12, max_token_len: int = 6):
    """``(alphabet, merges)``: an alphabet of 3-4 letters and 3-12 distinct merges whose parts all
    exist (letters or results of other merges), in a random rank order, so that merges whose parts
    are only created by a *later* merge are common, as in Mistral-7B's table."""
    alphabet = "abcd"[: draw(st.integers(3, 4))]
    want = draw(st.integers(min_merges, max_merges))
    tokens = list(alphabet)
    merges: list[tuple[str, str]] = []
    attempts = 0
    while len(merges) < want and attempts < 200:
        attempts += 1
        a = draw(st.sampled_from(tokens))
        b = draw(st.sampled_from(tokens))
        if (a, b) in merges or len(a + b) > max_token_len:
            continue
        merges.append((a, b))
        if a + b not in tokens:
            tokens.append(a + b)
    order = draw(st.permutations(range(len(merges))))
    return alphabet, [merges[i] for i in order]
