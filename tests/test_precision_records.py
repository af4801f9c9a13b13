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
REPOS = ROOT / "bench" / "precision" / "repos"


def _round_repos(name: str) -> dict[str, str]:
    rows = (line.split("\t") for line in (REPOS / name).read_text(encoding="utf-8").splitlines()[1:] if line)
    return {repo: commit for repo, commit in rows}


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


def test_every_judged_repository_is_in_its_rounds_list_at_the_same_commit() -> None:
    for file in FILES:
        evaluated = _round_repos(file.name)
        for verdict in read_verdicts([file]):
            assert evaluated.get(verdict.repo) == verdict.commit, verdict


def test_no_repository_is_evaluated_twice() -> None:
    seen: dict[str, str] = {}
    earlier = {
        line.strip().lower()
        for line in (REPOS / "used-before-stop30.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    for listing in sorted(REPOS.glob("round*.tsv")):
        for repo, commit in _round_repos(listing.name).items():
            assert re.fullmatch(r"[0-9a-f]{40}", commit), (listing.name, repo)
            assert repo.lower() not in seen, (repo, seen.get(repo.lower()), listing.name)
            assert repo.lower() not in earlier, (repo, listing.name)
            seen[repo.lower()] = listing.name
