"""Issue 14's adoption features: ``--add-noqa``, AMP901 ``unused-noqa``, ``amplint clean``
and ``--watch``."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.api import RunOptions, RunOutcome, check_source, fix_source_text, watch
from amplint.cli import cli
from amplint.diagnostics import Diagnostic, Location
from amplint.engine.add_noqa import add_noqa
from amplint.engine.config import ConfigError
from amplint.engine.unused_noqa import UnusedNoqaRule

TRAIN = "import torch\nscaler = torch.cuda.amp.GradScaler()\nd = torch.get_autocast_gpu_dtype()\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("AMPLINT_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("AMPLINT_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def finding(code: str, row: int, column: int = 1) -> Diagnostic:
    return Diagnostic(code, "m", "t.py", Location(row, column), Location(row, column + 1))


# -- --add-noqa --------------------------------------------------------------------------------


def test_add_noqa_appends_sorted_codes_and_merges_with_what_is_there() -> None:
    text = (
        "a = 1\n"
        "b = 2  # explained\n"
        "c = 3  # noqa: E501 long line\n"
        "d = 4  # noqa\n"
        "e = 5   \n"
        "f = 6"
    )
    diagnostics = [finding(code, row) for code, row in (
        ("AMP102", 1), ("AMP001", 1), ("AMP001", 1),
        ("AMP002", 2), ("AMP002", 3), ("AMP101", 4), ("AMP003", 5), ("AMP201", 6),
    )]  # fmt: skip
    added = add_noqa(text, diagnostics)
    assert added.text == (
        "a = 1  # noqa: AMP001, AMP102\n"
        "b = 2  # explained  # noqa: AMP002\n"
        "c = 3  # noqa: E501, AMP002 long line\n"
        "d = 4  # noqa\n"
        "e = 5  # noqa: AMP003\n"
        "f = 6  # noqa: AMP201"
    )
    assert (added.added, added.left) == (5, [])


def test_add_noqa_never_breaks_a_continued_line() -> None:
    text = (
        'x = f("""one\n'
        'two""")\n'
        "y = 1 + \\\n"
        "    2\n"
        "z = g(1,\n"
        "      2)\n"
    )
    diagnostics = [finding("AMP001", 1), finding("AMP001", 2), finding("AMP002", 3), finding("AMP003", 5)]
    added = add_noqa(text, diagnostics)
    assert added.text == (
        'x = f("""one\n'
        'two""")  # noqa: AMP001\n'
        "y = 1 + \\\n"
        "    2\n"
        "z = g(1,  # noqa: AMP003\n"
        "      2)\n"
    )
    ast.parse(added.text)
    assert [(d.code, d.location.row) for d in added.left] == [("AMP001", 1), ("AMP002", 3)]


def test_add_noqa_leaves_what_no_comment_silences() -> None:
    added = add_noqa("x = 1\n", [finding("AMP900", 1), finding("AMP999", 1)])
    assert added.text == "x = 1\n" and added.added == 0
    assert [d.code for d in added.left] == ["AMP900", "AMP999"]


def test_add_noqa_keeps_crlf_and_the_file_then_passes(project: Path) -> None:
    (project / "train.py").write_bytes(TRAIN.replace("\n", "\r\n").encode())
    (project / "clean.py").write_text("x = 1\n")
    code, out, _ = invoke("check", "--add-noqa", ".")
    assert (code, out) == (0, "Added 2 noqa directives.\n")
    assert (project / "train.py").read_bytes() == (
        b"import torch\r\n"
        b"scaler = torch.cuda.amp.GradScaler()  # noqa: AMP001\r\n"
        b"d = torch.get_autocast_gpu_dtype()  # noqa: AMP002\r\n"
    )
    assert (project / "clean.py").read_text() == "x = 1\n"
    assert invoke("check", ".") == (0, "All checks passed!\n", "")
    assert invoke("check", "--add-noqa", ".")[1] == "Added 0 noqa directives.\n"


