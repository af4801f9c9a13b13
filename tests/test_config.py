"""Configuration: finding the file, reading it, rejecting bad values, selecting rules,
and how command-line options combine with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint.cli import cli
from amplint.engine.config import (
    DEFAULT_EXCLUDE,
    ConfigError,
    Settings,
    find_config,
    load_config,
    resolve_settings,
    select_rules,
    validate_selectors,
)
from amplint.rules import all_rules

ALL_CODES = {rule.code for rule in all_rules()}
DEFAULT_CODES = {rule.code for rule in all_rules() if rule.default_enabled}
AMP1 = {code for code in ALL_CODES if code.startswith("AMP1")}


def codes(
    select: list[str] | None = None,
    extend_select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
) -> set[str]:
    return {r.code for r in select_rules(all_rules(), select, extend_select, ignore)}


# -- selection -------------------------------------------------------------------------------


def test_every_rule_is_on_by_default_unless_it_says_otherwise() -> None:
    assert codes() == DEFAULT_CODES


@pytest.mark.parametrize(
    ("select", "extend_select", "ignore", "expected"),
    [
        (["AMP1"], (), (), AMP1),
        (["AMP1"], (), ("AMP105",), AMP1 - {"AMP105"}),
        # The more specific selector wins, whichever list it is in.
        (["AMP105"], (), ("AMP1",), {"AMP105"}),
        (["AMP002"], (), ("AMP0",), {"AMP002"}),
        (["ALL"], (), ("AMP",), set()),
        (["AMP"], (), ("ALL",), ALL_CODES),
        # On a tie, ignore wins.
        (["AMP1"], (), ("AMP1",), set()),
        (["AMP001"], (), ("AMP001",), set()),
        # Rule names select like their code; selectors are case-insensitive.
        (["deprecated-amp-namespace"], (), (), {"AMP001"}),
        (["amp002"], (), (), {"AMP002"}),
        (
            None,
            ("AMP002",),
            ("AMP00",),
            {c for c in DEFAULT_CODES if c[:5] != "AMP00"} | {"AMP002"},
        ),
        (["AMP001"], ("AMP002",), (), {"AMP001", "AMP002"}),
        ([], (), (), set()),
    ],
)
def test_selection_specificity(
    select: list[str] | None,
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    expected: set[str],
) -> None:
    assert codes(select, extend_select, ignore) == expected


def test_unknown_selectors_are_rejected() -> None:
    validate_selectors(["AMP", "AMP0", "ALL", "all", "AMP001", "deprecated-amp-namespace"], all_rules())
    for bad in ["XYZ", "AMP0001", "E501", "AMP9999", ""]:
        with pytest.raises(ConfigError, match="unknown rule selector"):
            validate_selectors([bad], all_rules())


# -- finding the file ------------------------------------------------------------------------


def test_config_is_found_from_the_checked_path_upward(tmp_path: Path) -> None:
    (tmp_path / "amplint.toml").write_text('ignore = ["AMP001"]\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "train.py").write_text("")
    assert find_config(deep / "train.py") == tmp_path / "amplint.toml"
    assert find_config(deep) == tmp_path / "amplint.toml"
    settings = resolve_settings(deep, all_rules())
    assert settings.ignore == ("AMP001",)
    assert settings.config_path == str(tmp_path / "amplint.toml")
    assert settings.project_root == str(tmp_path)


def test_pyproject_counts_only_with_a_tool_amplint_table(tmp_path: Path) -> None:
    (tmp_path / "amplint.toml").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    assert find_config(tmp_path / "sub") == tmp_path / "amplint.toml"
    (tmp_path / "sub" / "pyproject.toml").write_text('[tool.amplint]\nselect = ["AMP1"]\n')
    assert find_config(tmp_path / "sub") == tmp_path / "sub" / "pyproject.toml"
    assert resolve_settings(tmp_path / "sub", all_rules()).select == ("AMP1",)


def test_file_precedence_in_one_directory(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.amplint]\n")
    assert find_config(tmp_path) == tmp_path / "pyproject.toml"
    (tmp_path / ".amplint.toml").write_text("")
    assert find_config(tmp_path) == tmp_path / ".amplint.toml"
    (tmp_path / "amplint.toml").write_text("")
    assert find_config(tmp_path) == tmp_path / "amplint.toml"


def test_no_config_means_defaults_rooted_at_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = resolve_settings(tmp_path, all_rules())
    assert settings.config_path is None
    assert settings.project_root == str(tmp_path)
    assert settings.exclude == DEFAULT_EXCLUDE
    assert settings.select is None and settings.ignore == ()


def test_a_broken_pyproject_that_configures_amplint_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.amplint]\nselect = ["AMP1"\n')
    with pytest.raises(ConfigError, match="invalid TOML"):
        find_config(tmp_path)
    # A broken pyproject.toml that is about something else is skipped, not fatal.
    (tmp_path / "pyproject.toml").write_text("[project\nname = 'x'\n")
    assert find_config(tmp_path) is None


def test_explicit_config_is_used_as_is(tmp_path: Path) -> None:
    (tmp_path / "amplint.toml").write_text('select = ["AMP1"]\n')
    other = tmp_path / "conf" / "strict.toml"
    other.parent.mkdir()
    other.write_text('select = ["AMP0"]\nexclude = ["gen"]\n')
    settings = resolve_settings(tmp_path, all_rules(), other)
    assert settings.select == ("AMP0",)
    assert settings.exclude == ("gen",)
    assert settings.project_root == str(other.parent)


# -- reading it ------------------------------------------------------------------------------


def test_every_setting_is_read(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        "[tool.amplint]\n"
        'select = ["AMP0", "AMP1"]\n'
        'extend-select = ["AMP3"]\n'
        'ignore = ["AMP105"]\n'
        'exclude = ["gen"]\n'
        'extend-exclude = ["legacy/*.py"]\n'
        "unsafe-fixes = true\n"
        "respect-gitignore = false\n"
        "force-exclude = true\n"
        'cache-dir = "/tmp/amplint-cache"\n'
        "max-file-size = 1000\n"
        "[tool.amplint.per-file-ignores]\n"
        '"tests/*.py" = ["AMP1"]\n'
    )
    settings = load_config(path, all_rules())
    assert settings == Settings(
        select=("AMP0", "AMP1"),
        extend_select=("AMP3",),
        ignore=("AMP105",),
        exclude=("gen",),
        extend_exclude=("legacy/*.py",),
        per_file_ignores={"tests/*.py": ("AMP1",)},
        unsafe_fixes=True,
        respect_gitignore=False,
        force_exclude=True,
        cache_dir="/tmp/amplint-cache",
        max_file_size=1000,
        config_path=str(path),
        project_root=str(tmp_path),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('select = "AMP001"\n', "'select' must be a list of strings"),
        ("ignore = [1]\n", "'ignore' must be a list of strings"),
        ('per-file-ignores = ["x"]\n', "'per-file-ignores' must be a table"),
        ('[per-file-ignores]\n"x.py" = "AMP001"\n', "per-file-ignores.x.py' must be a list"),
        ('unsafe-fixes = "yes"\n', "'unsafe-fixes' must be true or false"),
        ("cache-dir = 3\n", "'cache-dir' must be a string"),
        ("max-file-size = 0\n", "'max-file-size' must be a positive integer"),
        ('selct = ["AMP001"]\n', "unknown setting(s): selct"),
        ('select = ["AMP01X"]\n', "unknown rule selector: 'AMP01X'"),
        ('[per-file-ignores]\n"x.py" = ["E501"]\n', "unknown rule selector: 'E501'"),
        ("select = [\n", "invalid TOML"),
    ],
)
def test_bad_settings_are_rejected_with_the_file_named(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "amplint.toml"
    path.write_text(content)
    with pytest.raises(ConfigError) as raised:
        load_config(path, all_rules())
    assert message in str(raised.value)
    assert str(path) in str(raised.value)


def test_with_overrides_skips_none() -> None:
    settings = Settings(select=("AMP1",))
    assert settings.with_overrides(select=None, unsafe_fixes=True) == Settings(
        select=("AMP1",), unsafe_fixes=True
    )


# -- the command line on top of the file -----------------------------------------------------

DEPRECATED = (
    "import torch\nscaler = torch.cuda.amp.GradScaler()\nd = torch.get_autocast_gpu_dtype()\n"
)


def reported(project: Path, *args: str) -> set[str]:
    result = CliRunner().invoke(cli, ["check", "--output-format", "json", *args, "."])
    assert result.exit_code in (0, 1), result.output
    return {entry["code"] for entry in json.loads(result.stdout)}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text(DEPRECATED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_select_replaces_configured_select_and_extend_select(project: Path) -> None:
    (project / "amplint.toml").write_text('select = ["AMP1"]\nextend-select = ["AMP001"]\n')
    assert reported(project) == {"AMP001"}
    assert reported(project, "--select", "AMP002") == {"AMP002"}


def test_cli_extend_select_and_ignore_add_to_the_configured_lists(project: Path) -> None:
    (project / "amplint.toml").write_text('select = ["AMP1"]\nignore = ["AMP001"]\n')
    assert reported(project) == set()
    assert reported(project, "--extend-select", "AMP0") == {"AMP002"}
    assert reported(project, "--extend-select", "AMP0", "--ignore", "AMP002") == set()
    # A configured ignore still applies to --select, even to the very same code (ties go
    # to ignore); --isolated is the way around it.
    assert reported(project, "--select", "AMP0") == {"AMP002"}
    assert reported(project, "--select", "AMP0", "--select", "AMP001") == {"AMP002"}
    (project / "amplint.toml").write_text('ignore = ["AMP0"]\n')
    assert reported(project, "--select", "AMP001") == {"AMP001"}


def test_isolated_ignores_the_configuration(project: Path) -> None:
    (project / "amplint.toml").write_text('ignore = ["AMP0"]\n')
    assert reported(project) == set()
    assert reported(project, "--isolated") == {"AMP001", "AMP002"}
    result = CliRunner().invoke(cli, ["check", "--isolated", "--config", "amplint.toml", "."])
    assert result.exit_code == 2
    assert "mutually exclusive" in result.stderr


def test_configured_unsafe_fixes_can_be_turned_off_on_the_command_line(project: Path) -> None:
    # AMP101's fixes are unsafe (removing a cast changes numerics).
    (project / "train.py").write_text(
        "import torch\nmodel = Net().cuda().half()\nloss = model(x.half()).sum()\nloss.backward()\n"
    )
    (project / "amplint.toml").write_text("unsafe-fixes = true\n")
    args = ["check", "--output-format", "concise", "--select", "AMP101", "."]
    result = CliRunner().invoke(cli, args)
    assert result.stdout.count("AMP101 [*]") == 2
    assert "[*] 2 fixable with the `--fix` option." in result.stdout
    result = CliRunner().invoke(cli, [*args, "--no-unsafe-fixes"])
    assert "[*]" not in result.stdout.replace("[*] 2", "")
    assert result.stdout.endswith(
        "Found 2 errors.\n"
        "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option).\n"
    )


def test_per_file_ignores_match_paths_from_the_project_root(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "train.py").write_text(DEPRECATED)
    (project / "amplint.toml").write_text(
        '[per-file-ignores]\n"sub/*.py" = ["AMP001"]\n"train.py" = ["AMP002"]\n'
    )
    result = CliRunner().invoke(cli, ["check", "--output-format", "json", "."])
    found = {
        (Path(e["filename"]).relative_to(project).as_posix(), e["code"])
        for e in json.loads(result.stdout)
    }
    # "train.py" has no slash, so like a .gitignore line it matches at any depth.
    assert found == {("train.py", "AMP001")}


def test_cli_cache_dir_is_relative_to_the_current_directory(project: Path) -> None:
    def caches() -> set[str]:
        return {p.parent.relative_to(project).as_posix() for p in project.rglob("CACHEDIR.TAG")}

    (project / "sub").mkdir()
    (project / "sub" / "train.py").write_text(DEPRECATED)
    (project / "sub" / "amplint.toml").write_text('cache-dir = "cache-here"\n')
    CliRunner().invoke(cli, ["check", "--no-cache", "sub"])
    assert caches() == set()
    # The configuration's cache-dir is relative to the configuration's directory...
    CliRunner().invoke(cli, ["check", "sub"])
    assert caches() == {"sub/cache-here"}
    # ...the command line's to the directory the command runs in.
    CliRunner().invoke(cli, ["check", "--cache-dir", "elsewhere", "sub"])
    assert caches() == {"sub/cache-here", "elsewhere"}
