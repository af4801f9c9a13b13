from __future__ import annotations

import functools
import re

import libcst as cst

from amplint.analysis import torch_api
from amplint.analysis.autocast import AutocastUse
from amplint.analysis.syntax import (
    bool_value,
    call_arguments,
    dotted_name,
    last_name,
    loaded_names,
    match_arguments,
    mentions,
    operands,
    string_literal,
)
from amplint.analysis.torch_api import positional_order
from amplint.analysis.wrappers import Found
from amplint.diagnostics import Applicability, Fix
from amplint.engine.walk import ReadOnlyVisitor
from amplint.fixes.calls import CallEdits, has_comment, source_of
from amplint.rules.base import AnalysisRule, Invalid

FLOAT16_WORDS = frozenset({"float16", "half", "fp16"})
BFLOAT16 = frozenset({"bfloat16"})
FLOAT16 = frozenset({"float16"})
CUDA_ONLY = frozenset({"cuda"})
# Values that name bfloat16 in a comparison: `precision == "bf16"`, `dtype is torch.bfloat16`.
BFLOAT16_SPELLINGS = frozenset({"bf16", "bfloat16", "torch.bfloat16"})
# Receivers that hold a model being trained (not inputs or buffers).
MODEL = re.compile(r"(?:^|_)(model|net|network|module|transformer|unet|backbone|llm)$", re.IGNORECASE)


