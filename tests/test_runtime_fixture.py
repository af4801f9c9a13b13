"""fixtures/runtime_training.py, the example written with amplint.runtime, really trains on CPU.

One run is a real subprocess (the script works as a program); the others use runpy in this
process, which already has torch imported, to keep the suite fast. Training uses one
intra-op thread: on a loaded CI machine, OpenMP threads spinning at barriers make these
tiny matmuls a hundred times slower.
"""

from __future__ import annotations

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

SCRIPT = Path(__file__).resolve().parent.parent / "fixtures" / "runtime_training.py"
STEP = re.compile(r"step (\d+) loss (\S+) grad_norm (\S+) skipped ([01])")
STEPS = 25

Row = tuple[int, float, float, int]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _parse(out: str) -> list[Row]:
    return [(int(m[1]), float(m[2]), float(m[3]), int(m[4])) for m in STEP.finditer(out)]


def _train(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[str, list[Row]]:
    argv = [str(SCRIPT), "--device", "cpu", "--steps", str(STEPS), *args]
    monkeypatch.setattr(sys, "argv", argv)
    capsys.readouterr()
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    return out, _parse(out)


def test_script_runs_as_a_program() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "5", "--dtype", "float16", "--api", "functions"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SCRIPT.parent.parent,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert [r[0] for r in _parse(proc.stdout)] == list(range(5))


def test_importing_the_script_trains_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(SCRIPT), run_name="runtime_training")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_training_script_trains(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], dtype: str
) -> None:
    out, rows = _train(monkeypatch, capsys, "--dtype", dtype)
    assert f"dtype {dtype}" in out and "dist_backend gloo" in out
    assert [r[0] for r in rows] == list(range(STEPS))
    assert all(skipped == 0 for *_, skipped in rows)
    assert all(0 < norm < float("inf") for _, _, norm, _ in rows)
    first, last = rows[0][1], sum(r[1] for r in rows[-5:]) / 5
    assert last < first, (first, last)
    scaler_keys = re.search(r"scaler_state \[(.*)\]", out)
    assert scaler_keys is not None
    # A GradScaler only for float16; bfloat16 needs none and saves no state.
    assert ("'scale'" in scaler_keys[1]) is (dtype == "float16")


@pytest.mark.parametrize("dtype", ["auto", "float16"])
def test_both_apis_train_identically(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], dtype: str
) -> None:
    """MixedPrecision and the separate helpers are the same recipe, so seeded runs agree."""
    _, with_class = _train(monkeypatch, capsys, "--dtype", dtype, "--api", "mixed-precision")
    _, with_functions = _train(monkeypatch, capsys, "--dtype", dtype, "--api", "functions")
    assert len(with_class) == STEPS
    assert with_class == with_functions
