"""Small synthetic merge-table tokenizers, and a plain-Python BPE that encodes with them.

A synthetic tokenizer is a pure merge table over a small alphabet: no normalizer, no
pre-tokenizer, no byte fallback, plus one special EOS token ``</s>``. It is built with the real
``tokenizers`` library (``tokenizers.models.BPE(vocab, merges)``) so that the real library is the
oracle, serialized with ``Tokenizer.to_str()`` and handed to ``propertok.Vocabulary.from_json``.

``MergeTableBPE.encode`` re-implements Hugging Face's BPE word merge in a few lines, as a second,
readable reference: repeatedly merge the adjacent pair with the lowest merge rank (leftmost first
among equal ranks) until no adjacent pair has a merge. This *priority* order is what the real
library does; it differs from the appendix's "apply merge 1 everywhere, then merge 2, ..." reading
when a merge's parts are created only by a later merge (``encode_sequential`` implements that
reading, to show the difference).
"""

from __future__ import annotations

import itertools
import json
from typing import Iterable, Optional, Sequence

from tokenizers import AddedToken, Tokenizer
from tokenizers.models import BPE

EOS = "</s>"


class MergeTableBPE:
    """A merge table over ``alphabet``: ids are the alphabet letters in order, then each merge
    result (first creation, in rank order), then ``</s>``."""

    def __init__(self, alphabet: str, merges: Sequence[tuple[str, str]]):
        self.alphabet = alphabet
        self.merges = [tuple(m) for m in merges]
        if len(set(self.merges)) != len(self.merges):
            raise ValueError(f"duplicate merge in {self.merges}")
        self.vocab: dict[str, int] = {}
        for c in alphabet:
            self.vocab.setdefault(c, len(self.vocab))
        for a, b in self.merges:
            self.vocab.setdefault(a + b, len(self.vocab))
        for a, b in self.merges:
            if a not in self.vocab or b not in self.vocab:
                raise ValueError(f"merge ({a!r}, {b!r}) uses a string that no merge creates")
        self.eos_id = len(self.vocab)
        self.pieces = {i: s for s, i in self.vocab.items()}
        self.rank = {m: r for r, m in enumerate(self.merges)}

    # -- plain-Python encoders ------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Hugging Face BPE order: lowest-rank adjacent pair first, leftmost among ties."""
        pieces = list(text)
        while True:
            best = None
            for i in range(len(pieces) - 1):
                r = self.rank.get((pieces[i], pieces[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]
        return [self.vocab[p] for p in pieces]

    def encode_sequential(self, text: str) -> list[int]:
        """The appendix's reading: for each merge in order, merge every occurrence left to right."""
        pieces = list(text)
        for a, b in self.merges:
            out, i = [], 0
            while i < len(pieces):
                if i + 1 < len(pieces) and pieces[i] == a and pieces[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(pieces[i])
                    i += 1
            pieces = out
        return [self.vocab[p] for p in pieces]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.pieces[i] for i in ids)

    # -- the real tokenizer ---------------------------------------------------------------------

    def to_tokenizer(self) -> Tokenizer:
        tok = Tokenizer(BPE(vocab=dict(self.vocab), merges=list(self.merges)))
        tok.add_special_tokens([AddedToken(EOS, special=True)])
        assert tok.token_to_id(EOS) == self.eos_id, "EOS must get the next free id"
        return tok

    def to_json(self) -> str:
        return self.to_tokenizer().to_str()

    def is_well_ordered(self) -> bool:
        """Every merge's parts exist (as letters or earlier merge results) before the merge."""
        made = set(self.alphabet)
        for a, b in self.merges:
            if a not in made or b not in made:
                return False
            made.add(a + b)
        return True

    def __repr__(self) -> str:
        return f"MergeTableBPE({self.alphabet!r}, {self.merges!r})"


class SyntheticOracle:
    """The real ``tokenizers`` library as oracle for a synthetic merge table."""

    def __init__(self, bpe: MergeTableBPE):
        self.bpe = bpe
        self.tokenizer = bpe.to_tokenizer()
        self.tokenizer.encode_special_tokens = True
        self.token_ids = sorted(i for i in bpe.pieces)  # every non-special id
        self.eos_id = bpe.eos_id

    def canonical_batch(self, strings: Sequence[str]) -> list[list[int]]:
        if not strings:
            return []
        return [e.ids for e in self.tokenizer.encode_batch(list(strings), add_special_tokens=False)]

    def canonical(self, s: str) -> list[int]:
        return self.tokenizer.encode(s, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.bpe.decode(ids)

    def emittable(self) -> set[int]:
        """Tokens t with encode(decode(t)) == [t]: exactly the tokens that occur in some
        tokenization (a final token's span is merged exactly as the span alone would be)."""
        got = self.canonical_batch([self.bpe.pieces[t] for t in self.token_ids])
        return {t for t, ids in zip(self.token_ids, got) if ids == [t]}

    def canonical_pairs(self) -> set[tuple[int, int]]:
        """Algorithm 4 of the appendix (TestAllTokenPairs), with the real tokenizer."""
        pairs = list(itertools.product(self.token_ids, repeat=2))
        got = self.canonical_batch([self.bpe.pieces[a] + self.bpe.pieces[b] for a, b in pairs])
        return {p for p, ids in zip(pairs, got) if ids == list(p)}

    def is_canonical_batch(self, seqs: Sequence[Sequence[int]]) -> list[bool]:
        got = self.canonical_batch([self.decode(s) for s in seqs])
        return [list(s) == ids for s, ids in zip(seqs, got)]


def all_strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(1, max_len + 1) for p in itertools.product(alphabet, repeat=n)]


def char_class(alphabet: str) -> str:
    return "[" + alphabet + "]+"


def no_eos_tokenizer_json(alphabet: str = "ab", merges: Optional[Sequence[tuple[str, str]]] = None) -> str:
    """A synthetic tokenizer.json without any special token (so without an EOS)."""
    bpe = MergeTableBPE(alphabet, merges or [("a", "b")])
    tok = Tokenizer(BPE(vocab=dict(bpe.vocab), merges=list(bpe.merges)))
    doc = json.loads(tok.to_str())
    assert not doc["added_tokens"]
    return json.dumps(doc)
