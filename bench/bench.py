#!/usr/bin/env python3
"""Time amplint on a source tree, side by side with TorchFix and Ruff when available.

    python bench/bench.py TREE [TREE ...] [--jobs N] [--repeat N]
                          [--torchfix PATH] [--ruff PATH] [--skip-torchfix] [--skip-ruff]

Every tool runs as a subprocess on a private copy of the trees' ``*.py`` files (made in a
temporary directory, so that nothing outside applies: no enclosing ``.gitignore``, no
configuration file, and the "touched" file can be edited freely). Scenarios:

- ``amplint cold``: ``amplint check --no-cache``;
- ``amplint cache fill``: the first run with an empty cache (cold plus writing it);
- ``amplint warm``: the same run again, nothing changed;
- ``amplint 1 touched``: after editing one file that amplint really parses;
- ``torchfix``: ``torchfix --select ALL`` (TorchFix in its own venv; ``--torchfix``
  takes the executable or the venv directory);
- ``ruff``: ``ruff check --isolated --select ALL --no-cache``, the speed-of-light
  reference.

Reported per run: wall seconds (the median of ``--repeat`` runs), CPU seconds (user +
system of the process and its workers), files per second, the peak resident memory of
the largest single process (``ru_maxrss`` from ``wait4``), and the ratio to
``amplint cold``. The bench needs no network; ``bench/get_corpus.sh`` fetches the trees.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Directories no tool should look into; the same list for every tool keeps the counts equal.
SKIP_DIRS = {
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".mypy_cache", ".ruff_cache", ".amplint_cache", ".eggs",
}  # fmt: skip


@dataclass
class Measurement:
    tool: str
    scenario: str
    files: int
    walls: list[float]
    cpu: float
    peak_rss_mb: float
    returncode: int
    note: str = ""

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)


def copy_tree(trees: Sequence[Path], into: Path) -> int:
    """Copy every ``*.py`` file of ``trees`` under ``into/<tree name>``; the count copied."""
    count = 0
    for tree in trees:
        target_root = into / tree.resolve().name
        for directory, subdirectories, files in os.walk(tree):
            subdirectories[:] = sorted(d for d in subdirectories if d not in SKIP_DIRS)
            for name in files:
                if not name.endswith(".py"):
                    continue
                source = Path(directory) / name
                if not source.is_file():
                    continue  # dangling link
                target = target_root / source.relative_to(tree)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                count += 1
    return count


def timed(command: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """Run ``command``; (wall s, CPU s of it and its reaped children, peak RSS MiB, exit code)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        list(command), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    # Linux reports kilobytes, macOS bytes.
    peak = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return wall, usage.ru_utime + usage.ru_stime, peak, process.returncode


def measure(
    tool: str,
    scenario: str,
    files: int,
    command: Sequence[str],
    cwd: Path,
    repeat: int,
    before_each: Callable[[], None] | None = None,
    note: str = "",
) -> Measurement:
    walls: list[float] = []
    cpus: list[float] = []
    peaks: list[float] = []
    code = 0
    for _ in range(repeat):
        if before_each is not None:
            before_each()
        wall, cpu, peak, code = timed(command, cwd)
        walls.append(wall)
        cpus.append(cpu)
        peaks.append(peak)
    return Measurement(tool, scenario, files, walls, statistics.median(cpus), max(peaks), code, note)


def amplint_command(*options: str) -> list[str]:
    # The corpus trees are libraries (diffusers, timm, ...) copied side by side: every one
    # is checked, as Ruff checks them, not skipped as a vendored copy.
    return [sys.executable, "-m", "amplint", "check", "--isolated", "--exit-zero", "--quiet", "--no-skip-vendored", *options, "."]


def findings(work: Path, cache_dir: Path | None, jobs: int) -> list[tuple[str, int, int, str]]:
    """amplint's diagnostics on the copy, to check that cached and uncached runs agree."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        output = Path(handle.name)
    try:
        cache = ["--no-cache"] if cache_dir is None else ["--cache-dir", str(cache_dir)]
        command = amplint_command("--output-format", "json", "-o", str(output), "-j", str(jobs), *cache)
        subprocess.run(command, cwd=work, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        data = json.loads(output.read_text(encoding="utf-8") or "[]")
    finally:
        output.unlink(missing_ok=True)
    return sorted((d["filename"], d["location"]["row"], d["location"]["column"], d["code"]) for d in data)


def parsed_file(work: Path) -> Path | None:
    """The largest file amplint's pre-filter lets through: touching it costs a real parse."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from amplint.engine.config import Settings
    from amplint.engine.prefilter import rules_for
    from amplint.rules import all_rules

    rules = Settings().enabled_rules(all_rules())
    candidates = [
        path for path in work.rglob("*.py") if rules_for(path.read_text(encoding="utf-8", errors="replace"), rules)
    ]
    return max(candidates, key=lambda p: p.stat().st_size, default=None)


def find_torchfix(given: str | None) -> str | None:
    if given:
        path = Path(given)
        for candidate in (path, path / "bin" / "torchfix", path / "Scripts" / "torchfix.exe"):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate.resolve())  # the tools run in a scratch directory
        return None
    return shutil.which("torchfix")


