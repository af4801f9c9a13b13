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


class SourceError(Exception):
    """The file cannot be turned into text; the message is shown to the user."""


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str  # codec used to decode, without the BOM ("utf-8", "latin-1", ...)
    bom: bool
    newline: str

    def encode(self, text: str) -> bytes:
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError as error:
            raise SourceError(f"fixed source cannot be encoded as {self.encoding}: {error}") from None
        return codecs.BOM_UTF8 + data if self.bom else data


def detect_newline(text: str) -> str:
    match = _NEWLINE.search(text)
    return match.group(0) if match else "\n"


def decode(data: bytes) -> SourceFile:
    """Decode per PEP 263: a BOM or coding cookie in the first two lines, else UTF-8."""
    if b"\x00" in data:
        raise SourceError("source contains NUL bytes")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise SourceError(f"invalid encoding declaration: {error.msg if hasattr(error, 'msg') else error}") from None
    bom = encoding == "utf-8-sig"
    if bom:
        encoding = "utf-8"
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        hint = "" if encoding != "utf-8" else " (add a PEP 263 coding cookie if it is not UTF-8)"
        raise SourceError(f"cannot decode as {encoding}: {error}{hint}") from None
    return SourceFile(text=text, encoding=encoding, bom=bom, newline=detect_newline(text))


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts, splitting lines the way libcst does."""
    starts = [0]
    starts.extend(match.end() for match in _NEWLINE.finditer(text))
    return starts
