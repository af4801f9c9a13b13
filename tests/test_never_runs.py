"""Findings in code the author switched off (``if False:``, ``if x and False:``) are not
reported, by any rule; code that may run still is."""

from __future__ import annotations

import textwrap

import pytest

from amplint.api import check_source

BCE_UNDER_AUTOCAST = """\
import torch
import torch.nn as nn

def loss_of(x, y, n):
    with torch.autocast("cuda", dtype=torch.float16):
{branch}
    return loss
"""


def _codes(branch: str) -> list[str]:
    source = BCE_UNDER_AUTOCAST.format(branch=textwrap.indent(textwrap.dedent(branch), " " * 8))
    return [d.code for d in check_source(source, "train.py", select=["AMP104"])]


@pytest.mark.parametrize(
    "branch",
    [
        # HazyResearch m2's switched-off branch.
        "if n == 2 and False:\n    loss = nn.BCELoss()(x, y)\nelse:\n    loss = nn.CrossEntropyLoss()(x, y)\n",
        "if False:\n    loss = nn.BCELoss()(x, y)\n",
        "if 0:\n    loss = nn.BCELoss()(x, y)\n",
        "if not True:\n    loss = nn.BCELoss()(x, y)\n",
        "if False and n:\n    loss = nn.BCELoss()(x, y)\n",
        "if True:\n    loss = 0\nelse:\n    loss = nn.BCELoss()(x, y)\n",
        "while False:\n    loss = nn.BCELoss()(x, y)\n",
        "if n:\n    pass\nelif False:\n    loss = nn.BCELoss()(x, y)\n",
    ],
)
def test_code_that_never_runs_is_not_reported(branch: str) -> None:
    assert _codes(branch) == []


@pytest.mark.parametrize(
    "branch",
    [
        "if n == 2:\n    loss = nn.BCELoss()(x, y)\n",
        "if n == 2 or False:\n    loss = nn.BCELoss()(x, y)\n",
        "if not False:\n    loss = nn.BCELoss()(x, y)\n",
        "if True:\n    loss = nn.BCELoss()(x, y)\n",
        "if False:\n    pass\nelse:\n    loss = nn.BCELoss()(x, y)\n",
        "if 1:\n    loss = nn.BCELoss()(x, y)\n",
    ],
)
def test_code_that_may_run_is_reported(branch: str) -> None:
    assert _codes(branch) == ["AMP104"]


def test_every_rule_skips_switched_off_code() -> None:
    source = textwrap.dedent(
        """\
        import torch

        if False:
            scaler = torch.cuda.amp.GradScaler()
        dtype = torch.get_autocast_gpu_dtype()
        """
    )
    assert [(d.code, d.location.row) for d in check_source(source, "train.py")] == [("AMP002", 5)]
