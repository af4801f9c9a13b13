"""The library API: what the CLI is a thin layer over, and what an editor integration
reuses. Nothing here prints.

- :func:`run_paths` checks or fixes files and directories, :func:`run_stdin` a buffer
  under a given name, :func:`run_text` a text in memory with the configuration of the
  path it claims (for an editor); each returns a :class:`RunOutcome` (per-file reports:
  diagnostics, fixes applied and failed, diff and new bytes, write results; run errors
  and warnings; the counts a summary needs).
- Each file gets the settings of its nearest configuration file, with the command-line
  options of :class:`RunOptions` on top (``engine.config``).
- ``fix --apply`` writes here, each file atomically as its result arrives; a file that
  cannot be written keeps its findings, which are reported as a check would.
- :func:`check_source`, :func:`fix_source_text` and :func:`fix_text` lint or fix a text
  with explicit settings, for tests and scripts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from amplint.diagnostics import Diagnostic
from amplint.engine.cache import find_caches, remove_cache
from amplint.engine.catalog import INTERNAL_ERROR, PARSE_ERROR, RuleInfo, RuleSpec
from amplint.engine.config import (
    ConfigError,
    ConfigResolver,
    Overrides,
    Settings,
    parse_per_file_ignores,
)
from amplint.engine.discovery import discover, is_excluded
from amplint.engine.progress import ProgressBar
from amplint.engine.project import ProjectFacts
from amplint.engine.runner import (
    FileReport,
    Job,
    Mode,
    default_jobs,
    process_source,
    run,
    write_atomically,
)
from amplint.engine.source import SourceError, SourceFile, decode
from amplint.notebook import (
    Notebook,
    NotebookError,
    NotebookOutline,
    decode_notebook,
    is_notebook,
    notebook_json,
    notebook_outline,
    parse_notebook,
)
from amplint.rules import catalog
from amplint.rules import rule_by_code as _catalog_entry

# Loading a rule (libcst, the analysis layer) costs more than a whole run over a cached
# project: the modules that analyse are imported where a file is analysed.
if TYPE_CHECKING:
    from amplint.engine.fixer import FixFailure
    from amplint.engine.rule import RuleType

__all__ = [
    "INTERNAL_ERROR",
    "PARSE_ERROR",
    "ConfigError",
    "FileListing",
    "FileReport",
    "Mode",
    "Progress",
    "ProgressBar",
    "ProjectFacts",
    "RuleInfo",
    "RuleSpec",
    "RuleType",
    "RunOptions",
    "RunOutcome",
    "add_noqa_comment",
    "check_source",
    "clean_caches",
    "default_jobs",
    "describe_settings",
    "fix_source_text",
    "fix_text",
    "list_files",
    "registry",
    "rule_by_code",
    "run_cells",
    "run_paths",
    "run_stdin",
    "run_text",
    "watch",
]


# -- rules -------------------------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    # The rule classes' type, without loading them for a run.
    if name == "RuleType":
        from amplint.engine.rule import RuleType

        return RuleType
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def registry() -> tuple[RuleSpec, ...]:
    """Every rule there is (the rule modules' and the engine's own codes), as catalog
    entries; ``amplint.engine.loading.rule_class`` loads one's class (its page, examples)."""
    return catalog()


def rule_by_code(code: str) -> RuleSpec | None:
    """The rule with this code (any case) or name, if there is one."""
    return _catalog_entry(code)


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    """What the command line (or an editor) asks for, on top of the configuration files.

    ``None`` and empty values leave the configuration as it is. Per-file ignores are
    ``PATTERN:CODES`` strings, as on the command line.
    """

    mode: Mode = Mode.CHECK
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[str, ...] | None = None
    extend_per_file_ignores: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    skip_vendored: bool | None = None
    unsafe_fixes: bool | None = None
    file_timeout: float | None = None
    target_torch: str | None = None
    unfixable: tuple[str, ...] = ()
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    config: str | None = None
    isolated: bool = False
    cache: bool = True
    cache_dir: str | None = None  # relative to the current directory
    jobs: int | None = None

    def overrides(self) -> Overrides:
        return Overrides(
            select=self.select,
            extend_select=self.extend_select,
            ignore=self.ignore,
            per_file_ignores=None if self.per_file_ignores is None else parse_per_file_ignores(self.per_file_ignores),
            extend_per_file_ignores=parse_per_file_ignores(self.extend_per_file_ignores),
            exclude=self.exclude,
            extend_exclude=self.extend_exclude,
            force_exclude=self.force_exclude,
            respect_gitignore=self.respect_gitignore,
            skip_vendored=self.skip_vendored,
            unsafe_fixes=self.unsafe_fixes,
            cache_dir=os.path.abspath(self.cache_dir) if self.cache_dir else None,
            file_timeout=self.file_timeout,
            target_torch=self.target_torch,
            unfixable=self.unfixable,
            extend_safe_fixes=self.extend_safe_fixes,
            extend_unsafe_fixes=self.extend_unsafe_fixes,
        )

    def resolver(self, cwd: Path | None = None) -> ConfigResolver:
        """Each path's settings; raises ConfigError for a bad option or configuration."""
        if self.isolated and self.config:
            raise ConfigError("--isolated and --config are mutually exclusive")
        return ConfigResolver(
            registry(),
            self.overrides(),
            explicit=Path(self.config) if self.config else None,
            isolated=self.isolated,
            cwd=cwd,
        )


