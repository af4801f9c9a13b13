from __future__ import annotations

import re

import libcst as cst

from amplint.analysis.scalers import ScalerCall
from amplint.analysis.syntax import dotted_name, last_name
from amplint.analysis.training import is_optimizer_name
from amplint.diagnostics import Applicability, Fix
from amplint.fixes.calls import comment_spans, outer_span
from amplint.rules.base import AnalysisRule, Invalid

AMP_FLAG = re.compile(r"scaler|amp|fp16|half|mixed|precision", re.IGNORECASE)
WRAPPERS = re.compile(r"prepare|wrap|initialize|deepspeed|fairseq|build_optimizer", re.IGNORECASE)


class ScalerStepProtocol(AnalysisRule, code="AMP303", name="scaler-step-protocol", summary="GradScaler protocol broken (step/update/unscale_)", fix=Applicability.SAFE):
    """## What it does
    Flags three breaks of the GradScaler protocol (scale → backward → [unscale_] → step →
    update):
    - `scaler.step(optimizer)` where the file never calls `update()` on that scaler
      (several steps sharing one update is the multi-optimizer pattern and is fine). The
      scaler is known by its binding: `scaler.update()` on a parameter `scaler` of one
      function does not count for a parameter `scaler` of another, nor `self.scaler`
      of one class for another class's;
    - `optimizer.step()` in the block of a scaled backward (or a block nested under it)
      in a function that never calls `scaler.step(...)`, or later in the very block of the
      backward when the function's `scaler.step(...)` calls step other optimizers (cs336
      steps AdamW through the scaler and Muon bare; round BL; RULES.md fires on any such
      step, amplint only on this certain case where another `scaler.step` is there: a
      decision stricter than the catalog), so the optimizer steps on
      scaled gradients (not for a GradScaler the file builds, in a file that opens no
      autocast block and never steps, updates or unscales it: there it is a constant
      loss multiplier chosen on purpose, nerfacc's `GradScaler(2**10)` "not unscaled
      because we are using Adam"; a decision of amplint's, from evaluation round Z);
    - `scaler.unscale_(optimizer)` twice for the same optimizer in one straight-line
      block with no `step`/`update` between.

    Not flagged: an `optimizer.step()` under a condition that tests the scaler or an AMP
    flag (`if scaler is None:`, `if not args.amp:`), optimizers wrapped by a library
    that scales for you (bound from `accelerator.prepare(...)` and the like), and — a
    decision of amplint's, stricter than the catalog — a `scaler.step` whose `update()`
    may be called on the same object anywhere in the file, even in another method or
    in the caller of a function that receives the scaler (a function of the file that
    passes its scaler to the stepping function and then updates it). A helper that is
    handed the scaler and steps optimizers without doing the scaled backward itself
    (`def step_all(optimizers, scaler)`) leaves `update()` to its callers, wherever they
    are: it is not flagged. Nor is a function that is handed the scaler as a parameter
    and that the file never calls (round X: mmgeneration's `train_step(...,
    loss_scaler=None)` steps D and G, and its runner in another file updates once after):
    the caller owns the scaler and its update. Only a caller in the file that passes
    the scaler and never updates it shows the update missing. Nor is a local alias of
    several scalers (`current_scaler = external_scaler or self._scaler`) whose alternatives
    the file updates (`self._scaler.update()`): an `update()` on the alias would update that
    scaler twice, which raises (HarmonyDream, round AW). Nor is `self.scaler` stepped in a
    class where the file updates `self.<owner>.scaler` (fastai's `MixedPrecision` callback:
    `self.scaler.step(self)` in `before_step`, `self.learn.scaler.update()` in
    `after_step`; a callback reads what it lacks from its learner, so they are one scaler;
    round BA). Nor is `self.scaler` in a class that is handed it (set only from parameters
    of its methods) and never scales a backward with it: an optimizer wrapper steps the
    scaler its owner built and updates (animeface's `MiniAcceleratedOptimizer`, round BE).
    Nor is an object named like a scaler that the file builds with
    some other call and never uses to scale a loss (fairscale's
    `layer_scaler = LayerwiseGradientScaler(...)`): RULES.md's scaler (section D) is one
    built as a GradScaler or used as `X.scale(loss).backward()`. Where the file does not
    show what a scaler-named parameter or member holds, its name counts, as before: this
    page's decision.

    ## Why is this bad?
    Without `update()`, the next `scaler.step()` raises `RuntimeError: unscale_() has
    already been called on this optimizer since the last update()`, and the scale never
    adapts. A bare `optimizer.step()` applies gradients still multiplied by the loss
    scale (65536 by default) and skips the inf/NaN check. A second `unscale_` raises.

    ## Example
    ```python
    def train_step(loss, optimizer, scaler):
        scaler.scale(loss).backward()
        scaler.step(optimizer)

    def train(model, loader, optimizer, scaler):
        for x in loader:
            train_step(model(x), optimizer, scaler)
    ```

    ## Use instead
    ```python
    def train_step(loss, optimizer, scaler):
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    def train(model, loader, optimizer, scaler):
        for x in loader:
            train_step(model(x), optimizer, scaler)
    ```

    ## Fix safety
    Safe where unambiguous: a missing `update()` is added right after the last
    `scaler.step(...)` of that block, except in a loop that steps several optimizers
    after a backward outside it (`for opt in optimizers: scaler.step(opt)`), where one
    update per optimizer is not what the protocol wants (no fix), and except where the
    function that steps does no scaled backward of that scaler itself: the protocol is then
    split across functions (a callback's `before_step`, a helper handed the scaler), the
    update may be where this file cannot see it, and a second `update()` raises (round
    BA: fastai's callbacks, insightface's Paddle scaler; nerfstudio before) — no fix;
    `optimizer.step()` becomes
    `scaler.step(optimizer)` (which unscales, skips steps with inf/NaN gradients and
    otherwise steps exactly as before). A double `unscale_` has no fix: which call is
    redundant needs the author.
    """

    triggers = frozenset({"*scaler", "GradScaler"})
    # Pre-filter: every protocol error involves step() or unscale_().
    requires = (frozenset({".step", ".unscale_"}),)

    VALID = (
        # The bare step is the other branch of a scaled one: only one of them runs.
        """
        def train_step(loss, opt, scaler, use_scaler):
            scaler.scale(loss).backward()
            if use_scaler:
                scaler.step(opt)
            else:
                other_optimizer.step()
            scaler.update()
        """,
        # fastai's MixedPrecision callback: the learner's scaler, stepped and updated in two
        # callback methods.
        """
        from torch.cuda.amp import GradScaler

        class MixedPrecision(Callback):
            def before_fit(self):
                self.learn.scaler = GradScaler()

            def before_backward(self):
                self.learn.loss_grad = self.scaler.scale(self.loss_grad)

            def before_step(self):
                self.scaler.step(self)

            def after_step(self):
                self.learn.scaler.update()
        """,
        # Named like a scaler, but built as something else and never used to scale a loss
        # (fairscale's LayerwiseGradientScaler, which updates its scale in its own step).
        """
        import torch
        from fairscale.optim.layerwise_gradient_scaler import LayerwiseGradientScaler

        def train(model, optimizer, x):
            layer_scaler = LayerwiseGradientScaler(model, [], 2**13)
            loss = model(x).sum()
            loss.backward()
            layer_scaler.step(optimizer)
        """,
        """
        def f(loss, opt, scaler):
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        """,
        """
        def f(loss, opt1, opt2, scaler):
            scaler.scale(loss).backward()
            scaler.step(opt1)
            scaler.step(opt2)
            scaler.update()
        """,
        """
        def f(loss, optimizer, scaler):
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
        """,
        """
        def f(loss, scaler, accelerator, opt):
            optimizer = accelerator.prepare(opt)
            scaler.scale(loss).backward()
            optimizer.step()
        """,
        """
        class T:
            def step(self):
                self.scaler.step(self.optimizer)

            def after(self):
                self.scaler.update()
        """,
        # No autocast and no step, update or unscale_: a constant loss multiplier (nerfacc).
        """
        import torch

        grad_scaler = torch.cuda.amp.GradScaler(2**10)
        for x, y in loader:
            loss = torch.nn.functional.smooth_l1_loss(model(x), y)
            optimizer.zero_grad()
            # do not unscale it because we are using Adam.
            grad_scaler.scale(loss).backward()
            optimizer.step()
        """,
        # A scaler handed in, with no caller in this file: the caller owns it and its update
        # (mmgeneration's train_step; its runner updates after the D and G steps).
        """
        class GAN:
            def train_step(self, data, optimizer, loss_scaler=None):
                loss_scaler.scale(self.d_loss(data)).backward()
                loss_scaler.step(optimizer["d"])
                loss_scaler.scale(self.g_loss(data)).backward()
                loss_scaler.step(optimizer["g"])
        """,
        # The stepped scaler is an alias of one the method updates (HarmonyDream's optimizer
        # wrapper: a caller that passes its own scaler updates it).
        """
        class Optimizer:
            def step(self, loss, external_scaler=None):
                current_scaler = external_scaler or self._scaler
                current_scaler.step(self._opt)
                if external_scaler is None:
                    self._scaler.update()
        """,
        # An optimizer wrapper handed the scaler steps it; the accelerator that built the
        # scaler updates it once after all optimizers (animeface, round BE).
        """
        import torch

        class AcceleratedOptimizer(torch.optim.Optimizer):
            def __init__(self, optimizer, scaler=None):
                self._optimizer = optimizer
                self._scaler = scaler

            def step(self, closure=None):
                if self._scaler is not None:
                    self._scaler.step(self._optimizer, closure)
                else:
                    self._optimizer.step(closure)
        """,
        # A helper handed the scaler steps the optimizers; its caller updates (nerfstudio).
        """
        def step_all(optimizers, scaler):
            for optimizer in optimizers:
                scaler.step(optimizer)
        """,
        # A caller in this file passes its scaler to the full step, then updates it.
        """
        def train_step(loss, opt, scaler):
            scaler.scale(loss).backward()
            scaler.step(opt)

        def train(losses, opt, scaler):
            for loss in losses:
                train_step(loss, opt, scaler)
                scaler.update()
        """,
        # The caller updates the scaler it passed in.
        """
        def optimizer_step(opt, scaler, loss):
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)

        scaler = make_scaler()
        for batch in loader:
            optimizer_step(opt, scaler, model(batch))
            scaler.update()
        """,
        """
        def f(loss, opt, scaler):
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            scaler.unscale_(opt)
        """,
    )
    INVALID = (
        # One optimizer through the scaler, the other stepped bare beside it (cs336, round
        # BL): on an overflow step the second one applies inf/NaN gradients.
        Invalid(
            """
              def train_step(loss, adamw_opt, muon_opt, scaler):
                  scaler.scale(loss).backward()
                  scaler.step(adamw_opt)
                  scaler.unscale_(muon_opt)
            -     muon_opt.step()
            +     scaler.step(muon_opt)
                  scaler.update()
            """,
            line=5, column=5, message="`muon_opt.step()` after `scaler.scale(loss).backward()` steps on scaled gradients",
        ),
        # The scaler the caller passes is never updated.
        Invalid(
            """
            def f(loss, optimizers, scaler):
                scaler.scale(loss).backward()
                for optimizer in optimizers:
                    scaler.step(optimizer)

            def main(loss, optimizers):
                f(loss, optimizers, make_scaler())
            """,
            fixed=None,  # an update per optimizer is not one per iteration
            line=4, column=9, message="`scaler.step()` without `scaler.update()`",
        ),
        # Another function's parameter of the same name is another scaler.
        Invalid(
            """
              def train_a(loss, opt, scaler):
                  scaler.scale(loss).backward()
                  scaler.step(opt)
            +     scaler.update()

              def train_b(loss, opt, scaler):
                  scaler.scale(loss).backward()
                  scaler.step(opt)
                  scaler.update()

              train_a(loss, opt, scaler)
            """,
            count=1,
            line=3, column=5, message="`scaler.step()` without `scaler.update()`",
        ),
        Invalid(
            """
              class A:
                  def step(self):
                      self.scaler.step(self.opt)

              class B:
                  def step(self):
                      self.scaler.step(self.opt)
                      self.scaler.update()
            """,
            fixed=None,  # the scaled backward is elsewhere, and so may the update be: no fix
            count=1,
            line=3, column=9, message="`self.scaler.step()` without `self.scaler.update()`",
        ),
        Invalid(
            """
              def train_step(model, batch, opt, scaler):
                  loss = model(batch)
                  scaler.scale(loss).backward()
                  scaler.step(opt)
            +     scaler.update()
                  log(loss)

              for batch in loader:
                  train_step(model, batch, opt, scaler)
            """,
            line=4, column=5, message="`scaler.step()` without `scaler.update()`",
        ),
        Invalid(
            """
              import torch
              scaler = torch.amp.GradScaler('cuda')
              opt = torch.optim.AdamW(params)
              for x in data:
                  with torch.autocast('cuda'):
                      loss = model(x)
                  scaler.scale(loss).backward()
            -     opt.step()
            +     scaler.step(opt)
            +     scaler.update()
                  opt.zero_grad()
            """,
            count=1,
            line=8, column=5, message="use `scaler.step(opt)`",
        ),
        Invalid(
            """
            def f(loss, optimizer, scaler):
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                clip()
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
            """,
            fixed=None,
            line=5, column=5, message="`scaler.unscale_(optimizer)` called twice before `step`",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Attribute):
            return
        method = node.func.attr.value
        scalers = self.context.analysis.scalers
        if method == "step" and not node.args and self._is_optimizer(node.func.value):
            self._check_bare_step(node)
            return
        if method not in ("step", "unscale_") or not scalers.is_scaler(node.func.value):
            return
        call = next((c for c in scalers.calls if c.call is node), None)
        if call is None:
            return
        if method == "step":
            self._check_update(call)
        else:
            self._check_double_unscale(call)

    # -- scaler.step without update -------------------------------------------------------------

    def _check_update(self, call: ScalerCall) -> None:
        scalers = self.context.analysis.scalers
        if any(c.method == "update" and call.same_object_possible(c) for c in scalers.calls):
            return
        if scalers.update_left_to_caller(call) or self._alias_updated(call) or self._updated_through_owner(call):
            return
        self.report(
            call.call,
            f"`{call.scaler}.step()` without `{call.scaler}.update()`: the next step raises and the scale never adapts",
            fix=self._add_update_fix(call),
        )

    def _updated_through_owner(self, call: ScalerCall) -> bool:
        """Is ``self.scaler`` stepped where the file updates ``self.<owner>.scaler``? fastai's
        `MixedPrecision` callback steps `self.scaler` in `before_step` and updates
        `self.learn.scaler` in `after_step`: a callback reads the attributes it lacks from its
        learner, so both are one scaler, and an `update()` added after the step would update
        it twice, which raises (round BA)."""
        if not call.scaler.startswith("self.") or call.scaler.count(".") != 1:
            return False
        attribute = call.scaler.split(".", 1)[1]
        return any(
            c.method == "update" and c.scaler.startswith("self.") and c.scaler.endswith(f".{attribute}") and c.scaler != call.scaler
            for c in self.context.analysis.scalers.calls
        )

    def _alias_updated(self, call: ScalerCall) -> bool:
        """Is the stepped scaler a local alias of scalers the file updates (HarmonyDream:
        `current_scaler = external_scaler or self._scaler`, stepped, then `if external_scaler
        is None: self._scaler.update()`, the caller updating its own)? An `update()` added
        to the alias would update that scaler twice, which raises."""
        receiver = call.call.func
        if not isinstance(receiver, cst.Attribute) or not isinstance(receiver.value, cst.Name):
            return False
        operands = _alternatives(self.context.analysis.bindings.single_value(receiver.value))
        spelled = {dotted_name(operand) for operand in operands} - {None}
        return len(operands) > 1 and any(
            c.method == "update" and c.scaler in spelled for c in self.context.analysis.scalers.calls
        )

    def _add_update_fix(self, call: ScalerCall) -> Fix | None:
        tree = self.context.analysis.tree
        if not self.context.analysis.scalers.scales_backward_in(tree.scope_of(call.call), call.scaler):
            # The scaled backward is elsewhere (another method, a callback, a caller): so
            # may the update be, where this file cannot see it, and a second update()
            # raises (nerfstudio's per-optimizer helper, fastai's callbacks). Unambiguous
            # only beside the backward.
            return None
        loop = next((a for a in tree.ancestors(call.call) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
        if isinstance(loop, (cst.For, cst.While)) and not any(
            scaler == call.scaler and tree.within(backward, loop) for backward, scaler in self.context.analysis.scalers.scaled_backwards
        ):
            # `for opt in optimizers: scaler.step(opt)`: an update per optimizer is not the
            # one update per iteration that the protocol wants; where it goes is the author's call.
            return None
        statement = self.context.analysis.tree.statement_of(call.call)
        located = self.context.analysis.tree.statement_list(statement) if statement is not None else None
        if located is None:
            return None
        siblings, _ = located
        steps = [
            s
            for s in siblings
            if isinstance(s, cst.SimpleStatementLine)
            and any(
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and isinstance(small.value.func, cst.Attribute)
                and small.value.func.attr.value == "step"
                and dotted_name(small.value.func.value) == call.scaler
                for small in s.body
            )
        ]
        if not steps:
            return None
        last = steps[-1]
        end = self.context.line_end(self.context.span(last)[1] - 1)
        indent = self.context.indentation(last)
        return self.make_fix(
            f"Call `{call.scaler}.update()` after the step",
            [self.context.insert(end, f"{indent}{call.scaler}.update(){self.context.source.newline}")],
        )

    # -- optimizer.step() after a scaled backward ---------------------------------------------------

    def _is_optimizer(self, receiver: cst.BaseExpression) -> bool:
        name = last_name(receiver) or ""
        values = self.context.analysis.bindings.assigned_values(receiver) if isinstance(receiver, cst.Name) else []
        if any(isinstance(v, cst.Call) and WRAPPERS.search(self.context.module.code_for_node(v.func)) for v in values):
            return False
        return is_optimizer_name(name) or any(self.context.analysis.training.is_optimizer_construction(v) for v in values)

    def _check_bare_step(self, node: cst.Call) -> None:
        scalers = self.context.analysis.scalers
        scope = self.context.analysis.tree.scope_of(node)
        statement = self.context.analysis.tree.statement_of(node)
        if statement is None:
            return
        optimizer = self.context.module.code_for_node(node.func.value)  # type: ignore[attr-defined]
        for backward, scaler in scalers.scaled_backwards:
            if self.context.analysis.tree.scope_of(backward) is not scope:
                continue
            backward_statement = self.context.analysis.tree.statement_of(backward)
            located = self.context.analysis.tree.statement_list(backward_statement) if backward_statement else None
            if located is None:
                continue
            siblings, index = located
            later = siblings[index + 1 :]
            stepped = [c for c in scalers.in_scope(scope) if c.method == "step" and c.scaler == scaler]
            if stepped and (
                any(c.optimizer is None or c.optimizer == optimizer for c in stepped)
                or not any(sibling is statement for sibling in later)
            ):
                # The scaler steps this optimizer, or steps another one where this step may be
                # the other branch's; only a bare step beside the backward, in the same
                # straight-line block, is certain (cs336's `scaler.step(adamw_opt)` then
                # `muon_opt.step()`; round BL).
                continue
            if (
                scaler in scalers.constructed_names
                and not self.context.analysis.autocast.blocks
                and not any(c.scaler == scaler and c.method in ("step", "update", "unscale_") for c in scalers.calls)
            ):
                continue  # a constant loss multiplier, on purpose: no autocast, no step or update (nerfacc)
            path = self._path_within(statement, later)
            if path is None or any(
                isinstance(step, (cst.If, cst.While)) and AMP_FLAG.search(self.context.module.code_for_node(step.test))
                for step in path
            ):
                continue
            self.report(
                node,
                f"`{optimizer}.step()` after `{scaler}.scale(loss).backward()` steps on scaled gradients; "
                f"use `{scaler}.step({optimizer})`",
                fix=self._scaled_step_fix(node, statement, scaler),
            )
            return

    def _scaled_step_fix(self, node: cst.Call, statement: cst.BaseStatement, scaler: str) -> Fix | None:
        """``opt.step()`` → ``scaler.step(opt)`` (the optimizer's text kept as written), and
        ``scaler.update()`` on the next line when the file has none."""
        receiver = cst.ensure_type(node.func, cst.Attribute).value
        receiver_start, receiver_end = outer_span(self.context, receiver)
        end = self.context.span(node)[1]
        if any(receiver_end <= comment < end for comment, _ in comment_spans(self.context, node)):
            return None
        optimizer = self.context.text[receiver_start:receiver_end]
        replacement = f"{scaler}.step({optimizer})"
        edits = [
            self.context.insert(receiver_start, f"{scaler}.step("),
            self.context.edit(receiver_end, end, ")"),
        ]
        if not any(c.method == "update" and c.scaler == scaler for c in self.context.analysis.scalers.calls):
            if not isinstance(statement, cst.SimpleStatementLine):
                # `if sync: opt.step()`: an update on the next line would run on every
                # iteration, and `update()` without a `step()` raises.
                return None
            line_end = self.context.line_end(self.context.span(statement)[1] - 1)
            indent = self.context.indentation(statement)
            edits.append(self.context.insert(line_end, f"{indent}{scaler}.update(){self.context.source.newline}"))
        return self.make_fix(f"Replace with `{replacement}`", edits)

    def _path_within(self, statement: cst.CSTNode, later: object) -> list[cst.CSTNode] | None:
        """The compound statements between one of ``later`` and ``statement`` (None if not under them)."""
        parent_of = self.context.analysis.tree.parents
        chain: list[cst.CSTNode] = []
        current: cst.CSTNode | None = statement
        while current is not None:
            if current in later:  # type: ignore[operator]
                return chain
            if isinstance(current, (cst.FunctionDef, cst.Module)):
                return None
            if isinstance(current, cst.BaseCompoundStatement):
                chain.append(current)
            current = parent_of.get(current)
        return None

    # -- double unscale_ -------------------------------------------------------------------------

    def _check_double_unscale(self, call: ScalerCall) -> None:
        statement = self.context.analysis.tree.statement_of(call.call)
        located = self.context.analysis.tree.statement_list(statement) if statement is not None else None
        if located is None:
            return
        siblings, index = located
        for previous in reversed(siblings[:index]):
            code = self.context.module.code_for_node(previous)
            if f"{call.scaler}.step(" in code or f"{call.scaler}.update(" in code:
                return
            if isinstance(previous, cst.BaseCompoundStatement):
                return
            for other in self.context.analysis.scalers.calls:
                if (
                    other.method == "unscale_"
                    and other.scaler == call.scaler
                    and other.optimizer == call.optimizer
                    and self.context.analysis.tree.statement_of(other.call) is previous
                ):
                    self.report(
                        call.call,
                        f"`{call.scaler}.unscale_({call.optimizer})` called twice before `step`: the second call raises",
                    )
                    return


def _alternatives(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """The values ``a or b`` / ``b if c else a`` may give (one item for anything else)."""
    if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or):
        return [*_alternatives(value.left), *_alternatives(value.right)]
    if isinstance(value, cst.IfExp):
        return [*_alternatives(value.body), *_alternatives(value.orelse)]
    return [value] if value is not None else []

