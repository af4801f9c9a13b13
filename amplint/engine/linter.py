"""Lint one decoded source: parse once, resolve metadata once, run every rule in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from amplint.diagnostics import Diagnostic, Location
from amplint.engine.context import FileContext
from amplint.engine.noqa import is_suppressed, noqa_lines
from amplint.engine.source import SourceFile
from amplint.rules.base import Rule

PARSE_ERROR = "AMP900"
INTERNAL_ERROR = "AMP999"

_START = Location(1, 1)


@dataclass
class LintResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    parsed: bool = True
    internal_error: bool = False


def file_diagnostic(path: str, code: str, message: str, location: Location = _START, detail: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, message=message, path=path, location=location, end_location=location, detail=detail)


def parse(path: str, text: str) -> cst.Module | Diagnostic:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        location = Location(max(error.raw_line, 1), max(error.raw_column, 0) + 1)
        message = f"SyntaxError: {error.message}"
        return file_diagnostic(path, PARSE_ERROR, f"cannot parse: {message}", location)
    except RecursionError:
        return file_diagnostic(path, PARSE_ERROR, "cannot parse: expressions nested too deeply to analyse")
    except MemoryError:
        return file_diagnostic(path, PARSE_ERROR, "cannot parse: out of memory")
    except Exception as error:  # noqa: BLE001 - the parser's own bug is the user's AMP900, reported
        return file_diagnostic(path, PARSE_ERROR, f"cannot parse: {type(error).__name__}: {error}")


def lint_module(path: str, source: SourceFile, module: cst.Module, rules: Sequence[type[Rule]]) -> LintResult:
    result = LintResult()
    if not rules:
        return result
    context = FileContext(path, source, module)
    instances = [rule(context) for rule in rules]
    try:
        context.wrapper.visit_batched(instances)
    except RecursionError:
        result.diagnostics.append(
            file_diagnostic(path, PARSE_ERROR, "cannot analyse: expressions nested too deeply")
        )
        return result
    except Exception as error:  # noqa: BLE001 - metadata providers may fail on odd code
        import traceback

        result.internal_error = True
        result.diagnostics.append(
            file_diagnostic(
                path,
                INTERNAL_ERROR,
                f"internal error while analysing the file: {type(error).__name__}: {error}",
                detail=traceback.format_exc(),
            )
        )
        return result
    for instance in instances:
        if instance.failure is not None:
            result.internal_error = True
            result.diagnostics.append(
                file_diagnostic(
                    path,
                    INTERNAL_ERROR,
                    f"internal error in {instance.code} ({instance.name}): {instance.failure_summary}",
                    detail=instance.failure,
                )
            )
            continue
        for report in instance.reports:
            start, end = context.span(report.node)
            result.diagnostics.append(
                Diagnostic(
                    code=instance.code,
                    message=report.message,
                    path=path,
                    location=context.location(start),
                    end_location=context.location(end),
                    fix=report.fix,
                )
            )
    return result


def apply_noqa(diagnostics: list[Diagnostic], text: str) -> list[Diagnostic]:
    if not any(diagnostic.code != INTERNAL_ERROR for diagnostic in diagnostics):
        return diagnostics
    table = noqa_lines(text)
    return [
        diagnostic
        for diagnostic in diagnostics
        if diagnostic.code == INTERNAL_ERROR or not is_suppressed(diagnostic.code, diagnostic.location.row, table)
    ]


def lint_source(path: str, source: SourceFile, rules: Sequence[type[Rule]]) -> LintResult:
    parsed = parse(path, source.text)
    if isinstance(parsed, Diagnostic):
        return LintResult(diagnostics=[parsed], parsed=False)
    result = lint_module(path, source, parsed, rules)
    result.diagnostics = sorted(apply_noqa(result.diagnostics, source.text), key=lambda d: d.sort_key)
    return result
