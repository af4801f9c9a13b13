"""The worker processes: a per-file watchdog (issue 13), results taken as they complete, a
progress bar that moves before the first file is done, and Ctrl-C that stops at once
(issue 14). Hang guards only, never timing assertions."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.api import RunOptions, run_paths
from amplint.cli import cli
from amplint.engine import linter, runner
from amplint.engine.config import Settings, load_config
from amplint.engine.linter import LintResult
from amplint.engine.progress import ProgressBar
from amplint.engine.runner import FileReport, Job, Mode, run
from amplint.engine.source import SourceFile
from amplint.rules import all_rules

DEPRECATED = "import torch\nd = torch.get_autocast_gpu_dtype()\n"
DEPRECATED_FIXED = 'import torch\nd = torch.get_autocast_dtype("cuda")\n'
_REAL_LINT = linter.lint_source


def _slow_lint(path: str, source: SourceFile, rules: object, *rest: object) -> LintResult:
    # Module level, so that forked workers run it; "slow" files hang in analysis.
    if Path(path).name.startswith("slow"):
        time.sleep(float(os.environ.get("AMPLINT_TEST_SLOW_SECONDS", "600")))
    return _REAL_LINT(path, source, rules, *rest)  # type: ignore[arg-type]


@pytest.fixture
def slow_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linter, "lint_source", _slow_lint)


def _tree(root: Path, *names: str) -> list[str]:
    for name in names:
        (root / name).write_text(DEPRECATED)
    return [str(root / name) for name in names]


@pytest.mark.timeout(60)
def test_a_file_past_its_budget_is_amp999_and_the_run_goes_on(tmp_path: Path, slow_analysis: None) -> None:
    paths = _tree(tmp_path, "a.py", "slow.py", "b.py", "c.py")
    settings = Settings(project_root=str(tmp_path), file_timeout=1.0)
    reports = {Path(r.path).name: r for r in run(paths, Job(Mode.CHECK, settings, all_rules()), jobs=2, in_process=False)}
    assert sorted(reports) == ["a.py", "b.py", "c.py", "slow.py"]
    (timed_out,) = reports["slow.py"].diagnostics
    assert timed_out.code == "AMP999"
    assert "timed out after 1 s (file-timeout)" in timed_out.message
    for name in ("a.py", "b.py", "c.py"):
        assert [d.code for d in reports[name].diagnostics] == ["AMP002"]


@pytest.mark.timeout(60)
def test_one_worker_replaced_after_a_timeout_still_finishes_the_rest(tmp_path: Path, slow_analysis: None) -> None:
    paths = _tree(tmp_path, "slow1.py", "slow2.py", *(f"m{i}.py" for i in range(6)))
    settings = Settings(project_root=str(tmp_path), file_timeout=0.5)
    reports = list(run(paths, Job(Mode.CHECK, settings, all_rules()), jobs=1, in_process=False))
    codes = {Path(r.path).name: [d.code for d in r.diagnostics] for r in reports}
    assert codes == {"slow1.py": ["AMP999"], "slow2.py": ["AMP999"], **{f"m{i}.py": ["AMP002"] for i in range(6)}}


@pytest.mark.timeout(60)
def test_file_timeout_from_the_command_line_and_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_analysis: None
) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, "ok.py", "slow.py")
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--file-timeout", "0.5", "--output-format", "concise", "."])
    assert result.exit_code == 2  # an internal error fails the run
    assert "ok.py:2:5: AMP002" in result.stdout
    assert "slow.py:1:1: AMP999 internal error: analysis timed out after 0.5 s" in result.stdout
    (tmp_path / "amplint.toml").write_text("file-timeout = 0.5\n")
    assert load_config(tmp_path / "amplint.toml", all_rules()).file_timeout == 0.5
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "concise", "slow.py"])
    assert "timed out after 0.5 s" in result.stdout
    assert CliRunner().invoke(cli, ["check", "--file-timeout", "0", "."]).exit_code == 2


def test_bad_file_timeouts_are_configuration_errors(tmp_path: Path) -> None:
    from amplint.engine.config import ConfigError

    for value in ("0", "-1", '"60"', "true", "inf"):
        (tmp_path / "amplint.toml").write_text(f"file-timeout = {value}\n")
        with pytest.raises(ConfigError, match="'file-timeout' must be a positive number"):
            load_config(tmp_path / "amplint.toml", all_rules())


@pytest.mark.timeout(60)
def test_results_come_as_they_complete_and_the_outcome_is_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_analysis: None
) -> None:
    monkeypatch.setenv("AMPLINT_TEST_SLOW_SECONDS", "2")
    monkeypatch.chdir(tmp_path)
    paths = _tree(tmp_path, "a_first.py", "slow.py", "z_last.py")
    job = Job(Mode.CHECK, Settings(project_root=str(tmp_path)), all_rules())
    order = [Path(r.path).name for r in run(paths, job, jobs=2, in_process=False)]
    assert order[-1] == "slow.py"  # the others did not wait for it
    outcome = run_paths(["."], RunOptions(cache=False, jobs=2))
    assert [Path(r.path).name for r in outcome.reports] == ["a_first.py", "slow.py", "z_last.py"]


class _Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def start(self, total: int) -> None:
        self.events.append(f"start {total}")

    def advance(self, count: int = 1) -> None:
        self.events.append("advance")

    def tick(self) -> None:
        self.events.append("tick")


@pytest.mark.timeout(60)
def test_progress_is_ticked_before_the_first_file_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_analysis: None
) -> None:
    monkeypatch.setenv("AMPLINT_TEST_SLOW_SECONDS", "1.5")
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, "slow1.py", "slow2.py")
    recorder = _Recorder()
    run_paths(["."], RunOptions(cache=False, jobs=2), progress=recorder)
    assert recorder.events[0] == "start 2"
    # Both files take 1.5 s; the workers wake the caller ten times a second meanwhile.
    assert recorder.events.index("advance") > 5
    assert recorder.events.count("advance") == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_draws_on_a_tick_with_nothing_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    terminal = _Terminal()
    with ProgressBar(True, total=10, stream=terminal, delay=0) as bar:
        bar.tick()
        assert "0/10 files" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[2K")


def _heavy_source(index: int) -> str:
    # Parsed and analysed (tens of milliseconds each), with one safe fix (AMP002).
    body = "".join(
        f"def f{i}(x):\n    with torch.autocast('cuda'):\n        y = x * {i}\n    return y.sum()\n" for i in range(40)
    )
    return f"import torch\nd{index} = torch.get_autocast_gpu_dtype()\n{body}"


def _take_ctrl_c() -> None:
    """In the child, before it starts: take SIGINT as a terminal's Ctrl-C delivers it. A test
    run started in the background (`.ci/run &`) ignores SIGINT, and a child inherits that,
    so the interrupt these tests send would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.timeout(120)
