"""Every output format, rendered from hand-made diagnostics and compared with what a
reader (or a CI tool) must see. Expected texts are written out by hand."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from amplint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location
from amplint.output import FORMATS, MACHINE_FORMATS, Sourced, Style, render
from amplint.output.github import format_github
from amplint.output.junit import format_junit
from amplint.output.ruff_json import diagnostic_json, format_json, format_json_lines
from amplint.output.statistics import format_statistics, format_statistics_json
from amplint.output.text import format_concise, format_full, source_lines

SCALER_TEXT = "import torch\nx = 1\nscaler = torch.cuda.amp.GradScaler()\n\ny = 2\nz = 3\nw = 4\n"


def diagnostic(
    code: str = "AMP001",
    message: str = "deprecated",
    path: str = "pkg/a.py",
    start: tuple[int, int] = (3, 10),
    end: tuple[int, int] = (3, 37),
    fix: Fix | None = None,
    detail: str | None = None,
) -> Diagnostic:
    return Diagnostic(code, message, path, Location(*start), Location(*end), fix, detail)


def scaler_fix(applicability: Applicability = Applicability.SAFE) -> Fix:
    # Offsets of "torch.cuda.amp.GradScaler()" in SCALER_TEXT: 13 + 6 + 9 = 28.
    edit = Edit(28, 55, 'torch.amp.GradScaler("cuda")', Location(3, 10), Location(3, 37))
    return Fix("Replace with `torch.amp.GradScaler`", (edit,), applicability)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.delenv("AMPLINT_DOCS_URL", raising=False)


# -- concise and full ------------------------------------------------------------------------


def test_concise_marks_only_fixes_that_would_apply() -> None:
    safe = diagnostic(fix=scaler_fix())
    unsafe = diagnostic(code="AMP102", message="loss outside", fix=scaler_fix(Applicability.UNSAFE))
    items = [Sourced(safe, SCALER_TEXT), Sourced(unsafe, SCALER_TEXT)]
    assert format_concise(items, unsafe=False) == (
        "pkg/a.py:3:10: AMP001 [*] deprecated\npkg/a.py:3:10: AMP102 loss outside\n"
    )
    assert format_concise(items, unsafe=True) == (
        "pkg/a.py:3:10: AMP001 [*] deprecated\npkg/a.py:3:10: AMP102 [*] loss outside\n"
    )


def test_full_shows_context_caret_and_help() -> None:
    out = format_full([Sourced(diagnostic(fix=scaler_fix()), SCALER_TEXT)], unsafe=False)
    assert out == (
        "pkg/a.py:3:10: AMP001 [*] deprecated\n"
        "  |\n"
        "1 | import torch\n"
        "2 | x = 1\n"
        "3 | scaler = torch.cuda.amp.GradScaler()\n"
        "  |          ^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP001\n"
        "4 |\n"
        "5 | y = 2\n"
        "  |\n"
        "  = help: Replace with `torch.amp.GradScaler`\n"
        "\n"
    )


def test_full_trims_blank_context_and_widens_the_gutter() -> None:
    text = "\n" * 8 + "a = torch.get_autocast_gpu_dtype()\n\n\n"
    d = diagnostic(code="AMP002", start=(9, 5), end=(9, 35))
    assert format_full([Sourced(d, text)], unsafe=False) == (
        "pkg/a.py:9:5: AMP002 deprecated\n"
        "  |\n"
        "9 | a = torch.get_autocast_gpu_dtype()\n"
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP002\n"
        "  |\n"
        "\n"
    )
    text = "x = 1\n" * 9 + "a = b\nc = d\n"
    d = diagnostic(start=(10, 1), end=(10, 2))
    assert format_full([Sourced(d, text)], unsafe=False) == (
        "pkg/a.py:10:1: AMP001 deprecated\n"
        "   |\n"
        " 8 | x = 1\n"
        " 9 | x = 1\n"
        "10 | a = b\n"
        "   | ^ AMP001\n"
        "11 | c = d\n"
        "   |\n"
        "\n"
    )


def test_full_multiline_range_starting_mid_line() -> None:
    text = "import torch\nwith torch.cuda.amp.autocast(\n    enabled=True,\n):\n    pass\n"
    d = diagnostic(start=(2, 6), end=(4, 2))
    assert format_full([Sourced(d, text)], unsafe=False) == (
        "pkg/a.py:2:6: AMP001 deprecated\n"
        "  |\n"
        "1 |   import torch\n"
        "2 |   with torch.cuda.amp.autocast(\n"
        "  |  ______^\n"
        "3 | |     enabled=True,\n"
        "4 | | ):\n"
        "  | |_^ AMP001\n"
        "5 |       pass\n"
        "  |\n"
        "\n"
    )


def test_full_multiline_range_starting_at_indentation() -> None:
    text = "def f():\n    with a(\n        b,\n    ):\n        pass\n"
    d = diagnostic(start=(2, 5), end=(5, 13))
    assert format_full([Sourced(d, text)], unsafe=False) == (
        "pkg/a.py:2:5: AMP001 deprecated\n"
        "  |\n"
        "1 |   def f():\n"
        "2 | /     with a(\n"
        "3 | |         b,\n"
        "4 | |     ):\n"
        "5 | |         pass\n"
        "  | |____________^ AMP001\n"
        "  |\n"
        "\n"
    )


def test_full_folds_long_ranges() -> None:
    text = "".join(f"line{n}\n" for n in range(1, 11))
    d = diagnostic(start=(1, 1), end=(10, 6))
    out = format_full([Sourced(d, text)], unsafe=False)
    assert out == (
        "pkg/a.py:1:1: AMP001 deprecated\n"
        "   |\n"
        " 1 | / line1\n"
        " 2 | | line2\n"
        " 3 | | line3\n"
        "...\n"
        " 8 | | line8\n"
        " 9 | | line9\n"
        "10 | | line10\n"
        "   | |_____^ AMP001\n"
        "   |\n"
        "\n"
    )


def test_full_range_ending_at_a_line_start_ends_on_the_line_before() -> None:
    text = "with a(\n    b,\n):\n    pass\n"
    # A statement range that includes its newline stops at column 1 of the next row.
    d = diagnostic(start=(1, 1), end=(3, 1))
    assert format_full([Sourced(d, text)], unsafe=False) == (
        "pkg/a.py:1:1: AMP001 deprecated\n"
        "  |\n"
        "1 | / with a(\n"
        "2 | |     b,\n"
        "  | |______^ AMP001\n"
        "3 |   ):\n"
        "4 |       pass\n"
        "  |\n"
        "\n"
    )


def test_full_expands_tabs_and_keeps_the_caret_aligned() -> None:
    text = "if x:\n\ts = torch.cuda.amp.GradScaler()\n"
    d = diagnostic(start=(2, 6), end=(2, 33))
    assert format_full([Sourced(d, text)], unsafe=False) == (
        "pkg/a.py:2:6: AMP001 deprecated\n"
        "  |\n"
        "1 | if x:\n"
        "2 |     s = torch.cuda.amp.GradScaler()\n"
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP001\n"
        "  |\n"
        "\n"
    )


def test_full_rows_split_only_at_line_breaks_python_knows() -> None:
    # A form feed is whitespace to Python, not a new row; CRLF and CR are rows.
    assert source_lines("a\x0cb\r\nc\rd\n") == ["a\x0cb", "c", "d"]
    text = "x = 1\r\ns = torch.cuda.amp.GradScaler()\r\n"
    d = diagnostic(start=(2, 5), end=(2, 32))
    assert "2 | s = torch.cuda.amp.GradScaler()\n  |     ^^^" in format_full(
        [Sourced(d, text)], unsafe=False
    )


def test_full_without_source_is_the_header_only() -> None:
    d = diagnostic(code="AMP900", message="cannot decode: bad byte", start=(1, 1), end=(1, 1))
    assert format_full([Sourced(d, "")], unsafe=False) == (
        "pkg/a.py:1:1: AMP900 cannot decode: bad byte\n\n"
    )


def test_unsafe_help_is_labelled_and_detail_is_shown() -> None:
    d = diagnostic(fix=scaler_fix(Applicability.UNSAFE), detail="Traceback (most recent call)\n")
    out = format_full([Sourced(d, SCALER_TEXT)], unsafe=False)
    assert (
        "  = help (unsafe): Replace with `torch.amp.GradScaler`\nTraceback (most recent call)\n"
        in out
    )
    assert format_concise([Sourced(d, SCALER_TEXT)], unsafe=False) == (
        "pkg/a.py:3:10: AMP001 deprecated\nTraceback (most recent call)\n"
    )


def test_colour_is_added_only_when_asked() -> None:
    d = diagnostic(fix=scaler_fix())
    plain = format_concise([Sourced(d, SCALER_TEXT)], unsafe=False)
    coloured = format_concise([Sourced(d, SCALER_TEXT)], unsafe=False, style=Style(True))
    assert "\x1b[" not in plain
    assert "\x1b[" in coloured
    assert "\x1b[1mpkg/a.py\x1b[0m" in coloured
    assert "\x1b[" in format_full([Sourced(d, SCALER_TEXT)], unsafe=False, style=Style(True))


def test_paths_outside_the_current_directory_stay_absolute(tmp_path: Path) -> None:
    outside = str(tmp_path.parent / "elsewhere.py")
    d = diagnostic(path=outside, start=(1, 1), end=(1, 2))
    assert format_concise([Sourced(d, "x\n")], unsafe=False).startswith(outside + ":1:1: ")


# -- json ------------------------------------------------------------------------------------


def test_json_is_ruffs_schema(tmp_path: Path) -> None:
    d = diagnostic(fix=scaler_fix())
    (entry,) = json.loads(format_json([Sourced(d, SCALER_TEXT)]))
    assert entry == {
        "cell": None,
        "code": "AMP001",
        "end_location": {"row": 3, "column": 37},
        "filename": str(tmp_path / "pkg" / "a.py"),
        "fix": {
            "applicability": "safe",
            "message": "Replace with `torch.amp.GradScaler`",
            "edits": [
                {
                    "content": 'torch.amp.GradScaler("cuda")',
                    "location": {"row": 3, "column": 10},
                    "end_location": {"row": 3, "column": 37},
                }
            ],
        },
        "location": {"row": 3, "column": 10},
        "message": "deprecated",
        "noqa_row": 3,
        "url": "rules/AMP001.md",
    }


def test_json_without_fix_and_empty_report() -> None:
    assert diagnostic_json(diagnostic())["fix"] is None
    assert json.loads(format_json([])) == []
    assert format_json_lines([]) == ""


def test_json_lines_is_one_compact_object_per_line() -> None:
    items = [Sourced(diagnostic(), ""), Sourced(diagnostic(code="AMP002", start=(4, 1)), "")]
    lines = format_json_lines(items).splitlines()
    assert [json.loads(line)["code"] for line in lines] == ["AMP001", "AMP002"]
    assert all("\n" not in line and line.startswith("{") for line in lines)


# -- github ----------------------------------------------------------------------------------


def test_github_annotation_line() -> None:
    out = format_github([Sourced(diagnostic(), "")])
    assert out == (
        "::error title=amplint (AMP001),file=pkg/a.py,line=3,col=10,endLine=3,endColumn=37"
        "::AMP001 deprecated\n"
    )


def test_github_escapes_properties_and_data() -> None:
    d = diagnostic(path="we,ird:name.py", message="100% wrong\nreally")
    assert format_github([Sourced(d, "")]) == (
        "::error title=amplint (AMP001),file=we%2Cird%3Aname.py,line=3,col=10,endLine=3,"
        "endColumn=37::AMP001 100%25 wrong%0Areally\n"
    )


def test_github_paths_are_relative_to_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    out = format_github([Sourced(diagnostic(path="train.py"), "")])
    assert ",file=sub/train.py," in out


# -- junit -----------------------------------------------------------------------------------


def test_junit_counts_files_and_failures() -> None:
    items = [
        Sourced(diagnostic(path="a.py", message="bad <thing> & \x01"), ""),
        Sourced(diagnostic(path="a.py", code="AMP002", start=(5, 1)), ""),
    ]
    root = ET.fromstring(format_junit(items, checked=["a.py", "b.py"]))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures")) == ("3", "2")
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert set(suites) == {"a.py", "b.py"}
    assert (suites["a.py"].get("tests"), suites["a.py"].get("failures")) == ("2", "2")
    assert (suites["b.py"].get("tests"), suites["b.py"].get("failures")) == ("1", "0")
    assert suites["b.py"].find("testcase/failure") is None
    failures = suites["a.py"].findall("testcase/failure")
    assert [f.get("type") for f in failures] == ["AMP001", "AMP002"]
    # Control characters cannot appear in XML at all: they are replaced, the rest escaped.
    assert failures[0].get("message") == "bad <thing> & \ufffd"
    assert failures[0].text == "a.py:3:10: AMP001 bad <thing> & \ufffd"


# -- statistics ------------------------------------------------------------------------------


def test_statistics_text_and_json() -> None:
    diagnostics = [
        diagnostic(code="AMP002", fix=scaler_fix()),
        diagnostic(code="AMP001"),
        diagnostic(code="AMP002"),
        diagnostic(code="AMP102", fix=scaler_fix(Applicability.UNSAFE)),
    ]
    assert format_statistics(diagnostics, unsafe=False) == (
        "2\tAMP002\t[*] deprecated-autocast-state\n"
        "1\tAMP001\t[ ] deprecated-amp-namespace\n"
        "1\tAMP102\t[ ] loss-outside-autocast\n"
    )
    rows = json.loads(format_statistics_json(diagnostics, unsafe=True))
    assert rows == [
        {
            "code": "AMP002",
            "name": "deprecated-autocast-state",
            "count": 2,
            "fixable": True,
            "fixable_count": 1,
        },
        {
            "code": "AMP001",
            "name": "deprecated-amp-namespace",
            "count": 1,
            "fixable": False,
            "fixable_count": 0,
        },
        {
            "code": "AMP102",
            "name": "loss-outside-autocast",
            "count": 1,
            "fixable": True,
            "fixable_count": 1,
        },
    ]


# -- dispatch --------------------------------------------------------------------------------


@pytest.mark.parametrize("output_format", FORMATS)
def test_every_format_renders_an_empty_report(output_format: str) -> None:
    out = render(output_format, [], unsafe=False)
    if output_format in {"full", "concise", "json-lines", "github"}:
        assert out == ""
    else:
        assert out.strip(), "machine formats write a document even when nothing was found"


def test_machine_formats_are_the_non_text_ones() -> None:
    assert set(FORMATS) - MACHINE_FORMATS == {"full", "concise"}
    with pytest.raises(ValueError, match="unknown output format"):
        render("xml", [], unsafe=False)
