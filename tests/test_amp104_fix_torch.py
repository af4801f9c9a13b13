"""AMP104's fixes compute the same loss as the code they replace, proven with torch on CPU.

Each source is fixed by amplint, then the original and the fixed ``loss_of`` run on the
same random logits, targets and weights: the values (and the gradients reaching the
logits) agree for every reduction, with and without ``weight=``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from amplint.api import check_source, fix_source_text

torch = pytest.importorskip("torch")

# An autocast block somewhere in the file is what makes the rule look at it.
TRAIN = '\n\ndef train(model, x):\n    with torch.autocast("cuda"):\n        return model(x)\n'
HEADER = "import torch\nimport torch.nn.functional as F\n\n\n"

# Each form of the fix: the loss function before the fix, with `{reduction}` to fill in.
FORMS = {
    "inline-function": (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    return F.binary_cross_entropy(torch.sigmoid(logits), y, weight=weight, reduction={reduction})\n"
    ),
    "inline-method": (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    return F.binary_cross_entropy(logits.sigmoid(), y, weight, reduction={reduction})\n"
    ),
    "inline-functional-keywords": (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    return F.binary_cross_entropy(target=y, input=F.sigmoid(logits), weight=weight, reduction={reduction})\n"
    ),
    "inline-expit": (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    return torch.nn.functional.binary_cross_entropy(\n"
        + "        torch.special.expit(logits),\n"
        + "        y,\n"
        + "        weight=weight,\n"
        + "        reduction={reduction},\n"
        + "    )\n"
    ),
    "assigned": (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    probs = torch.sigmoid(logits)\n"
        + "    loss = F.binary_cross_entropy(probs, y, weight=weight, reduction={reduction})\n"
        + "    return loss\n"
    ),
    "assigned-method-attribute": (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    out = {{'logits': logits}}\n"
        + "    probs = out['logits'].sigmoid()\n"
        + "    return F.binary_cross_entropy(probs, y, weight, reduction={reduction})\n"
    ),
    "from-import": (
        "import torch\nfrom torch.nn.functional import binary_cross_entropy\n\n\n"
        + "def loss_of(logits, y, weight):\n"
        + "    return binary_cross_entropy(torch.sigmoid(logits), y, weight=weight, reduction={reduction})\n"
    ),
    "from-import-name-taken": (
        "import torch\nfrom torch.nn.functional import binary_cross_entropy\n\n"
        + "binary_cross_entropy_with_logits = None\n\n\n"
        + "def loss_of(logits, y, weight):\n"
        + "    probs = logits.sigmoid()\n"
        + "    return binary_cross_entropy(probs, y, weight=weight, reduction={reduction})\n"
    ),
}


def _load(source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<amp104>", "exec"), namespace)
    return namespace["loss_of"]  # type: ignore[no-any-return]


def _fixed(source: str, *, unsafe: bool = False) -> str:
    assert any(d.code == "AMP104" and d.fix is not None for d in check_source(source, select=["AMP104"]))
    return fix_source_text(source, select=["AMP104"], unsafe_fixes=unsafe).new_text


def _inputs(seed: int, *, weighted: bool, hard_labels: bool) -> tuple[Any, Any, Any]:
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(16, 5, generator=generator, dtype=torch.float64) * 3).requires_grad_()
    y = torch.rand(16, 5, generator=generator, dtype=torch.float64)
    if hard_labels:
        y = (y > 0.5).to(torch.float64)
    weight = torch.rand(16, 5, generator=generator, dtype=torch.float64) + 0.1 if weighted else None
    return logits, y, weight


def _loss_and_gradient(loss_of: Callable[..., Any], logits: Any, y: Any, weight: Any) -> tuple[Any, Any]:
    leaf = logits.detach().clone().requires_grad_()
    loss = loss_of(leaf, y, weight)
    (gradient,) = torch.autograd.grad(loss.sum(), leaf)
    return loss.detach(), gradient


@pytest.mark.parametrize("weighted", [False, True], ids=["no-weight", "weight"])
@pytest.mark.parametrize("reduction", ["'none'", "'mean'", "'sum'"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_rewritten_call_computes_the_same_loss(form: str, reduction: str, weighted: bool) -> None:
    original = FORMS[form].format(reduction=reduction) + TRAIN
    fixed = _fixed(original)
    assert fixed != original
    assert "binary_cross_entropy_with_logits(" in fixed
    assert "sigmoid" not in fixed and "expit" not in fixed, "the sigmoid goes with the fix"
    before, after = _load(original), _load(fixed)
    for seed, hard_labels in ((0, False), (1, True), (2, False)):
        logits, y, weight = _inputs(seed, weighted=weighted, hard_labels=hard_labels)
        expected_loss, expected_gradient = _loss_and_gradient(before, logits, y, weight)
        loss, gradient = _loss_and_gradient(after, logits, y, weight)
        torch.testing.assert_close(loss, expected_loss, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(gradient, expected_gradient, rtol=1e-9, atol=1e-12)


def test_sigmoid_with_other_uses_stays_and_the_fix_is_unsafe() -> None:
    original = (
        HEADER
        + "def loss_of(logits, y, weight):\n"
        + "    probs = torch.sigmoid(logits)\n"
        + "    loss = F.binary_cross_entropy(probs, y, weight=weight)\n"
        + "    return loss + 0 * (probs > 0.5).sum()\n"
        + TRAIN
    )
    assert fix_source_text(original, select=["AMP104"]).new_text in ("", original), "not a safe fix"
    fixed = _fixed(original, unsafe=True)
    assert "    probs = torch.sigmoid(logits)\n" in fixed
    assert "F.binary_cross_entropy_with_logits(logits, y, weight=weight)" in fixed
    before, after = _load(original), _load(fixed)
    logits, y, weight = _inputs(3, weighted=True, hard_labels=False)
    torch.testing.assert_close(
        _loss_and_gradient(after, logits, y, weight), _loss_and_gradient(before, logits, y, weight), rtol=1e-9, atol=1e-12
    )


def test_bce_loss_module_gets_no_fix() -> None:
    source = "import torch\nfrom torch import nn\n\ncriterion = nn.BCELoss()\n" + TRAIN.replace("model(x)", "criterion(model(x), x)")
    diagnostics = [d for d in check_source(source, select=["AMP104"])]
    assert diagnostics and all(d.fix is None for d in diagnostics)