class Progress(Protocol):
    """What :func:`run_paths` reports progress to (:class:`ProgressBar` is one)."""

    def start(self, total: int) -> None: ...

    def advance(self, count: int = 1) -> None: ...

    def tick(self) -> None: ...


# -- outcomes ----------------------------------------------------------------------------------


@dataclass
class RunOutcome:
    """Everything a run found and did, for any output format and any exit-code policy."""

    mode: Mode
    reports: list[FileReport] = field(default_factory=list)  # sorted by path
    checked: list[str] = field(default_factory=list)  # every file looked at, sorted
    # Run errors (a path that does not exist) and warnings (a directory that cannot be
    # read, no files found), each a sentence naming its path; the files' own warnings
    # are in their reports (``file_warnings``).
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What a run left out on purpose (a vendored library copy), shown with --verbose.
    notes: list[str] = field(default_factory=list)
    # Whether unsafe fixes count as fixable in what is shown (the command line's choice,
    # else the configuration's).
    unsafe_fixes: bool = False
    # stdin only: the name was excluded (``--force-exclude``) and the input passes through.
    excluded: bool = False
    elapsed: float = 0.0

    @functools.cached_property
    def diagnostics(self) -> list[Diagnostic]:
        """Every finding still there (after fixes written), sorted by path and position."""
        return sorted((d for r in self.reports for d in r.diagnostics), key=lambda d: d.sort_key)

    def text_of(self, path: str) -> str:
        """The text a diagnostic of ``path`` points into (the written text after ``--apply``)."""
        for report in self.reports:
            if report.path == path:
                return report.new_text if report.written else report.old_text
        return ""

    def text_for(self, diagnostic: Diagnostic) -> str:
        """The text ``diagnostic``'s rows count in: its file's, or its notebook cell's."""
        for report in self.reports:
            if report.path == diagnostic.path:
                return report.text_for(diagnostic)
        return ""

    @property
    def changed(self) -> list[FileReport]:
        """Files whose fixes change them (written or, for ``fix`` alone, not)."""
        return [r for r in self.reports if r.fixed is not None and r.write_error is None]

    @property
    def written(self) -> list[FileReport]:
        return [r for r in self.reports if r.written]

    @property
    def fixed(self) -> int:
        """Fixes written to disk."""
        return sum(sum(r.fixes_applied.values()) for r in self.written)

    @property
    def would_fix(self) -> int:
        """Fixes a ``fix`` without ``--apply`` shows."""
        return sum(sum(r.fixes_applied.values()) for r in self.changed)

    @property
    def fixable(self) -> int:
        return sum(1 for d in self.diagnostics if d.fixable_with(self.unsafe_fixes))

    @property
    def noqa_added(self) -> int:
        return sum(r.noqa_added for r in self.reports)

    @property
    def file_warnings(self) -> list[tuple[str, str]]:
        """(path, warning) of each file checked with a warning (valid code libcst cannot parse)."""
        return [(r.path, warning) for r in self.reports for warning in r.warnings]

    @property
    def write_errors(self) -> list[tuple[str, str]]:
        return [(r.path, r.write_error) for r in self.reports if r.write_error is not None]

    @property
    def fix_failures(self) -> list[tuple[str, FixFailure]]:
        """(path, failure) of each fix that was not applied (``failure.cell`` in a notebook)."""
        return [(r.path, f) for r in self.reports for f in r.fix_failures]

    @property
    def internal_error(self) -> bool:
        return any(d.code == INTERNAL_ERROR for d in self.diagnostics)

    @property
    def failed(self) -> bool:
        """A run error or a file that could not be written (exit 2, whatever was found)."""
        return bool(self.errors or self.write_errors)

    def fixes_by_file(self, reports: Iterable[FileReport]) -> list[tuple[str, Mapping[str, int]]]:
        return [(r.path, r.fixes_applied) for r in reports]

    def fixable_by_file(self) -> list[tuple[str, Mapping[str, int]]]:
        """Per file, the fixes ``--fix`` would apply, by code (``check --show-fixes``)."""
        return [(r.path, Counter(d.code for d in r.diagnostics if d.fixable_with(self.unsafe_fixes))) for r in self.reports]


