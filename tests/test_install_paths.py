"""Issue 14: install paths true as written. The runtime extra never caps torch, no link
points at a repository address that does not exist, and rule links come from a
configurable base URL."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.cli import cli
from amplint.docs import rule_help_uri, rule_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TRAIN = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def test_the_runtime_extra_has_no_upper_bound_on_torch() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["runtime"] == ["torch>=2.4"]
    assert not any("torch" in dependency for dependency in project["dependencies"])


def test_no_link_names_the_repository_address_that_does_not_exist() -> None:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *ROOT.glob("docs/*.md"), *ROOT.glob("amplint/**/*.py")]
    offenders = [str(path.relative_to(ROOT)) for path in files if "github.com/amplint/amplint" in path.read_text(encoding="utf-8")]
    assert offenders == []


def test_the_readme_quick_start_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/amplint check fixtures/" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (test_command,) = re.findall(r"^(python3 -m venv \.venv && .*pytest) \|\| main=\$\?$", ci, re.M)
    assert "torch==2.13.0" in test_command
    assert test_command in readme
    # No pip command installs a package named amplint from an index: there is none.
    from_an_index = re.compile(r"pip install ['\"]?amplint(\[\w+\])?['\"]?(?=\s|$)(?!\s*@)")
    assert from_an_index.search("run: pip install amplint\n")
    for page in (ROOT / "README.md", ROOT / "docs" / "cli.md"):
        assert not from_an_index.search(page.read_text(encoding="utf-8")), page.name


def test_rule_links_without_and_with_a_base_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AMPLINT_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("AMPLINT_DOCS_URL", raising=False)
    (tmp_path / "t.py").write_text(TRAIN)
    assert (rule_url("AMP001"), rule_help_uri("AMP001")) == ("rules/AMP001.md", None)
    (entry,) = json.loads(CliRunner().invoke(cli, ["check", "--output-format", "json", "t.py"]).stdout)
    assert entry["url"] == "rules/AMP001.md"

    monkeypatch.setenv("AMPLINT_DOCS_URL", "https://git.example.com/ml/amplint/-/blob/main/rules/")
    page = "https://git.example.com/ml/amplint/-/blob/main/rules/AMP001.md"
    assert (rule_url("AMP001"), rule_help_uri("AMP001")) == (page, page)
    (entry,) = json.loads(CliRunner().invoke(cli, ["check", "--output-format", "json", "t.py"]).stdout)
    assert entry["url"] == page
    sarif = json.loads(CliRunner().invoke(cli, ["check", "--output-format", "sarif", "t.py"]).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == "https://git.example.com/ml/amplint/-/blob/main/rules"
    assert driver["rules"][0]["helpUri"] == page
    rules = json.loads(CliRunner().invoke(cli, ["rules", "--output-format", "json"]).stdout)
    assert rules[0]["url"] == page


def test_the_hooks_take_notebooks_too() -> None:
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert hooks.count("types_or: [python, pyi, jupyter]") == 2
