"""``--statistics``: one row per rule, most frequent first (Ruff's layout), or JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from amplint.diagnostics import Diagnostic
from amplint.rules import rule_by_code


def statistics_rows(diagnostics: Sequence[Diagnostic], unsafe: bool) -> list[dict[str, object]]:
    counts = Counter(d.code for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if d.fixable_with(unsafe))
    rows: list[dict[str, object]] = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rule = rule_by_code(code)
        rows.append(
            {
                "code": code,
                "name": rule.name if rule else "",
                "count": count,
                "fixable": fixable[code] > 0,
                "fixable_count": fixable[code],
            }
        )
    return rows


def format_statistics(diagnostics: Sequence[Diagnostic], unsafe: bool) -> str:
    rows = statistics_rows(diagnostics, unsafe)
    width = max((len(str(row["count"])) for row in rows), default=1)
    return "".join(
        f"{row['count']:>{width}}\t{row['code']}\t{'[*]' if row['fixable'] else '[ ]'} {row['name']}\n"
        for row in rows
    )


def format_statistics_json(diagnostics: Sequence[Diagnostic], unsafe: bool) -> str:
    return json.dumps(statistics_rows(diagnostics, unsafe), indent=2) + "\n"