# -- running -----------------------------------------------------------------------------------


# Formats that hold Python inside something else, for the engine (``Job.decoders``).
DECODERS = ((".ipynb", decode_notebook),)


def _job(mode: Mode, settings: Settings, *, unsafe_fixes: bool = False, project: ProjectFacts | None = None) -> Job:
    return Job(mode, settings, registry(), unsafe_fixes=unsafe_fixes, project=project, decoders=DECODERS)


def _run_job(mode: Mode, settings: Settings) -> Job:
    # ``--add-noqa`` checks: the comments are added from the findings, here.
    engine_mode = Mode.CHECK if mode is Mode.ADD_NOQA else mode
    return _job(engine_mode, settings)


def _decode(path: str, data: bytes) -> SourceFile:
    """The text the engine lints for ``path``: a notebook's module, else the decoded file."""
    for suffix, decoder in DECODERS:
        if path.endswith(suffix):
            return decoder(data)
    return decode(data)


def _display_unsafe(options: RunOptions, resolver: ConfigResolver) -> bool:
    if options.unsafe_fixes is not None:
        return options.unsafe_fixes
    used = {settings.unsafe_fixes for settings in resolver.configurations()}
    return used.pop() if len(used) == 1 else resolver.root().unsafe_fixes


def run_paths(
    paths: Sequence[str],
    options: RunOptions = RunOptions(),
    *,
    progress: Progress | None = None,
    cwd: Path | None = None,
) -> RunOutcome:
    """Check (or fix, or silence) the files under ``paths`` (default: the current
    directory). Raises ConfigError for invalid options or configuration, and lets
    KeyboardInterrupt through (after the workers are stopped; every file is either
    untouched or completely written)."""
    started = time.perf_counter()
    resolver = options.resolver(cwd)
    found = discover(paths or ["."], resolver)
    outcome = RunOutcome(mode=options.mode, errors=list(found.errors), warnings=list(found.warnings), notes=list(found.skipped))
    if not found.files and not found.errors:
        outcome.warnings.append("no Python files found under the given path(s)")
    files = [str(path) for path in found.files]
    outcome.checked = files
    if progress is not None:
        progress.start(len(files))

    by_directory: dict[str, Settings] = {}

    def settings_for(path: str) -> Settings:
        directory = os.path.dirname(path)
        if directory not in by_directory:
            by_directory[directory] = resolver.for_directory(Path(path).absolute().parent)
        return by_directory[directory]

    reports = run(
        files,
        _run_job(options.mode, resolver.root()),
        jobs=options.jobs or default_jobs(),
        cache=options.cache,
        settings_for=settings_for,
        in_process=False,
        tick=progress.tick if progress is not None else None,
    )
    for report in reports:
        _finish_file(report, options.mode, settings_for(report.path))
        outcome.reports.append(report)
        if progress is not None:
            progress.advance()
    outcome.reports.sort(key=lambda report: report.path)
    outcome.unsafe_fixes = _display_unsafe(options, resolver)
    outcome.elapsed = time.perf_counter() - started
    return outcome


def _finish_file(report: FileReport, mode: Mode, settings: Settings) -> None:
    """What happens to one file's result in the parent: writing, then forgetting texts."""
    if mode is Mode.APPLY and report.fixed is not None and report.original is not None:
        problem = write_atomically(report.path, report.original, report.fixed)
        if problem is None:
            report.written = True
        else:
            _unwritten(report, problem, settings)
    elif mode is Mode.ADD_NOQA and report.original is not None:
        _add_noqa(report)
    _place_in_cells(report)
    if not report.diagnostics and (report.fixed is None or report.written):
        # Nothing will quote this file's text again: memory stays bounded by the
        # findings, not by the size of the tree.
        report.original = None
        report.old_text = report.new_text = ""
        report.cells = report.old_cells = None


