"""``amplint check`` and ``amplint fix`` on Jupyter notebooks, end to end through the CLI:
discovery, positions per cell in every output format, fixes written back into the cells
only, the diff of the cells' code, ``--add-noqa``, files that are not notebooks, and the
cache agreeing with a fresh run.

Expected positions are counted by hand from the cell sources below; rows in the JSON
file are found by searching the file's text for the JSON string of the source line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from click.testing import CliRunner

from amplint.cli import cli
from amplint.notebook import Notebook, NotebookError

SETUP = ["!pip install torch\n", "%matplotlib inline\n", "import torch\n", "model = torch.nn.Linear(4, 4)"]
# A %%bash cell holds shell, not Python: the deprecated name in it is not a finding.
SHELL = ["%%bash\n", "echo torch.cuda.amp.autocast\n"]
TRAIN = [
    "%%time\n",
    "scaler = torch.cuda.amp.GradScaler()\n",
    "if True:\n",
    " with torch.cuda.amp.autocast():\n",  # one-space indentation
    "  out = model(torch.randn(2, 4))\n",
    "dtype = torch.get_autocast_gpu_dtype()",
]
TRAIN_FIXED = [
    "%%time\n",
    'scaler = torch.amp.GradScaler("cuda")\n',
    "if True:\n",
    ' with torch.amp.autocast("cuda"):\n',
    "  out = model(torch.randn(2, 4))\n",
    'dtype = torch.get_autocast_dtype("cuda")',
]
AFTER = ["out.sum()"]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

# (cell, row, column, code): cell 4 is the training cell (cell 1 is markdown).
FINDINGS = [(4, 2, 10, "AMP001"), (4, 4, 7, "AMP001"), (4, 6, 9, "AMP002")]


def code_cell(source: list[str], count: int | None, cell_id: str, outputs: list[Any]) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": count,
        "id": cell_id,
        "metadata": {"tags": ["keep"], "collapsed": False},
        "outputs": outputs,
        "source": source,
    }


def notebook(train: list[str] = TRAIN) -> dict[str, Any]:
    return {
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Training\n", "With AMP."]},
            code_cell(SETUP, 1, "setup", [{"name": "stdout", "output_type": "stream", "text": ["Collecting torch\n"]}]),
            code_cell(SHELL, 2, "shell", []),
            code_cell(
                train,
                3,
                "train",
                [
                    {
                        "data": {"image/png": PNG, "text/plain": ["<Figure size 640x480>"]},
                        "execution_count": 3,
                        "metadata": {},
                        "output_type": "execute_result",
                    }
                ],
            ),
            code_cell(AFTER, None, "after", []),
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def one_space_json(document: dict[str, Any]) -> bytes:
    """One-space indentation and no newline at the end (nbformat's writer adds one)."""
    return json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8")


def json_row(data: bytes, line: str) -> int:
    """The 1-based row of the notebook text on which the source line ``line`` is written."""
    needle = json.dumps(line, ensure_ascii=False)
    rows = [number for number, text in enumerate(data.decode("utf-8").split("\n"), 1) if needle in text]
    assert len(rows) == 1, (line, rows)
    return rows[0]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("AMPLINT_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.amplint]\n")
    (tmp_path / "nb.ipynb").write_bytes(one_space_json(notebook()))
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_a_directory_walk_finds_notebooks_and_extend_exclude_drops_them(project: Path) -> None:
    (project / "train.py").write_text("import torch\n")
    assert invoke("check", "--show-files", ".") == (0, "nb.ipynb\ntrain.py\n", "")
    assert invoke("check", "--show-files", "--extend-exclude", "*.ipynb", ".") == (0, "train.py\n", "")
    code, out, _ = invoke("check", "--output-format", "concise", "--extend-exclude", "*.ipynb", ".")
    assert (code, out) == (0, "All checks passed!\n")


def test_check_reports_positions_per_cell(project: Path) -> None:
    code, out, _ = invoke("check", "--output-format", "concise", "--no-cache", ".")
    assert code == 1
    headers = [line.split(" [*]")[0] for line in out.splitlines() if line.startswith("nb.ipynb")]
    assert headers == [f"nb.ipynb:cell {cell}:{row}:{column}: {rule}" for cell, row, column, rule in FINDINGS]
    # Named directly, the same.
    assert invoke("check", "--output-format", "concise", "--no-cache", "nb.ipynb")[1] == out


def test_full_output_quotes_the_lines_of_the_cell(project: Path) -> None:
    _, out, _ = invoke("check", "--no-cache", "nb.ipynb")
    first = out.split("\n\n")[0].splitlines()
    assert first[0].startswith("nb.ipynb:cell 4:2:10: AMP001 [*] `torch.cuda.amp.GradScaler(...)`")
    assert first[1:5] == [
        "  |",
        "1 | %%time",
        "2 | scaler = torch.cuda.amp.GradScaler()",
        "  |          ^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP001",
    ]


def test_json_output_has_the_cell_and_rows_counted_in_it_as_ruff(project: Path) -> None:
    _, out, _ = invoke("check", "--output-format", "json", "--no-cache", "nb.ipynb")
    found = json.loads(out)
    assert [(d["cell"], d["location"]["row"], d["location"]["column"], d["code"]) for d in found] == FINDINGS
    scaler = found[0]
    assert scaler["filename"] == str(project / "nb.ipynb")
    assert scaler["end_location"] == {"row": 2, "column": 37}
    assert scaler["noqa_row"] == 2
    (edit,) = scaler["fix"]["edits"]
    assert edit == {
        "content": 'torch.amp.GradScaler("cuda")',
        "location": {"row": 2, "column": 10},
        "end_location": {"row": 2, "column": 37},
        "cell": 4,
    }
    lines = [json.loads(line) for line in invoke("check", "--output-format", "json-lines", "nb.ipynb")[1].splitlines()]
    assert lines == found


def test_annotation_formats_point_at_the_rows_of_the_notebook_file(project: Path) -> None:
    data = (project / "nb.ipynb").read_bytes()
    rows = [json_row(data, TRAIN[1]), json_row(data, TRAIN[3]), json_row(data, TRAIN[5])]
    positions = [f"cell {cell}:{row}:{column}" for cell, row, column, _ in FINDINGS]

    github = invoke("check", "--output-format", "github", "nb.ipynb")[1].splitlines()
    assert github[0] == (
        f"::error title=amplint (AMP001),file=nb.ipynb,line={rows[0]},endLine={rows[0]}::"
        "cell 4:2:10: AMP001 `torch.cuda.amp.GradScaler(...)` is deprecated; use "
        '`torch.amp.GradScaler("cuda", ...)`'
    )
    assert [re.search(r"line=(\d+)", line)[1] for line in github] == [str(row) for row in rows]  # type: ignore[index]

    sarif = json.loads(invoke("check", "--output-format", "sarif", "nb.ipynb")[1])
    results = sarif["runs"][0]["results"]
    assert [r["locations"][0]["physicalLocation"]["region"] for r in results] == [
        {"startLine": row, "endLine": row} for row in rows
    ]
    assert [r["properties"]["cell"] for r in results] == [4, 4, 4]
    assert results[0]["properties"]["cellLocation"] == {"row": 2, "column": 10}
    assert [r["message"]["text"].split(": ")[0] for r in results] == positions
    assert all("fixes" not in r for r in results)  # cell coordinates would corrupt the JSON

    gitlab = json.loads(invoke("check", "--output-format", "gitlab", "nb.ipynb")[1])
    assert [issue["location"] for issue in gitlab] == [
        {"path": "nb.ipynb", "lines": {"begin": row, "end": row}} for row in rows
    ]
    assert gitlab[1]["description"].endswith("(cell 4:4:7)")
    assert len({issue["fingerprint"] for issue in gitlab}) == 3

    rdjson = json.loads(invoke("check", "--output-format", "rdjson", "nb.ipynb")[1])
    assert [d["location"]["range"] for d in rdjson["diagnostics"]] == [
        {"start": {"line": row}, "end": {"line": row}} for row in rows
    ]
    assert [d["message"].split(": ")[0] for d in rdjson["diagnostics"]] == positions
    assert all("suggestions" not in d for d in rdjson["diagnostics"])

    junit = invoke("check", "--output-format", "junit", "nb.ipynb")[1]
    assert f'name="AMP001 at cell 4:2:10" classname="nb.ipynb" file="nb.ipynb" line="{rows[0]}"' in junit
    assert "nb.ipynb:cell 4:6:9: AMP002" in junit


def test_a_multi_line_finding_spans_its_rows_in_the_file(project: Path) -> None:
    train = ["import torch\n", "with torch.cuda.amp.autocast(\n", "    True,\n", "):\n", "    pass"]
    (project / "nb.ipynb").write_bytes(one_space_json(notebook(train)))
    data = (project / "nb.ipynb").read_bytes()
    (found,) = json.loads(invoke("check", "--output-format", "json", "--select", "AMP001", "nb.ipynb")[1])
    assert (found["cell"], found["location"], found["end_location"]) == (4, {"row": 2, "column": 6}, {"row": 4, "column": 2})
    github = invoke("check", "--output-format", "github", "--select", "AMP001", "nb.ipynb")[1]
    assert f"line={json_row(data, train[1])},endLine={json_row(data, train[3])}::" in github


def nbformat_node(data: bytes) -> Any:
    node = nbformat.reads(data.decode("utf-8"), as_version=4)  # type: ignore[no-untyped-call]
    nbformat.validate(node)
    return node


def test_fix_apply_rewrites_only_the_fixed_cell_sources(project: Path) -> None:
    before = (project / "nb.ipynb").read_bytes()
    code, out, err = invoke("fix", "--apply", "nb.ipynb")
    assert (code, out, err) == (0, "Found 3 errors (3 fixed, 0 remaining).\n", "")
    after = (project / "nb.ipynb").read_bytes()

    # It still opens with nbformat, and as a document it is the original with the
    # training cell's source replaced: outputs, ids, metadata and the other cells kept.
    node = nbformat_node(after)
    assert node.cells[3].source == "".join(TRAIN_FIXED)
    expected = notebook()
    expected["cells"][3]["source"] = TRAIN_FIXED
    assert json.loads(after) == expected
    # As bytes: the fixed source lines are the only lines that changed, in place (same
    # one-space layout), and the file still ends without a newline.
    changed = [
        (old, new) for old, new in zip(before.split(b"\n"), after.split(b"\n"), strict=True) if old != new
    ]
    assert changed == [
        (f"    {json.dumps(old)},".encode(), f"    {json.dumps(new)},".encode())
        for old, new in zip(TRAIN, TRAIN_FIXED, strict=True)
        if old != new and old != TRAIN[-1]
    ] + [(f"    {json.dumps(TRAIN[-1])}".encode(), f"    {json.dumps(TRAIN_FIXED[-1])}".encode())]
    assert not after.endswith(b"\n")
    assert invoke("check", "nb.ipynb") == (0, "All checks passed!\n", "")


def test_fix_without_apply_shows_a_diff_of_the_cell_code_not_of_the_json(project: Path) -> None:
    before = (project / "nb.ipynb").read_bytes()
    code, out, err = invoke("fix", "nb.ipynb")
    assert code == 1
    assert out == (
        "--- a/nb.ipynb:cell 4\n"
        "+++ b/nb.ipynb:cell 4\n"
        "@@ -1,6 +1,6 @@\n"
        " %%time\n"
        "-scaler = torch.cuda.amp.GradScaler()\n"
        "+scaler = torch.amp.GradScaler(\"cuda\")\n"
        " if True:\n"
        "- with torch.cuda.amp.autocast():\n"
        "+ with torch.amp.autocast(\"cuda\"):\n"
        "   out = model(torch.randn(2, 4))\n"
        "-dtype = torch.get_autocast_gpu_dtype()\n"
        "\\ No newline at end of file\n"
        "+dtype = torch.get_autocast_dtype(\"cuda\")\n"
        "\\ No newline at end of file\n"
    )
    assert err == "Would fix 3 errors.\n"
    assert (project / "nb.ipynb").read_bytes() == before


def test_a_fix_across_cells_rewrites_both_and_nothing_else(project: Path) -> None:
    document = notebook()
    document["cells"][1]["source"] = ["from torch.cuda.amp import GradScaler\n", "import torch"]
    document["cells"][3]["source"] = ["scaler = GradScaler()"]
    (project / "nb.ipynb").write_bytes(one_space_json(document))
    assert invoke("fix", "--apply", "--select", "AMP001", "nb.ipynb")[0] == 0
    fixed = json.loads((project / "nb.ipynb").read_bytes())
    assert [cell["source"] for cell in fixed["cells"]] == [
        document["cells"][0]["source"],
        ["import torch"],
        SHELL,
        ['scaler = torch.amp.GradScaler("cuda")'],
        AFTER,
    ]


def test_add_noqa_silences_each_finding_in_its_cell(project: Path) -> None:
    code, out, _ = invoke("check", "--add-noqa", "nb.ipynb")
    assert (code, out) == (0, "Added 3 noqa directives.\n")
    node = nbformat_node((project / "nb.ipynb").read_bytes())
    assert node.cells[3].source.splitlines() == [
        "%%time",
        "scaler = torch.cuda.amp.GradScaler()  # noqa: AMP001",
        "if True:",
        " with torch.cuda.amp.autocast():  # noqa: AMP001",
        "  out = model(torch.randn(2, 4))",
        "dtype = torch.get_autocast_gpu_dtype()  # noqa: AMP002",
    ]
    assert [cell.source for cell in node.cells[:3]] == ["# Training\nWith AMP.", "".join(SETUP), "".join(SHELL)]
    assert invoke("check", "nb.ipynb") == (0, "All checks passed!\n", "")


@pytest.mark.parametrize("output_format", ["full", "json", "github", "sarif"])
def test_the_cache_and_a_fresh_run_agree(project: Path, output_format: str) -> None:
    document = notebook()
    document["cells"][1]["source"] = ["import torch\n", "x = (\n"]  # a syntax error too
    (project / "broken.ipynb").write_bytes(one_space_json(document) + b"\n")
    (project / "notjson.ipynb").write_text('{"cells": [\n')
    fresh = invoke("check", "--output-format", output_format, "--no-cache", ".")
    assert not (project / ".amplint_cache").exists()
    cold = invoke("check", "--output-format", output_format, ".")
    assert any((project / ".amplint_cache").rglob("*.json"))  # the entries are written
    warm = invoke("check", "--output-format", output_format, ".")
    assert fresh == cold == warm
    assert fresh[0] == 1


def test_a_syntax_error_is_one_amp900_in_its_cell(project: Path) -> None:
    document = notebook()
    document["cells"][4]["source"] = ["y = (1,\n", " 2"]
    (project / "nb.ipynb").write_bytes(one_space_json(document))
    code, out, _ = invoke("check", "--output-format", "concise", "nb.ipynb")
    assert code == 1
    assert out.splitlines()[:2] == [
        "nb.ipynb:cell 5:1:5: AMP900 cannot parse: SyntaxError: '(' was never closed",
        "Found 1 error.",
    ]


def test_a_line_the_parse_error_names_is_given_in_the_cell_not_the_module(project: Path) -> None:
    # kaggle_monorepo (round BE): CPython names the `else` by its module line (242 there).
    document = notebook()
    document["cells"][4]["source"] = ["x = 1\n", "if x:\n", "    pass\n", "else:\n", "y = 2\n"]
    (project / "nb.ipynb").write_bytes(one_space_json(document))
    code, out, _ = invoke("check", "--output-format", "concise", "nb.ipynb")
    assert code == 1
    assert out.splitlines()[0] == (
        "nb.ipynb:cell 5:5:1: AMP900 cannot parse: IndentationError: expected an indented block after 'else' statement on line 4"
    )


def test_a_cell_broken_on_its_own_gets_the_amp900_not_the_later_cell_where_the_module_fails(project: Path) -> None:
    # A truncated docstring (huggingface/notebooks' video_classification): Jupyter stops
    # at that cell; read as one module, the string would close in the next cell.
    document = notebook()
    document["cells"][4]["source"] = ["def create_gif(video):\n", '    """Prepares a GIF.']
    document["cells"].insert(5, code_cell(['def show(video):\n', '    """Shows it."""\n', "    return video\n"], None, "show", []))
    (project / "nb.ipynb").write_bytes(one_space_json(document))
    code, out, _ = invoke("check", "--output-format", "concise", "nb.ipynb")
    assert code == 1
    assert out.splitlines()[0].startswith("nb.ipynb:cell 5:2:5: AMP900 cannot parse: SyntaxError: unterminated triple-quoted string")


def test_a_file_that_is_not_a_notebook_gets_one_amp900_at_its_json_position(project: Path) -> None:
    # Only where a rule could have something to say: the text names autocast.
    (project / "nb.ipynb").write_text('{\n "cells": [\n  {"cell_type": "code",, "source": "autocast"}\n ]\n}\n')
    code, out, _ = invoke("check", "--output-format", "concise", "nb.ipynb")
    assert code == 1
    assert out == (
        "nb.ipynb:3:24: AMP900 not a Jupyter notebook: invalid JSON: Expecting property name "
        "enclosed in double quotes (line 3, column 24)\nFound 1 error.\n"
    )
    # Without any rule's trigger words it is not amplint's business, as for a .py file that
    # does not parse (torchrec's notebooks exported without `nbformat`).
    (project / "nb.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "import pandas"}], "metadata": {}}')
    assert invoke("check", "--output-format", "concise", "nb.ipynb")[:2] == (0, "All checks passed!\n")
    (project / "nb.ipynb").write_text('{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "autocast": 1}')
    code, out, _ = invoke("check", "--output-format", "concise", "nb.ipynb")
    assert code == 1
    (line, summary) = out.splitlines()
    assert line.startswith("nb.ipynb:1:1: AMP900 nbformat 3 notebooks are not supported, only nbformat 4")
    assert summary == "Found 1 error."
    # Nothing to fix, nothing written.
    assert invoke("fix", "--apply", "nb.ipynb")[0] == 1
    assert (project / "nb.ipynb").read_text().startswith('{"nbformat": 3')


def test_a_notebook_in_another_language_is_skipped_and_verbose_says_so(project: Path) -> None:
    document = notebook()
    document["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}, "language_info": {"name": "R"}}
    (project / "nb.ipynb").write_bytes(one_space_json(document))
    assert invoke("check", "nb.ipynb") == (0, "All checks passed!\n", "")
    code, _, err = invoke("check", "--verbose", "nb.ipynb")
    assert code == 0
    assert "debug: nb.ipynb: skipped: the notebook's language is R, not Python\n" in err


def test_skipped_cell_magics_are_named_with_verbose(project: Path) -> None:
    _, _, err = invoke("check", "--verbose", "--no-cache", "nb.ipynb")
    assert "debug: nb.ipynb: cell(s) 3 skipped: a cell magic that runs something other than Python\n" in err


def test_a_clean_notebook_names_its_skipped_cells_on_a_cached_run_too(project: Path) -> None:
    (project / "nb.ipynb").write_bytes(one_space_json(notebook(train=["x = 1\n"])))
    note = "debug: nb.ipynb: cell(s) 3 skipped: a cell magic that runs something other than Python\n"
    for _ in range(2):  # the first run fills the cache, the second is served from it
        code, out, err = invoke("check", "--verbose", "nb.ipynb")
        assert (code, out) == (0, "All checks passed!\n")
        assert note in err


def test_stdin_with_a_notebook_name_is_read_as_a_notebook(project: Path) -> None:
    data = (project / "nb.ipynb").read_bytes()
    result = CliRunner().invoke(cli, ["fix", "--stdin-filename", "other.ipynb"], input=data)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout_bytes)["cells"][3]["source"] == TRAIN_FIXED
    result = CliRunner().invoke(cli, ["check", "--output-format", "concise", "--stdin-filename", "other.ipynb"], input=data)
    assert result.stdout.startswith("other.ipynb:cell 4:2:10: AMP001")


def test_a_fix_that_cannot_be_written_back_is_not_applied_and_said(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Notebook, new_text: str) -> bytes:
        raise NotebookError("the edit touched an IPython line in cell 4; it cannot be mapped back")

    monkeypatch.setattr(Notebook, "with_python_text", refuse)
    before = (project / "nb.ipynb").read_bytes()
    code, out, err = invoke("fix", "--apply", "--output-format", "concise", "nb.ipynb")
    assert code == 1
    assert err == (
        "error: nb.ipynb:1:1: fix not applied: cannot write the fix back into the notebook: "
        "the edit touched an IPython line in cell 4; it cannot be mapped back\n"
    )
    assert (project / "nb.ipynb").read_bytes() == before
    # What remains is reported in the cells, as a check would.
    assert out.splitlines()[0].startswith("nb.ipynb:cell 4:2:10: AMP001")


def test_a_source_written_as_one_string_is_annotated_on_its_row(project: Path) -> None:
    document = notebook()
    document["cells"][3]["source"] = "".join(TRAIN)
    (project / "nb.ipynb").write_bytes(one_space_json(document))
    data = (project / "nb.ipynb").read_bytes()
    github = invoke("check", "--output-format", "github", "nb.ipynb")[1].splitlines()
    row = json_row(data, "".join(TRAIN))
    assert [re.search(r"line=(\d+),endLine=(\d+)", line).groups() for line in github] == [(str(row), str(row))] * 3  # type: ignore[union-attr]
    assert invoke("fix", "--apply", "nb.ipynb")[0] == 0
    assert json.loads((project / "nb.ipynb").read_bytes())["cells"][3]["source"] == "".join(TRAIN_FIXED)
