"""Rule pages and the README rule table, generated from the rule classes.

A rule's docstring is its page, so ``amplint rule CODE``, ``rules/CODE.md`` and the
README cannot drift from the code: ``python -m amplint.docs`` rewrites the files and a
test fails when they are stale.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from pathlib import Path

from amplint.engine.rule import FixAvailability, RuleType
from amplint.rules import all_rules

# Where rule pages are published, if anywhere: rule links in JSON and SARIF output are
# made from it (``$AMPLINT_DOCS_URL/AMP001.md``); without it they are the pages' paths
# in this repository (``rules/AMP001.md``).
DOCS_URL_VARIABLE = "AMPLINT_DOCS_URL"
PAGES_PATH = "rules"
TABLE_START = "<!-- rules-table:start -->"
TABLE_END = "<!-- rules-table:end -->"

_FIX_TEXT = {
    FixAvailability.NONE: "no fix",
    FixAvailability.SOMETIMES: "fix sometimes available",
    FixAvailability.ALWAYS: "fix always available",
}


def docs_base_url() -> str | None:
    """The configured base URL of the rule pages (``AMPLINT_DOCS_URL``), if any."""
    base = os.environ.get(DOCS_URL_VARIABLE, "").strip()
    return base.rstrip("/") or None


def rule_url(code: str) -> str:
    """The rule's page: under the configured base URL, else its path in this repository."""
    base = docs_base_url()
    return f"{base}/{code}.md" if base else f"{PAGES_PATH}/{code}.md"


def rule_help_uri(code: str) -> str | None:
    """The rule's page as an absolute URI (for formats that need one), or None."""
    base = docs_base_url()
    return f"{base}/{code}.md" if base and "://" in base else None


def fix_label(rule: RuleType) -> str:
    if rule.fix_availability is FixAvailability.NONE or rule.fix_applicability is None:
        return "no fix"
    return f"{_FIX_TEXT[rule.fix_availability]} ({rule.fix_applicability.value})"


def render_rule_page(rule: RuleType) -> str:
    body = inspect.cleandoc(rule.__doc__ or "")
    facts = [f"Derived from the **amplint** linter. {fix_label(rule).capitalize()}."]
    if not rule.default_enabled:
        facts.append(
            "Off by default: enable it with `--select " + rule.code + "` or `extend-select`."
        )
    return f"# {rule.name} ({rule.code})\n\n" + "\n".join(facts) + "\n\n" + body + "\n"


def render_rule_table() -> str:
    lines = ["| Code | Name | Summary | Fix | Default |", "| --- | --- | --- | --- | --- |"]
    for rule in all_rules():
        summary = rule.summary.replace("|", "\\|")
        default = "on" if rule.default_enabled else "off"
        lines.append(
            f"| [{rule.code}](rules/{rule.code}.md) | {rule.name} | {summary} | {fix_label(rule)} | {default} |"
        )
    return "\n".join(lines)


def replace_table(readme: str, table: str) -> str:
    pattern = re.compile(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END), re.DOTALL)
    if not pattern.search(readme):
        raise ValueError("README has no rule-table markers")
    return pattern.sub(lambda _: f"{TABLE_START}\n{table}\n{TABLE_END}", readme)


def expected_files(root: Path) -> dict[Path, str]:
    files = {root / "rules" / f"{rule.code}.md": render_rule_page(rule) for rule in all_rules()}
    readme = root / "README.md"
    files[readme] = replace_table(readme.read_text(encoding="utf-8"), render_rule_table())
    return files


def main(argv: list[str] | None = None) -> int:
    root = Path(argv[0] if argv else ".")
    (root / "rules").mkdir(exist_ok=True)
    for path, content in expected_files(root).items():
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