def _place_in_cells(report: FileReport) -> None:
    """A notebook's findings placed in its cells, with the cells' texts for the outputs.

    Done last, in this process: the engine, the cache, fixing and ``--add-noqa`` all
    work on the notebook's module, so a cached result and a fresh one are placed alike.
    """
    if not is_notebook(report.path) or report.original is None:
        return
    fixed = report.fixed is not None and report.write_error is None
    data = report.fixed if fixed and report.fixed is not None else report.original
    if not (fixed or report.diagnostics or report.fix_failures):
        # A clean notebook (every notebook of a warm run, mostly) has only notes to give.
        with contextlib.suppress(NotebookError):
            _add_notes(report, notebook_outline(data))
        return
    try:
        notebook = parse_notebook(data)
        original = parse_notebook(report.original) if fixed else notebook
    except NotebookError:
        return  # its AMP900 points into the JSON text
    _add_notes(report, notebook)
    if notebook.python_text != (report.new_text if fixed else report.old_text) or not notebook.code_cells:
        return  # not analysed (too large) or nothing to place in
    report.diagnostics = [_placed(notebook, d) for d in report.diagnostics]
    report.fix_failures = [_placed_failure(original, failure) for failure in report.fix_failures]
    report.cells = notebook.cell_texts()
    report.old_cells = original.cell_texts() if fixed else None


def _add_notes(report: FileReport, notebook: Notebook | NotebookOutline) -> None:
    if not notebook.is_python:
        report.notes.append(f"skipped: the notebook's language is {notebook.language}, not Python")
    elif notebook.skipped_cells:
        numbers = ", ".join(str(number) for number in notebook.skipped_cells)
        report.notes.append(f"cell(s) {numbers} skipped: a cell magic that runs something other than Python")


def _placed(notebook: Notebook, diagnostic: Diagnostic) -> Diagnostic:
    if diagnostic.code == INTERNAL_ERROR:
        return diagnostic  # about the whole file, not a place in it
    try:
        placed = notebook.place(diagnostic)
        if diagnostic.code == PARSE_ERROR and placed.cell is not None:
            # A cell that breaks on its own (a truncated docstring) is where the error is,
            # though the module as a whole fails only in a later cell.
            broken = notebook.first_unparsable_cell()
            if broken is not None and broken[0] < placed.cell:
                _, location, error = broken
                moved = dataclasses.replace(diagnostic, location=location, end_location=location, message=f"cannot parse: {error}")
                return notebook.place(moved)
            # CPython names other lines of the module ("expected an indented block after
            # 'else' statement on line 242"): say where they are in the notebook.
            return dataclasses.replace(placed, message=_LINE_REFERENCE.sub(lambda m: _cell_line(notebook, placed.cell, m), placed.message))
        return placed
    except ValueError:
        return diagnostic


_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


def _cell_line(notebook: Notebook, cell: int | None, match: re.Match[str]) -> str:
    try:
        where = notebook.locate((int(match.group(1)), 1))
    except ValueError:
        return match.group(0)
    return f"line {where.row}" if where.cell == cell else f"cell {where.cell}, line {where.row}"


def _placed_failure(notebook: Notebook, failure: FixFailure) -> FixFailure:
    if not failure.code:
        return failure  # about the whole file (the fix could not be written back)
    try:
        where = notebook.locate((failure.row, failure.column))
    except ValueError:
        return failure
    return dataclasses.replace(failure, cell=where.cell, row=where.row, column=where.column)


def _unwritten(report: FileReport, problem: str, settings: Settings) -> None:
    """A file that could not be written keeps its findings: report them as a check would."""
    assert report.original is not None
    checked = process_source(report.path, report.original, _job(Mode.CHECK, settings))
    report.write_error = problem
    report.diagnostics = checked.diagnostics
    report.fixes_applied = {}
    report.fix_failures = []
    report.new_text = report.old_text


def _add_noqa(report: FileReport) -> None:
    if not report.diagnostics or report.original is None:
        return
    try:
        source = _decode(report.path, report.original)
    except SourceError:
        return  # its AMP900 stays a finding
    from amplint.engine.add_noqa import add_noqa

    added = add_noqa(source.text, report.diagnostics)
    if not added.added:
        report.diagnostics = added.left
        return
    try:
        data = source.encode(added.text)
    except SourceError as error:
        report.write_error = str(error)
        return
    problem = write_atomically(report.path, report.original, data)
    if problem is not None:
        report.write_error = problem
        return
    report.written = True
    report.noqa_added = added.added
    report.fixed = data
    report.new_text = added.text
    report.diagnostics = added.left


