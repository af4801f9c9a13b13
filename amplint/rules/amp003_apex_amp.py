from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ImportAssignment

from amplint.analysis.context import RuleContext
from amplint.analysis.syntax import (
    assigned_names,
    caught,
    constant,
    count_names,
    dotted_name,
    last_name,
    loaded_names,
)
from amplint.analysis.torch_api import INTRODUCED
from amplint.diagnostics import Applicability, Edit, Fix
from amplint.fixes.calls import multiline_strings, open_bracket
from amplint.fixes.edits import indent_unit, lines_of, reindent_statements
from amplint.fixes.importer import Importer
from amplint.rules.base import AnalysisRule, Invalid

RECIPE = (
    'native AMP: `scaler = torch.amp.GradScaler("cuda")`, forward pass and loss under '
    '`torch.amp.autocast("cuda")`, then `scaler.scale(loss).backward()`, '
    "`scaler.step(optimizer)`, `scaler.update()`"
)
# What to do instead of each apex.amp member, in the message.
HINTS = {
    "initialize": "drop `amp.initialize` (what it was given, model and any optimizer, stays as it is)",
    "scale_loss": "`with amp.scale_loss(loss, optimizer) as s: s.backward()` becomes `scaler.scale(loss).backward()`",
    "master_params": "the model's parameters are the master parameters: clip `model.parameters()` after `scaler.unscale_(optimizer)`",
    "state_dict": "checkpoint `scaler.state_dict()`",
    "load_state_dict": "restore with `scaler.load_state_dict(...)`",
}
OPT_LEVELS = frozenset({"O1", "O2"})
# A condition that picks a branch by torch version: `version.parse(torch.__version__) <
# version.parse("1.6")`, `TORCH_VERSION < (1, 6)`, `hasattr(torch.cuda, "amp")`.
VERSION_TEST = re.compile(r"version|hasattr\s*\(\s*torch\b", re.IGNORECASE)
# ... that holds only on a torch older than native AMP (1.6) whatever its other branch does:
# `version.parse(torch.__version__) < version.parse("1.6")` (private-transformers' copy of
# an old HF Trainer, whose other branch only sets `_use_native_amp = True`; round BG).
BEFORE_NATIVE_AMP = re.compile(
    r"(?:torch\.__version__|torch_version|TORCH_VERSION)\W{0,3}\s*<\s*"
    r"(?:(?:version\.)?parse(?:_version)?\(|LooseVersion\()?\s*[\"'(]\s*1\s*[.,]\s*[0-6]\b",
    re.IGNORECASE,
)
NATIVE_AMP_MODULES = ("torch.cuda.amp", "torch.amp", "torch.cpu.amp")
NATIVE_AMP_NAMES = frozenset({"torch.autocast", "torch.GradScaler"})


IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _catches_import_error(handler: cst.ExceptHandler) -> bool:
    """``except:``, ``except ImportError:``, ``except (ImportError, ...)``, ``except Exception``."""
    names = caught(handler)
    return names is None or any(last_name(name) in IMPORT_ERRORS for name in names)


def _raises(body: cst.BaseSuite) -> bool:
    """Does the handler leave by raising (``raise ImportError("install apex")``)?"""
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    return any(
        isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
        and any(isinstance(part, cst.Raise) for part in line.body)
        for line in lines
    )


def _is_native_amp(name: str) -> bool:
    return name in NATIVE_AMP_NAMES or any(name == module or name.startswith(module + ".") for module in NATIVE_AMP_MODULES)



@dataclass(frozen=True)
class _Use:
    node: cst.CSTNode
    member: str | None  # None: an import


def _is_apex_amp_module(name: str | None) -> bool:
    return name is not None and (name == "apex.amp" or name.startswith("apex.amp."))


