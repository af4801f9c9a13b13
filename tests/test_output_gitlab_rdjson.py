"""``gitlab`` (GitLab Code Quality) and ``rdjson`` (reviewdog) reports: their exact
structure for a small set of findings, fingerprints that are unique and survive moved
lines, validity against schemas of both formats written from their documentation (in
``tests/data``), and both formats end to end through the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amplint.cli import cli
from amplint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location
from amplint.output import FORMATS, MACHINE_FORMATS, Sourced, render
from amplint.output.gitlab import flagged_text, format_gitlab
from amplint.output.rdjson import byte_column, format_rdjson

DATA = Path(__file__).parent / "data"
RULES = "rules"  # rule links are repository paths unless AMPLINT_DOCS_URL is set

SOURCE = "import torch\nscaler = torch.cuda.amp.GradScaler()\nloss = model(x)\n"
# Column 16 of line 2 is the "t" of torch, after 15 characters that take 16 UTF-8 bytes.
ACCENTED = 'import torch\nnom = "é"; s = torch.cuda.amp.GradScaler()\n'
BROKEN = "import torch\ndef f(:\n"


def _replace_scaler(row: int, start_column: int, start: int) -> Fix:
    edit = Edit(
        start,
        start + 27,
        'torch.amp.GradScaler("cuda")',
        Location(row, start_column),
        Location(row, start_column + 27),
    )
    return Fix("Replace with `torch.amp.GradScaler`", (edit,), Applicability.SAFE)


DEPRECATED = "`torch.cuda.amp.GradScaler(...)` is deprecated"


def sample() -> list[Sourced]:
    """One fixable finding, one without a fix, a file that does not parse, and a
    non-ASCII path with a non-ASCII character before the finding: sorted, as the CLI
    passes them."""
    return [
        Sourced(
            Diagnostic(
                "AMP001",
                DEPRECATED,
                "données/modèle.py",
                Location(2, 16),
                Location(2, 43),
                _replace_scaler(2, 16, 28),
            ),
            ACCENTED,
        ),
        Sourced(
            Diagnostic(
                "AMP001",
                DEPRECATED,
                "pkg/a.py",
                Location(2, 10),
                Location(2, 37),
                _replace_scaler(2, 10, 22),
            ),
            SOURCE,
        ),
        Sourced(
            Diagnostic("AMP102", "loss computed outside autocast", "pkg/a.py", Location(3, 1), Location(3, 16)),
            SOURCE,
        ),
        Sourced(
            Diagnostic(
                "AMP900",
                "cannot parse: invalid syntax",
                "pkg/broken.py",
                Location(2, 7),
                Location(2, 7),
            ),
            BROKEN,
        ),
    ]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for variable in ("CI_PROJECT_DIR", "GITHUB_WORKSPACE", "AMPLINT_OUTPUT_FORMAT"):
        monkeypatch.delenv(variable, raising=False)


# -- a JSON-schema validator for the keywords the two schemas use ----------------

_ANNOTATIONS = {"$schema", "id", "title", "description", "definitions"}
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
}


def schema_errors(instance: Any, schema: dict[str, Any], root: dict[str, Any], at: str = "$") -> list[str]:
    if "$ref" in schema:
        # Draft 4 and 7 ignore every keyword beside $ref.
        reference = schema["$ref"]
        assert reference.startswith("#/definitions/"), reference
        return schema_errors(instance, root["definitions"][reference.removeprefix("#/definitions/")], root, at)
    errors: list[str] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        if keyword == "type":
            expected = _TYPES[value]
            if not isinstance(instance, expected) or (value == "integer" and isinstance(instance, bool)):
                errors.append(f"{at}: {instance!r} is not of type {value}")
        elif keyword == "required":
            if isinstance(instance, dict):
                errors.extend(f"{at}: {name!r} is required" for name in value if name not in instance)
        elif keyword == "properties":
            if isinstance(instance, dict):
                for name, subschema in value.items():
                    if name in instance:
                        errors.extend(schema_errors(instance[name], subschema, root, f"{at}.{name}"))
        elif keyword == "additionalProperties":
            assert isinstance(value, bool), "only boolean additionalProperties is implemented"
            if not value and isinstance(instance, dict):
                extra = set(instance) - set(schema.get("properties", {}))
                errors.extend(f"{at}: {name!r} is not allowed" for name in sorted(extra))
        elif keyword == "items":
            if isinstance(instance, list):
                for index, element in enumerate(instance):
                    errors.extend(schema_errors(element, value, root, f"{at}[{index}]"))
        elif keyword == "enum":
            if not any(type(instance) is type(option) and instance == option for option in value):
                errors.append(f"{at}: {instance!r} is not one of {value}")
        elif keyword == "oneOf":
            matching = [option for option in value if not schema_errors(instance, option, root, at)]
            if len(matching) != 1:
                errors.append(f"{at}: {instance!r} matches {len(matching)} of oneOf")
        else:
            raise AssertionError(f"schema keyword {keyword!r} is not implemented by this test")
    return errors


def load_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return schema


def gitlab_errors(report: Any) -> list[str]:
    """GitLab's schema for each finding, plus the rules its documentation adds."""
    schema = load_schema("gitlab_code_quality.json")
    assert isinstance(report, list), "a Code Quality report is a single JSON array"
    errors: list[str] = []
    for index, issue in enumerate(report):
        at = f"$[{index}]"
        errors.extend(schema_errors(issue, schema, schema, at))
        if errors:
            continue
        if not isinstance(issue.get("check_name"), str):
            errors.append(f"{at}: check_name must be a string")
        if issue["severity"] not in {"info", "minor", "major", "critical", "blocker"}:
            errors.append(f"{at}: unknown severity {issue['severity']!r}")
        path = issue["location"].get("path")
        if not isinstance(path, str) or path.startswith("/") or "\\" in path:
            errors.append(f"{at}: location.path must be a relative path with forward slashes")
        begin = issue["location"].get("lines", {}).get("begin")
        if not isinstance(begin, int) or begin < 1:
            errors.append(f"{at}: location.lines.begin must be a line number")
    return errors


