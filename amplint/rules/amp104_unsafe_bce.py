from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst
from libcst.metadata import Assignment, ImportAssignment

from amplint.analysis.syntax import dotted_name, receiver_root
from amplint.diagnostics import Applicability, Edit, Fix
from amplint.fixes.calls import CallEdits, has_comment, source_of
from amplint.fixes.edits import delete_statement
from amplint.fixes.importer import bound_name, import_names
from amplint.rules.base import AnalysisRule, Invalid

BCE_FUNCTIONS = frozenset({"torch.nn.functional.binary_cross_entropy", "torch.binary_cross_entropy"})
BCE_MODULES = frozenset({"torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss"})
FUNCTIONAL_BCE = "torch.nn.functional.binary_cross_entropy"
WITH_LOGITS = "binary_cross_entropy_with_logits"
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
    workaround PyTorch recommends when the probabilities really are needed. Also not
    flagged, a decision of amplint's from round U: a functional BCE call in a function
    that opens autocast blocks of its own and makes the call outside all of them
    (RoboFlamingo's gripper loss after the block); it does not run under autocast there.
    RULES.md's letter is file-wide; this keeps its premise. Likewise (round BC) an
    `nn.BCELoss()` assigned to a name or attribute that the file never mentions again
    (cav-mae's `args.loss_fn = torch.nn.BCELoss()` left over in feature-extraction
    scripts that compute no loss): nothing can call it. Nor (round BG) an `nn.BCELoss()`
    stored on `self` whose every use is a `self.<name>(...)` call outside all autocast
    blocks, in methods the file never calls from inside one (LiDAR4D's `self.bce_fn`, used
    only in the float32 part of `refine()`).

    When the input is visibly a sigmoid of logits — written in the call
    (`torch.sigmoid(logits)`, `logits.sigmoid()`), or assigned just before it in the same
    block (`probs = torch.sigmoid(logits)` then `F.binary_cross_entropy(probs, y)`) — the
    finding carries a fix to `binary_cross_entropy_with_logits(logits, ...)`, also for
    the function imported by name (`from torch.nn.functional import
    binary_cross_entropy`); see Fix safety.

    Across functions and files: a call inside such an autocast block that reaches a
    binary cross entropy in another file of the project — a loss function in
    `losses.py`, a loss class whose `forward` calls `nn.BCELoss` — is flagged at the
    call, with the chain that leads there (`compute_loss(...)` reaches
    `F.binary_cross_entropy` (losses.py:12, via compute_loss → helper), the path from
    the project root). The chain is
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
    Offered only when the input is visibly a sigmoid (`torch.sigmoid(x)`, `x.sigmoid()`,
    `F.sigmoid(x)`, `torch.special.expit(x)`): written in the call, or assigned just
    before it in the same block (`probs = torch.sigmoid(logits)` then
    `F.binary_cross_entropy(probs, y)`). The fix calls
    `binary_cross_entropy_with_logits(logits, ...)`, keeping the target, `weight` and
    `reduction` arguments as written, positional or keyword; for ordinary inputs the two
    are equal in value and gradient (a test proves it with torch), and for extreme logits
    the fused form is the more accurate one.
    - Safe when the sigmoid's result has no other use: a sigmoid in the call goes, and an
      assigned one goes with its assignment.
    - Unsafe when the assigned probabilities have other uses (metrics, logging): the
      assignment stays for them, and the loss no longer sees what another use may do
      to them in between (an in-place `probs.clamp_(...)`).
    - No fix when the logits are not a plain name, attribute or constant subscript
      (`model(x)[0]` would be computed again), when they are mentioned between the
      sigmoid and the loss (a rebinding or an in-place update), when the probabilities
      are bound more than once, or when a comment would be lost.
    - A `from torch.nn.functional import binary_cross_entropy` name is replaced by a name
      bound to `binary_cross_entropy_with_logits`: an existing import of it, else the
      import line is changed (the name renamed when this call was its only use, else
      the logits form added beside it), else `torch.nn.functional....` when `torch` is
      bound; no fix when none of these is possible. `torch.binary_cross_entropy` (not a
      torch function; torch's `binary_cross_entropy_with_logits` takes other arguments)
      and `nn.BCELoss` get no fix: drop the sigmoid from the model and use the logits
      form or `nn.BCEWithLogitsLoss`.
    """

    # A BCE in this file, or a call that may reach one in another file (then the file
    # still opens the autocast block the call runs in).
    triggers = frozenset({"binary_cross_entropy", "BCELoss", "*autocast"})
    # Pre-filter: only files with an autocast block.
    requires = (frozenset({"*autocast"}),)

    VALID = (
        # After the function's own autocast block: the BCE runs in float32 (RoboFlamingo).
        """
        import torch
        import torch.nn.functional as F

        def train_step(model, x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.binary_cross_entropy(torch.sigmoid(logits.float()), y)
            loss.backward()
        """,
        """
        import torch.nn.functional as F
        loss = F.binary_cross_entropy(p, y)
        """,
        """
        import torch
        import torch.nn.functional as F
        with torch.autocast('cpu'):
            out = m(x)
        loss = F.binary_cross_entropy(torch.sigmoid(out), y)
        """,
        """
        import torch
        import torch.nn.functional as F
        with torch.autocast('cuda'):
            out = m(x)
            with torch.autocast('cuda', enabled=False):
                loss = F.binary_cross_entropy(torch.sigmoid(out.float()), y)
        """,
        """
        import torch
        import torch.nn.functional as F
        with torch.autocast('cuda'):
            loss = F.binary_cross_entropy_with_logits(m(x), y)
        """,
    )
    INVALID = (
        Invalid(
            """
              import torch
              import torch.nn.functional as F
              with torch.autocast('cuda'):
            -     loss = F.binary_cross_entropy(torch.sigmoid(logits), y, weight=w, reduction='sum')
            +     loss = F.binary_cross_entropy_with_logits(logits, y, weight=w, reduction='sum')
            """,
            line=4, column=12, message="`torch.nn.functional.binary_cross_entropy` raises under CUDA autocast",
        ),
        Invalid(
            """
              import torch
              with torch.autocast(device_type=device_type):
            -     loss = torch.nn.functional.binary_cross_entropy(out.sigmoid(), y, w)
            +     loss = torch.nn.functional.binary_cross_entropy_with_logits(out, y, w)
            """,
            line=3, column=12, message="`torch.nn.functional.binary_cross_entropy` raises under CUDA autocast",
        ),
        Invalid(
            """
              import torch
              import torch.nn.functional as F
              with torch.autocast('cuda'):
            -     loss = F.binary_cross_entropy(input=F.sigmoid(z), target=y)
            +     loss = F.binary_cross_entropy_with_logits(input=z, target=y)
            """,
            line=4, column=12, message="use `binary_cross_entropy_with_logits` on logits",
        ),
        Invalid(
            """
              import torch
              import torch.nn.functional as F

              def step(model, x, y):
                  with torch.autocast('cuda'):
                      logits = model(x)
            -         probs = torch.sigmoid(logits)
            -         loss = F.binary_cross_entropy(probs, y)
            +         loss = F.binary_cross_entropy_with_logits(logits, y)
                  return loss
            """,
            line=8, column=16, message="`torch.nn.functional.binary_cross_entropy` raises under CUDA autocast",
        ),
        Invalid(
            """
              import torch
              import torch.nn.functional as F

              def step(out, y):
                  with torch.autocast('cuda'):
                      probs = out.logits.sigmoid()
            -         loss = F.binary_cross_entropy(probs, y, reduction='sum')
            +         loss = F.binary_cross_entropy_with_logits(out.logits, y, reduction='sum')
                      accuracy = ((probs > 0.5) == y).float().mean()
                  return loss, accuracy
            """,
            unsafe=True,
            line=7, column=16, message="use `binary_cross_entropy_with_logits` on logits",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def step(model, x, y):
                with torch.autocast('cuda'):
                    logits = model(x)
                    probs = torch.sigmoid(logits)
                    logits = logits.float()
                    loss = F.binary_cross_entropy(probs, y)
                return loss
            """,
            fixed=None,  # logits is rebound between the sigmoid and the loss
            line=9, column=16, message="raises under CUDA autocast",
        ),
        Invalid(
            """
              import torch
            - from torch.nn.functional import binary_cross_entropy
            + from torch.nn.functional import binary_cross_entropy_with_logits

              with torch.autocast('cuda'):
            -     loss = binary_cross_entropy(logits.sigmoid(), y)
            +     loss = binary_cross_entropy_with_logits(logits, y)
            """,
            line=5, column=12, message="`torch.nn.functional.binary_cross_entropy` raises",
        ),
        Invalid(
            """
            from torch import autocast
            from torch.nn.functional import binary_cross_entropy
            binary_cross_entropy_with_logits = None

            with autocast('cuda'):
                loss = binary_cross_entropy(logits.sigmoid(), y)
            """,
            fixed=None,  # the logits form's name is taken and torch is not bound: no name to write
            line=6, column=12, message="raises under CUDA autocast",
        ),
        Invalid(
            """
            import torch
            from torch import nn
            criterion = nn.BCELoss()
            with torch.cuda.amp.autocast():
                loss = criterion(probs, y)
            """,
            fixed=None,
            line=3, column=13, message="use `nn.BCEWithLogitsLoss` on logits",
        ),
        # Built and called at once: one finding, at the construction (round AY).
        Invalid(
            """
            import torch
            from torch import nn
            with torch.autocast('cuda'):
                loss = nn.BCELoss()(probs, y)
            """,
            fixed=None,
            count=1, line=4, column=12, message="use `nn.BCEWithLogitsLoss` on logits",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            with torch.autocast('cuda'):
                loss = F.binary_cross_entropy(probs, y)
            """,
            fixed=None,
            line=4, column=12, message="use `binary_cross_entropy_with_logits` on logits",
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

    def _stored_and_never_read(self, node: cst.Call) -> bool:
        """Is the `nn.BCELoss()` assigned to a name or attribute that the file never reads
        (cav-mae's `args.loss_fn = torch.nn.BCELoss()`, left over in scripts that compute
        no loss; round BC)? Nothing can call it."""
        statement = self.context.analysis.tree.parent(node)
        target = _single_target(statement)
        spelled = dotted_name(target) if target is not None else None
        if statement is None or spelled is None:
            return False
        # Any other mention of its last name (`loss_fn(...)`, `self.criterion`, a `getattr`
        # string) may read it.
        last = spelled.rsplit(".", 1)[-1]
        rest = self.context.text.replace(self.context.module.code_for_node(statement), "", 1)
        return re.search(rf"\b{re.escape(last)}\b", rest) is None

    def _called_only_without_autocast(self, node: cst.Call) -> bool:
        """Is the `nn.BCELoss()` stored on ``self.<name>`` and called only outside every
        autocast block, from methods that the file never calls from inside one (LiDAR4D's
        `self.bce_fn`, called only in the float32 part of `refine()`, while other methods of
        the runner train under autocast; round BG)?"""
        analysis = self.context.analysis
        target = _single_target(analysis.tree.parent(node))
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"):
            return False
        name = target.attr.value
        tree = analysis.tree
        autocast = analysis.autocast
        uses = [
            attribute
            for attribute in tree.parents
            if isinstance(attribute, cst.Attribute) and attribute.attr.value == name and attribute is not target
        ]
        # Every mention of the name is one of these (no `getattr(self, "bce")`, no alias).
        if not uses or len(re.findall(rf"\b{re.escape(name)}\b", self.context.text)) != len(uses) + 1:
            return False
        for use in uses:
            call = tree.parent(use)
            if not (isinstance(call, cst.Call) and call.func is use and isinstance(use.value, cst.Name) and use.value.value == "self"):
                return False  # read some other way: it may be handed to code under autocast
            scope = tree.scope_of(call)
            if not isinstance(scope, cst.FunctionDef) or autocast.enclosing(call) is not None:
                return False
            if any(
                isinstance(other.func, cst.Attribute) and other.func.attr.value == scope.name.value and autocast.enclosing(other) is not None
                for other in tree.index.calls
            ):
                return False
        return True

    def _after_own_blocks(self, node: cst.CSTNode) -> bool:
        """Is ``node`` a functional BCE call in a function that opens autocast blocks of its
        own and runs it outside all of them (RoboFlamingo computes its gripper BCE after the
        block)? Called like that, it does not run under autocast. (An `nn.BCELoss()` built
        outside a block may still be called inside one.)"""
        tree = self.context.analysis.tree
        scope = tree.scope_of(node)
        if not isinstance(scope, cst.FunctionDef) or not isinstance(node, cst.Call):
            return False
        autocast = self.context.analysis.autocast
        own = [block for block in autocast.blocks if tree.scope_of(block.statement) is scope]
        return bool(own) and autocast.enclosing(node) is None

    def visit_Call(self, node: cst.Call) -> None:
        # `nn.BCELoss()(x, y)`: the construction inside is the finding, not its call as well.
        qualified = None if isinstance(node.func, cst.Call) else self.qualified_name(node.func)
        if qualified not in BCE_MODULES and qualified not in BCE_FUNCTIONS:
            self._check_callee(node)
            return
        if qualified in BCE_MODULES and self._applies(node) and not self._stored_and_never_read(node) and not self._called_only_without_autocast(node):
            self.report(node, "`nn.BCELoss` raises under CUDA autocast; use `nn.BCEWithLogitsLoss` on logits")
        elif qualified in BCE_FUNCTIONS and self._applies(node) and not self._after_own_blocks(node):
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
            f"{where}{block.use.origin}: binary_cross_entropy raises under CUDA autocast; use `binary_cross_entropy_with_logits` "
            "there, or call it under `autocast(enabled=False)`",
        )

    def _logits_fix(self, node: cst.Call) -> Fix | None:
        """``binary_cross_entropy(<sigmoid of x>, ...)`` → ``..._with_logits(x, ...)``, the
        sigmoid written in the call or assigned just before it; only the callee and the
        input change, so the call keeps its layout."""
        # `torch.binary_cross_entropy` does not exist (torch 2.13), and the aten
        # `torch.binary_cross_entropy_with_logits` takes other arguments: no fix there.
        if self.qualified_name(node.func) != FUNCTIONAL_BCE:
            return None
        first = _input_argument(node)
        if first is None:
            return None
        callee = self._logits_callee(node)
        if callee is None:
            return None
        callee_edit, import_edits = callee
        editor = CallEdits(self.context, node)
        callee_edit(editor)
        applicability = Applicability.SAFE
        removal: list[Edit] = []
        inline = self._sigmoid_argument(first.value)
        if inline is not None:
            editor.unwrap(first.value, inline)
            message = "Use `binary_cross_entropy_with_logits` on the logits"
        else:
            assigned = self._assigned_sigmoid(first.value, node)
            if assigned is None:
                return None
            logits, statement, other_uses = assigned
            editor.replace_node(first.value, source_of(self.context, logits))
            if other_uses:
                # The probabilities stay for their other uses; one of them may change them
                # before the loss (`probs.clamp_(...)`), which the logits would not see.
                applicability = Applicability.UNSAFE
                message = "Use `binary_cross_entropy_with_logits` on the logits (the sigmoid stays for its other uses)"
            else:
                removal.append(delete_statement(self.context, statement))
                message = "Use `binary_cross_entropy_with_logits` on the logits and drop the unused sigmoid"
        edit = editor.edit()
        if edit is None:
            return None
        return self.make_fix(message, [edit, *removal, *import_edits], applicability=applicability)

    def _logits_callee(self, node: cst.Call) -> tuple[Callable[[CallEdits], None], list[Edit]] | None:
        """How to write ``binary_cross_entropy_with_logits`` in place of the callee, and the
        import edits that makes it bound; None when no bound name can be written."""
        func = node.func
        if isinstance(func, cst.Attribute):
            # `F.binary_cross_entropy`: the same module has the logits form.
            return (lambda editor: editor.replace_node(func.attr, WITH_LOGITS)), []
        if not isinstance(func, cst.Name):
            return None
        bindings = self.context.analysis.bindings
        # 1. A name this file already binds to the logits form.
        existing = self._with_logits_name(node)
        if existing is not None:
            return (lambda editor: editor.rename(existing)), []
        # 2. Added to the `from torch.nn.functional import binary_cross_entropy` line.
        binding = bindings.import_binding(func)
        statement = binding.node if binding is not None else None
        if (
            binding is not None
            and isinstance(statement, cst.ImportFrom)
            and not isinstance(statement.names, cst.ImportStar)
            and not statement.relative
            and statement.module is not None
            and cst.helpers.get_full_name_for_node(statement.module) == "torch.nn.functional"
            and bindings.is_free(WITH_LOGITS, node)
            and bindings.is_free(WITH_LOGITS, statement)
        ):
            edit = self._import_with_logits(statement, binding)
            if edit is not None:
                return (lambda editor: editor.rename(WITH_LOGITS)), [edit]
        # 3. Through torch, when torch is bound here.
        torch = bindings.module_binding("torch", at=node)
        if torch is not None:
            qualified = f"{torch}.nn.functional.{WITH_LOGITS}"
            return (lambda editor: editor.rename(qualified)), []
        return None

    def _with_logits_name(self, at: cst.CSTNode) -> str | None:
        """A name bound at ``at`` to torch's ``binary_cross_entropy_with_logits`` by an import."""
        candidates = sorted(
            {
                bound_name(alias)
                for statement in self.context.analysis.tree.parents
                if isinstance(statement, cst.ImportFrom) and not isinstance(statement.names, cst.ImportStar)
                for alias in statement.names
                if cst.helpers.get_full_name_for_node(alias.name) == WITH_LOGITS
            },
            key=lambda name: (name != WITH_LOGITS, name),
        )
        return next((name for name in candidates if self._binds_with_logits(at, name)), None)

    def _binds_with_logits(self, at: cst.CSTNode, name: str) -> bool:
        """Is ``name`` bound at ``at`` to torch's ``binary_cross_entropy_with_logits``, and to
        nothing else?"""
        found = self.context.analysis.bindings.of(at, name)
        return bool(found) and all(
            isinstance(binding, ImportAssignment)
            and isinstance(binding.node, cst.ImportFrom)
            and self._imports_with_logits(binding.node, name)
            for binding in found
        )

    def _imports_with_logits(self, statement: cst.ImportFrom, name: str) -> bool:
        if statement.relative or statement.module is None or isinstance(statement.names, cst.ImportStar):
            return False
        if cst.helpers.get_full_name_for_node(statement.module) != "torch.nn.functional":
            return False
        return any(
            cst.helpers.get_full_name_for_node(alias.name) == WITH_LOGITS and bound_name(alias) == name
            for alias in statement.names
        )

    def _import_with_logits(self, statement: cst.ImportFrom, binding: ImportAssignment) -> Edit | None:
        """The import edit that binds ``binary_cross_entropy_with_logits``: the imported name
        renamed when this call is the only use of ``binary_cross_entropy`` (no unused import
        is left), else the logits form added right after it (where it sorts)."""
        assert not isinstance(statement.names, cst.ImportStar)
        if len(binding.references) == 1:
            alias = next(
                (alias for alias in statement.names if bound_name(alias) == binding.name and alias.asname is None),
                None,
            )
            if alias is not None:
                return self.context.replace(alias.name, WITH_LOGITS)
        after = next(
            (
                index + 1
                for index, alias in enumerate(statement.names)
                if cst.helpers.get_full_name_for_node(alias.name) == "binary_cross_entropy"
            ),
            len(statement.names),
        )
        editor = import_names(self.context, statement)
        editor.add(after, WITH_LOGITS)
        return editor.edit()

    def _assigned_sigmoid(
        self, expr: cst.BaseExpression, call: cst.Call
    ) -> tuple[cst.BaseExpression, cst.SimpleStatementLine, bool] | None:
        """``probs = torch.sigmoid(logits)`` earlier in the same block, ``probs`` bound nowhere
        else and ``logits`` untouched in between: (``logits``, the assignment's line, does
        ``probs`` have other uses?)."""
        if not isinstance(expr, cst.Name):
            return None
        analysis = self.context.analysis
        tree = analysis.tree
        found = analysis.bindings.of(expr)
        if len(found) != 1 or not isinstance(found[0], Assignment) or isinstance(found[0], ImportAssignment):
            return None
        assignment = found[0]
        target = assignment.node
        assign_target = tree.parent(target)
        assign = tree.parent(assign_target) if assign_target is not None else None
        line = tree.parent(assign) if assign is not None else None
        if not (
            isinstance(assign_target, cst.AssignTarget)
            and isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and assign.targets[0].target is target
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and tree.scope_of(line) is tree.scope_of(call)
        ):
            return None
        logits = self._sigmoid_argument(assign.value)
        if logits is None or not _plain_reference(logits) or has_comment(self.context, logits):
            return None
        if "\n" in source_of(self.context, logits) or "\r" in source_of(self.context, logits):
            return None
        located = tree.statement_list(line)
        if located is None:
            return None
        siblings, index = located
        later = {id(statement): position for position, statement in enumerate(siblings) if position > index}
        holder = next((later[id(a)] for a in tree.ancestors(call) if id(a) in later), None)
        if holder is None:
            return None  # the loss is not computed after the assignment in the same block
        root = receiver_root(logits)
        assert isinstance(root, cst.Name)
        # The logits must still hold what the sigmoid saw: no mention of them in between
        # (a rebinding, an in-place update), nor in the statement that computes the loss.
        if any(_mentions(statement, root.value) for statement in siblings[index + 1 : holder + 1]):
            return None
        other_uses = any(access.node is not expr for access in assignment.references)
        return logits, line, other_uses

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


def _input_argument(call: cst.Call) -> cst.Arg | None:
    """The argument that is the BCE's ``input``: the first positional one, or ``input=``."""
    if any(arg.star for arg in call.args):
        return None
    for position, arg in enumerate(call.args):
        if (arg.keyword is None and position == 0) or (arg.keyword is not None and arg.keyword.value == "input"):
            return arg
    return None


def _plain_reference(expr: cst.BaseExpression) -> bool:
    """A name, or attributes and constant subscripts of one (``out.logits``, ``outputs[0]``,
    ``out["logits"]``): reading it again reads the same value."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Subscript):
            if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
                return False
            if not isinstance(expr.slice[0].slice.value, (cst.Integer, cst.SimpleString)):
                return False
        expr = expr.value
    return isinstance(expr, cst.Name)


def _mentions(node: cst.CSTNode, name: str) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name) and current.value == name:
            return True
        stack.extend(current.children)
    return False


def _single_target(statement: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The one target of ``x = <value>`` (None for any other statement)."""
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return None
    return statement.targets[0].target
