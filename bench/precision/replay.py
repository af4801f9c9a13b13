"""Replay judged findings against the amplint in this checkout.

Every evaluation round reads each finding amplint reported on public repositories it had
never seen and records a verdict (TRUE: the author would agree; FALSE: not). The verdicts
live in ``bench/precision/verdicts/*.tsv``, one row per finding:

    repo  commit  path  line  code  verdict  reason

(a notebook finding's path is ``nb.ipynb:cell N`` and its line counts from that cell).

The repositories themselves are not kept here (fetched code is never committed). Export a
round's repositories at the recorded commits into one folder, named ``owner+name`` or by
the bare name, then run::

    python bench/precision/replay.py TREES [VERDICT FILES...] [--select CODES]

For each repository it runs ``amplint check`` from the tree's root (as a user would, so
that the project's declared torch applies) and prints, per code, how many judged-true
findings are still reported (kept / lost), how many judged-false ones are still reported,
and how many findings no verdict covers (new). A change that silences judged-false
findings should be weighed against the judged-true ones it loses: ``--lost`` lists them.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent.parent


@dataclass(frozen=True)
class Verdict:
    repo: str
    commit: str
    path: str
    line: int
    code: str
    verdict: str
    reason: str


def read_verdicts(files: list[Path]) -> list[Verdict]:
    verdicts = []
    for file in files:
        with file.open(newline="", encoding="utf-8") as handle:
            for row in csv.reader(handle, delimiter="\t"):
                if len(row) < 6 or row[0] == "repo":
                    continue
                repo, commit, path, line, code, verdict = (cell.strip() for cell in row[:6])
                reason = row[6].strip() if len(row) > 6 else ""
                verdicts.append(Verdict(repo, commit, path, int(line), code, verdict.upper(), reason))
    return verdicts


def tree_for(trees: Path, repo: str) -> Path | None:
    owner, name = repo.split("/", 1)
    for candidate in (trees / f"{owner}+{name}", trees / name):
        if candidate.is_dir():
            return candidate
    return None


def findings(tree: Path, select: str | None) -> set[tuple[str, int, str]]:
    command = [sys.executable, "-m", "amplint", "check", ".", "--no-cache", "--output-format", "json", "--exit-zero"]
    if select:
        command += ["--select", select]
    # PYTHONPATH puts this checkout's amplint first, whatever is installed.
    result = subprocess.run(
        command,
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
        check=False,
    )
    if result.returncode not in (0, 1):
        raise SystemExit(f"amplint failed on {tree}: {result.stderr.strip()}")
    reported = set()
    for entry in json.loads(result.stdout or "[]"):
        path = Path(entry["filename"]).resolve().relative_to(tree.resolve()).as_posix()
        if entry.get("cell") is not None:
            path = f"{path}:cell {entry['cell']}"  # a notebook's rows count from its cell
        reported.add((path, entry["location"]["row"], entry["code"]))
    return reported


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", type=Path, help="folder holding the exported repositories")
    parser.add_argument("files", type=Path, nargs="*", help="verdict files (default: all in verdicts/)")
    parser.add_argument("--select", help="codes to check, as amplint's --select")
    parser.add_argument("--lost", action="store_true", help="list judged-true findings no longer reported")
    parser.add_argument("--still", action="store_true", help="list judged-false findings still reported")
    parser.add_argument("--new", action="store_true", help="list findings no verdict covers")
    arguments = parser.parse_args()
    files = arguments.files or sorted((HERE / "verdicts").glob("*.tsv"))
    verdicts = read_verdicts(files)
    selected = {code.strip() for code in arguments.select.split(",")} if arguments.select else None
    by_repo: dict[str, list[Verdict]] = collections.defaultdict(list)
    for verdict in verdicts:
        if selected is None or verdict.code in selected:
            by_repo[verdict.repo].append(verdict)
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    missing = []
    for repo, judged in sorted(by_repo.items()):
        tree = tree_for(arguments.trees, repo)
        if tree is None:
            missing.append(repo)
            continue
        reported = findings(tree, arguments.select)
        known = set()
        for verdict in judged:
            key = (verdict.path, verdict.line, verdict.code)
            known.add(key)
            still = key in reported
            if verdict.verdict == "TRUE":
                table[verdict.code]["kept" if still else "lost"] += 1
                if not still and arguments.lost:
                    print(f"lost TRUE  {repo} {verdict.path}:{verdict.line} {verdict.code}  {verdict.reason}")
            else:
                table[verdict.code]["false reported" if still else "false silent"] += 1
                if still and arguments.still:
                    print(f"still FALSE {repo} {verdict.path}:{verdict.line} {verdict.code}  {verdict.reason}")
        for path, line, code in sorted(reported - known):
            table[code]["new"] += 1
            if arguments.new:
                print(f"new        {repo} {path}:{line} {code}")
    print(f"{'code':8} {'kept':>6} {'lost':>6} {'false reported':>15} {'false silent':>13} {'new':>6}")
    for code in sorted(table):
        row = table[code]
        print(
            f"{code:8} {row['kept']:>6} {row['lost']:>6} {row['false reported']:>15}"
            f" {row['false silent']:>13} {row['new']:>6}"
        )
    if missing:
        print(f"not in {arguments.trees}: {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
