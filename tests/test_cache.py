"""The results cache: same answers as no cache, fewer parses, and never a crash."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import amplint
from amplint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location, file_diagnostic
from amplint.engine import cache as cache_module
from amplint.engine import fixer, linter, runner
from amplint.engine.cache import ResultsCache, diagnostic_from_json, diagnostic_to_json
from amplint.engine.catalog import INTERNAL_ERROR
from amplint.engine.config import Settings
from amplint.engine.runner import FileReport, Job, Mode, run
from amplint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").glob("*.py"))

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
DEPRECATED_FIXED = 'import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'
CLEAN = "import os\n\nprint(os.sep)\n"


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return Settings(project_root=str(tmp_path)).with_overrides(**overrides)


def _check(paths: list[Path], settings: Settings, cache_dir: Path | None) -> list[FileReport]:
    job = Job(Mode.CHECK, settings, all_rules())
    return list(run([str(p) for p in paths], job, jobs=1, cache_dir=None if cache_dir is None else str(cache_dir)))


def _summary(reports: list[FileReport]) -> list[tuple[str, list[Diagnostic], list[str | None], str]]:
    # Diagnostic equality ignores ``detail``, so it is compared on its own. The text is what
    # outputs quote findings from: a clean file served from the cache carries none (a warm
    # run does not decode the tree), and nothing quotes it.
    return [(r.path, r.diagnostics, [d.detail for d in r.diagnostics], r.old_text if r.diagnostics else "") for r in reports]


@pytest.fixture
def lint_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths that were really linted (parsed), as opposed to served from the cache."""
    calls: list[str] = []
    real = linter.lint_source

    def counting(path: str, *args: object, **kwargs: object) -> object:
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(linter, "lint_source", counting)
    monkeypatch.setattr(fixer, "lint_source", counting)
    return calls


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


# -- serialisation ---------------------------------------------------------------------------


def test_a_diagnostic_survives_the_round_trip() -> None:
    edit = Edit(3, 9, "torch.amp.autocast(\"cuda\")\n  é ✓", Location(1, 4), Location(2, 1))
    fix = Fix("Use torch.amp", (edit, Edit(0, 0, "import torch\n", Location(1, 1), Location(1, 1))), Applicability.UNSAFE, "imports")
    original = Diagnostic("AMP001", "message ✓", "a.py", Location(1, 4), Location(1, 30), fix, detail="Traceback…")
    restored = diagnostic_from_json(json.loads(json.dumps(diagnostic_to_json(original))), "a.py")
    assert restored == original
    assert restored.detail == "Traceback…"
    assert restored.fix is not None and restored.fix.applicability is Applicability.UNSAFE


def test_a_diagnostic_without_fix_or_detail_survives_the_round_trip() -> None:
    original = Diagnostic("AMP105", "no scaler", "b.py", Location(7, 5), Location(8, 13))
    restored = diagnostic_from_json(json.loads(json.dumps(diagnostic_to_json(original))), "elsewhere/b.py")
    assert restored == Diagnostic("AMP105", "no scaler", "elsewhere/b.py", Location(7, 5), Location(8, 13))
    assert restored.fix is None and restored.detail is None


# -- hits and misses ---------------------------------------------------------------------------


def test_cached_results_equal_uncached_results_on_every_fixture(tmp_path: Path, lint_calls: list[str]) -> None:
    copies = []
    for fixture in FIXTURES:
        copy = tmp_path / fixture.name
        shutil.copyfile(fixture, copy)
        copies.append(copy)
    settings = _settings(tmp_path)
    uncached = _check(copies, settings, None)
    assert any(r.diagnostics for r in uncached), "the fixtures are meant to have findings"
    cold = _check(copies, settings, tmp_path / "cache")
    lint_calls.clear()
    warm = _check(copies, settings, tmp_path / "cache")
    assert lint_calls == []
    assert _summary(cold) == _summary(uncached)
    assert _summary(warm) == _summary(uncached)
    assert [r.original for r in warm] == [p.read_bytes() for p in copies]


def test_changed_content_is_rechecked_and_unchanged_content_is_not(tmp_path: Path, lint_calls: list[str]) -> None:
    a = _write(tmp_path, "a.py", DEPRECATED)
    b = _write(tmp_path, "b.py", DEPRECATED)
    settings = _settings(tmp_path)
    _check([a, b], settings, tmp_path / "cache")
    assert sorted(lint_calls) == ["a.py", "b.py"]

    lint_calls.clear()
    a.write_text(CLEAN, encoding="utf-8")
    # Same bytes, new mtime: the content hash decides, so this stays a hit.
    os.utime(b, (time.time() + 10, time.time() + 10))
    reports = _check([a, b], settings, tmp_path / "cache")
    assert lint_calls == []  # CLEAN has no trigger word: pre-filtered, never linted
    assert reports[0].diagnostics == []
    assert [d.code for d in reports[1].diagnostics] == ["AMP001"]

    lint_calls.clear()
    a.write_text(DEPRECATED + "# edited\n", encoding="utf-8")
    reports = _check([a, b], settings, tmp_path / "cache")
    assert lint_calls == ["a.py"]
    assert [d.code for d in reports[0].diagnostics] == ["AMP001"]


