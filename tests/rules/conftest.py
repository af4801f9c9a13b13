from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def torch() -> ModuleType:
    """Real torch (the CPU wheel), for tests that prove what a rule or its fix claims;
    they skip where torch is not installed."""
    module: ModuleType = pytest.importorskip("torch")
    return module
