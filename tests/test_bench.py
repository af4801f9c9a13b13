"""Smoke test of bench/bench.py: it runs on a small tree and prints its table.

No timing is asserted: timings depend on the machine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_runs_on_a_small_tree_and_prints_its_table(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    shutil.copyfile(ROOT / "fixtures" / "legacy_amp_train.py", tree / "train.py")
    (tree / "pkg" / "util.py").write_text("import os\n", encoding="utf-8")
    (tree / "notes.txt").write_text("not python\n", encoding="utf-8")
    bench = [sys.executable, str(ROOT / "bench" / "bench.py"), str(tree)]
    result = subprocess.run(
        [*bench, "--repeat", "1", "--jobs", "1", "--skip-torchfix", "--skip-ruff"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "files: 2 *.py" in out
    assert "cached run agrees with --no-cache: yes" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("amplint ")]
    assert [row[1] for row in rows] == ["cold", "cache", "warm", "1"]
    assert all("2" in row for row in rows)  # the files column
    assert "train.py" in " ".join(rows[-1])  # the touched file is the one amplint parses
