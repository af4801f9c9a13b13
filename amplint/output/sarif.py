"""``sarif``: SARIF 2.1.0, the format GitHub code scanning and other dashboards import.

Paths are URIs relative to ``%SRCROOT%`` (``$GITHUB_WORKSPACE`` or the current
directory, declared in ``originalUriBaseIds``); files outside it get absolute ``file:``
URIs. Columns count Unicode code points (``columnKind``). Every fixable result carries
its fix as ``fixes[].artifactChanges[].replacements``; an unsafe fix says so in the fix's
``properties.applicability``.

In a notebook the region is the rows of the ``.ipynb`` file's JSON text that hold the
cell's flagged lines (no columns: a JSON line's are not the cell's), so code scanning
shows the alert on the file's own lines; the message starts with the position in the
cell (``cell 3:2:5:``) and ``properties`` carry ``cell``, ``cellLocation`` and
``cellEndLocation``. Such a result has no ``fixes``: a replacement in cell coordinates
applied to the JSON file would corrupt it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from amplint import __version__
from amplint.diagnostics import Diagnostic
from amplint.docs import docs_base_url, render_rule_page, rule_help_uri
from amplint.engine.catalog import RuleInfo
from amplint.output.model import Sourced
from amplint.output.paths import annotation_root, file_uri, relative_uri
from amplint.output.text import position
from amplint.rules import catalog

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"


def _section(page: str, title: str) -> str:
    match = re.search(
        rf"^## {re.escape(title)}\s*\n(.*?)(?=^## |\Z)", page, re.DOTALL | re.MULTILINE
    )
    if match is None:
        return ""
    first_paragraph = match.group(1).strip().split("\n\n")[0]
    return " ".join(first_paragraph.split())


def rule_descriptor(rule: RuleInfo) -> dict[str, object]:
    page = render_rule_page(rule)
    descriptor: dict[str, object] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": _section(page, "What it does") or rule.summary},
        "help": {"text": page, "markdown": page},
    }
    # SARIF wants an absolute URI: there is one only where the pages are published.
    help_uri = rule_help_uri(rule.code)
    if help_uri is not None:
        descriptor["helpUri"] = help_uri
    descriptor["defaultConfiguration"] = {"level": "error", "enabled": rule.default_enabled}
    descriptor["properties"] = {"fix": rule.fix_availability.value}
    return descriptor


def _region(start_row: int, start_column: int, end_row: int, end_column: int) -> dict[str, int]:
    return {
        "startLine": start_row,
        "startColumn": start_column,
        "endLine": end_row,
        "endColumn": end_column,
    }


def _artifact(path: str) -> dict[str, str]:
    relative = relative_uri(path)
    if relative is None:
        return {"uri": file_uri(path)}
    return {"uri": relative, "uriBaseId": SRCROOT}


def _result(d: Diagnostic, index: dict[str, int]) -> dict[str, object]:
    artifact = _artifact(d.path) if d.path != "-" else {"uri": "stdin"}
    in_cell = d.cell is not None and d.file_rows is not None
    region: dict[str, int]
    if in_cell and d.file_rows is not None:
        region = {"startLine": d.file_rows[0], "endLine": d.file_rows[1]}
    else:
        region = _region(d.location.row, d.location.column, d.end_location.row, d.end_location.column)
    result: dict[str, object] = {
        "ruleId": d.code,
        "level": "error",
        "message": {"text": f"{position(d)}: {d.message}" if in_cell else d.message},
        "locations": [{"physicalLocation": {"artifactLocation": artifact, "region": region}}],
    }
    if d.code in index:
        result["ruleIndex"] = index[d.code]
    if in_cell:
        result["properties"] = {
            "cell": d.cell,
            "cellLocation": {"row": d.location.row, "column": d.location.column},
            "cellEndLocation": {"row": d.end_location.row, "column": d.end_location.column},
        }
    elif d.fix is not None and d.fix.edits:
        result["fixes"] = [
            {
                "description": {"text": d.fix.message},
                "artifactChanges": [
                    {
                        "artifactLocation": artifact,
                        "replacements": [
                            {
                                "deletedRegion": _region(
                                    e.location.row,
                                    e.location.column,
                                    e.end_location.row,
                                    e.end_location.column,
                                ),
                                "insertedContent": {"text": e.content},
                            }
                            for e in sorted(d.fix.edits, key=lambda edit: (edit.start, edit.end))
                        ],
                    }
                ],
                "properties": {"applicability": d.fix.applicability.value},
            }
        ]
    return result


def sarif_document(items: Sequence[Sourced], *, successful: bool = True) -> dict[str, object]:
    rules = [rule_descriptor(rule) for rule in catalog()]
    index = {rule.code: position for position, rule in enumerate(catalog())}
    root = annotation_root().as_uri().rstrip("/") + "/"
    driver: dict[str, object] = {"name": "amplint", "version": __version__, "rules": rules}
    base = docs_base_url()
    if base is not None and "://" in base:
        driver["informationUri"] = base
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "invocations": [{"executionSuccessful": successful}],
                "originalUriBaseIds": {SRCROOT: {"uri": root}},
                "columnKind": "unicodeCodePoints",
                "results": [_result(item.diagnostic, index) for item in items],
            }
        ],
    }


def format_sarif(items: Sequence[Sourced], *, successful: bool = True) -> str:
    return json.dumps(sarif_document(items, successful=successful), indent=2) + "\n"
