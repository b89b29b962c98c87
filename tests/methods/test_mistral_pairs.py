"""Mistral-7B's tokenizer DFA against the real tokenizer: the first step exactly, then >= 100,000
random token pairs, through a cartesian guide for ``(?s:.+)``.

With ``(?s:.+)`` every non-empty valid UTF-8 string is in the language, so for the exact guide:

* at the start, a token whose bytes are valid UTF-8 is allowed iff ``canonical(text) == [t]`` (a
  token that begins a canonical sequence ending on a character boundary is canonical alone: the span
  of a final BPE token is merged exactly as it would be alone); a ``<0xNN>`` byte-fallback token
  that is not a whole character is allowed iff ``NN`` starts the UTF-8 of some character that has no
  piece of its own (such a character is encoded as its bytes);
* after ``t1``, a token ``t2`` with ``decode([t1, t2])`` valid UTF-8 is allowed iff
  ``canonical(decode([t1, t2])) == [t1, t2]`` (canonical sequences are prefix-closed);
* the state after ``t1`` is final iff ``decode([t1])`` is valid UTF-8.
"""

from __future__ import annotations

import collections
import re

import numpy as np

from helpers import mask_bits

DOT_PLUS = "(?s:.+)"
NUM_PAIRS = 120_000  # so that >= 100,000 remain after dropping pairs that are not valid UTF-8
MIN_CHECKED = 100_000
SEED = 7

_BYTE_PIECE = re.compile(r"^<0x([0-9A-F]{2})>$")


def _pieces(oracle) -> dict[int, str]:
    return {i: p for p, i in oracle.doc["model"]["vocab"].items()}


def _valid_text(b: bytes):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def expected_start_tokens(oracle) -> tuple[set[int], dict]:
    """The tokens allowed first under ``(?s:.+)``, derived from the real tokenizer."""
    pieces = _pieces(oracle)
    specials = set(oracle.special_ids)
    ids = [t for t in sorted(pieces) if t not in specials]
    texts = {t: _valid_text(oracle.token_bytes(t)) for t in ids}
    valid = [t for t in ids if texts[t] is not None]
    allowed = {t for t, enc in zip(valid, oracle.canonical_batch([texts[t] for t in valid])) if enc == [t]}

    # Characters with a piece of their own are those whose normalized form (" " -> "▁") is a
    # one-character piece; every other character goes to byte fallback. Checked on a sample below.
    single = {p.replace("\u2581", " ") for p in pieces.values() if len(p) == 1} | {"\u2581"}
    leading = set()
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if c not in single:
            leading.add(c.encode("utf-8")[0])
    byte_tokens = {int(m.group(1), 16): t for t, p in pieces.items() if (m := _BYTE_PIECE.match(p))}
    partial = [t for t in ids if texts[t] is None]
    assert set(partial) <= set(byte_tokens.values()), "only <0xNN> pieces can be partial UTF-8"
    for b, t in byte_tokens.items():
        if b >= 0x80:
            assert texts[t] is None
            if b in leading:
                allowed.add(t)

    # the "own piece or byte fallback" rule, checked with the real tokenizer on 3000 characters
    rng = np.random.default_rng(SEED)
    cps = [int(c) for c in rng.integers(0x20, 0x30000, size=4000) if not 0xD800 <= c <= 0xDFFF][:3000]
    chars = [chr(c) for c in cps]
    for c, enc in zip(chars, oracle.canonical_batch(chars)):
        if c in single:
            assert len(enc) == 1, (c, enc)
        else:
            assert enc == [byte_tokens[b] for b in c.encode("utf-8")], (c, enc)
    info = {"valid_tokens": len(valid), "partial_tokens": len(partial), "allowed_first": len(allowed)}
    return allowed, info


def test_first_step_mistral(mistral, record_property):
    o, guide = mistral.oracle, mistral.guide(DOT_PLUS)
    expected, info = expected_start_tokens(o)
    bits = mask_bits(guide.mask(guide.initial_state), o.num_tokens)
    got = set(np.flatnonzero(bits).tolist())
    assert not guide.is_final(guide.initial_state)
    pieces = _pieces(o)
    missing = sorted(expected - got)
    extra = sorted(got - expected)
    print(f"mistral7b first step: {info}, propertok allows {len(got)}")
    record_property("first_step", info)
    assert not missing and not extra, (
        f"{len(missing)} canonical tokens refused, e.g. {[pieces.get(t) for t in missing[:10]]}; "
        f"{len(extra)} non-canonical tokens allowed, e.g. {[pieces.get(t) for t in extra[:10]]}"
    )