def rdjson_errors(document: Any) -> list[str]:
    schema = load_schema("rdjson.json")
    return schema_errors(document, schema, schema)


def test_the_validator_rejects_what_the_schemas_forbid() -> None:
    good_issue = {
        "description": "d",
        "check_name": "AMP001",
        "fingerprint": "f",
        "severity": "major",
        "location": {"path": "a.py", "lines": {"begin": 1}},
    }
    assert gitlab_errors([good_issue]) == []
    assert gitlab_errors([{**good_issue, "fingerprint": None}])
    assert gitlab_errors([{k: v for k, v in good_issue.items() if k != "fingerprint"}])
    assert gitlab_errors([{**good_issue, "location": {"path": "a.py", "lines": {"begin": "1"}}}])
    assert gitlab_errors([{**good_issue, "severity": "error"}])
    assert gitlab_errors([{**good_issue, "location": {"path": "/abs/a.py", "lines": {"begin": 1}}}])

    good = {"severity": "ERROR", "diagnostics": [{"message": "m", "location": {"path": "a.py"}}]}
    assert rdjson_errors(good) == []
    # protojson accepts only the enum's names (or numbers), so lower case is invalid.
    assert rdjson_errors({**good, "severity": "error"})
    start = {"start": {"line": "1"}}
    assert rdjson_errors({"diagnostics": [{"location": {"path": "a.py", "range": start}}]})
    assert rdjson_errors({"diagnostics": [{"code": {"value": 1}}]})


# -- gitlab ----------------------------------------------------------------------------------


def _without_fingerprints(report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in issue.items() if key != "fingerprint"} for issue in report]


def test_gitlab_report_structure() -> None:
    report = json.loads(format_gitlab(sample()))
    assert _without_fingerprints(report) == [
        {
            "description": f"AMP001 {DEPRECATED}",
            "check_name": "AMP001",
            "severity": "major",
            "location": {"path": "données/modèle.py", "lines": {"begin": 2, "end": 2}},
        },
        {
            "description": f"AMP001 {DEPRECATED}",
            "check_name": "AMP001",
            "severity": "major",
            "location": {"path": "pkg/a.py", "lines": {"begin": 2, "end": 2}},
        },
        {
            "description": "AMP102 loss computed outside autocast",
            "check_name": "AMP102",
            "severity": "major",
            "location": {"path": "pkg/a.py", "lines": {"begin": 3, "end": 3}},
        },
        {
            # The file's findings are unknown: more than a finding of its own.
            "description": "AMP900 cannot parse: invalid syntax",
            "check_name": "AMP900",
            "severity": "critical",
            "location": {"path": "pkg/broken.py", "lines": {"begin": 2, "end": 2}},
        },
    ]
    fingerprints = [issue["fingerprint"] for issue in report]
    assert all(re.fullmatch(r"[0-9a-f]{64}", value) for value in fingerprints)
    assert len(set(fingerprints)) == len(fingerprints)
    assert gitlab_errors(report) == []


