"""Run amplint over files: decode, pre-filter, lint or fix, in parallel; write atomically.

Workers only compute; the parent process writes files, one atomic replace each, after
checking that the file on disk is still the one that was read. An interrupted run
therefore leaves every file either untouched or completely fixed.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import multiprocessing
import os
import signal
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import FrameType

import pathspec

from amplint.diagnostics import Applicability, Diagnostic, Location
from amplint.engine.cache import ResultsCache, digest
from amplint.engine.config import Settings, select_rules
from amplint.engine.fixer import FixFailure, fix_source
from amplint.engine.index import ProjectIndex, shared_index
from amplint.engine.linter import lint_source
from amplint.engine.parse import file_diagnostic
from amplint.engine.prefilter import rules_for
from amplint.engine.project import ProjectFacts
from amplint.engine.rule import INTERNAL_ERROR, PARSE_ERROR, RuleType
from amplint.engine.source import SourceError, decode


class Mode(str, Enum):
    CHECK = "check"
    FIX = "fix"  # compute fixes (diff or write decided by the caller)


@dataclass(frozen=True)
class Job:
    mode: Mode
    settings: Settings
    # Every rule there is (the engine knows none by name); settings choose among them.
    registry: tuple[RuleType, ...]
    unsafe_fixes: bool = False
    # What the project declares (target torch, runtime helpers); None: nothing declared.
    project: ProjectFacts | None = None
    # Where the project's modules are looked up for facts that cross files (the project
    # root by default); the summaries cache lives in ``summaries_dir`` when given.
    index_roots: tuple[str, ...] | None = None
    summaries_dir: str | None = None

    def index(self) -> ProjectIndex:
        roots = self.index_roots if self.index_roots is not None else (self.settings.project_root,)
        return shared_index(roots, self.summaries_dir)


@dataclass
class FileReport:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    original: bytes | None = None
    fixed: bytes | None = None  # set when fixing changed the file
    old_text: str = ""
    new_text: str = ""
    fixes_applied: dict[str, int] = field(default_factory=dict)
    fix_failures: list[FixFailure] = field(default_factory=list)
    write_error: str | None = None
    written: bool = False
    # Said on stderr, never a finding (a valid file libcst cannot parse).
    warnings: list[str] = field(default_factory=list)

    @property
    def internal_error(self) -> bool:
        return any(d.code == INTERNAL_ERROR for d in self.diagnostics)

    def diff(self) -> str:
        if self.fixed is None:
            return ""
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


def rules_for_path(path: str, settings: Settings, registry: Sequence[RuleType]) -> tuple[RuleType, ...]:
    rules = settings.enabled_rules(registry)
    if not settings.per_file_ignores:
        return rules
    ignored: list[str] = []
    relative = _relative_to_root(path, settings)
    for pattern, codes in settings.per_file_ignores.items():
        spec = _pattern_spec(pattern)
        if spec.match_file(relative) or spec.match_file(Path(path).name):
            ignored.extend(codes)
    if not ignored:
        return rules
    return select_rules(rules, [rule.code for rule in rules], (), ignored)


@functools.lru_cache(maxsize=256)
def _pattern_spec(pattern: str) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines([pattern])


def _relative_to_root(path: str, settings: Settings) -> str:
    absolute = Path(path).absolute()
    try:
        return absolute.relative_to(Path(settings.project_root).resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _allowed(unsafe: bool) -> Callable[[Diagnostic], bool]:
    def allow(diagnostic: Diagnostic) -> bool:
        return diagnostic.fix is not None and (unsafe or diagnostic.fix.applicability is Applicability.SAFE)

    return allow


def process_source(path: str, data: bytes, job: Job) -> FileReport:
    """Everything for one file except writing it; pure, so it runs in any process."""
    report = FileReport(path=path, original=data)
    rules = rules_for_path(path, job.settings, job.registry)
    if len(data) > job.settings.max_file_size:
        report.diagnostics.append(
            file_diagnostic(
                path,
                PARSE_ERROR,
                f"file too large to analyse ({len(data)} bytes > max-file-size {job.settings.max_file_size})",
            )
        )
        return _filter_codes(report, rules)
    try:
        source = decode(data)
    except SourceError as error:
        location = Location(error.row, error.column)
        message = str(error) if str(error).startswith("cannot ") else f"cannot decode: {error}"
        report.diagnostics.append(file_diagnostic(path, PARSE_ERROR, message, location))
        return _filter_codes(report, rules)
    report.old_text = report.new_text = source.text
    active = rules_for(source.text, rules)
    if not active:
        return report
    if job.mode is Mode.CHECK:
        index = job.index()
        index.start_file()
        result = lint_source(path, source, active, job.project, index)
        report.diagnostics = result.diagnostics
        report.warnings = [result.skipped] if result.skipped else []
        return _filter_codes(report, rules)
    index = job.index()
    index.start_file()
    outcome = fix_source(
        path,
        source,
        rules,
        allow=_allowed(job.unsafe_fixes or job.settings.unsafe_fixes),
        project=job.project,
        index=index,
    )
    report.diagnostics = outcome.remaining.diagnostics
    report.warnings = [outcome.remaining.skipped] if outcome.remaining.skipped else []
    report.fixes_applied = outcome.applied
    report.fix_failures = outcome.failures
    if outcome.text != source.text:
        try:
            report.fixed = source.encode(outcome.text)
            report.new_text = outcome.text
        except SourceError as error:
            report.fix_failures.append(FixFailure("", 1, 1, str(error)))
            report.fixes_applied = {}
    return _filter_codes(report, rules)


def _filter_codes(report: FileReport, rules: Sequence[RuleType]) -> FileReport:
    enabled = {rule.code for rule in rules} | {INTERNAL_ERROR}
    report.diagnostics = [d for d in report.diagnostics if d.code in enabled]
    return report


def process_path(path: str, job: Job) -> FileReport:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        report = FileReport(path=path)
        report.diagnostics.append(file_diagnostic(path, PARSE_ERROR, f"cannot read: {reason}"))
        return _filter_codes(report, rules_for_path(path, job.settings, job.registry))
    return process_source(path, data, job)


def _worker_init() -> None:
    # The parent handles Ctrl-C; workers must not die mid-result with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pool(jobs: int) -> ProcessPoolExecutor:
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_init)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def run_files(paths: Sequence[str], job: Job, jobs: int | None = None) -> Iterator[FileReport]:
    """Yield one report per path, in the order given. Worker crashes become AMP999."""
    jobs = jobs or default_jobs()
    if jobs == 1 or len(paths) < 2:
        for path in paths:
            yield _isolated(path, job) if jobs != 1 else process_path(path, job)
        return
    with _pool(jobs) as pool:
        # Largest files first: a big file started last would run alone at the end while
        # the other workers idle. Reports still come out in the order given.
        futures_by_index: dict[int, Future[FileReport]] = {}
        for index in sorted(range(len(paths)), key=lambda i: -_size(paths[i])):
            futures_by_index[index] = pool.submit(process_path, paths[index], job)
        futures = [futures_by_index[index] for index in range(len(paths))]
        broken = False
        for path, future in zip(paths, futures, strict=True):
            if not broken:
                try:
                    yield future.result()
                    continue
                except BrokenProcessPool:
                    broken = True
            yield _isolated(path, job)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _isolated(path: str, job: Job) -> FileReport:
    """Process one file in a process of its own, so that a crash is that file's alone."""
    try:
        with _pool(1) as pool:
            return pool.submit(process_path, path, job).result()
    except BrokenProcessPool:
        report = FileReport(path=path)
        report.diagnostics.append(
            file_diagnostic(path, INTERNAL_ERROR, "internal error: the worker process analysing this file died")
        )
        return report


