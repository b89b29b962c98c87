"""Shared fixtures: one oracle, one ``Vocabulary`` and one ``Compiler`` per tokenizer per session.

``propertok`` is imported inside the ``pt`` fixture, never at module level: the oracle's own tests
(``test_oracle_helper.py``) then collect and run without the extension, while every propertok test
*errors* (never skips) when ``propertok`` cannot be imported, so a missing extension fails CI.

The shared folder is ``$PROPERTOK_SHARED`` (default ``<repo root>/../shared``). Without it, the
suites that need it skip with one message each (``support/oracle.py: require_shared``); the
in-repository corpus (``tests/corpus``) and the suites on the embedded Mistral-7B tokenizer still
run. Support modules live in ``tests/support`` (put on ``sys.path`` here).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from hypothesis import settings  # noqa: E402

from workloads import oracle_scale  # noqa: E402
from helpers import TOKENIZER_DFA_CACHE_ENV, TokenizerUnderTest  # noqa: E402
from oracle import REQUIRE_SHARED_ENV, has_shared, shared_dir, shared_missing_reason  # noqa: E402


# Hypothesis: the same examples on every run by default, so a CI result does not depend on luck;
# `HYPOTHESIS_PROFILE=explore pytest ...` draws new random examples each run, to look for new
# failures. Either way, a failure prints the example that reproduces it.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


def pytest_report_header(config):
    found = "found" if has_shared() else "NOT FOUND: suites that need it skip"
    return [f"propertok shared dir: {shared_dir()} ({found})", f"PROPERTOK_ORACLE_SCALE={oracle_scale()}"]


@pytest.fixture(scope="session", autouse=True)
def _shared_dir_exists():
    """Without the shared corpus, the suites that need it skip (each module says why); with
    ``$PROPERTOK_REQUIRE_SHARED`` set, as in CI, its absence fails the run."""
    if os.environ.get(REQUIRE_SHARED_ENV) and not has_shared():
        pytest.fail(shared_missing_reason("tokenizers/ and data/") + f" (${REQUIRE_SHARED_ENV} is set)")


@pytest.fixture(scope="session", autouse=True)
def _tokenizer_dfa_cache():
    """A tokenizer-DFA cache folder for this session only (helpers.TokenizerUnderTest uses it for
    byte-level tokenizers; the oracle's worker processes inherit it), removed at the end, so that a
    tokenizer DFA is built once per session, never trusted from an earlier build of propertok.
    An outer ``$PROPERTOK_TEST_TOKENIZER_DFA_CACHE`` is used as it is (and kept)."""
    if os.environ.get(TOKENIZER_DFA_CACHE_ENV):
        yield
        return
    folder = tempfile.mkdtemp(prefix="propertok-test-tokenizer-dfa-")
    os.environ[TOKENIZER_DFA_CACHE_ENV] = folder
    try:
        yield
    finally:
        os.environ.pop(TOKENIZER_DFA_CACHE_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


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
            try:
                cache[name] = TokenizerUnderTest(pt, name)
            except FileNotFoundError:
                # Only the embedded tokenizer is there without the shared corpus: the test skips
                # with the module docs' message (fails under $PROPERTOK_REQUIRE_SHARED, as CI runs).
                if has_shared() or os.environ.get(REQUIRE_SHARED_ENV):
                    raise
                pytest.skip(shared_missing_reason(f"tokenizers/ for {name}"))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def mistral(tokenizer_under_test) -> TokenizerUnderTest:
    return tokenizer_under_test("mistral7b")


@pytest.fixture(scope="session")
def llama2(tokenizer_under_test) -> TokenizerUnderTest:
    return tokenizer_under_test("llama2")


def pytest_collection_modifyitems(session, config, items):
    """test_pretokenized.py: its tests run grouped by tokenizer (the ``slug`` parameter, in
    manifest order; unparametrized ones first), so that one tokenizer's compiler and guides are
    alive at a time (test_pretokenized releases them when the tokenizer changes). The positions of
    other modules' tests are unchanged."""
    from oracle import manifest

    order = {m["slug"]: i for i, m in enumerate(manifest())}
    positions = [i for i, item in enumerate(items) if item.path.name == "test_pretokenized.py"]

    def key(k):
        item = items[positions[k]]
        params = getattr(getattr(item, "callspec", None), "params", {})
        slug = params.get("slug")
        return (-1 if slug is None else order.get(slug, len(order)), k)

    grouped = [items[positions[k]] for k in sorted(range(len(positions)), key=key)]
    for i, item in zip(positions, grouped):
        items[i] = item