@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a process group")
def test_ctrl_c_stops_a_large_run_at_once(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    count = 600
    originals = {}
    for index in range(count):
        originals[index] = _heavy_source(index)
        (tree / f"m{index:03}.py").write_text(originals[index])
    process = subprocess.Popen(
        [sys.executable, "-m", "amplint", "fix", "--apply", "--no-cache", "-j", "2", "-v", str(tree)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the workers can be looked for after
        preexec_fn=_take_ctrl_c,
    )
    assert process.stderr is not None
    while "file(s) to check" not in process.stderr.readline():
        assert process.poll() is None, "amplint ended before the run started"
    time.sleep(1.0)  # the run is under way: files are being fixed and written
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    # A hang guard, not a timing claim. A shell reports 130 for both: CPython itself sometimes
    # ends the process by SIGINT after `main` has returned 130 (seen here), which shows as -2.
    assert process.wait(timeout=60) in (130, -signal.SIGINT)
    # No worker outlives the run.
    for _ in range(50):
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("worker processes are still running after Ctrl-C")
    # Every file is either untouched or completely fixed, and no temporary file is left.
    written = 0
    for index in range(count):
        text = (tree / f"m{index:03}.py").read_text()
        fixed = originals[index].replace("torch.get_autocast_gpu_dtype()", 'torch.get_autocast_dtype("cuda")')
        assert text in (originals[index], fixed)
        written += text == fixed
    assert written < count, "the run finished before Ctrl-C: make the tree larger"
    assert sorted(p.suffix for p in tree.iterdir()) == [".py"] * count


def test_a_report_of_a_dead_worker_names_the_file(tmp_path: Path) -> None:
    from amplint.engine.workers import Died

    report = runner._failure_report("x.py", Died(-11), 60.0)
    assert isinstance(report, FileReport)
    assert [d.message for d in report.diagnostics] == ["internal error: the worker process analysing this file died"]
