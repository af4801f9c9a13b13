"""``amplint check``: exit codes, the exact text a user sees, machine-readable stdout,
statistics, quiet/silent/verbose, colour, the output file and internal errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.cli import cli

# AMP001 (safe fix), AMP002 (safe fix), and AMP001 without a fix (*args).
TRAIN = (
    "import torch\n"
    "scaler = torch.cuda.amp.GradScaler()\n"
    "d = torch.get_autocast_gpu_dtype()\n"
    "ctx = torch.cuda.amp.autocast(*args)\n"
)
OTHER = "import torch\nx = torch.get_autocast_cpu_dtype()\n"
CLEAN = "import torch\nscaler = torch.amp.GradScaler('cuda')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in ("AMPLINT_OUTPUT_FORMAT", "NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    (tmp_path / "b_other.py").write_text(OTHER)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_concise_report_is_sorted_and_summarised(project: Path) -> None:
    code, out, err = invoke("check", "--output-format", "concise", "-j", "2", ".")
    assert code == 1
    assert err == ""
    assert out == (
        "b_other.py:2:5: AMP002 [*] `torch.get_autocast_cpu_dtype()` is deprecated; "
        'use `torch.get_autocast_dtype("cpu")`\n'
        "pkg/train.py:2:10: AMP001 [*] `torch.cuda.amp.GradScaler(...)` is deprecated; "
        'use `torch.amp.GradScaler("cuda", ...)`\n'
        "pkg/train.py:3:5: AMP002 [*] `torch.get_autocast_gpu_dtype()` is deprecated; "
        'use `torch.get_autocast_dtype("cuda")`\n'
        "pkg/train.py:4:7: AMP001 `torch.cuda.amp.autocast(...)` is deprecated; "
        'use `torch.amp.autocast("cuda", ...)`\n'
        "Found 4 errors.\n"
        "[*] 3 fixable with the `--fix` option.\n"
    )


def test_full_is_the_default_format(project: Path) -> None:
    code, out, _ = invoke("check", "b_other.py")
    assert code == 1
    assert out == (
        "b_other.py:2:5: AMP002 [*] `torch.get_autocast_cpu_dtype()` is deprecated; "
        'use `torch.get_autocast_dtype("cpu")`\n'
        "  |\n"
        "1 | import torch\n"
        "2 | x = torch.get_autocast_cpu_dtype()\n"
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP002\n"
        "  |\n"
        '  = help: Replace with `torch.get_autocast_dtype("cpu")`\n'
        "\n"
        "Found 1 error.\n"
        "[*] 1 fixable with the `--fix` option.\n"
    )


def test_clean_files_pass(project: Path) -> None:
    assert invoke("check", "pkg/clean.py") == (0, "All checks passed!\n", "")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["."], 1),
        (["--exit-zero", "."], 0),
        (["-e", "."], 0),
        (["pkg/clean.py"], 0),
        (["--select", "AMP3", "."], 0),
        (["nope.py"], 2),
        (["--select", "AMP0X", "."], 2),
        (["--output-format", "xml", "."], 2),
        (["--no-such-option", "."], 2),
        (["--exit-zero", "nope.py", "pkg/clean.py"], 2),
    ],
)
def test_exit_codes(project: Path, args: list[str], expected: int) -> None:
    assert invoke("check", *args)[0] == expected


def test_missing_path_is_reported_after_checking_the_rest(project: Path) -> None:
    code, out, err = invoke("check", "--output-format", "concise", "nope.py", "b_other.py")
    assert code == 2
    assert err == "error: nope.py: no such file or directory\n"
    assert "b_other.py:2:5: AMP002" in out


def test_no_python_files_is_a_warning(project: Path) -> None:
    (project / "empty").mkdir()
    assert invoke("check", "empty") == (
        0,
        "All checks passed!\n",
        "warning: no Python files found under the given path(s)\n",
    )


def test_syntax_errors_are_reported_and_the_run_goes_on(project: Path) -> None:
    # Only files that mention a trigger word are parsed (see the AMP900 page).
    (project / "broken.py").write_text("import torch\nwith torch.cuda.amp.autocast(:\n    pass\n")
    code, out, _ = invoke("check", "--output-format", "concise", "broken.py", "b_other.py")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("b_other.py:2:5: AMP002")
    assert lines[1].startswith("broken.py:") and " AMP900 cannot parse" in lines[1]


# -- machine-readable stdout ------------------------------------------------------------------


def test_json_stdout_is_only_json(project: Path) -> None:
    code, out, _ = invoke("check", "--output-format", "json", ".")
    assert code == 1
    entries = json.loads(out)
    assert [(Path(e["filename"]).relative_to(project).as_posix(), e["code"]) for e in entries] == [
        ("b_other.py", "AMP002"),
        ("pkg/train.py", "AMP001"),
        ("pkg/train.py", "AMP002"),
        ("pkg/train.py", "AMP001"),
    ]
    assert entries[3]["fix"] is None
    assert json.loads(invoke("check", "--output-format", "json", "pkg/clean.py")[1]) == []


def test_json_lines_github_sarif_junit_carry_no_summary(project: Path) -> None:
    out = invoke("check", "--output-format", "json-lines", ".")[1]
    assert len([json.loads(line) for line in out.splitlines()]) == 4
    out = invoke("check", "--output-format", "github", ".")[1]
    assert len(out.splitlines()) == 4
    assert all(line.startswith("::error title=amplint (AMP00") for line in out.splitlines())
    assert "file=pkg/train.py,line=2,col=10,endLine=2,endColumn=37::AMP001 " in out
    document = json.loads(invoke("check", "--output-format", "sarif", ".")[1])
    assert [r["ruleId"] for r in document["runs"][0]["results"]] == [
        "AMP002",
        "AMP001",
        "AMP002",
        "AMP001",
    ]
    root = ET.fromstring(invoke("check", "--output-format", "junit", ".")[1])
    assert (root.get("tests"), root.get("failures")) == ("5", "4")  # + the clean file
    assert (
        json.loads(invoke("check", "--output-format", "sarif", "pkg/clean.py")[1])["runs"][0][
            "results"
        ]
        == []
    )


def test_output_format_from_the_environment(project: Path) -> None:
    out = invoke("check", ".", env={"AMPLINT_OUTPUT_FORMAT": "json-lines"})[1]
    assert json.loads(out.splitlines()[0])["code"] == "AMP002"
    assert invoke("check", ".", env={"AMPLINT_OUTPUT_FORMAT": "nope"})[0] == 2


def test_output_file(project: Path) -> None:
    code, out, _ = invoke("check", "--output-format", "json", "-o", "reports/amplint.json", ".")
    assert (code, out) == (1, "")
    assert len(json.loads((project / "reports" / "amplint.json").read_text())) == 4
    code, out, _ = invoke("check", "--output-format", "concise", "--output-file", "r.txt", ".")
    assert (code, out) == (1, "")
    assert (
        (project / "r.txt")
        .read_text()
        .endswith("Found 4 errors.\n[*] 3 fixable with the `--fix` option.\n")
    )


# -- statistics, quiet, silent, verbose, show-fixes ------------------------------------------


def test_statistics(project: Path) -> None:
    code, out, _ = invoke("check", "--statistics", ".")
    assert code == 1
    assert out == (
        "2\tAMP001\t[*] deprecated-amp-namespace\n"
        "2\tAMP002\t[*] deprecated-autocast-state\n"
        "Found 4 errors.\n"
        "[*] 3 fixable with the `--fix` option.\n"
    )
    rows = json.loads(invoke("check", "--statistics", "--output-format", "json", ".")[1])
    assert rows == [
        {
            "code": "AMP001",
            "name": "deprecated-amp-namespace",
            "count": 2,
            "fixable": True,
            "fixable_count": 1,
        },
        {
            "code": "AMP002",
            "name": "deprecated-autocast-state",
            "count": 2,
            "fixable": True,
            "fixable_count": 2,
        },
    ]


def test_quiet_drops_the_summary_and_silent_everything(project: Path) -> None:
    code, out, _ = invoke("check", "-q", "--output-format", "concise", ".")
    assert code == 1
    assert len(out.splitlines()) == 4 and "Found" not in out
    assert invoke("check", "-q", "pkg/clean.py") == (0, "", "")
    assert invoke("check", "--silent", ".") == (1, "", "")
    assert invoke("check", "-s", "nope.py")[0] == 2


def test_show_fixes_in_check_mode_lists_what_fix_would_do(project: Path) -> None:
    _, _, err = invoke("check", "--show-fixes", ".")
    assert err == (
        "`--fix` would fix 3 errors:\n"
        "- b_other.py:\n"
        "    1 \N{MULTIPLICATION SIGN} AMP002 (deprecated-autocast-state)\n"
        "- pkg/train.py:\n"
        "    1 \N{MULTIPLICATION SIGN} AMP001 (deprecated-amp-namespace)\n"
        "    1 \N{MULTIPLICATION SIGN} AMP002 (deprecated-autocast-state)\n"
    )


def test_verbose_logs_to_stderr(project: Path) -> None:
    (project / "amplint.toml").write_text('select = ["AMP002"]\n')
    code, out, err = invoke("check", "-v", "--output-format", "json", ".")
    assert code == 1
    assert len(json.loads(out)) == 2
    assert f"debug: configuration: {project / 'amplint.toml'}\n" in err
    assert "debug: rules: AMP002\n" in err
    assert "debug: 3 file(s) to check\n" in err


def test_colour_follows_force_color_and_no_color(project: Path) -> None:
    args = ("check", "--output-format", "concise", "b_other.py")
    assert "\x1b[" not in invoke(*args)[1]
    assert "\x1b[" in invoke(*args, env={"FORCE_COLOR": "1"})[1]
    assert "\x1b[" not in invoke(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})[1]
    # Never in machine-readable output, nor in a file.
    assert (
        "\x1b[" not in invoke("check", "--output-format", "json", ".", env={"FORCE_COLOR": "1"})[1]
    )


# -- internal errors -------------------------------------------------------------------------


def test_a_crashing_rule_is_amp999_exit_2_and_the_traceback_needs_verbose(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from amplint.rules.amp002_deprecated_autocast_state import DeprecatedAutocastState

    # libcst finds visitor methods by their __name__, so the stand-in keeps the name.
    def visit_Call(self: object, node: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(DeprecatedAutocastState, "visit_Call", visit_Call)
    # One job: the rule is patched in this process only.
    code, out, err = invoke("check", "-j", "1", "--output-format", "concise", "b_other.py")
    assert code == 2
    assert "AMP999" in out and "boom" in out
    assert "Traceback" not in out
    assert "internal error (AMP999)" in err
    code, out, _ = invoke("check", "-j", "1", "-v", "--output-format", "concise", "b_other.py")
    assert code == 2
    assert "Traceback (most recent call last)" in out and "RuntimeError: boom" in out
    # --exit-zero does not hide an internal error.
    assert invoke("check", "-j", "1", "--exit-zero", "b_other.py")[0] == 2
