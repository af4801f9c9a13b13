"""The progress bar: drawn only on a terminal, erased at the end, items untouched."""

from __future__ import annotations

import io

import pytest

from amplint.engine.progress import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _smart_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")


def test_items_pass_through_unchanged_and_nothing_is_drawn_when_disabled() -> None:
    terminal = _Terminal()
    assert list(progress(range(5), 5, enabled=False, stream=terminal, delay=0)) == [0, 1, 2, 3, 4]
    assert terminal.getvalue() == ""


def test_nothing_is_drawn_when_the_stream_is_not_a_terminal() -> None:
    pipe = io.StringIO()
    assert list(progress(iter("abc"), 3, enabled=True, stream=pipe, delay=0)) == ["a", "b", "c"]
    assert pipe.getvalue() == ""


def test_nothing_is_drawn_on_a_dumb_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    terminal = _Terminal()
    list(progress(range(3), 3, enabled=True, stream=terminal, delay=0))
    assert terminal.getvalue() == ""


def test_nothing_is_drawn_before_the_delay() -> None:
    terminal = _Terminal()
    list(progress(range(3), 3, enabled=True, stream=terminal, delay=60))
    assert terminal.getvalue() == ""


def test_a_long_run_draws_a_counter_and_erases_it_at_the_end() -> None:
    terminal = _Terminal()
    assert list(progress(range(3), 3, enabled=True, stream=terminal, delay=0)) == [0, 1, 2]
    output = terminal.getvalue()
    assert "1/3 files" in output  # the first draw; later ones are rate-limited
    assert output.endswith("\r\x1b[2K")
    assert "\n" not in output


def test_the_bar_is_erased_when_the_consumer_stops_early() -> None:
    terminal = _Terminal()
    items = progress(range(10), 10, enabled=True, stream=terminal, delay=0)
    assert next(items) == 0
    items.close()
    assert terminal.getvalue().endswith("\r\x1b[2K")
