"""Inputs whose cost could blow up: every check must stay linear in the file's size.

pytest-timeout is the hang guard (a generous limit, not a timing assertion): a pre-filter
pattern that backtracks exponentially turns these into runs of minutes or hours.
"""

from __future__ import annotations

import pytest

from amplint.api import check_source

BANNER = "import torch\ny = \"cuda\"\nx = \"cpu\"\n" + "#" * 200 + "\n"


@pytest.mark.timeout(30)
def test_comment_banner_after_device_strings_does_not_hang() -> None:
    # Issue 13's repro, with 200 '#' instead of 32 (32 took over 100 s before the fix).
    assert check_source(BANNER, select=["ALL"]) == []


@pytest.mark.timeout(30)
def test_device_choice_still_found_across_comments() -> None:
    source = (
        "import torch\n"
        "def f(device):\n"
        '    t = "cuda"  # comment ####\n'
        "    d = ('cuda'  # note\n"
        "         if 'cuda' in device else 'cpu')\n"
        "    with torch.autocast(d):\n"
        "        pass\n"
    )
    codes = [d.code for d in check_source(source, select=["AMP201"])]
    assert codes == ["AMP201"]
