"""The ``amplint`` command: a thin click layer over the engine, modelled on Ruff's CLI.

Exit codes: 0 nothing found; 1 diagnostics found (for ``fix`` without ``--apply``:
changes pending); 2 usage, configuration or internal error; 130 interrupted.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from amplint import __version__
from amplint.diagnostics import Diagnostic
from amplint.docs import fix_label, render_rule_page
from amplint.engine.config import ConfigError, Settings, resolve_settings, validate_selectors
from amplint.engine.discovery import discover
from amplint.engine.linter import INTERNAL_ERROR
from amplint.engine.runner import (
    FileReport,
    Job,
    Mode,
    default_jobs,
    process_source,
    run,
    write_atomically,
)
from amplint.output import FORMATS, MACHINE_FORMATS, Sourced, display_path, render, statistics
from amplint.rules import all_rules, rule_by_code

EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _error(message: str) -> None:
    click.echo(f"{click.style('error', fg='red', bold=True)}: {message}", err=True)


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
    no_cache: bool
    cache_dir: str | None
    jobs: int | None
    stdin_filename: str | None
    output_format: str
    exit_zero: bool
    exit_non_zero_on_fix: bool
    show_statistics: bool
    quiet: bool
    verbose: bool
    unsafe_fixes: bool | None
    show_fixes: bool
    extra: dict[str, Any] = field(default_factory=dict)


def _common_options(function: Any) -> Any:
    decorators = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option(
            "--select",
            multiple=True,
            metavar="CODES",
            help="Rules to enable (codes, prefixes, ALL); replaces the configured set.",
        ),
        click.option(
            "--extend-select", multiple=True, metavar="CODES", help="Rules to enable in addition."
        ),
        click.option("--ignore", multiple=True, metavar="CODES", help="Rules to disable."),
        click.option(
            "--exclude",
            multiple=True,
            metavar="PATTERNS",
            help="Replace the default exclusions (gitignore-style patterns).",
        ),
        click.option(
            "--extend-exclude",
            multiple=True,
            metavar="PATTERNS",
            help="Exclude these patterns too.",
        ),
        click.option(
            "--force-exclude",
            is_flag=True,
            help="Apply exclusions even to files named on the command line.",
        ),
        click.option(
            "--respect-gitignore/--no-respect-gitignore",
            default=None,
            help="Honour .gitignore files (default: yes).",
        ),
        click.option(
            "--config",
            type=click.Path(dir_okay=False),
            help="Configuration file (pyproject.toml or amplint.toml).",
        ),
        click.option("--no-cache", is_flag=True, help="Do not read or write the results cache."),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False),
            help="Cache directory (default .amplint_cache).",
        ),
        click.option(
            "-j",
            "--jobs",
            type=click.IntRange(min=1),
            help="Worker processes (default: the number of cores).",
        ),
        click.option(
            "--stdin-filename",
            metavar="PATH",
            help="Name to report for source read from stdin (path '-').",
        ),
        click.option(
            "--output-format",
            type=click.Choice(FORMATS),
            envvar="AMPLINT_OUTPUT_FORMAT",
            default="full",
            show_default=True,
        ),
        click.option(
            "-e", "--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found."
        ),
        click.option(
            "--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when any fix was applied."
        ),
        click.option(
            "--statistics",
            "show_statistics",
            is_flag=True,
            help="Show counts per rule instead of each diagnostic.",
        ),
        click.option("-q", "--quiet", is_flag=True, help="Print diagnostics only, no summary."),
        click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors."),
        click.option(
            "--unsafe-fixes/--no-unsafe-fixes",
            default=None,
            help="Also apply (or offer) unsafe fixes.",
        ),
        click.option("--show-fixes", is_flag=True, help="List the fixes applied, per file."),
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
    "--diff", "show_diff", is_flag=True, help="Print the diff of the fixes instead of writing them."
)
def check(apply_fixes: bool, show_diff: bool, **kwargs: Any) -> None:
    """Report AMP mistakes in PATHS (default: the current directory)."""
    options = Options(**kwargs)
    if apply_fixes and show_diff:
        raise click.UsageError("--fix and --diff are mutually exclusive")
    mode = "apply" if apply_fixes else "diff" if show_diff else "check"
    sys.exit(_run(options, mode))


@cli.command()
@_common_options
@click.option(
    "--apply", "apply_fixes", is_flag=True, help="Write the fixes (default: print their diff)."
)
def fix(apply_fixes: bool, **kwargs: Any) -> None:
    """Fix AMP mistakes in PATHS: print the diff, or write it with --apply."""
    sys.exit(_run(Options(**kwargs), "apply" if apply_fixes else "diff"))


@cli.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's page.")
def rule(code: str | None, show_all: bool) -> None:
    """Print the page of rule CODE (or of every rule with --all)."""
    if show_all:
        click.echo("\n\n".join(render_rule_page(r) for r in all_rules()), nl=False)
        return
    if code is None:
        raise click.UsageError("give a rule code, or --all")
    found = rule_by_code(code)
    if found is None:
        _error(f"unknown rule {code!r}; `amplint rules` lists them")
        sys.exit(EXIT_ERROR)
    click.echo(render_rule_page(found), nl=False)


@cli.command("rules")
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def list_rules(output_format: str) -> None:
    """List every rule: code, name, fix availability, default."""
    rules = all_rules()
    if output_format == "json":
        import json

        entries = [
            {
                "code": r.code,
                "name": r.name,
                "summary": r.summary,
                "fix": r.fix_availability.value,
                "fix_applicability": r.fix_applicability.value if r.fix_applicability else None,
                "default": r.default_enabled,
            }
            for r in rules
        ]
        click.echo(json.dumps(entries, indent=2))
        return
    width = max(len(r.name) for r in rules)
    for r in rules:
        default = "" if r.default_enabled else "  (off by default)"
        click.echo(f"{r.code}  {r.name:<{width}}  {fix_label(r)}{default}")


@cli.command()
def doctor() -> None:
    """Show what this machine supports for mixed precision (needs torch)."""
    try:
        from amplint.runtime.doctor import main as doctor_main
    except ImportError as error:
        _error(f"amplint.runtime is unavailable: {error}")
        sys.exit(EXIT_ERROR)
    sys.exit(doctor_main())


@cli.command()
def version() -> None:
    """Print amplint's version."""
    click.echo(f"amplint {__version__}")