def test_gitlab_empty_report_is_an_empty_array() -> None:
    assert format_gitlab([]) == "[]\n"
    assert render("gitlab", [], unsafe=False) == "[]\n"


def test_gitlab_multiline_range_ending_at_a_line_start_ends_on_the_line_before() -> None:
    text = "import torch\nwith torch.autocast('cuda'):\n    y = f(x)\nz = 1\n"
    d = Diagnostic("AMP101", "m", "a.py", Location(2, 1), Location(4, 1))
    [issue] = json.loads(format_gitlab([Sourced(d, text)]))
    assert issue["location"]["lines"] == {"begin": 2, "end": 3}


def test_gitlab_flagged_text_of_multiline_ranges() -> None:
    lines = ["import torch", "with torch.autocast(", "    'cuda'", "):  # done"]
    within = Diagnostic("AMP101", "m", "a.py", Location(2, 6), Location(4, 2))
    assert flagged_text(within, lines) == "torch.autocast( 'cuda' )"
    past_the_end = Diagnostic("AMP101", "m", "a.py", Location(3, 5), Location(5, 1))
    assert flagged_text(past_the_end, lines) == "'cuda' ): # done"
    last_line = Diagnostic("AMP101", "m", "a.py", Location(4, 1), Location(5, 1))
    assert flagged_text(last_line, lines) == "): # done"


def _fingerprint(code: str, path: str, text: str, start: tuple[int, int], end: tuple[int, int]) -> str:
    d = Diagnostic(code, "m", path, Location(*start), Location(*end))
    [issue] = json.loads(format_gitlab([Sourced(d, text)]))
    value: str = issue["fingerprint"]
    return value


def test_gitlab_fingerprint_ignores_rows_and_indentation_but_not_code_path_or_text() -> None:
    base = _fingerprint("AMP001", "a.py", SOURCE, (2, 10), (2, 37))
    shifted = "import torch\n\n# a comment\n" + SOURCE.split("\n", 1)[1]
    assert _fingerprint("AMP001", "a.py", shifted, (4, 10), (4, 37)) == base
    indented = "import torch\nif True:\n    scaler   = torch.cuda.amp.GradScaler( )\n"
    # The flagged text with its whitespace collapsed: "torch.cuda.amp.GradScaler( )".
    assert _fingerprint("AMP001", "a.py", indented, (3, 16), (3, 44)) != base
    reindented = "import torch\nif True:\n    scaler = torch.cuda.amp.GradScaler()\n"
    assert _fingerprint("AMP001", "a.py", reindented, (3, 14), (3, 41)) == base
    assert _fingerprint("AMP002", "a.py", SOURCE, (2, 10), (2, 37)) != base
    assert _fingerprint("AMP001", "b.py", SOURCE, (2, 10), (2, 37)) != base
    other = SOURCE.replace("GradScaler()", "GradScaler(2)")
    assert _fingerprint("AMP001", "a.py", other, (2, 10), (2, 38)) != base


def test_gitlab_fingerprint_of_an_empty_range_uses_its_line() -> None:
    first = _fingerprint("AMP900", "a.py", BROKEN, (2, 7), (2, 7))
    assert _fingerprint("AMP900", "a.py", "import torch\n\n" + BROKEN[13:], (3, 7), (3, 7)) == first
    assert _fingerprint("AMP900", "a.py", "import torch\ndef g(:\n", (2, 7), (2, 7)) != first
    # A file that could not be read has no text; its finding still gets a fingerprint.
    assert re.fullmatch(r"[0-9a-f]{64}", _fingerprint("AMP900", "a.py", "", (1, 1), (1, 1)))


def test_gitlab_identical_findings_in_one_file_get_distinct_fingerprints() -> None:
    text = "import torch\na = torch.cuda.amp.GradScaler()\nb = torch.cuda.amp.GradScaler()\n"
    items = [
        Sourced(Diagnostic("AMP001", "m", "a.py", Location(row, 5), Location(row, 32)), text)
        for row in (2, 3)
    ]
    first, second = (issue["fingerprint"] for issue in json.loads(format_gitlab(items)))
    assert first != second
    # The first keeps the fingerprint it has when it is alone in the file.
    assert first == _fingerprint("AMP001", "a.py", text, (2, 5), (2, 32))


