"""Engine tests run only on request: ``PROPERTOK_ENGINE_TESTS=1 pytest -q tests/integrations/engines``
with the engine installed (docs/engines.md has the recipe). The default ``pytest -q tests`` skips
them with one message: they need a 6 GB install and minutes per run."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_support import ENGINE_TESTS_ENV  # noqa: E402


def pytest_collection_modifyitems(session, config, items):
    if os.environ.get(ENGINE_TESTS_ENV):
        return
    skip = pytest.mark.skip(reason=f"engine tests: set {ENGINE_TESTS_ENV}=1 and install the engine (docs/engines.md)")
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.fspath).resolve().parents:
            item.add_marker(skip)
