"""Apply fixes as text edits, pass after pass, until the source stops changing.

Each pass lints the current text afresh, with the pre-filter recomputed on it (a fix may
introduce text another rule reacts to, such as a ``"cuda"`` argument), keeps the fixes the user allowed, and applies every group of fixes
whose edits do not overlap edits already taken (identical edits, such as the same
``import torch`` line from several fixes, are applied once). Overlapping fixes wait for
the next pass, which lints the new text afresh. A pass whose result does not parse (or
no longer compiles, for a file CPython compiled) is retried group by group, and the
groups that break the file are dropped and reported. A fix whose own edits overlap
each other is a bug in its rule: it is dropped and reported too. When the passes run
out before the fixes stop coming, that is reported, because fixing again would change
the file again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from amplint.diagnostics import Diagnostic, Edit, Fix
from amplint.engine.deep import run_deep
from amplint.engine.index import ProjectIndex
from amplint.engine.linter import LintResult, lint_source
from amplint.engine.parse import cpython_compiles
from amplint.engine.prefilter import rules_for
from amplint.engine.project import ProjectFacts
from amplint.engine.rule import RuleType
from amplint.engine.source import SourceFile

MAX_PASSES = 16


@dataclass(frozen=True)
class FixFailure:
    code: str
    row: int
    column: int
    message: str
    # The notebook cell ``row`` counts in, once placed there (None: a .py file, or the
    # whole notebook).
    cell: int | None = None


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

    def fail(self, diagnostic: Diagnostic, message: str) -> None:
        failure = FixFailure(diagnostic.code, diagnostic.location.row, diagnostic.location.column, message)
        if failure not in self.failures:
            self.failures.append(failure)


def _conflicts(edit: Edit, taken: Sequence[Edit]) -> bool:
    for other in taken:
        if edit == other or edit is other:
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


def _fix(diagnostic: Diagnostic) -> Fix:
    assert diagnostic.fix is not None
    return diagnostic.fix


def _groups(diagnostics: Sequence[Diagnostic]) -> list[list[Diagnostic]]:
    by_key: dict[str, list[Diagnostic]] = {}
    for index, diagnostic in enumerate(diagnostics):
        key = _fix(diagnostic).isolation or f"#{index}"
        by_key.setdefault(key, []).append(diagnostic)
    groups = list(by_key.values())
    groups.sort(key=lambda group: min(edit.start for d in group for edit in _fix(d).edits))
    return groups


def _group_edits(group: Sequence[Diagnostic]) -> list[Edit]:
    edits: list[Edit] = []
    for diagnostic in group:
        for edit in _fix(diagnostic).edits:
            if edit not in edits:
                edits.append(edit)
    return edits


def _self_conflicting(group: Sequence[Diagnostic]) -> bool:
    edits = _group_edits(group)
    return any(_conflicts(edit, edits) for edit in edits)


def select_edits(diagnostics: Sequence[Diagnostic]) -> tuple[list[Edit], list[list[Diagnostic]]]:
    """The edits of every group that fits beside the groups before it, and those groups."""
    taken: list[Edit] = []
    applied: list[list[Diagnostic]] = []
    for group in _groups(diagnostics):
        edits = _group_edits(group)
        if any(_conflicts(edit, edits) for edit in edits) or any(_conflicts(edit, taken) for edit in edits):
            continue
        taken.extend(edit for edit in edits if edit not in taken)
        applied.append(group)
    return taken, applied


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    pieces: list[str] = []
    cursor = 0
    for edit in sorted(set(edits), key=lambda e: (e.start, e.end)):
        pieces.append(text[cursor : edit.start])
        pieces.append(edit.content)
        cursor = max(cursor, edit.end)
    pieces.append(text[cursor:])
    return "".join(pieces)


def parses(text: str, check_ast: bool) -> bool:
    """Does ``text`` parse with libcst (and compile with CPython, if ``check_ast``)?"""
    return bool(run_deep(_parses, text, check_ast))


def _parses(text: str, check_ast: bool) -> bool:
    if check_ast and cpython_compiles(text) is not None:
        return False
    try:
        cst.parse_module(text)
    except Exception:  # noqa: BLE001 - whatever the reason, this text is not written
        return False
    return True


def _key(diagnostic: Diagnostic, text: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A fix's identity that survives other fixes shifting it: what it replaces, with what."""
    edits = tuple((text[edit.start : edit.end], edit.content) for edit in _fix(diagnostic).edits)
    return diagnostic.code, _fix(diagnostic).message, edits