def test_add_noqa_is_a_check_mode_of_its_own(project: Path) -> None:
    (project / "t.py").write_text(TRAIN)
    assert invoke("check", "--add-noqa", "--fix", ".")[0] == 2
    assert invoke("check", "--add-noqa", "-")[0] == 2
    assert (project / "t.py").read_text() == TRAIN


# -- AMP901 unused-noqa ------------------------------------------------------------------------


def amp901(text: str, *select: str) -> list[tuple[int, int, str]]:
    return [
        (d.location.row, d.location.column, d.message)
        for d in check_source(text, select=[*select, "AMP901"])
        if d.code == "AMP901"
    ]


def test_unused_noqa_judges_only_amplint_codes() -> None:
    text = (
        "import torch\n"
        "a = torch.cuda.amp.GradScaler()  # noqa: AMP001\n"  # used
        "b = torch.amp.GradScaler('cuda')  # noqa: AMP001\n"  # unused
        "c = 1  # noqa: E501\n"  # not ours
        "d = 1  # noqa\n"  # bare: may be for another tool
        "e = 1  # noqa: AMP002, AMP123\n"  # non-enabled, unknown
        "f = 1  # noqa: AMP999\n"  # nothing can silence AMP999
        "g = 1  # noqa: AMP001, AMP901\n"  # naming AMP901 keeps the directive
        's = "# noqa: AMP001"\n'  # a string, not a comment
    )
    assert amp901(text, "AMP001") == [
        (3, 35, "Unused `noqa` directive (unused: `AMP001`)"),
        (6, 8, "Unused `noqa` directive (non-enabled: `AMP002`; unknown: `AMP123`)"),
        (7, 8, "Unused `noqa` directive (unused: `AMP999`)"),
    ]


def test_unused_noqa_sees_a_finding_under_a_bare_noqa_too() -> None:
    text = "import torch\na = torch.cuda.amp.GradScaler()  # noqa: AMP002  # noqa\n"
    # The first directive is the one that counts (as for silencing): AMP002 is unused.
    assert amp901(text, "AMP0") == [(2, 34, "Unused `noqa` directive (unused: `AMP002`)")]


def test_unused_noqa_respects_per_file_enabling() -> None:
    text = "import torch\na = torch.cuda.amp.GradScaler()  # noqa: AMP001\n"
    assert amp901(text, "AMP001") == []
    assert amp901(text, "AMP002") == [(2, 34, "Unused `noqa` directive (non-enabled: `AMP001`)")]


def test_unused_noqa_is_off_by_default_and_its_fix_is_safe() -> None:
    text = "x = 1  # noqa: AMP001\n"
    assert check_source(text) == []
    assert fix_source_text(text, select=["ALL"]).new_text == "x = 1\n"


@pytest.mark.parametrize("source", UnusedNoqaRule.VALID)
def test_valid_examples(source: str) -> None:
    assert [d for d in check_source(source, select=["ALL"]) if d.code == "AMP901"] == []


@pytest.mark.parametrize("example", UnusedNoqaRule.INVALID, ids=lambda e: e.code.split("#")[1])
def test_invalid_examples_fire_and_fix(example: object) -> None:
    from amplint.engine.rule import Invalid

    assert isinstance(example, Invalid)
    found = [d for d in check_source(example.code, select=["AMP901"]) if d.code == "AMP901"]
    assert found
    if example.line is not None:
        assert (found[0].location.row, found[0].location.column) == (example.line, example.column)
    if example.message is not None:
        assert example.message in found[0].message
    fixed = fix_source_text(example.code, select=["AMP901"]).new_text
    assert fixed == example.fixed
    assert fix_source_text(fixed, select=["AMP901"]).new_text == fixed


