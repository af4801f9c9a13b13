from __future__ import annotations

import libcst as cst

from amplint.analysis.autocast import AutocastBlock, AutocastUse
from amplint.analysis.syntax import (
    bool_value,
    call_arguments,
    dotted_name,
    is_none,
    mentions,
    string_literal,
)
from amplint.analysis.torch_api import (
    AUTOCAST_BEYOND_CUDA,
    AUTOCAST_ORDER,
    AUTOCAST_TAKES_INDEXED_DEVICE,
    CPU_AUTOCAST_TAKES_FLOAT16,
    GRAD_SCALER_ORDER,
    INIT_PROCESS_GROUP,
    MODERN_AUTOCASTS,
    MODERN_CUSTOM_AUTOGRAD,
    MODERN_GRAD_SCALERS,
    RUNTIME_AUTOCASTS,
    RUNTIME_GRAD_SCALERS,
    RUNTIME_TORCH,
)
from amplint.analysis.values import is_cuda_literal_device
from amplint.diagnostics import Applicability, Edit, Fix
from amplint.fixes.calls import has_comment
from amplint.fixes.importer import Importer
from amplint.rules.base import AnalysisRule, Invalid

# Calls whose device argument AMP depends on.
AMP_DEVICE_TAKERS = MODERN_AUTOCASTS | MODERN_GRAD_SCALERS | MODERN_CUSTOM_AUTOGRAD | RUNTIME_AUTOCASTS | RUNTIME_GRAD_SCALERS
# What the message calls each callable.
_SHORT = {
    **{name: "torch.autocast" for name in MODERN_AUTOCASTS},
    **{name: "torch.amp.GradScaler" for name in MODERN_GRAD_SCALERS},
    **{name: f"torch.amp.{name.rsplit('.', 1)[1]}" for name in MODERN_CUSTOM_AUTOGRAD},
}


# `"cuda" if ... else "cpu"` and its mirrors: a quoted device type, closing brackets or
# comments, then `if`. A comment must run to the end of its line, so that each text has
# one way to match: `#[^\n]*` alone inside the loop backtracks exponentially on `####`.
DEVICE_STRING_CHOICE = r"""re:(?:cuda|cpu)['"]{1,3}(?:[\s\\)]|#[^\n]*(?![^\n]))*if\b"""


CUDA_LITERAL = r"""re:['"]cuda['"]"""
STR_CALL = r"re:\bstr[\s\\]*\("


# `autocast("cuda", dtype=torch.float32)`: a region forced to float32, no reduced precision.
FLOAT32_ONLY = frozenset({"float32"})


# An `enabled=` flag named for float16 (`use_fp16`, `args.half`) says what a dtype-less CUDA
# autocast runs in; one that also names bfloat16 says nothing certain.
FLOAT16_FLAG_WORDS = frozenset({"fp16", "float16", "half"})
BFLOAT16_FLAG_WORDS = frozenset({"bf16", "bfloat16"})

