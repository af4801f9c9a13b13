from __future__ import annotations

import libcst as cst

from amplint.analysis.autocast import AutocastUse
from amplint.rules.base import AnalysisRule, Invalid


def may_be_float16(use: AutocastUse) -> bool:
    """Is float16 among the dtypes this autocast may run in, as far as is known?"""
    if use.call is not None and any(arg.star for arg in use.call.args):
        # `autocast(**autocast_kwargs)`: the dtype is whatever the mapping holds (CVlization's
        # RAE trainer passes `dict(dtype=torch.bfloat16, ...)`; round BK).
        return False
    if use.dtype_expr is not None or use.runtime or use.via is not None:
        return use.dtypes is not None and "float16" in use.dtypes
    if use.deprecated:
        return use.device_types == frozenset({"cuda"})
    return isinstance(use.device_expr, cst.SimpleString) and use.device_expr.evaluated_value == "cuda"


class Fp16WithoutScaler(AnalysisRule, code="AMP105", name="fp16-without-scaler", summary="float16 autocast in training without a GradScaler"):
    """## What it does
    Flags an autocast block that may run in float16 — a float16 dtype (or a set of
    possible dtypes that includes it), or no dtype with the device type literally
    `"cuda"` (whose default is float16), or the deprecated `torch.cuda.amp.autocast` —
    in a function (or module-level script) that calls a tensor `.backward()`, when the
    file does no gradient scaling at all: no `GradScaler` is constructed and nothing
    calls `.scale(...)`. Reported on the `with` statement.

    `amplint.runtime.autocast(device)` without a dtype may run in float16 (it picks
    bfloat16 only where the hardware runs it natively), so it counts as float16;
    `amplint.runtime.grad_scaler(...)` and `MixedPrecision` scale gradients.

    A `with` item that looks up autocast contexts in a literal dict
    (`with {"bf16": autocast(dtype=torch.bfloat16), "fp16": autocast(dtype=torch.float16)}[args.precision]:`)
    is an autocast block that may run in any of the dict's dtypes.

    Not flagged: bfloat16-only blocks, blocks whose dtype or device is not statically
    known, inference code (no backward in the function, or a block under
    `torch.no_grad()` / `torch.inference_mode()` or in a function decorated with them,
    which never backpropagates even when its function trains elsewhere; so is a block whose
    own `with` also opens `no_grad`, `with autocast(), torch.no_grad():`, or whose body is
    made only of `no_grad` blocks, VAND-APRIL-GAN's text-prompt precomputation; nor is a
    block that no backward can follow: none after it in its function and none in the
    innermost loop that holds it, as in the validation and test loops that DiffusionDepth's
    `train()` runs after each epoch's training loop: amplint's decision, from round AV), and
    files that scale gradients anywhere (the scaler may be passed in; apex's
    `amp.scale_loss(loss, opt)` counts, DiffusionDepth, round AV), which includes, a decision of
    amplint's, calling a scaler-named callable with the loss: `loss_scaler(loss,
    optimizer, ...)`, the protocol of timm's `NativeScaler` used by DeiT, ConvNeXt and
    MAE (whose fp32 branch calls `loss.backward()` beside it). Also not flagged, a
    decision of amplint's that RULES.md leaves open: test modules (`test_*.py`,
    `*_test.py`, files under `tests/` or `test/`), whose few unscaled float16 steps
    compare numerics rather than train a model (vissl's FSDP tests), as AMP101 does; and
    files that never step an optimizer (`optimizer.step()`, `opt.step()`, or `.step()` on
    a name bound to a `torch.optim` construction): forward/backward benchmarks, gradient
    equivalence checks and memory probes compute gradients nobody trains on (VMamba's
    `testfwdbwd`), so underflow changes nothing there; nor benchmark modules
    (`bench.py`, `benchmark_*.py`, `*_bench.py`, `*_perf.py`, files under `benchmarks/` or
    `profiling/`: physicsnemo's `measure_perf.py`, round BL), even where an
    optimizer steps: nanoGPT's `bench.py` and xformers' `benchmark_encoder.py` time
    training steps on random data, whose convergence nobody reads, and a scaler would
    change the work being timed (rounds BB and BC; RULES.md names no benchmark case, so
    this is amplint's decision).

    ## Why is this bad?
    float16 has a narrow exponent range: small gradients underflow to zero in the
    backward pass, and training silently stalls or diverges. `GradScaler` multiplies
    the loss before backward and unscales the gradients before the optimizer step, so
    gradients stay representable. bfloat16 has float32's range and needs no scaler.

    ## Example
    ```python
    import torch

    def train_step(model, x, y, optimizer):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")

    def train_step(model, x, y, optimizer):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()  # small gradients stay representable
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    No fix: adding a scaler touches the backward call, the optimizer step and the
    checkpoint. `amplint.runtime.MixedPrecision` packages the whole recipe. Switching to
    bfloat16, where the hardware supports it, is the other remedy.
    """

    triggers = frozenset({"*autocast"})
    # Pre-filter: a backward (the float16 dtype may be named here, be a device's default,
    # or come from another module's constant).
    requires = (frozenset({".backward"}),)

    VALID = (
        # The arguments come from a mapping: the dtype is not known (CVlization's RAE trainer,
        # `dict(dtype=torch.bfloat16, enabled=use_bf16)`; round BK).
        """
        import torch
        from torch.cuda.amp import autocast

        def train(model, loader, optimizer, use_bf16):
            autocast_kwargs = dict(dtype=torch.bfloat16, enabled=use_bf16)
            for x in loader:
                with autocast(**autocast_kwargs):
                    loss = model(x).mean()
                loss.backward()
                optimizer.step()
        """,
        # MixFormer's trainer builds timm's NativeScaler itself and calls it with the loss.
        """
        import torch
        from timm.utils import NativeScaler

        class Trainer:
            def __init__(self, net, optimizer):
                self.net, self.optimizer = net, optimizer
                self.loss_scaler = NativeScaler()

            def step(self, x, amp):
                with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                    loss = self.net(x).sum()
                if not amp:
                    loss.backward()
                    self.optimizer.step()
                else:
                    self.loss_scaler(loss, self.optimizer, parameters=self.net.parameters())
        """,
        # A forward/backward benchmark: no optimizer ever steps on these gradients.
        """
        import torch

        def time_fwd_bwd(model, images, targets):
            criterion = torch.nn.CrossEntropyLoss()
            for _ in range(30):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(images), targets)
                loss.backward()
            torch.cuda.synchronize()
        """,
        """
        import torch

        def step(m, x):
            with torch.autocast('cuda', dtype=torch.bfloat16):
                loss = m(x)
            loss.backward()
        """,
        """
        import torch

        def infer(m, x):
            with torch.autocast('cuda'):
                return m(x)
        """,
        """
        import torch

        def step(m, x, scaler):
            with torch.autocast('cuda'):
                loss = m(x)
            scaler.scale(loss).backward()
        """,
        """
        import torch

        def step(m, x, device_type):
            with torch.autocast(device_type):
                loss = m(x)
            loss.backward()
        """,
        """
        import torch

        def step(m, x):
            with torch.autocast('cuda', enabled=False):
                loss = m(x)
            loss.backward()
        """,
        # Feature extraction under no_grad in a function that trains elsewhere.
        """
        import torch

        def train(m, encoder, x):
            with torch.no_grad():
                with torch.autocast('cuda'):
                    feats = encoder(x)
            loss = m(feats).sum()
            loss.backward()
        """,
        # VAND-APRIL-GAN precomputes its text prompts under both, in one `with`.
        """
        import torch

        def train(m, clip, prompts, x):
            with torch.cuda.amp.autocast(), torch.no_grad():
                text = clip.encode_text(prompts)
            with torch.no_grad(), torch.autocast('cuda'):
                more = clip.encode_text(prompts)
            with torch.autocast('cuda'):
                with torch.no_grad():
                    other = clip.encode_text(prompts)
            loss = m(x, text, more, other).sum()
            loss.backward()
            optimizer.step()
        """,
        """
        import torch

        @torch.inference_mode()
        def evaluate_and_train(m, x):
            with torch.autocast('cuda'):
                out = m(x)
            out.sum().backward()
        """,
        # amplint.runtime's scaler is the scaler for its autocast.
        """
        import amplint.runtime

        def step(m, x, device):
            scaler = amplint.runtime.grad_scaler(device)
            with amplint.runtime.autocast(device):
                loss = m(x)
            scaler.scale(loss).backward()
        """,
        # A dict of bfloat16 contexts only.
        """
        import torch

        def step(m, x, p):
            with {'a': torch.autocast('cuda', dtype=torch.bfloat16)}[p]:
                loss = m(x)
            loss.backward()
        """,
        # ConvNeXt's engine.py: timm's NativeScaler on the AMP branch, backward on the other.
        """
        import torch

        def train_one_epoch(model, x, optimizer, loss_scaler, use_amp):
            if use_amp:
                with torch.cuda.amp.autocast():
                    loss = model(x)
                loss_scaler(loss, optimizer, parameters=model.parameters())
            else:
                loss = model(x)
                loss.backward()
        """,
    )
    INVALID = (
        # Only the training block: no backward follows the validation loop's block.
        Invalid(
            """
            import torch

            def train(net, loader_train, loader_val, optimizer, loss_fn):
                for epoch in range(10):
                    net.train()
                    for x in loader_train:
                        with torch.autocast("cuda", dtype=torch.float16):
                            out = net(x)
                        loss_fn(out).backward()
                        optimizer.step()
                    net.eval()
                    for x in loader_val:
                        with torch.autocast("cuda", dtype=torch.float16):
                            out = net(x)
            """,
            count=1,
            line=7, column=13, message="float16 autocast in training without a GradScaler",
        ),
        Invalid(
            """
            import torch

            def step(m, x):
                with torch.autocast('cuda'):
                    loss = m(x)
                loss.backward()
                optimizer.step()
            """,
            line=4, column=5, message="small gradients underflow to zero",
        ),
        Invalid(
            """
            import torch
            dtype = torch.bfloat16 if bf16 else torch.float16
            with torch.autocast('cuda', dtype=dtype):
                loss = m(x)
            loss.backward()
            optimizer.step()
            """,
            line=3, column=1, message="small gradients underflow to zero",
        ),
        Invalid(
            """
            import torch
            with torch.cuda.amp.autocast():
                loss = m(x)
            loss.backward()
            optimizer.step()
            """,
            line=2, column=1, message="small gradients underflow to zero",
        ),
        # After AMP202's fix: the runtime's autocast picks float16 where bfloat16 is not native.
        Invalid(
            """
            import amplint.runtime

            def step(m, x, device):
                with amplint.runtime.autocast(device):
                    loss = m(x)
                loss.backward()
                optimizer.step()
            """,
            line=4, column=5, message="float16 autocast in training without a GradScaler",
        ),
        # A literal dict of autocast contexts looked up in the `with` item.
        Invalid(
            """
            import torch

            for x, y in loader:
                with {"bf16": torch.autocast("cuda", dtype=torch.bfloat16),
                      "fp16": torch.autocast("cuda", dtype=torch.float16)}[args.precision]:
                    loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            line=4, column=5, message="float16 autocast in training without a GradScaler",
        ),
        Invalid(
            """
            import torch

            def step(m, x, precision):
                with {'bf16': torch.autocast('cuda', dtype=torch.bfloat16),
                      'fp16': torch.autocast('cuda', dtype=torch.float16)}[precision]:
                    loss = m(x)
                loss.backward()
                optimizer.step()
            """,
            line=4, column=5, message="small gradients underflow to zero",
        ),
    )

    def visit_With(self, node: cst.With) -> None:
        analysis = self.context.analysis
        if analysis.training.in_test_module or analysis.training.in_benchmark_module:
            return
        for block in analysis.autocast.blocks_of(node):
            if block.disabled or not may_be_float16(block.use):
                continue
            if analysis.scalers.file_scales:
                return
            backwards = analysis.training.scope_backward_calls(analysis.tree.scope_of(node))
            if not backwards:
                return
            if not self._may_reach_backward(node, backwards):
                return  # the validation loop of a function that trains earlier on
            if analysis.training.body_runs_without_grad(node):
                return  # inference: no backward runs through this block
            if not analysis.training.optimizer_steps:
                return  # a benchmark or a gradient check: nothing trains on these gradients
            self.report(
                node,
                f"float16 autocast in training without a GradScaler: small gradients underflow to zero{block.use.origin}",
            )
            return

    def _may_reach_backward(self, node: cst.With, backwards: list[cst.Call]) -> bool:
        """Can a backward run on what this block computes: one in the innermost loop that
        holds the block, or one after it (a loss summed over a loop, then one backward)?
        DiffusionDepth's `train()` ends each epoch with validation and test loops under the
        same autocast, after `net.eval()`, that no backward follows."""
        tree = self.context.analysis.tree
        scope = tree.scope_of(node)
        loop = next(
            (
                ancestor
                for ancestor in tree.ancestors(node)
                if isinstance(ancestor, (cst.For, cst.While)) and tree.scope_of(ancestor) is scope
            ),
            None,
        )
        start = self.context.span(node)[0]
        return any(
            self.context.span(call)[0] > start or (loop is not None and tree.within(call, loop)) for call in backwards
        )

