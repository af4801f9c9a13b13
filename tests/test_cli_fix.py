"""``amplint fix`` (diff, or ``--apply``), its ``check --fix`` / ``check --diff``
aliases, unsafe fixes, exit codes, ``--show-fixes`` and write failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from amplint import api as api_module
from amplint.cli import cli

TRAIN = "import torch\nscaler = torch.cuda.amp.GradScaler()\nd = torch.get_autocast_gpu_dtype()\n"
TRAIN_FIXED = (
    'import torch\nscaler = torch.amp.GradScaler("cuda")\nd = torch.get_autocast_dtype("cuda")\n'
)
# AMP001 on a *args call has no fix.
UNFIXABLE = "import torch\nctx = torch.cuda.amp.autocast(*args)\n"
# AMP101's fixes are unsafe: removing a cast changes numerics.
HALF = "import torch\nmodel = Net().cuda().half()\nloss = model(x.half()).sum()\nloss.backward()\n"
HALF_FIXED = "import torch\nmodel = Net().cuda()\nloss = model(x).sum()\nloss.backward()\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("AMPLINT_OUTPUT_FORMAT", raising=False)
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_fix_prints_the_diff_and_writes_nothing(project: Path) -> None:
    code, out, err = invoke("fix", ".")
    assert code == 1
    assert out == (
        "--- a/train.py\n"
        "+++ b/train.py\n"
        "@@ -1,3 +1,3 @@\n"
        " import torch\n"
        "-scaler = torch.cuda.amp.GradScaler()\n"
        "-d = torch.get_autocast_gpu_dtype()\n"
        '+scaler = torch.amp.GradScaler("cuda")\n'
        '+d = torch.get_autocast_dtype("cuda")\n'
    )
    assert err == "Would fix 2 errors.\n"
    assert (project / "train.py").read_text() == TRAIN
    assert invoke("check", "--diff", ".") == (code, out, err)


def test_fix_with_nothing_to_change_exits_0_even_with_unfixable_findings(project: Path) -> None:
    (project / "train.py").write_text(UNFIXABLE)
    assert invoke("fix", ".") == (0, "", "No errors would be fixed.\n")
    # Applying finds the unfixable diagnostic remaining, which fails like `check`.
    code, out, _ = invoke("fix", "--apply", "--output-format", "concise", ".")
    assert code == 1
    assert out.endswith("Found 1 error.\n")


def test_apply_writes_and_a_second_run_is_clean(project: Path) -> None:
    code, out, err = invoke("fix", "--apply", ".")
    assert (code, err) == (0, "")
    assert out == "Found 2 errors (2 fixed, 0 remaining).\n"
    assert (project / "train.py").read_text() == TRAIN_FIXED
    assert invoke("fix", ".") == (0, "", "No errors would be fixed.\n")
    assert invoke("check", ".") == (0, "All checks passed!\n", "")


def test_apply_reports_what_remains(project: Path) -> None:
    (project / "train.py").write_text(TRAIN + "ctx = torch.cuda.amp.autocast(*args)\n")
    code, out, _ = invoke("fix", "--apply", "--output-format", "concise", ".")
    assert code == 1
    assert out == (
        "train.py:4:7: AMP001 `torch.cuda.amp.autocast(...)` is deprecated; "
        'use `torch.amp.autocast("cuda", ...)`\n'
        "Found 3 errors (2 fixed, 1 remaining).\n"
    )
    assert (
        project / "train.py"
    ).read_text() == TRAIN_FIXED + "ctx = torch.cuda.amp.autocast(*args)\n"


def test_check_fix_is_fix_apply(project: Path) -> None:
    assert invoke("check", "--fix", ".") == (0, "Found 2 errors (2 fixed, 0 remaining).\n", "")
    assert (project / "train.py").read_text() == TRAIN_FIXED


def test_fix_and_diff_together_are_a_usage_error(project: Path) -> None:
    code, _, err = invoke("check", "--fix", "--diff", ".")
    assert code == 2 and "mutually exclusive" in err
    assert (project / "train.py").read_text() == TRAIN


def test_exit_non_zero_on_fix(project: Path) -> None:
    assert invoke("fix", "--apply", "--exit-non-zero-on-fix", ".")[0] == 1
    assert (project / "train.py").read_text() == TRAIN_FIXED
    # Nothing left to fix: nothing fixed, so 0.
    assert invoke("fix", "--apply", "--exit-non-zero-on-fix", ".")[0] == 0
    # --exit-zero wins, as in Ruff.
    (project / "train.py").write_text(TRAIN)
    assert invoke("check", "--fix", "--exit-non-zero-on-fix", "--exit-zero", ".")[0] == 0


def test_unsafe_fixes_only_on_request(project: Path) -> None:
    (project / "train.py").write_text(HALF)
    code, out, err = invoke("fix", "--select", "AMP101", ".")
    assert (code, out) == (0, "")
    assert err == "No errors would be fixed (2 fixes available with `--unsafe-fixes`).\n"
    code, out, _ = invoke("check", "--select", "AMP101", "--output-format", "concise", ".")
    assert "[*]" not in out
    assert out.endswith(
        "Found 2 errors.\n"
        "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option).\n"
    )
    code, out, err = invoke("fix", "--select", "AMP101", "--unsafe-fixes", ".")
    assert code == 1
    assert "\n-model = Net().cuda().half()\n" in out
    assert "\n+model = Net().cuda()\n" in out
    assert err == "Would fix 2 errors.\n"
    assert invoke("fix", "--apply", "--select", "AMP101", "--unsafe-fixes", ".")[0] == 0
    assert (project / "train.py").read_text() == HALF_FIXED


def test_safe_and_hidden_unsafe_fixes_are_both_counted(project: Path) -> None:
    (project / "train.py").write_text(TRAIN + HALF.replace("import torch\n", ""))
    args = ("--select", "AMP001,AMP002,AMP101", ".")
    _, _, err = invoke("fix", *args)
    assert err == "Would fix 2 errors (2 additional fixes available with `--unsafe-fixes`).\n"
    _, out, _ = invoke("check", "--output-format", "concise", *args)
    assert out.endswith(
        "Found 4 errors.\n"
        "[*] 2 fixable with the `--fix` option "
        "(2 hidden fixes can be enabled with the `--unsafe-fixes` option).\n"
    )


def test_show_fixes_lists_per_file_and_rule(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "more.py").write_text(TRAIN)
    _, _, err = invoke("fix", "--show-fixes", ".")
    listing = (
        "- sub/more.py:\n"
        "    1 \N{MULTIPLICATION SIGN} AMP001 (deprecated-amp-namespace)\n"
        "    1 \N{MULTIPLICATION SIGN} AMP002 (deprecated-autocast-state)\n"
        "- train.py:\n"
        "    1 \N{MULTIPLICATION SIGN} AMP001 (deprecated-amp-namespace)\n"
        "    1 \N{MULTIPLICATION SIGN} AMP002 (deprecated-autocast-state)\n"
    )
    assert err == "Would fix 4 errors.\nWould fix 4 errors:\n" + listing
    code, out, err = invoke("fix", "--apply", "--show-fixes", ".")
    assert (code, out) == (0, "Found 4 errors (4 fixed, 0 remaining).\n")
    assert err == "Fixed 4 errors:\n" + listing


def test_a_file_that_cannot_be_written_is_an_error_and_keeps_its_findings(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "other.py").write_text(TRAIN)
    real = api_module.write_atomically  # type: ignore[attr-defined]

    def refuse_train(path: str, original: bytes, data: bytes) -> str | None:
        if Path(path).name == "train.py":
            return "file is read-only; not written"
        return real(path, original, data)

    monkeypatch.setattr(api_module, "write_atomically", refuse_train)
    code, out, err = invoke("fix", "--apply", "--output-format", "concise", ".")
    assert code == 2
    assert err == "error: train.py: file is read-only; not written\n"
    assert (project / "train.py").read_text() == TRAIN
    assert (project / "other.py").read_text() == TRAIN_FIXED
    # The unwritten file's findings are reported as a check would report them.
    assert out == (
        "train.py:2:10: AMP001 [*] `torch.cuda.amp.GradScaler(...)` is deprecated; "
        'use `torch.amp.GradScaler("cuda", ...)`\n'
        "train.py:3:5: AMP002 [*] `torch.get_autocast_gpu_dtype()` is deprecated; "
        'use `torch.get_autocast_dtype("cuda")`\n'
        "Found 4 errors (2 fixed, 2 remaining).\n"
        "[*] 2 fixable with the `--fix` option.\n"
        "1 file could not be written.\n"
    )


def test_line_endings_encoding_and_bom_survive(project: Path) -> None:
    crlf = TRAIN.replace("\n", "\r\n").encode()
    (project / "train.py").write_bytes(crlf)
    latin = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + TRAIN
    (project / "latin.py").write_bytes(latin.encode("latin-1"))
    (project / "bom.py").write_bytes(b"\xef\xbb\xbf" + TRAIN.encode())
    assert invoke("fix", "--apply", ".")[0] == 0
    assert (project / "train.py").read_bytes() == TRAIN_FIXED.replace("\n", "\r\n").encode()
    assert (project / "latin.py").read_bytes() == (
        "# -*- coding: latin-1 -*-\n# caf\xe9\n" + TRAIN_FIXED
    ).encode("latin-1")
    assert (project / "bom.py").read_bytes() == b"\xef\xbb\xbf" + TRAIN_FIXED.encode()


def test_files_that_do_not_parse_are_left_alone_and_mentioned(project: Path) -> None:
    broken = "import torch\nwith torch.cuda.amp.autocast(:\n    pass\n"
    (project / "broken.py").write_text(broken)
    code, out, err = invoke("fix", ".")
    assert code == 1  # train.py would change
    assert "broken.py" not in out
    assert "warning: broken.py:" in err and "AMP900 cannot parse" in err
    assert invoke("fix", "--apply", ".")[0] == 1  # the AMP900 remains
    assert (project / "broken.py").read_text() == broken
