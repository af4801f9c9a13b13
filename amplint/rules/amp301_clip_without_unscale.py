from __future__ import annotations

import re

import libcst as cst

from amplint.analysis.scalers import ScalerCall
from amplint.analysis.syntax import has_call, operands
from amplint.diagnostics import Applicability
from amplint.fixes.calls import has_comment, source_of
from amplint.rules.base import AnalysisRule, Invalid

CLIP_FUNCTIONS = frozenset(
    f"torch.nn.utils{module}.{name}"
    for module in ("", ".clip_grad")
    for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")
)


# A test that separates the scaled branch from an unscaled one: off it nothing is scaled.
_AMP_TEST = re.compile(r"scaler|amp|fp16|bf16|float16|half|mixed|precision", re.IGNORECASE)


# A setting named for unscaling (`CFG.unscale`, `args.unscale_grads`).
_UNSCALE_SETTING = re.compile(r"(?<![A-Za-z])unscale", re.IGNORECASE)


class ClipWithoutUnscale(AnalysisRule, code="AMP301", name="clip-without-unscale", summary="Gradient clipping on still-scaled gradients", fix=Applicability.SAFE):
    """## What it does
    Flags `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_` called after a scaled
    backward (`scaler.scale(loss).backward()`) and before `scaler.step(optimizer)` in the
    same function, with no `scaler.unscale_(optimizer)` between the backward and the
    clip — gradient-accumulation branches (`if (step + 1) % accum == 0:`) included. An
    `unscale_` counts only where it runs whenever the clip does: in a block that holds the
    clip, or under an `if` that tests the scaler or an AMP flag, or the same test as an
    `if` around the clip (also as one part of an `or`), or under an `if` whose `else`
    unscales too; PIA's `unscale_` under `if (step + 1) % accum == 0:` before a clip
    on every micro-step does not (round BL). That is amplint's reading of RULES.md's "on
    that path"; the AMP-flag, `or` and both-branches cases are its decisions, since the
    catalog does not say which conditions an `unscale_` may sit under. Nor is a clip
    flagged after an `unscale_` under an `if` on a setting named for unscaling (`if
    CFG.unscale: scaler.unscale_(optimizer)`: Kaggle solutions whose configs turn it off and
    set `max_grad_norm: 1000` for the scaled gradients, round BN): whether to unscale is then
    the author's setting (amplint's decision).

    Not flagged: `accelerator.clip_grad_norm_`, timm's `dispatch_clip_grad`, and other
    wrappers (they unscale, or are not torch's function); project functions that happen
    to be called `clip_grad_norm_`; code with no `scaler.step` after the clip; a clip on
    the other branch of the `if` that holds the scaled backward (OneVOS: `if
    self.enable_amp: scaler.scale(loss).backward() ... else: loss.backward(); clip(...)`),
    which no run reaches after it (amplint's decision, round BH: RULES.md says "after" of
    text order in the same function), also where two `if`/`else` statements test the same
    thing (UniFace's `if scaler is None:` around the backward, then around the clip; round
    BO).

    ## Why is this bad?
    After a scaled backward the gradients are multiplied by the loss scale (65536 by
    default). Clipping them then clips at `max_norm / scale`: with the default scale,
    `max_norm=1.0` effectively becomes 1.5e-5, so clipping is either a silent no-op or
    crushes every update. `scaler.unscale_(optimizer)` divides the gradients back first;
    `scaler.step` then knows not to unscale again.

    ## Example
    ```python
    import torch

    def train_step(model, loss, optimizer, scaler):
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    ```python
    import torch

    def train_step(model, loss, optimizer, scaler):
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    Where another scaler unscales that optimizer before the clip (pytorch-animeGAN's
    `self.scaler_d.unscale_(self.optimizer_g)` after `self.scaler_g.scale(loss_g).backward()`;
    round BN), the gradients are divided by the wrong scale: the message says so, and an
    unsafe fix names the right scaler in that call (inserting another `unscale_` would
    divide them twice; the other scaler then no longer records that optimizer's inf checks,
    which its next `update()` would have read). This case is this page's reading.

    Safe: the fix inserts `scaler.unscale_(optimizer)` on its own line just before the
    clip, with the optimizer taken from the `scaler.step(optimizer)` call. It is offered
    only where the clip runs after the scaled backward on every path (in the block that
    holds it) and reaches the step every time (the step's block holds the clip: not for a
    clip on every micro-step before a step only on accumulation steps, where the second
    `unscale_` before an `update()` raises; round AV), not for a clip shared with a float32
    branch where the scaler may be `None`
    (RULES.md gives the fix unconditionally; withholding it there is this page's decision). The clip then
    clips the real gradients, as the code evidently means, and `scaler.step` skips its
    own unscaling (a test proves the resulting norms with torch). Several clips after one
    scaled backward (waifu-diffusion clips the unet and the text encoder, both in one
    optimizer) get one `unscale_`, before the first: each is reported, the later ones with
    no fix of their own, since a second `unscale_` before the step raises
    "unscale_() has already been called" (a test runs both with torch); RULES.md does not
    cover several clips, so this is this page's decision, from round AG.
    """

    triggers = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})
    # Pre-filter: a scaler (named *scaler or constructed) and its step().
    requires = (frozenset({"*scaler", "GradScaler"}), frozenset({".step"}))

    VALID = (
        # UniFace (round BO): the same test twice; the clip's branch is the unscaled run's.
        """
        import torch

        def step(model, loss, optimizer, scaler):
            if scaler is None:
                loss.backward()
            else:
                scaler.scale(loss).backward()
            if scaler is None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                optimizer.step()
            else:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(optimizer)
                scaler.update()
        """,
        # Unscaling is a setting of the author's (kaggle-feedback-prize-3, round BN).
        """
        import torch

        def train_fn(CFG, model, loss, optimizer, scaler):
            scaler.scale(loss).backward()
            if CFG.unscale:
                scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CFG.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        """,
        # The `unscale_` runs wherever the clip does: its test is implied by the clip's
        # (physicsnemo's AeroJEPA trainer, round BL) ...
        """
        import torch

        def step(model, loss, optimizer, scaler, world_size, max_norm):
            scaler.scale(loss).backward()
            if world_size > 1 or (max_norm > 0.0):
                scaler.unscale_(optimizer)
            if max_norm > 0.0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        """,
        # ... or both branches unscale (videomae's scaler takes one optimizer or a list).
        """
        import torch

        def step(model, loss, optimizer, scaler):
            scaler.scale(loss).backward()
            if not isinstance(optimizer, list):
                scaler.unscale_(optimizer)
            else:
                for one in optimizer:
                    scaler.unscale_(one)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        # The `unscale_` sits under an AMP test: where it does not run, nothing is scaled.
        """
        import torch

        def step(model, loss, optimizer, scaler, use_amp):
            scaler.scale(loss).backward()
            if use_amp:
                scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        """
        import torch

        for batch in loader:
            scaler.scale(model(batch).sum()).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
            scaler.step(optimizer)
            scaler.update()
        """,
        """
        import torch

        def step(m, loss, opt):
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
        """,
        """
        def clip_grad_norm_(params, value):
            pass

        def step(m, loss, opt, scaler):
            scaler.scale(loss).backward()
            clip_grad_norm_(m.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        """,
        """
        def step(m, loss, opt, scaler, accelerator):
            scaler.scale(loss).backward()
            accelerator.clip_grad_norm_(m.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        """,
    )
    INVALID = (
        # pytorch-animeGAN (round BN): the generator's optimizer is unscaled by the
        # discriminator's scaler; the fix names the scaler that scaled its backward.
        Invalid(
            """
              import torch

              class Trainer:
                  def __init__(self):
                      self.scaler_g = torch.amp.GradScaler("cuda")
                      self.scaler_d = torch.amp.GradScaler("cuda")

                  def train_g(self, loss_g):
                      self.scaler_g.scale(loss_g).backward()
            -         self.scaler_d.unscale_(self.optimizer_g)
            +         self.scaler_g.unscale_(self.optimizer_g)
                      torch.nn.utils.clip_grad_norm_(self.G.parameters(), max_norm=1.0)
                      self.scaler_g.step(self.optimizer_g)
                      self.scaler_g.update()
            """,
            unsafe=True,
            line=11, column=9, message="`self.scaler_d.unscale_(self.optimizer_g)` divides them by another scaler's scale",
        ),
        # JOTR: the scaled loss rebinds the loss's own name just before its backward.
        Invalid(
            """
              import torch

              def step(model, loss, opt, scaler, max_norm):
                  loss = scaler.scale(loss)
                  loss.backward()
            +     scaler.unscale_(opt)
                  torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                  scaler.step(opt)
                  scaler.update()
            """,
            line=6, column=5, message="clipped while still scaled by `scaler`",
        ),
        # waifu-diffusion: two clips before one step of the optimizer holding both models;
        # one `unscale_` before the first serves both (a second would raise).
        Invalid(
            """
              import torch

              def step(unet, text_encoder, loss, opt, scaler):
                  scaler.scale(loss).backward()
            +     scaler.unscale_(opt)
                  torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
                  torch.nn.utils.clip_grad_norm_(text_encoder.parameters(), 1.0)
                  scaler.step(opt)
                  scaler.update()
            """,
            count=2,
            line=5, column=5, message="clipped while still scaled by `scaler`",
        ),
        Invalid(
            """
              import torch

              def step(m, loss, opt, scaler):
                  scaler.scale(loss).backward()
            +     scaler.unscale_(opt)
                  torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                  scaler.step(opt)
                  scaler.update()
            """,
            line=5, column=5, message="clipped while still scaled by `scaler`",
        ),
        Invalid(
            """
              from torch.nn.utils import clip_grad_norm_

              class T:
                  def train(self, loader):
                      for i, (x, y) in enumerate(loader):
                          self.scaler.scale(self.loss(x, y) / 4).backward()
                          if (i + 1) % 4 == 0:
            +                 self.scaler.unscale_(self.optimizer)
                              grad_norm = clip_grad_norm_(self.model.parameters(), self.max_norm)
                              self.scaler.step(self.optimizer)
                              self.scaler.update()
            """,
            line=8, column=29, message="clipped while still scaled by `self.scaler`",
        ),
        # A clip on every micro-step, a step only on accumulation steps: reported, but an
        # `unscale_` before the clip would run twice before an `update()`, which raises.
        Invalid(
            """
            import torch

            def train_one_epoch(model, loader, optimizer, scaler, accum):
                for i, x in enumerate(loader):
                    with torch.autocast("cuda"):
                        loss = model(x).sum() / accum
                    scaler.scale(loss).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    if (i + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
            """,
            fixed=None,
            line=8, column=9, message="clipped while still scaled by `scaler`",
        ),
        # PIA (round BL): the `unscale_` runs only on accumulation steps, the clip on every
        # micro-step, so 31 of 32 clips cut gradients that are still scaled. No fix: the
        # clip belongs inside that `if`, after the `unscale_`.
        Invalid(
            """
            import torch

            def train_one_epoch(unet, loader, optimizer, scaler, accum, max_norm):
                for step, x in enumerate(loader):
                    with torch.autocast("cuda"):
                        loss = unet(x).mean() / accum
                    scaler.scale(loss).backward()
                    if (step + 1) % accum == 0:
                        scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(unet.parameters(), max_norm)
                    if (step + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
            """,
            fixed=None,
            line=10, column=9, message="clipped while still scaled by `scaler`",
        ),
        # The clip is shared with the float32 branch, where `scaler` is None: reported, but
        # an unconditional `unscale_` would crash that branch (PointNeXt).
        Invalid(
            """
            import torch

            def train_one_epoch(model, loader, optimizer, scaler, use_amp, clip):
                for x in loader:
                    with torch.autocast("cuda", enabled=use_amp):
                        loss = model(x).sum()
                    if use_amp:
                        scaler.scale(loss).backward()
                    else:
                        loss.backward()
                    if clip > 0:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                    if use_amp:
                        scaler.step(optimizer)
                        scaler.update()
            """,
            fixed=None,
            line=12, column=13, message="clipped while still scaled by `scaler`",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) not in CLIP_FUNCTIONS:
            return
        scalers = self.context.analysis.scalers
        scope = self.context.analysis.tree.scope_of(node)
        position = self.context.span(node)[0]
        backwards = [
            (self.context.span(call)[0], scaler, call)
            for call, scaler in scalers.scaled_backwards
            if self.context.analysis.tree.scope_of(call) is scope
            and self.context.span(call)[0] < position
            and not self._on_other_branch(call, node)
        ]
        if not backwards:
            return
        backward_position, scaler, backward = max(backwards, key=lambda item: item[0])
        calls = [c for c in scalers.in_scope(scope) if c.scaler == scaler]
        if any(
            c.method == "unscale_"
            and backward_position < self.context.span(c.call)[0] < position
            and (self._covers(c.call, node) or self._under_unscale_switch(c.call, node))
            for c in calls
        ):
            return
        steps = [c for c in calls if c.method == "step" and self.context.span(c.call)[0] > position]
        if not steps:
            return
        step = min(steps, key=lambda c: self.context.span(c.call)[0])
        stepped = source_of(self.context, step.call.args[0].value) if step.call.args else "optimizer"
        wrong = [
            c
            for c in scalers.in_scope(scope)
            if c.method == "unscale_"
            and c.scaler != scaler
            and c.optimizer is not None
            and c.optimizer == step.optimizer
            and backward_position < self.context.span(c.call)[0] < position
        ]
        if wrong:
            self._report_other_scaler(node, scaler, wrong[0], stepped)
            return
        fix = None
        statement = self.context.analysis.tree.statement_of(node)
        # A new line before the clip's own line, at its indentation; not for a clip in a
        # one-line suite (`if sync: clip(...); scaler.step(opt)`), whose `unscale_` would
        # run outside the condition, on every iteration.
        if (
            step.optimizer is not None
            and isinstance(statement, cst.SimpleStatementLine)
            and self._on_every_path_after(backward, node)
            and self._steps_whenever_clipped(step.call, node)
            and not self._clipped_before(scope, backward_position, position)
        ):
            line_start = self.context.line_start(self.context.span(statement)[0])
            indent = self.context.indentation(statement)
            optimizer = source_of(self.context, step.call.args[0].value)
            fix = self.make_fix(
                f"Insert `{scaler}.unscale_({optimizer})` before clipping",
                [self.context.insert(line_start, f"{indent}{scaler}.unscale_({optimizer}){self.context.source.newline}")],
            )
        self.report(
            node,
            f"Gradients are clipped while still scaled by `{scaler}`; call `{scaler}.unscale_({stepped})` first",
            fix=fix,
        )

    def _report_other_scaler(self, clip: cst.Call, scaler: str, wrong: ScalerCall, stepped: str) -> None:
        """The optimizer is unscaled before the clip, but by another scaler than the one
        that scaled its backward (pytorch-animeGAN's generator step calls
        `self.scaler_d.unscale_(self.optimizer_g)` after `self.scaler_g.scale(loss_g).backward()`;
        round BN): its gradients are divided by the wrong scale. Inserting the right
        `unscale_` beside it would divide them twice; the fix names the right scaler there.
        Unsafe: the other scaler then no longer records that optimizer's inf checks, which
        its next `update()` would have read."""
        func = wrong.call.func
        fix = None
        if isinstance(func, cst.Attribute) and not has_comment(self.context, func.value):
            fix = self.make_fix(
                f"Unscale with `{scaler}`",
                [self.context.replace(func.value, scaler)],
                applicability=Applicability.UNSAFE,
            )
        self.report(
            clip,
            f"Gradients are clipped while still scaled by `{scaler}`: `{wrong.scaler}.unscale_({stepped})` "
            f"divides them by another scaler's scale; call `{scaler}.unscale_({stepped})` instead",
            fix=fix,
        )

    def _clipped_before(self, scope: cst.CSTNode, backward_position: int, position: int) -> bool:
        """Is there an earlier clip after the same backward (waifu-diffusion clips the unet's
        and the text encoder's gradients, both in one optimizer)? That clip's `unscale_`
        serves this one too; a second `unscale_` before the step raises."""
        tree = self.context.analysis.tree
        return any(
            backward_position < self.context.span(call)[0] < position
            and tree.scope_of(call) is scope
            and self.qualified_name(call.func) in CLIP_FUNCTIONS
            for call in tree.index.calls
        )

    def _covers(self, unscale: cst.Call, clip: cst.Call) -> bool:
        """Does this earlier ``unscale_`` run whenever the clip does: its block holds the
        clip, or the ``if`` it sits under tests the scaler or an AMP flag (the other branch
        has nothing scaled) or is the very test of an ``if`` around the clip? PIA unscales
        under `if (step + 1) % accum == 0:` and clips after that `if` on every micro-step
        (round BL)."""
        tree = self.context.analysis.tree
        statement = tree.statement_of(unscale)
        block = tree.parent(statement) if statement is not None else None
        if block is None or tree.within(clip, block):
            return True
        def code(node: cst.BaseExpression) -> str:
            if node.lpar:
                node = node.with_changes(lpar=[], rpar=[])  # `(cfg.clip_grad > 0)` is `cfg.clip_grad > 0`
            return self.context.module.code_for_node(node)

        around_clip = {code(ancestor.test) for ancestor in tree.ancestors(clip) if isinstance(ancestor, cst.If)}
        for ancestor in tree.ancestors(unscale):
            if tree.within(clip, ancestor):
                break  # the nearest block both run in
            if not isinstance(ancestor, cst.If):
                continue
            test = ancestor.test
            if (
                _AMP_TEST.search(code(test))
                # `if world_size > 1 or clip > 0: unscale_` before `if clip > 0: clip(...)`
                # (physicsnemo's AeroJEPA trainer): it holds wherever the clip's test does.
                or any(code(part) in around_clip for part in operands(test, cst.Or))
                # Both branches unscale (videomae's scaler: one optimizer or a list of them).
                or (ancestor.orelse is not None and self._unscales(ancestor.orelse))
            ):
                continue
            return False
        return True

    def _under_unscale_switch(self, unscale: cst.Call, clip: cst.Call) -> bool:
        """Is this ``unscale_`` under an ``if`` on a setting named for unscaling, which the
        clip is not (``if CFG.unscale: scaler.unscale_(optimizer)``, then the clip, in
        Kaggle solutions whose configs turn it off and set ``max_grad_norm: 1000`` for the
        scaled gradients; round BN)? Whether to unscale is then the author's setting."""
        tree = self.context.analysis.tree
        for child, ancestor in tree.ancestry(unscale):
            if isinstance(ancestor, cst.FunctionDef):
                return False
            if (
                isinstance(ancestor, cst.If)
                and child is ancestor.body
                and not tree.within(clip, ancestor)
                and _UNSCALE_SETTING.search(self.context.module.code_for_node(ancestor.test))
            ):
                return True
        return False

    def _unscales(self, branch: cst.CSTNode) -> bool:
        """Does this branch call some ``.unscale_(...)``?"""
        tree = self.context.analysis.tree
        return any(
            isinstance(call.func, cst.Attribute) and call.func.attr.value == "unscale_" and tree.within(call, branch)
            for call in tree.index.calls
        )

    def _steps_whenever_clipped(self, step: cst.Call, clip: cst.Call) -> bool:
        """Does every clip reach the step: is the step's statement in a block that holds the
        clip? A clip on every micro-step before a step only on accumulation steps (`if (i + 1)
        % accum == 0: scaler.step(opt)`) would get an `unscale_` on every micro-step, and the
        second one before an `update()` raises (a Kaggle solution, round AV)."""
        tree = self.context.analysis.tree
        statement = tree.statement_of(step)
        block = tree.parent(statement) if statement is not None else None
        return block is not None and tree.within(clip, block)

    def _on_other_branch(self, backward: cst.Call, clip: cst.Call) -> bool:
        """Are the backward and the clip on different branches of one ``if`` (OneVOS: the
        scaled backward under ``if self.enable_amp:``, a plain clip in its ``else:``; round
        BH)? No run does both."""
        tree = self.context.analysis.tree
        branches = {id(ancestor): child for child, ancestor in tree.ancestry(backward) if isinstance(ancestor, cst.If)}
        for child, ancestor in tree.ancestry(clip):
            if isinstance(ancestor, cst.If) and id(ancestor) in branches:
                other = branches[id(ancestor)]
                if other is not child and child is not ancestor.test and other is not ancestor.test:
                    return True
                break  # the innermost `if` around both: the same branch of it
        # Two `if`s on the same test, one after the other (UniFace: `if scaler is None:` plain
        # backward `else:` scaled backward, then `if scaler is None:` clip and step `else:`
        # unscale_, clip, scaler step; round BO): the clip's branch is the one the scaled
        # backward's run does not take.
        backward_sides = self._sides(backward)
        return any(
            test in backward_sides and backward_sides[test] != side for test, side in self._sides(clip).items()
        )

    def _sides(self, node: cst.CSTNode) -> dict[str, bool]:
        """For each ``if``/``else`` around ``node`` whose test calls nothing: its test's text,
        and whether ``node`` is in its body (True) or its ``else`` (False)."""
        tree = self.context.analysis.tree
        code = self.context.module.code_for_node
        sides: dict[str, bool] = {}
        for child, ancestor in tree.ancestry(node):
            if isinstance(ancestor, cst.FunctionDef):
                break
            if not isinstance(ancestor, cst.If) or not isinstance(ancestor.orelse, cst.Else) or child is ancestor.test:
                continue
            if has_call(ancestor.test):
                continue
            sides.setdefault(code(ancestor.test), child is ancestor.body)
        return sides

    def _on_every_path_after(self, backward: cst.Call, clip: cst.Call) -> bool:
        """Does the clip run only after the scaled backward ran: is it in the block that
        holds the backward's statement? A clip shared with a float32 branch
        (`if use_amp: scaler.scale(loss).backward()` / `else: loss.backward()`) would get an
        `unscale_` on a path where the scaler may be None (PointNeXt)."""
        tree = self.context.analysis.tree
        statement = tree.statement_of(backward)
        block = tree.parent(statement) if statement is not None else None
        return block is not None and tree.within(clip, block)
