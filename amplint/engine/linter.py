"""Lint one decoded source: parse once, build each requested context once, run every
rule in one read-only traversal, and turn the rules' reports into diagnostics.

Nothing a file contains may crash the run. Parsing and the traversal run on a thread
with a large stack (``deep.py``); a rule that raises becomes an AMP999 diagnostic for
that file, naming the rule, and the other rules' findings are kept. Rules see libcst's
rendering of the module; their positions and edits are mapped back onto the real text
(``alignment.py``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import libcst as cst

from amplint.diagnostics import Diagnostic, Edit, Fix, Location, file_diagnostic
from amplint.engine.alignment import Alignment, Locator
from amplint.engine.catalog import INTERNAL_ERROR, PARSE_ERROR
from amplint.engine.context import SourceContext, render
from amplint.engine.deep import deep_recursion, run_deep
from amplint.engine.index import ProjectIndex
from amplint.engine.noqa import apply_noqa
from amplint.engine.parse import parse_source
from amplint.engine.project import ProjectFacts
from amplint.engine.rule import Rule, RuleType
from amplint.engine.source import SourceFile
from amplint.engine.walk import traverse


@dataclass
class LintResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    parsed: bool = True
    internal_error: bool = False
    # The running CPython compiles the source; fixes must then keep it compiling.
    compiles: bool = False
    # Why fixes cannot be applied to this file, when they cannot.
    unfixable: str | None = None
    # Why the file was not checked although it is valid Python (a warning, not a finding).
    skipped: str | None = None
    # Findings a `# noqa` comment silenced (AMP901 reports the comments that silence nothing).
    suppressed: list[Diagnostic] = field(default_factory=list)



def _rule_failure(path: str, rule: RuleType, summary: str, detail: str | None) -> Diagnostic:
    return file_diagnostic(path, INTERNAL_ERROR, f"internal error in {rule.code} ({rule.name}): {summary}", detail=detail)


def _valid_edits(fix: object, length: int) -> bool:
    if not isinstance(fix, Fix) or not fix.edits:
        return False
    return all(
        isinstance(edit, Edit) and isinstance(edit.content, str) and 0 <= edit.start <= edit.end <= length
        for edit in fix.edits
    )


def lint_module(
    path: str,
    source: SourceFile,
    module: cst.Module,
    rules: Sequence[RuleType],
    *,
    compiles: bool = False,
    project: ProjectFacts | None = None,
    index: ProjectIndex | None = None,
) -> LintResult:
    """Run ``rules`` over an already parsed ``module`` of ``source`` (call on a deep thread)."""
    result = LintResult(compiles=compiles)
    if not rules:
        return result
    try:
        with deep_recursion():
            _run_rules(path, source, module, rules, result, project, index)
    except RecursionError:
        result.diagnostics = [file_diagnostic(path, PARSE_ERROR, "cannot analyse: expressions nested too deeply")]
        result.parsed = False
        result.internal_error = False
    return result


def _run_rules(
    path: str,
    source: SourceFile,
    module: cst.Module,
    rules: Sequence[RuleType],
    result: LintResult,
    project: ProjectFacts | None,
    index: ProjectIndex | None,
) -> None:
    code = render(module)
    alignment: Alignment | None = None
    if code != source.text:
        alignment = Alignment.between(code, source.text)
        # Rules see libcst's rendering, so that every position they compute is consistent.
        seen = source.with_text(code)
    else:
        seen = source
    # One context per type the rules ask for, shared by them; the first is the engine's.
    contexts: dict[type[SourceContext], SourceContext] = {}

    def context_for(wanted: type[SourceContext]) -> SourceContext:
        if wanted not in contexts:
            contexts[wanted] = wanted(path, seen, module, project, index)
        return contexts[wanted]

    context = context_for(SourceContext)
    locate = context.location if code == source.text else Locator(source.text)
    exact = code == source.text or alignment is not None

    instances: list[Rule[Any]] = []
    for rule in rules:
        try:
            instances.append(rule(context_for(rule.context_type)))
        except Exception as error:  # noqa: BLE001 - a rule's bug must not stop the run
            result.internal_error = True
            detail = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            result.diagnostics.append(_rule_failure(path, rule, f"{type(error).__name__}: {error}", detail))
    try:
        traverse(module, _callbacks(instances, "visit"), _callbacks(instances, "leave"))
    except RecursionError:
        raise
    except Exception as error:  # noqa: BLE001 - metadata providers may fail on odd code
        result.internal_error = True
        result.diagnostics.append(
            file_diagnostic(
                path,
                INTERNAL_ERROR,
                f"internal error while analysing the file: {type(error).__name__}: {error}",
                detail=traceback.format_exc(),
            )
        )
        return

    for instance in instances:
        rule = type(instance)
        if instance.failure is not None:
            result.internal_error = True
            result.diagnostics.append(_rule_failure(path, rule, instance.failure_summary, instance.failure))
            continue
        try:
            found = _diagnostics_of(path, instance, context, alignment, locate, len(code), exact)
        except Exception as error:  # noqa: BLE001 - e.g. a report on a node not in this module
            result.internal_error = True
            detail = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            result.diagnostics.append(_rule_failure(path, rule, f"{type(error).__name__}: {error}", detail))
            continue
        result.diagnostics.extend(found)
        if not exact and any(report.fix is not None for report in instance.reports):
            result.unfixable = "libcst does not reproduce this file exactly; its fixes are not applied"


def _callbacks(instances: Sequence[Rule[Any]], prefix: str) -> Callable[[type[cst.CSTNode]], list[Callable[[cst.CSTNode], None]]]:
    def for_type(node_type: type[cst.CSTNode]) -> list[Callable[[cst.CSTNode], None]]:
        found = (instance.callback(prefix, node_type) for instance in instances)
        return [callback for callback in found if callback is not None]

    return for_type


def _diagnostics_of(
    path: str,
    instance: Rule[Any],
    context: SourceContext,
    alignment: Alignment | None,
    locate: Callable[[int], Location],
    length: int,
    fixable: bool,
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for report in instance.reports:
        if context.never_runs(report.node):
            continue
        start, end = context.span(report.node)
        fix = report.fix
        if fix is not None:
            if not _valid_edits(fix, length):
                raise ValueError(f"fix {getattr(fix, 'message', fix)!r} has edits outside the file or no edits")
            if alignment is not None:
                fix = _mapped_fix(fix, alignment, locate)
            if not fixable:
                fix = None
        if alignment is not None:
            start, end = alignment.span(start, end)
        found.append(
            Diagnostic(
                code=instance.code,
                message=report.message,
                path=path,
                location=locate(start),
                end_location=locate(end),
                fix=fix,
            )
        )
    return found


def _mapped_fix(fix: Fix, alignment: Alignment, locate: Callable[[int], Location]) -> Fix:
    edits = []
    for edit in fix.edits:
        start, end = alignment.span(edit.start, edit.end)
        edits.append(Edit(start, end, edit.content, locate(start), locate(end)))
    return Fix(fix.message, tuple(edits), fix.applicability, fix.isolation)



def _lint(
    path: str, source: SourceFile, rules: Sequence[RuleType], project: ProjectFacts | None, index: ProjectIndex | None
) -> LintResult:
    parsed = parse_source(path, source.text)
    if parsed.module is None and parsed.skipped is not None:
        result = _lint_with_tabs_expanded(path, source, rules, project, index)
        if result is not None:
            return _after_noqa(result, source.text)
    if parsed.module is None:
        errors = [parsed.error] if parsed.error is not None else []
        return LintResult(diagnostics=errors, parsed=False, compiles=parsed.compiles, skipped=parsed.skipped)
    result = lint_module(path, source, parsed.module, rules, compiles=parsed.compiles, project=project, index=index)
    return _after_noqa(result, source.text)


def _after_noqa(result: LintResult, text: str) -> LintResult:
    kept = apply_noqa(result.diagnostics, text, never={INTERNAL_ERROR})
    silenced = {id(diagnostic) for diagnostic in result.diagnostics} - {id(diagnostic) for diagnostic in kept}
    result.suppressed = [diagnostic for diagnostic in result.diagnostics if id(diagnostic) in silenced]
    result.diagnostics = sorted(kept, key=lambda d: d.sort_key)
    return result


def _lint_with_tabs_expanded(
    path: str, source: SourceFile, rules: Sequence[RuleType], project: ProjectFacts | None, index: ProjectIndex | None
) -> LintResult | None:
    """Valid Python whose indentation mixes tabs and spaces in a way libcst's tokenizer
    refuses (MegaPortrait-hack's `rome_losses.py`): lint it with the tabs of its indentation
    expanded as CPython reads them, report at the file's own columns, and offer no fixes
    (they would be written against text the file does not hold)."""
    expanded = _expand_indentation_tabs(source.text)
    if expanded == source.text:
        return None
    parsed = parse_source(path, expanded)
    if parsed.module is None:
        return None
    result = lint_module(
        path, replace(source, text=expanded), parsed.module, rules, compiles=parsed.compiles, project=project, index=index
    )
    original = source.text.splitlines()
    result.diagnostics = [
        replace(
            diagnostic,
            location=_unexpanded(diagnostic.location, original),
            end_location=_unexpanded(diagnostic.end_location, original),
            fix=None,
        )
        for diagnostic in result.diagnostics
    ]
    result.skipped = "indentation mixes tabs and spaces, which libcst cannot parse: checked with the tabs expanded; no fixes offered"
    return result


def _expand_indentation_tabs(text: str) -> str:
    """``text`` with each line's leading tabs expanded to the next multiple of 8 columns,
    as CPython's tokenizer counts them; the rest of every line as it is."""
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        indent = _indentation(line)
        if "\t" in indent:
            lines[number] = indent.expandtabs(8) + line[len(indent) :]
    return "".join(lines)


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _unexpanded(location: Location, original: list[str]) -> Location:
    """The column in the file as written of a column in its tab-expanded text."""
    if not 1 <= location.row <= len(original):
        return location
    indent = _indentation(original[location.row - 1])
    if "\t" not in indent:
        return location
    width = len(indent.expandtabs(8))
    if location.column - 1 >= width:
        return Location(location.row, location.column - width + len(indent))
    return Location(location.row, min(location.column, len(indent) + 1))


def lint_source(
    path: str,
    source: SourceFile,
    rules: Sequence[RuleType],
    project: ProjectFacts | None = None,
    index: ProjectIndex | None = None,
) -> LintResult:
    """Parse and lint one source; never raises for anything the source contains."""
    return run_deep(_lint, path, source, rules, project, index)