class ScalerWithBfloat16(AnalysisRule, code="AMP302", name="scaler-with-bfloat16", summary="GradScaler enabled with bfloat16 autocast", fix=Applicability.SAFE):
    """## What it does
    Flags a `GradScaler` construction (any spelling) whose `enabled=` is absent, `True`,
    or not conditioned on float16, when the code it serves may run in bfloat16:

    - its autocast blocks, or the autocast contexts the same code builds for other code
      (`amp_autocast = torch.autocast(...)` handed to the training loop), have a known
      dtype that may be bfloat16 — a `torch.bfloat16`
      literal, a name bound to one (once, or on every branch of an `if`/`elif` chain), a
      choice including it, a class attribute or config field assigned such values in this
      file, a read-only `@property` of the class whose `return`s give such values (on
      every path; also inherited from a project base class in another file), a
      constant of another project module, or CPU autocast without a dtype (CPU's
      default is bfloat16) — but not the CPU side of a CUDA-or-CPU device choice beside a
      CUDA scaler (`GradScaler("cuda")`, torch's default device), which disables itself
      where CUDA is missing, while on CUDA that autocast runs in float16 (an exception
      RULES.md does not make: its premise, a scaler working beside bfloat16, cannot
      happen there), nor beside a scaler built on the autocast's own device expression
      (stereoanywhere's `GradScaler(autocast_device)` beside `autocast(autocast_device)`:
      float16 and scaled on CUDA; off CUDA it only wastes a multiply; this page's decision,
      from round AK; also where one side holds the expression in a name: UltraThinking's
      `device_type = 'cuda' if torch.cuda.is_available() else 'cpu'`, round BM);
    - it is built only on a bfloat16 path: `GradScaler() if use_bf16 else None`,
      `if args.bf16: scaler = GradScaler()`;
    - the model it scales is cast to bfloat16 (`model.to(torch.bfloat16)`,
      `model.bfloat16()`, `from_pretrained(..., torch_dtype=torch.bfloat16)`; frozen
      modules do not count).

    The code a scaler serves is its function, closures it defines included (ml-tarflow's
    `main` builds the scaler and defines the `compute_loss` that opens the training
    autocast; round BP); for a scaler stored on `self`, every
    method of its class (the scaler built in `__init__`, the autocast in `train_step`);
    for a module-level scaler, the whole module; and a module-level function of this file
    that the scaler's function passes it to and that uses it as its scaler
    (`train_and_evaluate(..., scaler)`; only a literal bfloat16 there gets the fix, since
    the dtype's name lives in the callee; RULES.md names only the class and the module,
    this step is this page's extension). An `enabled=` expression that mentions
    `float16`, `"float16"`, `half` or `fp16` counts as conditioned, itself or through the
    flag it reads (micror1's `grad_scaling_enabled = (dtype == 'float16')`, round BF).

    Across files: a call of a project function whose every `return` builds an
    always-enabled GradScaler, or of a project class whose `__init__` stores one
    unconditionally (`loss_scaler = NativeScaler()`, DeiT's and VideoMamba's
    `NativeScalerWithGradNormCount`), is such a construction, reported at the call with
    where the GradScaler is built (no fix: the change belongs to the caller's choice).

    Not flagged: float16-only blocks, code with any autocast block whose dtype is not
    statically known, `enabled=False`, a scaler built under a condition that names
    float16 itself or through the flag it tests (`self.do_grad_scaling = self.amp_dtype ==
    torch.float16`, the HF Trainer), a scaler whose `enabled=` negates a bfloat16 flag
    (`enabled=not use_bf16`, `use_amp and not opt.amp_bf16`, `dtype != torch.bfloat16`: off
    exactly where bfloat16 runs; VggAE_Diffusion, traiNNer; RULES.md asks for a float16
    word, this page accepts the negation too), a scaler built under a flag named for bfloat16 when
    every autocast that flag enables in the file is float16 (V-JEPA's evals open
    `autocast(dtype=torch.float16, enabled=use_bfloat16)`: the name lies, the scaler is
    right; a decision of this page), a scaler bound to a local name that is only
    checkpointed (`state_dict()`/`load_state_dict()`), never used to scale (Wuerstchen; a
    decision of this page), or, in a function, never read at all (a teaching script that
    builds one and trains in bfloat16 without it: CS336-Language-Modeling-from-Scratch,
    round BO), a scaler built on the branch of an `if` that also binds the autocast's dtype
    name to float16 alone (physicsnemo's optimization test: `else: amp_dtype = torch.float16;
    scaler = GradScaler("cuda", enabled=True)`; rounds BL and BP; this page's decision), an
    autocast whose body runs with gradients off (a `validate()` under
    `torch.no_grad()` beside a float16 training autocast: Nvidia-Meshtron-Pytorch, round BP;
    it makes no gradients to scale), an autocast that picks bfloat16 only where its own
    `enabled=` turns it off (`dtype=torch.float16 if use_amp else torch.bfloat16` beside
    `enabled=use_amp`: auralflow; a decision of this page), bfloat16 weights cast for evaluation (under
    `no_grad` or in a function named for evaluation), and scalers that reach the
    autocast's code some other way (passed as an argument; amplint cannot see how they
    meet).

    ## Why is this bad?
    bfloat16 has float32's exponent range: gradients do not underflow, and loss scaling
    buys nothing but extra work and skipped steps when the scale overflows. With
    bfloat16 weights (hence bfloat16 gradients) it fails outright on CUDA and ROCm:
    `"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for 'BFloat16'`.

    ## Example
    ```python
    import torch

    ptdtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=ptdtype):
        loss = model(x)
    ```

    ## Use instead
    ```python
    import torch

    ptdtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=ptdtype == torch.float16)
    with torch.autocast("cuda", dtype=ptdtype):
        loss = model(x)
    ```

    ## Fix safety
    Safe: `enabled=` becomes `(<old enabled> and <dtype> == torch.float16)`, or `False`
    when the dtype is bfloat16 only; a disabled scaler's `scale`, `step`, `unscale_` and
    `update` are pass-throughs, so the training loop runs unchanged, and scaling stays on
    wherever the dtype really is float16. No fix when the dtype expression is not a name
    bound on every path to the construction (Person_reID binds it only under `if fp16:
    ... elif bf16: ...`, with no `else`: the new `enabled=` would raise NameError on a
    float32 run), nor for a scaler built only on a bfloat16 path (which
    path should build it is the author's call). For bfloat16 weights the fix sets
    `enabled=False`: the unscale that would raise becomes a pass-through.
    """

    triggers = frozenset({"GradScaler", "*Scaler", "*scaler"})
    # Pre-filter: an autocast block (whose dtype may come from this file, a config field or
    # another module), or bfloat16 named (a flag, a cast).
    requires = (frozenset({"*autocast", "re:bf16|bfloat16|BF16|BFLOAT16"}),)

    VALID = (
        # stereoanywhere: the scaler is built on the autocast's own device, whose autocast has
        # no dtype: float16 (scaled) on CUDA; on CPU bfloat16, where the scaler only wastes a
        # multiply.
        """
        import torch
        from torch.amp import GradScaler

        if args.cuda:
            autocast_device = "cuda"
        else:
            autocast_device = "cpu"
        scaler = GradScaler(autocast_device, enabled=args.mixed_precision)

        def train(model, x, optimizer):
            with torch.autocast(autocast_device, enabled=args.mixed_precision):
                loss = model(x)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        # UltraThinking (round BM): the same device expression, written out for the scaler
        # and held in a name for the autocast.
        """
        import torch

        class Trainer:
            def __init__(self):
                self.scaler = torch.amp.GradScaler('cuda' if torch.cuda.is_available() else 'cpu')

            def step(self, model, x, optimizer):
                device_type = 'cuda' if torch.cuda.is_available() else 'cpu'
                with torch.amp.autocast(device_type=device_type):
                    loss = model(x)
                self.scaler.scale(loss).backward()
                self.scaler.step(optimizer)
                self.scaler.update()
        """,
        # The scaler is off exactly when the bfloat16 flag is on (VggAE_Diffusion, traiNNer).
        """
        import torch

        def train(model, x, optimizer, use_bf16):
            scaler = torch.amp.GradScaler("cuda", enabled=not use_bf16)
            dtype = torch.bfloat16 if use_bf16 else torch.float16
            with torch.autocast("cuda", dtype=dtype):
                loss = model(x).sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        # A CUDA scaler (torch's default device) beside an autocast on CUDA or CPU: CPU's
        # default bfloat16 runs only where the scaler has disabled itself (MONAI's tutorials).
        """
        import torch

        class Trainer:
            def __init__(self, model):
                self.device_type = "cuda" if torch.cuda.is_available() else "cpu"
                self.model = model.to(self.device_type)
                self.scaler = torch.GradScaler()

            def step(self, x, optimizer):
                with torch.autocast(self.device_type):
                    loss = self.model(x).mean()
                self.scaler.scale(loss).backward()
                self.scaler.step(optimizer)
                self.scaler.update()
        """,
        # Built only for float16 through a flag, and a bfloat16 copy made for evaluation
        # (ChatGLM-6B's copy of the HF Trainer).
        """
        import torch

        class Trainer:
            def __init__(self, model, fp16):
                self.model = model
                self.amp_dtype = torch.float16 if fp16 else torch.bfloat16
                self.do_grad_scaling = self.amp_dtype == torch.float16
                if self.do_grad_scaling:
                    self.scaler = torch.amp.GradScaler("cuda")

            def evaluation_loop(self, loader, bf16_full_eval):
                model = self.model
                if bf16_full_eval:
                    model = model.to(dtype=torch.bfloat16)
                return [model(x) for x in loader]
        """,
        # A property that may fall off its end (returns None) gives no known dtype.
        """
        import torch

        class Trainer:
            def __init__(self, amp):
                self.amp = amp
                self.scaler = torch.amp.GradScaler('cuda')

            @property
            def amp_dtype(self):
                if self.amp == 'bf16':
                    return torch.bfloat16

            def step(self, x):
                with torch.autocast('cuda', dtype=self.amp_dtype):
                    loss = self.model(x)
                self.scaler.scale(loss).backward()
        """,
        """
        import torch
        scaler = torch.amp.GradScaler('cuda', enabled=(dtype == 'float16'))
        with torch.autocast('cuda', dtype=torch.bfloat16):
            pass
        """,
        """
        import torch
        scaler = torch.amp.GradScaler('cuda')
        with torch.autocast('cuda'):
            pass
        """,
        """
        import torch
        scaler = torch.amp.GradScaler('cuda')
        with torch.autocast('cuda', dtype=amp_dtype):
            pass
        """,
        """
        import torch
        scaler = torch.amp.GradScaler('cuda', enabled=False)
        with torch.autocast('cuda', dtype=torch.bfloat16):
            pass
        """,
        """
        import torch

        def make():
            return torch.amp.GradScaler('cuda')

        def step():
            with torch.autocast('cuda', dtype=torch.bfloat16):
                pass
        """,
        # The float16 path builds it: right. A flag that names float16 too is the author's (VAR).
        """
        import torch
        scaler = torch.amp.GradScaler('cuda') if args.fp16 else None
        with torch.autocast('cuda', dtype=torch.bfloat16 if args.bf16 else torch.float16):
            pass
        """,
        """
        import torch
        scaler = torch.amp.GradScaler('cuda') if using_fp16_rather_bf16 else None
        """,
        """
        import torch
        scaler = torch.amp.GradScaler('cuda') if not args.bf16 else None
        """,
        """
        import torch
        if args.bf16:
            scaler = None
        else:
            scaler = torch.amp.GradScaler('cuda')
        """,
        # A frozen bfloat16 module (diffusers' VAE) beside a trained float32 one.
        """
        import torch
        vae.requires_grad_(False)
        vae.to(device, dtype=torch.bfloat16)
        scaler = torch.amp.GradScaler('cuda')
        """,
        # Another class's bfloat16 autocast is not this scaler's business.
        """
        import torch

        class A:
            def __init__(self):
                self.scaler = torch.amp.GradScaler('cuda')

        class B:
            def step(self):
                with torch.autocast('cuda', dtype=torch.bfloat16):
                    pass
        """,
        # One block of unknown dtype in the class: silent.
        """
        import torch

        class T:
            def __init__(self):
                self.scaler = torch.amp.GradScaler('cuda')

            def a(self):
                with torch.autocast('cuda', dtype=torch.bfloat16):
                    pass

            def b(self, dt):
                with torch.autocast('cuda', dtype=dt):
                    pass
        """,
        # V-JEPA's evals: a flag named for bfloat16 turns on a float16 autocast, and the
        # scaler built under it is what that float16 needs.
        """
        import torch

        def init_opt(model, use_bfloat16=False):
            scaler = torch.amp.GradScaler("cuda") if use_bfloat16 else None
            return torch.optim.AdamW(model.parameters()), scaler

        def run_one_epoch(model, optimizer, scaler, loader, use_bfloat16):
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16, enabled=use_bfloat16):
                    loss = model(x, y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """,
        # Wuerstchen: the scaler is only checkpointed, never used to scale a loss.
        """
        import torch

        def train(model, loader, optimizer, checkpoint):
            scaler = torch.amp.GradScaler("cuda")
            if checkpoint is not None:
                scaler.load_state_dict(checkpoint["scaler"])
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(x, y)
                loss.backward()
                optimizer.step()
            torch.save({"scaler": scaler.state_dict()}, "ckpt.pt")
        """,
        # Nvidia-Meshtron-Pytorch (round BP): the class's only bfloat16 autocast is its
        # validation under `no_grad`, which makes no gradients to scale.
        """
        import torch

        class Trainer:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model, optimizer
                self.scaler = torch.amp.GradScaler("cuda")

            def run(self, x):
                with torch.autocast("cuda"):
                    loss = self.model(x)
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()

            def validate(self, x):
                with torch.no_grad():
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        return self.model(x)
        """,
        # physicsnemo's optimization test (rounds BL, BP): the scaler that scales is built on
        # the branch that binds the dtype to float16.
        """
        import torch

        def run(model, x, optimizer, on_cpu):
            if on_cpu:
                amp_dtype = torch.bfloat16
                scaler = torch.amp.GradScaler("cpu", enabled=False)
            else:
                amp_dtype = torch.float16
                scaler = torch.amp.GradScaler("cuda", enabled=True)
            with torch.autocast("cuda", dtype=amp_dtype):
                loss = model(x)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        # A function's scaler that nothing reads (CS336-Language-Modeling-from-Scratch).
        """
        import torch

        def demo(model, x, y, optimizer):
            scaler = torch.amp.GradScaler()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        # auralflow: bfloat16 is chosen only where `enabled=` turns the autocast off.
        """
        import torch

        def train(model, loader, optimizer, use_amp):
            scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
            for x, y in loader:
                with torch.autocast("cuda", enabled=use_amp, dtype=torch.float16 if use_amp else torch.bfloat16):
                    loss = model(x, y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """,
    )
    INVALID = (
        # ml-tarflow: the training autocast is in a closure of the scaler's function; the
        # evaluation one under `no_grad` does not count, this one does.
        Invalid(
            """
              import torch

              def main(model, loader, optimizer):
            -     scaler = torch.amp.GradScaler()
            +     scaler = torch.amp.GradScaler(enabled=False)

                  def compute_loss(x):
                      with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                          return model(x)

                  for x in loader:
                      loss = compute_loss(x)
                      scaler.scale(loss).backward()
                      scaler.step(optimizer)
                      scaler.update()
                  with torch.no_grad():
                      with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                          model(x)
            """,
            line=4, column=14, message="GradScaler is enabled although autocast may run in bfloat16",
        ),
        # The same choice under a different switch: bfloat16 runs with the scaler on.
        Invalid(
            """
            import torch

            def train(model, loader, optimizer, use_amp, fast):
                scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
                for x, y in loader:
                    with torch.autocast("cuda", enabled=use_amp, dtype=torch.float16 if fast else torch.bfloat16):
                        loss = model(x, y)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
            """,
            unsafe=False,
            count=1,
            line=4, column=14, message="GradScaler is enabled although autocast may run in bfloat16",
        ),
        # Person_reID: the dtype is bound only under `if fp16: ... elif bf16: ...`, so
        # `enabled=dtype16 == torch.float16` would raise NameError on a float32 run: no fix.
        Invalid(
            """
            import torch

            if opt.fp16:
                dtype16 = torch.float16
            elif opt.bf16:
                dtype16 = torch.bfloat16

            def train(model, x, optimizer, scaler):
                with torch.autocast("cuda", dtype=dtype16):
                    loss = model(x)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()

            scaler = torch.amp.GradScaler("cuda")
            train(model, x, optimizer, scaler)
            """,
            fixed=None,
            line=15, column=10, message="autocast may run in bfloat16",
        ),
        # Built in one function and handed to the training loop that runs bfloat16
        # (Bert-VITS2's `run` → `train_and_evaluate`, icefall's recipes).
        Invalid(
            """
              import torch

              def train_and_evaluate(model, loader, optimizer, scaler):
                  for x in loader:
                      with torch.autocast("cuda", dtype=torch.bfloat16):
                          loss = model(x).sum()
                      scaler.scale(loss).backward()
                      scaler.step(optimizer)
                      scaler.update()

              def run(args, model, loader, optimizer):
            -     scaler = torch.amp.GradScaler("cuda", enabled=args.bf16_run)
            +     scaler = torch.amp.GradScaler("cuda", enabled=False)
                  train_and_evaluate(model, loader, optimizer, scaler)
            """,
            line=12, column=14, message="in `train_and_evaluate`, which it is passed to",
        ),
        # The dtype is a property returning a dtype on an if/elif chain (efficientvit).
        Invalid(
            """
            import torch

            class Trainer:
                def __init__(self, amp):
                    self.amp = amp
                    self.scaler = torch.amp.GradScaler('cuda', enabled=self.amp != 'fp32')

                @property
                def amp_dtype(self):
                    if self.amp == 'fp16':
                        return torch.float16
                    elif self.amp == 'bf16':
                        return torch.bfloat16
                    else:
                        return torch.float32

                def step(self, x):
                    with torch.autocast('cuda', dtype=self.amp_dtype):
                        loss = self.model(x)
                    self.scaler.scale(loss).backward()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
            """,
            line=6, column=23, message="autocast may run in bfloat16",
        ),
        # The autocast is built here and handed to the training loop (VideoMamba's scripts).
        Invalid(
            """
              import torch

              def main(args, model, loader):
                  dtype = torch.bfloat16 if args.bf16 else torch.float16
                  amp_autocast = torch.autocast('cuda', dtype=dtype)
            -     scaler = torch.amp.GradScaler('cuda')
            +     scaler = torch.amp.GradScaler('cuda', enabled=dtype == torch.float16)
                  train_one_epoch(model, loader, amp_autocast, scaler)
            """,
            line=6, column=14, message="autocast may run in bfloat16",
        ),
        Invalid(
            """
              import torch
            - scaler = torch.amp.GradScaler('cuda')
            + scaler = torch.amp.GradScaler('cuda', enabled=False)
              with torch.autocast('cuda', dtype=torch.bfloat16):
                  pass
            """,
            line=2, column=10, message="GradScaler is enabled although autocast may run in bfloat16",
        ),
        Invalid(
            """
              import torch

              def train(args, model, x, optimizer):
                  ptdtype = torch.bfloat16 if args.bf16 else torch.float16
            -     scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
            +     scaler = torch.cuda.amp.GradScaler(enabled=(args.amp and ptdtype == torch.float16))
                  with torch.autocast('cuda', dtype=ptdtype):
                      loss = model(x)
                  scaler.scale(loss).backward()
                  scaler.step(optimizer)
                  scaler.update()
            """,
            line=5, column=14, message="GradScaler is enabled although autocast may run in bfloat16",
        ),
        Invalid(
            """
              import torch
            - scaler = torch.amp.GradScaler()
            + scaler = torch.amp.GradScaler(enabled=False)
              with torch.autocast('cuda', dtype=torch.bfloat16):
                  pass
            """,
            line=2, column=10, message="GradScaler is enabled although autocast may run in bfloat16",
        ),
        Invalid(
            """
              import torch
            - scaler = torch.amp.GradScaler('cpu', enabled=True)
            + scaler = torch.amp.GradScaler('cpu', enabled=False)
              with torch.autocast('cpu'):
                  pass
            """,
            line=2, column=10, message="GradScaler is enabled although autocast may run in bfloat16",
        ),
        # The seed documents' Trainer: scaler in __init__, bfloat16 autocast in train_step.
        Invalid(
            """
              import torch

              class Trainer:
                  def __init__(self, model):
                      self.model = model
            -         self.scaler = torch.amp.GradScaler('cuda')
            +         self.scaler = torch.amp.GradScaler('cuda', enabled=False)

                  def train_step(self, batch):
                      with torch.autocast('cuda', dtype=torch.bfloat16):
                          loss = self.model(batch)
                      self.scaler.scale(loss).backward()
            """,
            line=6, column=23, message="autocast may run in bfloat16",
        ),
        # A module-level scaler and a training function's if/elif dtype chain.
        Invalid(
            """
            import torch
            scaler = torch.amp.GradScaler('cuda')

            def train(args):
                if args.precision == 'bf16':
                    dtype = torch.bfloat16
                elif args.precision == 'fp16':
                    dtype = torch.float16
                else:
                    dtype = torch.float32
                with torch.autocast('cuda', dtype=dtype):
                    pass
            """,
            line=2, column=10, message="autocast may run in bfloat16",
        ),
        # Built only when bfloat16 is on (I-JEPA).
        Invalid(
            """
            import torch
            scaler = torch.amp.GradScaler('cuda') if use_bfloat16 else None
            """,
            line=2, column=10, message="built only when bfloat16 is selected (`use_bfloat16`)",
        ),
        Invalid(
            """
            import torch
            if args.precision == 'bf16':
                scaler = torch.amp.GradScaler('cuda')
            """,
            line=3, column=14, message="built only when bfloat16 is selected",
        ),
        # Weights loaded in bfloat16 with an enabled scaler: the unscale raises.
        Invalid(
            """
              import torch
              from transformers import AutoModel
              model = AutoModel.from_pretrained('m', torch_dtype=torch.bfloat16)
            - scaler = torch.amp.GradScaler('cuda')
            + scaler = torch.amp.GradScaler('cuda', enabled=False)
            """,
            line=4, column=10, message="the model's weights are bfloat16 (line 3)",
        ),
        Invalid(
            """
              import torch
              model = Net().cuda().bfloat16()
            - scaler = torch.amp.GradScaler('cuda', enabled=True)
            + scaler = torch.amp.GradScaler('cuda', enabled=False)
            """,
            line=3, column=10, message="not implemented for 'BFloat16'",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        analysis = self.context.analysis
        if not analysis.scalers.is_construction(node):
            if self._file_may_run_bfloat16 and isinstance(node.func, (cst.Name, cst.Attribute)):
                maker = analysis.scaler_makers.named_by(node.func)
                if maker is not None:
                    self._check_maker(node, maker)
            return
        order = positional_order(self.qualified_name(node.func) or "")
        arguments = call_arguments(node, order) if order is not None else None
        if arguments is None:
            return
        enabled = arguments.get("enabled")
        if enabled is not None and (
            bool_value(enabled) is False
            or mentions(enabled, FLOAT16_WORDS)
            or _excludes_bfloat16(enabled)
            # ... or through the flag it reads (micror1: `grad_scaling_enabled = (dtype == 'float16')`),
            # also as one `and`-part (BirdCLEF: `bool(cfg["amp"]) and ... and use_grad_scaler`; round BK).
            or any(
                isinstance(part, (cst.Name, cst.Attribute)) and self._names_float16(part) for part in operands(enabled, cst.And)
            )
        ):
            return
        if self._never_scales(node):
            return
        condition = self._condition(node)
        if condition is not None:
            test, holds = condition
            if self._names_float16(test):
                return  # built for float16 (or a condition that names it): the author's choice
            if _selects_bfloat16(test) is holds and not self._flag_enables_float16(test):
                self.report(
                    node,
                    f"GradScaler is built only when bfloat16 is selected (`{self.context.module.code_for_node(test)}`), "
                    "which needs no loss scaling; build it for float16 instead",
                )
                return
        region = self.context.analysis.scalers.served_region(node)
        cuda_scaler = self._scaler_devices(node, arguments) == CUDA_ONLY
        device = arguments.get("device")
        scaler_device = self.context.module.code_for_node(device) if device is not None else None
        bf16_uses = [use for use in self._conflicting_uses(region, cuda_scaler, scaler_device) if not self._float16_beside(node, use)]
        if bf16_uses:
            self.report(
                node,
                f"GradScaler is enabled although autocast may run in bfloat16, which needs no loss scaling"
                f"{bf16_uses[0].origin}{self._dtype_origin(bf16_uses[0])}",
                fix=self._fix(node, enabled, bf16_uses[0]),
            )
            return
        for function in self._functions_handed_the_scaler(node, region):
            bf16_uses = self._conflicting_uses(function, cuda_scaler, scaler_device)
            if bf16_uses:
                # Only a literal bfloat16 gives a fix here: the dtype's name lives in the callee.
                fix = self._enabled_fix(node, enabled, "False") if bf16_uses[0].dtypes == BFLOAT16 else None
                self.report(
                    node,
                    f"GradScaler is enabled although autocast may run in bfloat16 in `{function.name.value}`, "
                    f"which it is passed to: bfloat16 needs no loss scaling{bf16_uses[0].origin}",
                    fix=fix,
                )
                return
        cast = self._bfloat16_weights(region)
        if cast is not None:
            line = self.context.location(self.context.span(cast)[0]).row
            fix = None
            if enabled is None or bool_value(enabled) is True:
                fix = self._enabled_fix(node, enabled, "False")
            self.report(
                node,
                f"GradScaler is enabled although the model's weights are bfloat16 (line {line}): unscaling "
                "bfloat16 gradients raises \"not implemented for 'BFloat16'\" on CUDA and ROCm",
                fix=fix,
            )

    def _never_scales(self, node: cst.Call) -> bool:
        """Is the scaler bound to a local name that is only checkpointed (Wuerstchen's
        ``scaler.state_dict()`` and ``load_state_dict``), or, in a function, never read at
        all: never used to scale a loss?"""
        analysis = self.context.analysis
        parent = analysis.tree.parent(node)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return False
        target = parent.targets[0].target
        bindings = [binding for binding in analysis.bindings.assignments(target) if binding.node is target]
        if len(bindings) != 1:
            return False
        if not bindings[0].references:
            # A function's local scaler that nothing reads (a teaching script builds one and
            # trains in bfloat16 without it: CS336-Language-Modeling-from-Scratch, round BO).
            return isinstance(analysis.tree.scope_of(node), cst.FunctionDef)
        for access in bindings[0].references:
            member = analysis.tree.parent(access.node)
            if not (
                isinstance(member, cst.Attribute)
                and member.value is access.node
                and member.attr.value in ("state_dict", "load_state_dict")
                and isinstance(analysis.tree.parent(member), cst.Call)
            ):
                return False
        return True

    def _conflicting_uses(self, region: cst.CSTNode, cuda_scaler: bool, scaler_device: str | None) -> list[AutocastUse]:
        """The autocasts of ``region`` that may run in bfloat16 while the scaler scales."""
        uses = self._bfloat16_uses(region)
        # A CUDA scaler disables itself where CUDA is missing, and on CUDA an autocast
        # without a dtype runs in float16: bfloat16 by default only off CUDA is no
        # conflict (`GradScaler("cuda")` beside `autocast("cuda" if ... else "cpu")`). Nor
        # is it for a scaler built on the autocast's own device (stereoanywhere's
        # `GradScaler(autocast_device)` beside `autocast(autocast_device)`): it scales the
        # float16 that device's autocast runs on CUDA, and off CUDA it only wastes a
        # multiply (this page's decision, from round AK).
        return [
            use
            for use in uses
            if not (use.bfloat16_only_off_cuda and (cuda_scaler or self._same_device(use.device_expr, scaler_device)))
        ]

    def _float16_beside(self, construction: cst.Call, use: AutocastUse) -> bool:
        """Is the scaler built on a branch that also binds the autocast's dtype name, to
        float16 alone (physicsnemo's `test/common/optimization.py`: `if cpu: amp_dtype =
        torch.bfloat16; scaler = GradScaler("cpu", enabled=False)` / `else: amp_dtype =
        torch.float16; scaler = GradScaler("cuda", enabled=True)`; rounds BL and BP)? Where this
        scaler exists, the autocast runs float16."""
        dtype = use.dtype_expr
        if not isinstance(dtype, cst.Name):
            return False
        tree = self.context.analysis.tree
        statement = tree.statement_of(construction)
        located = tree.statement_list(statement) if statement is not None else None
        if located is None:
            return False
        siblings, _index = located
        block = tree.parent(siblings[0])
        if not isinstance(block, cst.IndentedBlock) or not isinstance(tree.parent(block), (cst.If, cst.Else)):
            return False  # a branch of an `if`, not the function's own body
        bound = [
            small.value
            for sibling in siblings
            if isinstance(sibling, cst.SimpleStatementLine)
            for small in sibling.body
            if isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value == dtype.value
        ]
        if len(bound) != 1:
            return False
        values = self.context.analysis.values.dtype_values(bound[0])
        return values is not None and "bfloat16" not in values

    def _same_device(self, device: cst.BaseExpression | None, scaler_device: str | None) -> bool:
        """Is the autocast's device the scaler's, as written or through the one value of a
        name (UltraThinking's `device_type = 'cuda' if torch.cuda.is_available() else 'cpu'`
        beside `GradScaler('cuda' if torch.cuda.is_available() else 'cpu')`; round BM)?"""
        if device is None or scaler_device is None:
            return False
        code = self.context.module.code_for_node
        if code(device) == scaler_device:
            return True
        value = self.context.analysis.bindings.single_value(device) if isinstance(device, cst.Name) else None
        return value is not None and code(value) == scaler_device

    def _functions_handed_the_scaler(self, node: cst.Call, region: cst.CSTNode) -> list[cst.FunctionDef]:
        """Module-level functions of this file that the scaler's function passes it to and
        that use it as a scaler (`scaler = GradScaler(...)`, then `train_and_evaluate(...,
        scaler, ...)` whose autocast runs in bfloat16: Bert-VITS2, icefall)."""
        name = self._assigned_name(node)
        if name is None or "." in name or not isinstance(region, cst.FunctionDef):
            return []
        analysis = self.context.analysis
        functions = {
            statement.name.value: statement for statement in self.context.module.body if isinstance(statement, cst.FunctionDef)
        }
        found: list[cst.FunctionDef] = []
        for call in analysis.tree.index.calls:
            if not isinstance(call.func, cst.Name) or call.func.value not in functions:
                continue
            function = functions[call.func.value]
            if function is region or function in found or analysis.tree.scope_of(call) is not region:
                continue
            parameters = function.params
            positional = [param.name.value for param in (*parameters.posonly_params, *parameters.params)]
            keywords = {param.name.value for param in (*parameters.params, *parameters.kwonly_params)}
            matched = match_arguments(call.args, positional, keywords)
            if matched is None:
                continue
            receiving = [key for key, value in matched[0].items() if isinstance(value, cst.Name) and value.value == name]
            if any(
                scaler_call.owner is function and scaler_call.scaler in receiving for scaler_call in analysis.scalers.calls
            ):
                found.append(function)
        return found

    def _scaler_devices(self, node: cst.Call, arguments: dict[str, cst.BaseExpression]) -> frozenset[str] | None:
        """The device types the GradScaler may be built for (None: unknown); torch's
        default device is CUDA."""
        found = torch_api.symbol(self.qualified_name(node.func) or "")
        if found is not None and found.implied_device:
            return frozenset({found.implied_device})
        device = arguments.get("device")
        if device is None:
            return CUDA_ONLY
        values = self.context.analysis.values.string_values(device)
        return frozenset(value.split(":")[0] for value in values) if values is not None else None

    # -- where the scaler's autocast blocks and model live ---------------------------------------

    @functools.cached_property
    def _file_may_run_bfloat16(self) -> bool:
        """Does any autocast of the file (block or built context) possibly run in
        bfloat16? Only then are other calls worth resolving as scaler makers."""
        module = self.context.module
        return bool(self._bfloat16_uses(module)) or any(
            b.use.dtypes is not None and "bfloat16" in b.use.dtypes for b in self.context.analysis.autocast.blocks
        )

    def _bfloat16_uses(self, region: cst.CSTNode) -> list[AutocastUse]:
        """The enabled autocasts of ``region`` that may run in bfloat16 — its blocks, and
        the autocast contexts it builds for other code (``amp_autocast =
        torch.autocast(...)`` passed to the training loop) — when the dtypes of all of them
        are known (else none)."""
        training = self.context.analysis.training
        # A block whose body runs with gradients off (a `validate()` under `torch.no_grad()`:
        # Nvidia-Meshtron-Pytorch, round BP) makes no gradients for the scaler to scale.
        uses = [
            b.use
            for b in self.context.analysis.scalers.served_blocks(region)
            if not b.disabled and not b.use.method and not training.body_runs_without_grad(b.statement)
        ]
        uses += [use for use in self._built_contexts(region) if not use.disabled and not use.method]
        if any(use.dtypes is None for use in uses):
            return []
        return [use for use in uses if use.dtypes is not None and "bfloat16" in use.dtypes and not self._bfloat16_only_disabled(use)]

    def _bfloat16_only_disabled(self, use: AutocastUse) -> bool:
        """Is bfloat16 chosen only where the autocast is off: ``dtype=torch.float16 if
        use_amp else torch.bfloat16`` beside ``enabled=use_amp`` (auralflow)?"""
        chooser, enabled = use.dtype_expr, use.enabled_expr
        if not isinstance(chooser, cst.IfExp) or enabled is None:
            return False
        values = self.context.analysis.values
        when_true, when_false = values.dtype_values(chooser.body), values.dtype_values(chooser.orelse)
        if when_true is None or when_false is None:
            return False
        code = self.context.module.code_for_node
        if "bfloat16" not in when_true and code(enabled) == code(chooser.test):
            return True  # bfloat16 only where the test, and so `enabled=`, is false
        negated = isinstance(enabled, cst.UnaryOperation) and isinstance(enabled.operator, cst.Not)
        return negated and "bfloat16" not in when_false and code(cst.ensure_type(enabled, cst.UnaryOperation).expression) == code(chooser.test)

    def _built_contexts(self, region: cst.CSTNode) -> list[AutocastUse]:
        analysis = self.context.analysis
        found: list[AutocastUse] = []
        for assign in analysis.tree.index.assigns:
            if not isinstance(assign.value, cst.Call) or not self.context.analysis.scalers.in_region(assign, region):
                continue
            use = analysis.autocast.autocast_use(assign.value)
            if use is not None:
                found.append(use)
        return found

    def _dtype_origin(self, use: AutocastUse) -> str:
        """Where an inherited dtype comes from: `` (`self.amp_dtype` is `Trainer.amp_dtype`
        of trainer/base.py)``."""
        analysis = self.context.analysis
        found = analysis.member_values.inherited_member(use.dtype_expr) if use.dtype_expr is not None else None
        if found is None:
            return ""
        path, key, _ = found
        shown = self.context.module.code_for_node(use.dtype_expr) if use.dtype_expr is not None else ""
        return f" (`{shown}` is `{key}` of {analysis.modules.display(path)})"

    def _check_maker(self, node: cst.Call, maker: Found) -> None:
        """A project function or class that builds an always-enabled GradScaler
        (``loss_scaler = NativeScaler()``), called where autocast may run in bfloat16."""
        condition = self._condition(node)
        if condition is not None and self._names_float16(condition[0]):
            return  # built for float16: the author's choice
        bf16_uses = self._bfloat16_uses(self.context.analysis.scalers.served_region(node))
        if bf16_uses:
            self.report(
                node,
                f"`{self.context.module.code_for_node(node.func)}()` builds an enabled GradScaler ({maker.description}) "
                f"although autocast may run in bfloat16, which needs no loss scaling{bf16_uses[0].origin}",
            )

    def _names_float16(self, test: cst.BaseExpression) -> bool:
        """Does ``test`` name float16, itself or through the flag it reads
        (``self.do_grad_scaling = self.amp_dtype == torch.float16``, the HF Trainer)?"""
        if _names_float16(test):
            return True
        analysis = self.context.analysis
        values: list[cst.BaseExpression] | None = None
        if isinstance(test, cst.Name):
            values = analysis.bindings.plain_values(test)
        elif isinstance(test, cst.Attribute):
            own = analysis.classes.instance_attribute(test)
            values = analysis.classes.attribute_values(*own) if own is not None else None
        return bool(values) and any(_names_float16(value) for value in values or ())

    def _condition(self, node: cst.Call) -> tuple[cst.BaseExpression, bool] | None:
        """The nearest condition the construction runs under, in its scope, and whether it
        runs when that condition holds (``GradScaler() if args.bf16 else None``,
        ``if use_bf16: scaler = GradScaler()``)."""
        for child, ancestor in self.context.analysis.tree.ancestry(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if isinstance(ancestor, (cst.If, cst.IfExp)) and child is not ancestor.test:
                return ancestor.test, child is ancestor.body
        return None

    def _bfloat16_weights(self, region: cst.CSTNode) -> cst.Call | None:
        """A cast of a trained model to bfloat16, or a model loaded in bfloat16, in ``region``."""
        analysis = self.context.analysis
        for call in analysis.tree.index.calls:
            if not isinstance(call.func, cst.Attribute) or not self.context.analysis.scalers.in_region(call, region):
                continue
            if analysis.training.in_inference(call):
                continue  # a bfloat16 copy for evaluation (`bf16_full_eval`): nothing trains it
            method = call.func.attr.value
            if method == "from_pretrained":
                if any(
                    arg.keyword is not None
                    and arg.keyword.value in ("torch_dtype", "dtype")
                    and analysis.values.dtype_values(arg.value) == BFLOAT16
                    for arg in call.args
                ):
                    return call
                continue
            if method == "bfloat16" and not call.args:
                cast = True
            elif method == "to":
                cast = any(
                    not arg.star
                    and (arg.keyword is None or arg.keyword.value == "dtype")
                    and analysis.values.dtype_values(arg.value) == BFLOAT16
                    for arg in call.args
                )
            else:
                continue
            receiver = dotted_name(call.func.value) or self._assigned_name(call)
            if (
                cast
                and receiver is not None
                and MODEL.search(receiver.split(".")[-1])
                and receiver not in analysis.training.frozen_modules
            ):
                return call
        return None

    def _assigned_name(self, call: cst.Call) -> str | None:
        """``model`` for ``model = Net().cuda().bfloat16()``."""
        assign = self.context.analysis.tree.parent(call)
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            return dotted_name(assign.targets[0].target)
        return None

    # -- fixes ----------------------------------------------------------------------------

    def _fix(self, node: cst.Call, enabled: cst.BaseExpression | None, use: AutocastUse) -> Fix | None:
        if use.dtypes == frozenset({"bfloat16"}):
            condition = "False"
        else:
            if not isinstance(use.dtype_expr, cst.Name) or not self.context.analysis.bindings.bound_on_every_path(use.dtype_expr, node):
                return None
            torch = self.context.analysis.bindings.module_binding("torch", at=node)
            if torch is None:
                return None
            test = f"{use.dtype_expr.value} == {torch}.float16"
            if enabled is None or bool_value(enabled) is True:
                condition = test
            else:
                condition = f"({source_of(self.context, enabled)} and {test})"
        return self._enabled_fix(node, enabled, condition)

    def _flag_enables_float16(self, test: cst.BaseExpression) -> bool:
        """Does the flag named like bfloat16 turn on only float16 autocasts in this file?
        V-JEPA's evals build the scaler `if use_bfloat16` and open
        `autocast(dtype=torch.float16, enabled=use_bfloat16)`: the flag means "AMP on",
        and the scaler is exactly what its float16 needs."""
        flag = last_name(test)
        if flag is None:
            return False
        gated = [
            block.use
            for block in self.context.analysis.autocast.blocks
            if block.use.enabled_expr is not None and last_name(block.use.enabled_expr) == flag
        ]
        return bool(gated) and all(use.dtypes == FLOAT16 for use in gated)

    def _enabled_fix(self, node: cst.Call, enabled: cst.BaseExpression | None, condition: str) -> Fix | None:
        """``enabled=`` set to ``condition``: the old value replaced, or the keyword added after
        the last argument (on a line of its own when each argument has one)."""
        if enabled is not None:
            if has_comment(self.context, enabled):
                return None
            return self.make_fix(f"Set `enabled={condition}`", [self.context.replace(enabled, condition)])
        editor = CallEdits(self.context, node)
        editor.add(len(node.args), f"enabled={condition}")
        edit = editor.edit()
        return self.make_fix(f"Set `enabled={condition}`", [edit]) if edit is not None else None


def _excludes_bfloat16(enabled: cst.BaseExpression) -> bool:
    """Does ``enabled=`` turn the scaler off for bfloat16 by negating a bfloat16 flag or
    comparing it away (``not use_bf16``, ``use_amp and not opt.amp_bf16``, ``dtype !=
    torch.bfloat16``)? VggAE_Diffusion and traiNNer build `GradScaler(enabled=not use_bf16)`."""
    words = frozenset({"bf16", "bfloat16"})
    found = False

    class _Visitor(ReadOnlyVisitor):
        def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
            nonlocal found
            if isinstance(node.operator, cst.Not) and mentions(node.expression, words):
                found = True

        def visit_Comparison(self, node: cst.Comparison) -> None:
            nonlocal found
            if any(isinstance(target.operator, (cst.NotEqual, cst.IsNot)) for target in node.comparisons) and mentions(node, words):
                found = True

    enabled.visit(_Visitor())
    return found


def _names_float16(test: cst.BaseExpression) -> bool:
    """Does ``test`` name float16 as a word (``args.fp16``, ``"float16"``; not ``bfloat16``)?"""
    words: set[str] = set()
    for name in loaded_names(test):
        words.update(re.split(r"[^a-z0-9]+", name.lower()))
    for node in _strings_and_attributes(test):
        words.update(re.split(r"[^a-z0-9]+", node.lower()))
    return bool(words & FLOAT16_WORDS)


def _strings_and_attributes(test: cst.BaseExpression) -> list[str]:
    found: list[str] = []

    class _Visitor(ReadOnlyVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            value = node.evaluated_value
            if isinstance(value, str):
                found.append(value)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            found.append(node.attr.value)

    test.visit(_Visitor())
    return found


def _selects_bfloat16(test: cst.BaseExpression) -> bool | None:
    """True when ``test`` holding means bfloat16 (``args.bf16``, ``dtype == "bfloat16"``,
    ``use_bf16 and amp``), False when it failing means bfloat16 (``not args.bf16``,
    ``precision != "bf16"``), None when it says neither."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _selects_bfloat16(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) and (_selects_bfloat16(test.left) or _selects_bfloat16(test.right)):
            return True
        return None
    name = last_name(test)
    if name is not None:
        # `using_fp16_rather_bf16` names both: it says nothing certain.
        tokens = set(name.lower().split("_"))
        return True if tokens & {"bf16", "bfloat16"} and not tokens & {"fp16", "float16", "half"} else None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        sides = (test.left, target.comparator)
        names_bfloat16 = any(
            (string_literal(side) or dotted_name(side) or "").lower() in BFLOAT16_SPELLINGS for side in sides
        )
        if names_bfloat16 and isinstance(target.operator, (cst.Equal, cst.Is)):
            return True
        if names_bfloat16 and isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
            return False
    return None