def run_text(
    data: str | bytes,
    path: str,
    options: RunOptions = RunOptions(),
    *,
    resolver: ConfigResolver | None = None,
) -> FileReport:
    """Check or fix a text in memory as if it were the file ``path`` (which need not
    exist): the configuration, per-file ignores and rules for that path apply. Nothing
    is written; with a fixing mode the report holds the fixed bytes and text."""
    resolver = resolver or options.resolver()
    settings = resolver.for_path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    mode = Mode.FIX if options.mode is Mode.APPLY else options.mode
    report = process_source(path, raw, _run_job(mode, settings))
    _place_in_cells(report)
    return report


def run_cells(
    cells: Sequence[tuple[str, str]],
    path: str,
    options: RunOptions = RunOptions(),
    *,
    resolver: ConfigResolver | None = None,
) -> FileReport:
    """Check or fix a notebook held in memory as its cells, ``(cell type, source)`` pairs
    in order (``"code"``, ``"markdown"`` or ``"raw"``), as if it were the notebook
    ``path``: an editor's notebook document. Diagnostics carry cell numbers, the 1-based
    positions in ``cells``; with a fixing mode, ``report.cells`` holds the fixed code
    cells' sources."""
    if not is_notebook(path):
        raise ValueError(f"{path}: a notebook's path must end with .ipynb")
    return run_text(notebook_json(cells), path, options, resolver=resolver)


def add_noqa_comment(text: str, diagnostic: Diagnostic) -> str | None:
    """``text`` with a ``# noqa`` comment silencing ``diagnostic`` on the row it starts
    on (merged into a directive already there), or None where no comment can silence it
    (AMP900, a row that ends inside a string). For a notebook finding, ``text`` is its
    cell's."""
    from amplint.engine.add_noqa import add_noqa

    added = add_noqa(text, [dataclasses.replace(diagnostic, cell=None)])
    return added.text if added.added else None


def run_stdin(data: bytes, filename: str | None, options: RunOptions = RunOptions()) -> RunOutcome:
    """Check or fix source read from stdin, reported as ``filename`` (or ``-``).

    With ``force-exclude``, an excluded name gives an outcome marked ``excluded`` with no
    report (the caller passes the input through). Nothing is written: for a fixing mode,
    the report's ``fixed`` bytes are the output.
    """
    started = time.perf_counter()
    resolver = options.resolver()
    name = filename or "-"
    settings = resolver.for_path(filename) if filename else resolver.root()
    outcome = RunOutcome(mode=options.mode, unsafe_fixes=settings.unsafe_fixes if options.unsafe_fixes is None else options.unsafe_fixes)
    if filename and settings.force_exclude and is_excluded(filename, settings):
        outcome.excluded = True
        return outcome
    report = run_text(data, name, options, resolver=resolver)
    outcome.reports = [report]
    outcome.checked = [name]
    outcome.elapsed = time.perf_counter() - started
    return outcome


# -- looking at the configuration --------------------------------------------------------------


@dataclass
class FileListing:
    files: list[str]
    errors: list[str]
    warnings: list[str]


def list_files(paths: Sequence[str], options: RunOptions = RunOptions()) -> FileListing:
    """The files a run over ``paths`` would check (``--show-files``)."""
    found = discover(paths or ["."], options.resolver())
    return FileListing([str(path) for path in found.files], found.errors, found.warnings)


def describe_settings(path: str, options: RunOptions = RunOptions()) -> dict[str, object]:
    """The settings that apply to ``path`` (``--show-settings``), as plain data."""
    resolver = options.resolver()
    settings = resolver.for_path(path)
    rules = registry()
    enabled = settings.enabled_rules(rules)
    applied = settings.rules_for(path, rules)
    return {
        "path": path,
        "config_file": settings.config_path,
        "project_root": settings.project_root,
        "select": list(settings.select) if settings.select is not None else None,
        "extend_select": list(settings.extend_select),
        "ignore": list(settings.ignore),
        "per_file_ignores": {pattern: list(codes) for pattern, codes in settings.per_file_ignores.items()},
        "extend_per_file_ignores": {pattern: list(codes) for pattern, codes in settings.extend_per_file_ignores.items()},
        "ignored_here": list(settings.ignored_for(path)),
        "enabled_rules": [rule.code for rule in enabled],
        "rules": [rule.code for rule in applied],
        "exclude": list(settings.exclude),
        "extend_exclude": list(settings.extend_exclude),
        "excluded": is_excluded(path, settings),
        "respect_gitignore": settings.respect_gitignore,
        "skip_vendored": settings.skip_vendored,
        "force_exclude": settings.force_exclude,
        "unsafe_fixes": settings.unsafe_fixes,
        "cache_dir": str(settings.cache_path()),
        "max_file_size": settings.max_file_size,
        "file_timeout": settings.file_timeout,
        "target_torch": settings.target_torch,
        "runtime_helpers": settings.runtime_helpers,
        "unfixable": list(settings.unfixable),
        "extend_safe_fixes": list(settings.extend_safe_fixes),
        "extend_unsafe_fixes": list(settings.extend_unsafe_fixes),
    }


