"""Test modules compare numerics, time steps and pick devices on purpose: AMP102, AMP103,
AMP105 and AMP201 stay silent there (a decision of amplint's that RULES.md leaves open),
and fire on the same code anywhere else."""

from __future__ import annotations

import pytest

from amplint.api import check_source

SOURCES = {
    # vissl's FSDP tests: a few unscaled float16 steps.
    "AMP105": (
        "import torch\n\ndef run_steps(model, batch, optimizer):\n    with torch.cuda.amp.autocast():\n"
        "        out = model(batch).mean()\n    out.backward()\n    optimizer.step()\n"
    ),
    # torch-ngp's benchmark times the backward under autocast.
    "AMP103": (
        "import torch\n\ndef bench(model, x):\n    with torch.autocast('cuda'):\n"
        "        y = model(x)\n        y.sum().backward()\n"
    ),
    # opacus's tests compute the reference loss after the block.
    "AMP102": (
        "import torch\nimport torch.nn.functional as F\n\ndef check(model, x, y):\n    with torch.autocast('cuda'):\n"
        "        out = model(x)\n    loss = F.mse_loss(out, y)\n    loss.backward()\n"
    ),
    # PyG's test of a layer under CUDA autocast, on whichever device the test runs.
    "AMP201": (
        "import torch\n\ndef check(layer, device='cpu'):\n    x = torch.randn(3, 4, device=device)\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n        return layer(x)\n"
    ),
}
TEST_PATHS = ["tests/test_vit_fsdp.py", "test_fsdp.py", "pkg/fsdp_test.py", "test/helpers.py"]
OTHER_PATHS = ["train.py", "src/testing_utils.py", "latest/train.py"]


@pytest.mark.parametrize("code", sorted(SOURCES))
@pytest.mark.parametrize("path", TEST_PATHS)
def test_test_modules_are_silent(code: str, path: str) -> None:
    assert [d.code for d in check_source(SOURCES[code], path, select=[code])] == []


@pytest.mark.parametrize("code", sorted(SOURCES))
@pytest.mark.parametrize("path", OTHER_PATHS)
def test_other_modules_are_checked(code: str, path: str) -> None:
    assert [d.code for d in check_source(SOURCES[code], path, select=[code])] == [code]
