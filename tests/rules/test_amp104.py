"""AMP104 unsafe-bce: its examples, and real torch (CPU) proving that
the fix computes the same loss and that CPU autocast does not raise."""

from __future__ import annotations

from types import ModuleType

import pytest

from amplint.api import check_source, fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp104_unsafe_bce import UnsafeBce
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)
from rules.snippets import run_snippet

RULE = UnsafeBce


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


BCE_SNIPPETS = [
    "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda', enabled=True):\n    pass\n"
    "loss = F.binary_cross_entropy(torch.sigmoid(logits), target)\n",
    "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n    pass\n"
    "loss = F.binary_cross_entropy(logits.sigmoid(), target, weight, reduction='sum')\n",
    "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n    pass\n"
    "loss = F.binary_cross_entropy(input=F.sigmoid(logits), target=target, weight=weight, reduction='none')\n",
]


@pytest.mark.parametrize("source", BCE_SNIPPETS)
def test_fix_computes_the_same_loss(source: str, torch: ModuleType) -> None:
    fixed = fix_text(source, select=["AMP104"])
    assert "binary_cross_entropy_with_logits" in fixed and "sigmoid" not in fixed
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "logits": torch.randn(16, 5, generator=generator),
        "target": torch.randint(0, 2, (16, 5), generator=generator).float(),
        "weight": torch.rand(16, 5, generator=generator),
    }
    original = run_snippet(source, torch=torch, **inputs)[0]["loss"]
    rewritten = run_snippet(fixed, torch=torch, **inputs)[0]["loss"]
    # Equal up to float32 rounding; the fused form is the more accurate of the two.
    torch.testing.assert_close(rewritten, original, rtol=1e-4, atol=1e-6)


def test_bce_does_not_raise_under_cpu_autocast_which_is_why_cpu_files_are_silent(torch: ModuleType) -> None:
    probabilities = torch.rand(4, 3)
    target = torch.randint(0, 2, (4, 3)).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.binary_cross_entropy(probabilities, target)
    assert torch.isfinite(loss)
    assert not check_source(
        "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cpu'):\n"
        "    loss = F.binary_cross_entropy(p, y)\n",
        select=["AMP104"],
    )


@pytest.mark.parametrize(
    ("use", "reported"),
    [
        # cav-mae's feature-extraction script: a left-over loss nobody calls (round BC).
        ("", False),
        ("    out = args.loss_fn(model(x), y)\n", True),
        ("    fn = getattr(args, 'loss_fn')\n", True),
    ],
)
def test_a_bce_loss_stored_where_nothing_reads_it(use: str, reported: bool) -> None:
    source = (
        "import torch\n\ndef extract(args, model, x, y):\n    args.loss_fn = torch.nn.BCELoss()\n"
        "    with torch.autocast('cuda'):\n        feats = model(x)\n" + use + "    return feats\n"
    )
    assert [d.code for d in check_source(source, "extract.py", select=["AMP104"])] == (["AMP104"] if reported else [])


STORED_BCE = """\
import torch


class Runner:
    def __init__(self):
        self.bce_fn = torch.nn.BCELoss()

    def train_step(self, x, y):
        with torch.autocast("cuda", dtype=torch.float16):
            out = self.model(x)
{train_use}        return out

    def refine(self, x, y):
{refine_use}
"""


@pytest.mark.parametrize(
    ("train_use", "refine_use", "reported"),
    [
        # LiDAR4D (round BG): called only by a float32 refinement loop.
        ("", "        return self.bce_fn(self.unet(x), y)", False),
        ("", "        with torch.no_grad():\n            pass\n        return self.bce_fn(self.unet(x), y)", False),
        # Called under autocast, directly or through the method that calls it.
        ("            loss = self.bce_fn(out, y)\n", "        return self.bce_fn(self.unet(x), y)", True),
        ("            loss = self.refine(out, y)\n", "        return self.bce_fn(self.unet(x), y)", True),
        # Handed on, or read by name: it may run anywhere.
        ("", "        return run(self.bce_fn, x, y)", True),
        ("", "        return getattr(self, 'bce_fn')(x, y)", True),
    ],
)
def test_a_stored_bce_loss_called_only_outside_autocast(train_use: str, refine_use: str, reported: bool) -> None:
    codes = [d.code for d in check_source(STORED_BCE.format(train_use=train_use, refine_use=refine_use), "runner.py", select=["AMP104"])]
    assert (codes != []) is reported, codes
