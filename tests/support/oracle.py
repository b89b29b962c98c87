"""The oracle every propertok test is checked against: the real Hugging Face tokenizer.

DESIGN.md ("The one definition everything is tested against") defines, for a tokenizer ``T`` and a
string ``s``, ``canonical(s)`` = the ids ``T`` produces for ``s`` *as a continuation*:

* no special tokens added (``add_special_tokens=False``);
* the text of special tokens (``<s>``, ``</s>``, ``<|endoftext|>`` ...) is ordinary text
  (``tokenizer.encode_special_tokens = True``); non-special added tokens are still matched the way
  the tokenizer matches them;
* no start-of-text marker: SentencePiece-style tokenizers (Mistral-7B, Llama 2) normalize with
  ``Sequence[Prepend("▁"), Replace(" ", "▁")]``. ``Prepend`` adds a "▁" in front of the *whole
  input*, which is right for a prompt but wrong for generated text: a constrained generation is a
  continuation of the prompt, and the model's tokenizer would never put a "▁" at the start of a
  continuation that does not begin with a space. So we delete the ``Prepend`` step from the JSON
  before loading it (and set ``prepend_scheme="never"`` on a ``Metaspace`` pre-tokenizer, the other
  spelling of the same thing). A space inside ``s`` still becomes "▁" through ``Replace``.

Token bytes are derived here, independently of propertok, from the tokenizer's own token strings:
SentencePiece "▁" is a space and ``<0xNN>`` is byte ``NN`` when ``byte_fallback`` is on; byte-level
BPE strings go through the inverse of GPT-2's bytes<->unicode table (added tokens too, as the
ByteLevel decoder does); other added tokens decode to their content. Ids are those the
tokenizer.json declares (the ``tokenizers`` library renumbers cl100k's special tokens, whose declared
ids have gaps; special tokens never occur in a canonical encoding, so this never matters there). ``decode(ids)`` is the concatenation of token bytes (no decoder quirks such as stripping a
leading space).

Everything here is plain Python on top of ``tokenizers``; nothing imports propertok.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from typing import Iterable, Optional, Sequence

from tokenizers import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """``$PROPERTOK_SHARED``, default ``<repo root>/../shared``."""
    return Path(os.environ.get("PROPERTOK_SHARED", str(REPO_ROOT.parent / "shared"))).resolve()


def tokenizers_dir() -> Path:
    return shared_dir() / "tokenizers"


def data_dir() -> Path:
    return shared_dir() / "data"


# The package embeds Mistral-7B's tokenizer.json (byte-identical to the shared one), so the tests
# that need only it run on a clone without the shared corpus.
EMBEDDED_MISTRAL = REPO_ROOT / "python" / "propertok" / "data" / "mistral7b-tokenizer.json"
REQUIRE_SHARED_ENV = "PROPERTOK_REQUIRE_SHARED"


def has_shared() -> bool:
    """Whether the shared corpus (tokenizers, data) is there."""
    return (tokenizers_dir() / "MANIFEST.json").is_file()


def shared_missing_reason(what: str) -> str:
    return (
        f"needs the shared corpus ({what}), not found at {shared_dir()}: set PROPERTOK_SHARED to the "
        "folder that holds tokenizers/ and data/"
    )


def require_shared(what: str) -> None:
    """At the top of a test module that needs the shared corpus: skips the whole module with one
    message when it is absent, or fails it when ``$PROPERTOK_REQUIRE_SHARED`` is set (CI)."""
    if has_shared():
        return
    import pytest

    if os.environ.get(REQUIRE_SHARED_ENV):
        raise RuntimeError(shared_missing_reason(what) + f" (${REQUIRE_SHARED_ENV} is set)")
    pytest.skip(shared_missing_reason(what), allow_module_level=True)


def needs_shared(what: str):
    """A mark for one test that needs the shared corpus (see :func:`require_shared`)."""
    import pytest

    return pytest.mark.skipif(not has_shared() and not os.environ.get(REQUIRE_SHARED_ENV),
                              reason=shared_missing_reason(what))


def tokenizer_path(name: str) -> Path:
    """Path of ``shared/tokenizers/<name>/tokenizer.json`` (``name`` as in MANIFEST.json's slug);
    the embedded copy for ``mistral7b`` when the shared corpus is absent."""
    path = tokenizers_dir() / name / "tokenizer.json"
    if name == "mistral7b" and not path.is_file():
        return EMBEDDED_MISTRAL
    return path


def manifest() -> list[dict]:
    """MANIFEST.json's entries; ``[]`` without the shared corpus (modules that need it call
    :func:`require_shared` first)."""
    if not has_shared():
        return []
    with open(tokenizers_dir() / "MANIFEST.json", encoding="utf-8") as f:
        return json.load(f)


# --------------------------------------------------------------------------------------------
# GPT-2's byte <-> unicode table (the reversible map byte-level BPE uses to store bytes as text)
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """Byte -> printable character, as in GPT-2's ``encoder.py``: the printable Latin-1 bytes map to
    themselves, the other 68 bytes to U+0100 onwards, in byte order."""
    keep = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


@functools.lru_cache(maxsize=None)
def gpt2_unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in gpt2_bytes_to_unicode().items()}


# --------------------------------------------------------------------------------------------
# tokenizer.json inspection
# --------------------------------------------------------------------------------------------


def _walk(node) -> Iterable[dict]:
    """Every dict inside a normalizer / pre-tokenizer / decoder tree (Sequence nodes included)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _has_type(node, type_name: str) -> bool:
    return any(d.get("type") == type_name for d in _walk(node))


