"""A vLLM V1 logits processor: canonical constrained decoding for the requests that ask for it.

Installing ``propertok[vllm]`` registers it through the entry point group
``vllm.logits_processors``, so every vLLM engine loads it; it can also be named explicitly
(``LLM(logits_processors=[PropertokLogitsProcessor])`` or
``--logits-processors propertok.integrations.vllm:PropertokLogitsProcessor``). A request opts
in through ``SamplingParams.extra_args`` (``vllm_xargs`` in an OpenAI request body)::

    SamplingParams(extra_args={"propertok_regex": r"[0-9]{3}-[0-9]{4}"})
    SamplingParams(extra_args={"propertok_json_schema": schema})   # a dict, or JSON text
    SamplingParams(extra_args={"propertok_grammar": lark_text})    # Lark, or GBNF with the syntax
    # optional: "propertok_method" ("cartesian", "direct", "auto", "agnostic"),
    #           "propertok_whitespace" (a regex between JSON tokens, default "[ ]?"),
    #           "propertok_grammar_syntax" ("lark", the default, or "gbnf")

Other requests' rows are never touched, and with no propertok request in the batch ``apply``
returns at once.

How it follows vLLM:

* ``validate_params`` (front end, per request): the arguments' types, and a static check that
  needs no tokenizer (the regex parses and matches something; the schema converts). A
  ``ValueError`` there is a client error: ``LLM.generate`` raises it, the server answers 400.
* ``update_state`` (engine core, every step): ``BatchUpdate.removed``, then ``added``, then
  ``moved``, as vLLM documents. An added request gets a row state holding the *live* list of its
  output ids and the future of its guide: the compile starts here, in a thread pool, while the
  step goes on. Requests with the same constraint share one compiled guide (and its cached
  masks); each has its own matcher.
* ``apply`` (engine core, every step, before sampling): each constrained row's matcher catches
  up with the row's output ids (new ones accepted; ids vLLM discarded are rolled back; trailing
  ``-1`` placeholders of asynchronous scheduling ignored), its allowed tokens are written into an
  int32 bitmask, and the disallowed logits of those rows only are set to ``-inf``. A row whose
  guide is still compiling waits for it, at most until ``compile_timeout`` seconds after the
  request arrived.
* A compile that fails (a tokenizer the canonical method cannot make exact, a size limit, the
  time limit) fails only that request: its row allows only EOS, so it finishes at once with
  empty text, and the engine log says why. Nothing in vLLM 0.32's logits-processor interface can
  abort one request with an error message; what can be found without the tokenizer is found
  earlier, by ``validate_params``.

Settings (environment of the engine process): ``PROPERTOK_VLLM_COMPILE_TIMEOUT`` (seconds,
default 30: both the compiler's ``max_compile_seconds`` and the longest a step waits for a
guide), ``PROPERTOK_VLLM_CACHE_ENTRIES`` (compiled guides kept, default 256),
``PROPERTOK_VLLM_PREFETCH_SECONDS`` (the compiler's ``prefetch_seconds``, default 0.002: the
compile overlaps the prefill, the masks are on the engine loop; 0 turns it off),
``PROPERTOK_CACHE_DIR`` (the compiler's tokenizer-DFA cache, see ``propertok.Compiler``).

vLLM 0.32 has two model runners. This processor implements the V1 runner's interface
(``vllm.v1.sample.logits_processor.LogitsProcessor``), the one vLLM's CPU build uses and
``VLLM_USE_V2_MODEL_RUNNER=0`` selects on GPUs. Under the V2 runner it loads (so installing
propertok never stops vLLM from starting), and a propertok request is ended at once (only its
stop tokens allowed) with an error in the log: never decoded unconstrained. That path is
untested against a real V2 runner (it needs a GPU build of vLLM).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import propertok as pt
from propertok.integrations._serving import (
    Constraint,
    GuideCache,
    check_constraint,
    describe_error,
    make_constraint,
)

logger = logging.getLogger("propertok.integrations.vllm")

__all__ = ["EXTRA_ARGS", "PropertokLogitsProcessor", "constraint_from_params", "extra_args"]

#: The ``SamplingParams.extra_args`` keys this processor reads.
EXTRA_ARGS = ("propertok_regex", "propertok_json_schema", "propertok_grammar", "propertok_grammar_syntax",
              "propertok_method", "propertok_whitespace")

DEFAULT_COMPILE_TIMEOUT = 30.0
DEFAULT_CACHE_ENTRIES = 256
# The compile runs in a worker thread while the prompt is prefilled, and masks are filled on the
# engine loop at every step: 2 ms of prefetching there moves first visits off the loop (Llama 3:
# a document's first-visit mask median ~13.5 -> ~6 us, benches/RESULTS.md "Stop 51").
DEFAULT_PREFETCH_SECONDS = 0.002


class _PlainBase:
    """Stands in for vLLM's base classes when vLLM is not installed (unit tests)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


