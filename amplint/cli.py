"""The ``amplint`` command: a thin click layer over the engine, modelled on Ruff's CLI.

Exit codes: 0 nothing found; 1 diagnostics found (for ``fix`` without ``--apply``:
changes pending); 2 usage, configuration or internal error, or a path that does not
exist or a file that could not be written; 130 interrupted.

Streams: diagnostics, diffs and the summary go to stdout (or ``--output-file``);
errors, warnings, ``--verbose`` logs, ``--show-fixes`` and the ``--diff`` summary go to stderr, so
stdout stays machine-readable for the json/sarif/junit/github formats and ``patch``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from amplint import __version__
from amplint.diagnostics import Diagnostic
from amplint.docs import fix_label, render_rule_page, rule_url
from amplint.engine.config import ConfigError, Settings, resolve_settings, validate_selectors
from amplint.engine.discovery import discover, is_excluded
from amplint.engine.progress import progress
from amplint.engine.rule import INTERNAL_ERROR, PARSE_ERROR, RuleType
from amplint.engine.runner import (
    FileReport,
    Job,
    Mode,
    default_jobs,
    process_source,
    run,
    write_atomically,
)
from amplint.output import (
    FORMATS,
    MACHINE_FORMATS,
    Sourced,
    Style,
    display_path,
    format_statistics,
    format_statistics_json,
    render,
)
from amplint.output.style import use_color
from amplint.output.summary import check_summary, diff_summary, fix_listing
from amplint.rules import all_rules, rule_by_code

EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

CHECK, DIFF, APPLY = "check", "diff", "apply"


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _error(message: str) -> None:
    click.echo(f"{click.style('error', fg='red', bold=True)}: {message}", err=True)


def _warning(message: str) -> None:
    click.echo(f"{click.style('warning', fg='yellow', bold=True)}: {message}", err=True)


@dataclass
class Options:
    paths: tuple[str, ...]
    select: tuple[str, ...]
    extend_select: tuple[str, ...]
    ignore: tuple[str, ...]
    exclude: tuple[str, ...]
    extend_exclude: tuple[str, ...]
    force_exclude: bool
    respect_gitignore: bool | None
    config: str | None
    isolated: bool
    no_cache: bool
    cache_dir: str | None
    jobs: int | None
    stdin_filename: str | None
    output_format: str
    output_file: str | None
    exit_zero: bool
    exit_non_zero_on_fix: bool
    show_statistics: bool
    quiet: bool
    silent: bool
    verbose: bool
    unsafe_fixes: bool | None
    show_fixes: bool


def _common_options(function: Any) -> Any:
    decorators = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option(
            "--select",
            multiple=True,
            metavar="CODES",
            help="Rules to enable: codes, prefixes (AMP1) or ALL, comma-separated. "
            "Replaces the configured selection.",
        ),
        click.option(
            "--extend-select",
            multiple=True,
            metavar="CODES",
            help="Rules to enable in addition to the selection.",
        ),
        click.option("--ignore", multiple=True, metavar="CODES", help="Rules to disable."),
        click.option(
            "--exclude",
            multiple=True,
            metavar="PATTERNS",
            help="Replace the default exclusions (gitignore-style patterns).",
        ),
        click.option(
            "--extend-exclude", multiple=True, metavar="PATTERNS", help="Exclude these too."
        ),
        click.option(
            "--force-exclude",
            is_flag=True,
            help="Apply exclusions even to files named on the command line (for pre-commit).",
        ),
        click.option(
            "--respect-gitignore/--no-respect-gitignore",
            default=None,
            help="Honour .gitignore files inside git repositories (default: yes).",
        ),
        click.option(
            "--config",
            type=click.Path(dir_okay=False),
            help="Configuration file to use (pyproject.toml or amplint.toml) instead of "
            "the one found from the checked path upward.",
        ),
        click.option(
            "--isolated", is_flag=True, help="Ignore every configuration file; use the defaults."
        ),
        click.option("--no-cache", is_flag=True, help="Do not read or write the results cache."),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False),
            envvar="AMPLINT_CACHE_DIR",
            help="Cache directory (default: .amplint_cache in the project root).",
        ),
        click.option(
            "-j",
            "--jobs",
            type=click.IntRange(min=1),
            help="Worker processes (default: the number of usable cores).",
        ),
        click.option(
            "--stdin-filename",
            metavar="PATH",
            help="Read the source from stdin and report it under this name "
            "(config, per-file-ignores and exclusions use it).",
        ),
        click.option(
            "--output-format",
            type=click.Choice(FORMATS),
            envvar="AMPLINT_OUTPUT_FORMAT",
            default="full",
            show_default=True,
            help="How to print diagnostics.",
        ),
        click.option(
            "-o",
            "--output-file",
            type=click.Path(dir_okay=False, writable=True),
            help="Write the report to this file instead of stdout.",
        ),
        click.option(
            "-e", "--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found."
        ),
        click.option(
            "--exit-non-zero-on-fix",
            is_flag=True,
            help="Exit 1 when any fix was applied, even if nothing remains.",
        ),
        click.option(
            "--statistics",
            "show_statistics",
            is_flag=True,
            help="Show counts per rule instead of each diagnostic.",
        ),
        click.option("-q", "--quiet", is_flag=True, help="Print diagnostics, but no summary."),
        click.option(
            "-s",
            "--silent",
            is_flag=True,
            help="Print nothing but errors; the exit code still tells.",
        ),
        click.option(
            "-v",
            "--verbose",
            is_flag=True,
            help="Log what amplint does and show tracebacks of internal errors.",
        ),
        click.option(
            "--unsafe-fixes/--no-unsafe-fixes",
            default=None,
            help="Also apply (and count as fixable) fixes that may change behaviour.",
        ),
        click.option(
            "--show-fixes",
            is_flag=True,
            help="List the fixes applied (or that --fix would apply), per file and rule.",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="amplint")
def cli() -> None:
    """amplint: find and fix PyTorch automatic mixed precision (AMP) mistakes."""


@cli.command()
@_common_options
@click.option(
    "--fix", "apply_fixes", is_flag=True, help="Apply fixes (same as `amplint fix --apply`)."
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print the diff of the fixes instead of applying them (same as `amplint fix`).",
)
def check(apply_fixes: bool, show_diff: bool, **kwargs: Any) -> None:
    """Report AMP mistakes in PATHS (default: the current directory; '-' reads stdin)."""
    if apply_fixes and show_diff:
        raise click.UsageError("--fix and --diff are mutually exclusive")
    mode = APPLY if apply_fixes else DIFF if show_diff else CHECK
    sys.exit(_run(Options(**kwargs), mode))


@cli.command()
@_common_options
@click.option(
    "--apply", "apply_fixes", is_flag=True, help="Write the fixes (default: print their diff)."
)
def fix(apply_fixes: bool, **kwargs: Any) -> None:
    """Fix AMP mistakes in PATHS: print the unified diff, or write it with --apply.

    From stdin ('-'), the fixed source is written to stdout.
    """
    # A stream cannot be patched in place: from stdin, `fix` always prints the fixed source.
    sys.exit(_run(Options(**kwargs), APPLY if apply_fixes else DIFF, stdin_mode=APPLY))


def _rule_json(rule: RuleType) -> dict[str, object]:
    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "fix": rule.fix_availability.value,
        "fix_applicability": rule.fix_applicability.value if rule.fix_applicability else None,
        "default": rule.default_enabled,
        "url": rule_url(rule.code),
    }


@cli.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's page.")
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Print the page of rule CODE (a code or a rule name), or of every rule with --all."""
    if show_all == (code is not None):
        raise click.UsageError("give a rule code, or --all")
    rules: tuple[RuleType, ...]
    if show_all:
        rules = all_rules()
    else:
        assert code is not None
        found = rule_by_code(code)
        if found is None:
            _error(f"unknown rule {code!r}; `amplint rules` lists them")
            sys.exit(EXIT_ERROR)
        rules = (found,)
    if output_format == "json":
        entries = [{**_rule_json(r), "explanation": render_rule_page(r)} for r in rules]
        click.echo(json.dumps(entries if show_all else entries[0], indent=2))
        return
    click.echo("\n".join(render_rule_page(r) for r in rules), nl=False)