def tokenizer_family(doc: dict) -> str:
    """``"byte-level"`` (GPT-2 style ByteLevel pre-tokenizer/decoder), ``"sentencepiece"`` ("▁" for
    a space: Metaspace, or a Replace(" " -> "▁") normalizer/decoder) or ``"plain"`` (token strings are
    the text itself, e.g. the synthetic tokenizers of the tests)."""
    if _has_type(doc.get("pre_tokenizer"), "ByteLevel") or _has_type(doc.get("decoder"), "ByteLevel"):
        return "byte-level"
    if _has_type(doc.get("pre_tokenizer"), "Metaspace") or _has_type(doc.get("decoder"), "Metaspace"):
        return "sentencepiece"
    for d in list(_walk(doc.get("normalizer"))) + list(_walk(doc.get("decoder"))):
        if d.get("type") == "Replace" and "\u2581" in json.dumps(d, ensure_ascii=False):
            return "sentencepiece"
    return "plain"


def continuation_json(doc: dict) -> dict:
    """A copy of a ``tokenizer.json`` document whose encoder tokenizes text as a continuation:
    the whole-input "▁" prefix of SentencePiece tokenizers is removed (see the module docstring).
    Nothing else changes."""
    doc = copy.deepcopy(doc)

    def strip_prepend(node):
        if not isinstance(node, dict):
            return node
        if node.get("type") == "Prepend":
            return None
        if node.get("type") == "Sequence" and isinstance(node.get("normalizers"), list):
            node["normalizers"] = [n for n in (strip_prepend(n) for n in node["normalizers"]) if n]
        return node

    doc["normalizer"] = strip_prepend(doc.get("normalizer"))
    for d in _walk(doc.get("pre_tokenizer")):
        if d.get("type") == "Metaspace":
            if "prepend_scheme" in d:
                d["prepend_scheme"] = "never"
            if "add_prefix_space" in d:
                d["add_prefix_space"] = False
    return doc


_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def token_bytes_table(doc: dict) -> list[Optional[bytes]]:
    """``table[id]`` = the bytes token ``id`` decodes to (None for ids no token uses), computed from
    the token strings of the tokenizer.json alone."""
    model = doc["model"]
    family = tokenizer_family(doc)
    byte_fallback = bool(model.get("byte_fallback", False))
    vocab = model.get("vocab") or {}
    if isinstance(vocab, list):  # Unigram-style [[piece, score], ...]
        vocab = {piece: i for i, (piece, _score) in enumerate(vocab)}
    added = {a["id"]: a["content"] for a in doc.get("added_tokens") or []}
    size = max(list(vocab.values()) + list(added.keys())) + 1
    table: list[Optional[bytes]] = [None] * size
    u2b = gpt2_unicode_to_bytes()

    def byte_level(piece: str) -> bytes:
        # as the ByteLevel decoder does: map every character back to its byte, or, when a
        # character is outside the table (e.g. gpt-neox's added runs of plain spaces), keep the
        # whole string's UTF-8
        if all(c in u2b for c in piece):
            return bytes(u2b[c] for c in piece)
        return piece.encode("utf-8")

    for piece, tid in vocab.items():
        if family == "byte-level":
            table[tid] = byte_level(piece)
        elif family == "sentencepiece":
            m = _BYTE_PIECE.match(piece)
            if byte_fallback and m:
                table[tid] = bytes([int(m.group(1), 16)])
            else:
                table[tid] = piece.replace("\u2581", " ").encode("utf-8")
        else:
            table[tid] = piece.encode("utf-8")
    for tid, content in added.items():
        # Added tokens decode to their content, through the byte-level map where there is one:
        # deepseek's added "õ" is the byte-level image of byte F5, an invalid UTF-8 byte (see
        # MANIFEST.json), exactly what the tokenizer's own decoder makes of it.
        table[tid] = byte_level(content) if family == "byte-level" else content.encode("utf-8")
    return table


