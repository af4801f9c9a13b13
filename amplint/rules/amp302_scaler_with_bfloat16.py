from __future__ import annotations

import libcst as cst

from amplint.analysis.autocast import AutocastBlock
from amplint.analysis.syntax import bool_value, call_arguments, mentions
from amplint.analysis.torch_api import positional_order
from amplint.diagnostics import Applicability, Fix
from amplint.rules.base import AnalysisRule, Invalid

FLOAT16_WORDS = frozenset({"float16", "half", "fp16"})


class ScalerWithBfloat16(AnalysisRule, code="AMP302", name="scaler-with-bfloat16", summary="GradScaler enabled with bfloat16 autocast", fix=Applicability.SAFE):
    """## What it does
    Flags a `GradScaler` construction (any spelling) whose `enabled=` is absent, `True`,
    or not conditioned on float16, in a function (or module-level script) whose autocast
    blocks have a known dtype that may be bfloat16 — a `torch.bfloat16` literal, a name
    bound to one or to a choice including it, or CPU autocast without a dtype (CPU's
    default is bfloat16). An `enabled=` expression that mentions `float16`, `"float16"`,
    `half` or `fp16` counts as conditioned.

    Not flagged: float16-only blocks, blocks whose dtype is not statically known,
    `enabled=False`, and scalers constructed in another function than the autocast
    (amplint cannot see how they meet).

    ## Why is this bad?
    bfloat16 has float32's exponent range: gradients do not underflow, and loss scaling
    buys nothing but extra work and skipped steps when the scale overflows. On ROCm it
    fails outright: `"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented
    for 'BFloat16'`.

    ## Example
    ```python
    import torch

    ptdtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=ptdtype):
        loss = model(x)
    ```

    ## Use instead
    ```python
    import torch

    ptdtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=ptdtype == torch.float16)
    with torch.autocast("cuda", dtype=ptdtype):
        loss = model(x)
    ```

    ## Fix safety
    Safe: `enabled=` becomes `(<old enabled> and <dtype> == torch.float16)`, or `False`
    when the dtype is bfloat16 only; a disabled scaler's `scale`, `step`, `unscale_` and
    `update` are pass-throughs, so the training loop runs unchanged, and scaling stays on
    wherever the dtype really is float16. No fix when the dtype expression is not a name
    visible at the construction.
    """

    triggers = frozenset({"GradScaler"})
    # Pre-filter: an autocast whose known dtype may be bfloat16 (named, or the default of these devices).
    requires = (frozenset({"autocast"}), frozenset({"bfloat16", "cpu", "hpu", "xla"}))

    VALID = (
        (
            "import torch\nscaler = torch.amp.GradScaler('cuda', enabled=(dtype == 'float16'))\n"
            "with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
        ),
        "import torch\nscaler = torch.amp.GradScaler('cuda')\nwith torch.autocast('cuda'):\n    pass\n",
        "import torch\nscaler = torch.amp.GradScaler('cuda')\nwith torch.autocast('cuda', dtype=amp_dtype):\n    pass\n",
        "import torch\nscaler = torch.amp.GradScaler('cuda', enabled=False)\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n",
        (
            "import torch\n\ndef make():\n    return torch.amp.GradScaler('cuda')\n\n"
            "def step():\n    with torch.autocast('cuda', dtype=torch.bfloat16):\n        pass\n"
        ),
    )
    INVALID = (
        Invalid(
            (
                "import torch\nscaler = torch.amp.GradScaler('cuda')\n"
                "with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
            ),
            fixed=(
                "import torch\nscaler = torch.amp.GradScaler('cuda', enabled=False)\n"
                "with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
            ),
        ),
        Invalid(
            (
                "import torch\n\ndef train(args):\n"
                "    ptdtype = torch.bfloat16 if args.bf16 else torch.float16\n"
                "    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)\n"
                "    with torch.autocast('cuda', dtype=ptdtype):\n        pass\n"
            ),
            fixed=(
                "import torch\n\ndef train(args):\n"
                "    ptdtype = torch.bfloat16 if args.bf16 else torch.float16\n"
                "    scaler = torch.cuda.amp.GradScaler(enabled=(args.amp and ptdtype == torch.float16))\n"
                "    with torch.autocast('cuda', dtype=ptdtype):\n        pass\n"
            ),
        ),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler()\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n",
            fixed=(
                "import torch\nscaler = torch.amp.GradScaler(enabled=False)\n"
                "with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
            ),
        ),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('cpu', enabled=True)\nwith torch.autocast('cpu'):\n    pass\n",
            fixed="import torch\nscaler = torch.amp.GradScaler('cpu', enabled=False)\nwith torch.autocast('cpu'):\n    pass\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        scalers = self.context.analysis.scalers
        if not scalers.is_construction(node):
            return
        order = positional_order(self.qualified_name(node.func) or "")
        arguments = call_arguments(node, order) if order is not None else None
        if arguments is None:
            return
        enabled = arguments.get("enabled")
        if enabled is not None and (bool_value(enabled) is False or mentions(enabled, FLOAT16_WORDS)):
            return
        scope = self.context.analysis.tree.scope_of(node)
        blocks = [b for b in self.context.analysis.autocast.blocks_in(scope) if not b.disabled and not b.use.method]
        bf16_blocks = [b for b in blocks if b.use.dtypes is not None and "bfloat16" in b.use.dtypes]
        if not bf16_blocks or any(b.use.dtypes is None for b in blocks):
            return
        self.report(
            node,
            "GradScaler is enabled although autocast may run in bfloat16, which needs no loss scaling",
            fix=self._fix(node, enabled, bf16_blocks[0]),
        )

    def _fix(self, node: cst.Call, enabled: cst.BaseExpression | None, block: AutocastBlock) -> Fix | None:
        use = block.use
        if use.dtypes == frozenset({"bfloat16"}):
            condition = "False"
        else:
            if not isinstance(use.dtype_expr, cst.Name) or not self.context.analysis.bindings.assigned_before(use.dtype_expr, node):
                return None
            torch = self.context.analysis.bindings.module_binding("torch", at=node)
            if torch is None:
                return None
            test = f"{use.dtype_expr.value} == {torch}.float16"
            if enabled is None or bool_value(enabled) is True:
                condition = test
            else:
                condition = f"({self.context.module.code_for_node(enabled)} and {test})"
        if enabled is not None:
            return self.make_fix(f"Set `enabled={condition}`", [self.context.replace(enabled, condition)])
        if not node.args:
            start, end = self.context.span(node)
            call_text = self.context.text[start:end]
            if not call_text.endswith("()"):
                return None
            return self.make_fix(
                f"Set `enabled={condition}`", [self.context.edit(end - 1, end - 1, f"enabled={condition}")]
            )
        last = node.args[-1]
        end = self.context.span(last)[1]
        return self.make_fix(f"Set `enabled={condition}`", [self.context.insert(end, f", enabled={condition}")])

    def _visible_before(self, name: cst.Name, at: cst.CSTNode) -> bool:
        from libcst.metadata import Assignment, ScopeProvider

        scope = self.context.wrapper.resolve(ScopeProvider).get(at)
        if scope is None:
            return False
        assignments = [a for a in scope[name.value] if isinstance(a, Assignment)]
        return bool(assignments) and all(
            self.context.span(a.node)[0] < self.context.span(at)[0] for a in assignments
        )
