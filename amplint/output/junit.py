"""``junit``: JUnit XML for CI test-report viewers.

One ``testsuite`` per checked file; each diagnostic is a failing ``testcase`` and a file
without diagnostics has one passing ``testcase``, so the report counts checked files too.

In a notebook a test case is named by its position in the cell (``AMP001 at cell 3:2:5``)
and its ``line`` is the row of the ``.ipynb`` file's JSON text holding that line.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence

from amplint.diagnostics import Diagnostic
from amplint.output.model import Sourced
from amplint.output.paths import display_path
from amplint.output.text import position

# Characters XML 1.0 cannot carry at all, even escaped (a message may quote source text).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def format_junit(items: Sequence[Sourced], checked: Iterable[str] = ()) -> str:
    by_file: dict[str, list[Diagnostic]] = {_xml(display_path(path)): [] for path in checked}
    for item in items:
        by_file.setdefault(_xml(display_path(item.diagnostic.path)), []).append(item.diagnostic)
    failures = sum(len(found) for found in by_file.values())
    tests = sum(max(len(found), 1) for found in by_file.values())
    suites = ET.Element(
        "testsuites", name="amplint", tests=str(tests), failures=str(failures), errors="0"
    )
    for path, diagnostics in sorted(by_file.items()):
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=path,
            tests=str(max(len(diagnostics), 1)),
            failures=str(len(diagnostics)),
            errors="0",
            skipped="0",
        )
        if not diagnostics:
            ET.SubElement(suite, "testcase", name="amplint", classname=path, file=path)
            continue
        for d in diagnostics:
            line = d.file_rows[0] if d.cell is not None and d.file_rows is not None else d.location.row
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"{d.code} at {position(d)}",
                classname=path,
                file=path,
                line=str(line),
            )
            failure = ET.SubElement(case, "failure", message=_xml(d.message), type=d.code)
            failure.text = f"{path}:{position(d)}: {d.code} {_xml(d.message)}"
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
