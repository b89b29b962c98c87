"""An SGLang grammar backend named ``propertok``: canonical masks for regex, JSON and EBNF requests.

    import propertok.integrations.sglang        # registers the backend (sglang installed)
    # then: python -m sglang.launch_server ... --grammar-backend propertok

Importing this module calls ``sglang.srt.constrained.base_grammar_backend.
register_grammar_backend("propertok", make_backend)``; SGLang then calls
``make_backend(server_args, tokenizer, vocab_size, eos_token_ids)`` once, and its scheduler
drives the objects below:

* :class:`PropertokGrammarBackend` (``BaseGrammarBackend``): ``dispatch_regex`` /
  ``dispatch_json`` compile a guide (SGLang runs these in its own thread pool and caches the
  result per key, copying it for every request); the same constraint is compiled once here too
  (:class:`~propertok.integrations._serving.GuideCache`). A constraint that cannot be compiled
  returns SGLang's ``InvalidGrammarObject`` carrying the error (older SGLang: ``None``), which
  fails that request only. ``dispatch_ebnf`` reads the request's EBNF as GBNF (xgrammar's
  dialect is GBNF-style: ``root ::= ...``).
* :class:`PropertokGrammar` (``BaseGrammarObject``): one matcher per request.
  ``accept_token``, ``rollback(k)``, ``is_terminated``, ``allocate_vocab_mask`` (int32 bitmask,
  xgrammar's layout), ``fill_vocab_mask``, ``move_vocab_mask``, ``apply_vocab_mask``, ``copy``
  (a fresh matcher over the same shared guide). Jump-forward: ``try_jump_forward`` returns the
  run of ``Matcher.forced_tokens()`` (tokens and their text); ``jump_and_retokenize`` rolls back
  to the common prefix of the old and new output ids and accepts the new ones.

The vocabulary comes from SGLang's tokenizer (a transformers fast tokenizer) and ``vocab_size``
(the logits width). Both base classes are imported when SGLang is installed; without it the
classes are plain (their logic is unit-tested that way).
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence, Tuple

import propertok as pt
from propertok.integrations._serving import GuideCache, describe_error, make_constraint

logger = logging.getLogger("propertok.integrations.sglang")

__all__ = ["BACKEND_NAME", "PropertokGrammar", "PropertokGrammarBackend", "make_backend", "register"]

BACKEND_NAME = "propertok"


class _PlainGrammarObject:
    def __init__(self) -> None:
        self.finished = False


class _PlainGrammarBackend:
    def __init__(self) -> None:
        pass


try:
    from sglang.srt.constrained import base_grammar_backend as _sgl
except ImportError:  # SGLang absent
    _sgl = None

_GrammarBase: Any = getattr(_sgl, "BaseGrammarObject", _PlainGrammarObject)
_BackendBase: Any = getattr(_sgl, "BaseGrammarBackend", _PlainGrammarBackend)


def _invalid(message: str) -> Any:
    """What SGLang expects from a dispatch that failed: ``InvalidGrammarObject(message)`` in
    recent versions (the request fails with that message), ``None`` in older ones."""
    invalid = getattr(_sgl, "InvalidGrammarObject", None)
    return invalid(message) if invalid is not None else None


class PropertokGrammar(_GrammarBase):
    """One request's matcher over a shared compiled guide."""

    def __init__(self, guide: Any, vocab: Any):
        super().__init__()
        self.guide = guide
        self.vocab = vocab
        self.matcher = guide.matcher()
        self.finished = False

    # -- advancing ---------------------------------------------------------------------------

    def accept_token(self, token: int) -> None:
        if not self.matcher.accept_token(int(token)):
            raise ValueError(
                f"propertok: token {int(token)} is not allowed after {self.matcher.num_accepted_tokens} token(s) "
                "(the grammar mask was not applied to the logits it was sampled from)")
        if self.matcher.is_terminated():
            self.finished = True

    def rollback(self, k: int) -> None:
        if k:
            self.matcher.rollback(int(k))
            self.finished = self.matcher.is_terminated()

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def copy(self) -> "PropertokGrammar":
        return PropertokGrammar(self.guide, self.vocab)

    # -- masks -------------------------------------------------------------------------------

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        import torch

        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        pt.fill_next_token_bitmask(self.matcher, vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        pt.apply_token_bitmask_inplace(logits, vocab_mask)

    # -- jump-forward --------------------------------------------------------------------------

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        """The forced run (no choice at each step) as ``(ids, text)``, or ``None``. EOS is left
        out: SGLang appends text, and EOS alone is sampled like any other token."""
        forced = [t for t in self.matcher.forced_tokens() if t not in self.vocab.eos_token_ids]
        if not forced:
            return None
        text = b"".join(self.vocab.token_bytes(t) for t in forced).decode("utf-8", errors="replace")
        return forced, text

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: Sequence[int], new_output_ids: Sequence[int], next_state: int) -> None:
        common = 0
        for a, b in zip(old_output_ids, new_output_ids):
            if a != b:
                break
            common += 1
        self.rollback(len(old_output_ids) - common)
        for token in new_output_ids[common:]:
            self.accept_token(token)


class PropertokGrammarBackend(_BackendBase):
    """Compiles requests' regexes and JSON schemas for one tokenizer (see the module docstring)."""

    def __init__(self, vocab: Any, *, whitespace: Optional[str] = None, method: str = "cartesian", **compiler_options: Any):
        super().__init__()
        self.vocab = vocab
        self.method = method
        self.whitespace = whitespace
        self.guides = GuideCache(lambda: pt.Compiler(vocab, **compiler_options))

    def _dispatch(self, **constraint: Any) -> Any:
        try:
            c = make_constraint(method=self.method, **constraint)
            guide = self.guides.get(c).result()
        except Exception as e:  # noqa: BLE001 - any failure fails this request only
            logger.error("propertok: cannot compile %s: %s", constraint, describe_error(e))
            return _invalid(f"propertok: {describe_error(e)}")
        return PropertokGrammar(guide, self.vocab)

    def dispatch_regex(self, key_string: str) -> Any:
        return self._dispatch(regex=key_string)

    def dispatch_json(self, key_string: str) -> Any:
        if key_string == "$$ANY$$":  # SGLang's "any JSON value" (response_format json_object)
            key_string = "{}"
        return self._dispatch(json_schema=key_string, whitespace=self.whitespace)

    def dispatch_ebnf(self, key_string: str) -> Any:
        # SGLang's EBNF is xgrammar's, GBNF-style (`root ::= ...`).
        return self._dispatch(grammar=key_string, syntax="gbnf")

    def dispatch_structural_tag(self, key_string: str) -> Any:
        return _invalid("propertok: structural tags are not supported")


def make_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> PropertokGrammarBackend:
    """SGLang's ``init_func``: ``(server_args, tokenizer, vocab_size, eos_token_ids)``."""
    eos = sorted(int(t) for t in eos_token_ids) if eos_token_ids else None
    vocab = pt.Vocabulary.from_tokenizer(tokenizer, eos_token_ids=eos, vocab_size=vocab_size)
    whitespace = getattr(server_args, "constrained_json_whitespace_pattern", None)
    if getattr(server_args, "constrained_json_disable_any_whitespace", False):
        whitespace = ""
    return PropertokGrammarBackend(vocab, whitespace=whitespace)


def register() -> bool:
    """Register ``make_backend`` as SGLang's grammar backend ``propertok``; False without SGLang."""
    register_fn = getattr(_sgl, "register_grammar_backend", None)
    if register_fn is None:
        return False
    register_fn(BACKEND_NAME, make_backend)
    return True


register()