class HardcodedAmpDevice(AnalysisRule, code="AMP201", name="hardcoded-amp-device", summary="AMP code hardcodes the CUDA device", fix=Applicability.UNSAFE):
    """## What it does
    Flags AMP code that only works on CUDA although the program is written for any device:

    - **(a)** a literal `"cuda"` device type given to `torch.autocast` / `torch.amp.autocast`,
      `torch.amp.GradScaler` or `torch.amp.custom_fwd` / `custom_bwd` in a scope that has a
      *device variable*: a parameter, local or attribute access whose last name is
      `device` (`device`, `args.device`, `accelerator.device`) in the enclosing function
      (module-level code: the module), or `self.device` assigned anywhere in the enclosing
      class. Integer indices such as `args.gpu` or `local_rank` are not device variables;
    - **(b)** device types derived by string matching: `"cuda" if "cuda" in x else "cpu"`,
      `"cuda" if x.startswith("cuda") else "cpu"` (and their negated mirrors), where `x`
      may hold another device (not where it is bound only to `"cuda"`, `"cuda:N"` or
      `"cpu"` strings and the file cannot rebind it at run time: the mapping is then exact;
      this page's extension, from round AC; likewise a name bound only to CUDA devices,
      `f"cuda:{rank}"` included, or a `None` placeholder: NeuroLM, round AS; likewise a `self.device` that every assignment
      in its class sets to such strings, where the file sets no other object's `.device`:
      gptcore, round AN; nor where every torch bound the project declares caps torch
      below 2.4, `torch==2.1.2`: torch's own builds autocast only on CUDA and CPU there,
      XPU joining in 2.4 and MPS autocast in 2.5, so `"cpu"` is all another device could
      get; Adam-mini and Sophia, rounds AN and AO; nor in a function or module-level code
      that calls, outside any device test and on any branch, a CUDA state function that
      raises without CUDA, `torch.cuda.synchronize()` in nanoGPT's `bench.py`: it is
      written for CUDA, and its device is `"cuda"` or `"cpu"`; round AP; all this page's
      decisions), whose value
      feeds AMP code: the device argument of an autocast, a GradScaler or `custom_fwd`,
      directly or through the one name it is assigned to, or the instance attribute the
      class's methods read (`self.device_type = ...` in `__init__`; musictransformer2023,
      round AU) (a device for a `torch.Generator` or a tensor is not AMP code: reproducible
      tests keep RNGs on CPU). Not where the mapped `"cpu"` only ever chooses a no-op
      context: nanoGPT's `ctx = nullcontext() if device_type == "cpu" else
      torch.amp.autocast(device_type=device_type, ...)` enters autocast with `"cuda"` alone,
      and MPS or XPU then train in float32, which is what AMP202 (off by default) reports,
      not a block aimed at the wrong device; the fix would turn on float16 autocast on MPS
      beside a CUDA GradScaler that disables itself there. This page's decision, from the
      nanoGPT forks judged in rounds BC and BK (13 of 16 such findings judged false);
      nor where the AMP call it feeds is enabled only by a device test (`torch.autocast(
      device_type="cuda" if device.startswith("cuda") else "cpu", enabled=autocast_enabled)`
      with `autocast_enabled = device.startswith("cuda")`: the mapped `"cpu"` only names a
      block that is off; MetricGANplus's trainers, round BO; this page's decision, as for
      (a)'s `enabled=` silence);
    - **(c)** `str(device)` passed as an autocast device type;
    - **(d)** a literal `"nccl"` passed to `torch.distributed.init_process_group`
      (keyword or positional), where the code could run without CUDA.

    A device that only arrives from outside the file is no evidence by itself: (a) is
    silent when every device variable in scope is a parameter of a function the file never
    calls (`def train_one_epoch(model, loader, optimizer, device)`), or `self.device` set
    only from a parameter of the method that sets it (`self.device = device` in `__init__`)
    or a `device` property returning the device of the module's own parameters
    (`next(self.parameters()).device`, as transformers' is: wherever the caller put the
    model; openvla's prismatic VLMs, round AY), in the class or in a project base class in
    another file (a `None` placeholder set before the model is loaded does not count against
    it), or a local bound to the device of some model's parameters (`device =
    next(model.parameters()).device`: jetson-llm-train's trainers, round BM), or an attribute of a configuration the file reads from a file (`cfg =
    DictConfig(yaml.safe_load(f))`, then `cfg.device`: learn-new-things, round BL), and the file chooses no
    device other than CUDA anywhere (no `"cpu"`/`"mps"`/`"xpu"` device value, default or
    `--device` option default, no CUDA-availability test with a fallback; a test that only
    makes a question about the GPU safe to ask, `torch.cuda.is_available() and
    torch.cuda.get_device_properties(0).is_integrated`, chooses no device: round BM). Whether such
    code runs anywhere but CUDA is decided by callers this file does not show, and in the
    public code judged for this page they were mostly CUDA-only (CellViT's trainers, built
    by experiment classes with `f"cuda:{gpu}"` through a factory; a Kaggle trainer
    constructed with `device="cuda"`): precision over recall, a miss where the other device
    is chosen in another file (ViT-SSL's `setup_device()`). This page's decision, from
    rounds AP and AT; RULES.md counts any parameter as a device variable.
    A `device` field of a class (`device: torch.device` in a dataclass) is a device
    variable for its methods, like `self.device` assigned in one. `x.device` of a name the
    scope uses as a tensor (`x.shape`, `x.item()`, `x.backward()`, `x.requires_grad`, or
    `x = batch["x"].cuda()`, `x = batch["x"].float()`: EfficientSED, round BI) is where that data lives, not a choice of device: CUDA-only
    trainers read it all the time, so it is no device variable, nor is a `device` bound only
    to such an `x.device` (ACE-Step's `device = target_wavs.device`, SimpleTuner's `B, device
    = latents.shape[0], latents.device`; this page's extension, from rounds AB and AD); so is `x.device` of a
    parameter annotated `torch.Tensor`, and of a name indexed by several axes or slices
    (`x[0, ...]`, `x[:, 1:]`), and the device of a weight, bias, gradient or `.data`
    (`layer.q_proj.weight.device`: 2Mamba2Furious, round BG). Nor is a local `device`
    bound only after the autocast, with no loop around both (UniRig's `device =
    bones_b.device` in a loop that follows the block, round BH), nor `x.device` of a tensor
    `x` bound only inside the block or after it (STORM's `flattened_sample.device`,
    TeaCache's module-level `frames.device`; round BJ; this page's extension). A `device` bound only
    to CUDA (`device = torch.device("cuda")`, `torch.device(0)`, a GPU index `device = 0`, `f"cuda:{rank}"`, `"cuda:{}".format(rank)`, `"cuda:%d" % rank`, a
    conditional of such values, or a name bound only to them) marks CUDA-only code, unless the file treats
    that binding as variable: it tests it (`device.type == "cuda"`, `"cuda" in device`,
    `device.startswith("cuda")`; a test of another device, a tensor's, does not count) or
    may rebind a module-level one at run time (`exec(open(...).read())` configurators,
    `globals().update(...)`, an argparse `--device` option); in such a scope a tensor's or
    module's `.device` (`noise.device`, `net.device`) is that CUDA device too, not a
    device variable. (a) is also silent in a
    function (or module-level code) that requires CUDA anyway on the autocast's own path
    (or whose module makes such a call at import, in a plain top-level statement before
    the function: LDM.py prints `torch.cuda.get_device_name()`; round BF; or that makes a
    call raising without CUDA, such as `torch.cuda.synchronize()`, anywhere outside a device
    test: instanseg's warm-up autocasts before its timing loop; round BG), as (d) is: it calls `.cuda()`, `.to("cuda")` or `torch.cuda.set_device(...)`, makes a
    tensor (or anything else) with `device="cuda"` or `device=torch.device("cuda", i)`
    (fastenhancer's `self.loss.initialize(device=torch.device("cuda", index=self.rank))`), passes `device_id=` a CUDA device, or makes an unguarded
    call that raises without CUDA (`torch.cuda.synchronize()`, `torch.cuda.current_device()`,
    `torch.cuda.get_device_properties(...)`, `torch.cuda.mem_get_info()`,
    `torch.cuda.ipc_collect()`, `torch.cuda.set_per_process_memory_fraction(...)`,
    `torch.cuda.reset_peak_memory_stats()` and kin, NVIDIA's management library's
    `pynvml.nvmlInit()` (physicsnemo's DoMINO trainer calls it at import; round BL),
    or diffusers' `enable_xformers_memory_efficient_attention()`, which raises "only
    available for GPU"), or
    in a closure whose enclosing function requires CUDA whenever it defines it; RULES.md names CUDA-requiring calls
    only for (d), and not these: both are this page's extensions), in a block that
    holds the autocast or in its own statement, not in another branch (MONAI's float16
    check runs `net(test_data.cuda())` under it). A branch the function cannot get past
    without taking counts as on the path: an `if` whose `else` raises or exits, and an `if`
    on a parameter that defaults to `True` and is never bound again (Gen-L-Video's
    `enable_xformers_memory_efficient_attention: bool = True`, its default path);
    `args.enable_xformers_memory_efficient_attention`, a flag diffusers' scripts leave off,
    does not (this page's decision, from round AE, like the calls above). `self.device` assigned only CUDA
    (`torch.device("cuda")`, `f"cuda:{rank}"`) is CUDA-bound like a `device` name, and so
    is an attribute such as `cfg.device` that the file sets (spelled the same) only to CUDA
    devices (a Kaggle solution's `cfg.device = "cuda:%d" % cfg.local_rank`; round AV); one
    assigned only `None`, where nothing in the file sets another object's `.device`, is a
    placeholder, not a device variable (micro_diffusion's text encoder wrapper; this
    page's decision).
    Also this page's extensions, from evaluation round O: a call that moves a tensor
    to, or makes one on, an instance attribute its class only ever sets to a CUDA
    device (`x.to(self.feature_device)`, also through `fd = self.feature_device`) requires
    CUDA, and so does a call of a method of the same class that requires CUDA itself
    (axolotl's `compute_loss` calls `self._compute_block_rewards`); a `with` body counts
    as on the path of the statements around it; (a) is silent when every caller of the
    function in the file requires CUDA on the call's own path (LatentSync's `validation`,
    called only from a `main` that sets up DDP on a CUDA device), and in a function
    that also uses `torch.cuda.amp` (PixArt's `train` opens `torch.cuda.amp.autocast`
    beside `torch.autocast("cuda")`: its author wrote CUDA-only AMP, which AMP001
    reports where the target torch deprecates it). From rounds R and later, across files:
    `self.device` inherited from a project base class (in this file or another) that sets
    it only to CUDA is CUDA-bound (neosr's models); and a call of a project function or
    class (in any file, at most three calls deep, through constructors' `__init__`) that
    makes such a CUDA-requiring call unconditionally requires CUDA, on the autocast's path
    or, for a function, at module level before its definition (LGM's scripts build
    `model = LGM(opt)`, whose renderer makes a `device="cuda"` tensor, then define the
    `process` that opens the autocast); and so does every method of a class whose
    `__init__` requires CUDA unconditionally (map-anything's wrappers call
    `torch.cuda.get_device_capability()` there), also through a project class or function
    it calls (PhysicsLM4's model adapter builds `GPUMemoryMonitor("cuda")`, whose own
    `__init__`, in another file, asks `torch.cuda` for the current device; round AW), or
    runs its base class's through `super().__init__(...)` (sam-3d-objects' point-map
    pipeline, whose base in another file asks `torch.cuda` for the current device; round BM). Module-level code, (d) included, is
    silent when the script's `if __name__ == "__main__":` block calls something that needs
    CUDA (CLIP4Clip and GeneFace initialise NCCL at import; their `main()` sets the CUDA
    device). From round W: a `device` parameter (or `self.device = device` in an
    `__init__`) that every call in the file fills with a CUDA device, directly or through
    the caller's own such parameter, is CUDA-bound too (`train(model, loader,
    torch.device("cuda", 0))` from `main`); not when the file also passes the function
    on (a callback, `spawn(train, ...)`) or a call spreads `*args`/`**kwargs`. And code
    under `if <flag>:` is in a device condition when an earlier `if` on the same flag
    (the same text, no call in it) leaves without CUDA (`if config["distributed"]: if
    torch.cuda.is_available(): ... else: raise ...`, MASTER-pytorch). A device made from a
    name bound only to CUDA (`torch.device(device_str)` after `device_str = "cuda:0"`) is
    CUDA; so is a class constant that nothing in the file sets again (`ModelArgs.device`
    after `class ModelArgs: device = "cuda"`), and a name unpacked from a call of a function
    of the file whose every `return` gives that position a CUDA device (`local_rank, device =
    setup_ddp()`; Paper-Replications' Kimi-K2 trainer, round BM); so is `device = config["device"]` where every dict literal of the file with a
    `"device"` key, and every assignment of that key, gives a CUDA device (HybridHash's
    config, round BD: found after `--fix` rewrote its deprecated autocast); so is
    `ctx.device` of a parameter annotated with a class of the file that sets
    `device` only to CUDA, and `device_id=self.device` counts as a CUDA `device_id=` when the
    class sets `self.device` only to CUDA (mochi). Entering `torch.cuda.device(i)` (for an
    index other than a literal -1 or None) requires CUDA: it raises without it
    (modulus-makani).

    (c) is silent where the project declares a torch of 2.4 or newer (`torch>=2.5` in
    earth2studio's `pyproject.toml`): from 2.4 on, autocast parses the device type as a
    `torch.device`, so `"cuda:0"` turns CUDA autocast on, and the CUDA checks it skips can
    only matter on a machine without CUDA, where no `cuda:N` device exists to be
    stringified. Where the project declares no torch, (c) still fires, as RULES.md says:
    nothing there rules out the older releases that reject `"cuda:0"` (this page's
    decision, from round AI).

    A comparison of a number of GPUs with an integer (`if len(args.gpu_ids) > 1:`,
    `args.n_gpu > 0`) is a CUDA test like `torch.cuda.device_count() > 1` (ManiSkill2-Learn
    sets up DDP only with several GPUs; this page's reading, round BJ).
    (d) is silent where switching to gloo would not make the code run anywhere new: when
    the same function already requires CUDA (`torch.cuda.set_device(...)`, a `.cuda()`
    call, `device_id=` a CUDA device, `init_device_mesh("cuda", ...)`, a project call given
    `device_type="cuda"` (dllm-distillation's `init_parallel_state(...)`, round BJ; this
    page's extension), a
    `DistributedDataParallel` given `device_ids=`, before or after the call), when the
    block that runs the call also binds a device variable or attribute to a CUDA device (VideoTuna's
    sequence-parallel branch sets `device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}")`
    after `init_process_group("nccl")`; this page's decision, from round AP), when another
    method of its class requires CUDA that way under the very test that is one of the
    `and`-parts of the call's own `if` (VoxCPM's `Accelerator` initialises NCCL under `if
    self.world_size > 1 and not dist.is_initialized():` and wraps the model in DDP with
    `device_ids=` under `if self.world_size > 1:`; this page's decision, from round AK), when every
    caller of the function in the file requires CUDA that way (nnU-Net's `setup_ddp`,
    called only by a `run_ddp` that then calls `torch.cuda.set_device`), when the function
    is spawned once per CUDA device (`torch.multiprocessing.spawn(main_worker,
    nprocs=torch.cuda.device_count())`, the count also through a name or an attribute the
    file sets only to it, or spawned only under a CUDA test: mini-llm's `if
    torch.cuda.is_available(): spawn(distributed_training, ...)`, round BM; a direct call in the `else` of the very test that guards the
    call in the worker does not count: 3D-ResNets' `if opt.distributed:`; round BE), in a
    module-level function of a script (a file with an `if __name__ == "__main__":` block, or
    a notebook, which runs top to bottom: Paper-Replications' notebooks, round BM) that the file never names again, so it does
    not run when the script does (ViT-Lens's leftover `setup(rank, world_size)`; this page's
    extension, from round AB), in a module-level function that only the script's `if
    __name__ == "__main__":` block calls, when that block also calls something that needs
    CUDA (MMAudio's `distributed_setup()` before a `main()` that sets the CUDA device; round
    AD), after a guard that leaves without CUDA (an `assert`, a `raise` or `sys.exit`,
    including an `if`/`elif` chain that tests CUDA on a branch and exits in its `else`;
    one at module level, such as `assert torch.cuda.is_available()` at import, covers
    every function defined after it),
    and in files that show no intent to run elsewhere: no AMP code and no non-CUDA device
    choice (a `"cpu"`, `"mps"` or `"xpu"` device value or default, or a CUDA-availability
    test with a fallback; a test that only decides whether to log CUDA memory statistics is
    none, as in the `MetricLogger` that DeiT, ALBEF and BLIP share (ptp; this page's reading
    of a "fallback", from round AK);
    `torch.load(..., map_location="cpu" if quant else device)` stages
    weights in host memory and chooses no device, and so do `model.to_empty(device="cpu")`
    and `x.to(device="cpu")`, as in LMOps's Megatron converter).

    Not flagged, anything in test modules (`test_*.py`, `*_test.py`, files under `tests/`
    or `test/`), which pick their device on purpose, as for AMP101-AMP105; and, for (a), an
    autocast or GradScaler whose `enabled=` already tests the device type
    or CUDA availability (`enabled=device.type == "cuda"`, `enabled=torch.cuda.is_available()`,
    a flag such as `args.cpu` or `use_gpu`, or a name bound in scope to such a test, also
    through `bool(...)`: `use_amp = bool(cfg.fp16 and self.device.type == "cuda")`) or is
    `False` (a region that turns CUDA autocast off; (b) still fires on a disabled region
    whose device test picks CPU for MPS, since that region then fails to turn MPS
    autocast off), or whose `dtype=` is float32 (a region
    forced to float32: T2I-Adapter's "mmpose seems not compatible with autocast fp16"; a
    decision of this page, RULES.md has no float32 case), or whose dtype is float16 (a
    float16 `dtype=`, or none with an `enabled=` flag named for float16 such as `use_fp16`)
    where every device variable in scope is only ever CUDA or the CPU (`torch.device("cuda"
    if torch.cuda.is_available() else "cpu")`, also handed in through a parameter the file's
    calls fill with such a device): off CUDA that is float16 autocast on the CPU, which
    nobody asked for, and the literal keeps it off (coqui's Tortoise, `half=True` by
    default, round BJ; sarkd5's evaluator, round BK; this page's decision), or whose dtype is float16 where
    the project's declared torch holds below 2.2: there CPU autocast takes only bfloat16
    and no other accelerator autocasts (before 2.4), so an autocast on the device's own
    type would turn itself off off CUDA too (TITAN's notebooks on `torch==2.0.1`; this
    page's decision, round AZ);
    one whose `enabled=` or `dtype=` a
    device test decides elsewhere in the file — a flag the file assigns from one
    (`config["amp"] = config["amp"] and config["cuda"]`), `self.scaler is not None` with
    `self.scaler = GradScaler(...) if not self.cpu else None`, a dtype that is float32
    unless `torch.cuda.is_available()`, a flag or dtype bound to a call of a project function (of
    this file or another) that returns `False`, `None` or a tuple of them under a device
    test (YOLO's `amp = check_amp(model)`; vqafromscratch's `use_amp, amp_dtype, use_scaler
    = resolve_amp(device, ...)`, round BK; a `resolve_amp_dtype()` that returns `None` off
    CUDA, neural-operator-jetson-benchmark, round BN), a parameter every call of the file fills with such a flag (ME-IIS's
    `amp_enabled=bool(amp_enabled)`, round BF) — since AMP is then CUDA-only on purpose; an autocast in the body of
    `if self.scaler is not None:` (or `if self.scaler:`) where every value but `None` the
    file gives `self.scaler` is given under a device test (vqa-model-builder's `_setup_amp`,
    round BF; also `self.scaler = GradScaler("cuda") if amp and self.device.type == "cuda"
    else None`: TradingBOT, round BH), or in the `else` of `if autocast_dtype is None:`
    where the dtype is set only under one (Video_inpainting_DPO, round BG); an `enabled=`
    flag read from a GradScaler that is enabled only with CUDA (`amp_enabled =
    scaler.is_enabled()`: Transformer4LongTailed, round BH); a `GradScaler("cuda")` whose
    every autocast block opens only under a device test (TradingBOT), or is a plain
    `autocast("cuda")` in a scope with no device variable, so not reported itself (the
    blocks of its function or class, or, for a scaler handed to other functions, every block
    of the file: nlp-anderson, round BK; physicsnemo's crash trainer, round BL; where the
    CUDA autocast is reported, its fix would leave the scaler behind, so both are; this
    page's decision); a `device` bound only to CUDA itself (`device = torch.device("cuda")`);
    functions skipped where CUDA is missing (`@pytest.mark.skipif(not
    torch.cuda.is_available(), ...)`, or `@unittest.skipUnless(torch.cuda.is_available(),
    ...)` on the function or its test class); code with no device variable (it really is
    CUDA-only); `torch.cuda.manual_seed[_all]` (documented as safe without CUDA); config
    defaults such as `args.dist_backend = "nccl"`; and code that runs only under a
    device-type or CUDA-availability test: inside an `if`/conditional expression on one,
    or after a guard that leaves (`if not torch.cuda.is_available(): raise ...`,
    `assert torch.cuda.is_available()`, `assert torch.cuda.device_count() > rank`, or a
    test's `pytest.skip(...)` / `self.skipTest(...)`). Nor is a `GradScaler("cuda")`
    whose autocast blocks (in its function, its class for a `self.` scaler, or its module)
    all choose between CUDA and devices whose default dtype is bfloat16, with no dtype of
    their own (`torch.autocast("cuda" if torch.cuda.is_available() else "cpu")`): float16
    then runs only on CUDA, where this scaler works, and bfloat16 needs no scaling (a
    device-taking scaler there would be the useless bfloat16 scaler AMP302 reports), nor one
    whose autocasts run only on CUDA because their conditional hands the other device type a
    no-op context (nanoGPT's `nullcontext() if device_type == "cpu" else
    torch.amp.autocast(device_type=device_type, ...)`, also kept on the instance as
    `self.ctx`; TabularTransformer, round AX). This
    goes beyond RULES.md's letter for (a), on purpose: its premise, AMP running unscaled
    off CUDA, cannot happen there.

    ## Why is this bad?
    A program that takes a device runs on CPU, Apple MPS or Intel XPU as well, but a
    hardcoded `"cuda"` autocast there is silently disabled (with a warning when CUDA is
    absent) or, worse, enables CUDA autocast while the tensors live elsewhere: the run
    quietly trains in float32. `"cuda" if "cuda" in x else "cpu"` turns `"mps"` and
    `"xpu"` into `"cpu"`, so autocast targets a device the tensors are not on.
    `str(device)` is `"cuda:0"` for an indexed device: older PyTorch releases reject it
    (`unsupported autocast device_type`), and PyTorch 2.13 accepts it but skips its CUDA
    checks (autocast stays enabled on a machine without CUDA, and an unsupported bfloat16
    is not reported). NCCL needs CUDA GPUs: `init_process_group("nccl")` fails on CPU-only,
    MPS and XPU machines.

    ## Example
    ```python
    import torch
    import torch.distributed as dist

    def train(model, loader, optimizer, device):
        dist.init_process_group(backend="nccl")
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x.to(device)).sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    def main(model, loader, optimizer):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        train(model, loader, optimizer, device)
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist

    import amplint.runtime

    def train(model, loader, optimizer, device):
        dist.init_process_group(backend=amplint.runtime.dist_backend(device))
        scaler = torch.amp.GradScaler(amplint.runtime.device_type(device))
        for x, y in loader:
            with torch.autocast(amplint.runtime.device_type(device), dtype=torch.float16):
                loss = model(x.to(device)).sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    def main(model, loader, optimizer):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        train(model, loader, optimizer, device)
    ```

    ## Fix safety
    (d) is safe and adds no dependency: the literal becomes
    `"nccl" if torch.cuda.is_available() else "gloo"` (`import torch` is added when
    `torch` is not bound), so every run that worked before is unchanged and CPU runs get
    `gloo` instead of a crash. When the project already depends on amplint (it declares
    `amplint` in `pyproject.toml`, `requirements*.txt`, `setup.cfg` or `setup.py`, or sets
    `runtime-helpers = true`; see the runtime-dependency policy in the README), the fix is
    `amplint.runtime.dist_backend(<device>)` instead, which also picks `xccl` on XPU; the
    device variable is passed only when it is certainly bound at the call.

    (a) to (c) are unsafe: replacing the literal with
    `amplint.runtime.device_type(<device variable>)` turns AMP on for devices that ran in
    float32 until now (numerics and speed change there), and when the scope has several
    different device variables amplint cannot know which one the author meant (then no
    fix is offered); a tensor's `x.device` read earlier in the scope is used only where `x`
    is not bound again between that read and the call (RVT's `pc` becomes a list: `pc.device`
    would raise). Every fix adds `import amplint.runtime` once, after the file's
    imports; the runtime helpers need `pip install amplint[runtime]` (torch ≥ 2.4), so
    no such fix is offered for a project whose target torch is older (`target-torch`).
    """

    triggers = frozenset({"cuda", "nccl", "autocast"})
    # Pre-filter, case by case: (a) an AMP API, "cuda" and a device variable; (b) a
    # conditional expression whose value is "cuda" or "cpu", reported only where it
    # reaches an AMP API; (c) autocast and `str`; (d) `init_process_group`.
    requires = (
        frozenset({"autocast", "GradScaler", "grad_scaler", "custom_fwd", "custom_bwd", "init_process_group"}),
        frozenset({"device", "str", "init_process_group", DEVICE_STRING_CHOICE}),
        # (a) and (b) have the literal "cuda", (c) calls `str`, (d) has "nccl".
        frozenset({CUDA_LITERAL, STR_CALL, "nccl"}),
    )

    VALID = (
        # `self.device` is where the caller put the model (openvla's prismatic VLMs).
        """
        import torch
        import torch.nn as nn

        class VLM(nn.Module):
            @property
            def device(self):
                return next(self.parameters()).device

            @torch.inference_mode()
            def generate(self, input_ids):
                input_ids = input_ids.to(self.device)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return self.llm.generate(input_ids)
        """,
        # nanoGPT's trainers: autocast only where the device type is not "cpu", so float16
        # runs only on CUDA and a CUDA scaler is the one it needs (TabularTransformer).
        """
        import torch
        from contextlib import nullcontext

        class Trainer:
            def __init__(self, device):
                self.device = device
                self.device_type = "cuda" if torch.cuda.is_available() else "cpu"

            def train(self, model, loader, optimizer):
                self.ctx = (
                    nullcontext()
                    if self.device_type == "cpu"
                    else torch.amp.autocast(device_type=self.device_type, dtype=torch.float16)
                )
                scaler = torch.amp.GradScaler("cuda", enabled=True)
                for x in loader:
                    with self.ctx:
                        loss = model(x.to(self.device))
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
        """,
        # A config object's device, which the script sets only to CUDA devices (a Kaggle
        # solution's `cfg.device = "cuda:%d" % cfg.local_rank`, round AV).
        """
        import os
        import torch

        def run_eval(model, loader, cfg):
            for batch in loader:
                batch = cfg.batch_to_device(batch, cfg.device)
                with torch.autocast("cuda"):
                    model(batch)

        def main(cfg):
            if "WORLD_SIZE" in os.environ:
                cfg.device = "cuda:%d" % int(os.environ["LOCAL_RANK"])
            else:
                device = "cuda:%d" % cfg.gpu
                cfg.device = device
        """,
        # The epoch builds its loss on a CUDA device, unconditionally: CUDA-only (fastenhancer).
        """
        import torch

        class Wrapper:
            def __init__(self, device="cpu"):
                self.device = device

            def train_epoch(self, loader):
                self.loss.initialize(device=torch.device("cuda", index=self.rank))
                for x in loader:
                    with torch.autocast("cuda"):
                        self.model(x.to(self.device))
        """,
        # A trainer that stores the device its constructor is given, in a file that never
        # chooses a device of its own: its callers elsewhere decide (CellViT's trainers,
        # built by experiment classes with f"cuda:{gpu}").
        """
        import torch

        class Trainer:
            def __init__(self, model, device):
                self.model = model.to(device)
                self.device = device

            def step(self, x):
                with torch.autocast("cuda", dtype=torch.float16):
                    return self.model(x.to(self.device))
        """,
        # Likewise a function's device parameter, when the file never calls the function.
        """
        import torch

        def train_one_epoch(model, loader, optimizer, device):
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(x.to(device), y.to(device))
                loss.backward()
                optimizer.step()
        """,
        # A closure defined after its enclosing function moved the model to CUDA
        # (instruct-pix2pix's edit app).
        """
        import torch
        from torch import autocast

        def main(model, loader):
            device = "cuda" if torch.cuda.is_available() else "cpu"
            model.eval().cuda()

            def generate(x):
                with autocast("cuda"):
                    return model(x.to(model.device))

            for x in loader:
                generate(x)
        """,
        # The loop asks CUDA for its free memory, which raises without CUDA (UniDepth).
        """
        import torch

        def main_worker(model, optimizer, loader, f16):
            device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
            context = torch.autocast(device_type="cuda", dtype=torch.float16, enabled=f16)
            free, total = torch.cuda.mem_get_info()
            for x in loader:
                with context:
                    loss = model(x.to(device))
                loss.backward()
        """,
        # Right after NCCL, the function enters a CUDA device, which raises without CUDA
        # (modulus-makani's checkpoint converter).
        """
        import torch
        import torch.distributed as dist

        def pick():
            return torch.device("cpu")

        def main(rank, world_size):
            dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
            with torch.cuda.device(dist.get_rank() % torch.cuda.device_count()):
                run()
        """,
        # Round W, mochi: a device built from a name bound to CUDA; an instance of a class that
        # sets its `device` only to CUDA, through an annotated parameter; NCCL given
        # `device_id=self.device` just set to a CUDA device.
        """
        import torch

        def main(model, x, opt):
            device_str = f"cuda:0"
            device = torch.device(device_str)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x.to(device)).sum()
            loss.backward()
            opt.step()
        """,
        """
        import torch

        class GPUContext:
            def __init__(self):
                self.device = torch.device(f"cuda")

        def preprocess(ctx: GPUContext, video):
            video = video.to(ctx.device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return ctx.encoder(video)
        """,
        """
        import torch
        import torch.distributed as dist

        def pick(device_id):
            return torch.device(f"cuda:{device_id}") if isinstance(device_id, int) else "cpu"

        class MultiGPUContext:
            def __init__(self, device_id, rank, world_size):
                self.device = torch.device(f"cuda:{device_id}")
                dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=self.device)
        """,
        # The flag's first branch raises without CUDA; the second `if` on the same flag runs
        # only where it did not (MASTER-pytorch's entry point).
        """
        import torch
        import torch.distributed as dist

        def entry_point(config):
            if config["distributed"]:
                if torch.cuda.is_available():
                    local_master = config["local_rank"] == 0
                else:
                    raise RuntimeError("CUDA is not available")
            else:
                local_master = True
            if config["distributed"]:
                dist.init_process_group(backend="nccl")
            device = "cuda" if torch.cuda.is_available() else "cpu"
            run(device, local_master)
        """,
        # Every call of `train` in the file passes a CUDA device (pangaea-bench's trainer,
        # in one file).
        """
        import torch

        def train(model, loader, device):
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(x.to(device), y)
                loss.backward()

        def main(local_rank):
            train(build(), load(), torch.device("cuda", local_rank))
        """,
        """
        import torch

        class Trainer:
            def __init__(self, model, device):
                self.model = model
                self.device = device

            def step(self, x):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return self.model(x.to(self.device)).sum()

        def main(rank):
            device = f"cuda:{rank}"
            Trainer(build(), device=device).step(load())
        """,
        # A region forced to float32 loses no AMP anywhere (T2I-Adapter's mmpose calls).
        """
        import torch
        from torch import autocast

        def get_pose(opt, model, image):
            image = image.to(opt.device)
            with autocast("cuda", dtype=torch.float32):
                return model(image)
        """,
        # The autocast picks CUDA or CPU itself, with no dtype: float16 runs only on CUDA,
        # where this scaler works; CPU's bfloat16 needs none (MONAI's tutorials).
        """
        import torch

        device = torch.device("cuda") if torch.cuda.is_available() else "cpu"
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            with torch.autocast(device_type="cuda" if torch.cuda.is_available() else "cpu"):
                loss = model(x.to(device)).sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        # The loop synchronizes CUDA unguarded: it cannot run elsewhere (ConvNeXt-V2).
        """
        import torch

        def train_one_epoch(model, loader, optimizer, scaler, device):
            for x in loader:
                x = x.to(device, non_blocking=True)
                with torch.amp.autocast("cuda"):
                    loss = model(x).sum()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                torch.cuda.synchronize()
        """,
        # The scope's device is a CUDA literal; `x.device` is that device (MONAI tutorials).
        """
        import torch

        device = torch.device("cuda")
        model = torch.nn.Linear(4, 4).to(device)
        for x in loader:
            x = x.to(device)
            noise = torch.randn_like(x).to(x.device)
            with torch.autocast("cuda"):
                loss = model(x + noise).sum()
        """,
        # The module stops at import without CUDA (lightweight-gan).
        """
        import torch
        import torch.distributed as dist

        assert torch.cuda.is_available(), "You need an Nvidia GPU with CUDA installed."


        def setup(device):
            dist.init_process_group("nccl", rank=0, world_size=1)
            with torch.autocast("cuda"):
                return device
        """,
        # A script's leftover helper that nothing calls does not run (ViT-Lens).
        """
        import torch
        import torch.distributed as dist
        from torch.cuda.amp import GradScaler


        def setup(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)


        def main():
            scaler = GradScaler()
            dist.init_process_group(backend=config.dist_backend)


        if __name__ == "__main__":
            main()
        """,
        # Only CUDA or CPU can reach the string test: it maps them exactly (baby-llama2-chinese).
        """
        import torch
        from contextlib import nullcontext

        device = 'cuda' if torch.cuda.is_available() else 'cpu'
        device_type = 'cuda' if 'cuda' in device else 'cpu'
        ctx = nullcontext() if device_type == 'cpu' else torch.autocast(device_type=device_type)
        """,
        # nanoGPT with a configurable device: the mapped "cpu" only ever picks the no-op
        # context, so autocast is entered with "cuda" alone; MPS and XPU train in float32,
        # which is AMP202's opinion (off by default), not a block aimed at the wrong device.
        """
        import torch
        from contextlib import nullcontext

        device = 'cuda'
        exec(open('configurator.py').read())
        device_type = 'cuda' if 'cuda' in device else 'cpu'
        ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
        """,
        """
        import torch
        from contextlib import nullcontext

        class Trainer:
            def __init__(self, config):
                self.device_type = "cuda" if "cuda" in config.device else "cpu"
                self.ctx = torch.autocast(self.device_type) if self.device_type != "cpu" else nullcontext()
        """,
        # MetricGANplus (round BO): the block the mapping feeds is on only on CUDA.
        """
        import torch

        def train(model, x, device):
            autocast_enabled = device.startswith("cuda")
            with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", enabled=autocast_enabled):
                return model(x)
        """,
        # minimind: the string test only chooses whether autocast runs at all.
        """
        import torch
        from contextlib import nullcontext
        device_type = 'cuda' if 'cuda' in args.device else 'cpu'
        ctx = nullcontext() if device_type == 'cpu' else torch.autocast('cuda')
        """,
        # No device variable: a CUDA-only script.
        """
        import torch
        with torch.autocast('cuda'):
            loss = model(x)
        """,
        # enabled= already tests the device type.
        """
        import torch

        def step(model, x, device):
            with torch.autocast('cuda', enabled=device.type == 'cuda'):
                return model(x)
        """,
        """
        import torch

        def step(model, x, device):
            use_amp = args.amp and device.type == 'cuda'
            scaler = torch.amp.GradScaler('cuda', enabled=use_amp)
        """,
        """
        import torch
        device = torch.device('cuda')
        scaler = torch.amp.GradScaler('cuda', enabled=torch.cuda.is_available())
        """,
        # Only under a device-type test.
        """
        import torch
        from contextlib import nullcontext

        def f(device):
            ctx = torch.autocast('cuda') if device.type == 'cuda' else nullcontext()
        """,
        """
        import torch

        def f(device):
            torch.cuda.manual_seed_all(0)
            torch.cuda.manual_seed(0)
        """,
        # Config defaults are not calls.
        """
        import torch.distributed as dist
        args.dist_backend = 'nccl'
        dist.init_process_group(backend=args.dist_backend)
        """,
        """
        import torch
        import torch.distributed as dist
        if torch.cuda.is_available():
            dist.init_process_group('nccl')
        """,
        """
        import torch
        import torch.distributed as dist

        def setup():
            if not torch.cuda.is_available():
                raise RuntimeError('needs CUDA')
            dist.init_process_group('nccl')
        """,
        """
        import torch.distributed as dist
        backend = 'nccl' if torch.cuda.is_available() else 'gloo'
        dist.init_process_group(backend)
        """,
        # RULES.md rev 4 (d): code that requires CUDA anyway.
        """
        import torch.distributed as dist

        dist.init_process_group(backend='nccl', init_method='env://')
        """,
        """
        import torch
        import torch.distributed as dist
        device = 'cuda' if torch.cuda.is_available() else 'cpu'

        def setup(rank):
            torch.cuda.set_device(rank)
            dist.init_process_group('nccl')
        """,
        """
        import torch
        import torch.distributed as dist
        device = 'cuda' if torch.cuda.is_available() else 'cpu'

        def setup(rank):
            dist.init_process_group('nccl', device_id=torch.device('cuda', rank))
        """,
        """
        import torch
        import torch.distributed as dist
        scaler = torch.amp.GradScaler('cuda')

        def setup(model, rank):
            dist.init_process_group(backend='nccl')
            model.cuda(rank)
        """,
        # DINO's init_distributed_mode: the last branch exits without CUDA.
        """
        import os, sys
        import torch
        import torch.distributed as dist
        device = 'cpu'

        def init(args):
            if 'RANK' in os.environ:
                args.rank = int(os.environ['RANK'])
            elif torch.cuda.is_available():
                args.rank = 0
            else:
                sys.exit(1)
            dist.init_process_group(backend='nccl')
        """,
        # (b) on a device chosen between a CUDA index and "cpu" (nunif's calibrate_output).
        """
        import torch

        def main(args, model, x):
            device = f"cuda:{args.gpu}" if args.gpu >= 0 else "cpu"
            amp_device_type = "cuda" if "cuda" in device else "cpu"
            with torch.autocast(device_type=amp_device_type, dtype=torch.float16):
                return model(x.to(device))
        """,
        # (b) on a device set only to CUDA strings after a `None` placeholder (NeuroLM).
        """
        import torch

        device = None
        device_type = None

        def init(ddp, local_rank):
            global device, device_type
            device = 'cuda'
            if ddp:
                device = f'cuda:{local_rank}'
            device_type = 'cuda' if 'cuda' in device else 'cpu'
            return torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
        """,
        # A module-level device formatted with `%` is CUDA too (CDAE's DiT probes).
        """
        import torch

        local_rank = int(os.environ["LOCAL_RANK"])
        device = "cuda:%d" % local_rank

        def probe(model, x):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model(x.to(device))
        """,
        # A device variable bound to a GPU index names a CUDA device (eomt's notebook).
        """
        import torch

        device = 0  # the GPU you want to use
        model = model.to(device)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            y = model(x.to(device))
        """,
        # (d) where the branch then sets the device attribute to CUDA (TimeSeriesForecasting).
        """
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument('--device', default='cuda', type=str)
        parser.add_argument('--distributed', default=False, type=bool)
        parser.add_argument('--local_rank', default=0, type=int)
        args = parser.parse_args()
        args.device = args.device if torch.cuda.is_available() else 'cpu'
        if args.distributed:
            torch.distributed.init_process_group(backend='nccl')
            args.device = torch.device('cuda', args.local_rank)
        """,
        # `self.device: str` only annotates; every value the class gives it is CUDA
        # (CellViT-plus-plus's inference classes).
        """
        import torch

        class Inference:
            def __init__(self, gpu: int) -> None:
                self.device: str
                self.device = f"cuda:{gpu}"

            def run(self, model, x):
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    return model(x.to(self.device))
        """,
        # (d) in the branch that then sets a CUDA device: that branch is the CUDA path.
        """
        import os
        import torch
        import torch.distributed as dist

        def setup(args, device=None):
            if args.ulysses_degree > 1:
                dist.init_process_group("nccl")
                device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}")
            elif device is None:
                device = "cuda" if torch.cuda.is_available() else "cpu"
            return device
        """,
        # (b) in a benchmark that synchronizes CUDA on its timing path (nanoGPT's bench.py).
        """
        import torch
        from contextlib import nullcontext
        device = 'cuda'  # examples: 'cpu', 'cuda', 'cuda:0'
        profile = False
        device_type = 'cuda' if 'cuda' in device else 'cpu'
        ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
        if profile:
            with ctx:
                y = model(x)
        else:
            torch.cuda.synchronize()
            with ctx:
                y = model(x)
            torch.cuda.synchronize()
        """,
        # (b) is about AMP code: a Generator's device, or a value not passed to AMP.
        """
        import torch
        g = torch.Generator('cpu' if not device.startswith('cuda') else 'cuda')
        """,
        """
        def f(device):
            return 'cuda' if device.startswith('cuda') else 'cpu'
        """,
        # OLMo's ladder.py: where a model is initialised is not the device the code runs on.
        """
        import torch.distributed as dist
        model_config.init_device = 'cpu'

        def train():
            dist.init_process_group(backend='nccl')
        """,
        # Only with more than one GPU, and the device is CUDA exactly when GPUs are given
        # (ManiSkill2-Learn's DDP block; round BJ): a GPU count decides like a device test.
        """
        import torch.distributed as dist

        def main(args, agent):
            device = "cpu" if len(args.gpu_ids) == 0 else "cuda"
            agent = agent.to(device)
            if len(args.gpu_ids) > 1:
                dist.init_process_group("nccl", rank=0, world_size=2)
        """,
        # No intent to run elsewhere: an assertion is not a fallback, map_location not a device choice.
        """
        import torch
        import torch.distributed as dist

        def main():
            assert torch.cuda.is_available()
            state = torch.load('ckpt.pt', map_location='cpu')

        def run():
            dist.init_process_group('nccl')
        """,
        # `map_location=torch.device('cpu')` stages weights as the string does (MambaInLlama).
        """
        import torch
        import torch.distributed as dist

        def main():
            dist.init_process_group('nccl')
            state = torch.load('ckpt.pt', map_location=torch.device('cpu'))
        """,
        # The class cannot be built without CUDA: its constructor asks the GPU's capability
        # (map-anything's model wrappers), so `device` in its methods is a CUDA device.
        """
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
                self.bf16 = torch.cuda.get_device_capability()[0] >= 8

            def forward(self, x):
                device = x.device
                with torch.autocast("cuda", dtype=torch.bfloat16 if self.bf16 else torch.float16):
                    return self.model(x.to(device))
        """,
        # `torch.device(0)` is CUDA device 0: a CUDA-only script (LoftQ's GLUE trainer).
        """
        import torch

        def main(model, x):
            device = torch.device(0)
            model.to(device)
            scaler = torch.amp.GradScaler("cuda")
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x.to(device)).sum()
            scaler.scale(loss).backward()
        """,
        # NCCL set up at import; the script's main() sets the CUDA device (CLIP4Clip).
        """
        import torch

        torch.distributed.init_process_group(backend="nccl")

        def set_seed_logger(args):
            torch.cuda.set_device(args.local_rank)
            return args

        def init_device(args):
            return torch.device("cuda" if torch.cuda.is_available() else "cpu", args.local_rank)

        def main(args):
            set_seed_logger(args)
            return init_device(args)

        if __name__ == "__main__":
            main(parse_args())
        """,
        # `.cuda()` on a tensor just made requires CUDA like any `.cuda()` (torchrec's tutorial).
        """
        import torch
        import torch.distributed as dist

        def main(x):
            dist.init_process_group(backend="nccl")
            values = torch.tensor([1, 2]).cuda()
            print(x.to(torch.device("cpu")), values)
        """,
        # VoxCPM's Accelerator: NCCL only when world_size > 1, and under that same test
        # another method wraps the model in DDP with device_ids (CUDA only). The file falls
        # back to CPU elsewhere (its device), so only the shared test decides.
        """
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        class Accelerator:
            def __init__(self):
                self.world_size = int(os.getenv("WORLD_SIZE", "1"))
                if self.world_size > 1 and not dist.is_initialized():
                    dist.init_process_group("nccl", init_method="env://")
                self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
                self.device = torch.device("cuda", self.local_rank) if torch.cuda.is_available() else torch.device("cpu")

            def prepare_model(self, model):
                model = model.to(self.device)
                if self.world_size > 1:
                    model = DistributedDataParallel(model, device_ids=[self.local_rank])
                return model
        """,
        # An availability test that only decides what to log is no fallback (ptp's copy of
        # the MetricLogger that DeiT, ALBEF and BLIP share).
        """
        import torch
        import torch.distributed as dist

        def log_every(meters, log_msg):
            if torch.cuda.is_available():
                log_msg.append("max mem: {memory:.0f}")
            if torch.cuda.is_available():
                print(" ".join(log_msg).format(memory=torch.cuda.max_memory_allocated() / 2**20, meters=meters))
            else:
                print(" ".join(log_msg).format(meters=meters))

        def init_distributed_ddpjob(rank, world_size):
            dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
        """,
        # Staging a model in host memory is no device choice (LMOps's Megatron converter).
        """
        import torch
        import torch.distributed as dist

        def convert(model):
            dist.init_process_group(backend="nccl")
            model.to_empty(device="cpu")
            state = {k: v.to(device="cpu") for k, v in model.state_dict().items()}
            return state
        """,
        # An assertion on the CUDA device count guards it (yolov7's train.py).
        """
        import torch
        import torch.distributed as dist

        def setup(rank):
            assert torch.cuda.device_count() > rank
            dist.init_process_group(backend='nccl')
        """,
        # Some other library's init_process_group.
        """
        from mylib import init_process_group
        init_process_group('nccl')
        """,
        # Integer indices are not device variables.
        """
        import torch

        def f(args):
            torch.cuda.set_device(args.gpu)
            with torch.autocast('cuda'):
                pass
        """,
        # `device = "cuda"` in a CUDA-only test; what the file tests elsewhere is another
        # device (a tensor's), so this binding stays CUDA (MONAI).
        """
        import torch

        def test_affine(m):
            assert 'cpu' in str(m.affine.device)

        def test_amp(x):
            device = 'cuda'
            x = x.to(device)
            with torch.autocast('cuda'):
                pass
        """,
        # `self.device` bound only to CUDA, and an f-string CUDA device: CUDA-only tests (opacus).
        """
        import torch
        import unittest

        class T(unittest.TestCase):
            def setUp(self):
                self.device = torch.device('cuda')

            def _train(self, model, x):
                with torch.amp.autocast('cuda', dtype=torch.float16):
                    return model(x.to(self.device))
        """,
        """
        import torch

        def worker(rank, model, x):
            device = torch.device(f'cuda:{rank}')
            with torch.amp.autocast('cuda', dtype=torch.bfloat16):
                return model(x.to(device))
        """,
        # Tensors made on "cuda" on the autocast's path: CUDA-only inference (Lumina-T2X).
        """
        import torch

        def sample(model, cap_feats, dtype):
            mask = mask.to(cap_feats.device)
            with torch.autocast('cuda', dtype):
                z = torch.randn([1, 4, 64, 64], device='cuda')
                return model(z, cap_feats, mask)
        """,
        # A test that skips itself without GPUs (llm-foundry).
        """
        import torch
        import pytest

        def test_init(world_size):
            if not torch.cuda.device_count() >= world_size:
                pytest.skip('needs GPUs')
            device = get_device(None)
            with torch.autocast('cuda', dtype=torch.bfloat16):
                out = build(device)(x)
        """,
        # Every caller requires CUDA: the process group is NCCL for a CUDA path (nnU-Net).
        """
        import torch
        import torch.distributed as dist

        def setup_ddp(rank, world_size):
            dist.init_process_group('nccl', rank=rank, world_size=world_size)

        def run_ddp(rank, world_size):
            setup_ddp(rank, world_size)
            torch.cuda.set_device(torch.device('cuda', dist.get_rank()))

        def main(device='cpu'):
            with torch.autocast(device):
                pass
        """,
        # A DDP module given device_ids lives on an accelerator: gloo would not help (MONAI).
        """
        import torch
        import torch.distributed as dist

        def worker(rank, n, model):
            dist.init_process_group(backend='nccl', world_size=n, rank=rank)
            model = torch.nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])
            with torch.autocast('cuda'):
                model(x)
        """,
        # The function requires CUDA anyway: its float16 check runs on the GPU (MONAI).
        """
        import torch

        def verify(net, device, shape):
            x = torch.rand(*shape, device=device)
            net.to('cuda')
            with torch.autocast('cuda'):
                return net(x.cuda())
        """,
        # A tensor's `.device` is where its data is, not a device choice (efficientvit, SlowFast).
        """
        import torch

        def step(self, batch):
            image = batch['image'].cuda()
            labels = torch.ones(image.shape[0], device=image.device)
            with torch.autocast(device_type='cuda', dtype=torch.float16):
                return self.model(image)
        """,
        """
        import torch

        def validate(model, loader):
            for batch in loader:
                with torch.autocast('cuda'):
                    loss = model(batch)
                assert loss.requires_grad is False
            reduce(loss.device)
        """,
        # `torch.device` is the constructor, not a device variable.
        """
        import torch
        x = torch.zeros(1, device=torch.device('cuda'))
        with torch.autocast('cuda'):
            pass
        """,
        # The device type is read properly.
        """
        import torch

        def f(device):
            with torch.autocast(device.type):
                pass
        """,
        "device_type = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
        # A region that turns CUDA autocast off (diffusers' timestep embeddings).
        """
        import torch

        def embed(t):
            x = t.device
            with torch.amp.autocast('cuda', enabled=False):
                pass
        """,
        # The device variable is CUDA itself (timm's tests).
        """
        import torch

        def test_cache():
            device = torch.device('cuda')
            x = x.to(device)
            with torch.autocast(device_type='cuda', dtype=torch.bfloat16):
                pass
        """,
        # Runs only where CUDA exists.
        """
        import pytest
        import torch

        @pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA')
        def test_amp(device):
            with torch.autocast('cuda'):
                pass
        """,
        # A TestCase skipped without CUDA (torchtitan's graph_trainer tests).
        """
        import unittest
        import torch
        import torch.distributed as dist

        @unittest.skipUnless(torch.cuda.is_available(), 'CUDA required')
        class TestTrace(unittest.TestCase):
            def setUp(self):
                dist.init_process_group(backend='nccl', world_size=1, rank=0)
        """,
        """
        # torch.autocast('cuda') with device in a comment
        s = "torch.autocast('cuda')"
        """,
        # Only ever a CUDA device, whichever branch picks it (MONAI's auto3dseg scripts).
        """
        import os
        import torch

        def run(model, x, world_size):
            device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}") if world_size > 1 else torch.device("cuda:0")
            model.to(device)
            with torch.autocast("cuda"):
                return model(x)
        """,
        """
        import torch

        class Runner:
            def __init__(self, rank, distributed):
                if distributed:
                    device = "cuda:{0:d}".format(rank)
                else:
                    device = "cuda:0"
                self.device = device

            def infer(self, x):
                with torch.autocast("cuda"):
                    return self.model(x.to(self.device))
        """,
        # AMP is switched off without CUDA, by a flag the file derives from a device test.
        """
        import torch

        def parse(config):
            if not torch.cuda.is_available():
                config["cuda"] = False
            config["amp"] = config["amp"] and config["cuda"]

        class Segmenter:
            def infer(self, x, device):
                with torch.autocast("cuda", enabled=self.config["amp"]):
                    return self.model(x.to(device))
        """,
        # fairchem: the scaler exists only off CPU, and the autocast is on when it exists.
        """
        import torch

        class Trainer:
            def __init__(self, amp, cpu, device):
                self.cpu = cpu
                self.device = device
                self.scaler = torch.amp.GradScaler("cuda") if amp and not self.cpu else None

            def step(self, x):
                with torch.autocast("cuda", enabled=self.scaler is not None):
                    return self.model(x.to(self.device))
        """,
        # The dtype is float32 (no AMP) unless CUDA is there (moment's tutorials).
        """
        import torch

        def embed(model, x, device):
            x = x.to(device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16 if torch.cuda.is_available() else torch.float32):
                return model(x)
        """,
        # One worker per CUDA device: the NCCL backend runs nowhere else (EasyOCR).
        """
        import torch
        import torch.distributed as dist

        def main(config):
            device = "cuda" if torch.cuda.is_available() else "cpu"
            ngpus = torch.cuda.device_count()
            torch.multiprocessing.spawn(main_worker, nprocs=ngpus, args=(config,))

        def main_worker(gpu, config):
            dist.init_process_group(backend="nccl", rank=gpu)
        """,
        # The NCCL helper runs only where its callers have CUDA (Time-MoE, NATSpeech).
        """
        import torch
        import torch.distributed as dist

        def setup_nccl(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)

        def main(rank, world_size):
            if torch.cuda.is_available():
                setup_nccl(rank=rank, world_size=world_size)
                return f"cuda:{rank}"
            return "cpu"
        """,
        """
        import torch
        import torch.distributed as dist

        class Trainer:
            def __init__(self, on_gpu):
                self.device = torch.device("cuda" if on_gpu else "cpu")

            def ddp_run(self, gpu_idx):
                self.init_ddp_connection(gpu_idx, len(self.gpus))
                torch.cuda.set_device(gpu_idx)

            def init_ddp_connection(self, rank, world_size):
                dist.init_process_group("nccl", rank=rank, world_size=world_size)
        """,
        # Weights staged in host memory are no CPU device choice (LLaMA2-Accessory).
        """
        import torch
        import torch.distributed as dist

        def from_pretrained(path, device, quant=False):
            dist.init_process_group(backend="nccl", rank=0, world_size=1)
            return torch.load(path, map_location="cpu" if quant else device)
        """,
        # `preds` is the argmax of a tensor: its `.device` is the data's (openvla).
        """
        import torch

        def run_training(vlm, batch, dtype):
            with torch.autocast("cuda", dtype=dtype):
                output = vlm(input_ids=batch["input_ids"])
            preds = output.logits[:, 1:-1].argmax(dim=2)
            return batch["labels"][:, 1:].to(preds.device) == preds
        """,
        # A tensor parameter's `.device` says where the data is, not where the code runs.
        """
        import torch

        def forward(self, embeddings: torch.Tensor, mask: torch.Tensor | None):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = self.head(embeddings)
            return torch.zeros(3, device=embeddings.device)
        """,
        """
        import torch

        def evaluate(model, batch, val_outputs):
            val_outputs = val_outputs[0, ...]
            with torch.autocast("cuda"):
                pred = model(batch)
            return pred.to(val_outputs.device)
        """,
        # axolotl: the loss calls a method that runs a network on a device the class only
        # ever sets to CUDA, so the step cannot run without CUDA.
        """
        import torch

        class StridedTrainer:
            def __init__(self, model, gpu):
                if gpu:
                    self.feature_device = torch.device(f"cuda:{gpu}")
                else:
                    self.feature_device = torch.device("cuda:0")
                self.feature_net = model.to(self.feature_device)

            def compute_loss(self, model, batch):
                device = next(model.parameters()).device
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    out = model(batch.to(device))
                with torch.no_grad():
                    reward = self._rewards(batch)
                return (out * reward.to(device)).mean()

            def _rewards(self, batch):
                fd = self.feature_device
                return self.feature_net(batch.to(fd))
        """,
        # LatentSync: `validation` is called only from a function that requires CUDA.
        """
        import torch

        def main(local_rank, model, loader):
            torch.cuda.set_device(local_rank)
            device = torch.device(local_rank)
            for x in loader:
                validation(loader, device, model)

        @torch.no_grad()
        def validation(loader, device, model):
            for x in loader:
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    model(x.to(device))
        """,
        # PixArt: the same function's AMP is `torch.cuda.amp` (CUDA-only by its API).
        """
        import torch

        def train(model, teacher, loader, accelerator):
            emb = torch.load("null.pth").to(accelerator.device)
            for z in loader:
                with torch.cuda.amp.autocast(enabled=True):
                    loss = model(z)
                with torch.no_grad():
                    with torch.autocast("cuda"):
                        target = teacher(z, emb)
        """,
        # micro_diffusion: `self.device` is a placeholder the file never sets to a device.
        """
        import torch

        class TextEncoder(torch.nn.Module):
            def __init__(self, model, dtype=torch.float16):
                super().__init__()
                self.model = model
                self.device = None
                self.dtype = dtype

            def forward(self, text):
                with torch.autocast(device_type="cuda", dtype=self.dtype):
                    return self.model(text)
        """,
        # Gen-L-Video: diffusers' xformers attention raises without CUDA, and this function
        # turns it on by default (a parameter that defaults to True) or raises itself.
        """
        import torch
        from accelerate import Accelerator
        from diffusers.utils.import_utils import is_xformers_available

        def main(unet, batch, enable_xformers_memory_efficient_attention: bool = True):
            accelerator = Accelerator()
            if enable_xformers_memory_efficient_attention:
                if is_xformers_available():
                    unet.enable_xformers_memory_efficient_attention()
                else:
                    raise ValueError("xformers is not available")
            x = batch.to(accelerator.device)
            with torch.autocast("cuda"):
                return unet(x)
        """,
    )
    INVALID = (
        # Through an attribute another method reads (musictransformer2023's trainer).
        Invalid(
            """
              import torch
            + import amplint.runtime

              class Trainer:
                  def __init__(self, config):
                      self.config = config
            -         self.device_type = "cuda" if "cuda" in config.device else "cpu"
            +         self.device_type = amplint.runtime.device_type(config.device)

                  def train(self, model, batch):
                      with torch.autocast(self.device_type, dtype=torch.bfloat16):
                          return model(batch)
            """,
            unsafe=True,
            line=6, column=28, message='maps every non-CUDA device (mps, xpu, ...) to "cpu"',
        ),
        # The placeholder is set to a device by the file that builds the wrapper.
        Invalid(
            """
              import torch
            + import amplint.runtime

              class TextEncoder(torch.nn.Module):
                  def __init__(self, model):
                      super().__init__()
                      self.model = model
                      self.device = None

                  def forward(self, text):
            -         with torch.autocast(device_type="cuda", dtype=torch.float16):
            +         with torch.autocast(device_type=amplint.runtime.device_type(self.device), dtype=torch.float16):
                          return self.model(text)

              def build(model, device):
                  encoder = TextEncoder(model)
                  encoder.device = device
                  return encoder
            """,
            unsafe=True,
            line=10, column=41, message="although this code has a device variable (`self.device`)",
        ),
        # diffusers' training scripts: xformers only when a command-line flag asks for it
        # (off by default), so the script runs on a Mac without it.
        Invalid(
            """
              import torch
              from accelerate import Accelerator
            + import amplint.runtime

              def main(args, unet, batch):
                  accelerator = Accelerator()
                  if args.enable_xformers_memory_efficient_attention:
                      unet.enable_xformers_memory_efficient_attention()
                  x = batch.to(accelerator.device)
            -     with torch.autocast("cuda"):
            +     with torch.autocast(amplint.runtime.device_type(accelerator.device)):
                      return unet(x)
            """,
            unsafe=True,
            line=9, column=25, message="although this code has a device variable (`accelerator.device`)",
        ),
        # Reported, but no fix: the only device at hand, `z.device`, is bound on one branch
        # (FastVideo: the rewrite would raise UnboundLocalError on the other).
        Invalid(
            """
            import torch

            def denoise(model, latents, ti2v):
                if ti2v:
                    z = latents.to("cuda")
                    print(z.device)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return model(latents)
            """,
            unsafe=True,
            line=7, column=25, message="hardcodes device type",
        ),
        # One call of `train` passes a device that may be the CPU.
        Invalid(
            """
              import torch
            + import amplint.runtime

              def train(model, loader, device):
                  for x, y in loader:
            -         with torch.autocast("cuda", dtype=torch.bfloat16):
            +         with torch.autocast(amplint.runtime.device_type(device), dtype=torch.bfloat16):
                          loss = model(x.to(device), y)
                      loss.backward()

              def main(args):
                  train(build(), load(), torch.device("cuda", 0))
                  train(build(), load(), args.device)
            """,
            unsafe=True,
            line=5, column=29, message="although this code has a device variable (`device`)",
        ),
        Invalid(
            """
              import torch
            + import amplint.runtime

              def f(model, x, device="cpu"):
            -     with torch.autocast('cuda'):
            +     with torch.autocast(amplint.runtime.device_type(device)):
                      return model(x)
            """,
            unsafe=True,
            line=4, column=25, message='hardcodes device type "cuda" although this code has a device variable (`device`)',
        ),
        Invalid(
            """
              import torch
              import torch.distributed as dist

              device = 'cuda' if torch.cuda.is_available() else 'cpu'
            - dist.init_process_group(backend='nccl', init_method='env://')
            + dist.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo', init_method='env://')
            """,
            line=5, column=33, message="""use `'nccl' if torch.cuda.is_available() else 'gloo'`""",
        ),
        # DDP without device_ids runs on CPU too (gloo would serve it): nothing needs CUDA.
        Invalid(
            """
              import os
              import torch
              import torch.distributed as dist
              from torch.nn.parallel import DistributedDataParallel

              class Accelerator:
                  def __init__(self):
                      self.world_size = int(os.getenv("WORLD_SIZE", "1"))
                      if self.world_size > 1 and not dist.is_initialized():
            -             dist.init_process_group("nccl", init_method="env://")
            +             dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", init_method="env://")
                      self.device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

                  def prepare_model(self, model):
                      model = model.to(self.device)
                      if self.world_size > 1:
                          model = DistributedDataParallel(model)
                      return model
            """,
            line=10, column=37, message='Hardcoded "nccl" backend',
        ),
        # An availability test that moves the model is a fallback: the file runs without CUDA.
        Invalid(
            """
              import torch
              import torch.distributed as dist

              def to_gpu(x):
                  if torch.cuda.is_available():
                      x = x.cuda()
                  return x

              def setup(rank, world_size):
            -     dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
            +     dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", rank=rank, world_size=world_size)
            """,
            line=10, column=37, message='Hardcoded "nccl" backend',
        ),
        # `torch` not bound: the fix imports it; a device option's default shows the intent.
        Invalid(
            """
              import argparse
              from torch.distributed import init_process_group
            + import torch

              parser = argparse.ArgumentParser()
              parser.add_argument('--device', default='cpu')

              def setup():
            -     init_process_group("nccl")
            +     init_process_group("nccl" if torch.cuda.is_available() else "gloo")
            """,
            line=8, column=24, message="NCCL needs CUDA GPUs",
        ),
        Invalid(
            """
              import torch
            + import amplint.runtime
              device = 'mps'
            - device_type = 'cuda' if 'cuda' in device else 'cpu'
            + device_type = amplint.runtime.device_type(device)
              with torch.autocast(device_type):
                  pass
            """,
            unsafe=True,
            line=3, column=15, message="maps every non-CUDA device (mps, xpu, ...) to \"cpu\"",
        ),
        Invalid(
            """
              import torch
            + import amplint.runtime

              def f(device):
            -     return torch.amp.GradScaler('cuda' if device.startswith('cuda') else 'cpu')
            +     return torch.amp.GradScaler(amplint.runtime.device_type(device))
            """,
            unsafe=True,
            line=4, column=33, message="use `amplint.runtime.device_type(device)`",
        ),
        Invalid(
            """
              import torch
            + import amplint.runtime

              def f(device):
            -     with torch.autocast(str(device), dtype=torch.bfloat16):
            +     with torch.autocast(amplint.runtime.device_type(device), dtype=torch.bfloat16):
                      pass
            """,
            unsafe=True,
            line=4, column=25, message='`str(device)` as the autocast device type is "cuda:0"',
        ),
        Invalid(
            """
              import torch
            + import amplint.runtime

              class Trainer:
                  def __init__(self, device="cpu"):
                      self.device = device

                  def step(self, x):
            -         with torch.amp.autocast(device_type='cuda', enabled=self.amp):
            +         with torch.amp.autocast(device_type=amplint.runtime.device_type(self.device), enabled=self.amp):
                          return self.model(x)
            """,
            unsafe=True,
            line=8, column=45, message="has a device variable (`self.device`)",
        ),
        Invalid(
            """
              import torch as th
            + import amplint.runtime

              def f(args):
                  x = x.to(args.device)
            -     scaler = th.amp.GradScaler('cuda')
            +     scaler = th.amp.GradScaler(amplint.runtime.device_type(args.device))
            """,
            unsafe=True,
            line=5, column=32, message='`th.amp.GradScaler` hardcodes device type "cuda"',
        ),
        # A dataclass field is a device variable for its methods (RULES.md rev 4).
        Invalid(
            """
              import torch
              from dataclasses import dataclass
            + import amplint.runtime

              @dataclass
              class Trainer:
                  device: torch.device

                  def step(self, x):
            -         with torch.autocast('cuda'):
            +         with torch.autocast(amplint.runtime.device_type(self.device)):
                          return self.model(x)
            """,
            unsafe=True,
            line=9, column=29, message="device variable (`self.device`)",
        ),
        # Bound to CUDA, but a configurator may rebind it (nanoGPT) or the file tests it.
        Invalid(
            """
              import torch
            + import amplint.runtime
              device = 'cuda'
              exec(open('configurator.py').read())
            - with torch.autocast('cuda', dtype=torch.bfloat16):
            + with torch.autocast(amplint.runtime.device_type(device), dtype=torch.bfloat16):
                  logits, loss = model(X, Y)
            """,
            unsafe=True,
            line=4, column=21, message="hardcodes device type",
        ),
        Invalid(
            """
              import torch
            + import amplint.runtime
              device = torch.device('cuda')
              pin = device.type == 'cuda'
            - scaler = torch.amp.GradScaler('cuda')
            + scaler = torch.amp.GradScaler(amplint.runtime.device_type(device))
            """,
            unsafe=True,
            line=4, column=31, message="hardcodes device type",
        ),
        # Two different device variables: which one is meant is a guess, so no fix.
        Invalid(
            """
            import torch

            def f(x, y):
                a = x.to(args.device)
                b = y.to(accelerator.device)
                with torch.autocast('cuda'):
                    pass
            """,
            fixed=None,
            unsafe=True,
            line=6, column=25, message="use `amplint.runtime.device_type(args.device)`",
        ),
    )

    # -- detection -------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.analysis.training.in_test_module:
            return  # a test picks its device on purpose (PyG's CUDA-autocast test on any device)
        qualified = self.qualified_name(node.func)
        if qualified is None:
            return
        if qualified in INIT_PROCESS_GROUP:
            self._check_backend(node)
            return
        if qualified in MODERN_AUTOCASTS:
            arguments = call_arguments(node, AUTOCAST_ORDER)
            device_key = "device_type"
        elif qualified in MODERN_GRAD_SCALERS:
            arguments = call_arguments(node, GRAD_SCALER_ORDER)
            device_key = "device"
        elif qualified in MODERN_CUSTOM_AUTOGRAD:
            arguments = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
            device_key = "device_type"
        else:
            return
        if arguments is None or device_key not in arguments:
            return
        device = arguments[device_key]
        if qualified in MODERN_AUTOCASTS and self._is_str_of_device(device):
            if not self.context.project.declares_torch_from(AUTOCAST_TAKES_INDEXED_DEVICE):
                self._report_str_device(device)
            return
        if string_literal(device) != "cuda":
            return
        devices = self.context.analysis.devices
        enabled = arguments.get("enabled")
        if enabled is not None and (devices.gated_on_device(enabled) or bool_value(enabled) is False):
            # A disabled region says which autocast it turns off; nothing runs without AMP.
            return
        dtype = arguments.get("dtype")
        if dtype is not None and devices.gated_on_device(dtype):
            return  # float32 (no AMP) unless CUDA is there: CUDA-only AMP, on purpose
        if dtype is not None and self.context.analysis.values.dtype_values(dtype) == FLOAT32_ONLY:
            return  # a float32 region ("mmpose is not compatible with fp16"): no AMP to lose
        if (
            qualified in MODERN_AUTOCASTS
            and dtype is not None
            and self.context.analysis.values.dtype_values(dtype) == frozenset({"float16"})
            and not self.context.project.torch_may_reach(AUTOCAST_BEYOND_CUDA)
            and not self.context.project.torch_may_reach(CPU_AUTOCAST_TAKES_FLOAT16)
        ):
            # The declared torch autocasts only on CUDA and CPU, and CPU autocast takes no
            # float16 there: an autocast on the device's own type would disable itself off
            # CUDA as well (TITAN's notebooks, torch==2.0.1; round AZ).
            return
        if (
            not devices.has_variable(node)
            or (devices.arrives_from_outside(node) and not devices.chooses_other_device)
            or devices.in_device_condition(node)
            or devices.requires_cuda(node, on_its_path=True)
            # A CUDA state call anywhere in the function raises without CUDA: instanseg's
            # warm-up autocasts run before a loop that calls `torch.cuda.synchronize()`.
            or devices.queries_cuda_state(node)
            or devices.callers_require_cuda(node, on_its_path=True)
            or self._scope_uses_cuda_amp(node)
            or self.context.analysis.project.requires_cuda(node)
        ):
            return
        if qualified in MODERN_GRAD_SCALERS and self._scaling_matters_only_on_cuda(node):
            return
        if self._runs_float16(dtype, enabled) and all(self._only_cuda_or_cpu(variable.expr) for variable in devices.variables(node)):
            # Off CUDA the device can only be the CPU, where nobody wants float16 autocast:
            # the literal keeps it CUDA-only (coqui's Tortoise, `half=True` by default; round BJ).
            return
        variable = devices.expression_at(node)
        shown = variable or next(v.text for v in devices.variables(node))
        # The callee as the code spells it (`torch.amp.autocast`, `th.amp.GradScaler`).
        callee = dotted_name(node.func) or _SHORT[qualified]
        scales = qualified in MODERN_GRAD_SCALERS
        what, lost = ("the scaler", "loss scaling") if scales else ("the block", "AMP")
        # torch warns only where CUDA is missing; with CUDA present and the device variable
        # set to another device, nothing is said at all.
        message = (
            f'`{callee}` hardcodes device type "cuda" although this code has a device '
            f"variable (`{shown}`): when that device is a CPU, MPS or XPU, {what} runs without {lost}; "
            f"use `amplint.runtime.device_type({shown})`"
        )
        fix = None
        if variable is not None:
            fix = self._runtime_fix(device, f"amplint.runtime.device_type({variable})", Applicability.UNSAFE)
        self.report(device, message, fix=fix)

    def _scope_uses_cuda_amp(self, node: cst.CSTNode) -> bool:
        """Does the same function also use ``torch.cuda.amp`` (PixArt's ``train`` opens
        ``torch.cuda.amp.autocast(...)`` beside ``torch.autocast("cuda")``)? Its author
        wrote CUDA-only AMP throughout; that API is AMP001's to report, and one literal
        among them is no device choice of its own."""
        tree = self.context.analysis.tree
        scope = tree.scope_of(node)
        return any(
            tree.scope_of(call) is scope and (self.qualified_name(call.func) or "").startswith("torch.cuda.amp.")
            for call in tree.index.calls
        )

    def _scaling_matters_only_on_cuda(self, construction: cst.Call) -> bool:
        """Does every autocast the scaler serves choose between CUDA and devices whose
        default dtype is bfloat16, with no dtype of its own (`autocast("cuda" if available
        else "cpu")`, MONAI's tutorials)? float16 then runs only on CUDA, where a CUDA
        scaler is what it needs; elsewhere bfloat16 needs none."""
        scalers = self.context.analysis.scalers
        devices = self.context.analysis.devices
        region = scalers.served_region(construction)
        blocks = [block for block in scalers.served_blocks(region) if not block.disabled]
        if not blocks:
            # nanoGPT's trainers keep the context on the instance (`self.ctx = nullcontext()
            # if ... else torch.amp.autocast(...)`, then `with self.ctx:`).
            member_uses = scalers.member_context_uses(region)
            if member_uses:
                return all(self._autocast_devices(use) == frozenset({"cuda"}) for use in member_uses)
            # The scaler is handed to the functions that autocast (nlp-anderson's `main()`
            # passes it to `train_one_epoch`, round BK): when every autocast of the file is
            # CUDA's alone, float16 never runs elsewhere and loss scaling has nothing to do there.
            everywhere = [block for block in self.context.analysis.autocast.blocks if not block.disabled]
            return bool(everywhere) and all(self._unreported_cuda_block(block) for block in everywhere)
        return all(
            (block.use.float16_only_on_cuda and block.use.device_types is not None and block.use.device_types - {"cuda"})
            or self._autocast_devices(block.use) == frozenset({"cuda"})
            # The autocast it serves is CUDA's alone (physicsnemo's crash trainer: the scaler
            # in `__init__`, `autocast(device_type="cuda")` in `forward`; round BL): float16
            # never runs elsewhere, so a CUDA scaler is all it needs.
            or self._unreported_cuda_block(block)
            # Opened only under a device test (TradingBOT's `if self.device.type == 'cuda':
            # with autocast('cuda'):`, round BH): the scaler meets float16 only on CUDA.
            or devices.in_device_condition(block.statement)
            for block in blocks
        )

    def _unreported_cuda_block(self, block: AutocastBlock) -> bool:
        """Is this autocast CUDA's alone, whatever the device (`autocast("cuda")` itself, not
        chosen by a conditional, not a library's `.autocast()`), in a scope with no device
        variable, so not reported either? The scaler it pairs with is then as CUDA-only as
        it is; where it is reported, its fix would leave the scaler behind."""
        use = block.use
        return (
            use.device_types == frozenset({"cuda"})
            and use.conditional is None
            and not use.method
            and not use.alternatives
            and not self.context.analysis.devices.has_variable(block.statement)
        )

    def _autocast_devices(self, use: AutocastUse) -> frozenset[str] | None:
        """The device types the autocast may run on, when its conditional hands some of its
        known ones a no-op context; else None. nanoGPT's `nullcontext() if device_type ==
        "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)`, where
        `device_type` is "cuda" or "cpu", runs AMP only on CUDA, so `GradScaler("cuda")` is
        the scaler it needs (TabularTransformer, round AX)."""
        if use.device_types is None or use.conditional is None or use.device_expr is None or use.call is None:
            return None
        # `nullcontext() if d == "cpu" else autocast(d)`, `autocast(d) if d != "cpu" else nullcontext()`
        literal = self._literal_excluded(use.conditional, use.call, use.device_expr)
        return use.device_types - {literal} if literal is not None else None

    def _literal_excluded(self, conditional: cst.IfExp, node: cst.CSTNode, subject: cst.CSTNode) -> str | None:
        """The string the conditional's test compares ``subject`` with, when ``node`` sits on
        the branch that value never takes: the `else` of `subject == "cpu"`, the body of
        `subject != "cpu"`; else None."""
        test = conditional.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        comparison = test.comparisons[0]
        literal = string_literal(comparison.comparator)
        code = self.context.module.code_for_node
        if literal is None or code(test.left) != code(subject):
            return None
        tree = self.context.analysis.tree
        if isinstance(comparison.operator, cst.Equal) and tree.within(node, conditional.orelse):
            return literal
        if isinstance(comparison.operator, cst.NotEqual) and tree.within(node, conditional.body):
            return literal
        return None

    def _is_str_of_device(self, expr: cst.BaseExpression) -> bool:
        return (
            isinstance(expr, cst.Call)
            and self.qualified_name(expr.func) == "str"
            and len(expr.args) == 1
            and expr.args[0].keyword is None
            and not expr.args[0].star
            and dotted_name(expr.args[0].value) is not None
        )

    def _report_str_device(self, device: cst.BaseExpression) -> None:
        assert isinstance(device, cst.Call)
        inner = self.context.module.code_for_node(device.args[0].value)
        message = (
            f'`str({inner})` as the autocast device type is "cuda:0" for an indexed device, which older '
            f"PyTorch rejects and 2.x accepts without its CUDA checks; use `{inner}.type` or "
            f"`amplint.runtime.device_type({inner})`"
        )
        fix = self._runtime_fix(device, f"amplint.runtime.device_type({inner})", Applicability.UNSAFE)
        self.report(device, message, fix=fix)

    def _check_backend(self, node: cst.Call) -> None:
        backend: cst.BaseExpression | None = None
        for position, arg in enumerate(node.args):
            if arg.star:
                return
            if (arg.keyword is None and position == 0) or (arg.keyword is not None and arg.keyword.value == "backend"):
                backend = arg.value
        if backend is None or string_literal(backend) != "nccl":
            return
        devices = self.context.analysis.devices
        if devices.in_device_condition(node):
            return
        if (
            devices.requires_cuda(node)
            or devices.block_binds_cuda_device(node)
            or devices.callers_require_cuda(node)
            or devices.sibling_requires_cuda_on_same_test(node)
            or not devices.runs_elsewhere
            or self.context.analysis.project.requires_cuda(node)
            or self.context.analysis.project.uncalled_in_script(node)
            or self.context.analysis.project.called_only_by_cuda_main(node)
        ):
            return  # CUDA-only code, or code that does not run: gloo would not make it run anywhere new
        if self._runtime_allowed():
            variable = devices.expression_at(node, strict=True)
            call = f"amplint.runtime.dist_backend({variable or ''})"
            message = (
                'Hardcoded "nccl" backend: NCCL needs CUDA GPUs, so `init_process_group` fails on '
                f"CPU-only, MPS and XPU machines; use `{call}` (nccl on CUDA, xccl on XPU, gloo otherwise)"
            )
            self.report(backend, message, fix=self._runtime_fix(backend, call, Applicability.SAFE))
            return
        quote = cst.ensure_type(backend, cst.SimpleString).quote
        bound = Importer(self.context).bind_module("torch", node)
        torch = bound[0] if bound is not None else "torch"
        choice = f"{quote}nccl{quote} if {torch}.cuda.is_available() else {quote}gloo{quote}"
        message = (
            'Hardcoded "nccl" backend: NCCL needs CUDA GPUs, so `init_process_group` fails on '
            f"CPU-only, MPS and XPU machines; use `{choice}`"
        )
        fix = None
        if bound is not None:
            fix = self.make_fix(
                f"Replace with `{choice}`",
                [self.context.replace(backend, choice), *bound[1]],
                applicability=Applicability.SAFE,
            )
        self.report(backend, message, fix=fix)

    def _runtime_allowed(self) -> bool:
        """May a fix make this code import amplint.runtime (RULES.md, runtime-dependency
        policy), and does the torch it targets have what the helpers need?"""
        project = self.context.project
        return project.runtime_helpers and project.torch_has(RUNTIME_TORCH)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self.context.analysis.training.in_test_module:
            return
        body, orelse = string_literal(node.body), string_literal(node.orelse)
        if {body, orelse} != {"cuda", "cpu"}:
            return
        tested = self._cuda_string_test(node.test)
        if tested is None:
            return
        subject, positive = tested
        if (body == "cuda") != positive:
            return
        if not self._feeds_amp(node):
            return  # a device for something else (a torch.Generator, a tensor): not AMP code
        if self._only_cuda_or_cpu(subject):
            return  # nothing else reaches the test, so it maps every device exactly
        if not self.context.project.torch_may_reach(AUTOCAST_BEYOND_CUDA):
            return  # the declared torch autocasts only on CUDA and CPU: "cpu" is all the rest can get
        if self.context.analysis.devices.queries_cuda_state(node):
            return  # code written for CUDA (a benchmark that synchronizes it): no other device reaches the test
        text = self.context.module.code_for_node(subject)
        message = (
            f'`{self.context.module.code_for_node(node)}` maps every non-CUDA device (mps, xpu, ...) to "cpu"; '
            f"use `amplint.runtime.device_type({text})`"
        )
        fix = self._runtime_fix(node, f"amplint.runtime.device_type({text})", Applicability.UNSAFE)
        self.report(node, message, fix=fix)

    def _runs_float16(self, dtype: cst.BaseExpression | None, enabled: cst.BaseExpression | None) -> bool:
        """Is the autocast a float16 one: a float16 dtype, or none (CUDA's default, float16)
        with an `enabled=` flag named for float16 (sarkd5's `enabled=use_fp16`; round BK)?"""
        if dtype is not None:
            return self.context.analysis.values.dtype_values(dtype) == frozenset({"float16"})
        return enabled is not None and mentions(enabled, FLOAT16_FLAG_WORDS) and not mentions(enabled, BFLOAT16_FLAG_WORDS)

    def _only_cuda_or_cpu(self, subject: cst.BaseExpression, depth: int = 0) -> bool:
        """Is ``subject`` bound only to CUDA or CPU device strings, and never rebound at run
        time (baby-llama2-chinese: `device = 'cuda' if torch.cuda.is_available() else 'cpu'`
        above `'cuda' if 'cuda' in device else 'cpu'`)?"""
        analysis = self.context.analysis
        values = analysis.values.string_values(subject)
        member = analysis.classes.instance_attribute(subject)
        if values is None and member is not None:
            # `self.device`, every assignment of it in the class a CUDA-or-CPU string, and no
            # other object's `.device` set anywhere in the file (gptcore's `LightningModel`).
            assigned = analysis.classes.attribute_values(*member)
            found = [analysis.values.string_values(value) for value in assigned or ()]
            if assigned and not self._sets_other_devices(member[1], assigned):
                if all(found):
                    values = frozenset().union(*(one for one in found if one))
                elif all(self._cuda_or_cpu_value(value, depth) for value in assigned):
                    # `torch.device("cuda" if torch.cuda.is_available() else "cpu")` (coqui's Tortoise)
                    values = frozenset({"cuda"})
        if values is None and isinstance(subject, cst.Name):
            # `device = 'cuda'`, then `device = f'cuda:{ddp_local_rank}'` under DDP, after a
            # module-level `device = None` placeholder (NeuroLM's nanoGPT-style trainers).
            # nunif: `device = f"cuda:{args.gpu}" if args.gpu >= 0 else "cpu"`.
            bound = analysis.bindings.plain_values(subject)
            if bound and all(self._cuda_or_cpu_value(value, depth) for value in bound):
                values = frozenset({"cuda"})
        if values is None and isinstance(subject, cst.Name):
            # A parameter every call of the file fills with CUDA or CPU (Tiny-GRPO:
            # `setup_training_environment("cuda" if torch.cuda.is_available() else "cpu")`).
            given = analysis.devices.arguments_for(subject)
            if given and all(self._cuda_or_cpu_value(value, depth) for value in given):
                values = frozenset({"cuda"})
        if not values or not all(value == "cpu" or value == "cuda" or value.startswith("cuda:") for value in values):
            return False
        return not analysis.devices.rebinds_globals

    def _cuda_or_cpu_value(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """A CUDA device literal, `"cpu"`, a `None` placeholder, a conditional of these, or a
        name (a parameter the file's calls fill) that holds only these (sarkd5's evaluator
        is built with `main()`'s `device = torch.device('cuda' if ... else 'cpu')`; round BK)."""
        if isinstance(value, cst.IfExp):
            return self._cuda_or_cpu_value(value.body, depth) and self._cuda_or_cpu_value(value.orelse, depth)
        if isinstance(value, cst.Name) and value.value not in ("None", "True", "False"):
            return depth < 3 and self._only_cuda_or_cpu(value, depth + 1)
        if (
            isinstance(value, cst.Call)
            and self.context.analysis.names.resolve(value.func) == "torch.device"
            and len(value.args) == 1
            and value.args[0].keyword is None
        ):
            return self._cuda_or_cpu_value(value.args[0].value, depth)
        return is_none(value) or string_literal(value) == "cpu" or is_cuda_literal_device(self.context.analysis.names, value)

    def _sets_other_devices(self, attr: str, own: list[cst.BaseExpression]) -> bool:
        """Does the file assign ``<anything>.<attr>`` other than the given values?"""
        for assign in self.context.analysis.tree.index.assigns:
            for target in assign.targets:
                if isinstance(target.target, cst.Attribute) and target.target.attr.value == attr and assign.value not in own:
                    return True
        return False

    def _feeds_amp(self, value: cst.BaseExpression) -> bool:
        """Does ``value`` reach an AMP call's device argument: directly, or through the one
        name it is assigned to?"""
        tree = self.context.analysis.tree
        parent = tree.parent(value)
        if isinstance(parent, cst.Arg):
            return self._is_amp_device_argument(parent) and not self._enabled_by_device_test(parent)
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            return False
        target = parent.targets[0].target
        if isinstance(target, cst.Name):
            reads: list[cst.CSTNode] = [
                access.node for binding in self.context.analysis.bindings.of(target) for access in binding.references
            ]
        else:
            member = self.context.analysis.classes.instance_attribute(target)
            if member is None:
                return False
            # `self.device_type = "cuda" if "cuda" in config.device else "cpu"`, read by
            # another method of the class (musictransformer2023's trainer, round AU).
            reads = [
                read
                for read in self.context.analysis.training.occurrences(dotted_name(target) or "")
                if read is not target and self._in_class(read, member[0])
            ]
        # A read that only chooses between autocast and a no-op context, or that reaches
        # the autocast only on the branch the "cpu" value never takes (nanoGPT's `nullcontext()
        # if device_type == "cpu" else torch.amp.autocast(device_type=device_type, ...)`), never
        # gives autocast the mapped "cpu": the other devices then run without autocast, which
        # is AMP202's opinion (off by default), not a block aimed at the wrong device.
        return any(
            isinstance(argument := tree.parent(read), cst.Arg)
            and self._is_amp_device_argument(argument)
            and not self._reached_only_off_cpu(read)
            and not self._enabled_by_device_test(argument)
            for read in reads
        )

    def _enabled_by_device_test(self, argument: cst.Arg) -> bool:
        """Is the AMP call that takes this device argument enabled only by a device test
        (`torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu",
        enabled=autocast_enabled)` with `autocast_enabled = device.startswith("cuda")`:
        MetricGANplus's trainers, round BO)? The mapped "cpu" then only names a block that
        is off."""
        call = self.context.analysis.tree.parent(argument)
        if not isinstance(call, cst.Call):
            return False
        enabled = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "enabled"), None)
        return enabled is not None and self.context.analysis.devices.gated_on_device(enabled)

    def _in_class(self, node: cst.CSTNode, cls: cst.ClassDef) -> bool:
        scope = self.context.analysis.tree.scope_of(node)
        return isinstance(scope, cst.FunctionDef) and self.context.analysis.tree.class_of(scope) is cls

    def _reached_only_off_cpu(self, read: cst.CSTNode) -> bool:
        """Is ``read`` on the branch of a conditional expression that tests the same value
        against "cpu" and that the "cpu" value never takes (the `else` of `x == "cpu"`, the
        body of `x != "cpu"`)?"""
        for child, ancestor in self.context.analysis.tree.ancestry(read):
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement)):
                return False
            if isinstance(ancestor, cst.IfExp) and child is not ancestor.test and self._literal_excluded(ancestor, read, read) == "cpu":
                return True
        return False

    def _is_amp_device_argument(self, argument: cst.Arg) -> bool:
        call = self.context.analysis.tree.parent(argument)
        if not isinstance(call, cst.Call) or argument.star:
            return False
        qualified = self.qualified_name(call.func) or ""
        if qualified not in AMP_DEVICE_TAKERS:
            return False
        if argument.keyword is not None:
            return argument.keyword.value in ("device_type", "device")
        return call.args[0] is argument

    def _cuda_string_test(self, test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool] | None:
        """``"cuda" in x`` / ``x.startswith("cuda")`` (or negated): (x, is the test positive?)."""
        positive = True
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, positive = test.expression, not positive
        subject: cst.BaseExpression | None = None
        if (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and string_literal(test.left) == "cuda"
            and isinstance(test.comparisons[0].operator, (cst.In, cst.NotIn))
        ):
            subject = test.comparisons[0].comparator
            if isinstance(test.comparisons[0].operator, cst.NotIn):
                positive = not positive
        elif (
            isinstance(test, cst.Call)
            and isinstance(test.func, cst.Attribute)
            and test.func.attr.value == "startswith"
            and len(test.args) == 1
            and string_literal(test.args[0].value) == "cuda"
        ):
            subject = test.func.value
        if subject is None:
            return None
        if self._is_str_of_device(subject):
            assert isinstance(subject, cst.Call)
            subject = subject.args[0].value
        if dotted_name(subject) is None:
            return None
        return subject, positive

    # -- fixes -----------------------------------------------------------------------------

    def _runtime_fix(self, node: cst.CSTNode, replacement: str, applicability: Applicability) -> Fix | None:
        """Replace ``node`` with a call of amplint.runtime: at most unsafe unless the project
        declares amplint (the runtime-dependency policy), never for a torch the helpers lack."""
        if not self.context.project.torch_has(RUNTIME_TORCH):
            return None
        if has_comment(self.context, node):
            return None  # the expression is replaced whole: a comment in it would be lost
        if not self.context.project.runtime_helpers:
            applicability = Applicability.UNSAFE
        imports = Importer(self.context).runtime()
        if imports is None:
            return None
        edits: list[Edit] = [self.context.replace(node, replacement), *imports]
        return self.make_fix(f"Replace with `{replacement}`", edits, applicability=applicability)
