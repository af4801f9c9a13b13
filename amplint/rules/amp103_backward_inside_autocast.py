from __future__ import annotations

import libcst as cst

from amplint.analysis.autocast import AutocastBlock
from amplint.diagnostics import Applicability, Fix
from amplint.fixes.edits import reindent_statements
from amplint.rules.base import AnalysisRule, Invalid

AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


class BackwardInsideAutocast(AnalysisRule, code="AMP103", name="backward-inside-autocast", summary="Backward pass inside an autocast block", fix=Applicability.SAFE):
    """## What it does
    Flags a tensor backward — `<expr>.backward()` with no positional argument,
    including `scaler.scale(loss).backward()`, or `torch.autograd.backward(...)` —
    inside an autocast block.

    Not flagged: backward calls in the `backward` of a `torch.autograd.Function` (a
    reversible network or a checkpoint recomputing its forward under the forward's autocast
    state, inside the outer backward pass); `accelerator.backward(loss)`, `optimizer.backward(loss)` and other
    methods named `backward` that take the loss as an argument (their library runs the
    backward pass outside autocast itself); a backward in a function merely *defined*
    under autocast; a backward in a `dtype=torch.float32` autocast, which casts nothing
    (vae_from_scratch; amplint's decision, round BF: RULES.md names no dtype); and, a decision of amplint's that RULES.md leaves open, test modules
    (`test_*.py`, `*_test.py`, files under `tests/` or `test/`), where a backward under
    autocast is timed or compared on purpose (torch-ngp's benchmarks, llm-foundry's
    determinism test), as AMP101 and AMP105 are; and benchmark modules (`benchmark_*.py`,
    `*_bench.py`, files under `benchmarks/`) where no optimizer steps: xformers' kernel
    benchmarks time `torch.norm(y).backward()` under autocast on purpose (a benchmark that
    trains, with an optimizer step, is still reported), and check scripts (`check_*.py`,
    `*_check.py`, `*_checks.py`) where no optimizer steps: VMamba's `vmamba_checks.py`
    compares two models' gradients from `y.sum().backward()` under autocast (round AY). Also amplint's decision, from rounds R and
    S: a backward that runs only while the block's autocast is off — in the `else` of `if
    flag:` (or under `if not flag:`) where `flag` is the block's `enabled=` (STCN), or the
    condition under which alone the `with` item's name is bound to the autocast (DSVT:
    `ctx = nullcontext()`, `if fp16: ctx = autocast()`) — runs in float32 and is not
    reported.

    Across functions and files: a call inside an autocast block to a function or method
    of the project (this file or another) that runs a training step's backward
    (`self.optimize(loss)` doing `loss.backward()`, an engine's `backward_step`) is
    flagged at the call, with the chain that leads to the backward; unresolved calls end
    the chain (see AMP104). A training step's backward, a decision of amplint's, is a
    scaled backward, a backward of a loss-named value, or one in a function that steps an
    optimizer: a profiler reached through calls that runs `y.sum().backward()` to size
    batches (YOLO's autobatch) measures, it does not train. A call made with gradients off
    (under `torch.no_grad()` or `torch.inference_mode()`: megatransformer's evaluation step
    calls the training loss function there; round BP) is not reported (amplint's decision:
    RULES.md covers a backward written in the block, not one reached through calls).

    ## Why is this bad?
    PyTorch's AMP recipe runs only the forward pass and the loss under autocast.
    Backward ops run in the dtype autocast chose for the matching forward ops anyway;
    running the backward call itself under autocast is "not recommended" by the PyTorch
    documentation and can cast tensors created during backward (e.g. by hooks or
    double-backward) to low precision.

    ## Example
    ```python
    import torch

    def train_step(model, x, y, optimizer, scaler):
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()  # still under autocast
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    ```python
    import torch

    def train_step(model, x, y, optimizer, scaler):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()  # after the block
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    Safe. When the backward statements are the last statements of the block, the fix
    dedents them out of it; they run right after the block, exactly as before, only
    without autocast. A backward followed by other statements in the block is flagged
    without a fix, because moving it would reorder code; so is one whose statement also
    computes what it backpropagates (`(model(x).logits * 0).sum().backward()`, AQLM's FSDP
    warm-up), because moving it would take that computation out of autocast too (this
    page's decision, from round AJ: RULES.md offers the dedent for any trailing backward);
    arithmetic of an already computed tensor with a value (`scaler.scale(loss /
    accum).backward()`) is not such a computation, since autocast casts none of `+`, `-`,
    `*` or `tensor / value`, and is moved (miles-credit, round BL).
    """

    # A backward here or one reached in another file counts only inside an autocast
    # block, and every spelling of one names autocast in this file.
    triggers = frozenset({"*autocast"})
    # Pre-filter: every spelling of an autocast block names autocast somewhere in the file.
    requires = (frozenset({"*autocast"}),)

    VALID = (
        # megatransformer (round BP): an evaluation step calls the training loss function
        # with gradients off; its backward cannot run there.
        """
        import torch

        class Trainer:
            def compute_loss(self, model, batch):
                loss = model(batch)
                if torch.is_grad_enabled():
                    loss.backward()
                return loss

            def prediction_step(self, model, batch):
                with torch.no_grad():
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        return self.compute_loss(model, batch)
        """,
        # Inside a custom autograd backward: a reversible block recomputes its forward under
        # the autocast state saved in forward, and backpropagates through it (RevCol).
        """
        import torch

        class ReverseFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, run, x):
                ctx.run = run
                ctx.autocast_kwargs = {"enabled": torch.is_autocast_enabled("cuda")}
                ctx.save_for_backward(x)
                with torch.no_grad():
                    return run(x)

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                x = x.detach().requires_grad_()
                with torch.enable_grad(), torch.autocast("cuda", **ctx.autocast_kwargs):
                    out = ctx.run(x)
                    torch.autograd.backward(out, grad)
                return None, x.grad
        """,
        # The canonical order: forward and loss under autocast, backward after the block.
        """
        import torch
        with torch.autocast('cuda'):
            loss = model(x).sum()
        loss.backward()
        """,
        """
        import torch
        with torch.autocast('cuda'):
            loss = model(x).sum()
            accelerator.backward(loss)
        """,
        """
        import torch
        with torch.autocast('cuda'):
            def closure():
                loss.backward()
        """,
        # The backward runs only when the block's enabled flag is off (STCN's trainer; the
        # flag-on branch is reported).
        """
        import torch
        def step(model, x, amp, scaler):
            with torch.autocast("cuda", enabled=amp):
                loss = model(x).sum()
                if not amp:
                    loss.backward()
            return loss
        """,
        "loss.backward()\n",
        """
        import torch
        with torch.no_grad():
            loss.backward()
        """,
    )
    INVALID = (
        # miles-credit (round BL): the backward divides the loss by the accumulation count,
        # arithmetic autocast does not touch, so the statement moves out unchanged.
        Invalid(
            """
              import torch
              def step(model, x, scaler, accum):
                  with torch.autocast("cuda"):
                      loss = model(x).sum()
            -         scaler.scale(loss / accum).backward()
            +     scaler.scale(loss / accum).backward()
            """,
            line=5, column=9, message="Backward pass inside an autocast block",
        ),
        # DSVT's trainer: the autocast is the context only under `if fp16:`, so only the
        # scaled backward of that branch runs under it.
        Invalid(
            """
            import torch
            from contextlib import nullcontext
            def step(model, x, fp16, scaler):
                ctx = nullcontext()
                if fp16:
                    ctx = torch.cuda.amp.autocast()
                with ctx:
                    loss = model(x).sum()
                    if fp16:
                        scaler.scale(loss).backward()
                    else:
                        loss.backward()
            """,
            count=1, line=10, column=13, message="Backward pass inside an autocast block",
        ),
        # STCN's trainer: the scaled backward in the flag-on branch runs under autocast; the
        # plain one in the else runs only with autocast off (not reported: count=1).
        Invalid(
            """
            import torch
            def step(model, x, amp, scaler):
                with torch.autocast("cuda", enabled=amp):
                    loss = model(x).sum()
                    if amp:
                        scaler.scale(loss).backward()
                    else:
                        loss.backward()
            """,
            count=1, line=6, column=13, message="Backward pass inside an autocast block",
        ),
        Invalid(
            """
              import amplint.runtime
              with amplint.runtime.autocast(device):
                  loss = m(x)
            -     loss.backward()
            + loss.backward()
              step()
            """,
            line=4, column=5, message="Backward pass inside an autocast block",
        ),
        Invalid(
            """
              import torch
              with torch.autocast('cuda'):
                  loss = model(x).sum()
            -     loss.backward()
            + loss.backward()
              step()
            """,
            line=4, column=5, message="Backward pass inside an autocast block",
        ),
        Invalid(
            """
              import torch

              def f():
                  with torch.cuda.amp.autocast():
                      loss = m(x)
                      # scaled backward
            -         scaler.scale(loss).backward()  # keep me
            +     scaler.scale(loss).backward()  # keep me
                  scaler.step(opt)
            """,
            line=7, column=9, message="Backward pass inside an autocast block",
        ),
        Invalid(
            """
            import torch
            with torch.autocast('cuda'):
                loss = model(x).sum()
                loss.backward()
                log(loss)
            """,
            fixed=None,
            line=4, column=5, message="Backward pass inside an autocast block",
        ),
        # AQLM's FSDP warm-up: moving the statement would move the forward pass too.
        Invalid(
            """
            import torch
            with torch.autocast('cuda', dtype=torch.bfloat16):
                model.zero_grad()
                (model(**batch).logits * 0).sum().backward()
            """,
            fixed=None,
            line=4, column=5, message="Backward pass inside an autocast block",
        ),
        Invalid(
            """
              import torch
              with accelerator.autocast():
                  loss = model(x)
            -     torch.autograd.backward(loss)
            + torch.autograd.backward(loss)
            """,
            line=4, column=5, message="Backward pass inside an autocast block",
        ),
        Invalid(
            """
              import torch
              with torch.autocast('cuda'):
                  loss = m(x)
            -     a.backward(retain_graph=True)
            -     b.backward()
            + a.backward(retain_graph=True)
            + b.backward()
            """,
            count=2,
            line=4, column=5, message="Backward pass inside an autocast block",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        training = self.context.analysis.training
        if training.in_test_module:
            return
        if (training.in_benchmark_module or training.in_check_module) and not training.optimizer_steps:
            # A kernel benchmark times forward and backward together (xformers'); a check
            # script compares gradients (VMamba's `vmamba_checks.py`).
            return
        if not self.context.analysis.training.is_tensor_backward(node):
            self._check_callee(node)
            return
        block = self.context.analysis.autocast.enclosing(node)
        if block is None or block.disabled or self._in_custom_backward(node) or self._runs_only_disabled(node, block):
            return
        dtype = block.use.dtype_expr
        if dtype is not None and self.context.analysis.values.dtype_values(dtype) == frozenset({"float32"}):
            return  # a float32 autocast casts nothing (vae_from_scratch, round BF)
        self.report(node, f"{self.summary}{block.use.origin}", fix=self._dedent_fix(node, block.statement))

    def _runs_only_disabled(self, node: cst.CSTNode, block: AutocastBlock) -> bool:
        """Does ``node`` run only when the block's autocast is off: in the ``else`` of ``if
        flag:`` (or under ``if not flag:``) where ``flag`` is its ``enabled=`` (STCN: ``with
        autocast(enabled=amp): ... if amp: scaler.scale(loss).backward() else:
        loss.backward()``), or the condition under which the ``with`` item's name is bound
        to the autocast at all (DSVT: ``ctx = nullcontext()``, ``if fp16: ctx =
        autocast()``)?"""
        enabled = block.use.enabled_expr
        flag = self.context.module.code_for_node(enabled) if enabled is not None else self._binding_condition(block)
        if flag is None:
            return False
        tree = self.context.analysis.tree
        for ancestor in tree.ancestors(node):
            if ancestor is block.statement:
                return False
            if not isinstance(ancestor, cst.If):
                continue
            test, negated = ancestor.test, False
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, negated = test.expression, True
            if self.context.module.code_for_node(test) != flag:
                continue
            in_else = ancestor.orelse is not None and tree.within(node, ancestor.orelse)
            if in_else != negated:
                return True
        return False

    def _binding_condition(self, block: AutocastBlock) -> str | None:
        """The test of the ``if`` whose body alone binds the ``with`` item's name to an
        autocast, every other binding being something else (``nullcontext()``)."""
        item = block.item.item
        if not isinstance(item, cst.Name):
            return None
        analysis = self.context.analysis
        tests = set()
        for binding in analysis.bindings.assignments(item):
            statement = analysis.tree.statement_of(binding.node)
            if not isinstance(statement, cst.SimpleStatementLine) or not statement.body:
                return None
            value = statement.body[0]
            if not isinstance(value, cst.Assign) or not isinstance(value.value, cst.Call):
                return None
            if "autocast" not in (self.qualified_name(value.value.func) or self.context.module.code_for_node(value.value.func)):
                continue
            block_of = analysis.tree.parent(statement)
            parent = analysis.tree.parent(block_of) if block_of is not None else None
            if not isinstance(parent, cst.If) or not analysis.tree.within(statement, parent.body):
                return None
            tests.add(self.context.module.code_for_node(parent.test))
        return tests.pop() if len(tests) == 1 else None

    def _in_custom_backward(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in the ``backward`` of a ``torch.autograd.Function``? That code runs
        inside the outer backward pass: a reversible network or a checkpoint recomputes its
        forward under the forward's autocast state there, and backpropagates through the
        recomputation step by step (RevCol)."""
        found = self.context.analysis.classes.method_of(node)
        if found is None or found[1].name.value != "backward":
            return False
        return any(
            self.qualified_name(base.value) in AUTOGRAD_FUNCTIONS for base in found[0].bases
        )

    def _check_callee(self, node: cst.Call) -> None:
        """A call inside an autocast block of a function (of this or another project file)
        that runs a tensor backward: ``self.optimize(loss)`` doing ``loss.backward()``."""
        analysis = self.context.analysis
        block = analysis.autocast.enclosing(node)
        if block is None or block.disabled:
            return
        if analysis.training.under_no_grad(node):
            # Called with gradients off (megatransformer's `prediction_step` runs
            # `self.compute_loss(...)` under `torch.no_grad()`; round BP): no backward the
            # callee reaches trains there.
            return
        effects = analysis.project.effects(node)
        if effects is None or not effects.backward:
            return
        reached = effects.backward[0]
        callee = self.context.module.code_for_node(node.func)
        self.report(
            node,
            f"`{callee}(...)` runs `{reached.text}` ({analysis.project.describe(reached)}) inside this autocast "
            f"block{block.use.origin}; call it after the block",
        )

    def _dedent_fix(self, node: cst.Call, statement: cst.With) -> Fix | None:
        line = self.context.analysis.tree.statement_of(node)
        body = statement.body
        if not isinstance(line, cst.SimpleStatementLine) or not isinstance(body, cst.IndentedBlock):
            return None
        trailing: list[cst.BaseStatement] = []
        for candidate in reversed(body.body):
            if not self._is_backward_statement(candidate):
                break
            trailing.insert(0, candidate)
        if line not in trailing or len(trailing) == len(body.body):
            return None
        # Comment lines above the backward call stay in the block (as the rule's examples
        # pin); the statements' own comments move with them.
        located = reindent_statements(self.context, trailing, self.context.indentation(statement))
        if located is None:
            return None
        start, end, moved = located
        return self.make_fix("Move the backward call out of the autocast block", [self.context.edit(start, end, moved)])

    def _is_backward_statement(self, statement: cst.BaseStatement) -> bool:
        if not (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, cst.Call)
        ):
            return False
        call = statement.body[0].value
        if not self.context.analysis.training.is_tensor_backward(call):
            return False
        # Moved out of the block, the statement runs all of its code without autocast: only
        # a backward of tensors already computed keeps its meaning (AQLM's
        # `(model(**batch).logits * 0).sum().backward()` would move a forward pass too).
        operands = [arg.value for arg in call.args]
        if isinstance(call.func, cst.Attribute):
            operands.append(call.func.value)
        return all(self._computed_already(operand) for operand in operands)

    def _computed_already(self, expr: cst.BaseExpression) -> bool:
        """Does ``expr`` only refer to values (``loss``, ``out.loss``, ``losses[0]``,
        ``scaler.scale(loss)``, a list of them), computing nothing autocast would change?"""
        if isinstance(expr, (cst.Name, cst.SimpleString, cst.Integer)):
            return True
        if isinstance(expr, cst.Attribute):
            return self._computed_already(expr.value)
        if isinstance(expr, cst.Subscript):
            return self._computed_already(expr.value) and all(
                isinstance(element.slice, cst.Index) and self._computed_already(element.slice.value) for element in expr.slice
            )
        if isinstance(expr, (cst.List, cst.Tuple)):
            return all(
                not isinstance(element, cst.StarredElement) and self._computed_already(element.value) for element in expr.elements
            )
        # `loss / grad_accum_every`, `loss * weight`: a tensor's elementwise arithmetic with a
        # value is no op autocast casts (its lists hold `pow` and `__rtruediv__`, not these),
        # so it means the same outside the block (miles-credit's trainers, round BL).
        if (
            isinstance(expr, cst.BinaryOperation)
            and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide))
            and isinstance(expr.left, (cst.Name, cst.Attribute, cst.Subscript))
            and isinstance(expr.right, (cst.Name, cst.Attribute, cst.Integer, cst.Float))
        ):
            return self._computed_already(expr.left) and (isinstance(expr.right, cst.Float) or self._computed_already(expr.right))
        # Loss scaling multiplies by the scale in float32 whether autocast is on or not.
        return (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "scale"
            and len(expr.args) == 1
            and expr.args[0].keyword is None
            and self._computed_already(expr.args[0].value)
        )
