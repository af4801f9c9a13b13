"""Issue 14: output that never contradicts itself. Errors are counted in the summary, a
file that could not be written still has its findings reported (in every format),
every ``--output-format`` is honoured by every mode, and an unreadable directory is said."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.cli import cli
from amplint.engine import discovery

TRAIN = "import torch\nscaler = torch.cuda.amp.GradScaler()\nd = torch.get_autocast_gpu_dtype()\n"
TRAIN_FIXED = 'import torch\nscaler = torch.amp.GradScaler("cuda")\nd = torch.get_autocast_dtype("cuda")\n'
CLEAN = "import torch\nscaler = torch.amp.GradScaler('cuda')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for variable in ("AMPLINT_OUTPUT_FORMAT", "GITHUB_WORKSPACE", "AMPLINT_DOCS_URL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clean.py").write_text(CLEAN)
    yield tmp_path
    for path in tmp_path.rglob("*"):  # let pytest remove what the tests made read-only
        path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR | stat.S_IXUSR)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


# -- errors are counted ------------------------------------------------------------------------


def test_a_missing_path_never_passes(project: Path) -> None:
    code, out, err = invoke("check", "missing.py")
    assert code == 2
    assert err == "error: missing.py: no such file or directory\n"
    assert out == "1 path could not be checked.\n"
    assert "All checks passed!" not in out
    code, out, _ = invoke("check", "missing.py", "clean.py", "gone/")
    assert (code, out) == (2, "2 paths could not be checked.\n")


def test_a_missing_path_beside_findings(project: Path) -> None:
    (project / "train.py").write_text(TRAIN)
    code, out, _ = invoke("check", "--output-format", "concise", "missing.py", "train.py")
    assert code == 2
    assert out.endswith(
        "Found 2 errors.\n[*] 2 fixable with the `--fix` option.\n1 path could not be checked.\n"
    )
    _, _, err = invoke("fix", "missing.py", "train.py")
    assert err.endswith("Would fix 2 errors.\n1 path could not be checked.\n")


def test_machine_formats_mark_a_failed_run(project: Path) -> None:
    code, out, _ = invoke("check", "--output-format", "sarif", "missing.py", "clean.py")
    assert code == 2
    assert json.loads(out)["runs"][0]["invocations"] == [{"executionSuccessful": False}]


# -- a file that cannot be written -------------------------------------------------------------


def read_only(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return path


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "json-lines", "github", "sarif", "junit"])
def test_a_read_only_file_gets_its_error_and_its_findings_in_every_format(project: Path, output_format: str) -> None:
    read_only(project / "train.py", TRAIN)
    (project / "other.py").write_text(TRAIN)
    code, out, err = invoke("fix", "--apply", "--output-format", output_format, ".")
    assert code == 2
    assert "error: train.py: file is read-only; not written" in err
    assert (project / "train.py").read_text() == TRAIN
    assert (project / "other.py").read_text() == TRAIN_FIXED
    if output_format == "json":
        found = [(Path(e["filename"]).name, e["code"]) for e in json.loads(out)]
    elif output_format == "json-lines":
        found = [(Path(json.loads(line)["filename"]).name, json.loads(line)["code"]) for line in out.splitlines()]
    elif output_format == "sarif":
        run = json.loads(out)["runs"][0]
        found = [
            (Path(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).name, r["ruleId"])
            for r in run["results"]
        ]
        assert run["invocations"] == [{"executionSuccessful": False}]
    elif output_format == "junit":
        found = [
            (Path(case.get("file", "")).name, failure.get("type", ""))
            for case in ET.fromstring(out).iter("testcase")
            for failure in case.iter("failure")
        ]
    elif output_format == "github":
        found = [("train.py", line.split("::")[2].split()[0]) for line in out.splitlines() if "file=train.py" in line]
    else:
        found = [("train.py", code) for code, where in (("AMP001", "2:10"), ("AMP002", "3:5")) if f"train.py:{where}: {code}" in out]
        assert out.endswith(
            "Found 4 errors (2 fixed, 2 remaining).\n[*] 2 fixable with the `--fix` option.\n1 file could not be written.\n"
        )
    assert sorted(found) == [("train.py", "AMP001"), ("train.py", "AMP002")]


def test_add_noqa_on_a_read_only_file_is_an_error(project: Path) -> None:
    read_only(project / "train.py", TRAIN)
    code, out, err = invoke("check", "--add-noqa", "--output-format", "concise", "train.py")
    assert code == 2
    assert "error: train.py: file is read-only; not written" in err
    assert out.endswith(
        "train.py:3:5: AMP002 [*] `torch.get_autocast_gpu_dtype()` is deprecated; "
        'use `torch.get_autocast_dtype("cuda")`\n'
        "Added 0 noqa directives.\n"
        "2 findings could not be silenced (listed above).\n"
        "1 file could not be written.\n"
    )


# -- every format in every mode ----------------------------------------------------------------


def test_fix_with_json_prints_the_findings_with_their_fixes_not_a_diff(project: Path) -> None:
    (project / "train.py").write_text(TRAIN)
    code, out, err = invoke("fix", "--output-format", "json", ".")
    assert code == 1  # changes pending, as for the diff
    entries = json.loads(out)
    assert [(e["code"], e["fix"]["edits"][0]["content"]) for e in entries] == [
        ("AMP001", 'torch.amp.GradScaler("cuda")'),
        ("AMP002", 'torch.get_autocast_dtype("cuda")'),
    ]
    assert "---" not in out and err == ""
    assert (project / "train.py").read_text() == TRAIN
    code, out, _ = invoke("fix", "--output-format", "json", "clean.py")
    assert (code, json.loads(out)) == (0, [])
    code, out, _ = invoke("check", "--diff", "--output-format", "sarif", "train.py")
    assert code == 1 and [r["ruleId"] for r in json.loads(out)["runs"][0]["results"]] == ["AMP001", "AMP002"]


def test_statistics_honour_the_output_format_in_every_mode(project: Path) -> None:
    (project / "train.py").write_text(TRAIN)
    rows = [
        {"code": "AMP001", "name": "deprecated-amp-namespace", "count": 1, "fixable": True, "fixable_count": 1},
        {"code": "AMP002", "name": "deprecated-autocast-state", "count": 1, "fixable": True, "fixable_count": 1},
    ]
    for mode in (["check"], ["fix"], ["check", "--diff"]):
        code, out, _ = invoke(*mode, "--statistics", "--output-format", "json", "train.py")
        assert (code, json.loads(out)) == (1, rows), mode
        code, out, _ = invoke(*mode, "--statistics", "--output-format", "json-lines", "train.py")
        assert [json.loads(line) for line in out.splitlines()] == rows
    code, out, _ = invoke("fix", "--statistics", "train.py")
    assert out == "1\tAMP001\t[*] deprecated-amp-namespace\n1\tAMP002\t[*] deprecated-autocast-state\n"
    for output_format in ("sarif", "junit", "github"):
        code, _, err = invoke("check", "--statistics", "--output-format", output_format, "train.py")
        assert code == 2 and "--statistics" in err


def test_stdin_fix_reports_what_remains_in_the_chosen_format(project: Path) -> None:
    partly = TRAIN + "ctx = torch.cuda.amp.autocast(*args)\n"
    result = CliRunner().invoke(cli, ["fix", "--output-format", "json", "--stdin-filename", "m.py"], input=partly)
    assert result.exit_code == 1
    assert result.stdout == TRAIN_FIXED + "ctx = torch.cuda.amp.autocast(*args)\n"
    assert [entry["code"] for entry in json.loads(result.stderr)] == ["AMP001"]


# -- directories that cannot be read -----------------------------------------------------------


def test_an_unreadable_directory_is_a_warning(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "locked").mkdir()
    (project / "locked" / "x.py").write_text(TRAIN)
    real = os.scandir

    def scandir(path: str | os.PathLike[str]) -> object:
        # chmod 000 does not stop root, who runs some CI containers: refuse it here.
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(discovery.os, "scandir", scandir)  # type: ignore[attr-defined]
    code, out, err = invoke("check", ".")
    assert code == 0
    assert err == "warning: locked: cannot read directory: Permission denied; skipped\n"
    assert out == "All checks passed!\n"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_directory_for_real(project: Path) -> None:
    locked = project / "locked"
    locked.mkdir()
    (locked / "x.py").write_text(TRAIN)
    locked.chmod(0)
    code, _, err = invoke("check", ".")
    assert code == 0
    assert "locked: cannot read directory" in err
