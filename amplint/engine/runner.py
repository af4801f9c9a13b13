"""Run amplint over files: decode, pre-filter, lint or fix, in parallel; write atomically.

Workers only compute (``workers.py``: one file at a time each, under a watchdog, results
in the order they complete); the parent process writes files, one atomic replace each,
after checking that the file on disk is still the one that was read. An interrupted run
therefore leaves every file either untouched or completely fixed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import os
import secrets
import signal
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from amplint.diagnostics import Applicability, Diagnostic, Location, file_diagnostic
from amplint.engine.cache import ResultsCache, digest, listing_digest
from amplint.engine.catalog import INTERNAL_ERROR, PARSE_ERROR, RuleInfo
from amplint.engine.config import Settings
from amplint.engine.index import ProjectIndex, shared_index
from amplint.engine.project import (
    ProjectFacts,
    folder_declarations,
    folder_key,
    project_facts,
    torch_folders,
)
from amplint.engine.source import SourceError, SourceFile, decode
from amplint.engine.workers import Died, TimedOut, run_tasks

# The modules that parse and analyse (libcst, the rules) are imported where a file is
# analysed: a run whose every file is cached never needs them, and importing them costs
# more than the rest of such a run.
if TYPE_CHECKING:
    from amplint.engine.fixer import FixFailure
    from amplint.engine.linter import LintResult
    from amplint.engine.rule import RuleType

# A container format's decoder (see ``Job.decoders``).
Decoder = Callable[[bytes], SourceFile]


class Mode(str, Enum):
    """What a run does; the one vocabulary of the engine, the API and the CLI."""

    CHECK = "check"  # report (`amplint check`)
    FIX = "fix"  # compute the fixes and show their diff (`amplint fix`)
    APPLY = "apply"  # compute the fixes and write them (`amplint fix --apply`, `check --fix`)
    ADD_NOQA = "add-noqa"  # report, then silence every finding with a noqa comment (`check --add-noqa`)

    @property
    def fixes(self) -> bool:
        """Whether files are fixed (in memory) rather than only checked."""
        return self in (Mode.FIX, Mode.APPLY)

    @property
    def writes(self) -> bool:
        return self in (Mode.APPLY, Mode.ADD_NOQA)


@dataclass(frozen=True)
class Job:
    mode: Mode
    settings: Settings
    # Every rule there is (the engine knows none by name); settings choose among them.
    registry: tuple[RuleInfo, ...]
    unsafe_fixes: bool = False
    # What the project declares (target torch, runtime helpers); None: nothing declared.
    project: ProjectFacts | None = None
    # Where the project's modules are looked up for facts that cross files (the project
    # root by default); the summaries cache lives in ``summaries_dir`` when given.
    index_roots: tuple[str, ...] | None = None
    summaries_dir: str | None = None
    # Files that hold Python inside another format (Jupyter notebooks), by suffix: their
    # decoder gives the Python text, and its ``encode`` the way back to the file's bytes.
    # The engine knows no such format itself; the library API passes the decoders.
    decoders: tuple[tuple[str, Decoder], ...] = ()

    def decoder_for(self, path: str) -> Decoder | None:
        for suffix, decoder in self.decoders:
            if path.endswith(suffix):
                return decoder
        return None

    def decode(self, path: str, data: bytes) -> SourceFile:
        """The file's text as the rules see it; raises SourceError."""
        decoder = self.decoder_for(path)
        return decoder(data) if decoder is not None else decode(data)

    def applicability(self, diagnostic: Diagnostic) -> Applicability | None:
        """A fix's applicability under the configuration's fix policy (``unfixable``,
        ``extend-safe-fixes``, ``extend-unsafe-fixes``, as in Ruff); None: no fix."""
        if diagnostic.fix is None:
            return None
        policy = self.settings.fix_policy(diagnostic.code, self.registry)
        if policy == "unfixable":
            return None
        if policy == "safe":
            return Applicability.SAFE
        if policy == "unsafe":
            return Applicability.UNSAFE
        return diagnostic.fix.applicability

    def adjust(self, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """The diagnostics with their fixes as the fix policy has them."""
        if not (self.settings.unfixable or self.settings.extend_safe_fixes or self.settings.extend_unsafe_fixes):
            return diagnostics
        adjusted = []
        for diagnostic in diagnostics:
            fix, applicability = diagnostic.fix, self.applicability(diagnostic)
            if fix is not None and applicability is None:
                diagnostic = dataclasses.replace(diagnostic, fix=None)
            elif fix is not None and applicability is not None and applicability is not fix.applicability:
                diagnostic = dataclasses.replace(diagnostic, fix=dataclasses.replace(fix, applicability=applicability))
            adjusted.append(diagnostic)
        return adjusted

    def facts(self, path: str | None = None) -> ProjectFacts:
        """What the file's project declares, unless given: from the folders between the
        file and its configuration's root (the nearest torch declaration wins)."""
        if self.project is not None:
            return self.project
        return project_facts(
            Path(self.settings.project_root),
            target_torch=self.settings.target_torch,
            runtime_helpers=self.settings.runtime_helpers,
            file=Path(path) if path is not None and path != "-" else None,
        )

    def declarations(self, path: str) -> dict[str, str]:
        """The declaration files the facts of ``path`` were read from (path: digest), so a
        cached result is dropped when one changes."""
        if self.project is not None or path == "-":
            return {}
        found: dict[str, str] = {}
        for folder in torch_folders(Path(self.settings.project_root), Path(path)):
            files, listing = folder_declarations(folder)
            found.update((str(file), _file_digest(file)) for file in files)
            # A declaration file that appears later (a new requirements.txt) matters too.
            found[folder_key(folder)] = listing_digest(listing)
        return found

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
    # `--add-noqa`: directives added (lines changed) and findings that could not be silenced.
    noqa_added: int = 0
    # Other files whose summaries the lint read (path: digest): the cache checks them.
    dependencies: dict[str, str] = field(default_factory=dict)
    # Said on stderr, never a finding (a valid file libcst cannot parse).
    warnings: list[str] = field(default_factory=list)
    # Said only with --verbose (a notebook in another language, skipped).
    notes: list[str] = field(default_factory=list)
    # A notebook's code cells by number, as the diagnostics' rows count them (after the
    # fixes), and before the fixes when they changed any: what outputs quote and diff.
    cells: dict[int, str] | None = None
    old_cells: dict[int, str] | None = None

    @property
    def internal_error(self) -> bool:
        return any(d.code == INTERNAL_ERROR for d in self.diagnostics)

    def text_for(self, diagnostic: Diagnostic) -> str:
        """The text ``diagnostic``'s rows count in: its cell's in a notebook."""
        if diagnostic.cell is not None and self.cells is not None:
            return self.cells.get(diagnostic.cell, "")
        return self.new_text if self.written else self.old_text

    def diff(self) -> str:
        """The unified diff of the fixes; for a notebook, of each changed cell's code
        (headed ``a/nb.ipynb:cell 3``), as Ruff shows it, not of the JSON."""
        if self.fixed is None:
            return ""
        if self.cells is not None and self.old_cells is not None:
            return "".join(
                _unified_diff(old, self.cells.get(number, ""), f"{self.path}:cell {number}")
                for number, old in sorted(self.old_cells.items())
                if self.cells.get(number, "") != old
            )
        return _unified_diff(self.old_text, self.new_text, self.path)


def _unified_diff(old: str, new: str, name: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    # A last line without a newline is marked, as diff and git do, so that the next line
    # of the diff does not run on from it (notebook cells rarely end with a newline).
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def rules_for_path(path: str, settings: Settings, registry: Sequence[RuleInfo]) -> tuple[RuleInfo, ...]:
    """The rules that run on ``path``: the selection minus its per-file ignores."""
    return settings.rules_for(path, registry)


def _allowed(unsafe: bool, job: Job | None = None) -> Callable[[Diagnostic], bool]:
    def allow(diagnostic: Diagnostic) -> bool:
        applicability = job.applicability(diagnostic) if job is not None else (
            diagnostic.fix.applicability if diagnostic.fix is not None else None
        )
        return applicability is not None and (unsafe or applicability is Applicability.SAFE)

    return allow


def process_source(path: str, data: bytes, job: Job) -> FileReport:
    """Everything for one file except writing it; pure, so it runs in any process."""
    index = job.index()
    index.start_file()
    report = _process_source(path, data, job)
    report.diagnostics = job.adjust(report.diagnostics)
    # The other files whose facts this file's findings rest on (cross-file analysis).
    itself = str(Path(path).resolve())
    report.dependencies = {other: content for other, content in index.consulted.items() if other != itself}
    report.dependencies.update(job.declarations(path))
    return report


def _file_digest(path: Path) -> str:
    try:
        return digest(path.read_bytes())
    except OSError:
        return ""


def _process_source(path: str, data: bytes, job: Job) -> FileReport:
    from amplint.engine.fixer import FixFailure, fix_source
    from amplint.engine.linter import lint_source
    from amplint.engine.loading import rule_classes
    from amplint.engine.prefilter import rules_for
    from amplint.engine.unused_noqa import UNUSED_NOQA, apply_fixes

    report = FileReport(path=path, original=data)
    rules = rule_classes(rules_for_path(path, job.settings, job.registry))
    container = job.decoder_for(path) is not None
    # A notebook's size is that of its code: outputs (images) can be megabytes.
    if not container and _too_large(report, len(data), job):
        return _filter_codes(report, rules)
    try:
        source = job.decode(path, data)
    except SourceError as error:
        if container and not any(not rule.engine_code for rule in rules_for(data.decode("utf-8", "replace"), rules)):
            # As for a .py file that does not parse: without any rule's trigger words the
            # file is not amplint's business (torchrec's Bento exports lack `nbformat`).
            return _filter_codes(report, rules)
        location = Location(error.row, error.column)
        message = str(error) if container or str(error).startswith("cannot ") else f"cannot decode: {error}"
        report.diagnostics.append(file_diagnostic(path, PARSE_ERROR, message, location))
        return _filter_codes(report, rules)
    if container and _too_large(report, len(source.text.encode("utf-8", "surrogatepass")), job, "code"):
        return _filter_codes(report, rules)
    report.old_text = report.new_text = source.text
    if not job.mode.fixes:
        active = rules_for(source.text, rules)
        result = lint_source(path, source, active, job.facts(path), job.index()) if active else None
        report.diagnostics = result.diagnostics if result is not None else []
        report.warnings = [result.skipped] if result is not None and result.skipped else []
        report.diagnostics += _unused_noqa(path, source, rules, job.registry, result)
        return _filter_codes(report, rules)
    outcome = fix_source(
        path,
        source,
        rules,
        allow=_allowed(job.unsafe_fixes or job.settings.unsafe_fixes, job),
        project=job.facts(path),
        index=job.index(),
    )
    report.diagnostics = outcome.remaining.diagnostics
    report.warnings = [outcome.remaining.skipped] if outcome.remaining.skipped else []
    report.fixes_applied = outcome.applied
    report.fix_failures = outcome.failures
    text = outcome.text
    # AMP901's fixes touch comments only: applied last, on the text the rules settled on.
    unused = _unused_noqa(path, source.with_text(text), rules, job.registry, outcome.remaining)
    if unused:
        text = apply_fixes(text, unused)
        report.fixes_applied = {**report.fixes_applied, UNUSED_NOQA: len(unused)}
    if text != source.text:
        try:
            report.fixed = source.encode(text)
            report.new_text = text
        except SourceError as error:
            # Nothing is written: the findings are those of the text as it is.
            checked = _process_source(path, data, replace(job, mode=Mode.CHECK))
            report.diagnostics, report.warnings = checked.diagnostics, checked.warnings
            report.fix_failures.append(FixFailure("", 1, 1, str(error)))
            report.fixes_applied = {}
    return _filter_codes(report, rules)


def _too_large(report: FileReport, size: int, job: Job, what: str = "file") -> bool:
    limit = job.settings.max_file_size
    if size <= limit:
        return False
    message = f"{what} too large to analyse ({size} bytes > max-file-size {limit})"
    report.diagnostics.append(file_diagnostic(report.path, PARSE_ERROR, message))
    return True


def _unused_noqa(
    path: str,
    source: SourceFile,
    rules: Sequence[RuleType],
    registry: Sequence[RuleInfo],
    result: LintResult | None,
) -> list[Diagnostic]:
    """AMP901 findings of ``source`` when the rule is enabled for the file.

    ``result`` is the lint of ``source`` (None: no rule could fire, so nothing was parsed);
    it keeps the findings that noqa comments silenced.
    """
    from amplint.engine.unused_noqa import UNUSED_NOQA, directives, unused_noqa

    enabled = [rule.code for rule in rules] + [INTERNAL_ERROR]  # reported whatever the selection
    if UNUSED_NOQA not in enabled or (result is not None and not result.parsed):
        return []
    found = directives(source.text)
    if not found:
        return []
    # Every finding before noqa was applied: what the comments silenced, and the rest.
    unsilenced = [*result.diagnostics, *result.suppressed] if result is not None else []
    return unused_noqa(path, source.text, found, unsilenced, enabled=enabled, known=[rule.code for rule in registry])


def _filter_codes(report: FileReport, rules: Sequence[RuleInfo]) -> FileReport:
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


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _failure_report(path: str, failure: Died | TimedOut, budget: float) -> FileReport:
    if isinstance(failure, TimedOut):
        message = (
            f"internal error: analysis timed out after {budget:g} s (file-timeout); the worker was "
            "stopped and the file was not checked"
        )
    else:
        message = "internal error: the worker process analysing this file died"
    report = FileReport(path=path)
    report.diagnostics.append(file_diagnostic(path, INTERNAL_ERROR, message))
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
    # A file without write permission bits is protected on purpose, even from root.
    if not os.access(target, os.W_OK) or not info.st_mode & 0o222:
        return "file is read-only; not written"
    real = target.resolve()  # write through symlinks, keep the link itself
    previous = signal.getsignal(signal.SIGTERM)
    temp_name: str | None = None
    try:
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _raise_terminated)
        # Named before it exists, so that a signal at any point leaves nothing behind.
        temp_name = str(real.parent / f".{real.name}.{os.getpid()}.{secrets.token_hex(4)}.amplint-tmp")
        descriptor = os.open(temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
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


def run(
    paths: Sequence[str],
    job: Job,
    *,
    jobs: int | None = None,
    cache_dir: str | None = None,
    cache: bool = False,
    settings_for: Callable[[str], Settings] | None = None,
    in_process: bool | None = None,
    tick: Callable[[], None] | None = None,
) -> Iterator[FileReport]:
    """The one entry point for running over files: one report per path.

    ``settings_for`` gives each file its settings (its nearest configuration; default:
    ``job.settings`` for all). The results cache is used with ``cache_dir`` (one
    directory for all) or ``cache`` (each file's ``settings.cache_path()``); a file whose
    bytes were checked before with the same amplint and settings is not parsed again.
    The cache holds check results; fixing uses them for files with nothing it may fix
    (whose fix result is the check result), and stores what it computes for files it
    left unchanged.

    With ``in_process`` (the default for one job) files are analysed here, in the order
    given. Otherwise worker processes analyse them, largest first, under each file's
    ``file-timeout``, and reports come in the order they complete (cache hits first).
    ``tick`` is called at least every tenth of a second while workers run.
    """
    jobs = jobs or default_jobs()
    in_process = jobs == 1 if in_process is None else in_process
    jobs_by_settings: dict[int, tuple[Job, ResultsCache | None]] = {}

    def job_of(path: str) -> tuple[Job, ResultsCache | None]:
        settings = settings_for(path) if settings_for is not None else job.settings
        key = id(settings)
        if key not in jobs_by_settings:
            file_job = job if settings is job.settings else replace(job, settings=settings)
            directory = cache_dir if cache_dir is not None else str(settings.cache_path()) if cache else None
            results = ResultsCache(directory, settings, job.registry) if directory is not None else None
            jobs_by_settings[key] = (file_job, results)
        return jobs_by_settings[key]

    entries = [job_of(path) for path in paths]
    pending: list[int] = []
    for index, path in enumerate(paths):
        file_job, results = entries[index]
        # A hit is yielded as soon as it is found (the caller forgets its text unless it
        # has findings), so memory does not grow with the size of the tree.
        report = _cached(path, file_job, results)
        if report is None and in_process:
            report = process_path(path, file_job)
            _remember(results, report, file_job)
        if report is None:
            pending.append(index)
        else:
            yield report
        if tick is not None and (in_process or index % 64 == 0):
            tick()
    if in_process:
        return
    # Largest first: a big file started last would run alone at the end while the other
    # workers idle.
    pending.sort(key=lambda index: -_size(paths[index]))
    if pending:
        _load_analysis(job.registry)
    tasks = run_tasks(
        process_path,
        pending,
        lambda index: (paths[index], entries[index][0]),
        processes=jobs,
        budget=lambda index: entries[index][0].settings.file_timeout,
        tick=tick,
    )
    for index, outcome in tasks:
        file_job, results = entries[index]
        if isinstance(outcome, (Died, TimedOut)):
            report = _failure_report(paths[index], outcome, file_job.settings.file_timeout)
        else:
            report = outcome
        _remember(results, report, file_job)
        yield report


def _load_analysis(registry: Sequence[RuleInfo]) -> None:
    """Import what analysing a file needs before the workers start, so that forked
    workers share it instead of each importing it again."""
    import amplint.engine.fixer
    import amplint.engine.linter
    import amplint.engine.unused_noqa  # noqa: F401
    from amplint.engine.loading import rule_classes

    rule_classes(registry)


def _cached(path: str, job: Job, results: ResultsCache | None) -> FileReport | None:
    """The report of a cache hit, from one read of the file; None for a miss."""
    if results is None:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None  # the analysis reports the read error
    diagnostics = results.load(path, data)
    if diagnostics is None:
        return None
    allow = _allowed(job.unsafe_fixes or job.settings.unsafe_fixes, job)
    if job.mode.fixes and any(allow(d) for d in diagnostics):
        return None  # fixing needs the analysis
    report = FileReport(path=path, diagnostics=diagnostics, original=data)
    if not diagnostics:
        # A clean file has nothing to quote: its report carries no text (run_paths drops a
        # clean file's text anyway), and a warm run skips decoding every file of the tree.
        return report
    container = job.decoder_for(path) is not None
    if container or len(data) <= job.settings.max_file_size:
        # The text is what outputs quote the diagnostics from, exactly as without a cache.
        with contextlib.suppress(SourceError):
            text = job.decode(path, data).text
            if not container or len(text.encode("utf-8", "surrogatepass")) <= job.settings.max_file_size:
                report.old_text = report.new_text = text
    return report


def _remember(cache: ResultsCache | None, report: FileReport, job: Job) -> None:
    if cache is None or report.original is None or report.internal_error or report.warnings:
        return  # unreadable, a crash that may not happen again, or a warning to repeat
    if job.mode.fixes and (report.fixed is not None or report.fixes_applied or report.fix_failures):
        return  # the diagnostics are those of the fixed text, not of the bytes read
    cache.store(report.path, report.original, report.diagnostics, report.dependencies)
