"""The rule contract: a rule is one small libcst visitor that documents and tests itself.

A rule class carries its published page as its docstring (What it does / Why is this
bad? / Example / Use instead / Fix safety), its valid and invalid examples, and the
identifier words its findings need in the file text. The engine runs every enabled rule
in one read-only traversal of the module (``amplint.engine.walk.traverse``), calling a
rule's ``visit_<Type>`` and ``leave_<Type>`` methods as libcst's batched visitors would,
formatting nodes excepted.
"""

from __future__ import annotations

import enum
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst
from libcst.metadata import ParentNodeProvider, ProviderT

from amplint.diagnostics import Applicability, Fix
from amplint.engine.walk import check_handlers, handler

if TYPE_CHECKING:
    from amplint.engine.context import FileContext

_CODE = re.compile(r"^AMP\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class FixAvailability(str, enum.Enum):
    NONE = "none"
    SOMETIMES = "sometimes"
    ALWAYS = "always"


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag; ``fixed`` is the expected result of ``amplint fix``."""

    code: str
    fixed: str | None = None
    unsafe: bool = False  # the expected fix needs --unsafe-fixes
    count: int | None = None  # how many diagnostics of this rule, when it matters


@dataclass
class Report:
    node: cst.CSTNode
    message: str
    fix: Fix | None


_NO_DEFAULT: Any = object()


class Rule(cst.BatchableCSTVisitor):
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
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    # Nothing is resolved before the traversal: metadata is computed when first asked for
    # (``get_metadata``, ``context.names``, ``context.parents``, ``context.span``), so a
    # file no rule looks closely at costs little more than its parse.
    METADATA_DEPENDENCIES: ClassVar[tuple[ProviderT, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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

    def __init__(self, context: FileContext) -> None:
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
        edits: Sequence[Any],
        *,
        applicability: Applicability | None = None,
        isolation: str | None = None,
    ) -> Fix:
        chosen = applicability or self.fix_applicability or Applicability.SAFE
        return Fix(message=message, edits=tuple(edits), applicability=chosen, isolation=isolation)

    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = _NO_DEFAULT) -> Any:
        """libcst's ``get_metadata``, resolving the provider on first use."""
        if key is ParentNodeProvider:
            mapping: Mapping[cst.CSTNode, Any] = self.context.parents
        else:
            mapping = self.context.wrapper.resolve(key)
        if default is _NO_DEFAULT:
            return mapping[node]
        return mapping.get(node, default)

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

    # -- conveniences shared by rules ---------------------------------------------------

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        return self.context.names.resolve(node)
