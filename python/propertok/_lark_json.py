"""llguidance's ``%json { schema }`` items in Lark grammars.

Each ``%json`` item followed by a JSON Schema object stands for the JSON instances of that schema.
It is expanded before the grammar reaches the Rust parser: the schema goes through
``propertok.json_schema.schema_to_regex`` and the item becomes a regex item ``/…/`` of its
instances, so tool-call grammars can mix free text, special tokens and JSON arguments:

    start: TEXT | <|python_tag|> %json {"type": "object", "properties": {...}}

Line numbers in the Rust parser's errors are mapped back to the text as written (a multi-line
schema becomes one item on one line).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, List, Tuple, TypeVar

T = TypeVar("T")
_LINE = re.compile(r"\bline (\d+)")


def _lark_regex_body(regex: str) -> str:
    """``regex`` written so that Lark's ``/…/`` reads it back unchanged: no raw ``/`` (it would
    end the item) and no raw line break (the item must fit one line)."""
    out = []
    i = 0
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):
            nxt = regex[i + 1]
            out.append(r"\x2F" if nxt == "/" else c + nxt)
            i += 2
            continue
        out.append({"/": r"\x2F", "\n": r"\n", "\r": r"\r"}.get(c, c))
        i += 1
    return "".join(out)


def _skip_string(text: str, i: int) -> int:
    """The index past the Lark string literal starting at ``text[i] == '"'``."""
    j = i + 1
    while j < len(text) and text[j] not in '"\n':
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, len(text))


def _skip_regex(text: str, i: int) -> int:
    """The index past the Lark regex item starting at ``text[i] == '/'`` (flags included)."""
    j = i + 1
    while j < len(text) and text[j] not in "/\n":
        j += 2 if text[j] == "\\" else 1
    j += 1
    while j < len(text) and text[j].isalpha():
        j += 1
    return min(j, len(text))


def expand_json_items(text: str, **schema_options: Any) -> Tuple[str, List[int]]:
    """``text`` with every ``%json {…}`` item replaced by a regex item of the schema's
    instances, and for each line of the result the line of ``text`` it starts on (1-based).
    ``schema_options`` go to ``schema_to_regex``. ``ValueError`` naming the line for a schema
    that is not JSON or does not convert."""
    from .json_schema import schema_to_regex

    out: List[str] = []
    i = 0
    line = 1  # of `text`, at `i`
    lines = [1]  # the line of `text` each output line starts on

    while i < len(text):
        c = text[i]
        if c == '"' or (c == "/" and not text.startswith("//", i)):
            j = _skip_string(text, i) if c == '"' else _skip_regex(text, i)
        elif c == "/":  # a comment, to the end of the line
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
        elif text.startswith("%json", i) and not re.match(r"[A-Za-z0-9_]", text[i + 5 : i + 6]):
            j = i + 5
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if not text.startswith("{", j):
                raise ValueError(f"invalid grammar: line {line}: %json needs a JSON Schema object {{…}} after it")
            try:
                schema, end = json.JSONDecoder().raw_decode(text, j)
            except json.JSONDecodeError as e:
                raise ValueError(f"invalid grammar: line {line}: the schema after %json is not JSON: {e.msg}") from None
            try:
                regex = schema_to_regex(schema, **schema_options)
            except ValueError as e:
                raise ValueError(f"invalid grammar: line {line}: %json: {e}") from None
            out.append("/" + _lark_regex_body(regex) + "/")
            line += text.count("\n", i, end)
            i = end
            continue
        else:
            j = i + 1
        for _ in range(text.count("\n", i, j)):
            line += 1
            lines.append(line)
        out.append(text[i:j])
        i = j
    return "".join(out), lines


def with_lines_mapped(lines: List[int], call: Callable[[], T]) -> T:
    """``call()``, with ``line N`` in its ValueError / NotImplementedError messages mapped
    through ``lines`` (output line → original line)."""
    try:
        return call()
    except (ValueError, NotImplementedError) as e:
        def original(m: "re.Match[str]") -> str:
            n = int(m.group(1))
            return f"line {lines[n - 1] if 0 < n <= len(lines) else n}"

        message = _LINE.sub(original, str(e))
        if message == str(e):
            raise
        raise type(e)(message) from None
