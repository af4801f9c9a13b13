"""Worker processes that each analyse one file at a time, under a watchdog.

Each worker has a pipe of its own and is given one task at a time, so the parent knows
which file every worker is on and since when. That buys three things a process pool
executor does not give:

- a file that runs past its time budget is reported and its worker killed and
  replaced, and the run goes on (a pathological input cannot hang the run);
- a worker that dies (a stack overflow in native code) costs only the file it was on;
- Ctrl-C stops at once: the workers are killed, not waited for.

Results come back in the order they complete. The parent wakes at least every
``TICK`` seconds, to check the budgets and to let a caller redraw a progress bar.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Generic, TypeVar

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")

TICK = 0.1
# How often an idle worker checks that its parent is still alive.
ORPHAN_CHECK = 1.0


@dataclass(frozen=True)
class Died:
    """The worker analysing the task exited without answering."""

    exitcode: int | None


@dataclass(frozen=True)
class TimedOut:
    """The task ran past its budget; its worker was killed."""

    seconds: float


def _serve(connection: Connection, function: Callable[..., object], inherited: Sequence[Connection]) -> None:
    # The parent handles Ctrl-C (and kills the workers); a worker must not die
    # mid-result with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker holds copies of the parent's pipe ends (its own and its elders'):
    # closed here, a parent that dies leaves every pipe at end-of-file.
    for end in inherited:
        end.close()
    parent = os.getppid()
    while True:
        try:
            while not connection.poll(ORPHAN_CHECK):
                if os.getppid() != parent:
                    return  # the parent died without a word (SIGKILL): no one will ask
            arguments = connection.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if arguments is None:
            return
        result = function(*arguments)
        try:
            connection.send(result)
        except (BrokenPipeError, OSError):
            return


@dataclass
class _Worker(Generic[TaskT]):
    process: BaseProcess
    connection: Connection
    task: TaskT | None = None
    started: float = 0.0


def _context() -> multiprocessing.context.BaseContext:
    # fork: workers start in milliseconds and share the parent's imported rules.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


class _Pool(Generic[TaskT]):
    def __init__(self, function: Callable[..., object]) -> None:
        self.function = function
        self.context = _context()
        self.workers: list[_Worker[TaskT]] = []

    def start(self) -> _Worker[TaskT]:
        parent_end, child_end = self.context.Pipe(duplex=True)
        inherited = [parent_end, *(worker.connection for worker in self.workers)]
        process = self.context.Process(  # type: ignore[attr-defined]
            target=_serve, args=(child_end, self.function, inherited), name="amplint-worker", daemon=True
        )
        process.start()
        child_end.close()
        worker: _Worker[TaskT] = _Worker(process, parent_end)
        self.workers.append(worker)
        return worker

    def discard(self, worker: _Worker[TaskT]) -> None:
        """Kill ``worker`` (whatever it is doing) and forget it."""
        with contextlib.suppress(OSError, ValueError):
            worker.process.kill()
        with contextlib.suppress(OSError, ValueError, AssertionError):
            worker.process.join(timeout=5)
        worker.connection.close()
        self.workers.remove(worker)

    def stop(self, *, kill: bool) -> None:
        for worker in list(self.workers):
            if not kill and worker.task is None:
                with contextlib.suppress(OSError, ValueError):
                    worker.connection.send(None)
        deadline = time.monotonic() + 1.0
        for worker in list(self.workers):
            if not kill:
                with contextlib.suppress(OSError, ValueError, AssertionError):
                    worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
            self.discard(worker)


def _hand_out(
    pool: _Pool[TaskT], worker: _Worker[TaskT], queue: deque[TaskT], arguments: Callable[[TaskT], tuple[object, ...]]
) -> None:
    """Give ``worker`` (idle) the next task, if there is one."""
    if not queue:
        return
    task = queue.popleft()
    try:
        worker.connection.send(arguments(task))
    except (BrokenPipeError, ConnectionResetError):
        # The worker died between tasks: the task goes to its successor.
        queue.appendleft(task)
        pool.discard(worker)
        return
    worker.task, worker.started = task, time.monotonic()


def run_tasks(
    function: Callable[..., ResultT],
    tasks: Sequence[TaskT],
    arguments: Callable[[TaskT], tuple[object, ...]],
    *,
    processes: int,
    budget: Callable[[TaskT], float | None],
    tick: Callable[[], None] | None = None,
) -> Iterator[tuple[TaskT, ResultT | Died | TimedOut]]:
    """Run ``function(*arguments(task))`` for every task in worker processes; yield each
    task with its result (or why there is none) as it completes.

    Tasks are handed out in the order given. ``budget(task)`` is the most seconds a task
    may take (None: no limit). Whatever ends the iteration early (an exception such as
    KeyboardInterrupt, or the consumer closing the generator) kills every worker.
    """
    queue = deque(tasks)
    pool: _Pool[TaskT] = _Pool(function)
    processes = max(processes, 1)
    finished = False
    try:
        while True:
            busy_count = sum(1 for worker in pool.workers if worker.task is not None)
            while len(pool.workers) < min(processes, busy_count + len(queue)):
                pool.start()
            for worker in list(pool.workers):
                if worker.task is None:
                    _hand_out(pool, worker, queue, arguments)
            busy = [(worker, worker.task) for worker in pool.workers if worker.task is not None]
            if not busy:
                break
            now = time.monotonic()
            timeout = TICK
            for worker, current in busy:
                limit = budget(current)
                if limit is not None:
                    timeout = min(timeout, max(0.0, worker.started + limit - now))
            ready = set(wait([*(w.connection for w, _ in busy), *(w.process.sentinel for w, _ in busy)], timeout))
            for worker, current in busy:
                if worker.connection in ready or worker.process.sentinel in ready:
                    outcome: ResultT | Died | TimedOut
                    try:
                        outcome = worker.connection.recv()
                    except (EOFError, OSError):
                        with contextlib.suppress(OSError, ValueError, AssertionError):
                            worker.process.join(timeout=5)
                        outcome = Died(worker.process.exitcode)
                        pool.discard(worker)
                    else:
                        # The next task first: the worker computes while the caller
                        # handles this result.
                        worker.task = None
                        _hand_out(pool, worker, queue, arguments)
                    yield current, outcome
                    continue
                limit = budget(current)
                elapsed = time.monotonic() - worker.started
                if limit is not None and elapsed >= limit:
                    pool.discard(worker)
                    yield current, TimedOut(elapsed)
            if tick is not None:
                tick()
        finished = True
    finally:
        pool.stop(kill=not finished)
