"""A cheap, exact pre-filter: skip parsing files whose text cannot trigger any rule.

Every rule declares the identifier words its findings need (``Rule.triggers``; a word
written ``*suffix`` stands for any identifier ending in it, one written ``.name`` for the
identifier used as an attribute name, ``x.name``, and a final ``()`` for a call with no
arguments, ``.step()``; ``re:pattern`` is a regular expression, for the rare condition
that words cannot state): a file that contains none
of a rule's words cannot produce a finding of that rule, because every spelling of the
symbols the rule matches (aliases included) must name them somewhere in the file.

A rule may also declare ``requires``: a tuple of further word sets, each of which must
also occur (a conjunction of alternatives). AMP103, for instance, needs an autocast
block *and* a ``backward``; saying so keeps model files that merely mention
``backward`` from being parsed. Parsing and metadata cost about a hundred times more
than this scan, so every file skipped here is most of a file's cost saved.

``tests/test_prefilter.py`` checks the claim against every example, page and fixture.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amplint.engine.rule import RuleType


@functools.lru_cache(maxsize=256)
def _clauses(rule: RuleType) -> tuple[tuple[str, ...], ...]:
    """The rule's conditions: each is a set of words (sorted), one of which must occur."""
    extra: Iterable[Iterable[str]] = getattr(rule, "requires", ())
    # Sorted so that the outcome's cost does not depend on set iteration order.
    return tuple(tuple(sorted(words)) for words in (rule.triggers, *extra))


_BETWEEN_DOT_AND_NAME = frozenset(" \t\x0c\r\n\\")


def _is_word_char(char: str) -> bool:
    # Exactly the characters ``\w`` matches in a str pattern.
    return char.isalnum() or char == "_"


def _after_dot(text: str, start: int) -> bool:
    """Is the identifier at ``start`` an attribute name (``x.step``, ``x . step``,
    ``x.\\\n step``)? Whitespace, line continuations and line breaks inside brackets may
    separate the dot from the name."""
    index = start - 1
    while index >= 0 and text[index] in _BETWEEN_DOT_AND_NAME:
        index -= 1
    return index >= 0 and text[index] == "."


def _empty_call_follows(text: str, end: int) -> bool:
    """Is the identifier ending at ``end`` called with no arguments (``x.step()``,
    ``x.step( )``, ``x.step(\n)``)?"""
    index = end
    while index < len(text) and text[index] in _BETWEEN_DOT_AND_NAME:
        index += 1
    if index == len(text) or text[index] != "(":
        return False
    index += 1
    while index < len(text) and text[index] in _BETWEEN_DOT_AND_NAME:
        index += 1
    return index < len(text) and text[index] == ")"


@functools.lru_cache(maxsize=64)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _occurs(word: str, text: str) -> bool:
    """Whether ``word`` occurs in ``text`` as a whole identifier (for ``*suffix``, as the
    end of one; for ``.name``, as an attribute name; for ``name()``, called without
    arguments)."""
    if word.startswith("re:"):
        return _regex(word[3:]).search(text) is not None
    suffix = word.startswith("*")
    attribute = word.startswith(".")
    empty_call = word.endswith("()")
    needle = word[1:] if suffix or attribute else word
    if empty_call:
        needle = needle[:-2]
    # str.find is a fast C search; a regex with ``\b`` around the word is ~10x slower
    # because it cannot skip ahead to the literal.
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        if (
            (suffix or start == 0 or not _is_word_char(text[start - 1]))
            and (end == len(text) or not _is_word_char(text[end]))
            and (not attribute or _after_dot(text, start))
            and (not empty_call or _empty_call_follows(text, end))
        ):
            return True
        start = text.find(needle, start + 1)
    return False


def trigger_words(rules: Sequence[RuleType]) -> frozenset[str]:
    """Every word any condition of ``rules`` mentions."""
    return frozenset(word for rule in rules for clause in _clauses(rule) for word in clause)


def may_trigger(text: str, rules: Sequence[RuleType]) -> bool:
    return bool(rules_for(text, rules))


def rules_for(text: str, rules: Sequence[RuleType]) -> list[RuleType]:
    """The subset of ``rules`` (order kept) whose conditions all hold in ``text``."""
    found: dict[str, bool] = {}

    def occurs(word: str) -> bool:
        if word not in found:
            found[word] = _occurs(word, text)
        return found[word]

    kept: list[RuleType] = []
    for rule in rules:
        if all(clause and any(occurs(word) for word in clause) for clause in _clauses(rule)):
            kept.append(rule)
    return kept
