"""fixtures/amp_stability_training.py really finds, keeps and survives a float16 overflow on CPU.

One run is a real subprocess (the script works as a program); the others use runpy in this
process to keep the suite fast, with one intra-op thread (see test_runtime_fixture.py).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch

from amplint.api import check_source
from amplint.runtime import MixedPrecision

SCRIPT = Path(__file__).resolve().parent.parent / "fixtures" / "amp_stability_training.py"
STEP = re.compile(r"step (\d+) loss (\S+) grad_norm (\S+) skipped ([01]) dtype (\w+)")

Row = tuple[int, float, float, bool, str]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _rows(out: str) -> list[Row]:
    return [(int(m[1]), float(m[2]), float(m[3]), m[4] == "1", m[5]) for m in STEP.finditer(out)]


def _tagged(out: str, tag: str) -> object:
    line = next(line for line in out.splitlines() if line.startswith(tag + " "))
    return json.loads(line.removeprefix(tag + " "))


def _train(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[str, list[Row]]:
    argv = [str(SCRIPT), "--device", "cpu", "--dtype", "float16", *args]
    monkeypatch.setattr(sys, "argv", argv)
    capsys.readouterr()
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    return out, _rows(out)


def test_the_fixture_is_clean_amp_code() -> None:
    diagnostics = check_source(SCRIPT.read_bytes(), str(SCRIPT), select=["ALL"])
    assert [d.code for d in diagnostics] == []


def test_script_runs_as_a_program() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "3", "--dtype", "bfloat16", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SCRIPT.parent.parent,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert [r[0] for r in _rows(proc.stdout)] == [1, 2, 3]
    assert "keep in float32: nothing" in proc.stdout  # bfloat16 has the range


def test_importing_the_script_trains_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(SCRIPT), run_name="amp_stability_training")
    assert capsys.readouterr().out == ""


def test_report_finds_the_layer_and_float16_then_trains_cleanly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, rows = _train(monkeypatch, capsys, "--steps", "20")
    assert "keep in float32: ['similarity']" in out
    assert [r[0] for r in rows] == list(range(1, 21))
    assert not any(r[3] for r in rows) and {r[4] for r in rows} == {"float16"}
    assert "\nwarning " not in out
    first, last = rows[0][1], sum(r[1] for r in rows[-5:]) / 5
    assert last < first, (first, last)
    assert _tagged(out, "fallback") == []


def test_without_the_report_the_fallback_switches_to_bfloat16(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, rows = _train(monkeypatch, capsys, "--steps", "12", "--no-keep")
    switches = _tagged(out, "fallback")
    assert isinstance(switches, list) and len(switches) == 1
    switch = switches[0]
    assert (switch["from"], switch["to"]) == ("float16", "bfloat16")
    assert "warning NonFiniteWarning: step 1: the loss is nan" in out
    assert "warning OverflowWarning" in out
    # Skipped in float16 up to the switch, then bfloat16 trains.
    assert all(r[3] for r in rows[: switch["step"]])
    assert not any(r[3] for r in rows[switch["step"] :])
    assert {r[4] for r in rows[switch["step"] :]} == {"bfloat16"}


def test_without_a_fallback_every_step_is_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, rows = _train(monkeypatch, capsys, "--steps", "6", "--no-keep", "--fallback", "none")
    assert all(r[3] for r in rows)


def test_overflow_during_training_warns_within_the_window_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ckpt.pt"
    window, overflow_at = 5, 8
    out, rows = _train(
        monkeypatch,
        capsys,
        "--steps", "16",
        "--window", str(window),
        "--overflow-at", str(overflow_at),
        "--checkpoint", str(checkpoint),
    )  # fmt: skip
    assert not any(r[3] for r in rows[: overflow_at - 1])
    warned = [int(m[1]) for m in re.finditer(r"warning OverflowWarning: step (\d+):", out)]
    assert warned and overflow_at <= warned[0] < overflow_at + window
    switch = _tagged(out, "fallback")
    assert isinstance(switch, list) and switch[0]["step"] == warned[0]
    assert {r[4] for r in rows if r[0] > warned[0]} == {"bfloat16"}
    assert not any(r[3] for r in rows if r[0] > warned[0])

    saved = torch.load(checkpoint, weights_only=True)
    resumed = MixedPrecision("cpu", torch.float16)
    resumed.load_state_dict(saved["amp"])
    assert resumed.dtype == torch.bfloat16 and resumed.fallback_history == switch
