"""Running a snippet of user code as written and as amplint fixes it (real torch tests)."""

from __future__ import annotations

import warnings
from typing import Any

DEPRECATION = (FutureWarning, DeprecationWarning)


def run_snippet(source: str, **names: Any) -> tuple[dict[str, Any], list[str]]:
    """Execute ``source`` with ``names`` predefined; its namespace afterwards and the
    deprecation warnings it emitted (no warning escapes)."""
    namespace: dict[str, Any] = dict(names)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(source, "<snippet>", "exec"), namespace)
    messages = [str(w.message) for w in caught if issubclass(w.category, DEPRECATION)]
    return namespace, messages
