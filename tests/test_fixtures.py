"""The bundled training scripts: valid Python, and together they show every rule firing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from amplint.api import check_source
from amplint.rules import all_rules

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures").glob("*.py"))
ENGINE_CODES = {"AMP900", "AMP999"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_is_valid_python(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_fixtures_show_every_rule() -> None:
    fired = {d.code for path in FIXTURES for d in check_source(path.read_bytes(), str(path), select=["ALL"])}
    expected = {rule.code for rule in all_rules()} - ENGINE_CODES
    assert expected - fired == set(), "rules no fixture demonstrates"


def test_fixtures_raise_no_internal_error() -> None:
    for path in FIXTURES:
        codes = {d.code for d in check_source(path.read_bytes(), str(path), select=["ALL"])}
        assert not codes & ENGINE_CODES, path
