"""What the engine adapters share: a request's constraint, its static check, and a compile cache.

Nothing here imports an engine, torch or transformers, so it is unit-tested everywhere.

* :class:`Constraint` is what a request asks for (a regex, a JSON Schema or a Lark / GBNF
  grammar, the method, the schema or grammar options); it is hashable, and equal constraints
  share one compiled guide.
* :func:`check_constraint` is the *static* check an engine runs when a request arrives (vLLM's
  ``validate_params``): the regex parses and has a non-empty language, the schema converts, the
  grammar parses.
  It needs no tokenizer, so it runs in the engine's front end, where a ``ValueError`` becomes a
  client error (HTTP 400). What depends on the tokenizer or on size limits is found only when
  the guide is compiled, in the engine core.
* :class:`GuideCache` compiles in a small thread pool (compilation releases the GIL once it
  passes a millisecond; most lazy compiles take less), at most
  once per constraint, so a compile runs while the engine does other work; ``Future.result``
  with a timeout bounds how long a step may wait for one.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, NamedTuple, Optional, Tuple

import propertok as pt
from propertok._compiler import grammar_regex_or_none

logger = logging.getLogger("propertok.integrations")

METHODS = ("cartesian", "direct", "auto", "agnostic")
KINDS = ("regex", "json", "grammar")
SYNTAXES = ("lark", "gbnf")


class Constraint(NamedTuple):
    """One request's constraint. ``spec``: the regex, the schema as canonical JSON text (sorted
    keys), so that equal schemas written differently share a guide, or the grammar's text.
    ``options``: sorted ``(name, value)`` pairs for ``schema_to_regex`` (``whitespace``) or
    ``compile_grammar`` (``syntax``)."""

    kind: str
    spec: str
    method: str = "cartesian"
    options: Tuple[Tuple[str, Any], ...] = ()

    def describe(self, limit: int = 80) -> str:
        text = self.spec if len(self.spec) <= limit else self.spec[: limit - 3] + "..."
        return f"{self.kind} {text!r} (method={self.method})"


def make_constraint(
    *,
    regex: Any = None,
    json_schema: Any = None,
    grammar: Any = None,
    method: Any = None,
    whitespace: Any = None,
    syntax: Any = None,
) -> Optional[Constraint]:
    """A :class:`Constraint` from request arguments, ``None`` when none of ``regex``,
    ``json_schema`` and ``grammar`` is given; ``ValueError`` naming the argument for wrong types
    or values. ``json_schema``: a dict, a bool or JSON text; ``grammar``: Lark (default) or GBNF
    (``syntax="gbnf"``) text."""
    given = [name for name, x in (("a regex", regex), ("a JSON schema", json_schema), ("a grammar", grammar))
             if x is not None]
    if not given:
        if method is not None or whitespace is not None or syntax is not None:
            raise ValueError("propertok: a method, whitespace or syntax was given without a regex, a JSON schema "
                             "or a grammar")
        return None
    if len(given) > 1:
        raise ValueError(f"propertok: give one of a regex, a JSON schema or a grammar, not {' and '.join(given)}")
    method = "cartesian" if method is None else method
    if method not in METHODS:
        raise ValueError(f"propertok: unknown method {method!r} (one of {', '.join(METHODS)})")
    if syntax is not None and grammar is None:
        raise ValueError("propertok: syntax applies to a grammar")
    if grammar is not None:
        if not isinstance(grammar, str):
            raise ValueError(f"propertok: the grammar must be a string, got {type(grammar).__name__}")
        if whitespace is not None:
            raise ValueError("propertok: whitespace applies to a JSON schema, not to a grammar")
        syntax = "lark" if syntax is None else syntax
        if syntax not in SYNTAXES:
            raise ValueError(f"propertok: unknown grammar syntax {syntax!r} (one of {', '.join(SYNTAXES)})")
        return Constraint("grammar", grammar, method, (("syntax", syntax),))
    if regex is not None:
        if not isinstance(regex, str):
            raise ValueError(f"propertok: the regex must be a string, got {type(regex).__name__}")
        if whitespace is not None:
            raise ValueError("propertok: whitespace applies to a JSON schema, not to a regex")
        return Constraint("regex", regex, method)
    if isinstance(json_schema, (bytes, bytearray)):
        json_schema = json_schema.decode("utf-8")
    if isinstance(json_schema, str):
        try:
            json_schema = json.loads(json_schema)
        except ValueError as e:
            raise ValueError(f"propertok: the JSON schema is not valid JSON: {e}") from None
    if not isinstance(json_schema, (dict, bool)):
        raise ValueError(f"propertok: the JSON schema must be an object or a boolean, got {type(json_schema).__name__}")
    options: Tuple[Tuple[str, Any], ...] = ()
    if whitespace is not None:
        if not isinstance(whitespace, str):
            raise ValueError(f"propertok: whitespace must be a string (a regex), got {type(whitespace).__name__}")
        options = (("whitespace", whitespace),)
    spec = json.dumps(json_schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return Constraint("json", spec, method, options)


def constraint_regex(constraint: Constraint) -> Optional[str]:
    """The regex the guide is compiled from (a schema or grammar converted; ``ValueError`` if it
    cannot be); ``None`` for a grammar that names special tokens or nests rules, which has none."""
    if constraint.kind == "regex":
        return constraint.spec
    if constraint.kind == "json":
        from propertok.json_schema import schema_to_regex

        return schema_to_regex(json.loads(constraint.spec), **dict(constraint.options))
    if constraint.kind == "grammar":
        return grammar_regex_or_none(constraint.spec, **dict(constraint.options))
    raise ValueError(f"propertok: unknown constraint kind {constraint.kind!r}")


# The static check builds the regex's byte DFA: milliseconds for real constraints, bounded for
# pathological ones (LimitExceeded past this many states is reported as a bad request). The
# Compiler's default `max_byte_dfa_states`, so that nothing it would compile is refused here.
STATIC_CHECK_MAX_DFA_STATES = 250_000


def check_constraint(constraint: Constraint) -> None:
    """``ValueError`` (with a message meant for the client) when the constraint can never compile
    for any tokenizer: invalid or unsupported regex syntax, an empty language, a schema that does
    not convert, a grammar that does not parse or has no regex, a byte DFA past
    :data:`STATIC_CHECK_MAX_DFA_STATES`. A grammar that names special tokens or nests rules has no regex to
    check; such a grammar is checked when it compiles."""
    try:
        regex = constraint_regex(constraint)
        if regex is not None:
            pt.ByteDfa(regex, STATIC_CHECK_MAX_DFA_STATES)
    except (ValueError, TypeError, NotImplementedError, pt.LimitExceeded) as e:
        raise ValueError(f"propertok: invalid {constraint.kind} constraint: {e}") from None


def compile_constraint(compiler: Any, constraint: Constraint) -> Any:
    """Compile ``constraint`` with ``compiler`` (a :class:`propertok.Compiler`)."""
    if constraint.kind == "regex":
        return compiler.compile_regex(constraint.spec, method=constraint.method)
    if constraint.kind == "grammar":
        return compiler.compile_grammar(constraint.spec, method=constraint.method, **dict(constraint.options))
    return compiler.compile_json_schema(json.loads(constraint.spec), method=constraint.method, **dict(constraint.options))


class GuideCache:
    """Compiled guides by constraint, compiled in a thread pool, each at most once.

    ``make_compiler``: called once, in a worker thread, on the first compile (building the
    vocabulary and the compiler can take seconds, so an engine that never sees a propertok
    request never pays for it). ``max_entries``: completed guides kept (least recently used
    first out); a guide in use by a request stays alive through its matcher anyway. A failed
    compile is not kept: the next request with that constraint tries again.
    """

    def __init__(self, make_compiler: Callable[[], Any], *, max_entries: int = 256, max_workers: int = 2):
        self._make_compiler = make_compiler
        self._compiler: Any = None
        self._compiler_lock = threading.Lock()
        self._lock = threading.Lock()
        self._entries: "OrderedDict[Constraint, Future]" = OrderedDict()
        self._max_entries = max_entries
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="propertok-compile")
        self.compiles = 0  # compiles started (cache misses), for tests and logs

    @property
    def compiler(self) -> Any:
        with self._compiler_lock:
            if self._compiler is None:
                self._compiler = self._make_compiler()
            return self._compiler

    def get(self, constraint: Constraint) -> "Future":
        """A future of the guide (done at once on a hit)."""
        with self._lock:
            future = self._entries.get(constraint)
            if future is not None:
                self._entries.move_to_end(constraint)
                return future
            future = self._executor.submit(self._compile, constraint)
            self.compiles += 1
            self._entries[constraint] = future
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        future.add_done_callback(lambda f, c=constraint: self._forget_failure(c, f))
        return future

    def _compile(self, constraint: Constraint) -> Any:
        return compile_constraint(self.compiler, constraint)

    def _forget_failure(self, constraint: Constraint, future: "Future") -> None:
        if future.cancelled() or future.exception() is not None:
            with self._lock:
                if self._entries.get(constraint) is future:
                    del self._entries[constraint]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def describe_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def vocabulary_from_tokenizer_dir_or_name(
    tokenizer: str, *, vocab_size: Optional[int], revision: Optional[str] = None, trust_remote_code: bool = False
) -> Any:
    """The :class:`propertok.Vocabulary` of a model's tokenizer, as an engine names it (a local
    folder or a hub name, loaded by transformers from its cache: nothing is downloaded that the
    engine did not already fetch)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer, revision=revision, trust_remote_code=trust_remote_code)
    return pt.Vocabulary.from_tokenizer(tok, vocab_size=vocab_size)