try:  # the V1 interface: the processor's real base
    from vllm.v1.sample.logits_processor import LogitsProcessor as _V1Base
except ImportError:  # vLLM absent (or too old): plain class, same logic
    _V1Base = _PlainBase

try:  # the V2 runner's interface, only so that its plugin loader accepts the class
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as _V2Base
except ImportError:
    _V2Base = None

_BASES = tuple(b for b in (_V1Base, _V2Base) if b is not None and b is not _PlainBase) or (_PlainBase,)


def extra_args(
    *,
    regex: Optional[str] = None,
    json_schema: Any = None,
    grammar: Optional[str] = None,
    syntax: Optional[str] = None,
    method: Optional[str] = None,
    whitespace: Optional[str] = None,
) -> Dict[str, Any]:
    """The ``extra_args`` (or ``vllm_xargs``) entries for a constraint, e.g.
    ``SamplingParams(extra_args=extra_args(regex=r"[0-9]+"))``. A schema given as a dict is
    sent as JSON text, which both ``extra_args`` and ``vllm_xargs`` accept."""
    import json

    out: Dict[str, Any] = {}
    if regex is not None:
        out["propertok_regex"] = regex
    if json_schema is not None:
        out["propertok_json_schema"] = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
    if grammar is not None:
        out["propertok_grammar"] = grammar
    if syntax is not None:
        out["propertok_grammar_syntax"] = syntax
    if method is not None:
        out["propertok_method"] = method
    if whitespace is not None:
        out["propertok_whitespace"] = whitespace
    make_constraint(regex=regex, json_schema=json_schema, grammar=grammar, syntax=syntax, method=method,
                    whitespace=whitespace)  # validate
    return out


def constraint_from_params(sampling_params: Any) -> Optional[Constraint]:
    """The request's :class:`~propertok.integrations._serving.Constraint`, ``None`` without one;
    ``ValueError`` for malformed arguments."""
    args = getattr(sampling_params, "extra_args", None) or {}
    if not isinstance(args, dict):
        return None
    return make_constraint(
        regex=args.get("propertok_regex"),
        json_schema=args.get("propertok_json_schema"),
        grammar=args.get("propertok_grammar"),
        syntax=args.get("propertok_grammar_syntax"),
        method=args.get("propertok_method"),
        whitespace=args.get("propertok_whitespace"),
    )


class _Row:
    """One constrained request in the persistent batch."""

    __slots__ = ("constraint", "future", "output_ids", "deadline", "matcher", "fed", "failed")

    def __init__(self, constraint: Constraint, future: Any, output_ids: List[int], deadline: float):
        self.constraint = constraint
        self.future = future
        self.output_ids = output_ids  # vLLM's live list: it grows as tokens are sampled
        self.deadline = deadline
        self.matcher: Any = None
        self.fed = 0  # how many output ids the matcher has accepted
        self.failed = False


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return default if value in (None, "") else float(value)