# -- maintenance -------------------------------------------------------------------------------


def clean_caches(options: RunOptions = RunOptions(), cwd: Path | None = None) -> tuple[list[str], list[str]]:
    """Remove amplint's cache directories under ``cwd`` and the configured one
    (``amplint clean``): (removed, errors)."""
    root = (cwd or Path.cwd()).absolute()
    configured = [options.resolver(root).root().cache_path()]
    removed: list[str] = []
    errors: list[str] = []
    for cache in find_caches(root, configured):
        problem = remove_cache(cache)
        if problem is None:
            removed.append(str(cache))
        else:
            errors.append(f"{cache}: {problem}")
    return removed, errors


def _snapshot(paths: Sequence[str], options: RunOptions) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file a run would look at, and of the
    configuration files in use."""
    resolver = options.resolver()
    found = discover(paths or ["."], resolver)
    watched = [str(path) for path in found.files]
    watched += [settings.config_path for settings in resolver.configurations() if settings.config_path]
    state: dict[str, tuple[int, int]] = {}
    for name in watched:
        try:
            info = os.stat(name)
        except OSError:
            continue
        state[name] = (info.st_mtime_ns, info.st_size)
    return state


def watch(
    paths: Sequence[str],
    options: RunOptions,
    on_outcome: Callable[[RunOutcome | ConfigError], None],
    *,
    interval: float = 0.5,
    max_runs: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> int:
    """Run over ``paths`` now and again whenever a file or configuration changes
    (``--watch``): a polling loop, no dependency. Returns the number of runs; ``max_runs``
    bounds them (tests), else it runs until interrupted."""
    runs = 0
    while max_runs is None or runs < max_runs:
        try:
            before = _snapshot(paths, options)
            result: RunOutcome | ConfigError = run_paths(paths, options, progress=progress)
            if options.mode.writes:
                before = _snapshot(paths, options)  # its own writes are no reason to run again
        except ConfigError as error:
            before = {}
            result = error
        runs += 1
        on_outcome(result)
        if max_runs is not None and runs >= max_runs:
            break
        while True:
            sleep(interval)
            try:
                if _snapshot(paths, options) != before:
                    break
            except ConfigError:
                break
    return runs


# -- texts with explicit settings (tests, scripts) ---------------------------------------------


def _settings(select: Sequence[str] | None, settings: Settings | None) -> Settings:
    settings = settings or Settings()
    if select is not None:
        settings = settings.with_overrides(select=tuple(select))
    return settings


def check_source(
    text: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    settings: Settings | None = None,
    project: ProjectFacts | None = None,
) -> list[Diagnostic]:
    """Lint source text (or raw bytes, decoded per PEP 263) and return its diagnostics.
    ``project``: what the code's project declares (target torch, runtime helpers); by
    default nothing (current torch, no runtime helpers), whatever the current directory."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    job = _job(Mode.CHECK, _settings(select, settings), project=project or ProjectFacts())
    report = process_source(path, data, job)
    _place_in_cells(report)
    return report.diagnostics


def fix_source_text(
    text: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    unsafe_fixes: bool = False,
    settings: Settings | None = None,
    project: ProjectFacts | None = None,
) -> FileReport:
    """Fix source text; the report holds the new text, what was applied and what remains."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    job = _job(Mode.FIX, _settings(select, settings), unsafe_fixes=unsafe_fixes, project=project or ProjectFacts())
    report = process_source(path, data, job)
    _place_in_cells(report)
    return report


def fix_text(
    text: str,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    unsafe_fixes: bool = False,
) -> str:
    """The fixed text (the input itself when nothing applies)."""
    return fix_source_text(text, path, select=select, unsafe_fixes=unsafe_fixes).new_text or text


def replace_options(options: RunOptions, **changes: object) -> RunOptions:
    return dataclasses.replace(options, **changes)  # type: ignore[arg-type]
