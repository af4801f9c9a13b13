"""The published pages and the README rule table are generated from the rules."""

from __future__ import annotations

from pathlib import Path

from amplint.docs import expected_files, render_rule_page
from amplint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent


def test_rule_pages_and_readme_table_are_current() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, content in expected_files(ROOT).items()
        if not path.exists() or path.read_text(encoding="utf-8") != content
    ]
    assert stale == [], f"run `python -m amplint.docs` to regenerate: {stale}"


def test_no_page_without_a_rule() -> None:
    codes = {rule.code for rule in all_rules()}
    pages = {path.stem for path in (ROOT / "rules").glob("*.md") if path.stem != "README"}
    assert pages <= codes


def test_every_page_has_ruffs_sections() -> None:
    for rule in all_rules():
        page = render_rule_page(rule)
        for heading in (
            "## What it does",
            "## Why is this bad?",
            "## Example",
            "## Use instead",
            "## Fix safety",
        ):
            if rule.code == "AMP999" and heading in ("## Example", "## Use instead"):
                continue  # an internal error has no source that shows it
            assert heading in page, f"{rule.code} page lacks {heading}"
