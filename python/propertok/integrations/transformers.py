"""A Hugging Face ``transformers`` logits processor that admits only canonical token sequences.

    from propertok.integrations.transformers import json_schema_logits_processor
    processor = json_schema_logits_processor(tokenizer, schema)
    out = model.generate(**inputs, logits_processor=[processor], do_sample=True)

How it follows ``generate``: the first call sees the prompt only (its length is remembered and
the prompt is never fed to the guide); every later call feeds each row's newest token to that
row's matcher (one per row, created on the first call), then writes the allowed next tokens of
every row into an int32 bitmask and sets the other logits to ``-inf``
(:mod:`propertok.bitmask`). A row whose matcher accepted EOS allows only EOS, so the padding
``generate`` appends to finished rows is ignored. Rows are checked against what was fed before:
a row whose earlier tokens changed (beam search reorders rows) is replayed from its own tokens,
and a call that does not continue the previous one (another batch size or length, or another
last prompt token: a new ``generate`` call) starts over; call ``reset()`` between generations
to be sure. Only the generated part of ``input_ids`` is copied to the CPU at each step. A
token the guide does not allow raises ``ValueError``: it means the mask was not applied to the
logits that token was sampled from (another processor ran after this one and re-enabled
tokens), and continuing would silently break the constraint.

transformers is imported when this module is: the processor subclasses
``transformers.LogitsProcessor`` when transformers and torch are installed, and is a plain
callable otherwise (it then works with numpy arrays, which is how its logic is tested without
torch).
``input_ids`` and ``scores`` may be torch tensors (CPU or CUDA) or numpy arrays.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

import propertok as pt
from propertok.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmask


class _PlainBase:
    """Stands in for ``transformers.LogitsProcessor`` when transformers (or torch) is absent."""


try:
    from transformers.utils import is_torch_available

    # without torch, transformers exports a placeholder class that refuses to be instantiated
    if is_torch_available():
        from transformers import LogitsProcessor as _Base
    else:
        _Base = _PlainBase
except ImportError:
    _Base = _PlainBase


__all__ = [
    "PropertokLogitsProcessor",
    "compiler_for",
    "grammar_logits_processor",
    "json_schema_logits_processor",
    "regex_logits_processor",
]


class PropertokLogitsProcessor(_Base):
    """Masks ``generate``'s logits to the tokens a propertok guide allows, one matcher per row.

    ``guide_or_compiler``: a :class:`propertok.Guide`, or a :class:`propertok.Compiler` together
    with exactly one of ``regex=``, ``schema=`` or ``grammar=`` (``method`` and ``options`` are
    passed to the compiler: ``whitespace=`` for a schema, ``syntax=``, ``start=``,
    ``max_recursion_depth=`` for a grammar). Reusable across ``generate`` calls (it starts
    over when the input does not continue the previous call; :meth:`reset` forces it).
    """

    def __init__(
        self,
        guide_or_compiler: Any,
        *,
        regex: Optional[str] = None,
        schema: Any = None,
        grammar: Optional[str] = None,
        method: str = "cartesian",
        **options: Any,
    ):
        given = sum(x is not None for x in (regex, schema, grammar))
        if isinstance(guide_or_compiler, pt.Guide):
            if given or options:
                raise TypeError("pass regex=/schema=/grammar= only with a Compiler, not with a Guide")
            self.guide = guide_or_compiler
        elif isinstance(guide_or_compiler, pt.Compiler):
            if given != 1:
                raise TypeError("with a Compiler, pass exactly one of regex=, schema= or grammar=")
            if regex is not None:
                if options:
                    raise TypeError(f"unexpected options for a regex: {sorted(options)}")
                self.guide = guide_or_compiler.compile_regex(regex, method=method)
            elif grammar is not None:
                self.guide = guide_or_compiler.compile_grammar(grammar, method=method, **options)
            else:
                self.guide = guide_or_compiler.compile_json_schema(schema, method=method, **options)
        else:
            raise TypeError(f"expected a propertok Guide or Compiler, got {type(guide_or_compiler).__name__}")
        self.reset()

    def reset(self) -> None:
        """Forget the rows: the next call is treated as the first of a new generation."""
        self._matchers: list = []
        self._prompt_len = -1
        self._fed: Optional[np.ndarray] = None  # the generated ids each row's matcher has seen
        self._prompt_last: Optional[np.ndarray] = None
        self._bitmask: Any = None

    @property
    def matchers(self) -> list:
        """The per-row matchers of the current generation (read-only use, e.g. to inspect)."""
        return list(self._matchers)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        shape = tuple(input_ids.shape)
        if len(shape) != 2:
            raise ValueError(f"input_ids must be 2-D (batch, length), got shape {shape}")
        batch, length = shape
        tail = None
        continues = self._fed is not None and batch == len(self._matchers)
        if continues and length == self._prompt_len + self._fed.shape[1] + 1:
            # only the last prompt column and the generated part cross to the CPU
            tail = _rows_as_numpy(input_ids[:, self._prompt_len - 1 :])
            if not np.array_equal(tail[:, 0], self._prompt_last):
                tail = None  # another prompt of a fitting length: a new generation
        if tail is None:
            self._start(_rows_as_numpy(input_ids[:, length - 1 :])[:, 0], length)
        else:
            new = tail[:, 1:]
            unchanged = np.all(new[:, :-1] == self._fed, axis=1)
            for row in range(batch):
                if unchanged[row]:
                    self._feed(row, [int(new[row, -1])])
                else:  # rows were reordered (beam search): replay this row's own tokens
                    self._matchers[row].reset()
                    self._feed(row, new[row].tolist())
            self._fed = new
        self._mask(scores, batch)
        return scores

    def _start(self, prompt_last: np.ndarray, length: int) -> None:
        self._matchers = [self.guide.matcher() for _ in range(len(prompt_last))]
        self._prompt_len = length
        self._prompt_last = prompt_last
        self._fed = np.zeros((len(prompt_last), 0), dtype=np.int64)

    def _feed(self, row: int, tokens: Sequence[int]) -> None:
        matcher = self._matchers[row]
        for token in tokens:
            if matcher.is_terminated():
                return  # padding after EOS
            if not matcher.accept_token(int(token)):
                raise ValueError(
                    f"row {row}: token {int(token)} is not allowed by the guide after "
                    f"{matcher.num_accepted_tokens} token(s); the propertok mask was not applied to "
                    "the logits it was sampled from (run this processor last, after any processor "
                    "that can raise a masked logit)"
                )

    def _mask(self, scores: Any, batch: int) -> None:
        torch = _torch_module(scores)
        if self._bitmask is None or self._bitmask.shape[0] != batch:
            backend = "torch" if torch is not None else "numpy"
            self._bitmask = allocate_token_bitmask(batch, self.guide.vocab_size, backend=backend)
        for row, matcher in enumerate(self._matchers):
            fill_next_token_bitmask(matcher, self._bitmask, row)
        apply_token_bitmask_inplace(scores, self._bitmask, vocab_size=self.guide.vocab_size)


def _torch_module(x: Any) -> Any:
    import sys

    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(x, torch.Tensor) else None


def _rows_as_numpy(input_ids: Any) -> np.ndarray:
    """``input_ids`` as a 2-D int64 numpy array (torch tensors copied to the CPU)."""
    if _torch_module(input_ids) is not None:
        input_ids = input_ids.detach().cpu().numpy()
    ids = np.asarray(input_ids)
    if ids.dtype.kind not in "iu":
        raise ValueError(f"input_ids must hold integers, got dtype {ids.dtype}")
    return ids.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------------------------
# Factories, with one Compiler per tokenizer (its tokenizer DFA takes seconds to build)
# ---------------------------------------------------------------------------------------------

_COMPILERS: "weakref.WeakKeyDictionary[Any, Dict[Tuple, Any]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def compiler_for(
    tokenizer: Any, *, vocab_size: Optional[int] = None, eos_token_ids: Optional[Sequence[int]] = None
) -> Any:
    """The :class:`propertok.Compiler` for a transformers fast tokenizer (or a
    ``tokenizers.Tokenizer``), built once per tokenizer object and options and reused.

    ``vocab_size``: the model's logits width when it is larger than the tokenizer
    (``model.config.vocab_size``); ``eos_token_ids``: default the tokenizer's EOS.
    """
    key = (vocab_size, None if eos_token_ids is None else tuple(eos_token_ids))
    with _LOCK:
        try:
            per_tokenizer = _COMPILERS.setdefault(tokenizer, {})
        except TypeError:  # not weak-referenceable: build every time
            per_tokenizer = {}
        if key not in per_tokenizer:
            vocab = pt.Vocabulary.from_tokenizer(
                tokenizer, eos_token_ids=None if eos_token_ids is None else list(eos_token_ids), vocab_size=vocab_size
            )
            per_tokenizer[key] = pt.Compiler(vocab)
        return per_tokenizer[key]


def regex_logits_processor(
    tokenizer: Any,
    regex: str,
    method: str = "cartesian",
    *,
    vocab_size: Optional[int] = None,
    eos_token_ids: Optional[Sequence[int]] = None,
) -> PropertokLogitsProcessor:
    """A processor constraining generation to ``regex`` (full match, then EOS)."""
    compiler = compiler_for(tokenizer, vocab_size=vocab_size, eos_token_ids=eos_token_ids)
    return PropertokLogitsProcessor(compiler, regex=regex, method=method)


def json_schema_logits_processor(
    tokenizer: Any,
    schema: Any,
    method: str = "cartesian",
    *,
    vocab_size: Optional[int] = None,
    eos_token_ids: Optional[Sequence[int]] = None,
    **schema_options: Any,
) -> PropertokLogitsProcessor:
    """A processor constraining generation to JSON instances of ``schema`` (a dict or JSON
    text); ``schema_options`` (``whitespace=``, ``max_recursion_depth=``, ``strict=``) go to
    :func:`propertok.json_schema.schema_to_regex`."""
    compiler = compiler_for(tokenizer, vocab_size=vocab_size, eos_token_ids=eos_token_ids)
    return PropertokLogitsProcessor(compiler, schema=schema, method=method, **schema_options)


def grammar_logits_processor(
    tokenizer: Any,
    grammar: str,
    syntax: str = "lark",
    method: str = "cartesian",
    *,
    vocab_size: Optional[int] = None,
    eos_token_ids: Optional[Sequence[int]] = None,
    **grammar_options: Any,
) -> PropertokLogitsProcessor:
    """A processor constraining generation to a Lark or GBNF ``grammar`` (special tokens such as
    ``<|python_tag|>`` included); ``grammar_options`` (``start=``, ``max_recursion_depth=``,
    ``lazy=``) go to :meth:`propertok.Compiler.compile_grammar`."""
    compiler = compiler_for(tokenizer, vocab_size=vocab_size, eos_token_ids=eos_token_ids)
    return PropertokLogitsProcessor(compiler, grammar=grammar, method=method, syntax=syntax, **grammar_options)
