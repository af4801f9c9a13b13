"""Decoding and re-encoding Python source exactly as it was written.

Fixes are text edits on the decoded source, so everything outside an edit is preserved
byte for byte once re-encoded with the same encoding and BOM. Line endings are never
normalised: inserted lines use the file's own newline.
"""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from dataclasses import dataclass

_NEWLINE = re.compile(r"\r\n|\r|\n")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)
# Codecs for which a successful decode guarantees that encoding gives the bytes back.
_BIJECTIVE = frozenset({"utf-8", "ascii"})


class SourceError(Exception):
    """The file cannot be turned into text; the message is shown to the user."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str  # codec used to decode, without the BOM ("utf-8", "latin-1", ...)
    bom: bool
    newline: str
    # False when encoding the decoded text would not give the original bytes back (a
    # cookie naming a codec such as ``unicode_escape``): such a file is never rewritten.
    round_trips: bool = True

    def encode(self, text: str) -> bytes:
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError as error:
            raise SourceError(f"fixed source cannot be encoded as {self.encoding}: {error}") from None
        return codecs.BOM_UTF8 + data if self.bom else data

    def with_text(self, text: str) -> SourceFile:
        return SourceFile(text, self.encoding, self.bom, self.newline, self.round_trips)


def detect_newline(text: str) -> str:
    match = _NEWLINE.search(text)
    return match.group(0) if match else "\n"


def _position(data: bytes, index: int) -> tuple[int, int]:
    """1-based row and column of byte ``index`` (columns counted in bytes)."""
    before = data[:index]
    row = len(_NEWLINE.findall(before.decode("latin-1"))) + 1
    line_start = max(before.rfind(b"\n"), before.rfind(b"\r")) + 1
    return row, index - line_start + 1


def decode(data: bytes) -> SourceFile:
    """Decode per PEP 263: a BOM or coding cookie in the first two lines, else UTF-8."""
    nul = data.find(b"\x00")
    if nul >= 0:
        # CPython refuses these too ("source code cannot contain null bytes").
        raise SourceError("source contains NUL bytes", *_position(data, nul))
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if not _COOKIE.search(b"\n".join(data.splitlines()[:2])):
            # No cookie: the first lines are simply not UTF-8. Say where, like below.
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as decode_error:
                row, column = _position(data, decode_error.start)
                raise SourceError(
                    f"cannot decode as utf-8: {decode_error.reason} at byte {decode_error.start}"
                    " (add a PEP 263 coding cookie if it is not UTF-8)",
                    row,
                    column,
                ) from None
        raise SourceError(f"invalid encoding declaration: {error.msg if hasattr(error, 'msg') else error}") from None
    except (LookupError, UnicodeError) as error:
        raise SourceError(f"invalid encoding declaration: {error}") from None
    bom = encoding == "utf-8-sig"
    if bom:
        encoding = "utf-8"
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        hint = "" if encoding != "utf-8" else " (add a PEP 263 coding cookie if it is not UTF-8)"
        row, column = _position(data, error.start)
        raise SourceError(f"cannot decode as {encoding}: {error.reason} at byte {error.start}{hint}", row, column) from None
    except (LookupError, UnicodeError) as error:
        raise SourceError(f"cannot decode as {encoding}: {error}") from None
    round_trips = encoding in _BIJECTIVE or _encodes_back(text, encoding, data)
    return SourceFile(text=text, encoding=encoding, bom=bom, newline=detect_newline(text), round_trips=round_trips)


def _encodes_back(text: str, encoding: str, data: bytes) -> bool:
    try:
        return text.encode(encoding) == data
    except (UnicodeError, LookupError):
        return False


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts, splitting lines the way libcst does."""
    starts = [0]
    starts.extend(match.end() for match in _NEWLINE.finditer(text))
    return starts