def _lint_pass(
    path: str, source: SourceFile, rules: Sequence[RuleType], project: ProjectFacts | None, index: ProjectIndex | None
) -> LintResult:
    """Lint ``source`` with the rules whose trigger words its current text contains."""
    active = rules_for(source.text, rules)
    return lint_source(path, source, active, project, index) if active else LintResult()


def fix_source(
    path: str,
    source: SourceFile,
    rules: Sequence[RuleType],
    *,
    allow: Callable[[Diagnostic], bool],
    max_passes: int = MAX_PASSES,
    project: ProjectFacts | None = None,
    index: ProjectIndex | None = None,
) -> FixOutcome:
    """Fix ``source`` with every allowed fix; ``allow`` decides per diagnostic.

    ``rules`` are all the rules enabled for the file, before the pre-filter: each pass
    chooses among them by the text it lints.
    """
    return run_deep(_fix_source, path, source, rules, allow, max_passes, project, index)


def _fix_source(
    path: str,
    source: SourceFile,
    rules: Sequence[RuleType],
    allow: Callable[[Diagnostic], bool],
    max_passes: int,
    project: ProjectFacts | None,
    index: ProjectIndex | None,
) -> FixOutcome:
    outcome = FixOutcome(text=source.text)
    rejected: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
    current = source
    check_ast: bool | None = None
    for _ in range(max_passes):
        result = _lint_pass(path, current, rules, project, index)
        outcome.remaining = result
        if check_ast is None:
            check_ast = result.compiles
        candidates = [
            d
            for d in result.diagnostics
            if d.fix is not None and allow(d) and _key(d, current.text) not in rejected
        ]
        if not result.parsed:
            return outcome
        if result.unfixable is not None:
            outcome.failures.append(FixFailure("", 1, 1, result.unfixable))
            return outcome
        if not candidates:
            return outcome
        for group in _groups(candidates):
            if _self_conflicting(group):
                for diagnostic in group:
                    rejected.add(_key(diagnostic, current.text))
                    outcome.fail(diagnostic, f"fix '{_fix(diagnostic).message}' has overlapping edits; skipped")
        edits, groups = select_edits(candidates)
        if not groups:
            return outcome
        new_text = apply_edits(current.text, edits)
        if not parses(new_text, check_ast):
            new_text, groups = _apply_one_by_one(current.text, groups, check_ast, outcome, rejected)
        if new_text == current.text:
            if not groups:
                continue  # every fix of this pass was rejected; the others may still fit
            return outcome
        for group in groups:
            for diagnostic in group:
                outcome.applied[diagnostic.code] = outcome.applied.get(diagnostic.code, 0) + 1
        current = current.with_text(new_text)
        outcome.text = new_text
    outcome.remaining = _lint_pass(path, current, rules, project, index)
    leftover = [d for d in outcome.remaining.diagnostics if d.fix is not None and allow(d) and _key(d, current.text) not in rejected]
    outcome.converged = not leftover
    if leftover:
        outcome.failures.append(
            FixFailure(
                leftover[0].code,
                leftover[0].location.row,
                leftover[0].location.column,
                f"fixes did not settle after {max_passes} passes; fixing again would change the file again",
            )
        )
    return outcome


def _apply_one_by_one(
    text: str,
    groups: list[list[Diagnostic]],
    check_ast: bool,
    outcome: FixOutcome,
    rejected: set[tuple[str, str, tuple[tuple[str, str], ...]]],
) -> tuple[str, list[list[Diagnostic]]]:
    kept: list[list[Diagnostic]] = []
    kept_edits: list[Edit] = []
    for group in groups:
        trial_edits = kept_edits + [edit for edit in _group_edits(group) if edit not in kept_edits]
        if parses(apply_edits(text, trial_edits), check_ast):
            kept.append(group)
            kept_edits = trial_edits
            continue
        for diagnostic in group:
            rejected.add(_key(diagnostic, text))
            outcome.fail(diagnostic, f"fix '{_fix(diagnostic).message}' would produce invalid code; skipped")
    return apply_edits(text, kept_edits), kept
