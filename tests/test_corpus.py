"""The corpus tier: every ``.py`` file of CPython's standard library and of installed torch.

Slow (minutes), so excluded from the default run; run it with

    .venv/bin/python -m pytest -m corpus -s

Over a copy of each tree, with every rule and unsafe fixes, and with the pre-filter
turned off so that every file is parsed and analysed (the strongest test of the engine;
a real run parses far fewer): no AMP999; AMP900 only where
CPython's own compiler also refuses the file; ``fix --apply`` keeps every compiling file
compiling; files without fixes stay byte-identical; fixing again changes nothing.
"""

from __future__ import annotations

import shutil
import sysconfig
import time
import warnings
from pathlib import Path

import pytest

from amplint.engine import prefilter
from amplint.engine.config import Settings
from amplint.engine.runner import Job, Mode, run, write_atomically
from amplint.rules import all_rules

pytestmark = pytest.mark.corpus


def _trees() -> list[tuple[str, Path]]:
    trees = [("stdlib", Path(sysconfig.get_paths()["stdlib"]))]
    try:
        import torch
    except ImportError:
        pass
    else:
        trees.append(("torch", Path(torch.__file__).parent))
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
        if "site-packages" in source.relative_to(tree).parts or not source.is_file():
            continue
        target = into / source.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(target)
    return copied


@pytest.mark.parametrize(("name", "tree"), _trees(), ids=[name for name, _ in _trees()])
def test_corpus_fix_apply_is_safe(name: str, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every rule on every file; the workers are forked after this, so they see it too.
    monkeypatch.setattr(prefilter, "rules_for", lambda text, rules: list(rules))
    files = _copy(tree, tmp_path)
    originals = {path: path.read_bytes() for path in files}
    settings = Settings(project_root=str(tmp_path), select=("ALL",), max_file_size=64 * 1024 * 1024)
    job = Job(Mode.FIX, settings, all_rules(), unsafe_fixes=True)

    started = time.perf_counter()
    reports = list(run([str(p) for p in files], job, jobs=2))
    elapsed = time.perf_counter() - started
    internal = [(r.path, d.message) for r in reports for d in r.diagnostics if d.code == "AMP999"]
    assert internal == []
    unparsed = [Path(r.path) for r in reports if any(d.code == "AMP900" for d in r.diagnostics)]
    assert [p for p in unparsed if _compiles(originals[p])] == [], "AMP900 on files CPython compiles"

    for report in reports:
        if report.fixed is not None:
            assert report.original is not None
            assert write_atomically(report.path, report.original, report.fixed) is None
    changed = [p for p in files if p.read_bytes() != originals[p]]
    fixed_paths = {Path(r.path) for r in reports if r.fixed is not None}
    assert set(changed) == fixed_paths, "a file without fixes changed"
    assert [p for p in changed if _compiles(originals[p]) and not _compiles(p.read_bytes())] == []

    again = list(run([str(p) for p in changed], job, jobs=2))
    assert [r.path for r in again if r.fixed is not None] == [], "a second fix changed something"
    print(
        f"\n{name}: {len(files)} files in {elapsed:.1f}s; {len(unparsed)} AMP900 "
        f"(CPython refuses them too), {len(changed)} fixed, "
        f"{sum(len(r.diagnostics) for r in reports)} diagnostics"
    )