# --------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------


class TokenTableOracle:
    """The definitions every oracle shares, on top of a subclass's ``canonical_batch`` and its
    token byte table ``_table`` (``None`` where an id has no token): ``canonical``,
    ``token_bytes``, ``decode``, ``representable`` and ``is_canonical``."""

    name: str
    _table: list
    num_tokens: int
    special_ids: list

    def canonical_batch(self, strings: Sequence[str]) -> list[list[int]]:
        raise NotImplementedError

    def canonical(self, s: str) -> list[int]:
        return self.canonical_batch([s])[0]

    def token_bytes(self, token_id: int) -> bytes:
        b = self._table[token_id] if 0 <= token_id < self.num_tokens else None
        if b is None:
            raise KeyError(f"no token with id {token_id} in {self.name}")
        return b

    def has_token(self, token_id: int) -> bool:
        return 0 <= token_id < self.num_tokens and self._table[token_id] is not None

    def decode(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.token_bytes(t) for t in ids)

    def representable(self, s: str) -> bool:
        return self.decode(self.canonical(s)) == s.encode("utf-8")

    def representable_batch(self, strings: Sequence[str]) -> list[bool]:
        return [self.decode(ids) == s.encode("utf-8") for s, ids in zip(strings, self.canonical_batch(strings))]

    def is_canonical(self, ids: Sequence[int]) -> bool:
        return self.is_canonical_batch([ids])[0]

    def is_canonical_batch(self, seqs: Sequence[Sequence[int]]) -> list[bool]:
        texts: list[Optional[str]] = []
        for ids in seqs:
            try:
                texts.append(self.decode(ids).decode("utf-8"))
            except (UnicodeDecodeError, KeyError):
                texts.append(None)
        valid = [t for t in texts if t is not None]
        encoded = iter(self.canonical_batch(valid))
        out = []
        for ids, t in zip(seqs, texts):
            out.append(False if t is None else next(encoded) == list(ids))
        return out


class Oracle(TokenTableOracle):
    """The oracle of one tokenizer.json, backed by the real ``tokenizers`` library."""

    def __init__(self, tokenizer_json: str, name: str = "?"):
        self.name = name
        self.json_text = tokenizer_json
        self.doc = json.loads(tokenizer_json)
        self.family = tokenizer_family(self.doc)
        self.tokenizer = Tokenizer.from_str(json.dumps(continuation_json(self.doc)))
        self.tokenizer.encode_special_tokens = True
        self._table = token_bytes_table(self.doc)
        self.num_tokens = len(self._table)
        self.special_ids = sorted(a["id"] for a in self.doc.get("added_tokens") or [] if a.get("special"))
        self.nonspecial_added_ids = sorted(
            a["id"] for a in self.doc.get("added_tokens") or [] if not a.get("special")
        )
        self._default = None

    @classmethod
    def from_file(cls, path, name: Optional[str] = None) -> "Oracle":
        with open(path, encoding="utf-8") as f:
            return cls(f.read(), name=name or str(path))

    # -- the definition ------------------------------------------------------------------------

    def canonical(self, s: str) -> list[int]:
        return self.tokenizer.encode(s, add_special_tokens=False).ids

    def canonical_batch(self, strings: Sequence[str]) -> list[list[int]]:
        if not strings:
            return []
        return [e.ids for e in self.tokenizer.encode_batch(list(strings), add_special_tokens=False)]

    # -- helpers for the tests of the oracle itself -------------------------------------------

    def default_encode(self, s: str) -> list[int]:
        """``encode(s, add_special_tokens=False)`` with the unmodified tokenizer.json (so the "▁"
        prepend is included), special-token text still treated as plain text."""
        if self._default is None:
            self._default = Tokenizer.from_str(self.json_text)
            self._default.encode_special_tokens = True
        return self._default.encode(s, add_special_tokens=False).ids

    def token_id(self, piece: str) -> int:
        """The id of a token given by its *tokenizer string* (e.g. "▁world", "<0xF0>")."""
        tid = self.tokenizer.token_to_id(piece)
        if tid is None:
            raise KeyError(piece)
        return tid


@functools.lru_cache(maxsize=None)
def oracle_for(name: str) -> Oracle:
    """One oracle per shared tokenizer per process."""
    return Oracle.from_file(tokenizer_path(name), name=name)