def test_unused_noqa_from_the_command_line(project: Path) -> None:
    (project / "t.py").write_text(
        "import torch\n"
        "scaler = torch.amp.GradScaler('cuda')  # noqa: AMP001\n"
        "d = torch.get_autocast_gpu_dtype()  # noqa: AMP002\n"
    )
    code, out, _ = invoke("check", "--extend-select", "AMP901", "--output-format", "concise", ".")
    assert code == 1
    assert out == (
        "t.py:2:40: AMP901 [*] Unused `noqa` directive (unused: `AMP001`)\n"
        "Found 1 error.\n"
        "[*] 1 fixable with the `--fix` option.\n"
    )
    code, out, _ = invoke("fix", "--apply", "--extend-select", "AMP901", ".")
    assert (code, out) == (0, "Found 1 error (1 fixed, 0 remaining).\n")
    assert (project / "t.py").read_text() == (
        "import torch\n"
        "scaler = torch.amp.GradScaler('cuda')\n"
        "d = torch.get_autocast_gpu_dtype()  # noqa: AMP002\n"
    )
    assert invoke("rule", "AMP901")[1].startswith("# unused-noqa (AMP901)")


# -- amplint clean -----------------------------------------------------------------------------


def test_clean_removes_amplint_caches_and_nothing_else(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "t.py").write_text(TRAIN)
    (project / "t.py").write_text(TRAIN)
    invoke("check", ".")
    invoke("check", "--cache-dir", "elsewhere/c", ".")
    (project / "sub" / "amplint.toml").write_text("")
    invoke("check", "sub")
    (project / "precious").mkdir()
    (project / "precious" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    caches = {".amplint_cache", "elsewhere/c", "sub/.amplint_cache"}
    assert {p.parent.relative_to(project).as_posix() for p in project.rglob("CACHEDIR.TAG")} == caches | {"precious"}
    code, out, _ = invoke("clean")
    assert code == 0
    assert sorted(out.splitlines()) == sorted(f"Removed {name}" for name in caches)
    assert [p.parent.name for p in project.rglob("CACHEDIR.TAG")] == ["precious"]
    assert invoke("clean") == (0, "No cache to remove.\n", "")


# -- --watch -----------------------------------------------------------------------------------


def test_watch_runs_again_when_a_file_changes(project: Path) -> None:
    (project / "t.py").write_text(TRAIN)
    outcomes: list[RunOutcome | ConfigError] = []
    polls: list[int] = []

    def sleep(seconds: float) -> None:
        polls.append(len(outcomes))
        if len(polls) == 3:  # nothing changes for two polls, then the file is fixed
            (project / "t.py").write_text("x = 1\n")

    runs = watch(["."], RunOptions(cache=False, jobs=1), outcomes.append, max_runs=2, sleep=sleep)
    assert runs == 2 and polls == [1, 1, 1]
    first, second = outcomes
    assert isinstance(first, RunOutcome) and isinstance(second, RunOutcome)
    assert [d.code for d in first.diagnostics] == ["AMP001", "AMP002"]
    assert second.diagnostics == []


def _take_ctrl_c() -> None:
    """In the child, before it starts: take SIGINT as a terminal's Ctrl-C delivers it. A test
    run started in the background (`.ci/run &`) ignores SIGINT, and a child inherits that,
    so the interrupt these tests send would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.timeout(60)
def test_watch_from_the_command_line_until_ctrl_c(project: Path) -> None:
    (project / "t.py").write_text(TRAIN)
    process = subprocess.Popen(
        [sys.executable, "-m", "amplint", "check", "--watch", "--no-cache", "--output-format", "json", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        preexec_fn=_take_ctrl_c,
    )
    assert process.stdout is not None and process.stderr is not None
    stdout = process.stdout

    def next_report() -> list[dict[str, object]]:
        text = stdout.readline()
        while text.strip() != "[]" and not text.endswith("\n]\n"):
            text += stdout.readline()
        return json.loads(text)  # type: ignore[no-any-return]

    try:
        assert [entry["code"] for entry in next_report()] == ["AMP001", "AMP002"]
        time.sleep(0.1)  # a new mtime, whatever the file system's resolution
        (project / "t.py").write_text("x = 1\n")
        assert next_report() == []
    finally:
        process.send_signal(signal.SIGINT)
        # A shell reports 130 for both: CPython sometimes ends the process by SIGINT after
        # `main` has returned 130, which shows as -2 here.
        assert process.wait(timeout=60) in (130, -signal.SIGINT)