# -- running ---------------------------------------------------------------------------------


def _settings(options: Options) -> Settings:
    start = Path(options.paths[0]) if options.paths and options.paths[0] != "-" else Path.cwd()
    if options.stdin_filename and (not options.paths or options.paths == ("-",)):
        start = (
            Path(options.stdin_filename).parent
            if Path(options.stdin_filename).parent.exists()
            else Path.cwd()
        )
    if not start.exists():
        start = Path.cwd()
    settings = resolve_settings(start, Path(options.config) if options.config else None)
    select = _split(options.select) or None
    extend_select = settings.extend_select + _split(options.extend_select)
    ignore = settings.ignore + _split(options.ignore)
    validate_selectors((*(select or ()), *extend_select, *ignore))
    overrides: dict[str, Any] = {"extend_select": extend_select, "ignore": ignore}
    if select is not None:
        overrides["select"] = select
    if options.exclude:
        overrides["exclude"] = _split(options.exclude)
    if options.extend_exclude:
        overrides["extend_exclude"] = settings.extend_exclude + _split(options.extend_exclude)
    if options.force_exclude:
        overrides["force_exclude"] = True
    if options.respect_gitignore is not None:
        overrides["respect_gitignore"] = options.respect_gitignore
    if options.unsafe_fixes is not None:
        overrides["unsafe_fixes"] = options.unsafe_fixes
    if options.cache_dir:
        overrides["cache_dir"] = options.cache_dir
    return settings.with_overrides(**overrides)


