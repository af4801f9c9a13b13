"""A cheap, exact pre-filter: skip parsing files whose text cannot trigger any rule.

Every rule declares the identifier words its findings need (``Rule.triggers``; a word
written ``*suffix`` stands for any identifier ending in it); a file
that contains none of the enabled rules' words cannot produce a finding, because every
spelling of the symbols a rule matches (aliases included) must name them somewhere in
the file. A test checks this claim against every example and fixture.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from amplint.rules.base import Rule


@functools.lru_cache(maxsize=64)
def _pattern(words: frozenset[str]) -> re.Pattern[str]:
    # "*word" matches any identifier ending in "word" (grad_scaler, loss_scaler).
    alternatives = "|".join(
        (r"\w*" + re.escape(word[1:])) if word.startswith("*") else re.escape(word)
        for word in sorted(words, key=lambda w: (-len(w), w))
    )
    return re.compile(rf"\b(?:{alternatives})\b")


def _matches(trigger: str, token: str) -> bool:
    return token.endswith(trigger[1:]) if trigger.startswith("*") else token == trigger


def trigger_words(rules: Sequence[type[Rule]]) -> frozenset[str]:
    return frozenset(word for rule in rules for word in rule.triggers)


def may_trigger(text: str, rules: Sequence[type[Rule]]) -> bool:
    words = trigger_words(rules)
    return bool(words) and _pattern(words).search(text) is not None


def rules_for(text: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The subset of ``rules`` whose trigger words occur in ``text``."""
    if not rules:
        return []
    found = set(_pattern(trigger_words(rules)).findall(text))
    return [rule for rule in rules if any(_matches(t, token) for t in rule.triggers for token in found)]
