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

