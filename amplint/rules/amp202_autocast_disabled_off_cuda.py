from __future__ import annotations

import libcst as cst

from amplint.analysis.autocast import AutocastUse
from amplint.analysis.syntax import call_arguments
from amplint.analysis.torch_api import (
    AUTOCAST_ORDER,
    CPU_AUTOCAST_TAKES_FLOAT16,
    DEPRECATED_AUTOCAST_ORDER,
    RUNTIME_TORCH,
)
from amplint.diagnostics import Applicability, Fix
from amplint.engine.walk import ReadOnlyVisitor
from amplint.fixes.calls import has_comment, source_of
from amplint.fixes.importer import Importer
from amplint.rules.base import AnalysisRule, Invalid

NULLCONTEXT = "contextlib.nullcontext"


# Calls that ask what the CUDA device supports.
CUDA_PROBES = frozenset(
    {
        "torch.cuda.is_bf16_supported",
        "torch.cuda.get_device_capability",
        "torch.cuda.get_device_properties",
        "torch.cuda.is_available",
    }
)


def _names_in(expr: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Visitor(ReadOnlyVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

    expr.visit(_Visitor())
    return found


def _calls_in(expr: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _Visitor(ReadOnlyVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    expr.visit(_Visitor())
    return found


class AutocastDisabledOffCuda(AnalysisRule, code="AMP202", name="autocast-disabled-off-cuda", summary="Autocast replaced by nullcontext off CUDA", fix=Applicability.UNSAFE):
    """## What it does
    Flags, in files that train (a tensor `.backward()` or an optimizer step), the idiom
    `nullcontext() if <device-type test> else <autocast>` and its mirror
    `<autocast> if <device-type test> else nullcontext()`. A device-type test compares
    something with a device-type string (`device_type == "cpu"`, `device.type != "cuda"`,
    `"cuda" in str(device)`), calls `.startswith("cuda")`, asks for CUDA/MPS/XPU
    availability (`torch.cuda.is_available()`), reads a CUDA flag (`x.is_cuda`,
    `use_cuda`, `args.gpu`), or is a name bound once to one of these.

    Not flagged: conditions that are not device tests (`nullcontext() if
    is_final_validation else autocast(...)`, `nullcontext() if not use_amp else ...`),
    branches that are not a torch autocast (`accelerator.autocast()` already picks the
    device), files that only run inference, evaluation code of a training file (under
    `torch.no_grad()`/`torch.inference_mode()` or in a function named for evaluation:
    EfficientAT's `evaluate`), and files that say it out loud by choosing
    float32 with the same test on the same side (`weight_dtype = torch.bfloat16 if device
    == "cuda" else torch.float32`: unsloth's trainers keep CPU runs in float32 on purpose),
    or pick the `"float32"` entry of a dtype table by a device test (`{...}[dtype if
    DEVICE.type == "cuda" else "float32"]`: train-llm-from-scratch, round AR).
    Nor a test of a device the file binds only to CUDA devices, directly or through a
    device-type test of one (NeuroLM: `device = 'cuda'` or `f'cuda:{rank}'`, then
    `device_type = 'cuda' if 'cuda' in device else 'cpu'`): the `nullcontext()` side never
    runs. Nor code written for CUDA, whose function (or module-level code) calls a CUDA state
    function that raises without CUDA outside any device test, on any branch
    (`torch.cuda.synchronize()` in nanoGPT's `bench.py` timing loop); nor a float16
    region where every torch bound the project declares caps torch below 2.2
    (tiny-universe's `torch==2.0.1`): CPU autocast took only bfloat16 there and MPS and
    XPU had none in torch itself, so no device loses an autocast.
    RULES.md names only the not-a-device-test silence; the evaluation, said-out-loud,
    CUDA-state, old-torch and CUDA-only-device silences are amplint's decisions, from rounds AE, AF, AP and AS.

    This rule is off by default: training in float32 off CUDA is sometimes deliberate.
    Select it with `--select AMP202` to find the places where it is not said out loud.

    ## Why is this bad?
    CPU autocast (bfloat16) has been supported since PyTorch 1.10, and MPS and XPU have
    their own autocast. Switching to `nullcontext()` on every device but CUDA trains in
    float32 there without saying so: slower, more memory, and a different numerical
    regime than on the GPU, which makes CPU or Apple-silicon runs a poor proxy of the
    real one.

    ## Example
    ```python
    from contextlib import nullcontext

    import torch

    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
    with ctx:
        loss = model(x).sum()
    loss.backward()
    ```

    ## Use instead
    ```python
    import torch

    import amplint.runtime

    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    ctx = amplint.runtime.autocast(device_type, dtype=torch.bfloat16)
    with ctx:
        loss = model(x).sum()
    loss.backward()
    ```

    ## Fix safety
    Unsafe: the fix replaces the whole conditional with
    `amplint.runtime.autocast(<device>, dtype=<dtype>)`, which turns autocast on for the
    devices that ran in float32 until now; numerics and speed change there. On CUDA
    nothing changes: `dtype`, `enabled` and `cache_enabled` are kept, and an autocast
    that gave no dtype on a literal `"cuda"` device gets `dtype=torch.float16` (CUDA's
    default) so that `amplint.runtime.autocast` does not pick bfloat16 instead. A dtype
    chosen by probing CUDA (`torch.bfloat16 if torch.cuda.is_bf16_supported() else
    torch.float16`, directly or through a name) is dropped: kept, it would force float16
    on every device without CUDA bfloat16 (CPU autocast in float16 warns on every step),
    and the runtime already picks bfloat16 where the device runs it natively. The
    `<device>` is the expression the test examines (`device` in `device.type == "cuda"`,
    `device_type` in `device_type == "cpu"`), else the autocast's own non-literal device,
    else the scope's device variable; with none of these it is left out and the runtime
    uses the machine's default device; a dtype a configurator may set (`exec(open(...).read())`,
    nanoRWKV's float32 configs) is kept even when its default probes CUDA. A `nullcontext` import left unused is not removed
    (Ruff's F401 does that).
    """

    triggers = frozenset({"nullcontext"})
    # Pre-filter: an autocast, in a file that trains.
    requires = (frozenset({"autocast"}), frozenset({".backward", ".step()", "*scaler", "GradScaler"}))
    default_enabled = False

    VALID = (
        # float32 off CUDA is chosen out loud: the weights' dtype follows the same test
        # (in the function that hands both on).
        """
        import torch
        from contextlib import nullcontext

        def run(model, loader, optimizer):
            device = "cuda" if torch.cuda.is_available() else "cpu"
            weight_dtype = torch.bfloat16 if device == "cuda" else torch.float32
            train(model, loader, optimizer, device, weight_dtype)

        def train(model, loader, optimizer, device, weight_dtype):
            model.to(device, dtype=weight_dtype)
            ctx = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else nullcontext()
            for x in loader:
                with ctx:
                    loss = model(x.to(device))
                loss.backward()
                optimizer.step()
        """,
        # An evaluation function of a training file: nothing trains in float32 there
        # (EfficientAT keeps CPU evaluation in float32 on purpose).
        """
        import torch
        from contextlib import nullcontext

        def evaluate(model, loader, device):
            for x in loader:
                with torch.autocast(device_type=device.type) if device.type == "cuda" else nullcontext():
                    y = model(x)

        def train(model, x, optimizer):
            model(x).sum().backward()
            optimizer.step()
        """,
        # Not a device test.
        """
        import torch
        from contextlib import nullcontext
        ctx = nullcontext() if is_final_validation else torch.autocast('cuda')
        with ctx:
            loss = m(x)
        loss.backward()
        """,
        """
        import torch
        from contextlib import nullcontext
        ctx = torch.autocast('cuda') if use_amp else nullcontext()
        with ctx:
            loss = m(x)
        loss.backward()
        """,
        # Inference only: no backward, no optimizer step.
        """
        import torch
        from contextlib import nullcontext
        ctx = nullcontext() if device_type == 'cpu' else torch.autocast(device_type)
        with ctx:
            y = m(x)
        """,
        # Not torch's autocast.
        """
        from contextlib import nullcontext
        ctx = nullcontext() if device == 'cpu' else accelerator.autocast()
        with ctx:
            loss = m(x)
        loss.backward()
        """,
        # A project function called nullcontext is not contextlib's.
        """
        import torch

        def nullcontext():
            return None

        ctx = nullcontext() if device_type == 'cpu' else torch.autocast(device_type)
        loss.backward()
        """,
        """
        import torch
        ctx = torch.autocast(device_type)
        loss.backward()
        """,
        # float32 off CUDA picked out loud from a dtype table (train-llm-from-scratch).
        """
        import torch
        from contextlib import nullcontext

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        DTYPE = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
        PTDTYPE = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[DTYPE if DEVICE.type == "cuda" else "float32"]
        ctx = nullcontext() if DEVICE.type == "cpu" else torch.amp.autocast(device_type=DEVICE.type, dtype=PTDTYPE)
        with ctx:
            loss = model(x)
        loss.backward()
        """,
        # The tested device is only ever CUDA (NeuroLM's nanoGPT-style trainers).
        """
        import torch
        from contextlib import nullcontext

        device = None

        def init(ddp, local_rank):
            global device
            device = 'cuda'
            if ddp:
                device = f'cuda:{local_rank}'
            device_type = 'cuda' if 'cuda' in device else 'cpu'
            return nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)

        loss.backward()
        """,
        # A benchmark that synchronizes CUDA on its timing path runs nowhere else
        # (nanoGPT's bench.py, copied by nanoRWKV and Adam-mini).
        """
        import torch
        from contextlib import nullcontext
        device = 'cuda'
        profile = False
        device_type = 'cuda' if 'cuda' in device else 'cpu'
        ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
        if profile:
            with ctx:
                loss = model(x)
        else:
            torch.cuda.synchronize()
            with ctx:
                loss = model(x)
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
        """,
    )
    INVALID = (
        # A configurator may set the dtype (nanoRWKV's eval configs choose float32 because
        # "fp16 would overflow"): the fix keeps it.
        Invalid(
            """
              import torch
              from contextlib import nullcontext
            + import amplint.runtime
              device = 'cuda'
              dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
              exec(open('configurator.py').read())
              ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
              device_type = 'cuda' if 'cuda' in device else 'cpu'
            - ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
            + ctx = amplint.runtime.autocast(device_type, dtype=ptdtype)
              loss.backward()
            """,
            unsafe=True,
            line=8, column=7, message="use `amplint.runtime.autocast(device, dtype=...)`",
        ),
        # nanoGPT's dtype probes CUDA: the runtime chooses per device instead.
        Invalid(
            """
              import torch
              from contextlib import nullcontext
            + import amplint.runtime
              dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
              ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
            - ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
            + ctx = amplint.runtime.autocast(device_type)
              loss.backward()
            """,
            unsafe=True,
            line=5, column=7, message="use `amplint.runtime.autocast(device, dtype=...)`",
        ),
        Invalid(
            """
              from contextlib import nullcontext

              import torch
            + import amplint.runtime

              device_type = 'cuda' if 'cuda' in device else 'cpu'
            - ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
            + ctx = amplint.runtime.autocast(device_type, dtype=ptdtype)
              with ctx:
                  loss = model(x)
              loss.backward()
            """,
            unsafe=True,
            line=6, column=7, message="Autocast is replaced by `nullcontext()` off CUDA",
        ),
        Invalid(
            """
              import contextlib
              import torch
            + import amplint.runtime

              def train(model, x, device, optimizer):
            -     with torch.autocast('cuda', enabled=use_amp) if device.type == 'cuda' else contextlib.nullcontext():
            +     with amplint.runtime.autocast(device, dtype=torch.float16, enabled=use_amp):
                      loss = model(x)
                  loss.backward()
                  optimizer.step()
            """,
            unsafe=True,
            line=5, column=10, message="Autocast is replaced by `nullcontext()` off CUDA",
        ),
        Invalid(
            """
              import torch
              from contextlib import nullcontext
            - amp_ctx = torch.cuda.amp.autocast(dtype=torch.bfloat16) if torch.cuda.is_available() else nullcontext()
            + import amplint.runtime
            + amp_ctx = amplint.runtime.autocast(dtype=torch.bfloat16)
              with amp_ctx:
                  loss = m(x)
              loss.backward()
            """,
            unsafe=True,
            line=3, column=11, message="Autocast is replaced by `nullcontext()` off CUDA",
        ),
    )

    def visit_IfExp(self, node: cst.IfExp) -> None:
        autocast_branch = self._torch_autocast(node.body) if self._is_nullcontext(node.orelse) else None
        if autocast_branch is None and self._is_nullcontext(node.body):
            autocast_branch = self._torch_autocast(node.orelse)
        if autocast_branch is None:
            return
        devices = self.context.analysis.devices
        training = self.context.analysis.training
        if not devices.is_device_test(node.test) or not training.trains or training.in_inference(node):
            return  # an evaluation in a training file (EfficientAT's `evaluate`) trains nothing
        if self._float32_chosen_alike(node):
            return
        call, use = autocast_branch
        if devices.queries_cuda_state(node):
            return  # code written for CUDA (a benchmark that synchronizes it): it runs nowhere else
        tested = devices.tested_device(node.test)
        if tested is not None and devices.always_cuda(tested):
            return  # the tested device is only ever CUDA: the nullcontext side never runs
        if self._nothing_to_lose_off_cuda(use):
            return
        message = (
            "Autocast is replaced by `nullcontext()` off CUDA, so CPU/MPS/XPU runs train in float32 "
            "without saying so; use `amplint.runtime.autocast(device, dtype=...)`, which picks each "
            "device's own autocast"
        )
        self.report(node, message, fix=self._fix(node, call, use))

    def _float32_chosen_alike(self, node: cst.IfExp) -> bool:
        """Does the file choose float32 by the same test, on the side that drops autocast
        (unsloth: `weight_dtype = torch.bfloat16 if device == "cuda" else torch.float32`,
        then handed with `device` to the function that picks `autocast(...) if device ==
        "cuda" else nullcontext()`)? Training in float32 there is then said out loud."""
        tree = self.context.analysis.tree
        test = source_of(self.context, node.test)
        dropped_on_false = self._is_nullcontext(node.orelse)
        for assign in tree.index.assigns:
            value = assign.value
            if not isinstance(value, cst.IfExp) or value is node:
                continue
            if source_of(self.context, value.test) != test:
                continue
            chosen = value.orelse if dropped_on_false else value.body
            if self.qualified_name(chosen) in ("torch.float32", "torch.float"):
                return True
        return self._float32_key_by_device()

    def _float32_key_by_device(self) -> bool:
        """Does the file pick the float32 entry of a dtype table by a device test
        (`PTDTYPE = {...}[DTYPE_STR if DEVICE.type == 'cuda' else 'float32']`,
        train-llm-from-scratch)? Float32 off CUDA is then its stated choice."""
        devices = self.context.analysis.devices
        for node in self.context.analysis.tree.parents:
            if not isinstance(node, cst.SubscriptElement) or not isinstance(node.slice, cst.Index):
                continue
            key = node.slice.value
            if not isinstance(key, cst.IfExp) or not devices.is_device_test(key.test):
                continue
            if any(isinstance(side, cst.SimpleString) and side.evaluated_value in ("float32", "fp32") for side in (key.body, key.orelse)):
                return True
        return False

    def _nothing_to_lose_off_cuda(self, use: AutocastUse) -> bool:
        """Would no other device autocast this region on the torch the project declares?
        Capped below 2.2, with float16 (tiny-universe's `torch==2.0.1`): CPU autocast took
        only bfloat16 there and MPS and XPU had none in torch itself."""
        if self.context.project.torch_may_reach(CPU_AUTOCAST_TAKES_FLOAT16):
            return False
        if use.dtypes is not None and use.dtypes == frozenset({"float16"}):
            return True
        return use.dtype_expr is None and use.device_types == frozenset({"cuda"})  # CUDA's default: float16

    def _is_nullcontext(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.qualified_name(expr.func) == NULLCONTEXT

    def _torch_autocast(self, expr: cst.BaseExpression) -> tuple[cst.Call, AutocastUse] | None:
        if not isinstance(expr, cst.Call):
            return None
        use = self.context.analysis.autocast.autocast_use(expr)
        if use is None or use.method or use.via is not None or use.call is not expr:
            return None
        return expr, use

    def _chosen_for_cuda(self, dtype: cst.BaseExpression) -> bool:
        """Was this dtype chosen by probing CUDA (``torch.bfloat16 if
        torch.cuda.is_bf16_supported() else torch.float16``, directly or through names
        bound once, as in nanoGPT's ``dtype`` → ``ptdtype``)? Kept, it would force CUDA's
        choice on every other device."""
        bindings = self.context.analysis.bindings
        pending: list[cst.BaseExpression] = [dtype]
        for _ in range(4):
            following: list[cst.BaseExpression] = []
            for expr in pending:
                if any(self.qualified_name(call.func) in CUDA_PROBES for call in _calls_in(expr)):
                    return True
                for name in _names_in(expr):
                    bound = bindings.single_value(name)
                    if bound is not None:
                        following.append(bound)
            pending = following
        return False

    def _fix(self, node: cst.IfExp, call: cst.Call, use: AutocastUse) -> Fix | None:
        arguments = call_arguments(call, DEPRECATED_AUTOCAST_ORDER if use.deprecated else AUTOCAST_ORDER)
        if arguments is None:
            return None
        if has_comment(self.context, node):
            return None  # the expression is replaced whole: a comment in it would be lost
        # Sub-expressions as written (re-rendering one alone would drop the indentation of
        # its continuation lines).
        def code(expr: cst.CSTNode) -> str:
            return source_of(self.context, expr)

        devices = self.context.analysis.devices
        device: str | None = None
        tested = devices.tested_device(node.test)
        if tested is not None:
            device = code(tested)
        elif use.device_expr is not None and not isinstance(use.device_expr, cst.SimpleString):
            device = code(use.device_expr)
        else:
            device = devices.expression_at(node)
        parts = [device] if device is not None else []
        dtype = arguments.get("dtype")
        if dtype is not None and self._chosen_for_cuda(dtype) and not devices.rebinds_globals:
            pass  # a dtype picked by probing the CUDA device: the runtime picks per device
            # (unless a configurator may set it: nanoRWKV's configs choose float32 on purpose)
        elif dtype is not None:
            parts.append(f"dtype={code(dtype)}")
        elif use.device_types == frozenset({"cuda"}):
            # CUDA autocast defaults to float16; the runtime would choose bfloat16 on Ampere+.
            torch = self.context.analysis.bindings.module_binding("torch", at=node)
            if torch is None:
                return None
            parts.append(f"dtype={torch}.float16")
        for keyword in ("enabled", "cache_enabled"):
            if keyword in arguments:
                parts.append(f"{keyword}={code(arguments[keyword])}")
        if not self.context.project.torch_has(RUNTIME_TORCH):
            return None  # amplint.runtime needs torch 2.4
        imports = Importer(self.context).runtime()
        if imports is None:
            return None
        replacement = f"amplint.runtime.autocast({', '.join(parts)})"
        return self.make_fix(
            f"Replace with `{replacement}`", [self.context.replace(node, replacement), *imports]
        )