class PropertokLogitsProcessor(*_BASES):  # type: ignore[misc]
    """See the module docstring. Constructed by vLLM as ``(vllm_config, device, is_pin_memory)``."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        constraint = constraint_from_params(sampling_params)
        if constraint is None:
            return
        if getattr(sampling_params, "structured_outputs", None) is not None:
            raise ValueError("propertok: a request cannot use both propertok_* extra_args and structured_outputs")
        check_constraint(constraint)

    def __init__(self, vllm_config: Any, device: Any = None, is_pin_memory: bool = False):
        self._v2 = _V2Base is not None and not hasattr(device, "type") and device is not None and hasattr(
            device, "all_token_ids"
        )
        if self._v2:  # the V2 runner passes (vllm_config, req_states): see _v2_* below
            return
        self.device = device
        self.is_pin_memory = bool(is_pin_memory)
        self.compile_timeout = _env_float("PROPERTOK_VLLM_COMPILE_TIMEOUT", DEFAULT_COMPILE_TIMEOUT)
        self.prefetch_seconds = _env_float("PROPERTOK_VLLM_PREFETCH_SECONDS", DEFAULT_PREFETCH_SECONDS)
        model_config = getattr(vllm_config, "model_config", None)
        self.vocab_size = int(model_config.get_vocab_size()) if model_config is not None else None
        scheduler_config = getattr(vllm_config, "scheduler_config", None)
        self.max_num_seqs = int(getattr(scheduler_config, "max_num_seqs", 0) or 256)
        self._model_config = model_config
        self.cache = GuideCache(
            self._make_compiler,
            max_entries=int(_env_float("PROPERTOK_VLLM_CACHE_ENTRIES", DEFAULT_CACHE_ENTRIES)),
        )
        self.rows: Dict[int, _Row] = {}
        self._bitmask: Any = None  # (max_num_seqs, words) int32, allocated on the first constrained step
        self._eos_row: Optional[np.ndarray] = None

    # -- the compiler, built lazily in a worker thread --------------------------------------

    def _make_compiler(self) -> Any:
        vocab = self._load_vocabulary()
        return pt.Compiler(vocab, max_compile_seconds=self.compile_timeout, prefetch_seconds=self.prefetch_seconds)

    def _load_vocabulary(self) -> Any:
        mc = self._model_config
        if mc is None:
            raise RuntimeError("propertok: vllm_config has no model_config: cannot find the tokenizer")
        tokenizer = getattr(mc, "tokenizer", None) or getattr(mc, "model")
        local_json = os.path.join(str(tokenizer), "tokenizer.json")
        try:
            from transformers import AutoTokenizer
        except ImportError:
            AutoTokenizer = None
        if AutoTokenizer is None:
            if not os.path.isfile(local_json):
                raise RuntimeError(f"propertok: no tokenizer.json in {tokenizer!r} and transformers is not installed")
            return pt.Vocabulary.from_file(local_json, vocab_size=self.vocab_size)
        tok = AutoTokenizer.from_pretrained(
            tokenizer,
            revision=getattr(mc, "tokenizer_revision", None),
            trust_remote_code=bool(getattr(mc, "trust_remote_code", False)),
        )
        return pt.Vocabulary.from_tokenizer(tok, vocab_size=self.vocab_size)

    # -- vLLM's interface --------------------------------------------------------------------

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes the greedy choice

    def update_state(self, batch_update: Any) -> None:
        if self._v2 or not batch_update:
            return
        rows = self.rows
        for index in batch_update.removed:
            rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            constraint = _constraint_or_none(params)
            if constraint is None:
                rows.pop(index, None)  # an added request replaces whatever held this index
                continue
            future = self.cache.get(constraint)
            rows[index] = _Row(constraint, future, output_ids, time.monotonic() + self.compile_timeout)
        for a, b, direction in batch_update.moved:
            row_a = rows.pop(a, None)
            row_b = rows.pop(b, None)
            if row_a is not None:
                rows[b] = row_a
            if _is_swap(direction) and row_b is not None:
                rows[a] = row_b

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        if self._v2:
            return self._v2_apply(logits, ctx)
        if not self.rows:
            return logits
        num_rows = int(logits.shape[0])
        indices = sorted(i for i in self.rows if i < num_rows)
        if not indices:
            return logits
        bitmask = self._bitmask_rows(len(indices))
        for k, index in enumerate(indices):
            self._fill(self.rows[index], bitmask, k)
        if indices == list(range(num_rows)):
            pt.apply_token_bitmask_inplace(logits, bitmask, vocab_size=self.vocab_size)
        else:
            _apply_to_rows(logits, bitmask, indices, self.vocab_size)
        return logits

    # -- per row -------------------------------------------------------------------------

    def _fill(self, row: _Row, bitmask: Any, k: int) -> None:
        if row.matcher is None and not row.failed:
            self._start(row)
        if row.failed:
            bitmask[k] = self._eos_only()
            return
        self._catch_up(row)
        if row.failed:
            bitmask[k] = self._eos_only()
            return
        row.matcher.fill_next_token_bitmask(bitmask, k)

    def _start(self, row: _Row) -> None:
        try:
            guide = row.future.result(timeout=max(0.0, row.deadline - time.monotonic()))
        except Exception as e:  # a compile error, or the time limit (concurrent.futures.TimeoutError)
            reason = describe_error(e) if str(e) else f"no guide within {self.compile_timeout:g} s"
            logger.error("propertok: %s could not be compiled (%s); the request ends now (EOS only)",
                         row.constraint.describe(), reason)
            row.failed = True
            return
        row.matcher = guide.matcher()

    def _catch_up(self, row: _Row) -> None:
        ids = row.output_ids
        n = len(ids)
        while n > 0 and ids[n - 1] == -1:  # asynchronous scheduling's placeholders
            n -= 1
        if n < row.fed:  # vLLM discarded tokens (e.g. after a KV-load failure)
            row.matcher.rollback(row.fed - n)
            row.fed = n
        matcher = row.matcher
        for j in range(row.fed, n):
            token = int(ids[j])
            if matcher.is_terminated():
                break
            if not matcher.accept_token(token):
                logger.error(
                    "propertok: token %d at output position %d is not allowed by %s (was the mask "
                    "overridden by another processor?); the request ends now (EOS only)",
                    token, j, row.constraint.describe())
                row.failed = True
                return
        row.fed = n

    # -- bitmask helpers ---------------------------------------------------------------------

    def _bitmask_rows(self, count: int) -> np.ndarray:
        if self._bitmask is None or self._bitmask.shape[0] < count:
            rows = max(count, self.max_num_seqs)
            width = self.vocab_size or self.cache.compiler.vocabulary.vocab_size
            self._bitmask = pt.allocate_token_bitmask(rows, width)
        return self._bitmask[:count]

    def _eos_only(self) -> np.ndarray:
        if self._eos_row is None:
            vocab = self.cache.compiler.vocabulary
            row = np.zeros(self._bitmask.shape[1], dtype=np.uint32)
            for eos in vocab.eos_token_ids:
                row[eos // 32] |= np.uint32(1) << np.uint32(eos % 32)
            self._eos_row = row.view(np.int32)
        return self._eos_row

    # -- the V2 runner: loaded, but propertok requests end at once --------------------------

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """V2 runner (not implemented): a propertok request is logged and ended (its rows allow
        only its stop tokens), never decoded unconstrained and never crashing the engine."""
        refused = self.__dict__.setdefault("_v2_refused", {})
        refused.pop(req_idx, None)
        if _constraint_or_none(sampling_params) is None:
            return False
        logger.error("propertok's vLLM processor implements the V1 model runner's interface; start vLLM "
                     "with VLLM_USE_V2_MODEL_RUNNER=0 to use propertok_* extra_args (request ended)")
        refused[req_idx] = sorted(getattr(sampling_params, "all_stop_token_ids", None) or ())
        return True

    def _v2_apply(self, logits: Any, ctx: Any) -> Any:
        refused = self.__dict__.get("_v2_refused")
        if not refused or ctx is None:
            return logits
        slots = ctx.expanded_idx_mapping.tolist()
        for row, slot in enumerate(slots):
            stops = refused.get(int(slot))
            if stops is None:
                continue
            keep = logits[row, stops].clone() if stops else None
            logits[row].fill_(float("-inf"))
            if stops:
                logits[row, stops] = keep
        return logits


def _constraint_or_none(params: Any) -> Optional[Constraint]:
    try:
        return constraint_from_params(params)
    except ValueError:  # validate_params refused it already; never here in practice
        return None


def _is_swap(direction: Any) -> bool:
    return getattr(direction, "name", str(direction)).upper().endswith("SWAP")


def _apply_to_rows(logits: Any, bitmask: np.ndarray, indices: Sequence[int], vocab_size: Optional[int]) -> None:
    """Mask only ``logits[indices]`` (the other rows are left exactly as they are)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(logits, torch.Tensor):
        idx = torch.as_tensor(indices, dtype=torch.long, device=logits.device)
        sub = logits.index_select(0, idx)
        pt.apply_token_bitmask_inplace(sub, bitmask, vocab_size=vocab_size)
        logits.index_copy_(0, idx, sub)
        return
    sub = logits[list(indices)]
    pt.apply_token_bitmask_inplace(sub, bitmask, vocab_size=vocab_size)
    logits[list(indices)] = sub
