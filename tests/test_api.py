"""The run API the CLI and editor integrations share: outcomes carry everything a report
needs, nothing is printed, and a text in memory gets the configuration of its path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from amplint import cli as cli_module
from amplint.api import Mode, RunOptions, run_paths, run_stdin, run_text

TRAIN = "import torch\nscaler = torch.cuda.amp.GradScaler()\nd = torch.get_autocast_gpu_dtype()\n"
TRAIN_FIXED = 'import torch\nscaler = torch.amp.GradScaler("cuda")\nd = torch.get_autocast_dtype("cuda")\n'
UNFIXABLE = "import torch\nctx = torch.cuda.amp.autocast(*args)\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "partly.py").write_text(UNFIXABLE)
    return tmp_path


def test_run_paths_prints_nothing_and_counts_everything(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_paths(["missing.py", "."], RunOptions(mode=Mode.APPLY, cache=False))
    assert capsys.readouterr() == ("", "")
    assert outcome.errors == ["missing.py: no such file or directory"]
    assert outcome.failed
    assert outcome.checked == ["partly.py", "train.py"]
    assert [r.path for r in outcome.reports] == ["partly.py", "train.py"]
    assert outcome.fixed == 2 and [r.path for r in outcome.written] == ["train.py"]
    assert [(d.path, d.code) for d in outcome.diagnostics] == [("partly.py", "AMP001")]
    assert (project / "train.py").read_text() == TRAIN_FIXED


def test_fix_without_apply_writes_nothing_and_keeps_the_diff(project: Path) -> None:
    outcome = run_paths(["."], RunOptions(mode=Mode.FIX, cache=False))
    (changed,) = outcome.changed
    assert changed.fixed == TRAIN_FIXED.encode()
    assert "+scaler = torch.amp.GradScaler(\"cuda\")" in changed.diff()
    assert outcome.would_fix == 2 and outcome.fixed == 0
    assert (project / "train.py").read_text() == TRAIN


def test_run_text_uses_the_configuration_of_the_path_it_claims(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "amplint.toml").write_text('[per-file-ignores]\n"tests/*" = ["AMP0"]\n')
    # An unsaved buffer: neither the file nor its directory exists.
    assert run_text(TRAIN, str(project / "sub" / "tests" / "new.py")).diagnostics == []
    found = run_text(TRAIN, str(project / "sub" / "src" / "new.py")).diagnostics
    assert [d.code for d in found] == ["AMP001", "AMP002"]
    fixed = run_text(TRAIN, "sub/src/new.py", RunOptions(mode=Mode.APPLY))
    assert fixed.new_text == TRAIN_FIXED and not (project / "sub" / "src").exists()


def test_run_stdin_passes_an_excluded_name_through(project: Path) -> None:
    (project / "amplint.toml").write_text('extend-exclude = ["legacy/"]\n')
    excluded = run_stdin(TRAIN.encode(), "legacy/x.py", RunOptions(force_exclude=True))
    assert excluded.excluded and excluded.reports == []
    outcome = run_stdin(TRAIN.encode(), "legacy/x.py", RunOptions())
    assert [d.code for d in outcome.diagnostics] == ["AMP001", "AMP002"]


def test_the_cli_imports_only_the_api_and_presentation_layers() -> None:
    # amplint.server: `amplint server` imports the language server lazily (optional extra).
    allowed = ("amplint.api", "amplint.output", "amplint.docs", "amplint.diagnostics", "amplint.server")
    tree = ast.parse(Path(cli_module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    ours = {name for name in imported if name == "amplint" or name.startswith("amplint.")}
    assert ours and all(name == "amplint" or name.startswith(allowed) for name in ours), sorted(ours)
