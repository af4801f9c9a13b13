from __future__ import annotations

import itertools
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ImportAssignment

from amplint.analysis.context import RuleContext
from amplint.analysis.torch_api import (
    AUTOCAST,
    CUSTOM_BWD,
    CUSTOM_FWD,
    DEPRECATED_AUTOCAST_ORDER,
    DEPRECATED_MODULES,
    DEPRECATED_NAMESPACES,
    DEPRECATED_SINCE,
    GRAD_SCALER,
    NOT_DEPRECATED_MEMBERS,
    AmpSymbol,
    is_modern_amp,
    symbol,
)
from amplint.diagnostics import Applicability, Edit, Fix
from amplint.fixes.calls import CallEdits
from amplint.fixes.edits import combine_insertions
from amplint.fixes.importer import Importer, bound_name
from amplint.rules.base import AnalysisRule, Invalid

# unittest's isinstance assertions take the type second, like isinstance itself.
TYPE_ASSERTIONS = frozenset({"assertIsInstance", "assertNotIsInstance"})


def _namespace_member(qualified: str) -> tuple[str, str] | None:
    for namespace in DEPRECATED_NAMESPACES:
        if qualified.startswith(namespace + "."):
            return namespace, qualified[len(namespace) + 1 :]
    return None


@dataclass
class Plan:
    """What to report for one deprecated reference, and how to fix it (edits None: no fix)."""

    node: cst.CSTNode
    message: str
    fix_message: str = ""
    edits: list[Edit] | None = None
    isolation: str | None = None
    unsafe: bool = False


