"""The oracle for Mistral's Tekken tokenizer: ``mistral_common``'s own ``Tekkenizer`` (tiktoken
underneath), never propertok's reading of the file.

``canonical(s)`` is ``Tekkenizer.encode(s, bos=False, eos=False)``: special tokens are never
produced from text (their text is plain text), and ids are shifted past the special tokens as the
Tekkenizer shifts them. Token bytes are read here from the file (base64 ``token_bytes``); a special
token's bytes are its text. The files are the two ``mistral_common`` ships in its wheel
(``mistral_common/data/tekken_*.json``), so nothing is downloaded.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Sequence

from oracle import TokenTableOracle

# mistral_common 1.x needs Python 3.11+.
MISSING_REASON = "mistral_common (a test dependency on Python >= 3.11) is not installed"


# The files of the pinned mistral_common (pyproject.toml) the tests are written against, oldest
# first (Mistral Nemo's and Pixtral's: the same vocabulary, 1,000 special tokens).
TEKKEN_FILES = ("tekken_240718.json", "tekken_240911.json")


def tekken_files() -> list[Path]:
    """The paths of ``TEKKEN_FILES`` in the installed ``mistral_common`` (whether they exist or
    not); empty when it is not installed."""
    try:
        import mistral_common
    except ImportError:
        return []
    return [Path(mistral_common.__file__).parent / "data" / name for name in TEKKEN_FILES]


class TekkenOracle(TokenTableOracle):
    family = "byte-level"
    nonspecial_added_ids: list = []

    def __init__(self, path: Path):
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        self.name = path.stem
        self.path = path
        self.tekkenizer = Tekkenizer.from_file(path)
        n_special = self.tekkenizer.num_special_tokens
        self.num_tokens = self.tekkenizer.n_words
        doc = json.loads(path.read_text(encoding="utf-8"))
        self.pattern = doc["config"]["pattern"]
        self.special_ids = sorted(self.tekkenizer.special_ids)
        assert self.special_ids == list(range(n_special))
        self._table = [None] * self.num_tokens
        for i in self.special_ids:
            self._table[i] = self.tekkenizer.id_to_piece(i).encode("utf-8")
        for entry in doc["vocab"][: self.num_tokens - n_special]:
            self._table[n_special + entry["rank"]] = base64.b64decode(entry["token_bytes"])

    def canonical(self, s: str) -> list[int]:
        return self.tekkenizer.encode(s, bos=False, eos=False)

    def canonical_batch(self, strings: Sequence[str]) -> list[list[int]]:
        return [self.canonical(s) for s in strings]