def _run(options: Options, mode: str) -> int:
    try:
        settings = _settings(options)
    except ConfigError as error:
        _error(str(error))
        return EXIT_ERROR
    try:
        if options.paths == ("-",) or (options.stdin_filename and not options.paths):
            return _run_stdin(options, settings, mode)
        return _run_paths(options, settings, mode)
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED


def _job(settings: Settings, mode: str) -> Job:
    return Job(
        Mode.CHECK if mode == "check" else Mode.FIX, settings, unsafe_fixes=settings.unsafe_fixes
    )


def _run_stdin(options: Options, settings: Settings, mode: str) -> int:
    name = options.stdin_filename or "-"
    data = sys.stdin.buffer.read()
    report = process_source(name, data, _job(settings, mode))
    if mode == "check":
        return _finish(options, settings, [report], [], mode)
    # Like Ruff: the fixed source goes to stdout, the remaining diagnostics to stderr.
    sys.stdout.buffer.write(report.fixed if report.fixed is not None else data)
    sys.stdout.flush()
    items = [
        Sourced(d, report.new_text) for d in sorted(report.diagnostics, key=lambda d: d.sort_key)
    ]
    if items and not options.quiet:
        click.echo(render("concise", items, unsafe=settings.unsafe_fixes), err=True, nl=False)
    if any(d.code == INTERNAL_ERROR for d in report.diagnostics):
        return EXIT_ERROR
    if options.exit_zero:
        return EXIT_OK
    if options.exit_non_zero_on_fix and report.fixed is not None:
        return EXIT_FOUND
    return EXIT_FOUND if report.diagnostics else EXIT_OK


def _run_paths(options: Options, settings: Settings, mode: str) -> int:
    paths = options.paths or (".",)
    found = discover(paths, settings)
    for message in found.errors:
        _error(message)
    files = [str(path) for path in found.files]
    cache_dir = None if options.no_cache else _cache_path(settings)
    reports: list[FileReport] = []
    write_errors: list[str] = []
    for report in run(
        files, _job(settings, mode), jobs=options.jobs or default_jobs(), cache_dir=cache_dir
    ):
        reports.append(report)
        if mode == "apply" and report.fixed is not None and report.original is not None:
            problem = write_atomically(report.path, report.original, report.fixed)
            if problem is None:
                report.written = True
            else:
                report.write_error = problem
                write_errors.append(f"{display_path(report.path)}: {problem}")
    for message in write_errors:
        _error(message)
    status = _finish(options, settings, reports, files, mode)
    if found.errors or write_errors:
        return EXIT_ERROR
    return status


def _cache_path(settings: Settings) -> str:
    path = Path(settings.cache_dir)
    return str(path if path.is_absolute() else Path(settings.project_root) / path)