def sample_pairs(o, allowed_first: list[int], n: int, rng) -> list[tuple[int, int]]:
    """Half uniform pairs, half biased towards merges: t2 is a right merge partner of t1 (a quarter
    of all pairs) or a token starting with one (another quarter), so that t1 and the start of t2
    tend to merge and the pair is often not canonical."""
    pieces = _pieces(o)
    specials = set(o.special_ids)
    ids = np.array([t for t in sorted(pieces) if t not in specials])
    vocab = o.doc["model"]["vocab"]
    partners = collections.defaultdict(list)
    for m in o.doc["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        partners[vocab[a]].append(b)
    starting_with = collections.defaultdict(list)  # piece -> tokens whose piece starts with it
    for t, p in pieces.items():
        if t in specials:
            continue
        for k in range(1, len(p) + 1):
            if p[:k] in vocab:
                starting_with[p[:k]].append(t)
    partnered = np.array([t for t in allowed_first if partners.get(t)])
    uniform_first = rng.choice(np.array(allowed_first), size=n)
    biased_first = rng.choice(partnered, size=n)
    out = []
    for i in range(n):
        if i % 2 == 0:
            t1 = int(biased_first[i])
            x = partners[t1][rng.integers(len(partners[t1]))]
            if i % 4 == 0:
                out.append((t1, vocab[x]))  # the partner itself: t1 + x merges
            else:
                cands = starting_with[x]
                out.append((t1, cands[rng.integers(len(cands))]))
        else:
            out.append((int(uniform_first[i]), int(ids[rng.integers(len(ids))])))
    return out


def test_random_token_pairs_mistral(mistral, record_property):
    o, guide = mistral.oracle, mistral.guide(DOT_PLUS)
    pieces = _pieces(o)
    allowed_first, _ = expected_start_tokens(o)
    rng = np.random.default_rng(SEED)
    pairs = sample_pairs(o, sorted(allowed_first), NUM_PAIRS, rng)

    texts = [_valid_text(o.token_bytes(a) + o.token_bytes(b)) for a, b in pairs]
    checked = [(p, t) for p, t in zip(pairs, texts) if t is not None]
    skipped = len(pairs) - len(checked)
    canonical = [enc == list(p) for (p, _), enc in zip(checked, o.canonical_batch([t for _, t in checked]))]

    by_first = collections.defaultdict(list)
    for i, ((t1, _), _) in enumerate(checked):
        by_first[t1].append(i)
    mismatches = []
    final_mismatches = []
    for t1, idx in by_first.items():
        state = guide.next_state(guide.initial_state, t1)
        t1_complete = _valid_text(o.token_bytes(t1)) is not None
        if guide.is_final(state) != t1_complete:
            final_mismatches.append((pieces[t1], guide.is_final(state)))
        bits = mask_bits(guide.mask(state), o.num_tokens)
        for i in idx:
            t2 = checked[i][0][1]
            if bool(bits[t2]) != canonical[i]:
                mismatches.append(
                    f"({pieces[t1]!r}, {pieces[t2]!r}) text {checked[i][1]!r}: canonical is "
                    f"{[pieces[t] for t in o.canonical(checked[i][1])]}, expected allowed={canonical[i]}, "
                    f"got {bool(bits[t2])}"
                )

    n_canon = sum(canonical)
    totals = {"pairs": len(pairs), "checked": len(checked), "skipped_not_utf8": skipped,
              "canonical": n_canon, "non_canonical": len(checked) - n_canon,
              "distinct_first_tokens": len(by_first), "mismatches": len(mismatches)}
    print(f"mistral7b random pairs: {totals}")
    record_property("totals", totals)
    assert len(checked) >= MIN_CHECKED
    # the sampling is useful only if both answers are common
    assert n_canon >= 0.2 * len(checked) and len(checked) - n_canon >= 0.2 * len(checked), totals
    assert not final_mismatches, f"is_final wrong after {final_mismatches[:10]}"
    assert not mismatches, f"{len(mismatches)} of {len(checked)} pairs wrong:\n" + "\n".join(mismatches[:20])
