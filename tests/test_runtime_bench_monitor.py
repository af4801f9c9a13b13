"""Smoke test of bench/bench_monitor.py: it runs on CPU and prints its table.

No timing is asserted. The transfer counts are not timings: they are the monitor's
budget (at most one host-device transfer per step on top of torch's own).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


def test_bench_monitor_prints_times_and_transfers() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_monitor.py"),
            "--device", "cpu", "--steps", "2", "--repeat", "1", "--width", "8", "--batch", "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = {
        (cells[0], " ".join(cells[1:-4])): cells[-4:]
        for cells in (line.split() for line in result.stdout.splitlines())
        if cells and cells[0] in ("float16", "bfloat16")
    }
    transfers = {key: float(cells[2]) for key, cells in rows.items()}
    assert transfers == {
        ("float16", "torch"): 1.0,  # GradScaler.step reads found_inf
        ("float16", "no monitor"): 2.0,
        ("float16", "monitor"): 2.0,
        ("bfloat16", "torch"): 0.0,
        ("bfloat16", "no monitor"): 0.0,
        ("bfloat16", "monitor"): 1.0,
    }
    assert all(float(cells[0]) > 0 for cells in rows.values())  # ms per step
    assert "StabilityMonitor.record with Python numbers:" in result.stdout