def test_reports_come_in_the_order_given(tmp_path: Path) -> None:
    paths = [_write(tmp_path, f"f{i}.py", DEPRECATED if i % 2 else CLEAN) for i in range(6)]
    settings = _settings(tmp_path)
    _check(paths[::2], settings, tmp_path / "cache")  # half hits, half misses
    reports = _check(paths, settings, tmp_path / "cache")
    assert [r.path for r in reports] == [str(p) for p in paths]
    assert [bool(r.diagnostics) for r in reports] == [False, True] * 3


def test_different_settings_use_different_entries(tmp_path: Path, lint_calls: list[str]) -> None:
    # With AMP001 ignored, the pre-filter still keeps the file for AMP302, which is silent.
    path = _write(tmp_path, "a.py", DEPRECATED + "scaler = torch.amp.GradScaler('cpu')\n")
    _check([path], _settings(tmp_path), tmp_path / "cache")
    lint_calls.clear()
    ignoring = _settings(tmp_path, ignore=("AMP001",))
    assert _check([path], ignoring, tmp_path / "cache")[0].diagnostics == []
    assert lint_calls == ["a.py"]
    lint_calls.clear()
    # Both results stay cached side by side.
    assert [d.code for d in _check([path], _settings(tmp_path), tmp_path / "cache")[0].diagnostics] == ["AMP001"]
    assert _check([path], ignoring, tmp_path / "cache")[0].diagnostics == []
    assert lint_calls == []


def test_per_file_ignores_and_max_file_size_are_part_of_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    base = _settings(tmp_path)
    keys = {
        cache_module.bucket_key(base, all_rules()),
        cache_module.bucket_key(base.with_overrides(per_file_ignores={"a.py": ("AMP001",)}), all_rules()),
        cache_module.bucket_key(base.with_overrides(max_file_size=10), all_rules()),
        cache_module.bucket_key(_settings(tmp_path / "sub"), all_rules()),
    }
    assert len(keys) == 4
    assert _check([path], base.with_overrides(max_file_size=10), tmp_path / "cache")[0].diagnostics[0].code == "AMP900"
    assert _check([path], base, tmp_path / "cache")[0].diagnostics[0].code == "AMP001"


def test_a_changed_amplint_build_does_not_reuse_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path)
    before = cache_module.bucket_key(settings, all_rules())
    monkeypatch.setattr(cache_module, "_package_fingerprint", lambda: "edited rule")
    assert cache_module.bucket_key(settings, all_rules()) != before
    monkeypatch.setattr(amplint, "__version__", "99.0")
    assert cache_module.bucket_key(settings, all_rules()) != before


def test_internal_errors_and_unreadable_files_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    real = runner.process_path

    def crashing(p: str, job: Job) -> FileReport:
        report = real(p, job)
        report.diagnostics = [file_diagnostic(p, INTERNAL_ERROR, "internal error: boom")]
        return report

    monkeypatch.setattr(runner, "process_path", crashing)
    assert _check([path], settings, tmp_path / "cache")[0].internal_error
    monkeypatch.setattr(runner, "process_path", real)
    assert [d.code for d in _check([path], settings, tmp_path / "cache")[0].diagnostics] == ["AMP001"]

    missing = tmp_path / "missing.py"
    assert _check([missing], settings, tmp_path / "cache")[0].diagnostics[0].message.startswith("cannot read")
    missing.write_text(DEPRECATED, encoding="utf-8")
    assert [d.code for d in _check([missing], settings, tmp_path / "cache")[0].diagnostics] == ["AMP001"]


# -- fix mode ---------------------------------------------------------------------------------------


