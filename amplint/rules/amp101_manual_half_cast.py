from __future__ import annotations

import functools
import re

import libcst as cst

from amplint.analysis.context import RuleContext
from amplint.analysis.syntax import dotted_name, receiver_root
from amplint.analysis.torch_api import HALF_TENSOR_TYPES, LOW_PRECISION
from amplint.diagnostics import Applicability, Fix
from amplint.fixes.calls import CallEdits, comment_spans, outer_span
from amplint.fixes.edits import remove_statement
from amplint.rules.base import AnalysisRule, Invalid

UPCASTS = frozenset({"float", "double"})
SAVED = re.compile(r"state_dict|checkpoint|ckpt|deepcopy|ema|export", re.IGNORECASE)
# A condition or function that talks about precision makes the cast a deliberate mode.
PRECISION_WORDS = re.compile(r"fp16|bf16|f16|half|float16|bfloat16|precision|dtype|amp\b|mixed", re.IGNORECASE)
# Inference pipelines (diffusers) and evaluation entry points take casts on purpose.
INFERENCE_RECEIVER = re.compile(r"pipe", re.IGNORECASE)
EVALUATION_CALLEE = re.compile(r"(?:^|[._])(eval|valid|val|test|infer|predict)", re.IGNORECASE)
EVALUATION_FLAG = re.compile(r"^(eval|evaluate|evaluation|test|infer|inference|predict)(_only)?$", re.IGNORECASE)
# Pure-fp16 training with fp32 master weights kept by the optimizer wrapper.
MASTER_WEIGHT_SCHEMES = re.compile(r"\b(deepspeed|FP16_?Optimizer|MemoryEfficientFP16Optimizer|master_params)\b")
# Hand-made mixed precision: the model cast to half, then its normalization layers put back
# in float32 (cifar10-airbench: `if isinstance(mod, BatchNorm): mod.float()`), as apex's O2
# and fastai's to_fp16 do; the casts are the design, not a slip.
FLOAT32_NORMS = re.compile(
    r"isinstance\(\s*(\w+)\s*,\s*\(?[^()\n]*Norm[^()\n]*\)?\s*\)\s*(?:and[^:\n]*)?:\s*\n?\s*\1\.float\(\)"
)
# A quantized base model (bitsandbytes 8-/4-bit, QLoRA) computes in the dtype it was loaded
# with; its inputs must be cast to that dtype, and only the adapters train.
QUANTIZED_BASE = re.compile(r"\b(load_in_8bit|load_in_4bit|BitsAndBytesConfig|prepare_model_for_kbit_training)\b")
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Words that name a model in a variable (`model`, `self.net`, `ddp_model`, `resnet`, `unet`).
MODEL_WORDS = frozenset(
    {"model", "net", "network", "unet", "transformer", "backbone", "generator", "discriminator", "classifier", "llm"}
)
FLOAT16_CASTS = frozenset({"half"})