@cli.command("rules")
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def list_rules(output_format: str) -> None:
    """List every rule: code, name, fix availability, and whether it is on by default."""
    rules = all_rules()
    if output_format == "json":
        click.echo(json.dumps([_rule_json(r) for r in rules], indent=2))
        return
    width = max(len(r.name) for r in rules)
    for r in rules:
        default = "" if r.default_enabled else "  (off by default)"
        click.echo(f"{r.code}  {r.name:<{width}}  {fix_label(r)}{default}")


@cli.command()
def doctor() -> None:
    """Show what this machine supports for mixed precision (needs torch)."""
    try:
        # Imported here: the runtime side imports torch, which checking must never need.
        doctor_module = importlib.import_module("amplint.runtime.doctor")
    except ModuleNotFoundError as error:
        if error.name not in {"amplint.runtime", "amplint.runtime.doctor"}:
            raise
        _error("`amplint doctor` is not available: this installation has no amplint.runtime.doctor")
        sys.exit(EXIT_ERROR)
    status = doctor_module.main()
    sys.exit(status if isinstance(status, int) else EXIT_OK)


@cli.command()
def version() -> None:
    """Print amplint's version."""
    click.echo(f"amplint {__version__}")


# -- settings --------------------------------------------------------------------------------


def _reads_stdin(options: Options) -> bool:
    if options.stdin_filename is not None:
        for path in options.paths:
            if path != "-":
                _warning(f"ignoring {path} in favour of standard input (--stdin-filename)")
        return True
    return options.paths == ("-",)


