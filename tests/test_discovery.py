"""Which files a run checks: walking, default exclusions, ``exclude`` patterns,
``.gitignore`` (inside git repositories only), explicit paths and ``--force-exclude``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from amplint.engine.config import Settings
from amplint.engine.discovery import discover, is_excluded


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(paths: list[str], **settings: object) -> list[str]:
    result = discover(paths, Settings(project_root=str(Path.cwd()), **settings))  # type: ignore[arg-type]
    assert result.errors == []
    return [path.as_posix() for path in result.files]


def test_walks_python_files_sorted_and_skips_the_rest(tree: Path) -> None:
    touch(tree, "b.py", "a/z.pyi", "a/y.py", "notes.txt", "script", "setup.cfg", "a/b/c.py")
    assert found(["."]) == ["a/b/c.py", "a/y.py", "a/z.pyi", "b.py"]


def test_a_walk_skips_macos_appledouble_files_but_not_python_named_alike(tree: Path) -> None:
    # protein_generator commits `._attention.py`: macOS metadata, binary, not Python.
    (tree / "model").mkdir()
    (tree / "model" / "._attention.py").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        amp")
    (tree / "model" / "attention.py").write_text("x = 1\n")
    (tree / "model" / "._private.py").write_text("x = 1\n")  # a real module with that name
    assert found(["."]) == ["model/._private.py", "model/attention.py"]
    # Named explicitly, it is checked (and reported as undecodable).
    assert found(["model/._attention.py"]) == ["model/._attention.py"]


def test_default_exclusions(tree: Path) -> None:
    touch(
        tree,
        "keep.py",
        ".venv/lib/x.py",
        "venv/x.py",
        "build/x.py",
        "dist/x.py",
        "node_modules/x.py",
        "pkg/__pycache__/x.py",
        "lib/site-packages/x.py",
        ".git/hooks/x.py",
        ".tox/x.py",
        ".amplint_cache/x.py",
        ".ipynb_checkpoints/x.py",
        "pkg/build/x.py",  # a basename pattern excludes at any depth
    )
    assert found(["."]) == ["keep.py"]


def test_explicit_paths_are_checked_despite_exclusions_unless_forced(tree: Path) -> None:
    touch(tree, "build/gen.py", "build/__pycache__/x.py", "keep.py", "data.txt")
    assert found(["build/gen.py"]) == ["build/gen.py"]
    # A named excluded directory is walked; exclusions still apply inside it.
    assert found(["build"]) == ["build/gen.py"]
    # An explicitly named file is checked whatever its suffix (as Ruff does).
    assert found(["data.txt"]) == ["data.txt"]
    assert found(["build/gen.py"], force_exclude=True) == []
    assert found(["build"], force_exclude=True) == []
    assert found(["build/gen.py", "keep.py"], force_exclude=True) == ["keep.py"]


def test_exclude_replaces_and_extend_exclude_adds(tree: Path) -> None:
    touch(tree, "build/x.py", "gen/a_pb2.py", "gen/keep.py", "src/gen/b_pb2.py", "src/y.py")
    assert found(["."], exclude=()) == [
        "build/x.py",
        "gen/a_pb2.py",
        "gen/keep.py",
        "src/gen/b_pb2.py",
        "src/y.py",
    ]
    # Slash patterns are anchored at the project root; the others match at any depth.
    assert found(["."], extend_exclude=("gen/*_pb2.py",)) == [
        "gen/keep.py",
        "src/gen/b_pb2.py",
        "src/y.py",
    ]
    assert found(["."], extend_exclude=("*_pb2.py",)) == ["gen/keep.py", "src/y.py"]


def test_exclude_patterns_are_relative_to_the_project_root(tree: Path) -> None:
    touch(tree, "proj/gen/x.py", "proj/src/y.py")
    settings = Settings(project_root=str(tree / "proj"), extend_exclude=("/gen",))
    result = discover(["proj"], settings)
    assert [p.as_posix() for p in result.files] == ["proj/src/y.py"]


def test_gitignore_is_honoured_inside_a_git_repository(tree: Path) -> None:
    (tree / ".git").mkdir()
    touch(
        tree,
        "keep.py",
        "ignored.py",
        "data/x.py",
        "pkg/keep.py",
        "pkg/local.py",
        "pkg/sub/local.py",
        "pkg/important.py",
        "other/local.py",
    )
    (tree / ".gitignore").write_text("ignored.py\ndata/\n*.py[cod]\n")
    # A nested .gitignore applies beneath its own directory only; negation works.
    (tree / "pkg" / ".gitignore").write_text("local.py\nimp*.py\n!important.py\n")
    assert found(["."]) == ["keep.py", "other/local.py", "pkg/important.py", "pkg/keep.py"]
    assert found(["."], respect_gitignore=False) == [
        "data/x.py",
        "ignored.py",
        "keep.py",
        "other/local.py",
        "pkg/important.py",
        "pkg/keep.py",
        "pkg/local.py",
        "pkg/sub/local.py",
    ]
    # Explicit paths are checked anyway, unless exclusions are forced.
    assert found(["ignored.py"]) == ["ignored.py"]
    assert found(["data"]) == ["data/x.py"]
    assert found(["data"], force_exclude=True) == []
    assert found(["ignored.py", "data/x.py"], force_exclude=True) == []


def test_gitignore_found_from_a_subdirectory_of_the_repository(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / ".gitignore").write_text("generated/\n")
    touch(tree, "src/generated/x.py", "src/y.py")
    os.chdir(tree / "src")
    assert found(["."]) == ["y.py"]


def test_gitignore_outside_a_git_repository_means_nothing(tree: Path) -> None:
    touch(tree, "ignored.py", "sub/ignored.py")
    (tree / ".gitignore").write_text("ignored.py\n")
    assert found(["."]) == ["ignored.py", "sub/ignored.py"]


def test_missing_paths_are_errors_and_the_rest_is_still_found(tree: Path) -> None:
    touch(tree, "a.py")
    result = discover(["nope.py", "a.py"], Settings(project_root=str(tree)))
    assert [p.as_posix() for p in result.files] == ["a.py"]
    assert result.errors == ["nope.py: no such file or directory"]


def test_duplicates_are_checked_once(tree: Path) -> None:
    touch(tree, "pkg/a.py", "pkg/b.py")
    assert found(["pkg", "pkg/a.py", "./pkg/b.py"]) == ["pkg/a.py", "pkg/b.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_symlinked_directories_are_not_followed_and_loops_end(tree: Path) -> None:
    touch(tree, "pkg/a.py", "elsewhere/b.py")
    (tree / "pkg" / "loop").symlink_to(tree / "pkg", target_is_directory=True)
    (tree / "pkg" / "link").symlink_to(tree / "elsewhere", target_is_directory=True)
    (tree / "pkg" / "alias.py").symlink_to(tree / "elsewhere" / "b.py")
    assert found(["pkg"]) == ["pkg/a.py", "pkg/alias.py"]


def test_is_excluded_for_stdin_names(tree: Path) -> None:
    settings = Settings(project_root=str(tree), extend_exclude=("legacy/",))
    assert is_excluded("legacy/train.py", settings)
    assert is_excluded("build/x.py", settings)
    assert not is_excluded("src/train.py", settings)


@pytest.mark.parametrize(
    "patterns",
    [
        ("build", "venv", ".git"),
        ("build", "*.gen.py", "docs/", "third_party/vendored"),
        ("build", "!build/keep.py", "*.py"),  # a negation: order matters, pathspec decides all
    ],
)
def test_plain_name_patterns_exclude_exactly_what_gitignore_matching_excludes(
    tree: Path, patterns: tuple[str, ...]
) -> None:
    # The oracle is pathspec itself, matching every pattern against each path and its name.
    import pathspec

    names = [
        "a.py", "build/x.py", "src/build/y.py", "src/builder.py", "build.py", "venv/lib/z.py",
        "src/venv_tools.py", "docs/conf.py", "src/docs/a.py", "m.gen.py", "build/keep.py",
        "third_party/vendored/v.py", "x/.git/hooks.py", "src/.github/w.py",
    ]  # fmt: skip
    touch(tree, *names)
    spec = pathspec.GitIgnoreSpec.from_lines(patterns)
    expected = sorted(
        name
        for name in names
        if not any(
            spec.match_file(prefix + "/") for prefix in ("/".join(name.split("/")[: i + 1]) for i in range(name.count("/")))
        )
        and not spec.match_file(name)
        and not spec.match_file(name.rsplit("/", 1)[-1])
    )
    assert found(["."], exclude=patterns) == expected


def test_a_walk_skips_a_copy_of_a_well_known_library_kept_in_the_tree(tree: Path) -> None:
    # ECG-Byte keeps a whole transformers checkout (its own setup.py) beside its code (round BG).
    touch(tree, "train.py", "transformers/src/transformers/trainer.py", "transformers/examples/run_squad.py")
    (tree / "transformers" / "setup.py").write_text('from setuptools import setup\nsetup(\n    name="transformers",\n)\n')
    touch(tree, "third_party/diffusers/src/diffusers/x.py")
    (tree / "third_party" / "diffusers" / "pyproject.toml").write_text('[project]\nname = "diffusers"\n')
    touch(tree, "third_party/mmcv_fork/mmcv/x.py")
    (tree / "third_party" / "mmcv_fork" / "setup.cfg").write_text("[metadata]\nname = mmcv_full\n")
    # A subproject of the repository's own is walked.
    touch(tree, "tools/mylib/mylib/x.py")
    (tree / "tools" / "mylib" / "setup.py").write_text('setup(name="mylib")\n')
    result = discover(["."], Settings(project_root=str(tree)))
    assert [path.as_posix() for path in result.files] == ["tools/mylib/mylib/x.py", "tools/mylib/setup.py", "train.py"]
    assert [note.split(":")[0] for note in result.skipped] == ["third_party/diffusers", "third_party/mmcv_fork", "transformers"]
    assert "a copy of the `transformers` library" in result.skipped[-1]
    # Named on the command line, or with the setting off, it is checked.
    assert found(["transformers"]) == [
        "transformers/examples/run_squad.py",
        "transformers/setup.py",
        "transformers/src/transformers/trainer.py",
    ]
    assert len(found(["."], skip_vendored=False)) == 8


def test_skip_vendored_is_a_setting_and_a_flag(tree: Path) -> None:
    from click.testing import CliRunner

    from amplint.cli import cli

    touch(tree, "transformers/trainer.py")
    (tree / "transformers" / "setup.py").write_text('setup(name="transformers")\n')
    (tree / "transformers" / "trainer.py").write_text("from apex import amp\n")
    runner = CliRunner()
    assert runner.invoke(cli, ["check", "--no-cache", "."]).exit_code == 0
    verbose = runner.invoke(cli, ["check", "--no-cache", "-v", "."])
    assert "transformers: skipped, a copy of the `transformers` library" in verbose.stderr
    assert runner.invoke(cli, ["check", "--no-cache", "--no-skip-vendored", "."]).exit_code == 1
    (tree / "pyproject.toml").write_text("[tool.amplint]\nskip-vendored = false\n")
    assert runner.invoke(cli, ["check", "--no-cache", "."]).exit_code == 1
    assert runner.invoke(cli, ["check", "--no-cache", "--skip-vendored", "."]).exit_code == 0


def test_force_exclude_leaves_out_a_named_file_of_a_vendored_copy(tree: Path) -> None:
    # pre-commit names each changed file; with --force-exclude a file of a vendored library
    # copy is left out as a directory walk leaves it out.
    touch(tree, "train.py", "transformers/src/transformers/trainer.py")
    (tree / "transformers" / "setup.py").write_text('setup(name="transformers")\n')
    named = ["train.py", "transformers/src/transformers/trainer.py"]
    assert found(named) == named
    assert found(named, force_exclude=True) == ["train.py"]
    assert found(["transformers"], force_exclude=True) == []
    assert found(named, force_exclude=True, skip_vendored=False) == named
