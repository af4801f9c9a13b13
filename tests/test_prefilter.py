"""The pre-filter never drops a file that a rule would fire on.

Every rule runs with the pre-filter bypassed on every text we have: every rule's
examples, fixed outputs and page blocks, every fixture, and every multi-line string in
the test suite that parses as Python. Whenever it reports, the pre-filter must have kept
it. The registry is iterated, so rules added later are covered too.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import warnings
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amplint.engine.linter import lint_source
from amplint.engine.prefilter import _occurs, rules_for
from amplint.engine.rule import RuleType
from amplint.engine.source import decode
from amplint.rules import all_rules

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
    for path in sorted((ROOT / "tests").glob("*.py")):
        texts += [(f"{path.name}-string-{i}", text) for i, text in enumerate(_python_strings(path))]
    return texts


def _python_strings(path: Path) -> list[str]:
    """Multi-line string literals of a test module that are themselves Python sources."""
    sources: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            text = textwrap.dedent(node.value)
            try:
                with warnings.catch_warnings():  # invalid escapes in test sources on purpose
                    warnings.simplefilter("ignore")
                    ast.parse(text)
            except (SyntaxError, ValueError):
                continue
            sources.append(text)
    return sources


CORPUS = _corpus()
RULES = [r for r in all_rules() if r.triggers]


def test_corpus_reaches_test_sources() -> None:
    # Guards the corpus builder itself: if it silently found nothing, the proof would be hollow.
    assert sum(1 for name, _ in CORPUS if "-string-" in name) >= 20
    assert sum(1 for name, _ in CORPUS if name.endswith(".py")) >= 3


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
def test_prefilter_keeps_every_file_the_rule_fires_on(rule: RuleType, findings: dict[str, list[tuple[str, str]]]) -> None:
    assert findings[rule.code], f"{rule.code} fired on nothing in the corpus: the check proves nothing for it"
    for name, text in findings[rule.code]:
        assert rules_for(text, [rule]) == [rule], f"pre-filter would skip {name} for {rule.code}"


def test_prefilter_skips_text_without_trigger_words() -> None:
    assert rules_for("import os\nprint('example sample clamp')\n", all_rules()) == []


def test_suffix_triggers_match_identifiers_ending_in_them() -> None:
    kept = {r.code for r in rules_for("self.loss_scaler.step(optimizer)\n", all_rules())}
    assert "AMP303" in kept


def test_attribute_triggers_need_a_dot_before_the_name() -> None:
    for kept in ("optimizer.step()", "optimizer . step()", "(optimizer\n    .step())", "optimizer.\\\n    step()"):
        assert _occurs(".step", kept), kept
    for skipped in ("def step(self):", "step = 1", "optimizer.steps()", "optimizer.step_size"):
        assert not _occurs(".step", skipped), skipped


def test_empty_call_triggers_need_no_arguments() -> None:
    for kept in ("optimizer.step()", "optimizer.step( )", "optimizer.step(\n)", "opt . step ()"):
        assert _occurs(".step()", kept), kept
    for skipped in ("scheduler.step(t)", "optimizer.step", "step()", "optimizer.step(closure)"):
        assert not _occurs(".step()", skipped), skipped


def test_regex_triggers_search_the_text() -> None:
    from amplint.rules.amp201_hardcoded_amp_device import DEVICE_STRING_CHOICE

    kept = [
        '"cuda" if x else "cpu"',
        "('cpu'  # why\n ) if not d.startswith('cuda') else 'cuda'",
        "'''cuda''' if x else 'cpu'",
    ]
    for text in kept:
        assert _occurs(DEVICE_STRING_CHOICE, text), text
    for text in ('"cuda:0" if x else "cpu"', 'device = "cuda"', '"cuda" ifx'):
        assert not _occurs(DEVICE_STRING_CHOICE, text), text

    from amplint.rules.amp201_hardcoded_amp_device import CUDA_LITERAL, STR_CALL

    for text in ("autocast('cuda')", 'device_type="cuda"', "r'cuda'", '"""cuda"""'):
        assert _occurs(CUDA_LITERAL, text), text
    for text in ("torch.cuda.amp", "'cuda:0'", "# cuda"):
        assert not _occurs(CUDA_LITERAL, text), text
    for text in ("str(device)", "str (device)", "x = str(\n d)"):
        assert _occurs(STR_CALL, text), text
    for text in ("string(x)", "mystr(x)", "str"):
        assert not _occurs(STR_CALL, text), text


class _AutocastOnly:
    triggers = frozenset({"autocast"})


def test_trigger_words_must_be_whole_identifiers() -> None:
    stub = cast(RuleType, _AutocastOnly)
    assert rules_for("with torch.autocast('cuda'):\n    pass\n", [stub]) == [stub]
    for near_miss in ("my_autocast_helper", "autocasting", "xautocast"):
        assert rules_for(f"with torch.{near_miss}('cuda'):\n    pass\n", [stub]) == []


class _Stub:
    """Just what the pre-filter reads of a rule: its trigger words and further clauses."""

    triggers = frozenset({"autocast"})
    requires = (frozenset({"backward"}), frozenset({"*scaler", "GradScaler"}))


def test_every_required_clause_must_occur() -> None:
    stub = cast(RuleType, _Stub)
    assert rules_for("autocast backward grad_scaler", [stub]) == [stub]
    assert rules_for("autocast backward GradScaler", [stub]) == [stub]
    assert rules_for("autocast grad_scaler", [stub]) == []
    assert rules_for("backward grad_scaler", [stub]) == []
    assert rules_for("autocast backward scalers", [stub]) == []


_WORDISH = st.sampled_from(["half", "scaler", "_", "x", "1", "é", " ", ".", "(", "\n", "#", "'", "grad_", "ß", "\\", "\t"])


@given(pieces=st.lists(_WORDISH, max_size=12), word=st.sampled_from(["half", "scaler", "*scaler", "*half", ".half"]))
def test_occurs_agrees_with_the_regex_definition(pieces: list[str], word: str) -> None:
    text = "".join(pieces)
    if word.startswith("."):
        # An attribute name: a dot, then only blanks, line breaks or continuations.
        expected = re.search(r"\.[ \t\x0c\r\n\\]*\b" + re.escape(word[1:]) + r"\b", text) is not None
    elif word.startswith("*"):
        expected = re.search(r"\w*" + re.escape(word[1:]) + r"\b", text) is not None
    else:
        expected = re.search(r"\b" + re.escape(word) + r"\b", text) is not None
    assert _occurs(word, text) is expected
