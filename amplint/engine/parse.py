"""Parse a decoded source with libcst, after CPython has had a look.

CPython's own parser looks at the source first: it is fast, its messages are the ones
users know, and a file it refuses for being nested too deeply never reaches libcst's
native parser, which can overflow its stack on such input.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

import libcst as cst

from amplint.diagnostics import FILE_START, Diagnostic, Location, file_diagnostic
from amplint.engine.catalog import PARSE_ERROR
from amplint.engine.deep import deep_recursion

# CPython refuses these for their size or depth, not their grammar; libcst must not see them.
_RESOURCE_ERRORS = ("too many nested parentheses", "too many indentation levels", "too complex", "too deeply nested")
_LIBCST_POSITION = re.compile(r"error at (\d+):(\d+)")



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
    return FILE_START


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
        with deep_recursion():
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
