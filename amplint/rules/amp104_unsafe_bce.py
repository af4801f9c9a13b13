from __future__ import annotations

import libcst as cst

from amplint.diagnostics import Applicability, Fix
from amplint.rules.base import AnalysisRule, Invalid

BCE_FUNCTIONS = frozenset({"torch.nn.functional.binary_cross_entropy", "torch.binary_cross_entropy"})
BCE_MODULES = frozenset({"torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss"})
SIGMOIDS = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})
# Devices whose autocast does not reject binary_cross_entropy (verified on torch 2.13).
TOLERANT_DEVICES = frozenset({"cpu", "mps"})


class UnsafeBce(AnalysisRule, code="AMP104", name="unsafe-bce", summary="`binary_cross_entropy` raises under CUDA autocast", fix=Applicability.SAFE):
    """## What it does
    Flags `torch.nn.functional.binary_cross_entropy`, `torch.binary_cross_entropy` and
    `nn.BCELoss(...)` in a file that uses autocast on a device that is not known to be
    `"cpu"` or `"mps"`.

    Not flagged: files without such an autocast block, and calls inside an
    autocast-disabled region (`with torch.autocast(..., enabled=False):`), which is the
    workaround PyTorch recommends when the probabilities really are needed.

    Across functions and files: a call inside such an autocast block that reaches a
    binary cross entropy in another file of the project — a loss function in
    `losses.py`, a loss class whose `forward` calls `nn.BCELoss` — is flagged at the
    call, with the chain that leads there (`compute_loss(...)` reaches
    `F.binary_cross_entropy` (losses.py:12, via compute_loss → helper)). The chain is
    followed at most three calls deep, through functions, methods of `self`, and
    instances of project classes bound once; a call that cannot be resolved statically
    (a registry looked up by a runtime string, `getattr`, a third-party module) ends it,
    and nothing is reported.

    ## Why is this bad?
    Under CUDA (and XPU, MTIA) autocast, `binary_cross_entropy` raises
    `RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are
    unsafe to autocast`: the `log` of a float16 probability near 0 or 1 overflows. The
    numerically stable form takes logits: `binary_cross_entropy_with_logits` fuses the
    sigmoid into the loss and is safe to autocast.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    def step(model, x, y):
        with torch.autocast("cuda"):
            loss = F.binary_cross_entropy(torch.sigmoid(model(x)), y)
        return loss
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn.functional as F

    def step(model, x, y):
        with torch.autocast("cuda"):
            loss = F.binary_cross_entropy_with_logits(model(x), y)
        return loss
    ```

    ## Fix safety
    Safe, and offered only when the input is visibly a sigmoid (`torch.sigmoid(x)`,
    `x.sigmoid()`, `F.sigmoid(x)`): the fix drops the sigmoid and calls
    `binary_cross_entropy_with_logits(x, ...)`, keeping the target, `weight` and
    `reduction` arguments as written, positional or keyword. For ordinary inputs the
    two are equal (a test proves it with torch); for extreme logits the fused form is
    the more accurate one. Without a visible sigmoid, or for `nn.BCELoss`, no fix is
    offered: drop the sigmoid from the model and use the logits form or
    `nn.BCEWithLogitsLoss`.
    """

    # A BCE in this file, or a call that may reach one in another file (then the file
    # still opens the autocast block the call runs in).
    triggers = frozenset({"binary_cross_entropy", "BCELoss", "autocast"})
    # Pre-filter: only files with an autocast block.
    requires = (frozenset({"autocast"}),)

    VALID = (
        "import torch.nn.functional as F\nloss = F.binary_cross_entropy(p, y)\n",
        (
            "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cpu'):\n    out = m(x)\n"
            "loss = F.binary_cross_entropy(torch.sigmoid(out), y)\n"
        ),
        (
            "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n    out = m(x)\n"
            "    with torch.autocast('cuda', enabled=False):\n"
            "        loss = F.binary_cross_entropy(torch.sigmoid(out.float()), y)\n"
        ),
        (
            "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n"
            "    loss = F.binary_cross_entropy_with_logits(m(x), y)\n"
        ),
    )
    INVALID = (
        Invalid(
            (
                "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n"
                "    loss = F.binary_cross_entropy(torch.sigmoid(logits), y, weight=w, reduction='sum')\n"
            ),
            fixed=(
                "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n"
                "    loss = F.binary_cross_entropy_with_logits(logits, y, weight=w, reduction='sum')\n"
            ),
            line=4,
            column=12,
            message="`torch.nn.functional.binary_cross_entropy` raises under CUDA autocast",
        ),
        Invalid(
            (
                "import torch\nwith torch.autocast(device_type=device_type):\n"
                "    loss = torch.nn.functional.binary_cross_entropy(out.sigmoid(), y, w)\n"
            ),
            fixed=(
                "import torch\nwith torch.autocast(device_type=device_type):\n"
                "    loss = torch.nn.functional.binary_cross_entropy_with_logits(out, y, w)\n"
            ),
            line=3,
            column=12,
            message="`torch.nn.functional.binary_cross_entropy` raises under CUDA autocast",
        ),
        Invalid(
            (
                "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n"
                "    loss = F.binary_cross_entropy(input=F.sigmoid(z), target=y)\n"
            ),
            fixed=(
                "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n"
                "    loss = F.binary_cross_entropy_with_logits(input=z, target=y)\n"
            ),
            line=4,
            column=12,
            message="use `binary_cross_entropy_with_logits` on logits",
        ),
        Invalid(
            "import torch\nfrom torch import nn\ncriterion = nn.BCELoss()\nwith torch.cuda.amp.autocast():\n    pass\n",
            fixed=None,
            line=3,
            column=13,
            message="use `nn.BCEWithLogitsLoss` on logits",
        ),
        Invalid(
            (
                "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n"
                "    loss = F.binary_cross_entropy(probs, y)\n"
            ),
            fixed=None,
            line=4,
            column=12,
            message="use `binary_cross_entropy_with_logits` on logits",
        ),
    )

    def _applies(self, node: cst.CSTNode) -> bool:
        autocast = self.context.analysis.autocast
        unsafe_blocks = [
            block
            for block in autocast.blocks
            if not block.disabled
            and not (block.use.device_types is not None and block.use.device_types <= TOLERANT_DEVICES)
        ]
        return bool(unsafe_blocks) and not autocast.in_disabled_region(node)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified not in BCE_MODULES and qualified not in BCE_FUNCTIONS:
            self._check_callee(node)
            return
        if qualified in BCE_MODULES and self._applies(node):
            self.report(node, "`nn.BCELoss` raises under CUDA autocast; use `nn.BCEWithLogitsLoss` on logits")
        elif qualified in BCE_FUNCTIONS and self._applies(node):
            self.report(
                node,
                f"`{qualified}` raises under CUDA autocast; use `binary_cross_entropy_with_logits` on logits",
                fix=self._logits_fix(node),
            )

    def _check_callee(self, node: cst.Call) -> None:
        """A call inside an unsafe autocast block that reaches a BCE in another file of the
        project (``loss = compute_loss(out, y)`` with the BCE in ``losses.py``)."""
        analysis = self.context.analysis
        block = analysis.autocast.enclosing(node)
        if block is None or block.disabled:
            return
        devices = block.use.device_types
        if devices is not None and devices <= TOLERANT_DEVICES:
            return
        effects = analysis.project.effects(node)
        reached = [r for r in effects.bce if analysis.project.elsewhere(r)] if effects is not None else []
        if not reached:
            return
        callee = self.context.module.code_for_node(node.func)
        where = "autocast" if devices is None else f"autocast({', '.join(sorted(devices))})"
        self.report(
            node,
            f"`{callee}(...)` reaches `{reached[0].text}` ({analysis.project.describe(reached[0])}) inside "
            f"{where}: binary_cross_entropy raises under CUDA autocast; use `binary_cross_entropy_with_logits` "
            "there, or call it under `autocast(enabled=False)`",
        )

    def _logits_fix(self, node: cst.Call) -> Fix | None:
        if not isinstance(node.func, cst.Attribute) or not node.args or node.args[0].star:
            return None
        first = node.args[0]
        if first.keyword is not None and first.keyword.value != "input":
            return None
        logits = self._sigmoid_argument(first.value)
        if logits is None:
            return None
        new_args = (first.with_changes(value=logits), *node.args[1:])
        new_func = node.func.with_changes(attr=cst.Name(node.func.attr.value + "_with_logits"))
        return self.make_fix(
            "Use `binary_cross_entropy_with_logits` on the logits",
            [self.context.replace(node, node.with_changes(func=new_func, args=new_args))],
        )

    def _sigmoid_argument(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        if not isinstance(expr, cst.Call):
            return None
        if self.qualified_name(expr.func) in SIGMOIDS and len(expr.args) == 1 and not expr.args[0].star:
            return expr.args[0].value
        if (
            isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "sigmoid"
            and not expr.args
            and self.qualified_name(expr.func) is None
        ):
            return expr.func.value
        return None