class DeprecatedAmpNamespace(AnalysisRule, code="AMP001", name="deprecated-amp-namespace", summary="Deprecated `torch.cuda.amp` / `torch.cpu.amp` API", fix=Applicability.SAFE):
    """## What it does
    Flags every use of the `torch.cuda.amp` and `torch.cpu.amp` APIs that PyTorch 2.4
    deprecated: `autocast`, `GradScaler`, `custom_fwd` and `custom_bwd` — called, used
    as decorators, passed around as values, used as types, or imported by name — in any
    spelling (`import torch as th`, `from torch.cuda import amp`,
    `import torch.cuda.amp as amp`, `from torch.cuda.amp import autocast as ac`).
    Other members of those namespaces used as values (`torch.cuda.amp.autocast_mode._cast`)
    are flagged without a fix.

    Not flagged: module imports themselves (`from torch.cuda import amp`: their uses are
    flagged), assignments to these names (monkeypatching), `torch.cuda.amp.common`
    (not deprecated), names shadowed by a local binding or bound differently on
    different paths, and compatibility fallbacks: an `except` clause whose `try` uses
    `torch.amp`, an `if`/`else` branch whose sibling does, or code after an `if` that
    returns the `torch.amp` form (EIGN: `if hasattr(torch.amp, "GradScaler"): return
    torch.amp.GradScaler(...)`, then `return torch.cuda.amp.GradScaler(...)`). Nor code
    held to a torch older than 2.4 by what it imports: a module torch has dropped, imported
    without an `ImportError` fallback, in the file or in a project module it imports at
    module level (MAE's copied `from torch._six import inf` in `util/misc.py`: torch 2.0
    dropped `torch._six`; ssacl, round AQ; this page's decision, as the target torch's
    readings are).

    ## Why is this bad?
    Every call emits a `FutureWarning`, and the namespaces are slated for removal. The
    replacements in `torch.amp` take the device type as an argument, which is what
    makes mixed-precision code portable. Migrating by hand is error-prone: the old
    `autocast(enabled, dtype, cache_enabled)` and the new
    `autocast(device_type, dtype, enabled, cache_enabled)` differ in positional order,
    so `torch.cuda.amp.autocast(True)` is *not* `torch.amp.autocast("cuda", True)`
    (that passes `True` as the dtype); and `torch.amp.GradScaler()` defaults to
    `"cuda"` even where the old code used `torch.cpu.amp.GradScaler`.

    ## Example
    ```python
    import torch

    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(True, torch.bfloat16):
        pass
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16):
        pass
    ```

    ## Fix safety
    Safe: each rewrite constructs an object with exactly the same settings.
    - autocast calls: the device type is inserted and every old positional argument
      becomes its keyword; a call with `*args` is flagged without a fix.
    - `GradScaler(...)` → `torch.amp.GradScaler("cuda"|"cpu", <same arguments>)`.
    - A string as the first positional argument (`autocast("cuda")`, `GradScaler("cuda")`
      of the old namespace) is `enabled` or `init_scale` there, which raises once used:
      the message says so and no fix is offered, since keeping `enabled="cuda"` would
      spell out the bug (amplint's decision, round BI).
    - `custom_fwd`/`custom_bwd`, bare or called → `torch.amp.custom_fwd(device_type="cuda", ...)`
      (a function passed positionally stays positional).
    - references used as values → `functools.partial(torch.amp.autocast, "cuda")` (a
      `functools.partial` of the old name gets its arguments merged instead). A value
      handed to some other callable (a factory or registry argument) gets the same
      rewrite as an *unsafe* fix, a decision of amplint's stricter than the catalog: the
      callee may read `__name__` or test the type, and a partial is no class
      (RT-DETR's `register()(amp.grad_scaler.GradScaler)` fails at import with it). When the
      value is bound to a name that this file calls with positional arguments, no fix
      is offered: through the partial, `f(True)` would pass `True` as the dtype.
    - references used as types (`isinstance`, `issubclass`, unittest's
      `assertIsInstance`, annotations, `except`) → the `torch.amp` class; a base class,
      or a reference inside a tuple or list (often a tuple of types for `isinstance`,
      where a `partial` would break), or one compared as an object
      (`func is torch.cuda.amp.autocast`: a new partial is never that object), is not
      rewritten. `getattr(torch.cuda.amp, "autocast") is not None`, or a `getattr` in a
      `try` that catches `AttributeError`, probes whether native AMP exists and is not
      reported.
    - `from torch.cuda.amp import X` is removed once every use of `X` is rewritten (a use
      silenced with `# noqa` keeps it), as is a module alias such as
      `import torch.cuda.amp as amp`; `import torch` / `import functools` are added once
      when needed. If `torch` is bound to something else, no fix is offered.
    """

    triggers = frozenset({"amp"})
    # Pre-filter: the deprecated namespaces are torch.cuda.amp and torch.cpu.amp.
    requires = (frozenset({"cuda", "cpu"}),)

    VALID = (
        # `torch._six` went in torch 2.0: this code runs on torch 1.x (MAE's util/misc.py).
        """
        import torch
        from torch._six import inf

        scaler = torch.cuda.amp.GradScaler()
        """,
        # A fallback after an early return of the replacement (EIGN).
        """
        import torch

        def make_scaler(device_type, enabled):
            if hasattr(torch.amp, "GradScaler"):
                return torch.amp.GradScaler(device_type, enabled=enabled)
            return torch.cuda.amp.GradScaler(enabled=enabled)
        """,
        # A probe for native AMP, not a use (poolformer, old timm).
        """
        import torch
        has_native_amp = False
        try:
            if getattr(torch.cuda.amp, 'autocast') is not None:
                has_native_amp = True
        except AttributeError:
            pass
        """,
        """
        import torch
        with torch.amp.autocast('cuda'):
            pass
        scaler = torch.amp.GradScaler('cuda')
        """,
        """
        import torch
        with torch.autocast(device_type='cuda', dtype=torch.bfloat16):
            pass
        """,
        "from torch.cuda import amp\n",
        "import torch.cuda.amp as amp\n",
        """
        import torch
        torch.cuda.amp.autocast = None
        """,
        """
        import torch
        ok = torch.cuda.amp.common.amp_definitely_not_available()
        """,
        """
        try:
            from torch.amp import custom_fwd
        except ImportError:
            from torch.cuda.amp import custom_fwd

        @custom_fwd
        def f(x):
            return x
        """,
        """
        import torch
        if hasattr(torch.amp, 'GradScaler'):
            scaler = torch.amp.GradScaler('cuda')
        else:
            scaler = torch.cuda.amp.GradScaler()
        """,
        # The top-level alias torch.GradScaler is the replacement too (RULES.md rev 4).
        """
        import torch
        if hasattr(torch, 'GradScaler'):
            scaler = torch.GradScaler('cuda')
        else:
            scaler = torch.cuda.amp.GradScaler()
        """,
        """
        import torch

        def f(torch):
            return torch.cuda.amp.autocast()
        """,
        """
        import torch

        def f(autocast):
            with autocast():
                pass
        """,
        """
        import torch
        s = 'torch.cuda.amp.autocast()'  # torch.cuda.amp.GradScaler()
        """,
        """
        import torch
        x = torch.cuda.amp
        """,
    )
    INVALID = (
        # A type in a `|` union annotation stays a type (EIGN; `functools.partial(...) | None`
        # would raise at import without `from __future__ import annotations`).
        Invalid(
            """
              import torch

              def make(enabled):
            -     return torch.cuda.amp.GradScaler(enabled=enabled)
            +     return torch.amp.GradScaler("cuda", enabled=enabled)

            - def step(scaler: torch.cuda.amp.GradScaler | None, loss):
            + def step(scaler: torch.amp.GradScaler | None, loss):
                  if scaler is not None:
                      scaler.scale(loss).backward()
            """,
            count=2, line=4, column=12, message="deprecated",
        ),
        Invalid(
            """
              import torch
            - with torch.cuda.amp.autocast(True):
            + with torch.amp.autocast("cuda", enabled=True):
                  pass
            """,
            line=2, column=6, message='use `torch.amp.autocast("cuda", ...)`',
        ),
        Invalid(
            """
              import torch
            - with torch.cpu.amp.autocast(False, torch.bfloat16, True):
            + with torch.amp.autocast("cpu", enabled=False, dtype=torch.bfloat16, cache_enabled=True):
                  pass
            """,
            line=2, column=6, message='use `torch.amp.autocast("cpu", ...)`',
        ),
        Invalid(
            """
              import torch
            - with torch.cuda.amp.autocast(dtype=torch.float16, enabled=use_amp):
            + with torch.amp.autocast("cuda", dtype=torch.float16, enabled=use_amp):
                  pass
            """,
            line=2, column=6, message='use `torch.amp.autocast("cuda", ...)`',
        ),
        Invalid(
            """
            import torch
            args = (True,)
            with torch.cuda.amp.autocast(*args):
                pass
            """,
            fixed=None,
            line=3, column=6, message="`torch.cuda.amp.autocast(...)` is deprecated",
        ),
        Invalid(
            """
              import torch
            - scaler = torch.cuda.amp.GradScaler(2.0**10, enabled=True)
            + scaler = torch.amp.GradScaler("cuda", 2.0**10, enabled=True)
            """,
            line=2, column=10, message='use `torch.amp.GradScaler("cuda", ...)`',
        ),
        Invalid(
            """
              import torch
            - scaler = torch.cpu.amp.GradScaler()
            + scaler = torch.amp.GradScaler("cpu")
            """,
            line=2, column=10, message='use `torch.amp.GradScaler("cpu", ...)`',
        ),
        Invalid(
            """
              import torch as th
            - scaler = th.cuda.amp.GradScaler()
            + scaler = th.amp.GradScaler("cuda")
            """,
            line=2, column=10, message="`torch.cuda.amp.GradScaler(...)` is deprecated",
        ),
        Invalid(
            """
            - from torch.cuda.amp import autocast, GradScaler
            + import torch

            - scaler = GradScaler()
            - with autocast():
            + scaler = torch.amp.GradScaler("cuda")
            + with torch.amp.autocast("cuda"):
                  pass
            """,
            count=3,
            line=1, column=1, message="`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler` are deprecated",
        ),
        Invalid(
            """
              import os
            - from torch.cuda.amp import autocast as ac
            + import torch

            - with ac(enabled=False):
            + with torch.amp.autocast("cuda", enabled=False):
                  pass
            """,
            line=2, column=1, message="`torch.cuda.amp.autocast` is deprecated; use `torch.amp`",
        ),
        Invalid(
            """
            - import torch.cuda.amp as amp
            + import torch

            - with amp.autocast():
            + with torch.amp.autocast("cuda"):
                  pass
            """,
            line=3, column=6, message='use `torch.amp.autocast("cuda", ...)`',
        ),
        Invalid(
            """
              import torch
            - from torch.cuda import amp

            - scaler = amp.GradScaler(enabled=True)
            + scaler = torch.amp.GradScaler("cuda", enabled=True)
            """,
            line=4, column=10, message="`torch.cuda.amp.GradScaler(...)` is deprecated",
        ),
        Invalid(
            """
              import torch
            - from torch.cuda.amp import custom_fwd, custom_bwd

              class F(torch.autograd.Function):
                  @staticmethod
            -     @custom_fwd
            +     @torch.amp.custom_fwd(device_type="cuda")
                  def forward(ctx, x):
                      return x

                  @staticmethod
            -     @custom_bwd
            +     @torch.amp.custom_bwd(device_type="cuda")
                  def backward(ctx, g):
                      return g
            """,
            line=2, column=1, message="`torch.cuda.amp.custom_fwd`, `torch.cuda.amp.custom_bwd` are deprecated",
        ),
        Invalid(
            """
              import torch

            - @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
            + @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
              def f(x):
                  return x
            """,
            line=3, column=2, message='use `torch.amp.custom_fwd(device_type="cuda", ...)`',
        ),
        Invalid(
            """
              import torch

              def f(x):
                  return x

            - g = torch.cuda.amp.custom_fwd(f)
            + g = torch.amp.custom_fwd(f, device_type="cuda")
            """,
            line=6, column=5, message='use `torch.amp.custom_fwd(device_type="cuda", ...)`',
        ),
        Invalid(
            """
              import contextlib
            + import functools
              import torch

            - ctx = torch.cuda.amp.autocast if use_amp else contextlib.nullcontext
            + ctx = functools.partial(torch.amp.autocast, "cuda") if use_amp else contextlib.nullcontext
            """,
            line=4, column=7, message="`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast`",
        ),
        Invalid(
            """
              import functools
              import torch

            - ctx = functools.partial(torch.cuda.amp.autocast, True, dtype=torch.bfloat16)
            + ctx = functools.partial(torch.amp.autocast, "cuda", enabled=True, dtype=torch.bfloat16)
            """,
            line=4, column=25, message="`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast`",
        ),
        Invalid(
            """
              import torch

            - def save(s: torch.cuda.amp.GradScaler) -> None:
            -     assert isinstance(s, (torch.cuda.amp.GradScaler, int))
            + def save(s: torch.amp.GradScaler) -> None:
            +     assert isinstance(s, (torch.amp.GradScaler, int))
            """,
            count=2,
            line=3, column=13, message="`torch.cuda.amp.GradScaler` is deprecated; use `torch.amp.GradScaler`",
        ),
        Invalid(
            """
            import torch
            factory = torch.cuda.amp.autocast
            with factory(True):
                pass
            """,
            fixed=None,
            line=2, column=11, message="called with positional arguments",
        ),
        Invalid(
            """
              import unittest
              import torch

              class T(unittest.TestCase):
                  def test(self):
            -         self.assertIsInstance(make(), torch.cuda.amp.GradScaler)
            +         self.assertIsInstance(make(), torch.amp.GradScaler)
            """,
            line=6, column=39, message="`torch.cuda.amp.GradScaler` is deprecated; use `torch.amp.GradScaler`",
        ),
        Invalid(
            """
            import torch
            SCALERS = (torch.cuda.amp.GradScaler, MyScaler)
            """,
            fixed=None,
            line=2, column=12, message="inside a collection: migrate by hand",
        ),
        # Compared as an object (torch's _dynamo): a partial would make the test False.
        Invalid(
            """
            import torch

            def is_amp(func):
                return func is torch.cuda.amp.autocast
            """,
            fixed=None,
            line=4, column=20, message="compared as an object: migrate by hand",
        ),
        # A registry argument: the partial is offered, but as an unsafe fix (RT-DETR).
        Invalid(
            """
            - import torch.cuda.amp as amp
            + import functools
            + import torch

            - GradScaler = register()(amp.grad_scaler.GradScaler)
            + GradScaler = register()(functools.partial(torch.amp.GradScaler, "cuda"))
            """,
            unsafe=True,
            line=3, column=25, message="`torch.cuda.amp.grad_scaler.GradScaler` is deprecated",
        ),
        Invalid(
            """
            import torch

            class MyScaler(torch.cuda.amp.GradScaler):
                pass
            """,
            fixed=None,
            line=3, column=16, message="subclassing it: migrate the base class by hand",
        ),
        Invalid(
            """
            import torch
            f = torch.cuda.amp.autocast_mode._cast
            """,
            fixed=None,
            line=2, column=5, message="`torch.cuda.amp.autocast_mode._cast` belongs to the deprecated `torch.cuda.amp` namespace",
        ),
        Invalid(
            """
            import torch
            ac = getattr(torch.cuda.amp, 'autocast')
            """,
            fixed=None,
            line=2, column=6, message="`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast`",
        ),
        Invalid(
            # A use silenced with noqa keeps the import it needs.
            """
            + import torch
              from torch.cuda.amp import autocast

              with autocast():  # noqa: AMP001
                  pass
            - with autocast(True):
            + with torch.amp.autocast("cuda", enabled=True):
                  pass
            """,
            count=2,
            line=1, column=1, message="`torch.cuda.amp.autocast` is deprecated; use `torch.amp`",
        ),
        Invalid(
            # Shadowed by a parameter: only the (now unused) import is deprecated, and it goes.
            """
            - from torch.cuda.amp import autocast

              def f(autocast):
                  with autocast():
                      pass
            """,
            count=1,
            line=1, column=1, message="`torch.cuda.amp.autocast` is deprecated; use `torch.amp`",
        ),
        Invalid(
            """
            torch = 'not the module'
            from torch.cuda.amp import GradScaler
            s = GradScaler()
            """,
            fixed=None,
            count=2,
            line=2, column=1, message="`torch.cuda.amp.GradScaler` is deprecated; use `torch.amp`",
        ),
    )


    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._import_depth = 0
        self._importer = Importer(context)
        # Code that must run on a torch older than 2.4 has nothing to migrate to yet.
        self._deprecated = context.project.torch_has(DEPRECATED_SINCE)

    def report(self, node: cst.CSTNode, message: str | None = None, *, fix: Fix | None = None) -> None:
        if self.code_predates(DEPRECATED_SINCE):
            return  # code held to an older torch by what it imports (ssacl's `torch._six`)
        super().report(node, message, fix=fix)

    # -- traversal ------------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        self._import_depth += 1

    def leave_Import(self, original_node: cst.Import) -> None:
        self._import_depth -= 1

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import_depth += 1
        if self._deprecated:
            self._check_import_from(node)

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._import_depth -= 1

    def visit_Name(self, node: cst.Name) -> None:
        if self._deprecated:
            self._check_reference(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._deprecated:
            self._check_reference(node)

    def visit_Call(self, node: cst.Call) -> None:
        if not self._deprecated:
            return
        # getattr(torch.cuda.amp, "autocast"): a deprecated member fetched by name.
        if self.qualified_name(node.func) != "getattr" or len(node.args) < 2:
            return
        target, attribute = node.args[0].value, node.args[1].value
        if self.qualified_name(target) in DEPRECATED_NAMESPACES and isinstance(attribute, cst.SimpleString):
            member = attribute.evaluated_value
            if (
                isinstance(member, str)
                and member not in NOT_DEPRECATED_MEMBERS
                and not self._in_compat(node)
                and not self._is_probe(node)
            ):
                namespace = self.qualified_name(target)
                self.report(node, f"`{namespace}.{member}` is deprecated; use `torch.amp.{member}`")

    def _is_probe(self, node: cst.Call) -> bool:
        """``getattr(torch.cuda.amp, "autocast") is not None`` (or a getattr inside a ``try``
        that catches AttributeError): a test for whether native AMP exists, which fetching
        the attribute does not deprecate (poolformer, old timm)."""
        parent = self._parent(node)
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return True
        for ancestor in self.context.analysis.tree.ancestors(node):
            if isinstance(ancestor, cst.Try) and any(
                handler.type is not None and "AttributeError" in self.context.module.code_for_node(handler.type)
                for handler in ancestor.handlers
            ):
                return self.context.analysis.tree.within(node, ancestor.body)
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                break
        return False

    # -- references ------------------------------------------------------------------------

    def _parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.context.analysis.tree.parent(node)

    def _in_compat(self, node: cst.CSTNode) -> bool:
        return self.context.analysis.compat.in_fallback(node, is_modern_amp)

    def _check_reference(self, node: cst.Name | cst.Attribute) -> None:
        if self._import_depth:
            return
        parent = self._parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # only the outermost name of a dotted chain denotes the symbol
        plan = self._plan(node)
        if plan is not None:
            fix = None
            if plan.edits is not None:
                applicability = Applicability.UNSAFE if plan.unsafe else None
                fix = self.make_fix(plan.fix_message, plan.edits, isolation=plan.isolation, applicability=applicability)
            self.report(plan.node, plan.message, fix=fix)

    def _plan(self, node: cst.Name | cst.Attribute) -> Plan | None:
        qualified = self.qualified_name(node)
        if qualified is None:
            return None
        split = _namespace_member(qualified)
        if split is None:
            return None
        namespace, member = split
        deprecated = _deprecated(qualified)
        if deprecated is None and (member in NOT_DEPRECATED_MEMBERS or member.startswith("common.")):
            return None
        if self._is_assignment_target(node) or self._in_compat(node):
            return None
        if deprecated is None:
            return Plan(node, f"`{qualified}` belongs to the deprecated `{namespace}` namespace")
        return self._plan_symbol(node, qualified, deprecated)

    def _is_assignment_target(self, node: cst.CSTNode) -> bool:
        parent = self._parent(node)
        if isinstance(parent, (cst.AssignTarget, cst.Del)):
            return True
        return isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node

    def _plan_symbol(
        self,
        node: cst.Name | cst.Attribute,
        qualified: str,
        found: AmpSymbol,
        *,
        with_cleanup: bool = True,
    ) -> Plan:
        new_name = f"torch.{found.replacement}"
        parent = self._parent(node)
        grandparent = self._parent(parent) if parent is not None else None
        plan = Plan(node, f"`{qualified}` is deprecated; use `{new_name}`")
        # Bind torch where the deprecated import stood, so the import block stays in order.
        binding = self.context.analysis.bindings.import_binding(node)
        replacing = binding.node if binding is not None and isinstance(binding.node, (cst.Import, cst.ImportFrom)) else None
        torch = self._importer.bind_module("torch", node, replacing=replacing)
        if torch is None:
            return plan
        torch_name, torch_edits = torch
        new_func = cst.parse_expression(f"{torch_name}.{found.replacement}")

        if isinstance(parent, cst.Call) and parent.func is node:
            call_edits = self._call_edits(parent, found, self.context.module.code_for_node(new_func))
            plan.node = parent
            plan.message = f"`{qualified}(...)` is deprecated; use `{_call_hint(found)}`"
            if found.kind in (AUTOCAST, GRAD_SCALER) and _string_first(parent):
                parameter = "enabled" if found.kind == AUTOCAST else "init_scale"
                plan.message += f" (its first argument is `{parameter}` here, not a device type: a string there is a bug)"
            if call_edits is not None:
                plan.fix_message = f"Replace with `{_call_hint(found)}`"
                plan.edits = [*call_edits, *torch_edits]
        elif isinstance(parent, cst.Decorator) and parent.decorator is node:
            if found.kind in (CUSTOM_FWD, CUSTOM_BWD):
                replacement = f'{torch_name}.{found.replacement}(device_type="{found.implied_device}")'
                plan.fix_message = f"Replace with `{replacement}`"
                plan.edits = [self.context.replace(node, replacement), *torch_edits]
        elif self._is_base_class(parent, grandparent):
            plan.message += " (subclassing it: migrate the base class by hand)"
        elif self._is_type_use(node):
            if found.kind in (AUTOCAST, GRAD_SCALER):
                plan.fix_message = f"Replace with `{new_name}`"
                plan.edits = [self.context.replace(node, new_func), *torch_edits]
        else:
            self._plan_value(node, found, new_func, plan, torch_edits)
        if plan.edits is not None and with_cleanup:
            plan.isolation, extra = self._binding_cleanup(node)
            plan.edits.extend(extra)
        if plan.edits is not None:
            plan.edits = combine_insertions(self.context, plan.edits)
        return plan

    def _plan_value(
        self,
        node: cst.CSTNode,
        found: AmpSymbol,
        new_func: cst.BaseExpression,
        plan: Plan,
        torch_edits: list[Edit],
    ) -> None:
        parent = self._parent(node)
        if isinstance(parent, cst.Element):
            # (GradScaler, Other) is usually a tuple of types for isinstance: a partial there
            # would break it, and a class would break a factory. Leave it to the author.
            plan.message += " (inside a collection: migrate by hand)"
            return
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            # `func is torch.cuda.amp.autocast`: a new partial is never that object, so the
            # test would turn False (torch's own dynamo code compares this way).
            plan.message += " (compared as an object: migrate by hand)"
            return
        call = self._parent(parent) if isinstance(parent, cst.Arg) else None
        if (
            isinstance(call, cst.Call)
            and call.args
            and call.args[0] is parent
            and parent.keyword is None
            and self.qualified_name(call.func) == "functools.partial"
        ):
            merged = self._call_edits(call, found, self.context.module.code_for_node(new_func), partial=True)
            if merged is not None:
                plan.fix_message = "Merge the arguments into `functools.partial(torch.amp....)`"
                plan.edits = [*merged, *torch_edits]
            return
        if self._alias_called_positionally(node):
            plan.message += " (its alias is called with positional arguments, which mean other parameters in `torch.amp`: migrate by hand)"
            return
        binding = self._importer.bind_module("functools", node)
        if binding is None:
            return
        functools_name, functools_edits = binding
        if isinstance(parent, cst.Arg):
            # Handed to a callable that may read `__name__` or test the type (a registry's
            # `register()(GradScaler)`: RT-DETR fails at import): a partial is no class.
            plan.unsafe = True
        device = (
            f'"{found.implied_device}"'
            if found.kind in (AUTOCAST, GRAD_SCALER)
            else f'device_type="{found.implied_device}"'
        )
        replacement = f"{functools_name}.partial({self.context.module.code_for_node(new_func)}, {device})"
        plan.fix_message = f"Replace with `{replacement}`"
        plan.edits = [self.context.replace(node, replacement), *torch_edits, *functools_edits]

    def _alias_called_positionally(self, node: cst.CSTNode) -> bool:
        """Is the value bound to a name that this file calls with positional arguments?

        ``f = torch.cuda.amp.autocast; f(True)`` would become ``autocast("cuda", True)``
        through a ``partial``, passing True as the dtype.
        """
        child: cst.CSTNode = node
        parent = self._parent(node)
        while isinstance(parent, (cst.IfExp, cst.BooleanOperation)):
            child, parent = parent, self._parent(parent)
        if not isinstance(parent, (cst.Assign, cst.AnnAssign)) or parent.value is not child:
            return False
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        for target in targets:
            if not isinstance(target, cst.Name):
                return True  # an attribute or tuple target escapes this analysis
            for assignment in self.context.analysis.bindings.of(target):
                for access in assignment.references:
                    call = self._parent(access.node)
                    if (
                        isinstance(call, cst.Call)
                        and call.func is access.node
                        and any(arg.keyword is None and arg.star != "**" for arg in call.args)
                    ):
                        return True
        return False

    def _call_edits(
        self, call: cst.Call, found: AmpSymbol, new_func: str, *, partial: bool = False
    ) -> list[Edit] | None:
        """Edits that make the device explicit and remap the arguments to the new signature,
        touching nothing else of the call (its layout stays), or None when that cannot be
        done exactly. ``partial``: ``call`` is ``functools.partial(<old>, ...)``, whose
        first argument is the reference and whose other arguments are the old call's."""
        editor = CallEdits(self.context, call)
        first = 1 if partial else 0
        args = list(call.args[first:])
        device = f'"{found.implied_device or "cuda"}"'
        # Prepending the device keeps GradScaler's positional order, even through *args;
        # for the others an unpacked sequence could not be mapped to keywords.
        if found.kind != GRAD_SCALER and any(arg.star == "*" for arg in args):
            return None
        positional = [arg for arg in args if arg.keyword is None and not arg.star]
        keywords = {arg.keyword.value for arg in args if arg.keyword is not None}
        if not partial and _string_first(call):
            # `torch.cuda.amp.autocast("cuda")`: a string where `enabled` (or GradScaler's
            # `init_scale`) goes, which raises on CUDA. Keeping it as `enabled="cuda"` would
            # spell out the bug; the author meant a device type (Intro_Deep_Learning, round BI).
            return None
        if found.kind == AUTOCAST:
            # The old positional order differs from the new one: every positional argument
            # becomes its keyword.
            if len(positional) > len(DEPRECATED_AUTOCAST_ORDER) or "device_type" in keywords:
                return None
            editor.add(first, device)
            for name, arg in zip(DEPRECATED_AUTOCAST_ORDER, positional, strict=False):
                if name in keywords:
                    return None
                editor.keyword(arg, name)
        elif found.kind == GRAD_SCALER:
            if "device" in keywords:
                return None
            editor.add(first, device)
        else:
            if "device_type" in keywords:
                return None
            # After the positional arguments (a decorated function stays positional).
            editor.add(first + len(positional), f"device_type={device}")
        if partial:
            editor.replace_node(call.args[0].value, new_func)
        else:
            editor.rename(new_func)
        edit = editor.edit()
        return [edit] if edit is not None else None

    def _is_base_class(self, parent: cst.CSTNode | None, grandparent: cst.CSTNode | None) -> bool:
        return (
            isinstance(parent, cst.Arg)
            and isinstance(grandparent, cst.ClassDef)
            and parent in grandparent.bases
        )

    def _is_type_use(self, node: cst.CSTNode) -> bool:
        child: cst.CSTNode = node
        parent = self._parent(node)
        while parent is not None:
            if isinstance(parent, cst.Annotation):
                return True
            if isinstance(parent, cst.ExceptHandler):
                return parent.type is child
            if isinstance(
                parent, (cst.Tuple, cst.Element, cst.Subscript, cst.SubscriptElement, cst.Index)
            ) or (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.BitOr)):
                # `X | None` in an annotation is a type too (EIGN's `scaler: GradScaler | None`).
                child, parent = parent, self._parent(parent)
                continue
            if isinstance(parent, cst.Arg):
                call = self._parent(parent)
                if not isinstance(call, cst.Call) or len(call.args) < 2 or call.args[1] is not parent:
                    return False
                return self.qualified_name(call.func) in ("isinstance", "issubclass") or (
                    isinstance(call.func, cst.Attribute) and call.func.attr.value in TYPE_ASSERTIONS
                )
            if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            return False
        return False

    # -- the import a rewritten reference leaves behind ---------------------------------------

    def _binding_cleanup(self, node: cst.CSTNode) -> tuple[str | None, list[Edit]]:
        """Isolation key and import-removal edits for the import that binds this reference."""
        assignment = self.context.analysis.bindings.import_binding(node)
        statement = assignment.node if assignment is not None else None
        if assignment is None or not isinstance(statement, (cst.Import, cst.ImportFrom)):
            return None, []
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        bound = cst.ensure_type(root, cst.Name).value
        # Uses and the removal of their import form one all-or-nothing group, so that
        # no pass can remove an import that a not-yet-rewritten use still needs.
        key = self._import_key(statement)
        if isinstance(statement, cst.ImportFrom) and _from_module(statement) in DEPRECATED_MODULES:
            # The import's own diagnostic carries the removal.
            return (key, []) if self._all_uses_fixable(assignment, safely=True) else (None, [])
        if _imports_deprecated_module(statement, bound) and self._all_uses_fixable(assignment):
            removal = self._importer.remove_names(statement, {bound})
            if removal is not None:
                return key, [removal]
        return None, []

    def _all_uses_fixable(self, assignment: ImportAssignment, *, safely: bool = False) -> bool:
        """Can every use of this import be rewritten in one pass (none silenced, none nested),
        with fixes of one safety (``safely``: safe ones)?"""
        if not assignment.references:
            return False
        spans: list[tuple[int, int]] = []
        unsafe: set[bool] = set()
        for access in assignment.references:
            use = access.node
            if not isinstance(use, cst.Name):
                return False
            outer: cst.CSTNode = use
            parent = self._parent(outer)
            while isinstance(parent, cst.Attribute) and parent.value is outer:
                outer, parent = parent, self._parent(parent)
            if not isinstance(outer, (cst.Name, cst.Attribute)):
                return False
            qualified = self.qualified_name(outer)
            found = _deprecated(qualified)
            if found is None or self._in_compat(outer):
                return False
            plan = self._plan_symbol(outer, qualified or "", found, with_cleanup=False)
            if plan.edits is None or self.context.is_suppressed(self.code, plan.node):
                return False
            unsafe.add(plan.unsafe)
            spans.append(self.context.span(plan.node))
        if len(unsafe) > 1 or (safely and True in unsafe):
            # A safe fix must not take the import away from a use that only an unsafe fix
            # rewrites: `--fix` would leave `amp.autocast` unbound (CVlization's
            # torch_em_trainer passes `amp.autocast` as a value; round BK).
            return False
        spans.sort()
        return all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))

    # -- from torch.cuda.amp import ... ------------------------------------------------------------

    def _check_import_from(self, node: cst.ImportFrom) -> None:
        module = _from_module(node)
        if module not in DEPRECATED_MODULES or self._in_compat(node):
            return
        if isinstance(node.names, cst.ImportStar):
            self.report(
                node, f"`from {module} import *` imports deprecated AMP APIs; use `torch.amp`"
            )
            return
        deprecated = [
            alias
            for alias in node.names
            if _deprecated(f"{module}.{cst.helpers.get_full_name_for_node(alias.name)}")
        ]
        if not deprecated:
            return
        listed = ", ".join(f"`{module}.{alias.evaluated_name}`" for alias in deprecated)
        message = f"{listed} {'is' if len(deprecated) == 1 else 'are'} deprecated; use `torch.amp`"
        removable: list[str] = []
        for alias in deprecated:
            local = bound_name(alias)
            assignments = self.context.analysis.bindings.imports_of(node, local)
            # The removal is a safe fix of its own: a name whose uses only unsafe fixes
            # rewrite stays until they have run (the next round then finds it unused).
            if len(assignments) == 1 and (
                not assignments[0].references or self._all_uses_fixable(assignments[0], safely=True)
            ):
                removable.append(local)
        edit = self._importer.remove_names(node, set(removable)) if removable else None
        if edit is None:
            self.report(node, message)
            return
        fix = self.make_fix(
            "Remove the deprecated import (its uses are rewritten to `torch.amp`)",
            [edit],
            isolation=self._import_key(node),
        )
        self.report(node, message, fix=fix)

    def _import_key(self, statement: cst.Import | cst.ImportFrom) -> str:
        return f"{self.code}:import@{self.context.span(statement)[0]}"


