"""Apply fixes as text edits, pass after pass, until the source stops changing.

Each pass lints, keeps the fixes the user allowed, and applies every group of fixes
whose edits do not overlap edits already taken (identical edits, such as the same
``import torch`` line from several fixes, are applied once). Overlapping fixes wait for
the next pass, which lints the new text afresh. A pass whose result does not parse is
retried group by group, and groups that break the file are dropped and reported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from amplint.diagnostics import Diagnostic, Edit, Fix
from amplint.engine.linter import LintResult, lint_source
from amplint.engine.source import SourceFile
from amplint.rules.base import Rule

MAX_PASSES = 16


@dataclass(frozen=True)
class FixFailure:
    code: str
    row: int
    column: int
    message: str


@dataclass
class FixOutcome:
    text: str
    applied: dict[str, int] = field(default_factory=dict)  # code → number of fixes applied
    remaining: LintResult = field(default_factory=LintResult)
    failures: list[FixFailure] = field(default_factory=list)
    converged: bool = True

    @property
    def fix_count(self) -> int:
        return sum(self.applied.values())


def _conflicts(edit: Edit, taken: Sequence[Edit]) -> bool:
    for other in taken:
        if edit == other:
            continue
        if edit.start == edit.end and other.start == other.end:
            if edit.start == other.start:
                return True  # two different insertions at one point: order would be a guess
            continue
        if edit.start < other.end and other.start < edit.end:
            return True
        # An insertion strictly inside a replaced range is ambiguous too.
        if edit.start == edit.end and other.start < edit.start < other.end:
            return True
        if other.start == other.end and edit.start < other.start < edit.end:
            return True
    return False


def _groups(diagnostics: Sequence[Diagnostic]) -> list[list[Diagnostic]]:
    by_key: dict[str, list[Diagnostic]] = {}
    for index, diagnostic in enumerate(diagnostics):
        assert diagnostic.fix is not None
        key = diagnostic.fix.isolation or f"#{index}"
        by_key.setdefault(key, []).append(diagnostic)
    groups = list(by_key.values())
    groups.sort(key=lambda group: min(edit.start for d in group for edit in d.fix.edits))  # type: ignore[union-attr]
    return groups


def select_edits(diagnostics: Sequence[Diagnostic]) -> tuple[list[Edit], list[list[Diagnostic]]]:
    taken: list[Edit] = []
    applied: list[list[Diagnostic]] = []
    for group in _groups(diagnostics):
        edits: list[Edit] = []
        for diagnostic in group:
            fix: Fix = diagnostic.fix  # type: ignore[assignment]
            for edit in fix.edits:
                if edit not in edits:
                    edits.append(edit)
        if any(_conflicts(edit, edits) for edit in edits) or any(_conflicts(edit, taken) for edit in edits):
            continue
        taken.extend(edit for edit in edits if edit not in taken)
        applied.append(group)
    return taken, applied


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    pieces: list[str] = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        pieces.append(text[cursor : edit.start])
        pieces.append(edit.content)
        cursor = max(cursor, edit.end)
    pieces.append(text[cursor:])
    return "".join(pieces)


def parses(text: str, check_ast: bool) -> bool:
    try:
        cst.parse_module(text)
        if check_ast:
            ast.parse(text)
    except (SyntaxError, cst.ParserSyntaxError, RecursionError, ValueError):
        return False
    return True


def _compiles(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, RecursionError, ValueError):
        return False
    return True


def fix_source(
    path: str,
    source: SourceFile,
    rules: Sequence[type[Rule]],
    *,
    allow: Callable[[Diagnostic], bool],
    max_passes: int = MAX_PASSES,
) -> FixOutcome:
    """Fix ``source`` with every allowed fix; ``allow`` decides per diagnostic."""
    check_ast = _compiles(source.text)
    outcome = FixOutcome(text=source.text)
    rejected: set[tuple[str, str, tuple[Edit, ...]]] = set()
    current = source
    for _ in range(max_passes):
        result = lint_source(path, current, rules)
        outcome.remaining = result
        candidates = [
            d
            for d in result.diagnostics
            if d.fix is not None and allow(d) and (d.code, d.message, d.fix.edits) not in rejected
        ]
        if not candidates or not result.parsed:
            return outcome
        edits, groups = select_edits(candidates)
        new_text = apply_edits(current.text, edits)
        if not parses(new_text, check_ast):
            new_text, groups = _apply_one_by_one(current.text, groups, check_ast, outcome, rejected)
        if new_text == current.text:
            return outcome
        for group in groups:
            for diagnostic in group:
                outcome.applied[diagnostic.code] = outcome.applied.get(diagnostic.code, 0) + 1
        current = SourceFile(new_text, current.encoding, current.bom, current.newline)
        outcome.text = new_text
    outcome.remaining = lint_source(path, current, rules)
    outcome.converged = not any(d.fix is not None and allow(d) for d in outcome.remaining.diagnostics)
    return outcome


def _apply_one_by_one(
    text: str,
    groups: list[list[Diagnostic]],
    check_ast: bool,
    outcome: FixOutcome,
    rejected: set[tuple[str, str, tuple[Edit, ...]]],
) -> tuple[str, list[list[Diagnostic]]]:
    kept: list[list[Diagnostic]] = []
    kept_edits: list[Edit] = []
    for group in groups:
        group_edits = [edit for d in group for edit in d.fix.edits]  # type: ignore[union-attr]
        trial_edits = kept_edits + [edit for edit in group_edits if edit not in kept_edits]
        if parses(apply_edits(text, trial_edits), check_ast):
            kept.append(group)
            kept_edits = trial_edits
            continue
        for diagnostic in group:
            rejected.add((diagnostic.code, diagnostic.message, diagnostic.fix.edits))  # type: ignore[union-attr]
            outcome.failures.append(
                FixFailure(
                    diagnostic.code,
                    diagnostic.location.row,
                    diagnostic.location.column,
                    f"fix '{diagnostic.fix.message}' would produce invalid code; skipped",  # type: ignore[union-attr]
                )
            )
    return apply_edits(text, kept_edits), kept
