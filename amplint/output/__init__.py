"""Output formats: human text (concise, full), and machine-readable reports.

Machine-readable formats (json, json-lines, github, sarif, junit) print nothing else on
stdout, so that their output can be piped straight into other tools.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amplint import __version__
from amplint.diagnostics import Diagnostic, Fix
from amplint.docs import rule_url
from amplint.rules import rule_by_code

FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit")
MACHINE_FORMATS = frozenset({"json", "json-lines", "github", "sarif", "junit"})


@dataclass(frozen=True)
class Sourced:
    """A diagnostic with the text of its file (to show the offending line)."""

    diagnostic: Diagnostic
    text: str


def display_path(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative.startswith("..") else relative


def _marker(diagnostic: Diagnostic, unsafe: bool) -> str:
    return "[*] " if diagnostic.fixable_with(unsafe) else ""


def format_concise(items: Sequence[Sourced], unsafe: bool) -> str:
    lines = []
    for item in items:
        d = item.diagnostic
        lines.append(
            f"{display_path(d.path)}:{d.location.row}:{d.location.column}: {d.code} {_marker(d, unsafe)}{d.message}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def format_full(items: Sequence[Sourced], unsafe: bool) -> str:
    blocks = []
    for item in items:
        d = item.diagnostic
        header = f"{display_path(d.path)}:{d.location.row}:{d.location.column}: {d.code} {_marker(d, unsafe)}{d.message}"
        lines = item.text.splitlines()
        if not lines or d.location.row > len(lines):
            blocks.append(header)
            continue
        line = lines[d.location.row - 1].expandtabs(1)
        gutter = " " * len(str(d.location.row))
        end_column = (
            d.end_location.column if d.end_location.row == d.location.row else len(line) + 1
        )
        width = max(1, end_column - d.location.column)
        caret = " " * (d.location.column - 1) + "^" * width
        block = [
            header,
            f"{gutter} |",
            f"{d.location.row} | {line}",
            f"{gutter} | {caret} {d.code}",
            f"{gutter} |",
        ]
        if d.fix is not None:
            label = "help" if d.fix.applicability.value == "safe" else "help (unsafe)"
            block.append(f"{gutter} = {label}: {d.fix.message}")
        if d.detail:
            block.append(d.detail.rstrip())
        blocks.append("\n".join(block))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def _position(row: int, column: int) -> dict[str, int]:
    return {"row": row, "column": column}


def _fix_json(fix: Fix | None) -> dict[str, object] | None:
    if fix is None:
        return None
    return {
        "applicability": fix.applicability.value,
        "message": fix.message,
        "edits": [
            {
                "content": edit.content,
                "location": _position(edit.location.row, edit.location.column),
                "end_location": _position(edit.end_location.row, edit.end_location.column),
            }
            for edit in fix.edits
        ],
    }


def diagnostic_json(d: Diagnostic) -> dict[str, object]:
    """One diagnostic in Ruff's JSON schema."""
    return {
        "cell": None,
        "code": d.code,
        "end_location": _position(d.end_location.row, d.end_location.column),
        "filename": os.path.abspath(d.path) if d.path != "-" else d.path,
        "fix": _fix_json(d.fix),
        "location": _position(d.location.row, d.location.column),
        "message": d.message,
        "noqa_row": d.location.row,
        "url": rule_url(d.code),
    }


def format_json(items: Sequence[Sourced]) -> str:
    return json.dumps([diagnostic_json(item.diagnostic) for item in items], indent=2) + "\n"


def format_json_lines(items: Sequence[Sourced]) -> str:
    return "".join(json.dumps(diagnostic_json(item.diagnostic)) + "\n" for item in items)