def _finish(
    options: Options,
    settings: Settings,
    reports: Sequence[FileReport],
    files: Sequence[str],
    mode: str,
) -> int:
    unsafe = settings.unsafe_fixes
    machine = options.output_format in MACHINE_FORMATS
    diagnostics: list[Diagnostic] = sorted(
        (d for r in reports for d in r.diagnostics), key=lambda d: d.sort_key
    )
    texts = {r.path: r.new_text if r.written or mode == "diff" else r.old_text for r in reports}
    for report in reports:
        for failure in report.fix_failures:
            _error(f"{display_path(report.path)}:{failure.row}:{failure.column}: {failure.message}")

    if mode == "diff":
        diffs = [r.diff() for r in reports if r.fixed is not None]
        if not machine:
            for text in diffs:
                click.echo(text, nl=False)
        fixed_count = sum(sum(r.fixes_applied.values()) for r in reports if r.fixed is not None)
        if not options.quiet and not machine:
            if fixed_count:
                click.echo(
                    f"\nWould fix {fixed_count} error{'s' * (fixed_count != 1)} in {len(diffs)} file{'s' * (len(diffs) != 1)}.",
                    err=True,
                )
            else:
                click.echo("No fixes available.", err=True)
        if options.show_fixes:
            _show_fixes(reports, would=True)
        if machine:
            click.echo(
                render(
                    options.output_format,
                    [Sourced(d, texts.get(d.path, "")) for d in diagnostics],
                    unsafe=unsafe,
                    checked=files,
                ),
                nl=False,
            )
        if any(d.code == INTERNAL_ERROR for d in diagnostics):
            return EXIT_ERROR
        if options.exit_zero:
            return EXIT_OK
        return EXIT_FOUND if diffs else EXIT_OK

    items = [Sourced(d, texts.get(d.path, "")) for d in diagnostics]
    if not options.verbose:
        items = [Sourced(_without_detail(item.diagnostic), item.text) for item in items]
    if options.show_statistics and not machine:
        click.echo(statistics(diagnostics, unsafe), nl=False)
    elif items or machine:
        click.echo(render(options.output_format, items, unsafe=unsafe, checked=files), nl=False)

    fixed_total = sum(sum(r.fixes_applied.values()) for r in reports if r.written)
    if options.show_fixes and mode == "apply":
        _show_fixes([r for r in reports if r.written], would=False)
    if not options.quiet and not machine:
        _summary(diagnostics, fixed_total, unsafe, mode)

    if any(d.code == INTERNAL_ERROR for d in diagnostics):
        return EXIT_ERROR
    if options.exit_zero:
        return EXIT_OK
    if options.exit_non_zero_on_fix and fixed_total:
        return EXIT_FOUND
    return EXIT_FOUND if diagnostics else EXIT_OK


def _without_detail(diagnostic: Diagnostic) -> Diagnostic:
    if diagnostic.detail is None:
        return diagnostic
    from dataclasses import replace

    return replace(diagnostic, detail=None)


def _show_fixes(reports: Sequence[FileReport], would: bool) -> None:
    changed = [r for r in reports if r.fixes_applied and (r.fixed is not None)]
    if not changed:
        return
    click.echo(("Would fix" if would else "Fixed") + " errors:", err=True)
    for report in changed:
        click.echo(f"- {display_path(report.path)}:", err=True)
        for code, count in sorted(report.fixes_applied.items()):
            found = rule_by_code(code)
            click.echo(f"    {count} × {code} ({found.name if found else code})", err=True)  # noqa: RUF001 - Ruff's own sign


def _summary(diagnostics: Sequence[Diagnostic], fixed: int, unsafe: bool, mode: str) -> None:
    count = len(diagnostics)
    if count == 0 and not fixed:
        click.echo("All checks passed!")
        return
    if mode == "apply":
        click.echo(
            f"Found {count + fixed} error{'s' * (count + fixed != 1)} ({fixed} fixed, {count} remaining)."
        )
    else:
        click.echo(f"Found {count} error{'s' * (count != 1)}.")
    safe = sum(1 for d in diagnostics if d.fixable_with(False))
    hidden = sum(1 for d in diagnostics if d.fixable_with(True)) - safe
    fixable = safe + (hidden if unsafe else 0)
    if fixable:
        click.echo(f"[*] {fixable} fixable with the `--fix` option.")
    if hidden and not unsafe:
        click.echo(
            f"{hidden} hidden fix{'es' * (hidden != 1)} can be enabled with the `--unsafe-fixes` option."
        )
    by_code = Counter(d.code for d in diagnostics)
    if by_code.get(INTERNAL_ERROR):
        click.echo(
            "amplint hit an internal error; rerun with --verbose and please report it.", err=True
        )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="amplint",
            standalone_mode=False,
        )
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
    except click.UsageError as error:
        error.show()
        return EXIT_ERROR
    except click.ClickException as error:
        error.show()
        return EXIT_ERROR
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_ERROR)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