# -- writing -------------------------------------------------------------------------------


class _Terminated(KeyboardInterrupt):
    pass


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def write_atomically(path: str, original: bytes, data: bytes) -> str | None:
    """Replace ``path`` with ``data`` unless it changed since it was read; error text or None."""
    target = Path(path)
    try:
        current = target.read_bytes()
    except OSError as error:
        return f"cannot re-read before writing: {error.strerror or error}"
    if hashlib.sha256(current).digest() != hashlib.sha256(original).digest():
        return "file changed on disk while amplint ran; not written"
    try:
        info = target.stat()
    except OSError as error:
        return f"cannot stat: {error.strerror or error}"
    if not os.access(target, os.W_OK):
        return "file is read-only; not written"
    real = target.resolve()  # write through symlinks, keep the link itself
    previous = signal.getsignal(signal.SIGTERM)
    temp_name: str | None = None
    try:
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _raise_terminated)
        descriptor, temp_name = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".amplint-tmp", dir=real.parent)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, stat.S_IMODE(info.st_mode))
        os.replace(temp_name, real)
        temp_name = None
    except OSError as error:
        return f"cannot write: {error.strerror or error}"
    finally:
        if temp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return None


def run(paths: Sequence[str], job: Job, *, jobs: int | None = None, cache_dir: str | None = None) -> Iterator[FileReport]:
    """The one entry point for running over files (the CLI calls this); reports in order.

    ``cache_dir`` enables the results cache (None: no cache, e.g. ``--no-cache``). A file
    whose bytes were checked before with the same amplint and settings is not parsed
    again. The cache holds check results; ``fix`` uses them for files with nothing it may
    fix (whose fix result is the check result), and stores what it computes for files
    it left unchanged.
    """
    if cache_dir is None:
        yield from run_files(paths, job, jobs)
        return
    cache = ResultsCache(cache_dir, job.settings, job.registry)
    allow = _allowed(job.unsafe_fixes or job.settings.unsafe_fixes)
    # First pass: which files are hits. Only their digests and diagnostics are kept, so
    # memory does not grow with the size of the tree.
    hits: dict[int, tuple[str, list[Diagnostic]]] = {}
    for index, path in enumerate(paths):
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue  # the worker reports the read error
        cached = cache.load(path, data)
        if cached is not None and (job.mode is Mode.CHECK or not any(allow(d) for d in cached)):
            hits[index] = (digest(data), cached)
    computed = run_files([path for index, path in enumerate(paths) if index not in hits], job, jobs)
    for index, path in enumerate(paths):
        hit = hits.pop(index, None)
        report = _from_cache(path, job, *hit) if hit is not None else None
        if report is None:
            report = next(computed) if hit is None else process_path(path, job)
            _remember(cache, report, job)
        yield report


def _from_cache(path: str, job: Job, expected: str, diagnostics: list[Diagnostic]) -> FileReport | None:
    """The report of a cache hit, re-reading the file: None if it changed since the lookup."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if digest(data) != expected:
        return None
    report = FileReport(path=path, diagnostics=diagnostics, original=data)
    if len(data) <= job.settings.max_file_size:
        # The text is what outputs quote the diagnostics from, exactly as without a cache.
        with contextlib.suppress(SourceError):
            report.old_text = report.new_text = decode(data).text
    return report


def _remember(cache: ResultsCache, report: FileReport, job: Job) -> None:
    if report.original is None or report.internal_error or report.warnings:
        return  # unreadable, a crash that may not happen again, or a warning to repeat
    if job.mode is Mode.FIX and (report.fixed is not None or report.fixes_applied or report.fix_failures):
        return  # the diagnostics are those of the fixed text, not of the bytes read
    cache.store(report.path, report.original, report.diagnostics)
