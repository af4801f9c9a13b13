from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return ROOT


def amplint_command() -> list[str]:
    return [sys.executable, "-m", "amplint"]
