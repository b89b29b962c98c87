"""Shared fixtures: one oracle, one ``Vocabulary`` and one ``Compiler`` per tokenizer per session.

``propertok`` is imported inside the ``pt`` fixture, never at module level: the oracle's own tests
(``test_oracle_helper.py``) then collect and run without the extension, while every propertok test
*errors* (never skips) when ``propertok`` cannot be imported, so a missing extension fails CI.

The shared folder is ``$PROPERTOK_SHARED`` (default ``<repo root>/../shared``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import Oracle, oracle_for, shared_dir, tokenizer_path  # noqa: E402


def oracle_scale() -> float:
    """``$PROPERTOK_ORACLE_SCALE`` (default 1.0) scales the number of regexes of the oracle tests."""
    return float(os.environ.get("PROPERTOK_ORACLE_SCALE", "1.0"))


def pytest_report_header(config):
    return [f"propertok shared dir: {shared_dir()}", f"PROPERTOK_ORACLE_SCALE={oracle_scale()}"]


@pytest.fixture(scope="session", autouse=True)
def _shared_dir_exists():
    if not (shared_dir() / "tokenizers").is_dir():
        pytest.fail(
            f"shared material not found at {shared_dir()} (set PROPERTOK_SHARED to the folder that "
            "holds tokenizers/ and data/)"
        )


@pytest.fixture(scope="session")
def pt():
    """The propertok package (an ImportError here fails every test that needs it)."""
    import propertok

    return propertok


class TokenizerUnderTest:
    """A shared tokenizer: its oracle and, built lazily once, its Vocabulary, Compiler and guides."""

    def __init__(self, pt, name: str):
        self.pt = pt
        self.name = name
        self.path = tokenizer_path(name)
        self.oracle: Oracle = oracle_for(name)
        self._vocab = None
        self._compiler = None
        self._guides: dict = {}

    @property
    def vocab(self):
        if self._vocab is None:
            self._vocab = self.pt.Vocabulary.from_file(str(self.path))
        return self._vocab

    @property
    def compiler(self):
        if self._compiler is None:
            self._compiler = self.pt.Compiler(self.vocab)
        return self._compiler

    def guide(self, regex: str, method: str = "cartesian"):
        """A compiled guide, cached for the session (guides are immutable)."""
        key = (regex, method)
        if key not in self._guides:
            self._guides[key] = self.compiler.compile_regex(regex, method=method)
        return self._guides[key]

    def __repr__(self) -> str:
        return f"TokenizerUnderTest({self.name!r})"


@pytest.fixture(scope="session")
def tokenizer_under_test(pt):
    """Factory: ``tokenizer_under_test("mistral7b")``, the same object for the whole session."""
    cache: dict[str, TokenizerUnderTest] = {}

    def get(name: str) -> TokenizerUnderTest:
        if name not in cache:
            cache[name] = TokenizerUnderTest(pt, name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def mistral(tokenizer_under_test) -> TokenizerUnderTest:
    return tokenizer_under_test("mistral7b")


@pytest.fixture(scope="session")
def llama2(tokenizer_under_test) -> TokenizerUnderTest:
    return tokenizer_under_test("llama2")