def test_gitlab_paths_are_relative_to_the_gitlab_project_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    d = Diagnostic("AMP001", "m", "x.py", Location(1, 1), Location(1, 2))
    [issue] = json.loads(format_gitlab([Sourced(d, "")]))
    assert issue["location"]["path"] == "x.py"
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path))
    [issue] = json.loads(format_gitlab([Sourced(d, "")]))
    assert issue["location"]["path"] == "sub/x.py"
    outside = Diagnostic("AMP001", "m", str(tmp_path.parent / "y.py"), Location(1, 1), Location(1, 2))
    [issue] = json.loads(format_gitlab([Sourced(outside, "")]))
    assert issue["location"]["path"] == (tmp_path.parent / "y.py").as_posix()


# -- rdjson ----------------------------------------------------------------------------------


def _rdjson_range(start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
    return {
        "start": {"line": start[0], "column": start[1]},
        "end": {"line": end[0], "column": end[1]},
    }


def test_rdjson_document_structure() -> None:
    document = json.loads(format_rdjson(sample()))
    replacement = 'torch.amp.GradScaler("cuda")'
    assert document == {
        "source": {"name": "amplint"},
        "severity": "ERROR",
        "diagnostics": [
            {
                "message": DEPRECATED,
                # 'nom = "é"; s = ' is 15 characters and 16 bytes.
                "location": {"path": "données/modèle.py", "range": _rdjson_range((2, 17), (2, 44))},
                "severity": "ERROR",
                "code": {"value": "AMP001", "url": f"{RULES}/AMP001.md"},
                "suggestions": [{"range": _rdjson_range((2, 17), (2, 44)), "text": replacement}],
            },
            {
                "message": DEPRECATED,
                "location": {"path": "pkg/a.py", "range": _rdjson_range((2, 10), (2, 37))},
                "severity": "ERROR",
                "code": {"value": "AMP001", "url": f"{RULES}/AMP001.md"},
                "suggestions": [{"range": _rdjson_range((2, 10), (2, 37)), "text": replacement}],
            },
            {
                "message": "loss computed outside autocast",
                "location": {"path": "pkg/a.py", "range": _rdjson_range((3, 1), (3, 16))},
                "severity": "ERROR",
                "code": {"value": "AMP102", "url": f"{RULES}/AMP102.md"},
            },
            {
                "message": "cannot parse: invalid syntax",
                "location": {"path": "pkg/broken.py", "range": _rdjson_range((2, 7), (2, 7))},
                "severity": "ERROR",
                "code": {"value": "AMP900", "url": f"{RULES}/AMP900.md"},
            },
        ],
    }
    assert rdjson_errors(document) == []


def test_rdjson_columns_are_utf8_bytes() -> None:
    # The example in reviewdog.proto: in 'a𐐀b', b is at column 6.
    assert byte_column(["a𐐀b"], Location(1, 3)) == 6
    assert byte_column(["a𐐀b"], Location(1, 2)) == 2
    # The exclusive end of a whole line, and positions without a line (an empty file).
    assert byte_column(["é"], Location(1, 2)) == 3
    assert byte_column([], Location(1, 1)) == 1


def test_rdjson_suggestions_cover_every_edit_in_source_order() -> None:
    text = "import torch\nx = torch.cuda.amp.autocast()\n"
    edits = (
        Edit(17, 31, "torch.amp.autocast", Location(2, 5), Location(2, 19)),
        Edit(0, 0, "import os\n", Location(1, 1), Location(1, 1)),
    )
    fix = Fix("Rewrite", edits, Applicability.UNSAFE)
    d = Diagnostic("AMP001", "m", "a.py", Location(2, 5), Location(2, 30), fix)
    [diagnostic] = json.loads(format_rdjson([Sourced(d, text)]))["diagnostics"]
    assert diagnostic["suggestions"] == [
        {"range": _rdjson_range((1, 1), (1, 1)), "text": "import os\n"},
        {"range": _rdjson_range((2, 5), (2, 19)), "text": "torch.amp.autocast"},
    ]


def test_rdjson_empty_report_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = json.loads(render("rdjson", [], unsafe=False))
    assert document["diagnostics"] == []
    assert rdjson_errors(document) == []
    # Relative to the directory reviewdog runs in, even on GitHub Actions.
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path.parent))
    d = Diagnostic("AMP001", "m", str(tmp_path / "pkg" / "a.py"), Location(1, 1), Location(1, 2))
    [diagnostic] = json.loads(format_rdjson([Sourced(d, "")]))["diagnostics"]
    assert diagnostic["location"]["path"] == "pkg/a.py"


