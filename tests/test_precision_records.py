"""The committed verdicts of the evaluation rounds are well formed, so that
``bench/precision/replay.py`` can replay them on any later machine."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "precision"))

from replay import read_verdicts  # noqa: E402

from amplint.rules import all_rules  # noqa: E402

CODES = {rule.code for rule in all_rules()}
FILES = sorted((ROOT / "bench" / "precision" / "verdicts").glob("*.tsv"))


def test_there_are_verdict_files() -> None:
    assert FILES


def test_every_verdict_names_a_repository_commit_file_line_code_and_reason() -> None:
    verdicts = read_verdicts(FILES)
    assert verdicts
    for verdict in verdicts:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", verdict.repo), verdict
        assert re.fullmatch(r"[0-9a-f]{40}", verdict.commit), verdict
        assert verdict.path and not verdict.path.startswith("/"), verdict
        assert verdict.line >= 1, verdict
        assert verdict.code in CODES, verdict
        assert verdict.verdict in ("TRUE", "FALSE"), verdict
        assert verdict.reason, verdict


def test_no_finding_is_judged_twice() -> None:
    keys = [(v.repo, v.path, v.line, v.code) for v in read_verdicts(FILES)]
    assert len(keys) == len(set(keys))
