"""The language server's pieces that need no client: the ``server`` command without its
extra, and amplint positions as LSP positions and edits (UTF-16 by default)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("lsprotocol", reason="the server extra (lsprotocol) is not installed")

from lsprotocol import types as lsp

from amplint.server.positions import lines_of, position, replacement


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_without_the_server_extra_the_command_says_how_to_install_it() -> None:
    # pygls made unimportable, as in an installation without the extra.
    blocked = "import sys; sys.modules['pygls'] = None; from amplint.cli import main; sys.exit(main(['server']))"
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "server` extra" in result.stderr
    assert "pip install -e '.[server]'" in result.stderr
    assert result.stdout == ""


def test_columns_become_utf16_code_units() -> None:
    lines = lines_of('s = "\U0001f600é"; x = 1\r\nnext\rlast')
    assert lines == ['s = "\U0001f600é"; x = 1', "next", "last"]
    # Column 11 is the `x`: the emoji is one column and two UTF-16 units.
    assert position(lines, 1, 11, utf16) == lsp.Position(line=0, character=11)
    assert position(lines, 1, 11, len) == lsp.Position(line=0, character=10)  # UTF-32 client
    assert position(lines, 3, 2, utf16) == lsp.Position(line=2, character=1)
    # A column at the line break, and a row past the end (the end of the text).
    assert position(lines, 2, 5, utf16) == lsp.Position(line=1, character=4)
    assert position(lines, 4, 1, utf16) == lsp.Position(line=2, character=4)


@pytest.mark.parametrize(
    ("old", "new", "start", "end", "inserted"),
    [
        ("a = f()\nb = 2\n", "a = g()\nb = 2\n", (0, 4), (0, 5), "g"),
        ("x\r\ny\r\n", "x\r\nz\r\ny\r\n", (1, 0), (1, 0), "z\r\n"),
        ("x\r\ny", "x\ny", (0, 1), (1, 0), "\n"),  # never between "\r" and "\n"
        ("\U0001f600 = 1", "\U0001f600 = 2", (0, 5), (0, 6), "2"),
    ],
)
def test_a_replacement_is_the_changed_span_only(
    old: str, new: str, start: tuple[int, int], end: tuple[int, int], inserted: str
) -> None:
    edit = replacement(old, new, utf16)
    assert edit is not None
    assert (edit.range.start.line, edit.range.start.character) == start
    assert (edit.range.end.line, edit.range.end.character) == end
    assert edit.new_text == inserted
    assert replacement(old, old, utf16) is None
