"""Map positions in libcst's rendering of a module back onto the real source text.

libcst does not reproduce a few files exactly (it drops a form feed at the start of a
top-level statement and a trailing lone carriage return). Rules work on libcst's
rendering of the module, and their positions and edits are mapped back onto the real
text, so fixes never land one character off.
"""

from __future__ import annotations

import bisect

from amplint.diagnostics import Location
from amplint.engine.source import line_starts

# Characters libcst may leave out of its rendering of a module without changing its meaning.
_DROPPABLE = frozenset(" \t\x0c\r\n")


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``."""
    length = min(len(a) - i, len(b) - j)
    low = 0
    while low < length:
        high = min(length, low + 4096)
        if a[i + low : i + high] != b[j + low : j + high]:
            for k in range(low, high):
                if a[i + k] != b[j + k]:
                    return k
        low = high
    return length


class Alignment:
    """Maps offsets in libcst's rendering (``code``) to offsets in the source text.

    ``code`` is ``text`` with some whitespace left out. ``breaks`` are the code offsets
    before which the text holds left-out characters, ``totals`` their running counts.
    """

    def __init__(self, breaks: list[int], totals: list[int]) -> None:
        self.breaks = breaks
        self.totals = totals

    @classmethod
    def between(cls, code: str, text: str) -> Alignment | None:
        breaks: list[int] = []
        totals: list[int] = []
        i = j = total = 0
        while True:
            common = _common_prefix(code, i, text, j)
            i += common
            j += common
            if i == len(code):
                break
            skipped = j
            while j < len(text) and text[j] != code[i]:
                if text[j] not in _DROPPABLE:
                    return None
                j += 1
            if j == len(text) or j == skipped:
                return None
            total += j - skipped
            breaks.append(i)
            totals.append(total)
        rest = text[j:]
        if any(character not in _DROPPABLE for character in rest):
            return None
        if rest:
            breaks.append(len(code))
            totals.append(total + len(rest))
        return cls(breaks, totals)

    def start(self, offset: int) -> int:
        """Where ``code[offset]`` is in the text (after left-out characters before it)."""
        index = bisect.bisect_right(self.breaks, offset)
        return offset + (self.totals[index - 1] if index else 0)

    def end(self, offset: int) -> int:
        """Just after ``code[offset - 1]`` in the text (before left-out characters)."""
        index = bisect.bisect_left(self.breaks, offset)
        return offset + (self.totals[index - 1] if index else 0)

    def span(self, start: int, end: int) -> tuple[int, int]:
        if start == end:
            mapped = self.start(start)
            return mapped, mapped
        return self.start(start), self.end(end)


class Locator:
    def __init__(self, text: str) -> None:
        self.starts = line_starts(text)

    def __call__(self, offset: int) -> Location:
        row = bisect.bisect_right(self.starts, offset)
        return Location(row=row, column=offset - self.starts[row - 1] + 1)
