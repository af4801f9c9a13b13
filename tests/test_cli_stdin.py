"""Source on stdin (``-`` or ``--stdin-filename``), as editors and pipelines use it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.cli import cli

SOURCE = "import torch\nd = torch.get_autocast_gpu_dtype()\n"
FIXED = 'import torch\nd = torch.get_autocast_dtype("cuda")\n'
PARTLY = SOURCE + "ctx = torch.cuda.amp.autocast(*args)\n"


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("AMPLINT_OUTPUT_FORMAT", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, stdin: bytes | str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_check_reports_under_the_given_name(project: Path) -> None:
    code, out, _ = invoke(
        "check", "--output-format", "concise", "--stdin-filename", "src/mod.py", stdin=SOURCE
    )
    assert code == 1
    assert out.startswith("src/mod.py:2:5: AMP002 [*] ")
    _, out, _ = invoke(
        "check", "--output-format", "json", "--stdin-filename", "mod.py", "-", stdin=SOURCE
    )
    assert json.loads(out)[0]["filename"] == str(project / "mod.py")
    assert invoke("check", "-", stdin="x = 1\n") == (0, "All checks passed!\n", "")


def test_dash_without_a_name(project: Path) -> None:
    code, out, _ = invoke("check", "--output-format", "json", "-", stdin=SOURCE)
    assert code == 1
    assert json.loads(out)[0]["filename"] == "-"


def test_fix_writes_the_fixed_source_to_stdout(project: Path) -> None:
    assert invoke("fix", "--stdin-filename", "mod.py", "-", stdin=SOURCE) == (0, FIXED, "")
    assert invoke("fix", "--apply", "-", stdin=SOURCE) == (0, FIXED, "")
    assert invoke("check", "--fix", "--stdin-filename", "mod.py", stdin=SOURCE) == (0, FIXED, "")
    assert not (project / "mod.py").exists()


def test_fix_reports_what_remains_on_stderr(project: Path) -> None:
    code, out, err = invoke("fix", "--stdin-filename", "mod.py", stdin=PARTLY)
    assert code == 1
    assert out == FIXED + "ctx = torch.cuda.amp.autocast(*args)\n"
    assert err == (
        "mod.py:3:7: AMP001 `torch.cuda.amp.autocast(...)` is deprecated; "
        'use `torch.amp.autocast("cuda", ...)`\n'
    )
    assert invoke("fix", "--exit-zero", "-", stdin=PARTLY)[0] == 0
    assert invoke("fix", "--exit-non-zero-on-fix", "-", stdin=SOURCE)[0] == 1


def test_fix_echoes_unchanged_bytes_exactly(project: Path) -> None:
    data = "# caf\xe9\r\nx = 1\r\n".encode()
    result = CliRunner().invoke(cli, ["fix", "-"], input=data)
    assert (result.exit_code, result.stdout_bytes) == (0, data)
    # Undecodable input (latin-1 without a coding cookie) is echoed untouched, and said so.
    data = "# caf\xe9\r\nx = 1\r\n".encode("latin-1")
    result = CliRunner().invoke(cli, ["fix", "-"], input=data)
    assert (result.exit_code, result.stdout_bytes) == (1, data)
    assert result.stderr.startswith("-:1:6: AMP900 cannot decode as utf-8")


def test_check_diff_prints_a_diff(project: Path) -> None:
    code, out, err = invoke("check", "--diff", "--stdin-filename", "mod.py", stdin=SOURCE)
    assert code == 1
    assert out == (
        "--- a/mod.py\n"
        "+++ b/mod.py\n"
        "@@ -1,2 +1,2 @@\n"
        " import torch\n"
        "-d = torch.get_autocast_gpu_dtype()\n"
        '+d = torch.get_autocast_dtype("cuda")\n'
    )
    assert err == "Would fix 1 error.\n"


def test_force_exclude_passes_excluded_names_through(project: Path) -> None:
    (project / "amplint.toml").write_text('extend-exclude = ["legacy/"]\n')
    args = ("--force-exclude", "--stdin-filename", "legacy/old.py")
    assert invoke("check", *args, stdin=SOURCE) == (0, "", "")
    assert invoke("fix", *args, stdin=SOURCE) == (0, SOURCE, "")
    # Without --force-exclude the name is checked, as an explicitly named file would be.
    assert invoke("check", "--stdin-filename", "legacy/old.py", stdin=SOURCE)[0] == 1


def test_configuration_and_per_file_ignores_follow_the_name(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "amplint.toml").write_text('[per-file-ignores]\n"tests/*" = ["AMP002"]\n')
    assert invoke("check", "--stdin-filename", "sub/tests/t.py", stdin=SOURCE)[0] == 0
    assert invoke("check", "--stdin-filename", "sub/src/t.py", stdin=SOURCE)[0] == 1
    (project / "sub" / "amplint.toml").write_text('ignore = ["AMP002"]\n')
    assert invoke("check", "--stdin-filename", "sub/t.py", stdin=SOURCE)[0] == 0
    assert invoke("check", "--stdin-filename", "t.py", stdin=SOURCE)[0] == 1


def test_paths_next_to_stdin_filename_are_ignored_with_a_warning(project: Path) -> None:
    (project / "real.py").write_text(SOURCE)
    code, _, err = invoke(
        "check",
        "--output-format",
        "concise",
        "--stdin-filename",
        "x.py",
        "real.py",
        stdin="y = 1\n",
    )
    assert code == 0
    assert err == "warning: ignoring real.py in favour of standard input (--stdin-filename)\n"
