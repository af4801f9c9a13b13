"""The rule contract: a rule is one small libcst visitor that documents and tests itself.

A rule class carries its published page as its docstring (What it does / Why is this
bad? / Example / Use instead / Fix safety), its valid and invalid examples, and the
identifier words its findings need in the file text. The engine runs every enabled rule
in one read-only traversal of the module (``amplint.engine.walk.traverse``), calling a
rule's ``visit_<Type>`` and ``leave_<Type>`` methods as libcst's batched visitors would,
formatting nodes excepted.

A rule names the context it works with (``context_type``, a :class:`SourceContext` or a
subclass of it); the engine builds one instance of each such type per file and hands it
to every rule that asks for it. The engine knows no rule by name: it receives the rules
to run, and reports its own two findings under the codes of the two page-only rules at
the end of this module.
"""

from __future__ import annotations

import re
import textwrap
import traceback
from abc import ABCMeta
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import libcst as cst

from amplint.diagnostics import Applicability, Edit, Fix
from amplint.engine.catalog import INTERNAL_ERROR, PARSE_ERROR, FixAvailability
from amplint.engine.context import SourceContext
from amplint.engine.walk import check_handlers, handler

_CODE = re.compile(r"^AMP\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

ContextT = TypeVar("ContextT", bound=SourceContext)


def example_source(text: str) -> str:
    """An example's source as a rule writes it: a triple-quoted block that opens with a
    newline stands for its lines dedented, that first newline dropped; any other text is
    the source as it is."""
    return textwrap.dedent(text[1:]) if text.startswith("\n") else text


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag.

    ``line``/``column`` (1-based) and ``message`` (a fragment of the message) pin where
    and what the first diagnostic of the rule says; ``fixed`` is the expected result of
    ``amplint fix`` (with ``--unsafe-fixes`` when ``unsafe``), None when no fix applies.

    ``code`` is read with :func:`example_source`. It may show the fix itself, as a diff:
    every line behind a two-column gutter, ``- `` for a line of the example that the fix
    removes, ``+ `` for a line the fix writes, two spaces for a line both share (a lone
    ``-`` or ``+`` is a blank line on one side only). ``fixed`` is then taken from it and
    must not be given.
    """

    code: str
    fixed: str | None = None
    unsafe: bool = False  # the expected fix needs --unsafe-fixes
    count: int | None = None  # how many diagnostics of this rule, when it matters
    line: int | None = None
    column: int | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        code = example_source(self.code)
        fixed = None if self.fixed is None else example_source(self.fixed)
        sides = _fix_sides(code)
        if sides is not None:
            if fixed is not None:
                raise ValueError(f"an example written as a fix takes no fixed=:\n{code}")
            code, fixed = sides
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "fixed", fixed)


def _fix_sides(diff: str) -> tuple[str, str] | None:
    """The source before and after the fix that ``diff`` shows (see :class:`Invalid`),
    or None when no line of it is marked ``-`` or ``+``."""
    lines = diff.splitlines(keepends=True)
    if not any(line.startswith(("-", "+")) for line in lines):
        return None
    before: list[str] = []
    after: list[str] = []
    for line in lines:
        gutter, text = line[:2], line[2:]
        if not line.strip():
            before.append(line)
            after.append(line)
        elif line.rstrip("\n") in ("-", "+"):
            (before if line[0] == "-" else after).append(line[1:])
        elif gutter in ("  ", "- ", "+ "):
            if gutter != "+ ":
                before.append(text)
            if gutter != "- ":
                after.append(text)
        else:
            raise ValueError(f"a line of an example written as a fix has no '  ', '- ' or '+ ' gutter: {line!r}")
    return "".join(before), "".join(after)


@dataclass
class Report:
    node: cst.CSTNode
    message: str
    fix: Fix | None


class _RuleMeta(ABCMeta):
    """Lets a rule's class header say ``name=``: Python 3.10's ``ABCMeta.__new__`` takes
    ``name`` as an ordinary parameter, so the keyword is passed on as ``rule_name``."""

    def __new__(mcls, cls_name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any) -> Any:
        if "name" in kwargs:
            kwargs["rule_name"] = kwargs.pop("name")
        return super().__new__(mcls, cls_name, bases, namespace, **kwargs)


class Rule(cst.BatchableCSTVisitor, Generic[ContextT], metaclass=_RuleMeta):
    """Base class of every amplint rule; see the module docstring."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    # Identifier words at least one of which must occur in a file for the rule to possibly
    # fire; the pre-filter skips files that contain none of them. ``requires`` adds
    # further such sets, each of which must also be met. Spellings (see prefilter.py):
    # ``word``, ``*suffix``, ``.attribute``, ``name()`` (called without arguments),
    # ``re:pattern``. Every spelling of what the rule matches must meet every set.
    triggers: ClassVar[frozenset[str]]
    requires: ClassVar[tuple[frozenset[str], ...]] = ()
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    fix_applicability: ClassVar[Applicability | None] = None
    default_enabled: ClassVar[bool] = True
    # Reported by the engine itself (parse and internal errors), never by a traversal.
    engine_code: ClassVar[bool] = False
    # The context this rule reads; one instance per file is shared by every rule asking
    # for the same type. Nothing is computed before the traversal: contexts compute
    # metadata when first asked, so a file no rule looks closely at costs little more
    # than its parse.
    context_type: ClassVar[type[SourceContext]] = SourceContext
    # Sources the rule must not flag, each read with :func:`example_source`.
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init_subclass__(
        cls,
        *,
        code: str | None = None,
        rule_name: str | None = None,
        summary: str | None = None,
        fix: Applicability | None = None,
        **kwargs: Any,
    ) -> None:
        """A rule's identity may be given in its class header: ``class MyRule(AnalysisRule,
        code="AMP123", name="my-rule", summary="...", fix=Applicability.SAFE)``; ``fix`` is
        the applicability of the fixes it sometimes offers."""
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if rule_name is not None:
            cls.name = rule_name
        if summary is not None:
            cls.summary = summary
        if fix is not None:
            cls.fix_availability, cls.fix_applicability = FixAvailability.SOMETIMES, fix
        if "VALID" in cls.__dict__:
            cls.VALID = tuple(example_source(source) for source in cls.VALID)
        if cls.__dict__.get("abstract", False):
            return
        for attribute in ("code", "name", "summary", "triggers"):
            if not hasattr(cls, attribute):
                raise TypeError(f"rule {cls.__name__} must define {attribute!r}")
        if not _CODE.match(cls.code):
            raise TypeError(f"rule {cls.__name__}: code {cls.code!r} is not AMPnnn")
        if not _NAME.match(cls.name):
            raise TypeError(f"rule {cls.__name__}: name {cls.name!r} is not kebab-case")
        if not cls.__doc__ or "## What it does" not in cls.__doc__:
            raise TypeError(f"rule {cls.code}: its docstring must be its rule page")
        if (cls.fix_availability is FixAvailability.NONE) != (cls.fix_applicability is None):
            raise TypeError(f"rule {cls.code}: fix_availability and fix_applicability disagree")
        check_handlers(cls, f"rule {cls.code}")

    def __init__(self, context: ContextT) -> None:
        super().__init__()
        self.context = context
        self.reports: list[Report] = []
        self.failure: str | None = None
        self.failure_summary = ""

    # -- reporting ---------------------------------------------------------------------

    def report(self, node: cst.CSTNode, message: str | None = None, *, fix: Fix | None = None) -> None:
        self.reports.append(Report(node=node, message=message or self.summary, fix=fix))

    def make_fix(
        self,
        message: str,
        edits: Sequence[Edit],
        *,
        applicability: Applicability | None = None,
        isolation: str | None = None,
    ) -> Fix:
        chosen = applicability or self.fix_applicability or Applicability.SAFE
        return Fix(message=message, edits=tuple(edits), applicability=chosen, isolation=isolation)

    # -- error containment -------------------------------------------------------------

    def callback(self, prefix: str, node_type: type[cst.CSTNode]) -> Callable[[cst.CSTNode], None] | None:
        """This rule's handler for entering (``visit``) or leaving (``leave``) a node type.

        A handler that raises stops the rule for the rest of the file (it becomes an
        AMP999 for this file); the other rules go on.
        """
        found = handler(type(self), prefix, node_type)
        if found is None:
            return None

        def guarded(node: cst.CSTNode) -> None:
            if self.failure is not None:
                return
            try:
                found(self, node)
            except Exception as error:  # noqa: BLE001 - a rule's bug must not stop the run
                self.failure = "".join(traceback.format_exception(type(error), error, error.__traceback__))
                self.failure_summary = f"{type(error).__name__}: {error}"

        return guarded


# -- the engine's own findings ----------------------------------------------------------------


class SyntaxErrorRule(Rule[SourceContext], code=PARSE_ERROR, name="syntax-error"):
    """## What it does
    Reports a file that amplint cannot analyse: it does not parse, it cannot be decoded
    (UTF-8 by default; a PEP 263 coding cookie and a UTF-8 BOM are honoured), it cannot
    be read, or it is larger than `max-file-size` (default 4 MiB). The diagnostic points
    at the syntax error when there is one. The rest of the run goes on, and `fix` never
    touches such a file.

    A file that CPython compiles but libcst's parser does not handle (a few rare forms,
    such as `(x): int` in a function) is valid code, so it gets no AMP900, which would
    fail a CI on correct code: a warning on stderr says it was not checked. Conversely,
    newer syntax that libcst parses (PEP 695 generics, PEP 701 f-strings) is analysed
    even when the Python running amplint is too old to compile it.

    amplint is not a syntax checker: a file that contains none of the enabled rules'
    trigger words (such as `amp`, `autocast`, `GradScaler`, `backward`) is never parsed,
    so a syntax error there is not reported; likewise a Jupyter notebook that is not valid
    nbformat 4 JSON is reported only when its text holds such a word. An empty file is
    valid Python.

    ## Why is this bad?
    A file amplint cannot parse is a file it cannot check: an AMP mistake in it would
    go unnoticed. The diagnostic makes that visible instead of silently skipping it.

    ## Example
    ```python
    import torch

    with torch.amp.autocast("cuda":
        pass
    ```

    ## Use instead
    ```python
    import torch

    with torch.amp.autocast("cuda"):
        pass
    ```

    ## Fix safety
    No fix. Generated or legacy (Python 2) files can be excluded with `extend-exclude`
    or silenced with `per-file-ignores = {"legacy/*.py" = ["AMP900"]}`.
    """

    summary = "File cannot be decoded, read or parsed"
    triggers = frozenset()
    engine_code = True


class InternalErrorRule(Rule[SourceContext], code=INTERNAL_ERROR, name="internal-error"):
    """## What it does
    Reports a bug in amplint itself: a rule raised an exception on this file, or the
    worker process analysing it died. The message names the rule and the exception;
    `--verbose` prints the traceback. The other rules' findings for the file are kept,
    the run goes on, and amplint exits with status 2 at the end.

    ## Why is this bad?
    The file was not fully checked. Please report it with the traceback and, if you
    can, the smallest source that reproduces it.

    ## Fix safety
    No fix. This code cannot be selected away: an internal error always fails the run.
    """

    summary = "amplint failed on this file"
    triggers = frozenset()
    engine_code = True


RuleType = type[Rule[Any]]
ENGINE_RULES: tuple[RuleType, ...] = (SyntaxErrorRule, InternalErrorRule)
