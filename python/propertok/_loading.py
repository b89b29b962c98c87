"""Turn a loaded Python tokenizer object into what the Rust core parses.

``Vocabulary.from_tokenizer`` (Rust) calls :func:`describe_tokenizer` and then parses the returned
``tokenizer.json`` text exactly as ``Vocabulary.from_file`` would, so every tokenizer goes through
one parser. Duck typing keeps ``tokenizers`` and ``transformers`` optional: neither is imported
here.
"""

from __future__ import annotations

import json
import os
from typing import Any, List, Optional, Tuple

_ACCEPTED = (
    "a tokenizers.Tokenizer or a transformers fast tokenizer (PreTrainedTokenizerFast, e.g. "
    "AutoTokenizer.from_pretrained(..., use_fast=True)); for a tokenizer.json file use "
    "Vocabulary.from_file(path)"
)


def describe_tokenizer(tok: Any) -> Tuple[str, Optional[List[int]]]:
    """Return ``(tokenizer_json_text, default_eos_ids)`` for a loaded tokenizer.

    ``default_eos_ids`` is ``None`` when the object does not say (a bare ``tokenizers.Tokenizer``
    has no notion of EOS); the core then finds EOS by name among the special tokens.
    Raises ``TypeError`` naming what is accepted for anything else, slow tokenizers included
    (they have no ``tokenizer.json`` to read, and converting them is transformers' job).
    """
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None and callable(getattr(backend, "to_str", None)):
        return backend.to_str(), _transformers_eos_ids(tok)
    if callable(getattr(tok, "to_str", None)):
        return tok.to_str(), None
    if getattr(tok, "is_fast", None) is False:
        raise TypeError(
            f"{type(tok).__name__} is a slow (Python) transformers tokenizer, which has no "
            f"tokenizer.json; expected {_ACCEPTED}"
        )
    raise TypeError(f"cannot build a Vocabulary from {type(tok).__name__}: expected {_ACCEPTED}")


def _transformers_eos_ids(tok: Any) -> Optional[List[int]]:
    """EOS of a transformers tokenizer plus, when the tokenizer was loaded from a local folder,
    the stop ids of its ``generation_config.json`` (chat models stop on several ids, e.g.
    Llama 3's ``<|eot_id|>``). Never touches the network."""
    ids: List[int] = []
    _extend_ids(ids, getattr(tok, "eos_token_id", None))
    folder = getattr(tok, "name_or_path", None)
    if isinstance(folder, (str, os.PathLike)) and os.path.isdir(folder):
        path = os.path.join(folder, "generation_config.json")
        try:
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError):
            config = None
        if isinstance(config, dict):
            _extend_ids(ids, config.get("eos_token_id"))
    return ids or None


def _extend_ids(ids: List[int], value: Any) -> None:
    """Append an int or a list of ints to ``ids`` without duplicates; ignore anything else."""
    values = value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0 and v not in ids:
            ids.append(v)
