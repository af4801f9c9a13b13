"""The ``amplint`` command: commands, options, output selection and exit codes over
:mod:`amplint.api`, modelled on Ruff's CLI.

Exit codes: 0 nothing found; 1 diagnostics found (for ``fix`` without ``--apply``:
changes pending); 2 usage, configuration or internal error, or a path that does not
exist or a file that could not be written; 130 interrupted.

Streams: diagnostics, diffs and the summary go to stdout (or ``--output-file``);
errors, warnings, ``--verbose`` logs, ``--show-fixes`` and the ``--diff`` summary go to
stderr, so stdout stays machine-readable for the machine formats and ``patch``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from amplint import __version__
from amplint.api import (
    INTERNAL_ERROR,
    PARSE_ERROR,
    ConfigError,
    Mode,
    ProgressBar,
    RuleInfo,
    RunOptions,
    RunOutcome,
    clean_caches,
    describe_settings,
    list_files,
    registry,
    rule_by_code,
    run_paths,
    run_stdin,
    watch,
)
from amplint.diagnostics import Diagnostic
from amplint.docs import fix_label, render_rule_page, rule_url
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
from amplint.output.statistics import statistics_rows
from amplint.output.style import use_color
from amplint.output.summary import add_noqa_summary, check_summary, diff_summary, fix_listing
from amplint.output.text import position

EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
# Formats `--statistics` can be printed in: a table, or its rows as JSON.
STATISTICS_FORMATS = ("full", "concise", "json", "json-lines")


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
    per_file_ignores: tuple[str, ...]
    extend_per_file_ignores: tuple[str, ...]
    exclude: tuple[str, ...]
    extend_exclude: tuple[str, ...]
    force_exclude: bool
    respect_gitignore: bool | None
    skip_vendored: bool | None
    config: str | None
    isolated: bool
    no_cache: bool
    cache_dir: str | None
    jobs: int | None
    file_timeout: float | None
    target_torch: str | None
    unfixable: tuple[str, ...]
    extend_safe_fixes: tuple[str, ...]
    extend_unsafe_fixes: tuple[str, ...]
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
    show_settings: str | None
    show_files: bool
    watch: bool

    def run_options(self, mode: Mode) -> RunOptions:
        return RunOptions(
            mode=mode,
            select=_split(self.select) or None,
            extend_select=_split(self.extend_select),
            ignore=_split(self.ignore),
            per_file_ignores=self.per_file_ignores or None,
            extend_per_file_ignores=self.extend_per_file_ignores,
            exclude=_split(self.exclude) or None,
            extend_exclude=_split(self.extend_exclude),
            force_exclude=True if self.force_exclude else None,
            respect_gitignore=self.respect_gitignore,
            skip_vendored=self.skip_vendored,
            unsafe_fixes=self.unsafe_fixes,
            file_timeout=self.file_timeout,
            target_torch=self.target_torch,
            unfixable=_split(self.unfixable),
            extend_safe_fixes=_split(self.extend_safe_fixes),
            extend_unsafe_fixes=_split(self.extend_unsafe_fixes),
            config=self.config,
            isolated=self.isolated,
            cache=not self.no_cache,
            cache_dir=self.cache_dir,
            jobs=self.jobs,
        )


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
            "--per-file-ignores",
            multiple=True,
            metavar="PATTERN:CODES",
            help="Rules to disable in files matching PATTERN (repeatable). Replaces the "
            "configured per-file-ignores.",
        ),
        click.option(
            "--extend-per-file-ignores",
            multiple=True,
            metavar="PATTERN:CODES",
            help="Like --per-file-ignores, in addition to the configured ones.",
        ),
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
            "--skip-vendored/--no-skip-vendored",
            default=None,
            help="Skip copies of well-known libraries kept in the tree, such as a transformers/ "
            "folder with its own setup.py (default: yes; a folder named on the command line is checked).",
        ),
        click.option(
            "--config",
            type=click.Path(dir_okay=False),
            help="Configuration file to use for every file (pyproject.toml or amplint.toml) "
            "instead of each file's nearest one.",
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
            "--file-timeout",
            type=click.FloatRange(min=0, min_open=True),
            metavar="SECONDS",
            help="Stop analysing a file after this long and report it as AMP999 "
            "(default: 60, or the configured file-timeout).",
        ),
        click.option(
            "--target-torch",
            metavar="VERSION",
            help="The oldest torch the code must run on (default: the project's declared "
            "torch requirement, else current torch): deprecations and fixes follow it.",
        ),
        click.option("--unfixable", multiple=True, metavar="CODES", help="Never apply these rules' fixes."),
        click.option(
            "--extend-safe-fixes", multiple=True, metavar="CODES", help="Treat these rules' unsafe fixes as safe."
        ),
        click.option(
            "--extend-unsafe-fixes", multiple=True, metavar="CODES", help="Treat these rules' safe fixes as unsafe."
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
        click.option(
            "--show-settings",
            metavar="FILE",
            help="Print the settings that apply to FILE (its configuration, rules, "
            "per-file ignores) and exit.",
        ),
        click.option(
            "--show-files", is_flag=True, help="Print the files that would be checked and exit."
        ),
        click.option(
            "-w",
            "--watch",
            is_flag=True,
            help="Run again whenever a checked file or a configuration file changes.",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="amplint", message="%(prog)s %(version)s")
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
@click.option(
    "--add-noqa",
    is_flag=True,
    help="Silence every current finding with a coded `# noqa` comment on its line.",
)
def check(apply_fixes: bool, show_diff: bool, add_noqa: bool, **kwargs: Any) -> None:
    """Report AMP mistakes in PATHS (default: the current directory; '-' reads stdin)."""
    if sum((apply_fixes, show_diff, add_noqa)) > 1:
        raise click.UsageError("--fix, --diff and --add-noqa are mutually exclusive")
    mode = Mode.APPLY if apply_fixes else Mode.FIX if show_diff else Mode.ADD_NOQA if add_noqa else Mode.CHECK
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
    sys.exit(_run(Options(**kwargs), Mode.APPLY if apply_fixes else Mode.FIX, stdin_mode=Mode.APPLY))


def _rule_json(rule: RuleInfo) -> dict[str, object]:
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
    rules: tuple[RuleInfo, ...]
    if show_all:
        rules = registry()
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
    rules = registry()
    if output_format == "json":
        click.echo(json.dumps([_rule_json(r) for r in rules], indent=2))
        return
    width = max(len(r.name) for r in rules)
    for r in rules:
        default = "" if r.default_enabled else "  (off by default)"
        click.echo(f"{r.code}  {r.name:<{width}}  {fix_label(r)}{default}")


@cli.command()
def server() -> None:
    """Run the language server on stdio, for editors (needs `amplint[server]`)."""
    try:
        # Imported here: pygls is an optional dependency that checking never needs.
        from amplint.server import main as serve
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in {"pygls", "lsprotocol", "cattrs", "attrs"}:
            raise
        _error(
            "`amplint server` needs amplint's `server` extra (pygls and lsprotocol), which is "
            "not installed: install amplint with it (from a checkout: `pip install -e '.[server]'`; "
            "from git: `pip install 'amplint[server] @ git+<URL>@<commit>'`), or add "
            "`pip install 'pygls>=2' lsprotocol` to this environment"
        )
        sys.exit(EXIT_ERROR)
    serve()


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
    """Print amplint's version (as `amplint --version` does)."""
    click.echo(f"amplint {__version__}")


