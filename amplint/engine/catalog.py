"""What the engine knows about a rule without loading it.

Selecting rules, keying the cache, filtering a cached result and printing a summary need
only a rule's identity: its code, name, summary, whether it is on by default and what
fixes it offers. Loading a rule class means importing libcst and the analysis layer, which
costs more than a whole run over a fully cached project, so the registry hands out
:class:`RuleSpec` entries (a generated table, ``amplint/rules/_catalog.py``) and the
engine loads a rule's class only when a file has to be analysed.

Rule classes satisfy :class:`RuleInfo` themselves, so every function that reads only
identities accepts either; ``engine/loading.py`` turns an entry into its class.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from amplint.diagnostics import Applicability

# The engine's own codes: it reports them itself, never through a rule's traversal.
PARSE_ERROR = "AMP900"
INTERNAL_ERROR = "AMP999"


class FixAvailability(str, enum.Enum):
    NONE = "none"
    SOMETIMES = "sometimes"
    ALWAYS = "always"


class RuleInfo(Protocol):
    """A rule's identity: a loaded rule class or its :class:`RuleSpec`."""

    @property
    def code(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def default_enabled(self) -> bool: ...

    @property
    def fix_availability(self) -> FixAvailability: ...

    @property
    def fix_applicability(self) -> Applicability | None: ...


@dataclass(frozen=True)
class RuleSpec:
    """A rule's identity and where its class lives (``module`` and ``qualname``)."""

    code: str
    name: str
    summary: str
    default_enabled: bool
    fix_availability: FixAvailability
    fix_applicability: Applicability | None
    module: str
    qualname: str
