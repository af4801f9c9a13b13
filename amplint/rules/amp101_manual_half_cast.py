from __future__ import annotations

import re

import libcst as cst

from amplint.analysis.syntax import dotted_name, receiver_root
from amplint.analysis.torch_api import HALF_TENSOR_TYPES, LOW_PRECISION
from amplint.diagnostics import Applicability, Fix
from amplint.fixes.edits import remove_statement
from amplint.rules.base import AnalysisRule, Invalid

UPCASTS = frozenset({"float", "double"})
SAVED = re.compile(r"state_dict|checkpoint|ckpt|deepcopy|ema|export", re.IGNORECASE)
# A condition or function that talks about precision makes the cast a deliberate mode.
PRECISION_WORDS = re.compile(r"fp16|bf16|f16|half|float16|bfloat16|precision|dtype|amp\b|mixed", re.IGNORECASE)
# Inference pipelines (diffusers) and evaluation entry points take casts on purpose.
INFERENCE_RECEIVER = re.compile(r"pipe", re.IGNORECASE)
EVALUATION_CALLEE = re.compile(r"(?:^|[._])(eval|valid|val|test|infer|predict)", re.IGNORECASE)
# Pure-fp16 training with fp32 master weights kept by the optimizer wrapper.
MASTER_WEIGHT_SCHEMES = re.compile(r"\b(deepspeed|FP16_?Optimizer|MemoryEfficientFP16Optimizer|master_params)\b")
# A quantized base model (bitsandbytes 8-/4-bit, QLoRA) computes in the dtype it was loaded
# with; its inputs must be cast to that dtype, and only the adapters train.
QUANTIZED_BASE = re.compile(r"\b(load_in_8bit|load_in_4bit|BitsAndBytesConfig|prepare_model_for_kbit_training)\b")
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})