def _deprecated(qualified: str | None) -> AmpSymbol | None:
    found = symbol(qualified)
    return found if found is not None and found.deprecated else None


def _call_hint(found: AmpSymbol) -> str:
    if found.kind in (CUSTOM_FWD, CUSTOM_BWD):
        return f'torch.{found.replacement}(device_type="{found.implied_device}", ...)'
    return f'torch.{found.replacement}("{found.implied_device}", ...)'


def _from_module(node: cst.ImportFrom) -> str | None:
    if node.relative or node.module is None:
        return None
    return cst.helpers.get_full_name_for_node(node.module)


def _imports_deprecated_module(statement: cst.CSTNode, bound: str) -> bool:
    """Does ``statement`` bind ``bound`` to a deprecated AMP module (``import torch.cuda.amp
    as amp``, ``from torch.cuda import amp``)?"""
    if isinstance(statement, cst.Import):
        for alias in statement.names:
            full = cst.helpers.get_full_name_for_node(alias.name)
            if alias.asname is not None and full in DEPRECATED_MODULES:
                return cst.ensure_type(alias.asname.name, cst.Name).value == bound
        return False
    if isinstance(statement, cst.ImportFrom) and not isinstance(statement.names, cst.ImportStar):
        module = _from_module(statement)
        for alias in statement.names:
            full = f"{module}.{cst.helpers.get_full_name_for_node(alias.name)}"
            if full in DEPRECATED_MODULES and bound_name(alias) == bound:
                return True
    return False


def _string_first(call: cst.Call) -> bool:
    """Is the call's first positional argument a string literal?"""
    first = next((arg for arg in call.args if arg.keyword is None and not arg.star), None)
    return first is not None and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
