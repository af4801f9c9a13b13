"""amplint: a linter and codemod for PyTorch automatic mixed precision code."""

from __future__ import annotations

__version__ = "0.1.0"