class ManualHalfCast(AnalysisRule, code="AMP101", name="manual-half-cast", summary="Manual cast to a low-precision dtype", fix=Applicability.UNSAFE):
    """## What it does
    Flags manual casts of a model or its inputs to a low-precision dtype — `.half()`,
    `.bfloat16()`, `.to(torch.float16 | torch.half | torch.bfloat16)` (positional, after a
    device, or `dtype=`), `.type(torch.HalfTensor | torch.cuda.HalfTensor | torch.float16)`
    — in a file that trains (calls a tensor `.backward()` or steps an optimizer).

    *A model* is a receiver named like one (`model`, `self.net`, `ddp_model`, `resnet`,
    `unet`), a name bound to a module construction (`torch.nn.*`, a class of the file
    that subclasses `nn.Module`, `from_pretrained(...)`), or a model built and cast in one
    assignment (`model = Net().cuda().half()`). *Its inputs* are values passed to a model
    call, directly (`model(x.half())`) or through the name the cast is bound to
    (`x = x.half()` and later `model(x)` in the same function). A cast of anything else
    (optimizer arithmetic on gradients, a buffer, a reference tensor) is not flagged.

    bfloat16 casts are flagged only in files that also open autocast blocks: pure
    bfloat16 training without autocast (bfloat16 storage chosen layer by layer, as in the
    NanoGPT speedrun) is a design with float32's exponent range, while mixing manual
    bfloat16 casts with autocast is the mistake. float16 casts are flagged everywhere.

    Not flagged: dtypes that are not a low-precision literal (or a name bound once in
    scope to one); frozen modules (`X.requires_grad_(False)` or
    `p.requires_grad = False` over `X.parameters()` in the same file) and tensors
    passed directly to them; round trips (`x.half().float()`); casts under
    `torch.no_grad()` / `torch.inference_mode()` or in functions decorated with them or
    named for evaluation (`eval*`, `valid*`, `test*`, `infer*`, `predict*`, `sample*`,
    `export*`, `save*`, also after an underscore: `log_validation`), or in the body of an
    `if` on a flag named for evaluation (`if args.eval_only:`, `args.evaluate`, `opt.test`:
    APE's `main()` builds, casts and tests a model there; amplint's decision, round AZ); casts of state dicts, checkpoints, EMA or deep copies, and
    values passed to `torch.save`; autocast-disabled regions; test modules (`test_*.py`,
    `*_test.py`, files under a `tests/` or `test/` directory) and `unittest.TestCase`
    classes, which cast on purpose; a module's `if __name__ == "__main__":` block that
    holds every backward of the file while nothing steps an optimizer (a model file timing
    its float16 forward and backward: video-mamba-suite, round BN; amplint's decision);
    benchmark modules (`bench.py`, `benchmark_*.py`,
    `*_bench.py`, `*_perf.py`, files under `benchmarks/` or `profiling/`), which time the precision they are told to
    (superbenchmark's FP8 mode casts the model to float16 for Transformer Engine; amplint's
    decision, round BF); files of a copy of NVIDIA apex the project keeps
    (`apex/apex/...`, `apex/contrib/...`: VALOR's vendored apex, whose kernel tests and
    profiling examples run in half on purpose; amplint's decision, from round AD); and, a decision of amplint's, casts inside the
    methods of an `nn.Module` subclass, which are the model's own deliberate dtype
    handling rather than a cast of the model or its inputs. Also amplint's decisions,
    from real training code: casts under a condition (or in a function) that mentions
    precision (`if args.fp16:`, `if dtype == torch.half`, `def cast_inputs_half`) are a
    deliberate precision mode; casts of inference pipelines (`pipeline.unet.half()`), of
    arguments passed to evaluation entry points (`validate.run(model=m.half())`) are not
    training casts; files using a master-weight scheme (DeepSpeed, fairseq's
    `FP16Optimizer`, a `master_params` list as in guided-diffusion) are skipped, and so
    are files that load a quantized base model (`BitsAndBytesConfig`,
    `load_in_8bit`/`load_in_4bit`, `prepare_model_for_kbit_training`: QLoRA-style
    training, where inputs must be cast to the base model's compute dtype and only
    adapters train), and files that put the normalization layers of a half model back
    in float32 (`if isinstance(mod, BatchNorm): mod.float()`: cifar10-airbench's
    speedruns, mixed precision made by hand as apex's O2 did; an amplint decision from
    round AG), and functions named for a precision (`convert_module_to_f16`).
    Beyond RULES.md, also from real code (evaluation round O): a module only ever run
    under `torch.no_grad()` / `torch.inference_mode()` and otherwise only moved, cast,
    put in eval mode or rewired (`m.encoder.layers = m.encoder.layers[:n]`) counts as
    frozen (seed-vc's half-precision wav2vec feature extractor: no gradient reaches it),
    and so does one otherwise only passed to a function named for inference
    (`inference(image, model_vlm)`, `run_inference`, `evaluate`, `predict_*`: OSEDiff's RAM
    tagger, round AU); a cast in the assignment that loads a module
    (`enc = AutoModel.from_pretrained(...).to(torch.bfloat16)`) is a cast of that name, so
    freezing it later counts (malaya-speech's HuBERT, round AU);
    and an input cast bound to a name is not flagged
    when every later read of that name goes to a frozen module (LatentSync's `mel`, read
    only by its frozen fp16 SyncNet) or runs under an autocast of the cast's own dtype,
    where the cast changes nothing the message could ask for. From round S: a cast that
    comes after every tensor backward of its function, in no loop that holds one, is not
    a training cast (LLM-Pruner halves the pruned model to save and evaluate it, after the
    backward that scored its weights).

    ## Why is this bad?
    Casting the model or its inputs to float16/bfloat16 by hand makes every op run in
    low precision — including the reductions, softmaxes and losses that autocast keeps
    in float32 — and, for the model, stores the weights and their optimizer updates in
    low precision, where small updates round away. Autocast chooses the precision per
    op and keeps float32 master weights.

    ## Example
    ```python
    import torch

    model = torch.nn.Linear(8, 1).cuda().half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.half()), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    model = torch.nn.Linear(8, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix drops the cast and nothing else — `x.to(device, torch.half)` becomes
    `x.to(device)`, `unet.to("cuda").half()` becomes `unet.to("cuda")`, and a statement
    that would do nothing (`model.half()`, `x = x.half()`) is removed rather than left as
    `x = x` — which changes the dtype the code runs in, and it does not add the autocast
    block that should replace the cast. All the casts of a file are fixed together or
    not at all: removing the model's cast but not its inputs' (or the reverse) would feed
    float32 inputs to a float16 model. Review the result and wrap the forward pass and
    loss in `torch.autocast`.
    """

    # `.half()`, `torch.half`, `.bfloat16()`, `torch.bfloat16`, `torch.float16`, tensor types.
    triggers = frozenset({".half", ".bfloat16", "float16", "HalfTensor", "BFloat16Tensor"})
    # Pre-filter: only files that train: a backward, an optimizer's `.step()`, or a
    # scaler's `.step(optimizer)` (a scheduler's `.step(x, t)` is neither).
    requires = (frozenset({".backward", ".step()", "*scaler", "GradScaler"}),)

    VALID = (
        # video-mamba-suite (round BN): a model file's self-test times a float16 forward and
        # backward; nothing in the file steps an optimizer.
        """
        import time
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                return x * 2

        if __name__ == "__main__":
            model = Net().cuda().half()
            x = torch.randn(2, 3).cuda().half()
            begin = time.time()
            model(x).mean().backward()
            print(time.time() - begin)
        """,
        # Cast as it is loaded, then frozen: a bf16 feature extractor (malaya-speech's HuBERT).
        """
        import torch
        from transformers import AutoModel

        def main(opt, x):
            enc = AutoModel.from_pretrained("h").to(torch.bfloat16)
            for p in enc.parameters():
                p.requires_grad = False
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = enc(x).mean()
            loss.backward()
            opt.step()
        """,
        # A tagger only ever handed to a function named for inference (OSEDiff's RAM model,
        # whose `inference` runs it under no_grad in another file).
        """
        import torch
        from ram import ram, inference

        def main(args, unet, loader, opt):
            model_vlm = ram(pretrained=args.ram_path)
            model_vlm.eval()
            model_vlm.to("cuda", dtype=torch.float16)
            for x in loader:
                caption = inference(x.to(dtype=torch.float16), model_vlm)
                loss = unet(x, caption).mean()
                loss.backward()
                opt.step()
        """,
        # After the function's training: the pruned model is halved to save and evaluate.
        """
        import torch

        def main(model, pruner, batch, args):
            for step in range(args.steps):
                loss = model(batch).loss
                loss.backward()
                pruner.step()
            model.half()
            torch.save({"model": model}, "pruned.bin")
            with torch.no_grad():
                model.generate(batch)
        """,
        "model = model.half()\n",  # no training in this file
        """
        import torch
        x = x.half().float()
        loss.backward()
        """,
        """
        import torch
        with torch.no_grad():
            y = model(x.half())
        loss.backward()
        """,
        """
        import torch

        def evaluate(m, x):
            return m(x.half())

        loss.backward()
        """,
        """
        import torch
        vae.requires_grad_(False)
        vae.to(device, dtype=torch.float16)
        latents = vae.encode(x.half())
        loss.backward()
        """,
        """
        import torch
        torch.save(model.half().state_dict(), 'm.pt')
        sd = model.state_dict()
        sd = {k: v.half() for k, v in sd.items()}
        loss.backward()
        """,
        """
        import torch
        x = x.to(weight_dtype)
        loss.backward()
        """,
        """
        import torch
        x = x.to(device)
        loss.backward()
        """,
        """
        import torch

        class Block(torch.nn.Module):
            def forward(self, x):
                return self.proj(x.to(torch.bfloat16))

        loss.backward()
        """,
        """
        import torch
        with torch.autocast('cuda', enabled=False):
            y = m(x.half())
        loss.backward()
        """,
        """
        import torch
        if args.fp16:
            model.half()
        loss.backward()
        """,
        """
        import torch
        pipeline.unet = pipeline.unet.to(torch.float16)
        loss.backward()
        """,
        """
        import torch
        results = validate.run(model=attempt_load(w).half())
        loss.backward()
        """,
        """
        import torch

        def log_validation(pipe, x):
            return model(x.half())

        loss.backward()
        """,
        """
        import deepspeed
        model = model.half()
        loss.backward()
        """,
        # cifar10-airbench: a half model whose BatchNorm layers are put back in float32.
        """
        def train(make_net, loader, optimizer):
            net = make_net().half().cuda()
            for mod in net.modules():
                if isinstance(mod, (nn.BatchNorm2d, nn.GroupNorm)):
                    mod.float()
            for x, y in loader:
                loss = net(x.half()).sum()
                loss.backward()
                optimizer.step()
        """,
        # guided-diffusion's fp16_util: a conversion helper beside fp32 master params.
        """
        def convert_module_to_f16(l):
            l.weight.data = l.weight.data.half()

        loss.backward()
        """,
        """
        master_params = [p.detach().float() for p in params]
        model.half()
        loss.backward()
        """,
        # Not a model or its inputs: optimizer arithmetic on gradients (Muon's Newton-Schulz).
        """
        import torch

        def zeropower(G, steps=5):
            X = G.bfloat16()
            X /= X.norm()
            return X

        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = model(x)
        loss.backward()
        """,
        # Pure bfloat16 storage without autocast: a design, not a mistake (NanoGPT speedrun).
        """
        import torch
        model = GPT().cuda().bfloat16()
        for m in model.modules():
            m.weight.data = m.weight.data.bfloat16()
        loss = model(x)
        loss.backward()
        """,
        # A custom op's fake kernel.
        """
        import torch

        @torch.library.register_fake('mylib::mm')
        def _(x, w):
            return x.half() @ w.half()

        loss.backward()
        """,
        # Test modules cast reference tensors on purpose.
        """
        import torch

        class TestAmp(unittest.TestCase):
            def test_half(self):
                model = Net().half()
                model(x).sum().backward()
        """,
        # peft's examples/int8_training: an 8-bit base model takes float16 inputs.
        """
        import torch
        from transformers import BitsAndBytesConfig
        model = load(quantization_config=BitsAndBytesConfig(load_in_8bit=True))
        pixel_values = batch.pop('pixel_values').to(device, torch.float16)
        loss.backward()
        """,
        # seed-vc: a feature extractor only ever run under no_grad is as frozen as
        # `requires_grad_(False)` makes it.
        """
        import torch

        class Trainer:
            def __init__(self, device):
                self.wav2vec_model = Wav2Vec2Model.from_pretrained(name).to(device)
                self.wav2vec_model.encoder.layers = self.wav2vec_model.encoder.layers[:8]
                self.wav2vec_model = self.wav2vec_model.eval()
                self.wav2vec_model = self.wav2vec_model.half()

            def step(self, model, batch):
                with torch.no_grad():
                    features = self.wav2vec_model(batch.half())
                model(features.float()).sum().backward()
        """,
        # LatentSync: `mel` goes only to the frozen fp16 SyncNet; `x` is read only under an
        # autocast of the same dtype, where the cast changes nothing.
        """
        import torch

        def train(loader, unet, syncnet, device):
            syncnet.requires_grad_(False)
            for batch in loader:
                mel = batch["mel"].to(device, dtype=torch.float16)
                x = batch["x"].to(device, dtype=torch.float16)
                with torch.autocast("cuda", dtype=torch.float16):
                    pred = unet(x)
                loss = syncnet(pred, mel).mean()
                loss.backward()
        """,
    )
    INVALID = (
        # A `__main__` block that steps an optimizer trains on what it casts.
        Invalid(
            """
              import torch

              if __name__ == "__main__":
            -     model = Net().cuda().half()
            +     model = Net().cuda()
                  optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                  model(x).mean().backward()
                  optimizer.step()
            """,
            unsafe=True,
            line=4, column=13, message="cast of the model to low precision",
        ),
        Invalid(
            """
              import torch
            - model = Net().cuda().half()
            - loss = model(x.half()).sum()
            + model = Net().cuda()
            + loss = model(x).sum()
              loss.backward()
            """,
            unsafe=True,
            count=2,
            line=2, column=9, message="cast of the model to low precision",
        ),
        Invalid(
            """
              import torch
            - model.half()
              for x, y in loader:
            -     x = x.to(device, torch.float16)
            -     loss = model(x, y=y.to(dtype=torch.float16, non_blocking=True)).sum()
            +     x = x.to(device)
            +     loss = model(x, y=y.to(non_blocking=True)).sum()
                  loss.backward()
            """,
            unsafe=True,
            count=3,
            line=2, column=1, message="run the forward pass and the loss under `torch.autocast(...)`",
        ),
        # No `x = x` left behind; `.type(...)` and a dtype bound to a name.
        Invalid(
            """
              import torch
              dt = torch.float16
            - x = x.to(dt)
            - inputs = inputs.type(torch.cuda.HalfTensor)
              out = net(x, inputs)
              optimizer.step()
            """,
            unsafe=True,
            count=2,
            line=3, column=5, message="cast of the model's inputs",
        ),
        # Only the cast goes: the statement still moves the model (issue 13).
        Invalid(
            """
              import torch
            - unet.to('cuda').to(torch.float16)
            + unet.to('cuda')
              loss.backward()
            """,
            unsafe=True,
            line=2, column=1, message="cast of the model",
        ),
        # A method chain keeps its layout.
        Invalid(
            """
              import torch
              model = (Net()
            -          .half()
                       .cuda())
              loss.backward()
            """,
            unsafe=True,
            line=2, column=10, message="cast of the model",
        ),
        # A model and its inputs together, or not at all: the input cast has no fix here.
        Invalid(
            """
            import torch
            net.half()
            for x in loader:
                x = x.half(); out = net(x)
                out.sum().backward()
            """,
            fixed=None,
            unsafe=True,
            count=2,
            line=2, column=1, message="cast of the model",
        ),
        # Run with gradients once, outside no_grad: it trains, so its cast counts.
        Invalid(
            """
              import torch
            - encoder_model = encoder_model.half()
              with torch.no_grad():
                  features = encoder_model(x)
              loss = encoder_model(y).sum()
              loss.backward()
            """,
            unsafe=True,
            line=2, column=17, message="cast of the model",
        ),
        # Read once outside the autocast of its dtype: the cast decides that op's precision.
        Invalid(
            """
              import torch
            - x = batch.to(device, dtype=torch.float16)
            + x = batch.to(device)
              with torch.autocast("cuda", dtype=torch.float16):
                  out = model(x)
              loss = (out - x).pow(2).mean()
              loss.backward()
            """,
            unsafe=True,
            line=2, column=5, message="cast of the model's inputs",
        ),
        # bfloat16 beside autocast.
        Invalid(
            """
              import torch
            - model = model.to(torch.bfloat16)
              with torch.autocast('cuda', dtype=torch.bfloat16):
                  loss = model(x)
              loss.backward()
            """,
            unsafe=True,
            line=2, column=9, message="cast of the model",
        ),
    )

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._casts: list[tuple[cst.Call, str]] = []  # each cast and what it casts: "model" | "input"

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Attribute) or not self._file_trains:
            return
        method = node.func.attr.value
        if method in ("half", "bfloat16"):
            if node.args:
                return
            dtypes = frozenset({"float16" if method == "half" else "bfloat16"})
        elif method == "to":
            dtype_arg = self._low_precision_argument(node)
            if dtype_arg is None:
                return
            dtypes = self.context.analysis.values.dtype_values(dtype_arg.value) or LOW_PRECISION
        elif method == "type":
            if len(node.args) != 1:
                return
            found = self._half_type(node.args[0].value)
            if found is None:
                return
            dtypes = found
        else:
            return
        if "float16" not in dtypes and not self.context.analysis.autocast.blocks:
            return  # pure-bfloat16 training without autocast: a design with float32's range
        if not self._applies(node):
            return
        target = self._model_or_input(node)
        if target == "input" and self._reads_are_harmless(node, dtypes):
            return
        if target is not None:
            self._casts.append((node, target))

    def leave_Module(self, original_node: cst.Module) -> None:
        fixes = [self._fix(node) for node, _ in self._casts]
        # A model and its inputs are fixed together or not at all: once one cast stays
        # (no fix for it, or silenced), removing the others would mix dtypes in the forward.
        together = all(fix is not None for fix in fixes) and not any(
            self.context.is_suppressed(self.code, node) for node, _ in self._casts
        )
        for (node, target), fix in zip(self._casts, fixes, strict=True):
            method = node.func.attr.value  # type: ignore[attr-defined]
            what = "the model" if target == "model" else "the model's inputs"
            message = (
                f"Manual `.{method}(...)` cast of {what} to low precision; remove it and run the forward pass "
                "and the loss under `torch.autocast(...)` instead"
            )
            if fix is not None and together:
                fix = Fix(fix.message, fix.edits, fix.applicability, isolation=f"{self.code}:casts")
            self.report(node, message, fix=fix if together else None)

    # -- what counts --------------------------------------------------------------------------

    def _low_precision_argument(self, node: cst.Call) -> cst.Arg | None:
        for arg in node.args:
            if arg.star or (arg.keyword is not None and arg.keyword.value != "dtype"):
                continue
            values = self.context.analysis.values.dtype_values(arg.value)
            if values and values <= LOW_PRECISION:
                return arg
        return None

    def _half_type(self, expr: cst.BaseExpression) -> frozenset[str] | None:
        """The dtypes of a low-precision tensor type or dtype (``torch.HalfTensor``), or None."""
        qualified = self.qualified_name(expr) or ""
        if qualified in HALF_TENSOR_TYPES:
            return frozenset({"bfloat16" if "BFloat16" in qualified else "float16"})
        values = self.context.analysis.values.dtype_values(expr)
        return values if values and values <= LOW_PRECISION else None

    @functools.cached_property
    def _file_trains(self) -> bool:
        """Checked before any dtype is resolved: most files that cast never train."""
        training = self.context.analysis.training
        return not training.in_test_module and not training.in_benchmark_module and not training.in_apex_copy and training.trains

    def _applies(self, node: cst.Call) -> bool:
        analysis = self.context.analysis
        if analysis.training.in_inference(node):
            return False
        if self._in_self_test_block(node):
            return False
        if self._precision_managed_elsewhere or self._deliberate(node):
            return False
        if analysis.autocast.in_disabled_region(node):
            return False
        receiver = node.func.value  # type: ignore[attr-defined]
        if self._mentions_saved(receiver):
            return False
        if self._is_round_trip(node) or self._in_saved_value(node) or self._in_module_class(node):
            return False
        spelled = dotted_name(receiver)
        if spelled is not None and self.context.analysis.training.is_frozen(spelled):
            return False
        target = self._bound_to(node)
        if target is not None and self.context.analysis.training.is_frozen(target):
            # `enc = AutoModel.from_pretrained(...).to(torch.bfloat16)`, then frozen (malaya-speech).
            return False
        return not self._passed_to_frozen(node) and not self._after_training(node)

    def _in_self_test_block(self, node: cst.Call) -> bool:
        """Is the cast in the module's ``if __name__ == "__main__":`` block, where every
        backward of the file runs and no optimizer steps (video-mamba-suite's model files
        time a float16 forward and backward there for flash-attention; round BN)? Nothing
        trains on those gradients: the block measures what it casts."""
        analysis = self.context.analysis
        training = analysis.training
        return (
            analysis.project.in_main_block(node)
            and not training.optimizer_steps
            and all(analysis.project.in_main_block(call) for call in training.backward_calls)
        )

    def _bound_to(self, node: cst.Call) -> str | None:
        """The dotted name the cast's chain is assigned to, alone: ``enc`` in
        ``enc = AutoModel.from_pretrained(...).to(torch.bfloat16).cuda()``."""
        tree = self.context.analysis.tree
        current: cst.CSTNode = node
        parent = tree.parent(current)
        while (isinstance(parent, cst.Attribute) and parent.value is current) or (
            isinstance(parent, cst.Call) and parent.func is current
        ):
            current, parent = parent, tree.parent(parent)
        if isinstance(parent, cst.Assign) and parent.value is current and len(parent.targets) == 1:
            return dotted_name(parent.targets[0].target)
        return None

    def _after_training(self, node: cst.Call) -> bool:
        """Does the cast come after its function's training: every tensor backward of the
        function before it, none in a loop around it (LLM-Pruner halves the pruned model to
        save and evaluate it, after the backward that scored its weights)?"""
        tree = self.context.analysis.tree
        scope = tree.scope_of(node)
        backwards = [
            call
            for call in tree.index.calls
            if tree.scope_of(call) is scope and self.context.analysis.training.is_tensor_backward(call)
        ]
        start = self.context.span(node)[0]
        if not backwards or any(self.context.span(call)[0] > start for call in backwards):
            return False
        loops = [ancestor for ancestor in tree.ancestors(node) if isinstance(ancestor, (cst.For, cst.While))]
        return not any(tree.within(call, loop) for call in backwards for loop in loops)

    # -- a model or its inputs ----------------------------------------------------------------

    def _model_or_input(self, node: cst.Call) -> str | None:
        """What the cast applies to: "model" (a model-like receiver, or a model built and
        cast in one expression), "input" (a value passed to a model), or None."""
        receiver = node.func.value  # type: ignore[attr-defined]
        tree = self.context.analysis.tree
        if self._is_model(receiver):
            return "model"
        top = self._chain_end(node)
        parent = tree.parent(top)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is top:
            target = parent.targets[0].target
            if self._is_model(target):
                return "model"
            if isinstance(target, cst.Name) and self._passed_to_model_later(target, node):
                return "input"
        if isinstance(parent, cst.Arg):
            call = tree.parent(parent)
            if isinstance(call, cst.Call) and call.func is not node and self._is_model_call(call):
                return "input"
        return None

    def _chain_end(self, node: cst.Call) -> cst.CSTNode:
        """The end of the method chain the cast is part of (``x.half().cuda()`` for ``x.half()``)."""
        tree = self.context.analysis.tree
        top: cst.CSTNode = node
        while isinstance(tree.parent(top), cst.Attribute) and isinstance(tree.parent(tree.parent(top)), cst.Call):  # type: ignore[arg-type]
            top = tree.parent(tree.parent(top))  # type: ignore[arg-type,assignment]
        return top

    def _is_model(self, expr: cst.BaseExpression) -> bool:
        spelled = dotted_name(expr)
        if spelled is not None:
            last = spelled.split(".")[-1].lower()
            if set(last.split("_")) & MODEL_WORDS or last.endswith(("model", "net")):
                return True
            if isinstance(expr, cst.Name):
                return any(self._builds_model(value) for value in self.context.analysis.bindings.assigned_values(expr))
            return False
        if isinstance(expr, (cst.Call, cst.Subscript)):
            root = receiver_root(expr)  # `unet.to("cuda")`: the model moved; `Net().cuda()`: built
            return self._builds_model(root) or (dotted_name(root) is not None and self._is_model(root))
        return False

    def _builds_model(self, expr: cst.BaseExpression) -> bool:
        """A module construction: ``torch.nn.Linear(...)``, a class of this file that subclasses
        ``nn.Module``, or ``X.from_pretrained(...)``."""
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.qualified_name(expr.func) or ""
        if qualified.startswith("torch.nn.") and qualified.split(".")[-1][:1].isupper():
            return True
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "from_pretrained":
            return True
        if isinstance(expr.func, cst.Name):
            cls = self.context.analysis.classes.class_named(expr.func.value)
            return cls is not None and any(self.qualified_name(base.value) in MODULE_BASES for base in cls.bases)
        return False

    def _is_model_call(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        return self._is_model(func)

    def _passed_to_model_later(self, name: cst.Name, cast: cst.Call) -> bool:
        """Is the value the cast is bound to passed to a model afterwards in the same scope?"""
        tree = self.context.analysis.tree
        scope = tree.scope_of(cast)
        after = self.context.span(cast)[1]
        for call in tree.index.calls:
            if tree.scope_of(call) is not scope or self.context.span(call)[0] < after:
                continue
            if self._is_model_call(call) and any(
                isinstance(arg.value, cst.Name) and arg.value.value == name.value for arg in call.args
            ):
                return True
        return False

    def _is_round_trip(self, node: cst.Call) -> bool:
        parent_of = self.context.analysis.tree.parents
        attribute = parent_of.get(node)
        call = parent_of.get(attribute) if isinstance(attribute, cst.Attribute) else None
        if not isinstance(call, cst.Call) or not isinstance(attribute, cst.Attribute):
            return False
        if attribute.attr.value in UPCASTS:
            return True
        if attribute.attr.value == "to":
            return any((self.context.analysis.values.dtype_values(arg.value) or set()) & {"float32", "float64"} for arg in call.args)
        return False

    def _in_saved_value(self, node: cst.CSTNode) -> bool:
        parent_of = self.context.analysis.tree.parents
        current = parent_of.get(node)
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            if isinstance(current, cst.Call) and self.qualified_name(current.func) == "torch.save":
                return True
            if isinstance(current, (cst.DictComp, cst.ListComp, cst.GeneratorExp)) and self._mentions_saved(
                current.for_in.iter
            ):
                return True
            current = parent_of.get(current)
        return False

    @property
    def _precision_managed_elsewhere(self) -> bool:
        text = self.context.text
        return any(pattern.search(text) is not None for pattern in (MASTER_WEIGHT_SCHEMES, QUANTIZED_BASE, FLOAT32_NORMS))

    def _deliberate(self, node: cst.Call) -> bool:
        """A precision mode chosen on purpose, an inference pipeline, an evaluation, a test."""
        receiver = node.func.value  # type: ignore[attr-defined]
        root = receiver_root(receiver)
        if isinstance(root, cst.Name) and INFERENCE_RECEIVER.search(root.value):
            return True
        parent_of = self.context.analysis.tree.parents
        child: cst.CSTNode = node
        current = parent_of.get(node)
        while current is not None:
            if (
                isinstance(current, (cst.If, cst.While, cst.IfExp))
                and child is not current.test
                and PRECISION_WORDS.search(self.context.module.code_for_node(current.test))
            ):
                return True
            if isinstance(current, cst.If) and child is current.body and _names_evaluation(current.test):
                return True  # `if args.eval_only:` builds, casts and tests a model (APE, round AZ)
            if isinstance(current, cst.Arg):
                call = parent_of.get(current)
                callee = dotted_name(call.func) if isinstance(call, cst.Call) else None
                if callee and EVALUATION_CALLEE.search(callee):
                    return True
            if isinstance(current, cst.FunctionDef) and PRECISION_WORDS.search(current.name.value):
                return True
            if isinstance(current, cst.ClassDef) and (
                current.name.value.startswith("Test")
                or any(self.qualified_name(base.value) == "unittest.TestCase" for base in current.bases)
            ):
                return True
            child, current = current, parent_of.get(current)
        return False

    def _mentions_saved(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` (or what its root name was bound to) a state dict, checkpoint or copy?"""
        if SAVED.search(self.context.module.code_for_node(expr)):
            return True
        root = receiver_root(expr)
        if isinstance(root, cst.Name):
            return any(
                SAVED.search(self.context.module.code_for_node(value))
                for value in self.context.analysis.bindings.assigned_values(root)
            )
        return False

    def _in_module_class(self, node: cst.CSTNode) -> bool:
        parent_of = self.context.analysis.tree.parents
        current = parent_of.get(node)
        while current is not None:
            if isinstance(current, cst.ClassDef):
                return any(self.qualified_name(base.value) in MODULE_BASES for base in current.bases)
            current = parent_of.get(current)
        return False

    def _passed_to_frozen(self, node: cst.Call) -> bool:
        parent_of = self.context.analysis.tree.parents
        arg = parent_of.get(node)
        call = parent_of.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            return False
        return self._calls_frozen(call)

    def _calls_frozen(self, call: cst.Call) -> bool:
        """``frozen(x)``, ``frozen.forward(x)``, ``vae.encode(x)`` of a frozen module."""
        training = self.context.analysis.training
        spelled = dotted_name(call.func)
        if spelled is not None and training.is_frozen(spelled):
            return True
        owner = dotted_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
        return owner is not None and training.is_frozen(owner)

    def _reads_are_harmless(self, node: cst.Call, dtypes: frozenset[str]) -> bool:
        """Is the cast bound to a name whose every later read either goes to a frozen
        module (LatentSync's ``mel = batch["mel"].to(device, dtype=torch.float16)``, read
        only by its frozen fp16 SyncNet) or runs under an autocast of the same dtype,
        where the cast changes nothing the message could ask for?"""
        tree = self.context.analysis.tree
        assign = tree.parent(self._chain_end(node))
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
            return False
        name = assign.targets[0].target.value
        scope = tree.scope_of(node)
        after = self.context.span(assign)[1]
        reads = [
            read
            for read in self.context.analysis.training.occurrences(name)
            if isinstance(read, cst.Name)
            and tree.scope_of(read) is scope
            and self.context.span(read)[0] >= after
            and not isinstance(tree.parent(read), cst.AssignTarget)
        ]
        return bool(reads) and all(self._harmless_read(read, dtypes) for read in reads)

    def _harmless_read(self, read: cst.Name, dtypes: frozenset[str]) -> bool:
        tree = self.context.analysis.tree
        block = self.context.analysis.autocast.enclosing(read)
        if block is not None and not block.disabled and block.use.dtypes == dtypes:
            return True
        value: cst.CSTNode = read
        if isinstance(tree.parent(value), cst.Subscript) and tree.parent(value).value is value:  # type: ignore[union-attr]
            value = tree.parent(value)  # type: ignore[assignment]  # `frames[:4]`
        arg = tree.parent(value)
        call = tree.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and self._calls_frozen(call)

    # -- fix ----------------------------------------------------------------------------------

    def _fix(self, node: cst.Call) -> Fix | None:
        """Drop the cast and only the cast: ``x.to(device, torch.half)`` → ``x.to(device)``;
        ``unet.to("cuda").half()`` → ``unet.to("cuda")``; a statement left doing nothing
        (``model.half()``, ``x = x.half()``) is removed rather than left as a no-op."""
        receiver = node.func.value  # type: ignore[attr-defined]
        method = node.func.attr.value  # type: ignore[attr-defined]
        tree = self.context.analysis.tree
        if method == "to":
            dtype_arg = self._low_precision_argument(node)
            if len(node.args) > 1:
                # Only the dtype argument goes: the call keeps its layout and comments.
                editor = CallEdits(self.context, node)
                editor.drop({index for index, arg in enumerate(node.args) if arg is dtype_arg})
                edit = editor.edit()
                return self.make_fix("Remove the cast", [edit]) if edit is not None else None
        parent = tree.parent(node)
        line = tree.parent(parent) if parent is not None else None
        idle = (isinstance(parent, cst.Expr) and dotted_name(receiver) is not None) or (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and dotted_name(parent.targets[0].target) is not None
            and dotted_name(parent.targets[0].target) == dotted_name(receiver)
        )
        if idle:
            located = tree.statement_list(line) if isinstance(line, cst.SimpleStatementLine) else None
            if located is None or not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
                return None
            return self.make_fix("Remove the cast", [remove_statement(self.context, line, located[0])])
        return self._cut_cast(node, receiver)

    def _cut_cast(self, node: cst.Call, receiver: cst.BaseExpression) -> Fix | None:
        """Cut ``.half()`` from its chain and keep every other byte. A cast on a line of its
        own (a chain split over lines) goes with that line and its comment; a comment on
        a line of its own before the cast may be about it, and then no fix is offered."""
        context = self.context
        text = context.text
        receiver_end, end = outer_span(context, receiver)[1], context.span(node)[1]
        dot = receiver_end
        while text[dot] != ".":
            if text[dot] == "#":
                while text[dot] not in "\r\n":
                    dot += 1
            dot += 1
        receiver_line_end = context.line_end(receiver_end)
        if any(receiver_line_end <= comment < dot for comment, _ in comment_spans(context, node)):
            return None
        start = dot
        line_start = context.line_start(dot)
        if not text[line_start:dot].strip(" \t\f") and line_start >= receiver_line_end:
            rest = text[end : context.line_end(end)]
            if not rest.strip() or rest.strip().startswith("#"):
                # `        .half()  # fp16` on its own line: the whole line goes.
                start, end = line_start, context.line_end(end)
        elif start > receiver_end:
            start = receiver_end  # `x .half()`: the space goes too
        return self.make_fix("Remove the cast", [context.edit(start, end, "")])


def _names_evaluation(test: cst.BaseExpression) -> bool:
    """Is ``test`` a flag named for evaluation (``args.eval_only``, ``cfg.evaluate``,
    ``opt.test``)?"""
    flag = dotted_name(test)
    return flag is not None and EVALUATION_FLAG.search(flag.rsplit(".", 1)[-1]) is not None
