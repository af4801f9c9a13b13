"""Run a function on a thread with a large stack and a raised recursion limit.

libcst's parser and the visitors recurse once per nesting level; deeply nested code that
CPython accepts would otherwise overflow the default stack and be reported instead of
analysed.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

STACK_SIZE = 512 * 1024 * 1024
RECURSION_LIMIT = 100_000

T = TypeVar("T")

_deep = threading.local()
_limit_lock = threading.Lock()
_limit_holders = 0
_saved_limit = 0


def run_deep(function: Callable[..., T], *args: object) -> T:
    """Call ``function`` on a thread with a large stack (or here, if already on one)."""
    if getattr(_deep, "active", False):
        return function(*args)
    outcome: dict[str, object] = {}

    def target() -> None:
        _deep.active = True
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # noqa: BLE001 - re-raised in the calling thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="amplint-deep", daemon=True)
    try:
        previous = threading.stack_size(STACK_SIZE)
        try:
            thread.start()
        finally:
            threading.stack_size(previous)
    except (RuntimeError, ValueError, MemoryError):
        return function(*args)  # no large stack to be had: default limits, still contained
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Raise the recursion limit while on a large-stack thread (shared, reference-counted)."""
    global _limit_holders, _saved_limit
    if not getattr(_deep, "active", False):
        yield
        return
    with _limit_lock:
        if _limit_holders == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _limit_holders += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_holders -= 1
            if _limit_holders == 0:
                sys.setrecursionlimit(_saved_limit)