@cli.command()
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="AMPLINT_CACHE_DIR",
    help="Also remove this cache directory.",
)
def clean(cache_dir: str | None) -> None:
    """Remove amplint's cache directories here and below (and the configured one)."""
    try:
        removed, errors = clean_caches(RunOptions(cache_dir=cache_dir))
    except ConfigError as error:
        _error(str(error))
        sys.exit(EXIT_ERROR)
    for path in removed:
        click.echo(f"Removed {display_path(path)}")
    if not removed and not errors:
        click.echo("No cache to remove.")
    for message in errors:
        _error(f"cannot remove {message}")
    sys.exit(EXIT_ERROR if errors else EXIT_OK)


# -- printing ----------------------------------------------------------------------------------


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


class _Progress(ProgressBar):
    """The bar, plus the ``--verbose`` line saying how many files there are."""

    def __init__(self, printer: Printer, enabled: bool, label: str) -> None:
        super().__init__(enabled, label=label)
        self.printer = printer

    def start(self, total: int) -> None:
        super().start(total)
        self.printer.log(f"{total} file(s) to check")


# -- running -----------------------------------------------------------------------------------


def _reads_stdin(options: Options) -> bool:
    if options.stdin_filename is not None:
        for path in options.paths:
            if path != "-":
                _warning(f"ignoring {path} in favour of standard input (--stdin-filename)")
        return True
    return options.paths == ("-",)


