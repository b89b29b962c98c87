"""``propertok.Compiler``: the Rust ``_core.Compiler`` plus what is written in Python.

The extension never imports this package; JSON Schema compilation is added here, on a subclass.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _core


class Compiler(_core.Compiler):
    """Compiles regexes, JSON schemas and grammars into guides for one vocabulary (see ``_core.Compiler``).

    Reusable and thread-safe: the tokenizer DFA is built (or loaded from ``cache_dir``) once, on
    the first canonical compile, and shared by every guide.
    """

    __slots__ = ()

    def compile_json_schema(
        self, schema: Any, method: str = "cartesian", *, lazy: Optional[bool] = None, **options: Any
    ) -> _core.Guide:
        """Compile a JSON schema (a dict or JSON text): ``propertok.json_schema.schema_to_regex(schema,
        **options)``, then ``compile_regex(regex, method, lazy=lazy)``. Options such as
        ``whitespace``, ``strict`` and ``resources`` (other documents ``$ref`` may point to) go
        to the converter."""
        from .json_schema import schema_to_regex

        return self.compile_regex(schema_to_regex(schema, **options), method, lazy=lazy)

    def compile_grammar(
        self,
        grammar: str,
        syntax: str = "lark",
        method: str = "cartesian",
        *,
        lazy: Optional[bool] = None,
        start: Optional[str] = None,
        max_recursion_depth: Optional[int] = None,
        max_regex_bytes: int = 1 << 20,
    ) -> _core.Guide:
        """Compile a Lark or GBNF grammar: ``propertok.grammar_to_regex(grammar, syntax, start=...,
        max_recursion_depth=..., max_regex_bytes=...)``, then ``compile_regex(regex, method,
        lazy=lazy)``. Its masks are exactly canonical like any regex's; grammars whose rules nest
        recursively need ``max_recursion_depth`` (see ``grammar_to_regex`` and
        ``docs/grammars.md``).

        ``lazy`` defaults to ``True`` with ``"cartesian"`` (unlike ``compile_regex``): a grammar's
        regex repeats every rule it inlines, and an eager guide of it can take seconds on a
        128k-vocabulary tokenizer (JSON nested 3 deep on Llama 3: 19.8 s eager, 18 ms lazy,
        ``benches/RESULTS.md``). ``lazy=False`` asks for the eager guide."""
        regex = _core.grammar_to_regex(
            grammar,
            syntax,
            start=start,
            max_recursion_depth=max_recursion_depth,
            max_regex_bytes=max_regex_bytes,
        )
        if lazy is None and method == "cartesian":
            lazy = True
        return self.compile_regex(regex, method, lazy=lazy)
