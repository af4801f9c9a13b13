"""The other commands (rule, rules, version, doctor), ``main()``'s exit codes, and the
real console entry points run as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint import __version__
from amplint import cli as cli_module
from amplint.api import registry
from amplint.cli import cli, main

SOURCE = "import torch\nd = torch.get_autocast_gpu_dtype()\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_rule_prints_the_page_by_code_or_name() -> None:
    code, out, _ = invoke("rule", "AMP002")
    assert code == 0
    assert out.startswith("# deprecated-autocast-state (AMP002)\n\n")
    for section in (
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Fix safety",
    ):
        assert f"\n{section}\n" in out
    assert invoke("rule", "deprecated-autocast-state")[1] == out
    assert invoke("rule", "amp002")[1] == out


def test_rule_all_and_json() -> None:
    code, out, _ = invoke("rule", "--all")
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("# ")] == [
        f"# {r.name} ({r.code})" for r in registry()
    ]
    entry = json.loads(invoke("rule", "AMP001", "--output-format", "json")[1])
    assert entry["code"] == "AMP001"
    assert entry["name"] == "deprecated-amp-namespace"
    assert entry["fix"] == "sometimes"
    assert entry["explanation"].startswith("# deprecated-amp-namespace (AMP001)")
    entries = json.loads(invoke("rule", "--all", "--output-format", "json")[1])
    assert [e["code"] for e in entries] == [r.code for r in registry()]


def test_rule_errors() -> None:
    code, _, err = invoke("rule", "AMP123")
    assert code == 2 and "unknown rule 'AMP123'" in err
    assert invoke("rule")[0] == 2
    assert invoke("rule", "AMP001", "--all")[0] == 2


def test_rules_lists_every_rule() -> None:
    code, out, _ = invoke("rules")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [r.code for r in registry()]
    assert any(line.startswith("AMP002  deprecated-autocast-state") for line in lines)
    entries = json.loads(invoke("rules", "--output-format", "json")[1])
    assert entries[0]["code"] == registry()[0].code
    assert set(entries[0]) == {
        "code",
        "name",
        "summary",
        "fix",
        "fix_applicability",
        "default",
        "url",
    }


def test_version_and_dash_dash_version_agree() -> None:
    assert invoke("version") == (0, f"amplint {__version__}\n", "")
    assert invoke("--version") == (0, f"amplint {__version__}\n", "")
    assert invoke("-V") == (0, f"amplint {__version__}\n", "")


def test_help_names_every_command() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    for command in ("check", "fix", "rule", "rules", "doctor", "version"):
        assert f"  {command} " in out


def test_doctor_without_the_runtime_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amplint.runtime.doctor", None)
    code, _, err = invoke("doctor")
    assert code == 2
    assert "`amplint doctor` is not available" in err


def test_doctor_returns_the_runtime_status(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("amplint.runtime.doctor")
    fake.main = lambda: 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "amplint.runtime.doctor", fake)
    assert invoke("doctor")[0] == 3


# -- main() ----------------------------------------------------------------------------------


def test_main_returns_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(SOURCE)
    assert main(["check", "--output-format", "concise", "a.py"]) == 1
    assert main(["check", "--exit-zero", "a.py"]) == 0
    assert main(["--version"]) == 0
    assert main(["check", "--bogus"]) == 2
    assert main(["nonsense"]) == 2
    assert main(["check", "--select", "NOPE", "a.py"]) == 2
    captured = capsys.readouterr()
    assert "No such option '--bogus'" in captured.err


def test_ctrl_c_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(SOURCE)

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "run_paths", interrupted)
    assert main(["check", "a.py"]) == 130


# -- real processes --------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("AMPLINT_OUTPUT_FORMAT", None)
    return env


def test_python_dash_m(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SOURCE)
    result = subprocess.run(
        [sys.executable, "-m", "amplint", "check", "--output-format", "concise", "a.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert result.returncode == 1
    assert result.stdout.startswith("a.py:2:5: AMP002 [*] ")
    fixed = subprocess.run(
        [sys.executable, "-m", "amplint", "fix", "-"],
        input=SOURCE,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert (fixed.returncode, fixed.stdout) == (
        0,
        'import torch\nd = torch.get_autocast_dtype("cuda")\n',
    )


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # Far more output than a pipe buffers, so writing blocks and then fails.
    (tmp_path / "m.py").write_text("import torch\n" + "d = torch.get_autocast_gpu_dtype()\n" * 1500)
    process = subprocess.Popen(
        [sys.executable, "-m", "amplint", "check", "--output-format", "concise", "m.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=120)
    assert first.startswith(b"m.py:2:5: AMP002")
    assert "Traceback" not in stderr
    assert process.returncode == 1


def test_the_cli_reference_documents_every_option() -> None:
    reference = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    for name in ("check", "fix"):
        command = cli.commands[name]
        for parameter in command.params:
            for option in [*parameter.opts, *parameter.secondary_opts]:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}" in reference, f"docs/cli.md does not mention {option}"
    for name in cli.commands:
        assert f"`amplint {name}" in reference, f"docs/cli.md does not mention `amplint {name}`"
