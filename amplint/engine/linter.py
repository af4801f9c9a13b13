"""Lint one decoded source: parse once, resolve metadata once, run every rule in one pass.

Nothing a file contains may crash the run. CPython's own parser looks at the source
first: it is fast, its messages are the ones users know, and a file it refuses for being
nested too deeply never reaches libcst's native parser, which can overflow its stack on
such input. Parsing and the traversal then run on a thread with a large stack and a
raised recursion limit, so that deeply nested code CPython accepts is analysed rather
than reported. A rule that raises becomes an AMP999 diagnostic for that file, naming the
rule; the other rules' findings are kept.

libcst does not reproduce a few files exactly (it drops a form feed at the start of a
top-level statement and a trailing lone carriage return). Rules work on libcst's
rendering of the module, and their positions and edits are mapped back onto the real
text, so fixes never land one character off.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from amplint.diagnostics import Diagnostic, Edit, Fix, Location
from amplint.engine.context import FileContext, render
from amplint.engine.noqa import is_suppressed, noqa_lines
from amplint.engine.source import SourceFile, line_starts
from amplint.engine.walk import traverse
from amplint.rules.base import Rule

PARSE_ERROR = "AMP900"
INTERNAL_ERROR = "AMP999"

_START = Location(1, 1)

# CPython refuses these for their size or depth, not their grammar; libcst must not see them.
_RESOURCE_ERRORS = ("too many nested parentheses", "too many indentation levels", "too complex", "too deeply nested")
_LIBCST_POSITION = re.compile(r"error at (\d+):(\d+)")
# Characters libcst may leave out of its rendering of a module without changing its meaning.
_DROPPABLE = frozenset(" \t\x0c\r\n")

STACK_SIZE = 512 * 1024 * 1024
RECURSION_LIMIT = 100_000

T = TypeVar("T")


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


def file_diagnostic(path: str, code: str, message: str, location: Location = _START, detail: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, message=message, path=path, location=location, end_location=location, detail=detail)


# -- running deep ------------------------------------------------------------------------------

_deep = threading.local()
_limit_lock = threading.Lock()
_limit_holders = 0
_saved_limit = 0


def run_deep(function: Callable[..., T], *args: object) -> T:
    """Call ``function`` on a thread with a large stack (or here, if already on one)."""
    if getattr(_deep, "active", False):
        return function(*args)
    outcome: dict[str, object] = {}

    def target() -> None:
        _deep.active = True
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # noqa: BLE001 - re-raised in the calling thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="amplint-deep", daemon=True)
    try:
        previous = threading.stack_size(STACK_SIZE)
        try:
            thread.start()
        finally:
            threading.stack_size(previous)
    except (RuntimeError, ValueError, MemoryError):
        return function(*args)  # no large stack to be had: default limits, still contained
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


@contextlib.contextmanager
def _deep_recursion() -> Iterator[None]:
    """Raise the recursion limit while on a large-stack thread (shared, reference-counted)."""
    global _limit_holders, _saved_limit
    if not getattr(_deep, "active", False):
        yield
        return
    with _limit_lock:
        if _limit_holders == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _limit_holders += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_holders -= 1
            if _limit_holders == 0:
                sys.setrecursionlimit(_saved_limit)


# -- parsing ----------------------------------------------------------------------------------


@dataclass
class Parsed:
    module: cst.Module | None
    error: Diagnostic | None
    compiles: bool
    skipped: str | None = None


def cpython_compiles(text: str, path: str = "<unknown>") -> BaseException | None:
    """The error the running CPython's parser raises on ``text``, or None if it accepts it."""
    try:
        with warnings.catch_warnings():
            # Invalid escapes and the like are warnings, not errors, even under -W error.
            warnings.simplefilter("ignore")
            compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as error:
        return error
    return None


def _is_resource_error(error: BaseException) -> bool:
    if isinstance(error, (RecursionError, MemoryError, OverflowError)):
        return True
    message = str(error.msg if isinstance(error, SyntaxError) else error)
    return any(fragment in message for fragment in _RESOURCE_ERRORS)