def test_fix_mode_still_fixes_a_file_whose_check_result_is_cached(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    _check([path], settings, tmp_path / "cache")
    (report,) = run([str(path)], Job(Mode.FIX, settings, all_rules()), jobs=1, cache_dir=str(tmp_path / "cache"))
    assert report.fixed == DEPRECATED_FIXED.encode()
    assert report.fixes_applied == {"AMP001": 1}


# Mentions autocast and backward, so the pre-filter keeps it, and nothing fires.
CLEAN_BUT_PARSED = "import torch\nwith torch.autocast('cpu'):\n    y = model(x)\ny.sum().backward()\n"


def test_fix_mode_serves_files_with_nothing_to_fix_from_the_cache(tmp_path: Path, lint_calls: list[str]) -> None:
    unsafe_only = "import torch\n\ndef train(model, x):\n    model.half()\n    model(x).sum().backward()\n"
    paths = [_write(tmp_path, "clean.py", CLEAN_BUT_PARSED), _write(tmp_path, "unsafe.py", unsafe_only)]
    settings = _settings(tmp_path)
    uncached = list(run([str(p) for p in paths], Job(Mode.FIX, settings, all_rules()), jobs=1))
    assert [d.code for d in uncached[1].diagnostics] == ["AMP101"], "the example needs an unsafe-only finding"
    lint_calls.clear()
    first = list(run([str(p) for p in paths], Job(Mode.FIX, settings, all_rules()), jobs=1, cache_dir=str(tmp_path / "cache")))
    assert lint_calls == ["clean.py", "unsafe.py"]
    lint_calls.clear()
    second = list(run([str(p) for p in paths], Job(Mode.FIX, settings, all_rules()), jobs=1, cache_dir=str(tmp_path / "cache")))
    assert lint_calls == []
    for reports in (first, second):
        assert _summary(reports) == _summary(uncached)
        assert [(r.fixed, r.fixes_applied, r.fix_failures) for r in reports] == [(None, {}, []), (None, {}, [])]
    # With unsafe fixes allowed, the cached AMP101 is fixable: the file must be fixed, not served.
    (report,) = run([str(paths[1])], Job(Mode.FIX, settings, all_rules(), unsafe_fixes=True), jobs=1, cache_dir=str(tmp_path / "cache"))
    assert report.fixes_applied == {"AMP101": 1}


# -- robustness --------------------------------------------------------------------------------------


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.glob("v*/*.json") if not p.name.startswith(".tmp-"))


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x00\xff\xfe garbage",
        b'{"format": 1, "path": ',
        b"[]",
        b'{"format": 1}',
        b'{"format": 999, "path": "x", "sha256": "y", "diagnostics": []}',
    ],
)
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path: Path, garbage: bytes, lint_calls: list[str]) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    _check([path], settings, tmp_path / "cache")
    (entry,) = _entries(tmp_path / "cache")
    entry.write_bytes(garbage)
    lint_calls.clear()
    assert [d.code for d in _check([path], settings, tmp_path / "cache")[0].diagnostics] == ["AMP001"]
    assert lint_calls == ["a.py"]
    assert json.loads(entry.read_bytes())["format"] == cache_module.FORMAT


def test_an_entry_with_the_right_hash_but_wrong_types_is_a_miss(tmp_path: Path, lint_calls: list[str]) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    _check([path], settings, tmp_path / "cache")
    (entry,) = _entries(tmp_path / "cache")
    data = json.loads(entry.read_bytes())
    data["diagnostics"][0]["location"] = ["1", None]
    entry.write_text(json.dumps(data), encoding="utf-8")
    lint_calls.clear()
    report = _check([path], settings, tmp_path / "cache")[0]
    assert lint_calls == ["a.py"]
    assert report.diagnostics[0].location == Location(3, 6)


def test_an_entry_for_another_path_is_not_used(tmp_path: Path, lint_calls: list[str]) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    _check([path], settings, tmp_path / "cache")
    (entry,) = _entries(tmp_path / "cache")
    data = json.loads(entry.read_bytes())
    data["path"] = str(tmp_path / "other.py")
    entry.write_text(json.dumps(data), encoding="utf-8")
    lint_calls.clear()
    _check([path], settings, tmp_path / "cache")
    assert lint_calls == ["a.py"]


def test_an_unusable_cache_directory_is_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory", encoding="utf-8")
    for _ in range(2):
        assert [d.code for d in _check([path], settings, blocker)[0].diagnostics] == ["AMP001"]
    assert blocker.read_text(encoding="utf-8") == "not a directory"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions and a non-root user")
def test_a_read_only_cache_directory_is_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    cache_dir.chmod(0o500)
    try:
        assert [d.code for d in _check([path], settings, cache_dir)[0].diagnostics] == ["AMP001"]
    finally:
        cache_dir.chmod(0o700)