def _run(options: Options, mode: Mode, stdin_mode: Mode | None = None) -> int:
    stdin = _reads_stdin(options)
    if stdin and stdin_mode is not None:
        mode = stdin_mode
    if options.show_statistics and options.output_format not in STATISTICS_FORMATS:
        raise click.UsageError(
            f"--statistics prints a table or JSON: use it with --output-format "
            f"{', '.join(STATISTICS_FORMATS)}, not {options.output_format}"
        )
    if mode is Mode.ADD_NOQA and (stdin or options.watch):
        raise click.UsageError("--add-noqa changes files: give paths, not stdin or --watch")
    if options.watch and stdin:
        raise click.UsageError("--watch needs paths, not stdin")
    try:
        if options.show_settings is not None:
            return _show_settings(options, mode)
        if options.show_files:
            return _show_files(options, mode)
        with _printer(options) as printer:
            if options.watch:
                return _watch(options, mode, printer)
            if stdin:
                return _run_stdin(options, mode, printer)
            return _run_paths(options, mode, printer)
    except ConfigError as error:
        _error(str(error))
        return EXIT_ERROR
    except _OutputFileError as error:
        _error(f"cannot write {options.output_file}: {error}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED


def _engine_mode(options: Options, mode: Mode, printer: Printer) -> Mode:
    # `fix` shows its changes as a diff, a human format: asked for a machine format or
    # statistics, it reports the findings (with their fixes) as `check` does.
    if mode is Mode.FIX and (printer.machine or options.show_statistics):
        return Mode.CHECK
    return mode


def _log_configuration(options: Options, mode: Mode, printer: Printer) -> None:
    if not options.verbose:
        return
    described = describe_settings(".", options.run_options(mode))
    printer.log(f"configuration: {described['config_file'] or 'none found, using defaults'}")
    rules = described["enabled_rules"]
    assert isinstance(rules, list)
    printer.log(f"rules: {', '.join(rules) or 'none'}")


def _run_paths(options: Options, mode: Mode, printer: Printer) -> int:
    _log_configuration(options, mode, printer)
    engine_mode = _engine_mode(options, mode, printer)
    # A person at a terminal sees progress on long runs; scripts and machine formats never do.
    show = not (printer.machine or options.quiet or options.silent or options.verbose)
    label = "Fixing" if mode is Mode.APPLY else "Checking"
    with _Progress(printer, show, label) as bar:
        outcome = run_paths(options.paths, options.run_options(engine_mode), progress=bar)
    printer.log(f"checked {len(outcome.checked)} file(s) in {outcome.elapsed:.2f}s")
    return _report(options, mode, outcome, printer)


def _run_stdin(options: Options, mode: Mode, printer: Printer) -> int:
    _log_configuration(options, mode, printer)
    data = sys.stdin.buffer.read()
    outcome = run_stdin(data, options.stdin_filename, options.run_options(_engine_mode(options, mode, printer)))
    if outcome.excluded:
        printer.log(f"{options.stdin_filename} is excluded; passing it through unchanged")
        if mode is Mode.APPLY:
            _write_stdout_bytes(data)
        return EXIT_OK
    if mode is Mode.APPLY:
        return _fix_stdin(options, outcome, data)
    return _report(options, mode, outcome, printer)


def _watch(options: Options, mode: Mode, printer: Printer) -> int:
    show = not (printer.machine or options.quiet or options.silent or options.verbose)
    if not options.silent:
        click.echo("Watching for file changes (Ctrl-C to stop).", err=True)

    def report(result: RunOutcome | ConfigError) -> None:
        bar.clear()
        if isinstance(result, ConfigError):
            _error(str(result))
        else:
            _report(options, mode, result, printer)
        if not options.silent:
            click.echo("Watching for file changes.", err=True)

    with _Progress(printer, show, "Checking") as bar:
        watch(options.paths, options.run_options(_engine_mode(options, mode, printer)), report, progress=bar)
    return EXIT_OK


def _show_settings(options: Options, mode: Mode) -> int:
    assert options.show_settings is not None
    described = describe_settings(options.show_settings, options.run_options(mode))
    if options.output_format in ("json", "json-lines"):
        click.echo(json.dumps(described, indent=2))
        return EXIT_OK
    for key, value in described.items():
        click.echo(f"{key.replace('_', '-')} = {json.dumps(value)}")
    return EXIT_OK


def _show_files(options: Options, mode: Mode) -> int:
    listing = list_files(options.paths, options.run_options(mode))
    for message in listing.warnings:
        _warning(message)
    for message in listing.errors:
        _error(message)
    if options.output_format in ("json", "json-lines"):
        click.echo(json.dumps([os.path.abspath(path) for path in listing.files], indent=2))
    else:
        for path in listing.files:
            click.echo(display_path(path))
    return EXIT_ERROR if listing.errors else EXIT_OK


def _write_stdout_bytes(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _fix_stdin(options: Options, outcome: RunOutcome, data: bytes) -> int:
    # Like Ruff: the fixed source goes to stdout, what remains to stderr.
    (report,) = outcome.reports
    _write_stdout_bytes(report.fixed if report.fixed is not None else data)
    _print_problems(options, outcome)
    remaining = outcome.diagnostics
    if remaining and not options.silent:
        items = [Sourced(_shown(d, options.verbose), report.text_for(d) if d.cell is not None else report.new_text) for d in remaining]
        text_format = options.output_format not in MACHINE_FORMATS
        rendered = render("concise" if text_format else options.output_format, items, unsafe=outcome.unsafe_fixes)
        click.echo(rendered, err=True, nl=False)
    fixed = sum(report.fixes_applied.values()) if report.fixed is not None else 0
    return _exit_code(options, Mode.APPLY, outcome, fixed=fixed, pending=False)


def _shown(diagnostic: Diagnostic, verbose: bool) -> Diagnostic:
    """The diagnostic as printed: tracebacks (``detail``) only with --verbose."""
    if verbose or diagnostic.detail is None:
        return diagnostic
    return dataclasses.replace(diagnostic, detail=None)


def _print_problems(options: Options, outcome: RunOutcome) -> None:
    """Run errors, write errors, fixes not applied and warnings, on stderr."""
    if not options.silent:
        for message in outcome.warnings:
            _warning(message)
        for path, message in outcome.file_warnings:
            _warning(f"{display_path(path)}: {message}")
    for message in outcome.errors:
        _error(message)
    for path, problem in outcome.write_errors:
        _error(f"{display_path(path)}: {problem}")
    for path, failure in outcome.fix_failures:
        cell = f"cell {failure.cell}:" if failure.cell is not None else ""
        code = f" {failure.code}" if failure.code else ""
        _error(f"{display_path(path)}:{cell}{failure.row}:{failure.column}:{code} fix not applied: {failure.message}")


def _statistics(options: Options, diagnostics: Sequence[Diagnostic], unsafe: bool) -> str:
    if options.output_format == "json":
        return format_statistics_json(diagnostics, unsafe)
    if options.output_format == "json-lines":
        return "".join(json.dumps(row) + "\n" for row in statistics_rows(diagnostics, unsafe))
    return format_statistics(diagnostics, unsafe)


def _report(options: Options, mode: Mode, outcome: RunOutcome, printer: Printer) -> int:
    _print_problems(options, outcome)
    for note in outcome.notes:
        printer.log(note)
    for report in outcome.reports:
        for note in report.notes:
            printer.log(f"{display_path(report.path)}: {note}")
    unsafe = outcome.unsafe_fixes
    diagnostics = outcome.diagnostics
    not_checked = len(outcome.errors)
    not_written = len(outcome.write_errors)

    if mode is Mode.FIX and outcome.mode is Mode.FIX:
        changed = outcome.changed
        printer.out("".join(r.diff() for r in changed))
        # A diff cannot show that a file could not be analysed at all; say it aside.
        for d in diagnostics:
            if d.code in (PARSE_ERROR, INTERNAL_ERROR) and not options.silent:
                where = f"{display_path(d.path)}:{position(d)}"
                _warning(f"{where}: {d.code} {d.message}")
        if not options.quiet and not options.silent:
            click.echo(diff_summary(outcome.would_fix, diagnostics, unsafe, not_checked=not_checked), err=True)
        if options.show_fixes and not options.silent:
            click.echo(fix_listing("Would fix", outcome.fixes_by_file(changed)), err=True, nl=False)
        return _exit_code(options, mode, outcome, fixed=0, pending=bool(changed))

    items = [Sourced(_shown(d, options.verbose), outcome.text_for(d)) for d in diagnostics]
    if options.show_statistics:
        printer.out(_statistics(options, diagnostics, unsafe))
    elif items or printer.machine:
        printer.out(
            render(
                options.output_format,
                items,
                unsafe=unsafe,
                checked=outcome.checked,
                style=printer.style,
                successful=not outcome.internal_error and not outcome.failed,
            )
        )
    if mode is Mode.ADD_NOQA:
        printer.summary(add_noqa_summary(outcome.noqa_added, len(diagnostics), not_checked=not_checked, not_written=not_written))
        return _exit_code(options, mode, outcome, fixed=0, pending=False)
    if options.show_fixes:
        if mode is Mode.APPLY:
            printer.note(fix_listing("Fixed", outcome.fixes_by_file(outcome.written)))
        else:
            printer.note(fix_listing("`--fix` would fix", outcome.fixable_by_file()))
    if mode is Mode.FIX:
        # `fix` with a machine format or statistics: changes pending = anything fixable.
        return _exit_code(options, mode, outcome, fixed=0, pending=outcome.fixable > 0)
    printer.summary(
        check_summary(
            diagnostics,
            fixed=outcome.fixed,
            unsafe=unsafe,
            applied=mode is Mode.APPLY,
            not_checked=not_checked,
            not_written=not_written,
        )
    )
    return _exit_code(options, mode, outcome, fixed=outcome.fixed, pending=False)


def _exit_code(options: Options, mode: Mode, outcome: RunOutcome, *, fixed: int, pending: bool) -> int:
    if outcome.internal_error:
        if not options.silent:
            _error(
                "amplint hit an internal error (AMP999); rerun with --verbose for the "
                "traceback, and please report it"
            )
        return EXIT_ERROR
    if outcome.failed:
        return EXIT_ERROR
    if options.exit_zero or mode is Mode.ADD_NOQA:
        return EXIT_OK
    if mode is Mode.FIX:
        return EXIT_FOUND if pending else EXIT_OK
    if options.exit_non_zero_on_fix and fixed:
        return EXIT_FOUND
    return EXIT_FOUND if outcome.diagnostics else EXIT_OK


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
