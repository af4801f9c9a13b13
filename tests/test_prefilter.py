"""The pre-filter never drops a file that a rule would fire on.

Every rule runs with the pre-filter bypassed on every text we have: its own examples,
every rule's examples and page blocks, and every fixture. Whenever it reports, the
pre-filter must have kept it.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from amplint.engine.linter import lint_source
from amplint.engine.prefilter import rules_for
from amplint.engine.source import decode
from amplint.rules import Rule, all_rules

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _corpus() -> list[tuple[str, str]]:
    texts: list[tuple[str, str]] = []
    for rule in all_rules():
        texts += [(f"{rule.code}-valid-{i}", source) for i, source in enumerate(rule.VALID)]
        texts += [(f"{rule.code}-invalid-{i}", example.code) for i, example in enumerate(rule.INVALID)]
        texts += [(f"{rule.code}-fixed-{i}", example.fixed) for i, example in enumerate(rule.INVALID) if example.fixed]
        texts += [(f"{rule.code}-page-{i}", block) for i, block in enumerate(_BLOCK.findall(inspect.cleandoc(rule.__doc__ or "")))]
    for path in sorted((ROOT / "fixtures").glob("*.py")):
        texts.append((path.name, path.read_text(encoding="utf-8")))
    return texts


CORPUS = _corpus()
RULES = [r for r in all_rules() if r.triggers]


@pytest.fixture(scope="module")
def findings() -> dict[str, list[tuple[str, str]]]:
    """Per rule code, the corpus texts it fires on with the pre-filter bypassed."""
    fired: dict[str, list[tuple[str, str]]] = {rule.code: [] for rule in RULES}
    for name, text in CORPUS:
        # Rules are independent visitors, so running them together equals running each alone.
        for code in {d.code for d in lint_source(name, decode(text.encode("utf-8")), RULES).diagnostics}:
            if code in fired:
                fired[code].append((name, text))
    return fired


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_prefilter_keeps_every_file_the_rule_fires_on(rule: type[Rule], findings: dict[str, list[tuple[str, str]]]) -> None:
    assert findings[rule.code], f"{rule.code} fired on nothing in the corpus: the check proves nothing for it"
    for name, text in findings[rule.code]:
        assert rules_for(text, [rule]) == [rule], f"pre-filter would skip {name} for {rule.code}"


def test_prefilter_skips_text_without_trigger_words() -> None:
    assert rules_for("import os\nprint('example sample clamp')\n", all_rules()) == []


def test_suffix_triggers_match_identifiers_ending_in_them() -> None:
    kept = {r.code for r in rules_for("self.loss_scaler.step(optimizer)\n", all_rules())}
    assert "AMP303" in kept
