"""AMP201/AMP202 fixes rewrite to amplint.runtime, and the fixed script really autocasts on CPU.

``fixtures/device_flag_train.py`` takes ``--device`` but hardcodes CUDA AMP. Run on CPU
as written, it trains in float32 (CUDA autocast is disabled there, and evaluation uses
``nullcontext()``); after ``amplint fix --unsafe-fixes --select AMP201,AMP202`` the same
run autocasts to bfloat16, the CPU's autocast dtype, and still trains.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from amplint.api import fix_text

pytest.importorskip("torch")

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "device_flag_train.py"
STEP = re.compile(r"step (\d+) loss (\S+) amp (True|False) eval (\S+)")


def _fixed() -> str:
    return fix_text(FIXTURE.read_text(encoding="utf-8"), select=["AMP201", "AMP202"], unsafe_fixes=True)


def test_the_fix_calls_the_runtime_helpers() -> None:
    fixed = _fixed()
    assert "import amplint.runtime\n" in fixed
    assert "    ctx = amplint.runtime.autocast(device, dtype=torch.bfloat16)\n" in fixed
    assert "        with torch.autocast(amplint.runtime.device_type(device), dtype=torch.bfloat16):\n" in fixed
    assert fix_text(fixed, select=["AMP201", "AMP202"], unsafe_fixes=True) == fixed
    compile(fixed, "fixed.py", "exec")


def _run(script: Path) -> list[tuple[int, float, str, str]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--steps", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = [(int(m[1]), float(m[2]), m[3], m[4]) for m in STEP.finditer(result.stdout)]
    assert [row[0] for row in rows] == [0, 1, 2]
    return rows


def test_the_fixed_script_autocasts_on_cpu_where_the_original_did_not(tmp_path: Path) -> None:
    fixed = tmp_path / "device_flag_train.py"
    fixed.write_text(_fixed(), encoding="utf-8")
    before, after = _run(FIXTURE), _run(fixed)
    assert {(amp, dtype) for _, _, amp, dtype in before} == {("False", "torch.float32")}
    assert {(amp, dtype) for _, _, amp, dtype in after} == {("True", "torch.bfloat16")}
    # Still the same training, to bfloat16 precision.
    for (_, loss_before, _, _), (_, loss_after, _, _) in zip(before, after, strict=True):
        assert loss_after == pytest.approx(loss_before, rel=0.05)