def _escape_property(value: str) -> str:
    return (
        value.replace("%", "%25")
        .replace("\r", "%0D")
        .replace("\n", "%0A")
        .replace(":", "%3A")
        .replace(",", "%2C")
    )


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def format_github(items: Sequence[Sourced]) -> str:
    lines = []
    for item in items:
        d = item.diagnostic
        properties = ",".join(
            [
                f"title={_escape_property(f'amplint ({d.code})')}",
                f"file={_escape_property(display_path(d.path))}",
                f"line={d.location.row}",
                f"col={d.location.column}",
                f"endLine={d.end_location.row}",
                f"endColumn={d.end_location.column}",
            ]
        )
        lines.append(f"::error {properties}::{_escape_data(f'{d.code} {d.message}')}")
    return "\n".join(lines) + ("\n" if lines else "")


def _sarif_region(
    start_row: int, start_column: int, end_row: int, end_column: int
) -> dict[str, int]:
    return {
        "startLine": start_row,
        "startColumn": start_column,
        "endLine": end_row,
        "endColumn": end_column,
    }


def format_sarif(items: Sequence[Sourced]) -> str:
    from amplint.rules import all_rules

    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": (rule.__doc__ or rule.summary).strip().split("\n\n")[0]},
            "helpUri": rule_url(rule.code),
            "properties": {"fixable": rule.fix_availability.value != "none"},
        }
        for rule in all_rules()
    ]
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    results = []
    for item in items:
        d = item.diagnostic
        uri = display_path(d.path).replace(os.sep, "/")
        result: dict[str, object] = {
            "ruleId": d.code,
            "level": "error",
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": _sarif_region(
                            d.location.row,
                            d.location.column,
                            d.end_location.row,
                            d.end_location.column,
                        ),
                    }
                }
            ],
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        if d.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": d.fix.message},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": uri},
                            "replacements": [
                                {
                                    "deletedRegion": _sarif_region(
                                        e.location.row,
                                        e.location.column,
                                        e.end_location.row,
                                        e.end_location.column,
                                    ),
                                    "insertedContent": {"text": e.content},
                                }
                                for e in d.fix.edits
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "amplint",
                        "informationUri": "https://github.com/amplint/amplint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def format_junit(items: Sequence[Sourced], checked: Iterable[str]) -> str:
    by_file: dict[str, list[Diagnostic]] = {display_path(path): [] for path in checked}
    for item in items:
        by_file.setdefault(display_path(item.diagnostic.path), []).append(item.diagnostic)
    total = sum(len(v) for v in by_file.values())
    suites = ET.Element("testsuites", name="amplint", tests=str(max(total, 1)), failures=str(total))
    for path, diagnostics in sorted(by_file.items()):
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=path,
            tests=str(max(len(diagnostics), 1)),
            failures=str(len(diagnostics)),
        )
        if not diagnostics:
            ET.SubElement(suite, "testcase", name="amplint", classname=path)
            continue
        for d in diagnostics:
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"{d.code} at {d.location.row}:{d.location.column}",
                classname=path,
            )
            failure = ET.SubElement(case, "failure", message=d.message, type=d.code)
            failure.text = f"{path}:{d.location.row}:{d.location.column}: {d.code} {d.message}"
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def render(
    output_format: str, items: Sequence[Sourced], *, unsafe: bool, checked: Iterable[str] = ()
) -> str:
    if output_format == "concise":
        return format_concise(items, unsafe)
    if output_format == "full":
        return format_full(items, unsafe)
    if output_format == "json":
        return format_json(items)
    if output_format == "json-lines":
        return format_json_lines(items)
    if output_format == "github":
        return format_github(items)
    if output_format == "sarif":
        return format_sarif(items)
    if output_format == "junit":
        return format_junit(items, checked)
    raise ValueError(f"unknown output format {output_format!r}")


def statistics(diagnostics: Sequence[Diagnostic], unsafe: bool) -> str:
    counts = Counter(d.code for d in diagnostics)
    fixable = {d.code for d in diagnostics if d.fixable_with(unsafe)}
    width = max((len(str(n)) for n in counts.values()), default=1)
    lines = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rule = rule_by_code(code)
        name = rule.name if rule else ""
        marker = "[*]" if code in fixable else "[ ]"
        lines.append(f"{count:>{width}}\t{code}\t{marker} {name}")
    return "\n".join(lines) + ("\n" if lines else "")
