"""The Python code blocks of README.md and docs/*.md run, in order, one namespace per file.

A block preceded by ``<!-- skip-test: needs torch -->`` (or ``needs transformers``, or both,
``needs torch, transformers``) is skipped only when one of those packages cannot be imported, and
``needs shared`` only when the shared corpus is absent (never where ``$PROPERTOK_REQUIRE_SHARED``
is set, as in CI); every skipped block is counted and printed, and no other block is ever
skipped. Blocks run in
the repository root, so relative paths in the docs work as written.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
from oracle import REQUIRE_SHARED_ENV, has_shared

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"(?P<marker><!--\s*skip-test:\s*needs (?P<needs>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)\n```", re.S)
SKIPPED: list = []


def python_blocks(text: str):
    """``(line, code, needs)`` for each fenced python block; ``needs`` lists the packages of a
    skip-test marker right before it."""
    for m in _BLOCK.finditer(text):
        needs = [n.strip() for n in (m.group("needs") or "").split(",") if n.strip()]
        yield text.count("\n", 0, m.start("code")) + 1, m.group("code"), needs


def test_marker_parsing():
    text = "x\n```python\na = 1\n```\n<!-- skip-test: needs torch, transformers -->\n```python\nb\n```\n"
    blocks = list(python_blocks(text))
    assert [(line, code, needs) for line, code, needs in blocks] == [
        (3, "a = 1", []), (7, "b", ["torch", "transformers"])]


def available(need: str) -> bool:
    if need == "shared":
        return has_shared() or bool(os.environ.get(REQUIRE_SHARED_ENV))
    return importlib.util.find_spec(need) is not None


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_code_blocks_run(path, monkeypatch, capsys):
    blocks = list(python_blocks(path.read_text(encoding="utf-8")))
    assert blocks or path.name != "engines.md", f"{path} has no python blocks"
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"doc:{path.name}"}
    ran = 0
    for line, code, needs in blocks:
        missing = [n for n in needs if not available(n)]
        if missing:
            SKIPPED.append(f"{path.relative_to(ROOT)}:{line} (needs {', '.join(missing)})")
            continue
        exec(compile(code, f"{path.relative_to(ROOT)}:{line}", "exec"), namespace)
        ran += 1
    with capsys.disabled():
        print(f"\n{path.relative_to(ROOT)}: ran {ran} python block(s), skipped {len(blocks) - ran}"
              + "".join(f"\n  skipped {s}" for s in SKIPPED if s.startswith(str(path.relative_to(ROOT)))))