def _config_start(options: Options, stdin: bool) -> Path:
    if stdin:
        # The named file need not exist (an unsaved editor buffer): its nearest existing
        # ancestor decides the configuration.
        candidate = (
            Path(options.stdin_filename).absolute() if options.stdin_filename else Path.cwd()
        )
        return next((p for p in (candidate, *candidate.parents) if p.is_dir()), Path.cwd())
    candidate = Path(options.paths[0]) if options.paths else Path.cwd()
    return candidate if candidate.exists() else Path.cwd()


def resolve_cli_settings(options: Options, stdin: bool = False) -> Settings:
    """The configuration file's settings with the command line's on top.

    ``--select`` replaces the configured ``select`` and ``extend-select`` (Ruff's
    behaviour: "only these rules"); ``--extend-select`` and ``--ignore`` add to the
    configured lists. Ignores from both apply, so a rule ignored in the configuration
    needs a more specific selector (or ``--isolated``) to come back.
    """
    if options.isolated and options.config:
        raise click.UsageError("--isolated and --config are mutually exclusive")
    if options.isolated:
        settings = Settings(project_root=str(Path.cwd()))
    else:
        explicit = Path(options.config) if options.config else None
        settings = resolve_settings(_config_start(options, stdin), all_rules(), explicit)
    cli_select = _split(options.select) or None
    cli_extend = _split(options.extend_select)
    cli_ignore = _split(options.ignore)
    validate_selectors((*(cli_select or ()), *cli_extend, *cli_ignore), all_rules())
    changes: dict[str, Any] = {"ignore": settings.ignore + cli_ignore}
    if cli_select is not None:
        changes["select"] = cli_select
        changes["extend_select"] = cli_extend
    else:
        changes["extend_select"] = settings.extend_select + cli_extend
    if options.exclude:
        changes["exclude"] = _split(options.exclude)
    if options.extend_exclude:
        changes["extend_exclude"] = settings.extend_exclude + _split(options.extend_exclude)
    if options.force_exclude:
        changes["force_exclude"] = True
    if options.respect_gitignore is not None:
        changes["respect_gitignore"] = options.respect_gitignore
    if options.unsafe_fixes is not None:
        changes["unsafe_fixes"] = options.unsafe_fixes
    if options.cache_dir:
        # Relative to where the command runs, unlike the configuration's cache-dir.
        changes["cache_dir"] = os.path.abspath(options.cache_dir)
    return dataclasses.replace(settings, **changes)


def _cache_path(settings: Settings) -> str:
    path = Path(settings.cache_dir)
    return str(path if path.is_absolute() else Path(settings.project_root) / path)


# -- running ---------------------------------------------------------------------------------


class Printer:
    """Where each kind of output goes, with colour only on a terminal."""

    def __init__(self, options: Options, stream: IO[str] | None) -> None:
        self.options = options
        self.stream = stream
        self.color = stream is None and use_color(sys.stdout)
        self.style = Style(self.color)
        self.machine = options.output_format in MACHINE_FORMATS

    def out(self, text: str) -> None:
        """The report: diagnostics, statistics, diffs, and (text formats) the summary."""
        if self.options.silent or not text:
            return
        if self.stream is not None:
            self.stream.write(text)
        else:
            click.echo(text, nl=False, color=self.color)

    def summary(self, lines: Sequence[str]) -> None:
        if not self.options.quiet and not self.machine:
            self.out("".join(line + "\n" for line in lines))

    def note(self, text: str) -> None:
        """Human-only messages (``--show-fixes``): stderr, never mixed into the report."""
        if not self.options.silent and text:
            click.echo(text, nl=False, err=True)

    def log(self, message: str) -> None:
        if self.options.verbose:
            click.echo(f"debug: {message}", err=True)


