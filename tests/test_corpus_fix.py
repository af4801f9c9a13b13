"""The fix tier (issue 13): real training code, fixed as `amplint fix --apply` fixes it.

Slow, so in the corpus tier (``pytest -m corpus -s``). The trees are the benchmark trees
(``bench/corpus/*``, see bench/get_corpus.sh) and any directories listed in the
``AMPLINT_FIX_CORPUS`` environment variable (``os.pathsep``-separated: the public
repositories a release is tried on). Over a copy of each tree, with the pre-filter on as
in a real run:

- ``fix --apply --unsafe-fixes`` twice equals once, and every changed file that compiled
  still compiles;
- after ``fix --apply`` with safe fixes only, what the fix said remains is exactly what a
  following ``check`` reports, and no finding that has a safe fix is left.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

from amplint.diagnostics import Applicability
from amplint.engine.config import Settings
from amplint.engine.runner import FileReport, Job, Mode, run, write_atomically
from amplint.rules import all_rules

pytestmark = pytest.mark.corpus

ROOT = Path(__file__).resolve().parent.parent


def _trees() -> list[Path]:
    trees = sorted(path for path in (ROOT / "bench" / "corpus").glob("*") if path.is_dir())
    extra = os.environ.get("AMPLINT_FIX_CORPUS", "")
    trees += [Path(entry) for entry in extra.split(os.pathsep) if entry and Path(entry).is_dir()]
    return trees


def _compiles(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, "<corpus>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _copy(tree: Path, into: Path) -> list[Path]:
    copied = []
    for source in sorted(tree.rglob("*.py")):
        if not source.is_file() or any(part.startswith(".") for part in source.relative_to(tree).parts):
            continue
        target = into / source.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(target)
    return copied


def _apply(reports: list[FileReport]) -> None:
    for report in reports:
        if report.fixed is not None:
            assert report.original is not None
            assert write_atomically(report.path, report.original, report.fixed) is None


def _job(root: Path, mode: Mode, unsafe: bool) -> Job:
    settings = Settings(project_root=str(root), select=("ALL",))
    return Job(mode, settings, all_rules(), unsafe_fixes=unsafe, index_roots=(str(root),))


TREES = _trees()


@pytest.mark.skipif(not TREES, reason="no fix corpus: run bench/get_corpus.sh or set AMPLINT_FIX_CORPUS")
@pytest.mark.parametrize("tree", TREES, ids=[tree.name for tree in TREES])
def test_unsafe_fix_twice_equals_once_and_keeps_files_compiling(tree: Path, tmp_path: Path) -> None:
    files = _copy(tree, tmp_path)
    originals = {path: path.read_bytes() for path in files}
    first = list(run([str(p) for p in files], _job(tmp_path, Mode.FIX, True), jobs=2))
    _apply(first)
    changed = [p for p in files if p.read_bytes() != originals[p]]
    assert [p for p in changed if _compiles(originals[p]) and not _compiles(p.read_bytes())] == []
    second = list(run([str(p) for p in files], _job(tmp_path, Mode.FIX, True), jobs=2))
    assert [r.path for r in second if r.fixed is not None] == [], "fixing twice changed more than fixing once"
    print(f"\n{tree.name}: {len(files)} files, {len(changed)} changed by the unsafe fix")


@pytest.mark.skipif(not TREES, reason="no fix corpus: run bench/get_corpus.sh or set AMPLINT_FIX_CORPUS")
@pytest.mark.parametrize("tree", TREES, ids=[tree.name for tree in TREES])
def test_safe_fix_leaves_what_a_following_check_reports(tree: Path, tmp_path: Path) -> None:
    files = _copy(tree, tmp_path)
    fixed = list(run([str(p) for p in files], _job(tmp_path, Mode.FIX, False), jobs=2))
    _apply(fixed)
    remaining = {(r.path, d.code, d.location.row, d.location.column, d.message) for r in fixed for d in r.diagnostics}
    checked = list(run([str(p) for p in files], _job(tmp_path, Mode.CHECK, False), jobs=2))
    reported = {(r.path, d.code, d.location.row, d.location.column, d.message) for r in checked for d in r.diagnostics}
    assert remaining == reported
    safe_left = [
        (r.path, d.code, d.location.row)
        for r in checked
        for d in r.diagnostics
        if d.fix is not None and d.fix.applicability is Applicability.SAFE
    ]
    assert safe_left == [], "a safe fix the fix run did not apply"
