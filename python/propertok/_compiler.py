"""``propertok.Compiler``: the Rust ``_core.Compiler`` plus what is written in Python.

The extension never imports this package; JSON Schema compilation is added here, on a subclass.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from . import _core
from ._lark_json import expand_json_items, with_lines_mapped


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
        to the converter.

        In a lazy guide (the default with ``"cartesian"``) without ``max_recursion_depth``,
        recursion has no bound: a ``$ref`` cycle and a free value (``{}``, ``true``) are rules
        of a pushdown automaton (``propertok.json_schema.schema_to_rules``), as
        ``compile_grammar`` runs nesting grammars; a schema without either is one regex, the
        same as ``schema_to_regex``'s. Otherwise (``lazy=False``, another method, a
        ``max_recursion_depth``, or a WordPiece tokenizer, whose guides have no pushdown form
        and default to the bound) ``max_recursion_depth`` (default 3) unrolls recursion into
        the regex."""
        from .json_schema import schema_to_regex, schema_to_rules

        unbounded = lazy if lazy is not None else self.vocabulary.kind != "wordpiece"
        if unbounded and method == "cartesian" and "max_recursion_depth" not in options:
            rules = schema_to_rules(schema, **options)
            if len(rules) == 1:
                return self.compile_regex(rules[0][1], method, lazy=True)
            return self._compile_rule_regexes(rules)
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
        """``_core.Compiler.compile_grammar`` (see its docs), with llguidance's ``%json {schema}``
        items of Lark grammars expanded first (``propertok.grammar_to_regex`` says how)."""
        text, lines = _expand(grammar, syntax, max_recursion_depth)
        return with_lines_mapped(lines, lambda: _core.Compiler.compile_grammar(
            self, text, syntax, method, lazy=lazy, start=start, max_recursion_depth=max_recursion_depth,
            max_regex_bytes=max_regex_bytes))


def grammar_to_regex(
    grammar: str,
    syntax: str = "lark",
    *,
    start: Optional[str] = None,
    max_recursion_depth: Optional[int] = None,
    max_regex_bytes: int = 1 << 20,
) -> str:
    """A Lark or GBNF grammar's start rule as one regex: ``_core.grammar_to_regex`` (see its
    docs), with llguidance's ``%json {schema}`` items of Lark grammars expanded first: each
    stands for the JSON instances of its schema, as ``propertok.json_schema.schema_to_regex``
    writes them (its defaults; ``max_recursion_depth``, when given, also bounds the schema's
    ``$ref`` recursion)."""
    text, lines = _expand(grammar, syntax, max_recursion_depth)
    return with_lines_mapped(lines, lambda: _core.grammar_to_regex(
        text, syntax, start=start, max_recursion_depth=max_recursion_depth, max_regex_bytes=max_regex_bytes))


def grammar_regex_or_none(grammar: str, syntax: str = "lark", **options: Any) -> Optional[str]:
    """``grammar_to_regex(grammar, syntax, **options)``, or ``None`` when the grammar has no
    regex but parses: it names special tokens (not text; ``Compiler.compile_grammar`` resolves
    them against a tokenizer) or nests rules without ``max_recursion_depth`` (lazy guides run
    it as a pushdown automaton)."""
    try:
        return grammar_to_regex(grammar, syntax, **options)
    except NotImplementedError as e:
        if "names the special token" not in str(e) and "no regex says nesting" not in str(e):
            raise
        return None


def _expand(grammar: str, syntax: str, max_recursion_depth: Optional[int]) -> Tuple[str, List[int]]:
    """The grammar with its ``%json`` items expanded (Lark only), and the line map."""
    if syntax != "lark" or not isinstance(grammar, str) or "%json" not in grammar:
        return grammar, []
    options = {} if max_recursion_depth is None else {"max_recursion_depth": max_recursion_depth}
    return expand_json_items(grammar, **options)