class _OutputFileError(Exception):
    pass


@contextmanager
def _printer(options: Options) -> Iterator[Printer]:
    if options.output_file is None:
        yield Printer(options, None)
        return
    path = Path(options.output_file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("w", encoding="utf-8", newline="")
    except OSError as error:
        raise _OutputFileError(error.strerror or str(error)) from None
    with stream:
        yield Printer(options, stream)


def _run(options: Options, mode: str, stdin_mode: str | None = None) -> int:
    stdin = _reads_stdin(options)
    if stdin and stdin_mode is not None:
        mode = stdin_mode
    try:
        settings = resolve_cli_settings(options, stdin)
    except ConfigError as error:
        _error(str(error))
        return EXIT_ERROR
    try:
        with _printer(options) as printer:
            printer.log(f"configuration: {settings.config_path or 'none found, using defaults'}")
            printer.log(f"rules: {', '.join(r.code for r in settings.enabled_rules(all_rules())) or 'none'}")
            if stdin:
                return _run_stdin(options, settings, mode, printer)
            return _run_paths(options, settings, mode, printer)
    except _OutputFileError as error:
        _error(f"cannot write {options.output_file}: {error}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED


def _job(settings: Settings, mode: str) -> Job:
    return Job(
        Mode.CHECK if mode == CHECK else Mode.FIX, settings, all_rules(), unsafe_fixes=settings.unsafe_fixes
    )


def _run_stdin(options: Options, settings: Settings, mode: str, printer: Printer) -> int:
    name = options.stdin_filename or "-"
    data = sys.stdin.buffer.read()
    if options.stdin_filename and settings.force_exclude and is_excluded(name, settings):
        printer.log(f"{name} is excluded; passing it through unchanged")
        if mode == APPLY:
            _write_stdout_bytes(data)
        return EXIT_OK
    report = process_source(name, data, _job(settings, mode))
    if mode == APPLY:
        return _fix_stdin(options, settings, report, data)
    return _finish(options, settings, [report], [name], mode, printer, failed=False)


def _write_stdout_bytes(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _fix_stdin(options: Options, settings: Settings, report: FileReport, data: bytes) -> int:
    # Like Ruff: the fixed source goes to stdout, what remains to stderr.
    _write_stdout_bytes(report.fixed if report.fixed is not None else data)
    _report_fix_failures([report])
    remaining = sorted(report.diagnostics, key=lambda d: d.sort_key)
    if remaining and not options.silent:
        items = [Sourced(_shown(d, options.verbose), report.new_text) for d in remaining]
        click.echo(render("concise", items, unsafe=settings.unsafe_fixes), err=True, nl=False)
    fixed = sum(report.fixes_applied.values()) if report.fixed is not None else 0
    return _exit_code(options, APPLY, remaining, fixed=fixed, pending=False, failed=False)


def _run_paths(options: Options, settings: Settings, mode: str, printer: Printer) -> int:
    paths = options.paths or (".",)
    found = discover(paths, settings)
    for message in found.errors:
        _error(message)
    if not found.files and not found.errors and not options.silent:
        _warning("no Python files found under the given path(s)")
    files = [str(path) for path in found.files]
    printer.log(f"{len(files)} file(s) to check")
    cache_dir = None if options.no_cache else _cache_path(settings)
    jobs = options.jobs or default_jobs()
    started = time.perf_counter()
    reports: list[FileReport] = []
    write_failed = False
    # A person at a terminal sees progress on long runs; scripts and machine formats never do.
    show_progress = not (printer.machine or options.quiet or options.silent or options.verbose)
    label = "Fixing" if mode == APPLY else "Checking"
    results = run(files, _job(settings, mode), jobs=jobs, cache_dir=cache_dir)
    for report in progress(results, total=len(files), enabled=show_progress, label=label):
        reports.append(report)
        if not options.silent:
            for warning in report.warnings:
                _warning(f"{display_path(report.path)}: {warning}")
        if mode == APPLY and report.fixed is not None and report.original is not None:
            problem = write_atomically(report.path, report.original, report.fixed)
            if problem is None:
                report.written = True
            else:
                report.write_error = problem
                write_failed = True
                _error(f"{display_path(report.path)}: {problem}")
        if not report.diagnostics and (report.fixed is None or mode == APPLY):
            # Nothing will quote this file's text again: memory stays bounded by the
            # findings, not by the size of the tree.
            report.original = None
            report.old_text = report.new_text = ""
    printer.log(f"checked {len(reports)} file(s) in {time.perf_counter() - started:.2f}s")
    return _finish(
        options,
        settings,
        reports,
        files,
        mode,
        printer,
        failed=bool(found.errors) or write_failed,
    )


def _shown(diagnostic: Diagnostic, verbose: bool) -> Diagnostic:
    """The diagnostic as printed: tracebacks (``detail``) only with --verbose."""
    if verbose or diagnostic.detail is None:
        return diagnostic
    return dataclasses.replace(diagnostic, detail=None)


def _report_fix_failures(reports: Sequence[FileReport]) -> None:
    for report in reports:
        for failure in report.fix_failures:
            where = f"{display_path(report.path)}:{failure.row}:{failure.column}"
            code = f" {failure.code}" if failure.code else ""
            _error(f"{where}:{code} fix not applied: {failure.message}")


def _finish(
    options: Options,
    settings: Settings,
    reports: Sequence[FileReport],
    files: Sequence[str],
    mode: str,
    printer: Printer,
    *,
    failed: bool,
) -> int:
    unsafe = settings.unsafe_fixes
    diagnostics = sorted((d for r in reports for d in r.diagnostics), key=lambda d: d.sort_key)
    _report_fix_failures(reports)

    if mode == DIFF:
        changed = [r for r in reports if r.fixed is not None]
        printer.out("".join(r.diff() for r in changed))
        # A diff cannot show that a file could not be analysed at all; say it aside.
        for d in diagnostics:
            if d.code in (PARSE_ERROR, INTERNAL_ERROR) and not options.silent:
                where = f"{display_path(d.path)}:{d.location.row}:{d.location.column}"
                _warning(f"{where}: {d.code} {d.message}")
        would_fix = sum(sum(r.fixes_applied.values()) for r in changed)
        if not options.quiet and not options.silent:
            click.echo(diff_summary(would_fix, diagnostics, unsafe), err=True)
        if options.show_fixes and not options.silent:
            listing = fix_listing("Would fix", [(r.path, r.fixes_applied) for r in changed])
            click.echo(listing, err=True, nl=False)
        return _exit_code(options, mode, diagnostics, fixed=0, pending=bool(changed), failed=failed)

    written = [r for r in reports if r.written]
    fixed = sum(sum(r.fixes_applied.values()) for r in written)
    # Remaining diagnostics of a written file point into its new text.
    texts = {r.path: r.new_text if r.written else r.old_text for r in reports}
    items = [Sourced(_shown(d, options.verbose), texts.get(d.path, "")) for d in diagnostics]
    if options.show_statistics:
        if options.output_format == "json":
            printer.out(format_statistics_json(diagnostics, unsafe))
        else:
            printer.out(format_statistics(diagnostics, unsafe))
    elif items or printer.machine:
        printer.out(
            render(
                options.output_format,
                items,
                unsafe=unsafe,
                checked=files,
                style=printer.style,
                successful=not any(d.code == INTERNAL_ERROR for d in diagnostics),
            )
        )
    if options.show_fixes:
        if mode == APPLY:
            printer.note(fix_listing("Fixed", [(r.path, r.fixes_applied) for r in written]))
        else:
            available = [
                (r.path, Counter(d.code for d in r.diagnostics if d.fixable_with(unsafe)))
                for r in reports
            ]
            printer.note(fix_listing("`--fix` would fix", available))
    printer.summary(check_summary(diagnostics, fixed=fixed, unsafe=unsafe, applied=mode == APPLY))
    return _exit_code(options, mode, diagnostics, fixed=fixed, pending=False, failed=failed)


def _exit_code(
    options: Options,
    mode: str,
    remaining: Sequence[Diagnostic],
    *,
    fixed: int,
    pending: bool,
    failed: bool,
) -> int:
    if any(d.code == INTERNAL_ERROR for d in remaining):
        if not options.silent:
            _error(
                "amplint hit an internal error (AMP999); rerun with --verbose for the "
                "traceback, and please report it"
            )
        return EXIT_ERROR
    if failed:
        return EXIT_ERROR
    if options.exit_zero:
        return EXIT_OK
    if mode == DIFF:
        return EXIT_FOUND if pending else EXIT_OK
    if options.exit_non_zero_on_fix and fixed:
        return EXIT_FOUND
    return EXIT_FOUND if remaining else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run the CLI and return its exit code."""
    try:
        cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="amplint",
            standalone_mode=False,
        )
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
    except click.ClickException as error:
        error.show()
        return EXIT_ERROR
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_ERROR)
    except BrokenPipeError:
        # The reader went away (`amplint check | head`): stop quietly, as Ruff does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FOUND
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