def _cpython_location(error: BaseException) -> Location:
    if isinstance(error, SyntaxError) and error.lineno:
        return Location(max(error.lineno, 1), max(error.offset or 1, 1))
    return _START


def _cpython_message(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        return f"{type(error).__name__}: {error.msg}"
    if isinstance(error, RecursionError):
        return "expressions nested too deeply for CPython to compile"
    if isinstance(error, MemoryError):
        return "out of memory"
    return f"{type(error).__name__}: {error}"


def parse_source(path: str, text: str) -> Parsed:
    """Parse with libcst, after CPython has had a look; call it on a deep thread."""
    cpython_error = cpython_compiles(text, path)
    compiles = cpython_error is None
    if cpython_error is not None and _is_resource_error(cpython_error):
        message = f"cannot parse: {_cpython_message(cpython_error)}"
        return Parsed(None, file_diagnostic(path, PARSE_ERROR, message, _cpython_location(cpython_error)), False)
    try:
        with _deep_recursion():
            return Parsed(cst.parse_module(text), None, compiles)
    except cst.ParserSyntaxError as error:
        if cpython_error is not None:
            # Both refuse it: CPython's wording and position are the ones users know.
            message, location = _cpython_message(cpython_error), _cpython_location(cpython_error)
        else:
            # Valid Python that libcst's parser does not handle: not the user's syntax
            # error, so no AMP900 (it would fail their CI on correct code); a warning.
            first = str(error.message).splitlines()[0] if error.message else "syntax error"
            position = _LIBCST_POSITION.search(first)
            where = f"{position.group(1)}:{int(position.group(2)) + 1}" if position else f"{max(error.raw_line, 1)}"
            return Parsed(None, None, True, f"not checked: libcst cannot parse this valid Python (at {where})")
        diagnostic = file_diagnostic(path, PARSE_ERROR, f"cannot parse: {message}", location)
    except RecursionError:
        diagnostic = file_diagnostic(path, PARSE_ERROR, "cannot parse: expressions nested too deeply to analyse")
    except MemoryError:
        diagnostic = file_diagnostic(path, PARSE_ERROR, "cannot parse: out of memory")
    except Exception as error:  # noqa: BLE001 - the parser's own bug is the user's AMP900, reported
        diagnostic = file_diagnostic(path, PARSE_ERROR, f"cannot parse: {type(error).__name__}: {error}")
    return Parsed(None, diagnostic, compiles)


# -- mapping libcst's rendering back onto the text ---------------------------------------------


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``."""
    length = min(len(a) - i, len(b) - j)
    low = 0
    while low < length:
        high = min(length, low + 4096)
        if a[i + low : i + high] != b[j + low : j + high]:
            for k in range(low, high):
                if a[i + k] != b[j + k]:
                    return k
        low = high
    return length


class Alignment:
    """Maps offsets in libcst's rendering (``code``) to offsets in the source text.

    ``code`` is ``text`` with some whitespace left out. ``breaks`` are the code offsets
    before which the text holds left-out characters, ``totals`` their running counts.
    """

    def __init__(self, breaks: list[int], totals: list[int]) -> None:
        self.breaks = breaks
        self.totals = totals

    @classmethod
    def between(cls, code: str, text: str) -> Alignment | None:
        breaks: list[int] = []
        totals: list[int] = []
        i = j = total = 0
        while True:
            common = _common_prefix(code, i, text, j)
            i += common
            j += common
            if i == len(code):
                break
            skipped = j
            while j < len(text) and text[j] != code[i]:
                if text[j] not in _DROPPABLE:
                    return None
                j += 1
            if j == len(text) or j == skipped:
                return None
            total += j - skipped
            breaks.append(i)
            totals.append(total)
        rest = text[j:]
        if any(character not in _DROPPABLE for character in rest):
            return None
        if rest:
            breaks.append(len(code))
            totals.append(total + len(rest))
        return cls(breaks, totals)

    def start(self, offset: int) -> int:
        """Where ``code[offset]`` is in the text (after left-out characters before it)."""
        index = bisect.bisect_right(self.breaks, offset)
        return offset + (self.totals[index - 1] if index else 0)

    def end(self, offset: int) -> int:
        """Just after ``code[offset - 1]`` in the text (before left-out characters)."""
        index = bisect.bisect_left(self.breaks, offset)
        return offset + (self.totals[index - 1] if index else 0)

    def span(self, start: int, end: int) -> tuple[int, int]:
        if start == end:
            mapped = self.start(start)
            return mapped, mapped
        return self.start(start), self.end(end)


class _Locator:
    def __init__(self, text: str) -> None:
        self.starts = line_starts(text)

    def __call__(self, offset: int) -> Location:
        row = bisect.bisect_right(self.starts, offset)
        return Location(row=row, column=offset - self.starts[row - 1] + 1)


# -- linting ------------------------------------------------------------------------------------


def _rule_failure(path: str, rule: type[Rule], summary: str, detail: str | None) -> Diagnostic:
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
    rules: Sequence[type[Rule]],
    *,
    compiles: bool = False,
) -> LintResult:
    """Run ``rules`` over an already parsed ``module`` of ``source`` (call on a deep thread)."""
    result = LintResult(compiles=compiles)
    if not rules:
        return result
    try:
        with _deep_recursion():
            _run_rules(path, source, module, rules, result)
    except RecursionError:
        result.diagnostics = [file_diagnostic(path, PARSE_ERROR, "cannot analyse: expressions nested too deeply")]
        result.parsed = False
        result.internal_error = False
    return result


def _run_rules(path: str, source: SourceFile, module: cst.Module, rules: Sequence[type[Rule]], result: LintResult) -> None:
    code = render(module)
    alignment: Alignment | None = None
    if code != source.text:
        alignment = Alignment.between(code, source.text)
        # Rules see libcst's rendering, so that every position they compute is consistent.
        context = FileContext(path, source.with_text(code), module)
    else:
        context = FileContext(path, source, module)
    locate = context.location if code == source.text else _Locator(source.text)
    exact = code == source.text or alignment is not None

    instances: list[Rule] = []
    for rule in rules:
        try:
            instances.append(rule(context))
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


def _callbacks(instances: Sequence[Rule], prefix: str) -> Callable[[type[cst.CSTNode]], list[Callable[[cst.CSTNode], None]]]:
    def for_type(node_type: type[cst.CSTNode]) -> list[Callable[[cst.CSTNode], None]]:
        found = (instance.callback(prefix, node_type) for instance in instances)
        return [callback for callback in found if callback is not None]

    return for_type


def _diagnostics_of(
    path: str,
    instance: Rule,
    context: FileContext,
    alignment: Alignment | None,
    locate: Callable[[int], Location],
    length: int,
    fixable: bool,
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for report in instance.reports:
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


def apply_noqa(diagnostics: list[Diagnostic], text: str) -> list[Diagnostic]:
    if not any(diagnostic.code != INTERNAL_ERROR for diagnostic in diagnostics):
        return diagnostics
    table = noqa_lines(text)
    return [
        diagnostic
        for diagnostic in diagnostics
        if diagnostic.code == INTERNAL_ERROR or not is_suppressed(diagnostic.code, diagnostic.location.row, table)
    ]


def _lint(path: str, source: SourceFile, rules: Sequence[type[Rule]]) -> LintResult:
    parsed = parse_source(path, source.text)
    if parsed.module is None:
        errors = [parsed.error] if parsed.error is not None else []
        return LintResult(diagnostics=errors, parsed=False, compiles=parsed.compiles, skipped=parsed.skipped)
    result = lint_module(path, source, parsed.module, rules, compiles=parsed.compiles)
    result.diagnostics = sorted(apply_noqa(result.diagnostics, source.text), key=lambda d: d.sort_key)
    return result


def lint_source(path: str, source: SourceFile, rules: Sequence[type[Rule]]) -> LintResult:
    """Parse and lint one source; never raises for anything the source contains."""
    return run_deep(_lint, path, source, rules)
