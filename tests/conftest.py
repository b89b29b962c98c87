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

from hypothesis import settings  # noqa: E402

from workloads import oracle_scale  # noqa: E402
from helpers import TokenizerUnderTest  # noqa: E402
from oracle import shared_dir  # noqa: E402


# Hypothesis: the same examples on every run by default, so a CI result does not depend on luck;
# `HYPOTHESIS_PROFILE=explore pytest ...` draws new random examples each run, to look for new
# failures. Either way, a failure prints the example that reproduces it.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


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
