"""The hooks in ``.pre-commit-hooks.yaml``, and the README's ``repo: local`` snippet, run by
real pre-commit from a throwaway git repository, the way a user's
``.pre-commit-config.yaml`` would run them.

pre-commit installs amplint into an environment of its own with pip, so this test
needs the package index (or pip's cache); when pip cannot reach it the test is
skipped, while any other installation failure fails it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BAD = "import torch\nd = torch.get_autocast_gpu_dtype()\n"
FIXED = 'import torch\nd = torch.get_autocast_dtype("cuda")\n'
GOOD = "import torch\nscaler = torch.amp.GradScaler('cuda')\n"
NETWORK_TROUBLE = (
    "Could not find a version that satisfies",
    "No matching distribution found",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ReadTimeoutError",
)

pytest.importorskip("pre_commit", reason="pre-commit is not installed")
yaml = pytest.importorskip("yaml")  # pre-commit's own dependency
if shutil.which("git") is None:  # pragma: no cover - every CI machine has git
    pytest.skip("git is not installed", allow_module_level=True)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=amplint", "-c", "user.email=amplint@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def snapshot_of_this_checkout(destination: Path) -> str:
    """A one-commit repository holding this working tree (committed or not); its sha."""
    try:
        listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    except (subprocess.CalledProcessError, OSError):
        pytest.skip("not a git checkout of amplint")
    for name in sorted(set(filter(None, listed.split("\0")))):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git(destination, "init", "-q")
    git(destination, "add", "-A")
    git(destination, "commit", "-q", "-m", "snapshot")
    return git(destination, "rev-parse", "HEAD").strip()


def test_hook_definitions() -> None:
    hooks = {
        hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    }
    assert set(hooks) == {"amplint", "amplint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi", "jupyter"]
        assert hook["require_serial"] is False
        # pre-commit names files explicitly; exclusions must still apply to them.
        assert "--force-exclude" in hook["entry"].split()
    assert hooks["amplint"]["entry"].split()[:2] == ["amplint", "check"]
    assert hooks["amplint-fix"]["entry"].split()[:3] == ["amplint", "fix", "--apply"]


def make_project(tmp_path: Path, config: Mapping[str, object]) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / "bad.py").write_text(BAD)
    (project / "good.py").write_text(GOOD)
    (project / "stub.pyi").write_text(BAD)
    (project / "notes.txt").write_text(BAD)  # not Python: pre-commit must not pass it
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(BAD)  # excluded by default, even when named
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "start")
    return project


def runner(tmp_path: Path, project: Path) -> Callable[[str], subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "NO_COLOR": "1"}
    env.pop("AMPLINT_OUTPUT_FORMAT", None)

    def pre_commit(hook: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", hook, "--all-files", "--color", "never"],
            cwd=project,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if result.returncode == 3:  # pre-commit's own failure: installing the environment
            log = tmp_path / "pre-commit-home" / "pre-commit.log"
            details = result.stdout + result.stderr + (log.read_text() if log.exists() else "")
            if any(marker in details for marker in NETWORK_TROUBLE):
                pytest.skip("pip could not reach the package index to install the hook")
            pytest.fail(f"pre-commit could not install amplint:\n{details}")
        return result

    return pre_commit


def test_hooks_run_by_pre_commit(tmp_path: Path) -> None:
    source = tmp_path / "amplint-src"
    source.mkdir()
    sha = snapshot_of_this_checkout(source)
    config = {"repos": [{"repo": str(source), "rev": sha, "hooks": [{"id": "amplint"}, {"id": "amplint-fix"}]}]}
    project = make_project(tmp_path, config)
    pre_commit = runner(tmp_path, project)

    check = pre_commit("amplint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "bad.py:2:5: AMP002" in check.stdout
    assert "stub.pyi:2:5: AMP002" in check.stdout
    assert "good.py" not in check.stdout
    assert "notes.txt" not in check.stdout
    assert "gen.py" not in check.stdout

    fix = pre_commit("amplint-fix")
    assert fix.returncode == 1, fix.stdout + fix.stderr  # files were modified
    assert (project / "bad.py").read_text() == FIXED
    assert (project / "stub.pyi").read_text() == FIXED
    assert (project / "good.py").read_text() == GOOD
    assert (project / "notes.txt").read_text() == BAD
    assert (project / "build" / "gen.py").read_text() == BAD

    again = pre_commit("amplint")
    assert again.returncode == 0, again.stdout + again.stderr
    assert pre_commit("amplint-fix").returncode == 0


def readme_local_hook() -> dict[str, object]:
    """The README's ``repo: local`` pre-commit configuration, exactly as written there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL)]
    (config,) = [block for block in blocks if block["repos"][0]["repo"] == "local"]
    assert isinstance(config, dict)
    return config


def test_the_readme_local_hook_runs_with_pre_commit(tmp_path: Path) -> None:
    source = tmp_path / "amplint-src"
    source.mkdir()
    snapshot_of_this_checkout(source)
    config = readme_local_hook()
    (hook,) = config["repos"][0]["hooks"]  # type: ignore[index]
    # The README names a placeholder for where amplint comes from; here, this checkout.
    (dependency,) = hook["additional_dependencies"]
    assert dependency.startswith("amplint @ git+")
    hook["additional_dependencies"] = [str(source)]
    project = make_project(tmp_path, config)
    pre_commit = runner(tmp_path, project)

    check = pre_commit("amplint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "bad.py:2:5: AMP002" in check.stdout
    assert "stub.pyi:2:5: AMP002" in check.stdout
    assert "good.py" not in check.stdout
    assert "notes.txt" not in check.stdout
    assert "gen.py" not in check.stdout
    (project / "bad.py").write_text(GOOD)
    (project / "stub.pyi").write_text(GOOD)
    assert pre_commit("amplint").returncode == 0


def notebook_with(source: str) -> str:
    """A small nbformat 4 notebook: a markdown cell, then a code cell holding ``source``."""
    return json.dumps(
        {
            "cells": [
                {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Mixed precision"]},
                {
                    "cell_type": "code",
                    "execution_count": 1,
                    "id": "train",
                    "metadata": {},
                    "outputs": [],
                    "source": source.splitlines(keepends=True),
                },
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


def test_a_notebook_fails_the_hook_then_passes_after_fix_apply(tmp_path: Path) -> None:
    source = tmp_path / "amplint-src"
    source.mkdir()
    snapshot_of_this_checkout(source)
    config = readme_local_hook()
    (hook,) = config["repos"][0]["hooks"]  # type: ignore[index]
    hook["additional_dependencies"] = [str(source)]
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / "train.ipynb").write_text(notebook_with(BAD))
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "start")
    pre_commit = runner(tmp_path, project)

    check = pre_commit("amplint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "train.ipynb:cell 2:2:5: AMP002" in check.stdout

    fixed = subprocess.run(
        [sys.executable, "-m", "amplint", "fix", "--apply", "train.ipynb"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads((project / "train.ipynb").read_text())["cells"][1]["source"] == FIXED.splitlines(keepends=True)
    again = pre_commit("amplint")
    assert again.returncode == 0, again.stdout + again.stderr
