from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from amplint.analysis.autocast import AutocastBlock
from amplint.analysis.syntax import dotted_name, has_call, is_none
from amplint.diagnostics import Applicability, Fix
from amplint.engine.walk import ReadOnlyVisitor
from amplint.fixes.edits import body_indent, reindent_statements
from amplint.rules.base import AnalysisRule, Invalid

DEVICE_WORDS = ("device", "cuda", "gpu", "rank")
GRADIENT_FREE = frozenset({"no_grad", "inference_mode"})


def _moves_data(value: cst.BaseExpression) -> bool:
    """``x.to(device[, non_blocking=True])``, ``x.cuda()``: a device move, no computation."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    method = value.func.attr.value
    if method == "cuda":
        return True
    if method != "to" or not value.args:
        return False
    for arg in value.args:
        if arg.keyword is not None:
            if arg.keyword.value not in ("device", "non_blocking", "copy"):
                return False
            continue
        spelled = dotted_name(arg.value) if not isinstance(arg.value, cst.SimpleString) else None
        text = spelled.split(".")[-1].lower() if spelled else ""
        literal = arg.value.evaluated_value if isinstance(arg.value, cst.SimpleString) else None
        if not (any(word in text for word in DEVICE_WORDS) or (isinstance(literal, str) and literal.split(":")[0] in ("cuda", "cpu"))):
            return False
    return True


def _assigned_names(statement: cst.BaseStatement) -> set[str]:
    """The plain names a one-assignment statement line binds (``x = ...``, ``x: T = ...``)."""
    assert isinstance(statement, cst.SimpleStatementLine)
    assign = statement.body[0]
    if isinstance(assign, cst.Assign):
        return {target.target.value for target in assign.targets if isinstance(target.target, cst.Name)}
    if isinstance(assign, cst.AnnAssign) and isinstance(assign.target, cst.Name):
        return {assign.target.value}
    return set()


class _Bound(ReadOnlyVisitor):
    """Names assigned by the statements of a block (targets only), except those whose
    latest assignment is an explicit float32 upcast (``logits = model(x).float()``,
    GRPO-Zero): they hold a float32 copy, not the block's reduced-precision value."""

    def __init__(self, is_upcast: Callable[[cst.BaseExpression], bool]) -> None:
        self.names: set[str] = set()
        self.is_upcast = is_upcast

    def visit_Assign(self, node: cst.Assign) -> bool:
        # `x, y = x.to(device), y.to(device)` inside the block moves the batch; autocast
        # computes nothing there, so those names do not tie a later loss to the block
        # (MSN's linear evaluation trains its head in float32 after the block).
        for target in node.targets:
            if isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)):
                names, values = target.target.elements, node.value.elements
                if len(names) == len(values):
                    for name, value in zip(names, values, strict=True):
                        if not _moves_data(value.value):
                            self._collect(name.value)
                    continue
            if isinstance(target.target, cst.Name) and self.is_upcast(node.value):
                self.names.discard(target.target.value)
            elif not _moves_data(node.value) and not self._slices_outside_data(node.value):
                self._collect(target.target)
        return True

    def _slices_outside_data(self, value: cst.BaseExpression) -> bool:
        """``targets = batch_ids[:, 1:]`` of a name the block did not compute: a view of the
        input, nothing autocast ran (GRPO-Zero's shifted token ids)."""
        if not isinstance(value, cst.Subscript):
            return False
        root: cst.BaseExpression = value
        while isinstance(root, (cst.Subscript, cst.Attribute)):
            if isinstance(root, cst.Subscript) and any(
                not isinstance(element.slice, (cst.Index, cst.Slice)) or has_call(element.slice) for element in root.slice
            ):
                return False
            root = root.value
        return isinstance(root, cst.Name) and root.value not in self.names

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False  # collected by visit_Assign

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._collect(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._collect(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._collect(node.target)

    def _collect(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._collect(element.value)
        elif isinstance(target, cst.StarredElement):
            self._collect(target.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_With(self, node: cst.With) -> bool:
        # Values computed under no_grad carry no gradient: a frozen feature extractor
        # under autocast, whose features a float32 head trains on after the block.
        return not any(
            isinstance(item.item, cst.Call) and (dotted_name(item.item.func) or "").split(".")[-1] in GRADIENT_FREE
            for item in node.items
        )


def _names_read(statement: cst.BaseStatement) -> set[str]:
    """The names a statement reads: of an assignment, its value's (ZITS-PlusPlus's
    `gen_logits, _ = self.D.forward(predicted_img)` after a block that bound `_` does not
    read `_`)."""
    read = _Calls()
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
            small.value.visit(read)
            return read.names
    statement.visit(read)
    return read.names


class _Calls(ReadOnlyVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


class LossOutsideAutocast(AnalysisRule, code="AMP102", name="loss-outside-autocast", summary="Loss computed outside the autocast block", fix=Applicability.SAFE):
    """## What it does
    Flags a loss computation that takes a value computed inside an autocast block (or a
    value derived from one after the block, `logits = out.logits`: amplint's reading, where
    RULES.md says a value bound in the block; a name is derived when the value assigned to
    it reads one, so a throwaway `_` the block bound ties nothing, ZITS-PlusPlus) but runs
    after the block, in a function that then calls a tensor `.backward()`. A loss
    computation is a call of a `torch.nn.functional` loss (`cross_entropy`, `mse_loss`,
    `binary_cross_entropy_with_logits`, ...), of an `nn.*Loss` instance (or a name
    bound to one), or of a function or attribute whose own name is `criterion` or
    contains `loss` (`loss_fn`, `self.criterion`, `compute_loss`).

    Not flagged: bookkeeping after the block (`loss.item()`, `loss / accum_steps`,
    reading `outputs.loss`), losses computed inside the block, losses whose only input
    from the block is data the block merely moved to the device (`x, y = x.to(device),
    y.to(device)`) or sliced from an input it did not compute (`targets = ids[:, 1:]`,
    GRPO-Zero; amplint's decision, from round AC) or computed under `torch.no_grad()` (a frozen feature extractor whose
    features a float32 head trains on after the block, as in MSN's linear evaluation):
    nothing differentiable ran under autocast, and — a decision of
    amplint's — losses whose inputs from the block are explicitly upcast
    (`F.mse_loss(pred.float(), y)`: a float32 loss chosen on purpose; also through a name
    bound to the upcast, `pred_rgb = preds[..., :3].float()`, also inside the block:
    `logits = model(ids).float()`, GRPO-Zero, or into the same name after it: `logits =
    logits.float()`, SigLip2-ReID, round BM; also where there is a value: `x.float() if x
    is not None else None`, causal-speech-enhancement-distillation, round BO), `binary_cross_entropy`
    and `nn.BCELoss` (autocast refuses them: moving one into the block would raise, which
    AMP104 reports; RoboFlamingo computes its gripper loss after the block; RULES.md lists
    `binary_cross_entropy` among AMP102's losses, this page leaves it out), evaluation code with no
    backward, blocks with `enabled=False`, methods of other objects whose *receiver*
    merely mentions losses (`losses.update(...)`, `loss_meter.update(...)`), and test
    modules (`test_*.py`, `*_test.py`, files under `tests/` or `test/`), whose losses
    check numerics rather than train (opacus's tests), as for AMP101 and AMP105.

    ## Why is this bad?
    The PyTorch AMP recipe computes the loss under autocast: autocast runs
    `cross_entropy`, `log_softmax`, `mse_loss` and other losses in float32 from float16
    inputs where that matters, and keeps the graph consistent. Outside the block the
    loss runs in whatever dtype the outputs have — float16 logits into a hand-written
    loss or reduction lose precision, and ops autocast would have upcast do not get
    upcast.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    def train_step(model, x, y, optimizer):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # the forward pass only
            logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn.functional as F

    def train_step(model, x, y, optimizer):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Safe. When the loss statement is the first statement after the block, the fix moves
    it to the end of the block (re-indented; comments on its line move with it). It runs
    at the same point in the program, now under autocast, which is what the AMP recipe
    prescribes. Otherwise the loss is flagged without a fix.
    """

    triggers = frozenset({"*autocast"})
    # Pre-filter: a tensor backward must follow the loss.
    requires = (frozenset({".backward"}),)

    VALID = (
        # ZITS-PlusPlus: the discriminator runs after the block on a detached copy kept in
        # the batch, and its logits are float32; the block's throwaway `_` ties nothing to
        # the loss.
        """
        import torch

        def discriminator_step(G, D, batch, fake_loss, opt):
            with torch.autocast("cuda"):
                _, gen_img = G(batch["img"])
                batch["predicted"] = gen_img
            gen_logits, _ = D(batch["predicted"].detach())
            loss = fake_loss(gen_logits)
            loss.backward()
            opt.step()
        """,
        # binary_cross_entropy raises under autocast: computed after the block on purpose.
        """
        import torch
        import torch.nn.functional as F

        def step(model, x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                probs = torch.sigmoid(model(x))
            loss = F.binary_cross_entropy(probs.float(), y) + F.binary_cross_entropy(probs, y)
            loss.backward()
        """,
        # The block moves the batch and runs the frozen encoder; the trained head and its
        # loss run in float32 after it (MSN's linear evaluation).
        """
        import torch

        def train(encoder, head, criterion, loader, optimizer, scaler, device):
            for data in loader:
                with torch.autocast("cuda"):
                    inputs, labels = data[0].to(device), data[1].to(device, non_blocking=True)
                    with torch.no_grad():
                        feats = encoder(inputs)
                outputs = head(feats.float())
                loss = criterion(outputs, labels)
                scaler.scale(loss).backward()
        """,
        """
        import torch
        import torch.nn.functional as F

        def step(m, x, y):
            with torch.autocast('cuda'):
                out = m(x)
                loss = F.cross_entropy(out, y)
            loss.backward()
        """,
        """
        import torch
        import torch.nn.functional as F

        def evaluate(m, x, y):
            with torch.autocast('cuda'):
                out = m(x)
            return F.cross_entropy(out, y)
        """,
        """
        import torch

        def step(m, x, y, accum):
            with torch.autocast('cuda'):
                loss = m(x, y).loss
            loss = loss / accum
            losses.update(loss.item())
            loss.backward()
        """,
        """
        import torch
        import torch.nn.functional as F

        for x, y in loader:
            with torch.autocast('cuda', enabled=False):
                out = model(x)
            loss = F.mse_loss(out, y)
            loss.backward()
        """,
        # The loss does not take what the block computed.
        """
        import torch
        import torch.nn.functional as F

        class Trainer:
            def step(self, x, y):
                with torch.autocast('cuda'):
                    self.features = self.encoder(x)
                loss = F.mse_loss(self.cached_prediction, y)
                loss.backward()
        """,
        # A float32 loss, chosen on purpose.
        """
        import torch
        import torch.nn.functional as F

        def step(m, x, y):
            with torch.autocast('cuda'):
                pred = m(x)
            loss = F.mse_loss(pred.float(), y)
            loss.backward()
        """,
        # The same, with the upcast bound to a name first (VggAE_Diffusion).
        """
        import torch
        import torch.nn.functional as F

        def step(m, x, y):
            with torch.autocast('cuda'):
                preds = m(x)
            pred_rgb = preds[..., :3].permute(0, 3, 1, 2).float()
            loss = F.l1_loss(pred_rgb, y)
            loss.backward()
        """,
        # The same, upcast inside the block (GRPO-Zero's `logits = model.forward(ids).float()`).
        """
        import torch
        import torch.nn.functional as F

        def step(m, ids):
            with torch.autocast('cuda'):
                targets = ids[:, 1:]
                logits = m(ids[:, :-1]).float()
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
            loss.backward()
        """,
        # The same, upcast only where there is a value (causal-speech-enhancement-distillation,
        # round BO).
        """
        import torch
        import torch.nn.functional as F

        def step(m, x, y):
            with torch.autocast('cuda'):
                out = m(x)
            loss = F.mse_loss(out.pred.float(), y, weight=out.weight.float() if out.weight is not None else None)
            loss.backward()
        """,
        # The same, upcast into the same name right after the block (SigLip2-ReID, round BM).
        """
        import torch
        import torch.nn.functional as F

        def step(m, x, y):
            with torch.autocast('cuda'):
                logits = m(x)
            logits = logits.float()
            loss = F.cross_entropy(logits, y)
            loss.backward()
        """,
    )
    INVALID = (
        Invalid(
            """
              import torch
              import torch.nn.functional as F

              def step(m, x, y):
                  with torch.autocast('cuda', dtype=torch.bfloat16):
                      out = m(x)
            -     loss = F.cross_entropy(out, y)  # main loss
            +         loss = F.cross_entropy(out, y)  # main loss
                  loss.backward()
            """,
            line=7, column=12, message="Loss computed outside the autocast block",
        ),
        Invalid(
            """
              import torch

              class Trainer:
                  def step(self, batch):
                      with torch.autocast('cuda'):
                          logits, aux = self.model(batch)
            +             loss = self.criterion(logits, batch['y'])

            -         loss = self.criterion(logits, batch['y'])
                      self.scaler.scale(loss).backward()
            """,
            line=8, column=16, message="Loss computed outside the autocast block",
        ),
        # The loss takes a value derived after the block from one computed inside it.
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def step(m, x, y):
                with torch.autocast('cuda', dtype=torch.bfloat16):
                    out = m(x)
                logits = out.logits
                loss = F.cross_entropy(logits, y)
                loss.backward()
            """,
            fixed=None,
            line=8, column=12, message="Loss computed outside the autocast block",
        ),
        Invalid(
            """
            import torch

            criterion = torch.nn.CrossEntropyLoss()
            for x, y in data:
                with torch.autocast('cuda'):
                    out = model(x)
                n = len(y)
                loss = criterion(out, y) / n
                loss.backward()
            """,
            fixed=None,
            line=8, column=12, message="Loss computed outside the autocast block",
        ),
    )

    def visit_With(self, node: cst.With) -> None:
        if self.context.analysis.training.in_test_module:
            return
        blocks = self.context.analysis.autocast.blocks_of(node)
        if not blocks or all(block.disabled for block in blocks):
            return
        located = self.context.analysis.tree.statement_list(node)
        if located is None:
            return
        siblings, index = located
        bound = _Bound(self._upcast)
        node.body.visit(bound)
        if not bound.names:
            return
        scope = self.context.analysis.tree.scope_of(node)
        backwards = [
            call
            for call in self.context.analysis.training.scope_backward_calls(scope)
            if self.context.span(call)[0] > self.context.span(node)[1]
        ]
        if not backwards:
            return
        for offset, statement in enumerate(siblings[index + 1 :]):
            if isinstance(statement, cst.BaseCompoundStatement):
                break  # past a loop or branch the data flow is no longer straight-line
            loss = self._loss_call(statement, bound.names)
            if loss is None:
                # Values derived from the block's outputs carry them on: `logits = out.logits`;
                # an upcast into the same name ends that (`logits = logits.float()` right after
                # the block: SigLip2-ReID, round BM).
                if self._binds_upcast(statement):
                    bound.names -= _assigned_names(statement)
                elif _names_read(statement) & bound.names:
                    statement.visit(bound)
                continue
            if self.context.span(statement)[0] > max(self.context.span(call)[0] for call in backwards):
                break
            fix = self._move_fix(statement, node, blocks[-1]) if offset == 0 else None
            self.report(loss, f"{self.summary}{blocks[-1].use.origin}", fix=fix)

    def _loss_call(self, statement: cst.BaseStatement, bound: set[str]) -> cst.Call | None:
        calls = _Calls()
        statement.visit(calls)
        for call in calls.calls:
            if not self.context.analysis.training.is_loss_call(call) or self.context.analysis.project.is_bce(call):
                continue  # binary_cross_entropy raises under autocast: after the block is its place
            arguments = _Calls()
            for arg in call.args:
                if not self._upcast(arg.value):
                    arg.value.visit(arguments)
            if arguments.names & bound:
                return call
        return None

    def _binds_upcast(self, statement: cst.BaseStatement) -> bool:
        """``pred = out.logits.float()``: the name holds a float32 copy, not the block's value."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        assign = statement.body[0]
        return isinstance(assign, (cst.Assign, cst.AnnAssign)) and assign.value is not None and self._upcast(assign.value)

    def _upcast(self, value: cst.BaseExpression) -> bool:
        """``pred.float()``, ``pred.to(torch.float32)``: the author computes the loss in
        float32 on purpose (a decision of amplint's: a deliberate float32 loss is fine); also
        ``x.float() if x is not None else None`` (causal-speech-enhancement-distillation,
        round BO)."""
        if isinstance(value, cst.IfExp):
            return all(self._upcast(side) or is_none(side) for side in (value.body, value.orelse)) and not (
                is_none(value.body) and is_none(value.orelse)
            )
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
            return False
        method = value.func.attr.value
        if method in ("float", "double") and not value.args:
            return True
        if method in ("to", "type") and len(value.args) == 1:
            dtypes = self.context.analysis.values.dtype_values(value.args[0].value)
            return dtypes is not None and dtypes <= {"float32", "float64"}
        return False

    def _move_fix(self, statement: cst.BaseStatement, with_node: cst.With, block: AutocastBlock) -> Fix | None:
        indent = body_indent(self.context, with_node.body)
        if indent is None or not isinstance(statement, cst.SimpleStatementLine):
            return None
        # The comment lines just above the loss describe it: they move with it.
        located = reindent_statements(self.context, [statement], indent, with_comments=True)
        if located is None:
            return None
        start, end, moved = located
        insert_at = self.context.line_end(self.context.span(with_node)[1] - 1)
        return self.make_fix(
            "Move the loss computation into the autocast block",
            [self.context.insert(insert_at, moved), self.context.edit(start, end, "")],
        )
