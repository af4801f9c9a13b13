"""The data every part of amplint exchanges: diagnostics, fixes and text edits.

Positions are 1-based rows and 1-based columns counted in characters of the decoded
source (what an editor shows); offsets are 0-based indices into the decoded text.

In a Jupyter notebook the linted text is the code cells joined into one module; once a
finding is placed in its cell, ``cell`` is the 1-based cell number (every cell counts,
as in Ruff) and rows are relative to that cell. Offsets stay those of the module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Applicability(str, enum.Enum):
    """Ruff's vocabulary: a safe fix runs by default, an unsafe one only on request."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Location:
    row: int
    column: int


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``source[start:end]`` with ``content`` (an insertion when start == end)."""

    start: int
    end: int
    content: str
    location: Location
    end_location: Location
    # The notebook cell the edit is in (rows then count from that cell); None in a .py file.
    cell: int | None = None


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE
    # Fixes sharing an isolation key are applied all together or not at all in one
    # pass (e.g. rewriting every use of an import and removing the import).
    isolation: str | None = None


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: Fix | None = None
    # Free-form detail (e.g. a traceback for AMP999) shown only with --verbose.
    detail: str | None = field(default=None, compare=False)
    # The notebook cell the finding is in (rows then count from that cell); None in a
    # .py file, and for a finding about a whole notebook.
    cell: int | None = None
    # First and last row of the finding in the file as stored, where that differs from
    # the rows above: a notebook's JSON text. Formats that annotate the file itself
    # (GitHub, SARIF, GitLab, reviewdog) use them so annotations land on the cell's line.
    file_rows: tuple[int, int] | None = field(default=None, compare=False)

    @property
    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        return (self.path, self.cell or 0, self.location.row, self.location.column, self.code, self.message)

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def fixable_with(self, unsafe: bool) -> bool:
        return self.fix is not None and (unsafe or self.fix.applicability is Applicability.SAFE)


FILE_START = Location(1, 1)


def file_diagnostic(path: str, code: str, message: str, location: Location = FILE_START, detail: str | None = None) -> Diagnostic:
    """A finding about a whole file (it cannot be read, decoded, parsed or analysed)."""
    return Diagnostic(code=code, message=message, path=path, location=location, end_location=location, detail=detail)