class ManualHalfCast(AnalysisRule, code="AMP101", name="manual-half-cast", summary="Manual cast to a low-precision dtype", fix=Applicability.UNSAFE):
    """## What it does
    Flags manual casts to a low-precision dtype — `.half()`, `.bfloat16()`,
    `.to(torch.float16 | torch.half | torch.bfloat16)` (positional, after a device, or
    `dtype=`), `.type(torch.HalfTensor | torch.cuda.HalfTensor | torch.float16)` — in a
    file that trains (calls a tensor `.backward()` or steps an optimizer).

    Not flagged: dtypes that are not a low-precision literal (or a name bound once in
    scope to one); frozen modules (`X.requires_grad_(False)` or
    `p.requires_grad = False` over `X.parameters()` in the same file) and tensors
    passed directly to them; round trips (`x.half().float()`); casts under
    `torch.no_grad()` / `torch.inference_mode()` or in functions decorated with them or
    named for evaluation (`eval*`, `valid*`, `test*`, `infer*`, `predict*`, `sample*`,
    `export*`, `save*`, also after an underscore: `log_validation`); casts of state dicts, checkpoints, EMA or deep copies, and
    values passed to `torch.save`; autocast-disabled regions; and, a decision of
    amplint's, casts inside the methods of an `nn.Module` subclass, which are the
    model's own deliberate dtype handling rather than a cast of the model or its
    inputs. Also amplint's decisions, from real training code: casts under a condition
    (or in a function) that mentions precision (`if args.fp16:`, `if dtype == torch.half`,
    `def cast_inputs_half`) are a deliberate precision mode; casts of inference
    pipelines (`pipeline.unet.half()`), of arguments passed to evaluation entry points
    (`validate.run(model=m.half())`) and in test classes are not training casts; files
    using a master-weight scheme (DeepSpeed, fairseq's `FP16Optimizer`, a `master_params`
    list as in guided-diffusion) are skipped, and so are files that load a quantized base
    model (`BitsAndBytesConfig`, `load_in_8bit`/`load_in_4bit`,
    `prepare_model_for_kbit_training`: QLoRA-style training, where inputs must be cast to
    the base model's compute dtype and only adapters train), and functions named for a
    precision (`convert_module_to_f16`).

    ## Why is this bad?
    Casting the model or its inputs to float16/bfloat16 by hand makes every op run in
    low precision — including the reductions, softmaxes and losses that autocast keeps
    in float32 — and, for the model, stores the weights and their optimizer updates in
    low precision, where small updates round away. Autocast chooses the precision per
    op and keeps float32 master weights.

    ## Example
    ```python
    import torch

    model = torch.nn.Linear(8, 1).cuda().half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.half()), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    model = torch.nn.Linear(8, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix drops the cast (`model.half()` alone on a line is removed,
    `x.to(device, torch.half)` becomes `x.to(device)`), which changes the dtype the
    code runs in, and it does not add the autocast block that should replace the cast.
    Review the result and wrap the forward pass and loss in `torch.autocast`.
    """

    # `.half()`, `torch.half`, `.bfloat16()`, `torch.bfloat16`, `torch.float16`, tensor types.
    triggers = frozenset({".half", ".bfloat16", "float16", "HalfTensor", "BFloat16Tensor"})
    # Pre-filter: only files that train: a backward, an optimizer's `.step()`, or a
    # scaler's `.step(optimizer)` (a scheduler's `.step(x, t)` is neither).
    requires = (frozenset({"backward", ".step()", "*scaler", "GradScaler"}),)

    VALID = (
        "model = model.half()\n",  # no training in this file
        "import torch\nx = x.half().float()\nloss.backward()\n",
        "import torch\nwith torch.no_grad():\n    y = model(x.half())\nloss.backward()\n",
        "import torch\n\ndef evaluate(m, x):\n    return m(x.half())\n\nloss.backward()\n",
        "import torch\nvae.requires_grad_(False)\nvae.to(device, dtype=torch.float16)\nlatents = vae.encode(x.half())\nloss.backward()\n",
        "import torch\ntorch.save(model.half().state_dict(), 'm.pt')\nsd = model.state_dict()\nsd = {k: v.half() for k, v in sd.items()}\nloss.backward()\n",
        "import torch\nx = x.to(weight_dtype)\nloss.backward()\n",
        "import torch\nx = x.to(device)\nloss.backward()\n",
        (
            "import torch\n\nclass Block(torch.nn.Module):\n    def forward(self, x):\n"
            "        return self.proj(x.to(torch.bfloat16))\n\nloss.backward()\n"
        ),
        "import torch\nwith torch.autocast('cuda', enabled=False):\n    y = m(x.half())\nloss.backward()\n",
        "import torch\nif args.fp16:\n    model.half()\nloss.backward()\n",
        "import torch\npipeline.unet = pipeline.unet.to(torch.float16)\nloss.backward()\n",
        "import torch\nresults = validate.run(model=attempt_load(w).half())\nloss.backward()\n",
        "import torch\n\ndef log_validation(pipe, x):\n    return model(x.half())\n\nloss.backward()\n",
        "import deepspeed\nmodel = model.half()\nloss.backward()\n",
        # guided-diffusion's fp16_util: a conversion helper beside fp32 master params.
        "def convert_module_to_f16(l):\n    l.weight.data = l.weight.data.half()\n\nloss.backward()\n",
        "master_params = [p.detach().float() for p in params]\nmodel.half()\nloss.backward()\n",
        # peft's examples/int8_training: an 8-bit base model takes float16 inputs.
        (
            "import torch\nfrom transformers import BitsAndBytesConfig\n"
            "model = load(quantization_config=BitsAndBytesConfig(load_in_8bit=True))\n"
            "pixel_values = batch.pop('pixel_values').to(device, torch.float16)\nloss.backward()\n"
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nmodel = Net().cuda().half()\nloss = model(x.half()).sum()\nloss.backward()\n",
            fixed="import torch\nmodel = Net().cuda()\nloss = model(x).sum()\nloss.backward()\n",
            unsafe=True,
            count=2,
        ),
        Invalid(
            "import torch\nmodel.half()\nx = x.to(device, torch.float16)\ny = y.to(dtype=torch.bfloat16, non_blocking=True)\nloss.backward()\n",
            fixed="import torch\nx = x.to(device)\ny = y.to(non_blocking=True)\nloss.backward()\n",
            unsafe=True,
            count=3,
        ),
        Invalid(
            "import torch\ndt = torch.float16\nx = x.to(dt)\nx = x.type(torch.cuda.HalfTensor)\noptimizer.step()\n",
            fixed="import torch\ndt = torch.float16\nx = x\nx = x\noptimizer.step()\n",
            unsafe=True,
            count=2,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Attribute):
            return
        method = node.func.attr.value
        if method in ("half", "bfloat16"):
            if node.args:
                return
        elif method == "to":
            if self._low_precision_argument(node) is None:
                return
        elif method == "type":
            if len(node.args) != 1 or not self._is_half_type(node.args[0].value):
                return
        else:
            return
        if not self._applies(node):
            return
        self.report(node, f"Manual `.{method}(...)` cast to low precision; use autocast instead", fix=self._fix(node))

    # -- what counts --------------------------------------------------------------------------

    def _low_precision_argument(self, node: cst.Call) -> cst.Arg | None:
        for arg in node.args:
            if arg.star or (arg.keyword is not None and arg.keyword.value != "dtype"):
                continue
            values = self.context.analysis.values.dtype_values(arg.value)
            if values and values <= LOW_PRECISION:
                return arg
        return None

    def _is_half_type(self, expr: cst.BaseExpression) -> bool:
        qualified = self.qualified_name(expr)
        if qualified in HALF_TENSOR_TYPES:
            return True
        values = self.context.analysis.values.dtype_values(expr)
        return bool(values) and values <= LOW_PRECISION  # type: ignore[operator]

    def _applies(self, node: cst.Call) -> bool:
        analysis = self.context.analysis
        if not analysis.training.trains or analysis.training.in_inference(node):
            return False
        if self._precision_managed_elsewhere or self._deliberate(node):
            return False
        if analysis.autocast.in_disabled_region(node):
            return False
        receiver = node.func.value  # type: ignore[attr-defined]
        if self._mentions_saved(receiver):
            return False
        if self._is_round_trip(node) or self._in_saved_value(node) or self._in_module_class(node):
            return False
        spelled = dotted_name(receiver)
        if spelled is not None and spelled in self.context.analysis.training.frozen_modules:
            return False
        return not self._passed_to_frozen(node)

    def _is_round_trip(self, node: cst.Call) -> bool:
        parent_of = self.context.analysis.tree.parents
        attribute = parent_of.get(node)
        call = parent_of.get(attribute) if isinstance(attribute, cst.Attribute) else None
        if not isinstance(call, cst.Call) or not isinstance(attribute, cst.Attribute):
            return False
        if attribute.attr.value in UPCASTS:
            return True
        if attribute.attr.value == "to":
            return any((self.context.analysis.values.dtype_values(arg.value) or set()) & {"float32", "float64"} for arg in call.args)
        return False

    def _in_saved_value(self, node: cst.CSTNode) -> bool:
        parent_of = self.context.analysis.tree.parents
        current = parent_of.get(node)
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            if isinstance(current, cst.Call) and self.qualified_name(current.func) == "torch.save":
                return True
            if isinstance(current, (cst.DictComp, cst.ListComp, cst.GeneratorExp)) and self._mentions_saved(
                current.for_in.iter
            ):
                return True
            current = parent_of.get(current)
        return False

    @property
    def _precision_managed_elsewhere(self) -> bool:
        text = self.context.text
        return MASTER_WEIGHT_SCHEMES.search(text) is not None or QUANTIZED_BASE.search(text) is not None

    def _deliberate(self, node: cst.Call) -> bool:
        """A precision mode chosen on purpose, an inference pipeline, an evaluation, a test."""
        receiver = node.func.value  # type: ignore[attr-defined]
        root = receiver_root(receiver)
        if isinstance(root, cst.Name) and INFERENCE_RECEIVER.search(root.value):
            return True
        parent_of = self.context.analysis.tree.parents
        child: cst.CSTNode = node
        current = parent_of.get(node)
        while current is not None:
            if (
                isinstance(current, (cst.If, cst.While, cst.IfExp))
                and child is not current.test
                and PRECISION_WORDS.search(self.context.module.code_for_node(current.test))
            ):
                return True
            if isinstance(current, cst.Arg):
                call = parent_of.get(current)
                callee = dotted_name(call.func) if isinstance(call, cst.Call) else None
                if callee and EVALUATION_CALLEE.search(callee):
                    return True
            if isinstance(current, cst.FunctionDef) and PRECISION_WORDS.search(current.name.value):
                return True
            if isinstance(current, cst.ClassDef) and (
                current.name.value.startswith("Test")
                or any(self.qualified_name(base.value) == "unittest.TestCase" for base in current.bases)
            ):
                return True
            child, current = current, parent_of.get(current)
        return False

    def _mentions_saved(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` (or what its root name was bound to) a state dict, checkpoint or copy?"""
        if SAVED.search(self.context.module.code_for_node(expr)):
            return True
        root = receiver_root(expr)
        if isinstance(root, cst.Name):
            return any(
                SAVED.search(self.context.module.code_for_node(value))
                for value in self.context.analysis.bindings.assigned_values(root)
            )
        return False

    def _in_module_class(self, node: cst.CSTNode) -> bool:
        parent_of = self.context.analysis.tree.parents
        current = parent_of.get(node)
        while current is not None:
            if isinstance(current, cst.ClassDef):
                return any(self.qualified_name(base.value) in MODULE_BASES for base in current.bases)
            current = parent_of.get(current)
        return False

    def _passed_to_frozen(self, node: cst.Call) -> bool:
        parent_of = self.context.analysis.tree.parents
        arg = parent_of.get(node)
        call = parent_of.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            return False
        callee = call.func.value if isinstance(call.func, cst.Attribute) else call.func
        spelled = dotted_name(callee)
        return spelled is not None and spelled in self.context.analysis.training.frozen_modules

    # -- fix ----------------------------------------------------------------------------------

    def _fix(self, node: cst.Call) -> Fix | None:
        receiver = node.func.value  # type: ignore[attr-defined]
        method = node.func.attr.value  # type: ignore[attr-defined]
        replacement: cst.BaseExpression = receiver
        if method == "to":
            dtype_arg = self._low_precision_argument(node)
            kept = [arg for arg in node.args if arg is not dtype_arg]
            if kept:
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                replacement = node.with_changes(args=kept)
        tree = self.context.analysis.tree
        parent = tree.parent(node)
        if isinstance(parent, cst.Expr) and replacement is receiver:
            # `model.half()` alone on a line: an in-place cast of a module; remove the line.
            line = tree.parent(parent)
            located = tree.statement_list(line) if isinstance(line, cst.SimpleStatementLine) else None
            if located is None or len(line.body) != 1:  # type: ignore[union-attr]
                return None
            edit = remove_statement(self.context, line, located[0])  # type: ignore[arg-type]
            return self.make_fix("Remove the cast", [edit])
        return self.make_fix("Remove the cast", [self.context.replace(node, replacement)])