def find_ruff(given: str | None) -> str | None:
    if given:
        return str(Path(given).resolve()) if Path(given).is_file() else shutil.which(given)
    beside = Path(sys.executable).parent / "ruff"
    return str(beside) if beside.is_file() else shutil.which("ruff")


def version_of(command: Sequence[str]) -> str:
    try:
        result = subprocess.run(list(command), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return (result.stdout or result.stderr).strip().splitlines()[0] if (result.stdout or result.stderr).strip() else "?"


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()) if hasattr(os, "getloadavg") else ""
    return f"{model}, {cores} usable cores, {platform.system()} {platform.release()}, Python {platform.python_version()}{load}"


def table(rows: Sequence[Measurement], baseline: Measurement) -> str:
    header = ("tool", "scenario", "files", "wall s", "cpu s", "files/s", "peak MiB", "vs amplint cold", "note")
    lines = [header]
    for row in rows:
        ratio = row.wall / baseline.wall if baseline.wall else float("nan")
        lines.append(
            (
                row.tool,
                row.scenario,
                str(row.files),
                f"{row.wall:.2f}",
                f"{row.cpu:.2f}",
                f"{row.files / row.wall:.0f}" if row.wall else "-",
                f"{row.peak_rss_mb:.0f}",
                f"{ratio:.2f}x" if row is not baseline else "1.00x",
                row.note + (f" (exit {row.returncode})" if row.returncode not in (0, 1) else ""),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rendered = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in lines]
    rendered.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(rendered)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("trees", nargs="+", type=Path, help="source trees to check (measured together)")
    parser.add_argument("--jobs", "-j", type=int, default=None, help="worker processes for every tool (default: all cores)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per amplint scenario; the median is shown")
    parser.add_argument("--torchfix", help="torchfix executable or the venv it is installed in")
    parser.add_argument("--ruff", help="ruff executable (default: beside this Python, then PATH)")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument("--skip-ruff", action="store_true")
    parser.add_argument("--no-verify", action="store_true", help="skip checking that cached results equal uncached ones")
    args = parser.parse_args(argv)
    for tree in args.trees:
        if not tree.is_dir():
            parser.error(f"not a directory: {tree}")
    jobs = args.jobs or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    repeat = max(1, args.repeat)

    with tempfile.TemporaryDirectory(prefix="amplint-bench-") as scratch:
        work = Path(scratch) / "tree"
        work.mkdir()
        files = copy_tree(args.trees, work)
        cache_dir = Path(scratch) / "cache"
        names = ", ".join(str(tree) for tree in args.trees)
        print(f"trees: {names}\nfiles: {files} *.py\nmachine: {machine()}\njobs: {jobs}")
        print(f"amplint: {version_of([sys.executable, '-m', 'amplint', 'version'])}")
        rows: list[Measurement] = []

        cold = measure("amplint", "cold (--no-cache)", files, amplint_command("-j", str(jobs), "--no-cache"), work, repeat)
        rows.append(cold)
        cached = amplint_command("-j", str(jobs), "--cache-dir", str(cache_dir))
        def empty_cache() -> None:
            shutil.rmtree(cache_dir, ignore_errors=True)

        rows.append(measure("amplint", "cache fill", files, cached, work, repeat, before_each=empty_cache))
        rows.append(measure("amplint", "warm (no change)", files, cached, work, repeat))
        touched = parsed_file(work)
        if touched is not None:
            counter = iter(range(10**6))

            def touch() -> None:
                with touched.open("a", encoding="utf-8") as handle:
                    handle.write(f"# touched by bench {next(counter)}\n")

            note = f"{touched.relative_to(work)}, {touched.stat().st_size // 1024} KiB"
            rows.append(measure("amplint", "1 file touched", files, cached, work, repeat, before_each=touch, note=note))

        if not args.no_verify:
            uncached_findings = findings(work, None, jobs)
            cached_findings = findings(work, cache_dir, jobs)
            agree = "yes" if uncached_findings == cached_findings else "NO (a bug: please report it)"
            print(f"diagnostics: {len(uncached_findings)}; cached run agrees with --no-cache: {agree}")

        if not args.skip_torchfix:
            torchfix = find_torchfix(args.torchfix)
            if torchfix is None:
                print("torchfix: not found (give --torchfix PATH); skipped")
            else:
                print(f"torchfix: {version_of([torchfix, '--version'])} ({torchfix})")
                command = [torchfix, "--select", "ALL", "-j", str(jobs), "."]
                rows.append(measure("torchfix", "--select ALL", files, command, work, 1))
        if not args.skip_ruff:
            ruff = find_ruff(args.ruff)
            if ruff is None:
                print("ruff: not found (give --ruff PATH); skipped")
            else:
                print(f"ruff: {version_of([ruff, '--version'])}")
                command = [ruff, "check", "--isolated", "--select", "ALL", "--no-cache", "--exit-zero", "--quiet"]
                rows.append(measure("ruff", "--select ALL --no-cache", files, [*command, "."], work, repeat))
        print()
        print(table(rows, cold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