class ApexAmp(AnalysisRule, code="AMP003", name="apex-amp", summary="apex.amp no longer exists", fix=Applicability.UNSAFE):
    """## What it does
    Flags every use of NVIDIA apex's `apex.amp`: `from apex import amp`,
    `import apex.amp [as x]`, `from apex.amp import ...`, and uses of its members
    (`amp.initialize`, `amp.scale_loss`, `amp.master_params`, `amp.state_dict`, ...).

    Not flagged: `import apex as amp` (that name is the apex package), other libraries'
    `initialize` or `scale_loss`, and bare references to the module object or its dunder
    attributes such as `amp.__path__` (its import is flagged already). A name bound to apex.amp on one path and to something else on
    another (`try: from apex import amp` / `except ImportError: amp = None`) is not
    resolved, so only the import itself is flagged there. Also not flagged, code that
    runs only on a torch too old for native AMP, which current apex does not support
    anyway: a branch of a torch-version test (`if version.parse(torch.__version__) <
    version.parse("1.6"):`, `hasattr(torch.cuda, "amp")`) whose other branch uses native
    AMP, the body of a test that holds only on a torch before 1.6 whatever its other branch
    does (private-transformers' `else: _use_native_amp = True`; this page's decision, round
    BG), the `except ImportError:` of a native AMP import, and uses of `amp` where only
    such a branch binds it; likewise the branch where a native-AMP availability flag is
    false (timm's `has_native_amp`, bound to `False` and set to `True` only after code
    that reaches `torch.cuda.amp` succeeds: `if has_native_amp: ... elif has_apex:`), and
    an `if use_amp == "apex":` whose every `use_amp = "apex"` sits in such a branch
    (DCNv4); an optional `from apex import amp` read only there is then silent too. A branch chosen by a user option (`if args.apex:`) is flagged.
    Nor is an import of apex.amp in a `try` whose `except ImportError:` carries on (does
    not raise) when the file never reads the names it binds (Cream's `from apex import
    amp` beside apex's DDP, with torch's DDP as the fallback): on a current apex it fails
    quietly and changes nothing. And nothing is flagged where the checked project ships
    its own `apex.amp` package (jukebox vendors a 2019 apex with its `amp/`, tests and
    examples; VALOR keeps apex's repository as `apex/`, its package at `apex/apex/amp/`):
    there it exists; nor where the project's container build file (its
    `Dockerfile`, read as for the target torch) starts from an NVIDIA PyTorch container
    older than native AMP (before 20.06: UNITER's `FROM nvcr.io/nvidia/pytorch:19.05-py3`):
    that container's apex has `apex.amp`, and its torch has no native AMP to move to.
    Nor where an install document or requirements file of the file's folders pins apex
    to a commit (`git reset --hard <sha>` after cloning apex, `apex/tree/<sha>`,
    `apex.git@<sha>`: unilm's subprojects; hysts' `git+https://github.com/NVIDIA/apex.git@<sha>`
    in requirements.txt), or to one of apex's release tags from before it removed
    `apex.amp` in April 2025 (`git checkout 22.03` after the clone: DiffusionDepth; this
    page's decision, from round AV), or installs a fork of it (`github.com/ptrblck/apex`:
    SimXNS), or a frozen environment file pins apex beside an exact torch older than 2.4
    (REFERS' exported `environment.yml`: `pytorch=1.7.0=py3.6_cuda10.1...` and `apex==0.1`;
    pip freeze's `apex @ file:///...` for a local build counts as such a pin: Vim's
    `seg-requirements.txt` beside `torch==1.12.1`, round AY;
    this page's decision, from round AP; a README's list of versions that then clones
    current apex is no frozen file: ConSERT, round AV): an apex of its day, which has
    `apex.amp`; nor where the
    project's torch is held below native AMP (some torch bound of its nearest
    declaration caps it below 1.6, `torch==1.4.0`, `conda install pytorch==1.4.0`,
    `pytorch/pytorch:1.1.0`, and none of its bounds with a floor admits newer; a ceiling
    alone, such as the `torch<=1.13` a `python=3.6` implies in layoutlm's README, admits
    the pin): current apex uses `torch.cuda.amp` itself and does not build there, so the project's apex is one of its time, with `apex.amp` (and no native
    AMP exists to move to). A lower bound (`torch>=1.4`) does count: such a project may
    meet current torch and apex. An NGC image a README only suggests does not silence it. RULES.md lists no silences beyond `import apex as amp`;
    these (the old-torch branches, the unused optional import, the vendored package, the
    old container) are this page's decisions, made because the message's premise is false
    there.

    ## Why is this bad?
    `apex.amp` was deprecated in favour of PyTorch's native AMP (`torch.amp`) in 2020 and
    has since been removed from apex: code that imports it fails on a current apex install.
    The native recipe does the same job: `torch.amp.autocast("cuda")` around the forward
    pass and the loss (apex's `O1`), and a `torch.amp.GradScaler("cuda")` for dynamic
    loss scaling — `scaler.scale(loss).backward()`, `scaler.step(optimizer)`,
    `scaler.update()`. The model's own float32 parameters are the master weights, so
    `amp.master_params(optimizer)` becomes `model.parameters()` (clipped after
    `scaler.unscale_(optimizer)`), and `amp.state_dict()` becomes `scaler.state_dict()`.

    ## Example
    ```python
    from apex import amp

    def train(model, optimizer, loader, criterion):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        for x, y in loader:
            optimizer.zero_grad()
            output = model(x)
            loss = criterion(output, y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    def train(model, optimizer, loader, criterion):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.amp.autocast("cuda"):
                output = model(x)
                loss = criterion(output, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    ```

    ## Fix safety
    Unsafe, and offered only for the canonical pattern, all in one function (or one
    module-level script), when apex.amp is used for nothing else in the file:

    1. `model, optimizer = amp.initialize(model, optimizer[, opt_level="O1"|"O2"][, loss_scale="dynamic"][, verbosity=N])`,
       the same two names on both sides, becomes `scaler = torch.amp.GradScaler("cuda")`
       (`grad_scaler` if `scaler` is taken);
    2. the statements that compute the loss — the last assignment to the loss before
       `with amp.scale_loss(loss, optimizer) as s:`, in the same block, and the contiguous
       assignments just before it that feed it — are wrapped in
       `with torch.amp.autocast("cuda"):`;
    3. `with amp.scale_loss(loss, optimizer) as s: s.backward(...)` (a body of exactly
       that statement) becomes `scaler.scale(loss).backward(...)`;
    4. the one `optimizer.step()` after it becomes `scaler.step(optimizer)` followed by
       `scaler.update()`;
    5. the `from apex import amp` / `import apex.amp as amp` line is removed, and
       `import torch` is added when `torch` is not bound.

    It is unsafe because the numerics change: `O1` patched a list of torch functions,
    autocast uses its own op lists; `O2` kept an fp16 copy of the model with fp32 master
    weights, the native recipe keeps the model in float32; and the autocast region is
    inferred from data flow, so forward code outside it (in a callee's caller, before a
    compound statement) runs in float32. Anything else (`amp.master_params`,
    `amp.state_dict`, several `scale_loss` blocks, `delay_unscale=`, a static
    `loss_scale`, `O3`, an `initialize` in another function than the loop) gets the
    message without a fix.
    """

    triggers = frozenset({"apex"})
    # Pre-filter: every spelling of apex.amp names `amp` (apex's other packages do not).
    requires = (frozenset({"amp"}),)

    VALID = (
        # The import fails quietly on current apex and nothing reads `amp` (Cream).
        """
        try:
            from apex import amp
            from apex.parallel import DistributedDataParallel as DDP
        except ImportError:
            from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)
        """,
        """
        import apex as amp
        model = amp.initialize(model)
        """,
        # apex only where torch predates native AMP (MeZO's copy of the HF Trainer).
        """
        import torch
        from packaging import version

        _use_apex = False
        if version.parse(torch.__version__) < version.parse("1.6"):
            from apex import amp
            _use_apex = True
        else:
            from torch.cuda.amp import autocast


        def train(model, optimizer, fp16):
            if fp16 and _use_apex:
                model, optimizer = amp.initialize(model, optimizer)
        """,
        """
        try:
            from torch.cuda.amp import GradScaler
        except ImportError:  # torch < 1.6
            from apex import amp
        """,
        # apex only where a native-AMP availability flag is false (DCNv4's copy of timm).
        """
        import torch

        try:
            from apex import amp
            has_apex = True
        except ImportError:
            has_apex = False

        has_native_amp = False
        try:
            if getattr(torch.cuda.amp, "autocast") is not None:
                has_native_amp = True
        except AttributeError:
            pass


        def setup(model, optimizer, opt_level):
            if has_native_amp:
                use_amp = "native"
            elif has_apex:
                use_amp = "apex"
            else:
                use_amp = None
            if use_amp == "apex":
                model, optimizer = amp.initialize(model, optimizer, opt_level=opt_level)
            return model, optimizer
        """,
        """
        from apex.parallel import DistributedDataParallel as DDP
        model = DDP(model)
        """,
        """
        from mylib import amp
        model, opt = amp.initialize(model, opt)
        """,
        """
        from torch.cuda import amp
        scaler = amp.GradScaler()
        """,
        """
        import deepspeed
        engine = deepspeed.initialize(model=model)
        """,
        """
        # from apex import amp
        s = 'amp.initialize(model, optimizer)'
        """,
    )
    INVALID = (
        # A branch chosen by a user option, not by the torch version, runs today.
        Invalid(
            """
            if args.apex:
                from apex import amp
            else:
                from torch.cuda.amp import autocast
            """,
            count=1,
            line=2, column=5, message="`apex.amp` no longer exists in current apex",
        ),
        # Canonical: fixed.
        Invalid(
            """
              import torch
            - from apex import amp


              def train(model, optimizer, loader):
            -     model, optimizer = amp.initialize(model, optimizer, opt_level='O1')
            +     scaler = torch.amp.GradScaler("cuda")
                  for x, y in loader:
                      optimizer.zero_grad()
            -         x = x.cuda()
            -         out = model(x)
            -         # the loss
            -         loss = torch.nn.functional.cross_entropy(out, y)
            -         with amp.scale_loss(loss, optimizer) as scaled_loss:
            -             scaled_loss.backward()
            -         optimizer.step()  # update
            +         with torch.amp.autocast("cuda"):
            +             x = x.cuda()
            +             out = model(x)
            +             # the loss
            +             loss = torch.nn.functional.cross_entropy(out, y)
            +         scaler.scale(loss).backward()
            +         scaler.step(optimizer)  # update
            +         scaler.update()
            """,
            unsafe=True,
            count=3,
            line=2, column=1, message="`apex.amp` no longer exists in current apex; use native AMP",
        ),
        # Other apex.amp uses: flagged, no fix.
        Invalid(
            """
            import apex.amp as amp
            model, opt = amp.initialize(model, opt, opt_level='O2')
            torch.nn.utils.clip_grad_norm_(amp.master_params(opt), 1.0)
            torch.save({'amp': amp.state_dict()}, 'ckpt.pt')
            """,
            fixed=None,
            count=4,
            line=1, column=1, message="`apex.amp` no longer exists in current apex; use native AMP",
        ),
        Invalid(
            """
            from apex.amp import scale_loss
            with scale_loss(loss, opt) as s:
                s.backward()
            """,
            count=2,
            line=1, column=1, message="`apex.amp` no longer exists in current apex; use native AMP",
        ),
        Invalid(
            """
            import apex
            model, opt = apex.amp.initialize(model, opt)
            """,
            count=1,
            line=2, column=14, message="`apex.amp.initialize` no longer exists in current apex",
        ),
        Invalid(
            """
            try:
                from apex import amp
            except ImportError:
                amp = None
            if amp:
                model = amp.initialize(model)
            """,
            count=1,
            line=2, column=5, message="`apex.amp` no longer exists in current apex",
        ),
        # A user option can choose apex on any torch (timm's `--apex-amp`).
        Invalid(
            """
            import torch

            try:
                from apex import amp
                has_apex = True
            except ImportError:
                has_apex = False

            has_native_amp = False
            try:
                if getattr(torch.cuda.amp, "autocast") is not None:
                    has_native_amp = True
            except AttributeError:
                pass


            def setup(args, model, optimizer):
                use_amp = None
                if args.apex_amp and has_apex:
                    use_amp = "apex"
                elif has_native_amp:
                    use_amp = "native"
                if use_amp == "apex":
                    model, optimizer = amp.initialize(model, optimizer)
                return model, optimizer
            """,
            count=2,
            line=4, column=5, message="`apex.amp` no longer exists in current apex",
        ),
        # A flag set without testing for native AMP says nothing about the torch.
        Invalid(
            """
            try:
                from apex import amp
                has_apex = True
            except ImportError:
                has_apex = False
            has_native_amp = False
            if torch_ok():
                has_native_amp = True
            if not has_native_amp and has_apex:
                model = amp.initialize(model)
            """,
            count=2,
            line=2, column=5, message="`apex.amp` no longer exists in current apex",
        ),
    )

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._uses: list[_Use] = []
        self._module_references: list[cst.Name] = []  # bare names bound to apex.amp
        # Inside an import, or inside a member already recorded: nothing more to collect.
        self._skip = 0
        self._recorded: set[cst.Attribute] = set()

    # -- collection (every import of apex.amp and every use of one of its members) -----------

    def visit_Import(self, node: cst.Import) -> None:
        if not self._skip and any(_is_apex_amp_module(cst.helpers.get_full_name_for_node(alias.name)) for alias in node.names):
            self._uses.append(_Use(node, None))
        self._skip += 1

    def leave_Import(self, original_node: cst.Import) -> None:
        self._skip -= 1

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not self._skip and not node.relative and node.module is not None:
            module = cst.helpers.get_full_name_for_node(node.module)
            if _is_apex_amp_module(module) or (
                module == "apex"
                and not isinstance(node.names, cst.ImportStar)
                and any(cst.helpers.get_full_name_for_node(alias.name) == "amp" for alias in node.names)
            ):
                self._uses.append(_Use(node, None))
        self._skip += 1

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._skip -= 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._collect(node):
            self._recorded.add(node)
            self._skip += 1

    def leave_Attribute(self, original_node: cst.Attribute) -> None:
        if original_node in self._recorded:
            self._skip -= 1

    def visit_Name(self, node: cst.Name) -> None:
        self._collect(node)

    def _collect(self, node: cst.Name | cst.Attribute) -> bool:
        """Record a use of an apex.amp member (True: nothing inside it is another use), or a
        bare reference to the module itself."""
        if self._skip:
            return False
        member = self._member(node)
        if member is not None:
            self._uses.append(_Use(node, member))
            return True
        if isinstance(node, cst.Name) and self.qualified_name(node) == "apex.amp":
            self._module_references.append(node)
        return False

    def _member(self, node: cst.BaseExpression) -> str | None:
        qualified = self.qualified_name(node) or ""
        if not qualified.startswith("apex.amp."):
            return None
        member = qualified.removeprefix("apex.amp.").split(".")[0]
        # `amp.__path__`, `amp.__version__`: introspection of the module, not an AMP call.
        return None if member.startswith("__") else member

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._uses and self._apex_amp_in_project():
            return  # the project ships its own apex.amp: it exists wherever the code runs
        if self.context.project.apex_amp_available:
            return  # its container's or its pinned apex has apex.amp
        self._uses = [use for use in self._uses if not self._old_torch_only(use.node) and not self._unused_optional_import(use.node)]
        fix = self._canonical_fix()
        for use in self._uses:
            self.report(use.node, self._message(use), fix=fix if use.member == "initialize" else None)

    def _apex_amp_in_project(self) -> bool:
        """Is ``apex.amp`` a package of the checked project itself (jukebox vendors its
        2019 apex, ``apex/apex/amp/``, with its tests and examples)?"""
        modules = self.context.analysis.modules
        # Also apex's repository checked out as a folder (VALOR's `apex/apex/amp/`, which its
        # README installs with `cd apex; pip install ...`).
        found = (
            modules.module_path("apex.amp", self.context.path)
            or modules.module_path("apex.apex.amp", self.context.path)
            # ... or under a versioned name (SHERL's `CLIP-ViL/apex-22.04-dev/apex/amp/`, round BK).
            or modules.checkout_module_path("apex.amp", self.context.path)
        )
        if found is None:
            return False
        modules.summary_of(found)  # the result depends on that file: a cached one follows it
        return True

    # -- imports that do nothing -------------------------------------------------------------

    def _unused_optional_import(self, node: cst.CSTNode) -> bool:
        """An import of apex.amp in a ``try`` whose ``except ImportError`` carries on, and
        whose names the file never reads (Cream's ``from apex import amp`` beside apex's
        DDP), or reads only where torch has no native AMP (DCNv4): on a current apex it
        fails quietly and changes nothing."""
        if not isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node.names, cst.ImportStar):
            return False
        if not self._in_quiet_import_guard(node):
            return False
        bindings = self.context.analysis.bindings
        for alias in node.names:
            bound = alias.evaluated_alias or alias.evaluated_name.split(".")[0]
            imported = bindings.imports_of(node, bound)
            if not imported:
                return False
            for binding in imported:
                if any(not self._in_old_torch_branch(access.node) for access in binding.references):
                    return False
        return True

    def _in_quiet_import_guard(self, node: cst.CSTNode) -> bool:
        for child, ancestor in self.context.analysis.tree.ancestry(node):
            if isinstance(ancestor, cst.Try) and child is ancestor.body:
                return any(
                    _catches_import_error(handler) and not _raises(handler.body) for handler in ancestor.handlers
                )
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
        return False

    # -- old-torch fallbacks ------------------------------------------------------------------

    def _old_torch_only(self, node: cst.CSTNode) -> bool:
        """Does ``node`` run only on a torch too old for native AMP: in the branch of a
        torch-version test whose other branch uses native AMP (or in the ``except`` of a
        native AMP import), or a use of a name that only such a branch binds? On any torch
        that current apex supports, that code never runs."""
        if self._in_old_torch_branch(node):
            return True
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return False
        root: cst.BaseExpression = node  # type: ignore[assignment]
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        imports = [b for b in self.context.analysis.bindings.of(root) if isinstance(b, ImportAssignment)]
        return bool(imports) and all(self._in_old_torch_branch(binding.node) for binding in imports)

    def _in_old_torch_branch(self, node: cst.CSTNode, depth: int = 0) -> bool:
        analysis = self.context.analysis
        for child, ancestor in analysis.tree.ancestry(node):
            if isinstance(ancestor, cst.Try) and child in ancestor.handlers and analysis.compat.uses(ancestor.body, _is_native_amp):
                return True
            if not isinstance(ancestor, cst.If) or child is ancestor.test:
                continue
            if child is ancestor.body and BEFORE_NATIVE_AMP.search(self.context.module.code_for_node(ancestor.test)):
                return True
            if VERSION_TEST.search(self.context.module.code_for_node(ancestor.test)):
                sibling = ancestor.orelse if child is ancestor.body else ancestor.body if child is ancestor.orelse else None
                if sibling is not None and analysis.compat.uses(sibling, _is_native_amp):
                    return True
            if self._branch_without_native_amp(ancestor.test, taken=child is ancestor.body):
                return True
            if depth < 2 and child is ancestor.body and self._chosen_only_without_native_amp(ancestor.test, depth):
                return True
        return False

    def _branch_without_native_amp(self, test: cst.BaseExpression, *, taken: bool) -> bool:
        """Is the branch of ``if <test>:`` that runs when the test is ``taken`` the one
        where a native-AMP availability flag is false (timm's ``has_native_amp``, set by
        ``getattr(torch.cuda.amp, "autocast")``): ``if has_native_amp: ... else:`` or
        ``if not has_native_amp:``?"""
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        if negated:
            test = cst.ensure_type(test, cst.UnaryOperation).expression
        return isinstance(test, cst.Name) and taken == negated and self._native_amp_flag(test)

    def _native_amp_flag(self, flag: cst.Name) -> bool:
        """Is ``flag`` bound only to ``False`` and, where code that reaches native AMP
        succeeds, to ``True``?"""
        analysis = self.context.analysis
        assignments = analysis.bindings.assignments(flag)
        if not assignments or len(assignments) != len(analysis.bindings.of(flag)):
            return False
        proven = False
        for binding in assignments:
            value = analysis.bindings.value_of_binding(binding)
            if not isinstance(value, cst.Name) or value.value not in ("True", "False"):
                return False
            if value.value == "True":
                if not self._after_native_amp(binding.node):
                    return False
                proven = True
        return proven

    def _after_native_amp(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a ``try`` body or an ``if`` body that uses native AMP?"""
        analysis = self.context.analysis
        for child, ancestor in analysis.tree.ancestry(node):
            if isinstance(ancestor, cst.Try) and child is ancestor.body and analysis.compat.uses(ancestor.body, _is_native_amp):
                return True
            if isinstance(ancestor, cst.If) and child is ancestor.body and analysis.compat.uses(ancestor.test, _is_native_amp):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
        return False

    def _chosen_only_without_native_amp(self, test: cst.BaseExpression, depth: int) -> bool:
        """``if use_amp == "apex":`` where every binding of ``use_amp`` to ``"apex"`` is
        itself in a branch that runs only without native AMP (DCNv4's copy of timm)."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return False
        if not isinstance(test.comparisons[0].operator, cst.Equal):
            return False
        left, right = test.left, test.comparisons[0].comparator
        if isinstance(left, cst.SimpleString):
            left, right = right, left
        if not isinstance(left, cst.Name) or not isinstance(right, cst.SimpleString):
            return False
        chosen = right.evaluated_value
        bindings = self.context.analysis.bindings
        choosing = [
            binding
            for binding in bindings.assignments(left)
            if isinstance(value := bindings.value_of_binding(binding), cst.SimpleString) and value.evaluated_value == chosen
        ]
        return bool(choosing) and all(self._in_old_torch_branch(binding.node, depth + 1) for binding in choosing)

    def _message(self, use: _Use) -> str:
        if use.member is None:
            return f"`apex.amp` no longer exists in current apex; use {RECIPE}"
        hint = HINTS.get(use.member)
        prefix = f"`apex.amp.{use.member}` no longer exists in current apex"
        # The import's diagnostic gives the whole recipe; each use says only its own step.
        return f"{prefix}: {hint}" if hint else f"{prefix}; use {RECIPE}"

    # -- the canonical migration -----------------------------------------------------------

    def _canonical_fix(self) -> Fix | None:
        if not self.context.project.torch_has(INTRODUCED["torch.amp.GradScaler"]):
            return None  # the native recipe it emits needs torch.amp.GradScaler (2.3)
        uses, references = self._uses, self._module_references
        imports = [use for use in uses if use.member is None]
        members = [use for use in uses if use.member is not None]
        if len(imports) != 1 or sorted(use.member or "" for use in members) != ["initialize", "scale_loss"]:
            return None
        if any(self.context.is_suppressed(self.code, use.node) for use in uses):
            return None
        import_statement = imports[0].node
        # Every reference to the module name is the base of one of the two members.
        bases = {id(use.node.value) for use in members if isinstance(use.node, cst.Attribute)}
        if len(bases) != 2 or any(id(reference) not in bases for reference in references):
            return None
        initialize = next(use.node for use in members if use.member == "initialize")
        scale_loss = next(use.node for use in members if use.member == "scale_loss")
        tree = self.context.analysis.tree
        scope = tree.scope_of(initialize)
        if tree.scope_of(scale_loss) is not scope:
            return None
        if self.context.analysis.autocast.blocks_in(scope):
            return None  # already autocast somewhere: the region is the author's call
        init = self._initialize_statement(initialize)
        if init is None:
            return None
        init_small, optimizer = init
        block = self._scale_loss_block(scale_loss, optimizer)
        if block is None:
            return None
        with_statement, loss_name, backward_call = block
        step = self._optimizer_step(scope, optimizer, with_statement)
        if step is None:
            return None
        region = self._loss_region(with_statement, loss_name, init_small)
        if region is None:
            return None
        torch = self._torch_name(initialize, import_statement)
        scaler = next((n for n in ("scaler", "grad_scaler") if self._name_free(n, initialize, scope)), None)
        if torch is None or scaler is None:
            return None
        torch_name, import_edits = torch
        region_edit = self._wrap_region(region, torch_name)
        backward_edit = self._backward_edit(with_statement, loss_name, backward_call, scaler)
        if region_edit is None or backward_edit is None:
            return None
        step_call, step_line = step
        newline = self.context.source.newline
        edits: list[Edit] = [
            self.context.replace(init_small, f'{scaler} = {torch_name}.amp.GradScaler("cuda")'),
            region_edit,
            backward_edit,
            self.context.replace(step_call, f"{scaler}.step({optimizer})"),
            self.context.insert(
                self.context.line_end(self.context.span(step_line)[1] - 1),
                f"{self.context.indentation(step_line)}{scaler}.update(){newline}",
            ),
            *import_edits,
        ]
        return self.make_fix("Migrate to torch.amp.GradScaler and torch.amp.autocast", edits)

    def _initialize_statement(self, call_or_attr: cst.CSTNode) -> tuple[cst.Assign, str] | None:
        """``a, b = amp.initialize(a, b, opt_level="O1")`` alone on its line: (the Assign, "b")."""
        parent_of = self.context.analysis.tree.parents
        call = parent_of.get(call_or_attr)
        if not isinstance(call, cst.Call) or call.func is not call_or_attr:
            return None
        assign = parent_of.get(call)
        line = parent_of.get(assign) if assign is not None else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or assign.value is not call:
            return None
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        target = assign.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
            return None
        names = [dotted_name(element.value) for element in target.elements]
        positional = [arg for arg in call.args if arg.keyword is None]
        if any(arg.star for arg in call.args) or len(positional) != 2:
            return None
        if [dotted_name(arg.value) for arg in positional] != names or None in names:
            return None
        for arg in call.args:
            if arg.keyword is None:
                continue
            value = constant(arg.value)
            keyword = arg.keyword.value
            if not (
                (keyword == "opt_level" and value in OPT_LEVELS)
                or (keyword == "loss_scale" and value == "dynamic")
                or (keyword == "verbosity" and isinstance(value, int))
            ):
                return None
        return assign, str(names[1])

    def _scale_loss_block(
        self, attribute: cst.CSTNode, optimizer: str
    ) -> tuple[cst.With, str, cst.Call] | None:
        """``with amp.scale_loss(loss, optimizer) as s: s.backward(...)``: (with, "loss", backward)."""
        parent_of = self.context.analysis.tree.parents
        call = parent_of.get(attribute)
        item = parent_of.get(call) if call is not None else None
        statement = parent_of.get(item) if item is not None else None
        if not (isinstance(call, cst.Call) and isinstance(item, cst.WithItem) and isinstance(statement, cst.With)):
            return None
        if len(statement.items) != 1 or statement.asynchronous is not None or item.asname is None:
            return None
        alias = item.asname.name
        if not isinstance(alias, cst.Name) or len(call.args) != 2:
            return None
        loss, opt = call.args
        if loss.keyword or opt.keyword or loss.star or opt.star:
            return None
        if not isinstance(loss.value, cst.Name) or dotted_name(opt.value) != optimizer:
            return None
        body = statement.body
        if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
            return None
        line = body.body[0]
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        expression = line.body[0]
        if not (isinstance(expression, cst.Expr) and isinstance(expression.value, cst.Call)):
            return None
        backward = expression.value
        if not (
            isinstance(backward.func, cst.Attribute)
            and backward.func.attr.value == "backward"
            and isinstance(backward.func.value, cst.Name)
            and backward.func.value.value == alias.value
            and all(arg.keyword is not None for arg in backward.args)
        ):
            return None
        if count_names(self.context.analysis.tree.scope_of(statement), alias.value) != 2:
            return None  # the scaled loss is used elsewhere
        return statement, loss.value.value, backward


    def _optimizer_step(
        self, scope: cst.CSTNode, optimizer: str, after: cst.With
    ) -> tuple[cst.Call, cst.SimpleStatementLine] | None:
        tree = self.context.analysis.tree
        steps = [
            call
            for call in tree.index.calls
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "step"
            and dotted_name(call.func.value) == optimizer
            and tree.scope_of(call) is scope
        ]
        if len(steps) != 1 or steps[0].args:
            return None
        step = steps[0]
        parent_of = self.context.analysis.tree.parents
        expression = parent_of.get(step)
        line = parent_of.get(expression) if expression is not None else None
        if not (isinstance(expression, cst.Expr) and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
            return None
        if self.context.span(step)[0] < self.context.span(after)[1]:
            return None
        return step, line

    def _loss_region(
        self, statement: cst.With, loss: str, initialize: cst.Assign
    ) -> list[cst.SimpleStatementLine] | None:
        """The loss statement before the block and the contiguous assignments that feed it,
        up to the ``amp.initialize`` line (which the fix rewrites on its own)."""
        found = self.context.analysis.tree.statement_list(statement)
        if found is None:
            return None
        body, index = found
        position = next(
            (i for i in range(index - 1, -1, -1) if loss in assigned_names(body[i])),
            None,
        )
        loss_statement = body[position] if position is not None else None
        if not isinstance(loss_statement, cst.SimpleStatementLine):
            return None
        region = [loss_statement]
        needed = loaded_names(loss_statement)
        for candidate in reversed(body[: position or 0]):
            if not isinstance(candidate, cst.SimpleStatementLine) or not assigned_names(candidate) & needed:
                break
            if initialize in candidate.body:
                break
            if not all(isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)) for small in candidate.body):
                break
            region.insert(0, candidate)
            needed |= loaded_names(candidate)
        return region

    def _wrap_region(self, region: list[cst.SimpleStatementLine], torch: str) -> Edit | None:
        indent = self.context.indentation(region[0])
        located = reindent_statements(self.context, region, indent + indent_unit(self.context))
        if located is None:
            return None
        start, end, moved = located
        header = f'{indent}with {torch}.amp.autocast("cuda"):{self.context.source.newline}'
        return self.context.edit(start, end, header + moved)


    def _backward_edit(self, statement: cst.With, loss: str, backward: cst.Call, scaler: str) -> Edit | None:
        body = statement.body
        assert isinstance(body, cst.IndentedBlock)
        line = body.body[0]
        assert isinstance(line, cst.SimpleStatementLine)
        comments = [
            c.value
            for c in (body.header.comment, line.trailing_whitespace.comment)
            if c is not None
        ]
        if any(empty.comment is not None for empty in (*line.leading_lines, *body.footer)):
            return None  # comment lines inside the block: no place to keep them
        start, end = lines_of(self.context, statement)
        indent = self.context.indentation(statement)
        # The arguments as written; their continuation lines move out of the block with them.
        arguments = self.context.text[open_bracket(self.context, backward) + 1 : self.context.span(backward)[1]]
        if backward.args:
            if multiline_strings(self.context, backward):
                return None
            inner = self.context.indentation(line)
            arguments = "".join(
                indent + part[len(inner) :] if index and part.startswith(inner) else part
                for index, part in enumerate(arguments.splitlines(keepends=True))
            )
        text = f"{indent}{scaler}.scale({loss}).backward({arguments}"
        if comments:
            text += "  " + "  ".join(comments)
        return self.context.edit(start, end, text + self.context.source.newline)

    def _torch_name(self, at: cst.CSTNode, apex_import: cst.CSTNode) -> tuple[str, list[Edit]] | None:
        """``torch`` as the fix may write it at ``at``, with the edits that remove the apex
        import (and bind torch in its place when it is not bound)."""
        removal = self._import_removal(apex_import)
        if removal is None:
            return None
        assert isinstance(apex_import, (cst.Import, cst.ImportFrom))
        bound = Importer(self.context).bind_module("torch", at, replacing=apex_import)
        if bound is None:
            return None
        name, edits = bound
        return name, [*edits, removal]

    def _import_removal(self, statement: cst.CSTNode) -> Edit | None:
        """Delete the apex import: it must be ``from apex import amp`` or ``import apex.amp as amp`` alone."""
        if isinstance(statement, cst.ImportFrom):
            names = statement.names
            if isinstance(names, cst.ImportStar) or len(names) != 1:
                return None
            aliases = {alias.evaluated_alias or alias.evaluated_name for alias in names}
        elif isinstance(statement, cst.Import):
            if len(statement.names) != 1 or statement.names[0].asname is None:
                return None
            aliases = {statement.names[0].evaluated_alias or ""}
        else:
            return None
        return Importer(self.context).remove_names(statement, aliases)

    def _name_free(self, name: str, at: cst.CSTNode, scope: cst.CSTNode) -> bool:
        return self.context.analysis.bindings.is_free(name, at) and count_names(scope, name) == 0
