"""The one place that imports torch on behalf of amplint.runtime.

The linter must work in environments without PyTorch (pre-commit hooks run in a bare
virtualenv), and ``amplint.cli`` imports this package for ``amplint doctor``. So torch
is imported when a helper is *called*, never when the package is imported, and a
missing torch becomes one exception type with an install hint instead of a bare
``ModuleNotFoundError`` from deep inside a helper.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["INSTALL_HINT", "TorchNotInstalledError", "needs_torch", "require_torch"]

INSTALL_HINT = "amplint.runtime needs PyTorch: pip install 'amplint[runtime]'"

P = ParamSpec("P")
R = TypeVar("R")


class TorchNotInstalledError(ImportError):
    """PyTorch cannot be imported, so an ``amplint.runtime`` helper cannot run.

    A subclass of ``ImportError`` so that ``except ImportError`` written for optional
    dependencies keeps working.
    """


def require_torch() -> None:
    """Import torch, or raise :class:`TorchNotInstalledError` saying how to install it."""
    try:
        import torch  # noqa: F401
    except ImportError as error:
        raise TorchNotInstalledError(
            f"{INSTALL_HINT} (import torch failed: {error})", name="torch"
        ) from error


def needs_torch(function: Callable[P, R]) -> Callable[P, R]:
    """Make ``function`` check for torch first, so its body may ``import torch`` freely."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        require_torch()
        return function(*args, **kwargs)

    return wrapper