def test_the_cache_directory_is_tagged_and_ignored_by_git(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    _check([path], _settings(tmp_path), tmp_path / "nested" / "cache")
    cache_dir = tmp_path / "nested" / "cache"
    assert (cache_dir / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    assert (cache_dir / "CACHEDIR.TAG").read_text(encoding="utf-8").startswith(
        "Signature: 8a477f597d28d172789f06886806bc55"
    )
    assert len(_entries(cache_dir)) == 1
    assert not list(cache_dir.glob("v*/.tmp-*"))


def test_stale_buckets_are_pruned_when_a_new_bucket_is_made(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    stale = cache_dir / "v1-0000000000000000"
    recent = cache_dir / "v1-1111111111111111"
    unrelated = cache_dir / "notes"
    for directory in (stale, recent, unrelated):
        directory.mkdir(parents=True)
        (directory / "x.json").write_text("{}", encoding="utf-8")
    old = time.time() - cache_module.STALE_AFTER - 60
    os.utime(stale, (old, old))
    os.utime(unrelated, (old, old))
    _check([_write(tmp_path, "a.py", DEPRECATED)], _settings(tmp_path), cache_dir)
    assert not stale.exists()
    assert recent.exists() and unrelated.exists()


def test_a_file_edited_after_its_read_is_reported_as_read_and_checked_again_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "a.py", DEPRECATED)
    settings = _settings(tmp_path)
    _check([path], settings, tmp_path / "cache")
    real_load = ResultsCache.load

    def load_then_edit(self: ResultsCache, p: str, data: bytes) -> list[Diagnostic] | None:
        result = real_load(self, p, data)
        Path(p).write_text(CLEAN, encoding="utf-8")  # edited while the run looks it up
        return result

    monkeypatch.setattr(ResultsCache, "load", load_then_edit)
    during = _check([path], settings, tmp_path / "cache")[0]
    # One read: the findings are those of the text the report quotes, never a mixture.
    assert [d.code for d in during.diagnostics] == ["AMP001"] and during.old_text == DEPRECATED
    monkeypatch.setattr(ResultsCache, "load", real_load)
    after = _check([path], settings, tmp_path / "cache")[0]
    assert after.diagnostics == [] and after.old_text == CLEAN


# -- concurrency --------------------------------------------------------------------------------------


def _hammer(paths: list[str], project_root: str, cache_dir: str, rounds: int, queue: multiprocessing.Queue[object]) -> None:
    try:
        settings = Settings(project_root=project_root)
        results = []
        for _ in range(rounds):
            reports: Iterator[FileReport] = run(paths, Job(Mode.CHECK, settings, all_rules()), jobs=1, cache_dir=cache_dir)
            results.append([[d.code for d in r.diagnostics] for r in reports])
        queue.put(results)
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        queue.put(repr(error))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_concurrent_runs_share_one_cache_safely(tmp_path: Path) -> None:
    paths = [str(_write(tmp_path, f"f{i}.py", DEPRECATED if i % 3 else CLEAN)) for i in range(12)]
    expected = [["AMP001"] if i % 3 else [] for i in range(12)]
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[object] = context.Queue()
    workers = [
        context.Process(target=_hammer, args=(paths, str(tmp_path), str(tmp_path / "cache"), 4, queue))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    results = [queue.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    for result in results:
        assert result == [expected] * 4
    entries = _entries(tmp_path / "cache")
    assert len(entries) == len(paths)
    for entry in entries:
        assert json.loads(entry.read_bytes())["format"] == cache_module.FORMAT


_WARM_RUN = """
import sys
from amplint.cli import main
code = main(["check", "--output-format", "concise", "--cache-dir", sys.argv[1], *sys.argv[2:]])
print("exit", code, "loaded:", sorted(m for m in ("libcst", "amplint.rules.amp001_deprecated_amp_namespace") if m in sys.modules))
"""


def test_a_fully_cached_run_loads_neither_libcst_nor_any_rule(tmp_path: Path) -> None:
    # Importing libcst and the rules costs more than the rest of a cached run: a run whose
    # every file is served from the cache must report the same without them.
    import subprocess
    import sys

    for name, text in {"a.py": DEPRECATED, "b.py": CLEAN, "c.py": "import torch\nwith torch.autocast('cuda'):\n    x = (\n"}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    files = [str(tmp_path / name) for name in ("a.py", "b.py", "c.py")]
    cache = str(tmp_path / "cache")

    def warm_run() -> str:
        result = subprocess.run([sys.executable, "-c", _WARM_RUN, cache, *files], capture_output=True, text=True, check=True)
        return result.stdout

    cold = warm_run()
    assert "libcst" in cold  # it analysed the files
    warm = warm_run()
    assert warm.endswith("exit 1 loaded: []\n")
    # The same report either way.
    assert cold.replace(cold.splitlines()[-1], "") == warm.replace(warm.splitlines()[-1], "")
    assert "AMP001" in warm and "AMP900" in warm