def test_both_formats_are_machine_formats() -> None:
    assert {"gitlab", "rdjson"} <= set(FORMATS)
    assert {"gitlab", "rdjson"} <= MACHINE_FORMATS


# -- end to end ------------------------------------------------------------------------------

TRAIN = (
    "import torch\n"
    "a = torch.cuda.amp.GradScaler()\n"
    "b = torch.cuda.amp.GradScaler()\n"
    "c = torch.cuda.amp.autocast(*args)\n"
)


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check", "--no-cache", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def test_cli_gitlab_report(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    # AMP900 is reported only where a rule could otherwise fire.
    (tmp_path / "pkg" / "bad.py").write_text("import torch\nx = torch.cuda.amp.autocast()\n" + BROKEN[13:])
    code, out = check("--output-format", "gitlab", ".")
    assert code == 1
    report = json.loads(out)  # nothing but the report on stdout
    assert gitlab_errors(report) == []
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]) for i in report] == [
        ("AMP900", "pkg/bad.py", {"begin": 3, "end": 3}),
        ("AMP001", "pkg/train.py", {"begin": 2, "end": 2}),
        ("AMP001", "pkg/train.py", {"begin": 3, "end": 3}),
        ("AMP001", "pkg/train.py", {"begin": 4, "end": 4}),
    ]
    assert len({issue["fingerprint"] for issue in report}) == 4

    # Lines inserted above every finding move them but keep their fingerprints.
    (tmp_path / "pkg" / "train.py").write_text("# header\n\n" + TRAIN)
    moved = json.loads(check("--output-format", "gitlab", ".")[1])
    assert [i["location"]["lines"]["begin"] for i in moved] == [3, 4, 5, 6]
    assert [i["fingerprint"] for i in moved] == [i["fingerprint"] for i in report]

    # A new identical finding after them adds one fingerprint and keeps the others.
    (tmp_path / "pkg" / "train.py").write_text(TRAIN + "d = torch.cuda.amp.GradScaler()\n")
    grown = {i["fingerprint"] for i in json.loads(check("--output-format", "gitlab", ".")[1])}
    assert grown > {i["fingerprint"] for i in report}
    assert len(grown) == 5


def test_cli_rdjson_report_to_a_file(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    code, out = check("--output-format", "rdjson", "-o", "report.json", "train.py")
    assert (code, out) == (1, "")
    document = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert rdjson_errors(document) == []
    assert [(d["code"]["value"], d["location"]["range"]["start"]) for d in document["diagnostics"]] == [
        ("AMP001", {"line": 2, "column": 5}),
        ("AMP001", {"line": 3, "column": 5}),
        ("AMP001", {"line": 4, "column": 5}),
    ]
    # The call with *args has no fix, so it offers no suggestion.
    assert ["suggestions" in d for d in document["diagnostics"]] == [True, True, False]


def test_cli_clean_files_give_empty_reports(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text("import torch\nscaler = torch.amp.GradScaler('cuda')\n")
    assert check("--output-format", "gitlab", "clean.py") == (0, "[]\n")
    code, out = check("--output-format", "rdjson", "clean.py")
    assert code == 0
    assert json.loads(out)["diagnostics"] == []


@pytest.mark.timeout(120)
def test_fingerprints_are_the_same_in_every_process_and_checkout(tmp_path: Path) -> None:
    """Two checkouts in different places, run from a subdirectory under different hash
    seeds: GitLab compares fingerprints between pipelines on different runners."""
    reports = []
    for checkout, seed in (("one/project", "1"), ("two/elsewhere/project", "2")):
        project = tmp_path / checkout
        (project / "pkg").mkdir(parents=True)
        (project / "pkg" / "train.py").write_text(TRAIN)
        env = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            "CI_PROJECT_DIR": str(project),
        }
        env.pop("AMPLINT_OUTPUT_FORMAT", None)
        result = subprocess.run(
            [sys.executable, "-m", "amplint", "check", "--no-cache", "--output-format", "gitlab", "."],
            cwd=project / "pkg",
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 1, result.stderr
        reports.append(json.loads(result.stdout))
    assert reports[0] == reports[1]
    assert {issue["location"]["path"] for issue in reports[0]} == {"pkg/train.py"}
