"""The command line, end to end: exit codes, formats, selection, config, fix modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.cli import cli

DEPRECATED = (
    "import torch\nscaler = torch.cuda.amp.GradScaler()\nd = torch.get_autocast_gpu_dtype()\n"
)
FIXED = (
    'import torch\nscaler = torch.amp.GradScaler("cuda")\nd = torch.get_autocast_dtype("cuda")\n'
)
CLEAN = "import torch\nscaler = torch.amp.GradScaler('cuda')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(DEPRECATED)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_check_reports_and_exits_1(project: Path) -> None:
    code, out, _ = invoke("check", "--output-format", "concise", ".")
    assert code == 1
    assert "pkg/train.py:2:10: AMP001 [*]" in out
    assert "pkg/train.py:3:5: AMP002 [*]" in out
    assert "Found 2 errors." in out


def test_clean_tree_exits_0(project: Path) -> None:
    code, out, _ = invoke("check", "pkg/clean.py")
    assert code == 0
    assert "All checks passed!" in out


def test_exit_zero(project: Path) -> None:
    assert invoke("check", "--exit-zero", ".")[0] == 0


def test_missing_path_exits_2_after_checking_the_rest(project: Path) -> None:
    code, out, err = invoke("check", "--output-format", "concise", "nope.py", "pkg")
    assert code == 2
    assert "nope.py" in err
    assert "AMP001" in out


def test_unknown_selector_is_a_usage_error(project: Path) -> None:
    code, _, err = invoke("check", "--select", "XYZ1", ".")
    assert code == 2
    assert "unknown rule selector" in err


@pytest.mark.parametrize(
    ("args", "codes"),
    [
        (["--select", "AMP002"], {"AMP002"}),
        (["--ignore", "AMP002"], {"AMP001"}),
        (["--select", "AMP0", "--ignore", "AMP001"], {"AMP002"}),
        (["--select", "AMP002", "--ignore", "AMP0"], {"AMP002"}),  # more specific select wins
        (["--select", "ALL", "--ignore", "AMP00"], set()),
        (["--select", "AMP001,AMP002"], {"AMP001", "AMP002"}),
    ],
)
def test_selection(project: Path, args: list[str], codes: set[str]) -> None:
    _, out, _ = invoke("check", "--output-format", "json", *args, ".")
    assert {entry["code"] for entry in json.loads(out)} == codes


def test_json_uses_ruffs_schema(project: Path) -> None:
    _, out, _ = invoke("check", "--output-format", "json", "pkg/train.py")
    entries = json.loads(out)
    first = entries[0]
    assert set(first) >= {
        "code",
        "message",
        "filename",
        "location",
        "end_location",
        "fix",
        "noqa_row",
        "url",
    }
    assert first["filename"] == str(project / "pkg" / "train.py")
    assert first["location"] == {"row": 2, "column": 10}
    assert first["fix"]["applicability"] == "safe"
    edit = first["fix"]["edits"][0]
    assert edit["content"] == 'torch.amp.GradScaler("cuda")'
    assert edit["location"] == {"row": 2, "column": 10}
    assert first["url"] == "rules/AMP001.md"  # no AMPLINT_DOCS_URL: the page in this repository


def test_json_lines(project: Path) -> None:
    _, out, _ = invoke("check", "--output-format", "json-lines", "pkg/train.py")
    lines = out.strip().splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["code"] for line in lines] == ["AMP001", "AMP002"]


def test_github_annotations(project: Path) -> None:
    _, out, _ = invoke("check", "--output-format", "github", "pkg/train.py")
    assert out.splitlines()[0].startswith(
        "::error title=amplint (AMP001),file=pkg/train.py,line=2,col=10,endLine=2,endColumn="
    )
    assert "::AMP001 " in out.splitlines()[0]


def test_sarif_structure_and_fixes(project: Path) -> None:
    _, out, _ = invoke("check", "--output-format", "sarif", "pkg/train.py")
    document = json.loads(out)
    assert document["version"] == "2.1.0"
    run = document["runs"][0]
    assert run["tool"]["driver"]["name"] == "amplint"
    assert {"AMP001", "AMP002"} <= {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    result = run["results"][0]
    assert result["ruleId"] == "AMP001"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 10)
    replacement = result["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement["insertedContent"]["text"] == 'torch.amp.GradScaler("cuda")'


def test_junit_parses(project: Path) -> None:
    _, out, _ = invoke("check", "--output-format", "junit", ".")
    root = ET.fromstring(out)
    assert root.tag == "testsuites"
    failures = root.findall(".//failure")
    assert {f.get("type") for f in failures} == {"AMP001", "AMP002"}


def test_full_format_shows_the_line_and_a_caret(project: Path) -> None:
    _, out, _ = invoke("check", "--select", "AMP002", "pkg/train.py")
    assert "3 | d = torch.get_autocast_gpu_dtype()" in out
    assert "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP002" in out
    assert "= help: Replace with" in out


def test_statistics(project: Path) -> None:
    _, out, _ = invoke("check", "--statistics", ".")
    assert "1\tAMP001\t[*] deprecated-amp-namespace" in out


def test_fix_without_apply_prints_a_diff_and_changes_nothing(project: Path) -> None:
    code, out, _ = invoke("fix", ".")
    assert code == 1
    assert "-scaler = torch.cuda.amp.GradScaler()" in out
    assert '+scaler = torch.amp.GradScaler("cuda")' in out
    assert (project / "pkg" / "train.py").read_text() == DEPRECATED


def test_fix_apply_writes_and_a_second_run_finds_nothing(project: Path) -> None:
    code, out, _ = invoke("fix", "--apply", ".")
    assert code == 0
    assert (project / "pkg" / "train.py").read_text() == FIXED
    assert "2 fixed, 0 remaining" in out
    assert invoke("fix", ".")[0] == 0
    assert invoke("check", ".")[0] == 0


def test_check_fix_is_an_alias_and_exit_non_zero_on_fix(project: Path) -> None:
    code, _, _ = invoke("check", "--fix", "--exit-non-zero-on-fix", ".")
    assert code == 1
    assert (project / "pkg" / "train.py").read_text() == FIXED


def test_check_diff(project: Path) -> None:
    code, out, _ = invoke("check", "--diff", ".")
    assert code == 1 and "+++ b/pkg/train.py" in out


def test_show_fixes(project: Path) -> None:
    _, _, err = invoke("fix", "--apply", "--show-fixes", ".")
    assert "1 × AMP001 (deprecated-amp-namespace)" in err  # noqa: RUF001 - Ruff's own sign


def test_stdin_check_and_fix(project: Path) -> None:
    code, out, _ = invoke(
        "check", "--output-format", "concise", "--stdin-filename", "mod.py", "-", stdin=DEPRECATED
    )
    assert code == 1 and "mod.py:2:10: AMP001" in out
    code, out, _ = invoke("fix", "--stdin-filename", "mod.py", "-", stdin=DEPRECATED)
    assert out == FIXED


def test_noqa_silences_only_named_codes(project: Path) -> None:
    (project / "pkg" / "train.py").write_text(
        "import torch\n"
        "a = torch.cuda.amp.GradScaler()  # noqa: AMP001\n"
        "b = torch.cuda.amp.GradScaler()  # noqa: E501\n"
        "c = torch.cuda.amp.GradScaler()  # noqa\n"
        "d = torch.cuda.amp.GradScaler()  # noqa: AMP002, AMP001\n"
    )
    _, out, _ = invoke("check", "--output-format", "json", "pkg/train.py")
    assert [entry["location"]["row"] for entry in json.loads(out)] == [3]


def test_config_in_pyproject_is_found_upward_and_cli_overrides(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.amplint]\nignore = ["AMP001"]\n')
    _, out, _ = invoke("check", "--output-format", "json", "pkg")
    assert {e["code"] for e in json.loads(out)} == {"AMP002"}
    _, out, _ = invoke("check", "--output-format", "json", "--select", "AMP001", "pkg")
    assert {e["code"] for e in json.loads(out)} == set()  # config ignore still applies, as in Ruff
    _, out, _ = invoke("check", "--output-format", "json", "--extend-select", "AMP001", "pkg")
    assert {e["code"] for e in json.loads(out)} == {"AMP002"}


def test_amplint_toml_and_per_file_ignores(project: Path) -> None:
    (project / "amplint.toml").write_text('[per-file-ignores]\n"pkg/train.py" = ["AMP002"]\n')
    _, out, _ = invoke("check", "--output-format", "json", ".")
    assert {e["code"] for e in json.loads(out)} == {"AMP001"}


def test_bad_config_exits_2(project: Path) -> None:
    (project / "amplint.toml").write_text('select = "AMP001"\n')
    code, _, err = invoke("check", ".")
    assert code == 2 and "must be a list" in err


def test_explicit_config_path(project: Path, tmp_path: Path) -> None:
    config = project / "custom.toml"
    config.write_text('select = ["AMP002"]\n')
    _, out, _ = invoke("check", "--output-format", "json", "--config", str(config), ".")
    assert {e["code"] for e in json.loads(out)} == {"AMP002"}


def test_gitignore_and_exclude(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("pkg/train.py\n")
    assert invoke("check", ".")[0] == 0
    # A file named explicitly is checked anyway, unless --force-exclude.
    assert invoke("check", "pkg/train.py")[0] == 1
    assert invoke("check", "--force-exclude", "pkg/train.py")[0] == 0
    assert invoke("check", "--no-respect-gitignore", ".")[0] == 1
    assert invoke("check", "--no-respect-gitignore", "--extend-exclude", "pkg", ".")[0] == 0


def test_rule_pages_and_listing() -> None:
    code, out, _ = invoke("rule", "AMP001")
    assert (
        code == 0
        and out.startswith("# deprecated-amp-namespace (AMP001)")
        and "## Fix safety" in out
    )
    code, out, _ = invoke("rules")
    assert "AMP002  deprecated-autocast-state" in out
    code, out, _ = invoke("rules", "--output-format", "json")
    assert {"code": "AMP001"}.items() <= json.loads(out)[0].items()
    assert invoke("rule", "AMP123")[0] == 2


def test_python_dash_m_and_version(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "amplint", "check", "--output-format", "concise", "pkg"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 1
    assert "AMP001" in result.stdout
    version = subprocess.run(
        [sys.executable, "-m", "amplint", "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and "amplint" in version.stdout
