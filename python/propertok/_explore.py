"""Walks over a compiled Guide, for the command line and for diagnostics.

Everything here uses only the public Guide/Vocabulary API (``allowed_tokens``, ``next_state``,
``is_final``, ``mask``, ``token_bytes``), so it doubles as an executable description of what a guide
means: the token sequences it accepts.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple


def accepted_sequences(guide: Any, limit: int, max_tokens: int = 256) -> Iterator[List[int]]:
    """Yield up to ``limit`` accepted token sequences (EOS not included), depth first in token-id
    order. ``max_tokens`` bounds the depth, so a guide with cycles cannot make this loop forever."""
    eos = set(guide.eos_token_ids)
    stack: List[Tuple[int, List[int]]] = [(guide.initial_state, [])]
    found = 0
    while stack and found < limit:
        state, path = stack.pop()
        if guide.is_final(state):
            found += 1
            yield path
        if len(path) >= max_tokens:
            continue
        steps = [int(t) for t in guide.allowed_tokens(state) if int(t) not in eos]
        for token in reversed(steps):
            stack.append((guide.next_state(state, token), path + [token]))


def spellings(guide: Any, vocab: Any, data: bytes) -> Tuple[int, Optional[List[int]]]:
    """How many token sequences accepted by ``guide`` decode to exactly ``data``, and one of them.

    For a canonical guide the count is 1 (the tokenizer's own encoding) or 0 (``data`` is not in
    the language, or not representable); for an agnostic guide it is usually much larger.
    Forward dynamic programming over (byte position, guide state): linear in ``len(data)``.
    """
    skip = set(guide.eos_token_ids) | set(vocab.special_token_ids)
    by_bytes: Dict[bytes, List[int]] = {}
    # A text's first token may read differently (a WordPiece word has no space before it).
    first_by_bytes: Dict[bytes, List[int]] = {}
    for tid in range(vocab.num_tokens):
        if tid in skip:
            continue
        text = vocab.token_bytes(tid)
        if text:
            by_bytes.setdefault(text, []).append(tid)
            first_by_bytes.setdefault(vocab.decode([tid]), []).append(tid)
    longest = max((len(b) for b in by_bytes), default=0)
    masks: Dict[int, Any] = {}

    def allowed(state: int, tid: int) -> bool:
        if state not in masks:
            masks[state] = guide.mask(state)
        return bool((int(masks[state][tid >> 5]) >> (tid & 31)) & 1)

    # reach[pos][state] = (number of ways, one token path) to be in `state` after `pos` bytes.
    reach: List[Dict[int, Tuple[int, List[int]]]] = [dict() for _ in range(len(data) + 1)]
    reach[0][guide.initial_state] = (1, [])
    for pos in range(len(data)):
        for state, (ways, path) in reach[pos].items():
            for end in range(pos + 1, min(len(data), pos + longest) + 1):
                for tid in (first_by_bytes if pos == 0 else by_bytes).get(data[pos:end], ()):
                    if not allowed(state, tid):
                        continue
                    nxt = guide.next_state(state, tid)
                    old_ways, old_path = reach[end].get(nxt, (0, path + [tid]))
                    reach[end][nxt] = (old_ways + ways, old_path)
    total, example = 0, None
    for state, (ways, path) in reach[len(data)].items():
        if guide.is_final(state):
            total += ways
            example = example if example is not None else path
    return total, example
