"""Facts that cross functions and files (issue 16): small projects on disk, checked through
the engine as `amplint check` checks them, so that the project index finds the modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from amplint.engine.config import Settings
from amplint.engine.runner import Job, Mode, process_path
from amplint.rules import all_rules


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _check(root: Path, name: str, select: str) -> list[tuple[str, int, str]]:
    settings = Settings(project_root=str(root)).with_overrides(select=(select,))
    job = Job(Mode.CHECK, settings, all_rules(), index_roots=(str(root),))
    report = process_path(str(root / name), job)
    return [(d.code, d.location.row, d.message) for d in report.diagnostics]


LOSSES = (
    "import torch\nimport torch.nn.functional as F\n\n"
    "def compute_loss(pred, target):\n    return F.binary_cross_entropy(torch.sigmoid(pred), target)\n"
)
TRAIN = (
    "import torch\nfrom losses import compute_loss\n\n"
    "def train_step(model, x, y):\n    with torch.autocast('cuda', dtype=torch.float16):\n"
    "        loss = compute_loss(model(x), y)\n    loss.backward()\n"
)


def test_bce_in_another_file_called_under_cuda_autocast(tmp_path: Path) -> None:
    root = _project(tmp_path, {"losses.py": LOSSES, "train.py": TRAIN})
    ((code, row, message),) = _check(root, "train.py", "AMP104")
    assert (code, row) == ("AMP104", 6)
    assert "`compute_loss(...)` reaches `F.binary_cross_entropy` (losses.py:5, via compute_loss)" in message
    assert "autocast(cuda)" in message
    # The loss module alone has no autocast: nothing to say there.
    assert _check(root, "losses.py", "AMP104") == []


def test_the_chain_goes_through_packages_relative_imports_and_helpers(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/losses.py": "import torch.nn.functional as F\n\ndef _bce(p, y):\n    return F.binary_cross_entropy(p, y)\n\n"
            "def total(p, y):\n    return _bce(p, y) * 2\n",
            "pkg/train.py": "import torch\nfrom .losses import total\n\ndef step(m, x, y):\n"
            "    with torch.autocast('cuda'):\n        loss = total(m(x), y)\n    loss.backward()\n",
        },
    )
    ((code, row, message),) = _check(root, "pkg/train.py", "AMP104")
    assert (code, row) == ("AMP104", 6)
    assert "(pkg/losses.py:4, via total → _bce)" in message  # from the project root


def test_a_loss_class_defined_elsewhere(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "losses.py": "import torch\n\nclass FocalBCE(torch.nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.bce = torch.nn.BCELoss()\n\n"
            "    def forward(self, p, y):\n        return self.bce(p, y)\n",
            "train.py": "import torch\nfrom losses import FocalBCE\n\ncriterion = FocalBCE()\n\ndef step(m, x, y):\n"
            "    with torch.autocast('cuda'):\n        loss = criterion(m(x), y)\n    loss.backward()\n",
        },
    )
    ((code, row, message),) = _check(root, "train.py", "AMP104")
    assert (code, row) == ("AMP104", 8)
    assert "via FocalBCE.forward" in message


def test_silent_when_the_chain_is_broken_or_the_device_tolerates_bce(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "losses.py": LOSSES,
            # A registry looked up by a runtime string: not resolved, so not claimed.
            "registry.py": "import torch\nfrom losses import compute_loss\nLOSSES = {'bce': compute_loss}\n\n"
            "def step(m, x, y, name):\n    with torch.autocast('cuda'):\n        loss = LOSSES[name](m(x), y)\n"
            "    loss.backward()\n",
            # getattr on a module: dynamic.
            "dynamic.py": "import torch\nimport losses\n\ndef step(m, x, y, name):\n    with torch.autocast('cuda'):\n"
            "        loss = getattr(losses, name)(m(x), y)\n    loss.backward()\n",
            # CPU autocast runs BCE in float32: fine.
            "cpu.py": TRAIN.replace("'cuda', dtype=torch.float16", "'cpu'"),
            # A third-party module is not part of the project.
            "outside.py": "import torch\nfrom somelib import compute_loss\n\ndef step(m, x, y):\n"
            "    with torch.autocast('cuda'):\n        loss = compute_loss(m(x), y)\n    loss.backward()\n",
            # The documented workaround in the callee.
            "safe_losses.py": "import torch\nimport torch.nn.functional as F\n\ndef compute_loss(p, y):\n"
            "    with torch.autocast('cuda', enabled=False):\n        return F.binary_cross_entropy(p.float(), y)\n",
            "safe.py": TRAIN.replace("from losses", "from safe_losses"),
        },
    )
    for name in ("registry.py", "dynamic.py", "cpu.py", "outside.py", "safe.py"):
        assert _check(root, name, "AMP104") == [], name


def test_backward_reached_from_inside_an_autocast_block(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "engine.py": "class Engine:\n    def backward_step(self, loss, scaler):\n        scaler.scale(loss).backward()\n",
            "train.py": "import torch\nfrom engine import Engine\n\nengine = Engine()\n\ndef step(model, x, scaler):\n"
            "    with torch.autocast('cuda'):\n        loss = model(x).sum()\n        engine.backward_step(loss, scaler)\n",
            # The same in one file, through a method of the trainer itself.
            "trainer.py": "import torch\n\nclass Trainer:\n    def optimize(self, loss):\n        loss.backward()\n\n"
            "    def step(self, x):\n        with torch.autocast('cuda'):\n            loss = self.model(x).sum()\n"
            "            self.optimize(loss)\n",
        },
    )
    ((code, row, message),) = _check(root, "train.py", "AMP103")
    assert (code, row) == ("AMP103", 9)
    assert "runs `scaler.scale(loss).backward()` (engine.py:3, via Engine.backward_step)" in message
    ((code, row, message),) = _check(root, "trainer.py", "AMP103")
    assert (code, row) == ("AMP103", 10)
    assert "via Trainer.optimize" in message


def test_a_single_file_still_reads_what_it_imports(tmp_path: Path) -> None:
    # `amplint check train.py`: the index roots at the project, the import is found.
    root = _project(tmp_path, {"losses.py": LOSSES, "train.py": TRAIN})
    settings = Settings(project_root=str(root)).with_overrides(select=("AMP104",))
    report = process_path(str(root / "train.py"), Job(Mode.CHECK, settings, all_rules()))
    assert [d.code for d in report.diagnostics] == ["AMP104"]


def test_dtypes_from_another_modules_constants(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "config.py": "import torch\nAMP_DTYPE = torch.bfloat16\nHALF = torch.float16\nUNKNOWN = choose()\n",
            "bf16.py": "import torch\nfrom config import AMP_DTYPE\n\nscaler = torch.amp.GradScaler('cuda')\n\n"
            "def step(m, x):\n    with torch.autocast('cuda', dtype=AMP_DTYPE):\n        loss = m(x)\n"
            "    scaler.scale(loss).backward()\n",
            "fp16.py": "import torch\nimport config\n\ndef step(m, x, opt):\n    with torch.autocast('cuda', dtype=config.HALF):\n"
            "        loss = m(x)\n    loss.backward()\n    opt.step()\n",
            "unknown.py": "import torch\nimport config\n\ndef step(m, x, opt):\n    with torch.autocast('cuda', dtype=config.UNKNOWN):\n"
            "        loss = m(x)\n    loss.backward()\n    opt.step()\n",
        },
    )
    assert [(code, row) for code, row, _ in _check(root, "bf16.py", "AMP302")] == [("AMP302", 4)]
    assert [(code, row) for code, row, _ in _check(root, "fp16.py", "AMP105")] == [("AMP105", 5)]
    assert _check(root, "unknown.py", "AMP105") == []


def test_the_cache_knows_what_a_result_rests_on(tmp_path: Path) -> None:
    from amplint.engine.runner import run

    root = _project(tmp_path / "project", {"losses.py": LOSSES, "train.py": TRAIN})
    settings = Settings(project_root=str(root)).with_overrides(select=("AMP104",))
    job = Job(Mode.CHECK, settings, all_rules(), index_roots=(str(root),))
    cache = str(tmp_path / "cache")

    def codes() -> list[str]:
        (report,) = run([str(root / "train.py")], job, jobs=1, cache_dir=cache)
        return [d.code for d in report.diagnostics]

    assert codes() == ["AMP104"]
    assert codes() == ["AMP104"]  # from the cache
    # Editing the loss module (the trainer's bytes unchanged) changes the trainer's findings.
    (root / "losses.py").write_text(LOSSES.replace("F.binary_cross_entropy(torch.sigmoid(pred), target)", "F.binary_cross_entropy_with_logits(pred, target)"), encoding="utf-8")
    assert codes() == []
    (root / "losses.py").write_text(LOSSES, encoding="utf-8")
    assert codes() == ["AMP104"]


# -- autocast wrappers: project functions that make torch's autocast -------------------------

WRAPPER = (
    "import warnings\nfrom contextlib import contextmanager\n\nimport torch\n\n\n"
    "@contextmanager\ndef torch_autocast(device_type='cuda', **kwargs):\n"
    '    """Silences the deprecation on old torch."""\n'
    "    if NEW_TORCH:\n        with torch.amp.autocast(device_type=device_type, **kwargs):\n            yield\n"
    "    else:\n        with warnings.catch_warnings():\n            with torch.cuda.amp.autocast(**kwargs):\n                yield\n"
)
FP16_LOOP = (
    "from utils import torch_autocast\n\n\ndef train(params, model, optimizer, loader):\n    for x, y in loader:\n"
    "        with torch_autocast(enabled=params.use_fp16):\n            loss = model(x, y)\n"
    "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n"
)


def test_a_context_manager_wrapper_in_another_file_opens_the_autocast(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "utils.py": WRAPPER,
            "train.py": FP16_LOOP,
            "scaled.py": "import torch\n" + FP16_LOOP.replace("loss.backward()", "scaler.scale(loss).backward()")
            + "\nscaler = torch.amp.GradScaler('cuda')\n",
            "off.py": FP16_LOOP.replace("enabled=params.use_fp16", "enabled=False"),
            "cpu.py": FP16_LOOP.replace("enabled=params.use_fp16", "'cpu'"),
            "bf16.py": "import torch\n" + FP16_LOOP.replace("enabled=params.use_fp16", "dtype=torch.bfloat16"),
        },
    )
    ((code, row, message),) = _check(root, "train.py", "AMP105")
    assert (code, row) == ("AMP105", 6)
    assert message.endswith("(the autocast comes from `torch_autocast` at utils.py:8)")
    for name in ("scaled.py", "off.py", "cpu.py", "bf16.py"):
        assert _check(root, name, "AMP105") == [], name
    # The backward is outside the block; moved inside, AMP103 sees the same autocast.
    inside = FP16_LOOP.replace("        optimizer.zero_grad()\n        loss.backward()", "            loss.backward()")
    _project(root, {"inside.py": inside})
    ((code, row, message),) = _check(root, "inside.py", "AMP103")
    assert (code, row) == ("AMP103", 8)
    assert "`torch_autocast` at utils.py:8" in message


def test_a_factory_wrapper_and_its_no_op_branch(tmp_path: Path) -> None:
    # open_clip's spelling: the wrapper returns a partial of the autocast, or `suppress`.
    precision = (
        "from contextlib import suppress\nfrom functools import partial\n\nimport torch\n\n\n"
        "def get_autocast(precision, device_type='cuda'):\n    if precision == 'amp':\n        amp_dtype = torch.float16\n"
        "    elif precision == 'amp_bf16':\n        amp_dtype = torch.bfloat16\n    else:\n        return suppress\n"
        "    return partial(torch.amp.autocast, device_type=device_type, dtype=amp_dtype)\n\n\n"
        "def get_bf16_autocast():\n    return lambda: torch.autocast('cuda', dtype=torch.bfloat16)\n"
    )
    train = (
        "import torch\nfrom training.precision import get_autocast, get_bf16_autocast\n\n\n"
        "def train(args, model, x, optimizer):\n    autocast = get_autocast(args.precision)\n"
        "    with autocast():\n        loss = model(x)\n    loss.backward()\n    optimizer.step()\n"
    )
    bf16 = (
        "import torch\nfrom training.precision import get_bf16_autocast\n\nscaler = torch.amp.GradScaler('cuda')\n\n\n"
        "def train(model, x, optimizer):\n    autocast = get_bf16_autocast()\n"
        "    with autocast():\n        loss = model(x)\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n"
        "    scaler.update()\n"
    )
    root = _project(tmp_path, {"training/__init__.py": "", "training/precision.py": precision, "train.py": train, "bf16.py": bf16})
    # float16 is one of the dtypes it may pick, and nothing scales the loss.
    ((code, row, message),) = _check(root, "train.py", "AMP105")
    assert (code, row) == ("AMP105", 7)
    assert "`get_autocast` at training/precision.py:7" in message
    ((code, row, message),) = _check(root, "bf16.py", "AMP302")
    assert (code, row) == ("AMP302", 4)
    assert "`get_bf16_autocast` at training/precision.py:17" in message
    assert _check(root, "bf16.py", "AMP105") == []


def test_a_wrapper_in_the_same_file_and_a_method_wrapper(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "trainer.py": "import torch\n\n\nclass Trainer:\n    def amp_autocast(self, dtype):\n"
            "        return torch.autocast('cuda', dtype=dtype)\n\n    def step(self, x):\n"
            "        with self.amp_autocast(torch.float16):\n            loss = self.model(x)\n        loss.backward()\n"
            "        self.optimizer.step()\n",
            "script.py": "import torch\n\n\ndef half_autocast():\n    return torch.autocast('cuda', dtype=torch.float16)\n\n\n"
            "def step(model, x, optimizer):\n    with half_autocast():\n        loss = model(x)\n    loss.backward()\n    optimizer.step()\n",
        },
    )
    assert [(code, row) for code, row, _ in _check(root, "trainer.py", "AMP105")] == [("AMP105", 9)]
    assert [(code, row) for code, row, _ in _check(root, "script.py", "AMP105")] == [("AMP105", 9)]


def test_silent_where_the_wrapper_or_its_arguments_are_not_certain(tmp_path: Path) -> None:
    body = "        loss = model(x)\n    loss.backward()\n    optimizer.step()\n"
    root = _project(
        tmp_path,
        {
            "amp.py": "import torch\n\n\ndef build_autocast(cfg):\n    return build_context(cfg)\n\n\n"
            "def half_autocast(**kwargs):\n    return torch.autocast('cuda', **kwargs)\n\n\n"
            "def logged_autocast(dtype):\n    print(dtype)\n    return torch.autocast('cuda', dtype=dtype)\n",
            # Not a wrapper: it returns something else.
            "other.py": "import amp\n\n\ndef step(model, x, cfg):\n    with amp.build_autocast(cfg):\n" + body,
            # A wrapper, called with arguments that cannot be matched: the dtype is unknown.
            "unpacked.py": "import amp\n\n\ndef step(model, x, cfg):\n    with amp.half_autocast(**cfg):\n" + body,
            # Dynamic dispatch breaks the chain.
            "dynamic.py": "import amp\n\n\ndef step(model, x, autocast_name):\n    with getattr(amp, autocast_name)():\n" + body,
            # The dtype passed is not known.
            "unknown.py": "import amp\n\n\ndef step(model, x, dtype):\n    with amp.logged_autocast(dtype):\n" + body,
        },
    )
    for name in ("other.py", "unpacked.py", "dynamic.py", "unknown.py"):
        assert _check(root, name, "AMP105") == [], name
    # Each file names an identifier ending in `autocast`, so the pre-filter lets AMP105 run.
    for name in ("other.py", "unpacked.py", "dynamic.py", "unknown.py"):
        assert "autocast" in (root / name).read_text(encoding="utf-8"), name
    # The same wrapper with a known dtype fires: the silence above is the arguments'.
    _project(root, {"known.py": "import torch\nimport amp\n\n\ndef step(model, x):\n    with amp.logged_autocast(torch.float16):\n" + body})
    assert [(code, row) for code, row, _ in _check(root, "known.py", "AMP105")] == [("AMP105", 6)]


def test_the_cache_follows_the_wrapper(tmp_path: Path) -> None:
    from amplint.engine.runner import run

    root = _project(tmp_path / "project", {"utils.py": WRAPPER, "train.py": FP16_LOOP})
    settings = Settings(project_root=str(root)).with_overrides(select=("AMP105",))
    job = Job(Mode.CHECK, settings, all_rules(), index_roots=(str(root),))
    cache = str(tmp_path / "cache")

    def codes() -> list[str]:
        (report,) = run([str(root / "train.py")], job, jobs=1, cache_dir=cache)
        return [d.code for d in report.diagnostics]

    assert codes() == ["AMP105"]
    assert codes() == ["AMP105"]
    # The wrapper now runs in bfloat16: the trainer's finding goes on the next cached run.
    (root / "utils.py").write_text(WRAPPER.replace("**kwargs):\n            yield", "dtype=torch.bfloat16, **kwargs):\n            yield").replace("torch.cuda.amp.autocast(**kwargs)", "torch.cuda.amp.autocast(dtype=torch.bfloat16, **kwargs)"), encoding="utf-8")
    assert codes() == []


def test_methods_inherited_from_a_base_class_in_another_file(tmp_path: Path) -> None:
    base = (
        "import contextlib\n\nimport torch\n\n\nclass BaseModel(torch.nn.Module):\n"
        "    def maybe_autocast(self, dtype=torch.float16):\n        if self.device != torch.device('cpu'):\n"
        "            return torch.autocast('cuda', dtype=dtype)\n        return contextlib.nullcontext()\n\n"
        "    def optimize(self, loss):\n        loss.backward()\n"
    )
    child = (
        "from base import BaseModel\n\n\nclass Child(BaseModel):\n    def step(self, x):\n"
        "        with self.maybe_autocast():\n            loss = self.net(x)\n            self.optimize(loss)\n"
    )
    root = _project(
        tmp_path,
        {
            "base.py": base,
            "child.py": child,
            # Two levels down, in a package.
            "pkg/__init__.py": "",
            "pkg/grandchild.py": "import torch\nfrom child import Child\n\n\nclass GrandChild(Child):\n    def train_step(self, x):\n"
            "        with self.maybe_autocast(dtype=torch.float16):\n            loss = self.net(x)\n        loss.backward()\n"
            "        self.optimizer.step()\n",
            # The method is overridden: the class's own definition counts, not the base's.
            "override.py": child.replace("class Child(BaseModel):\n", "class Child(BaseModel):\n    def optimize(self, loss):\n        self.pending = loss\n\n"),
            # Several bases: the method resolution order is not followed.
            "mixin.py": child.replace("class Child(BaseModel):", "class Child(Logging, BaseModel):"),
        },
    )
    ((code, row, message),) = _check(root, "child.py", "AMP103")
    assert (code, row) == ("AMP103", 8)
    assert "(base.py:13, via BaseModel.optimize)" in message
    assert "`maybe_autocast` at base.py:7" in message
    ((code, row, message),) = _check(root, "pkg/grandchild.py", "AMP105")
    assert (code, row) == ("AMP105", 7)
    assert _check(root, "override.py", "AMP103") == []
    assert _check(root, "mixin.py", "AMP103") == []


def test_a_dtype_property_inherited_from_a_base_trainer_in_another_file(tmp_path: Path) -> None:
    # efficientvit: the base trainer's `amp_dtype` property picks the dtype by a string;
    # the subclass in another file builds an enabled scaler and autocasts with it.
    base = (
        "import torch\n\n\nclass Trainer:\n    def __init__(self, amp='fp32'):\n        self.amp = amp\n\n"
        "    @property\n    def enable_amp(self):\n        return self.amp != 'fp32'\n\n"
        "    @property\n    def amp_dtype(self):\n        if self.amp == 'fp16':\n            return torch.float16\n"
        "        elif self.amp == 'bf16':\n            return torch.bfloat16\n        else:\n            return torch.float32\n\n"
        "    @property\n    def other_dtype(self):\n        return self.config.dtype\n"
    )
    child = (
        "import torch\nfrom trainer import Trainer\n\n\nclass SAMTrainer(Trainer):\n    def prep(self, amp):\n"
        "        self.amp = amp\n        self.scaler = torch.amp.GradScaler('cuda', enabled=self.enable_amp)\n\n"
        "    def step(self, x):\n        with torch.autocast('cuda', dtype=self.amp_dtype, enabled=self.enable_amp):\n"
        "            loss = self.model(x)\n        self.scaler.scale(loss).backward()\n"
    )
    root = _project(
        tmp_path,
        {
            # The package re-exports its modules' names, as efficientvit's does.
            "trainer/__init__.py": "from .base import *\nfrom .config import RunConfig as Config\n",
            "trainer/base.py": base,
            "trainer/config.py": "class RunConfig:\n    pass\n",
            "sam.py": child,
            "direct.py": child.replace("from trainer import Trainer", "from trainer.base import Trainer"),
            "renamed.py": child.replace("from trainer import Trainer", "from trainer import Config as Trainer"),
            # The subclass sets its own dtype: the base's property is not what runs.
            "own.py": child.replace(
                "class SAMTrainer(Trainer):\n",
                "class SAMTrainer(Trainer):\n    @property\n    def amp_dtype(self):\n        return torch.float16\n\n",
            ),
            # The base's other property is not known statically.
            "unknown.py": child.replace("self.amp_dtype", "self.other_dtype"),
        },
    )
    ((code, row, message),) = _check(root, "sam.py", "AMP302")
    assert (code, row) == ("AMP302", 8)
    assert message.endswith("(`self.amp_dtype` is `Trainer.amp_dtype` of trainer/base.py)")
    assert [(code, row) for code, row, _ in _check(root, "direct.py", "AMP302")] == [("AMP302", 8)]
    # An explicit re-export is followed to its own module, which has no such property.
    assert _check(root, "renamed.py", "AMP302") == []
    assert _check(root, "own.py", "AMP302") == []
    assert _check(root, "unknown.py", "AMP302") == []


def test_a_grad_scaler_built_by_a_project_class_or_function_elsewhere(tmp_path: Path) -> None:
    # VideoMamba: `loss_scaler = NativeScaler()` (a class of utils.py that builds an
    # always-enabled GradScaler) beside a bfloat16 autocast handed to the training loop.
    utils = (
        "import torch\n\n\nclass NativeScalerWithGradNormCount:\n    def __init__(self):\n"
        "        self._scaler = torch.amp.GradScaler('cuda')\n\n    def __call__(self, loss, optimizer):\n"
        "        self._scaler.scale(loss).backward()\n\n\n"
        "def make_scaler():\n    return torch.cuda.amp.GradScaler()\n\n\n"
        "def make_optional_scaler(enabled):\n    return torch.amp.GradScaler('cuda', enabled=enabled)\n"
    )
    main = (
        "import torch\nfrom engine import train_one_epoch\nfrom utils import NativeScalerWithGradNormCount as NativeScaler\n\n\n"
        "def main(args, model):\n    dtype = torch.bfloat16 if args.bf16 else torch.float16\n"
        "    amp_autocast = torch.autocast('cuda', dtype=dtype)\n    loss_scaler = NativeScaler()\n"
        "    train_one_epoch(model, amp_autocast, loss_scaler)\n"
    )
    root = _project(
        tmp_path,
        {
            "utils.py": utils,
            "main.py": main,
            "factory.py": main.replace("from utils import NativeScalerWithGradNormCount as NativeScaler", "import utils").replace(
                "NativeScaler()", "utils.make_scaler()"
            ),
            "optional.py": main.replace("from utils import NativeScalerWithGradNormCount as NativeScaler", "import utils").replace(
                "NativeScaler()", "utils.make_optional_scaler(args.fp16)"
            ),
            "fp16.py": main.replace("torch.bfloat16 if args.bf16 else torch.float16", "torch.float16"),
        },
    )
    ((code, row, message),) = _check(root, "main.py", "AMP302")
    assert (code, row) == ("AMP302", 9)
    assert "`NativeScaler()` builds an enabled GradScaler (`NativeScalerWithGradNormCount` at utils.py:6)" in message
    ((code, row, message),) = _check(root, "factory.py", "AMP302")
    assert (code, row) == ("AMP302", 9)
    assert "`make_scaler` at utils.py:13" in message
    # A maker whose scaler may be disabled, and a float16-only autocast: nothing to say.
    assert _check(root, "optional.py", "AMP302") == []
    assert _check(root, "fp16.py", "AMP302") == []


def test_a_member_read_through_the_class_own_base_does_not_loop(tmp_path: Path) -> None:
    # A subclass member whose value reads an inherited one: building the file's table of
    # members must not follow its own inheritance back into the table (a RecursionError
    # on diffusers' TensorRT pipelines).
    source = (
        "import torch\n\n\nclass Base:\n    dtype = torch.bfloat16\n\n\nclass Child(Base):\n"
        "    def __init__(self):\n        self.half = self.dtype\n        self.scaler = torch.amp.GradScaler('cuda')\n\n"
        "    def step(self, x):\n        with torch.autocast('cuda', dtype=self.dtype):\n            loss = self.model(x)\n"
        "        self.scaler.scale(loss).backward()\n"
    )
    root = _project(tmp_path, {"child.py": source})
    found = _check(root, "child.py", "ALL")
    assert not [code for code, _, _ in found if code == "AMP999"], found
    # The inherited class attribute still gives the autocast its bfloat16.
    assert ("AMP302", 11) in [(code, row) for code, row, _ in found]


def test_amp_enabled_by_a_function_that_returns_false_off_cuda(tmp_path: Path) -> None:
    # YOLO: `amp = check_amp(model)` returns False on CPU and MPS, so the "cuda" autocast
    # and scaler it enables are CUDA-only on purpose.
    general = (
        "import torch\n\n\ndef check_amp(model):\n    device = next(model.parameters()).device\n"
        "    if device.type in ('cpu', 'mps'):\n        return False\n    return amp_allclose(model)\n\n\n"
        "def check_other(model):\n    return amp_allclose(model)\n"
    )
    train = (
        "import torch\nfrom utils.general import check_amp\n\n\ndef train(model, x, device='cpu'):\n    model.to(device)\n"
        "    amp = check_amp(model)\n    scaler = torch.amp.GradScaler('cuda', enabled=amp)\n"
        "    with torch.amp.autocast('cuda', enabled=amp):\n        loss = model(x)\n    scaler.scale(loss).backward()\n"
    )
    root = _project(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/general.py": general,
            "train.py": train,
            "other.py": train.replace("check_amp", "check_other"),
        },
    )
    assert _check(root, "train.py", "AMP201") == []
    assert [(code, row) for code, row, _ in _check(root, "other.py", "AMP201")] == [("AMP201", 8), ("AMP201", 9)]


def test_a_measurement_backward_reached_through_calls_is_not_a_training_step(tmp_path: Path) -> None:
    # YOLO's autobatch: `check_train_batch_size` opens the autocast and calls a profiler
    # whose `y.sum().backward()` sizes batches; nothing trains there.
    torch_utils = (
        "import torch\n\n\ndef profile(model, x, n=3):\n    for _ in range(n):\n        y = model(x)\n"
        "        y.sum().backward()\n\n\ndef train_step(model, x, optimizer):\n    y = model(x)\n"
        "    y.sum().backward()\n    optimizer.step()\n"
    )
    autobatch = (
        "import torch\nfrom utils.torch_utils import profile, train_step\n\n\ndef check_batch_size(model, x):\n"
        "    with torch.autocast('cuda'):\n        return profile(model, x)\n\n\n"
        "def step(model, x, optimizer):\n    with torch.autocast('cuda'):\n        train_step(model, x, optimizer)\n"
    )
    root = _project(tmp_path, {"utils/__init__.py": "", "utils/torch_utils.py": torch_utils, "utils/autobatch.py": autobatch})
    # The profiler is passed over; the step that also steps its optimizer is flagged.
    assert [(code, row) for code, row, _ in _check(root, "utils/autobatch.py", "AMP103")] == [("AMP103", 12)]


def test_a_vendored_apex_amp_exists(tmp_path: Path) -> None:
    # jukebox ships its own 2019 apex, `apex/apex/amp/`, with tests that import it.
    uses = "from apex import amp\n\nmodel, optimizer = amp.initialize(model, optimizer)\n"
    plain = _project(tmp_path / "plain", {"apex/tests/test_amp.py": uses})
    assert [code for code, _, _ in _check(plain, "apex/tests/test_amp.py", "AMP003")] == ["AMP003", "AMP003"]
    vendored = _project(
        tmp_path / "vendored",
        {"apex/apex/__init__.py": "", "apex/apex/amp/__init__.py": "def initialize(m, o): return m, o\n", "apex/tests/test_amp.py": uses},
    )
    assert _check(vendored, "apex/tests/test_amp.py", "AMP003") == []


@pytest.mark.parametrize(("folder", "silent"), [("apex-22.04-dev", True), ("apex_master", True), ("apexlike", True), ("vendor", False)])
def test_a_checkout_of_apex_under_a_versioned_name_provides_apex_amp(tmp_path: Path, folder: str, silent: bool) -> None:
    # SHERL keeps apex's repository as `CLIP-ViL/apex-22.04-dev/` beside the code that
    # imports `apex.amp` (round BK); a folder not named for apex says nothing.
    uses = "from apex import amp\n\nmodel, optimizer = amp.initialize(model, optimizer)\n"
    files = {
        f"CLIP-ViL/{folder}/apex/__init__.py": "",
        f"CLIP-ViL/{folder}/apex/amp/__init__.py": "def initialize(m, o): return m, o\n",
        "CLIP-ViL/src/tasks/vqa.py": uses,
    }
    root = _project(tmp_path, files)
    found = [code for code, _, _ in _check(root, "CLIP-ViL/src/tasks/vqa.py", "AMP003")]
    assert found == ([] if silent else ["AMP003", "AMP003"])


def test_a_device_member_a_base_class_elsewhere_sets_only_to_cuda(tmp_path: Path) -> None:
    # neosr: the base model in another file sets `self.device = torch.device("cuda")` and
    # nothing else; a subclass's "cuda" scaler and autocast are CUDA-only on purpose.
    base = (
        "import torch\n\n\nclass BaseModel:\n    def __init__(self, opt):\n"
        "        self.opt = opt\n        self.device = torch.device({device})\n"
    )
    model = (
        "import torch\nfrom models.base import BaseModel\n\n\nclass ImageModel(BaseModel):\n"
        "    def setup(self):\n        self.net = self.net.to(self.device)\n"
        "        self.scaler = torch.amp.GradScaler('cuda')\n\n"
        "    def step(self, x):\n        with torch.autocast('cuda', dtype=torch.float16):\n"
        "            return self.net(x.to(self.device))\n"
    )
    cuda = _project(tmp_path / "cuda", {"models/__init__.py": "", "models/base.py": base.format(device='"cuda"'), "models/image.py": model})
    assert _check(cuda, "models/image.py", "AMP201") == []
    either = _project(
        tmp_path / "either",
        {
            "models/__init__.py": "",
            "models/base.py": base.format(device='"cuda" if opt.gpu else "cpu"'),
            "models/image.py": model,
        },
    )
    assert [(code, row) for code, row, _ in _check(either, "models/image.py", "AMP201")] == [("AMP201", 8), ("AMP201", 11)]


def test_a_device_member_a_base_class_elsewhere_takes_from_its_constructor(tmp_path: Path) -> None:
    # CellViT: the base trainer stores the device its constructor is given; the experiment
    # code that builds the trainers (elsewhere) decides it. The subclass's file chooses no
    # device of its own: silent. Once it does (`--device` with a "cpu" default), it fires.
    base = "class BaseTrainer:\n    def __init__(self, model, device):\n        self.model = model\n        self.device = device\n"
    trainer = (
        "import torch\nfrom trainers.base import BaseTrainer\n\n\nclass CellTrainer(BaseTrainer):\n"
        "    def step(self, x):\n        with torch.autocast('cuda', dtype=torch.float16):\n"
        "            return self.model(x.to(self.device))\n{extra}"
    )
    files = {"trainers/__init__.py": "", "trainers/base.py": base}
    given = _project(tmp_path / "given", {**files, "trainers/cell.py": trainer.format(extra="")})
    assert _check(given, "trainers/cell.py", "AMP201") == []
    chooses = _project(
        tmp_path / "chooses",
        {**files, "trainers/cell.py": trainer.format(extra="\n\ndef fallback():\n    return torch.device('cpu')\n")},
    )
    assert [(code, row) for code, row, _ in _check(chooses, "trainers/cell.py", "AMP201")] == [("AMP201", 7)]
    # A base class that picks the device itself is no parameter handed in: it fires.
    picks = _project(
        tmp_path / "picks",
        {
            **files,
            "trainers/base.py": base.replace("self.device = device", "self.device = pick_device(model)"),
            "trainers/cell.py": trainer.format(extra=""),
        },
    )
    assert [(code, row) for code, row, _ in _check(picks, "trainers/cell.py", "AMP201")] == [("AMP201", 7)]


def test_a_device_property_a_base_class_elsewhere_reads_from_its_parameters(tmp_path: Path) -> None:
    # openvla's prismatic VLMs: the base class's `device` property returns the device of the
    # model's own parameters, wherever its caller put it. Silent while the subclass's file
    # chooses no device; it fires once the file does, or when the property picks one itself.
    base = (
        "import torch.nn as nn\n\n\nclass VLM(nn.Module):\n    @property\n    def device(self):\n"
        "        return {returned}\n"
    )
    model = (
        "import torch\nfrom models.base import VLM\n\n\nclass PrismaticVLM(VLM):\n"
        "    def generate(self, x):\n        with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "            return self.llm(x.to(self.device))\n{extra}"
    )
    own = "next(self.parameters()).device"
    files = {"models/__init__.py": ""}
    given = _project(tmp_path / "given", {**files, "models/base.py": base.format(returned=own), "models/vlm.py": model.format(extra="")})
    assert _check(given, "models/vlm.py", "AMP201") == []
    submodule = base.format(returned="next(iter(self.llm.parameters())).device")
    assert _check(_project(tmp_path / "sub", {**files, "models/base.py": submodule, "models/vlm.py": model.format(extra="")}), "models/vlm.py", "AMP201") == []
    chooses = _project(
        tmp_path / "chooses",
        {
            **files,
            "models/base.py": base.format(returned=own),
            "models/vlm.py": model.format(extra="\n\ndef fallback():\n    return torch.device('cpu')\n"),
        },
    )
    assert [(code, row) for code, row, _ in _check(chooses, "models/vlm.py", "AMP201")] == [("AMP201", 7)]
    picks = _project(
        tmp_path / "picks",
        {**files, "models/base.py": base.format(returned="pick_device()"), "models/vlm.py": model.format(extra="")},
    )
    assert [(code, row) for code, row, _ in _check(picks, "models/vlm.py", "AMP201")] == [("AMP201", 7)]


def test_a_project_class_whose_construction_needs_cuda(tmp_path: Path) -> None:
    # LGM: the model's renderer makes a `device="cuda"` tensor in its constructor, so the
    # scripts that build the model cannot run without CUDA, whatever their device variable.
    renderer = (
        "import torch\n\n\nclass Renderer:\n    def __init__(self, opt):\n"
        "        self.opt = opt\n        {line}\n"
    )
    models = (
        "import torch.nn as nn\nfrom core.renderer import Renderer\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, opt):\n        super().__init__()\n        self.renderer = Renderer(opt)\n"
    )
    script = (
        "import torch\nfrom core.models import Model\n\nmodel = Model(None)\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = model.to(device)\n\n\n"
        "def process(x):\n    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n        return model(x.to(device))\n"
    )
    inside = (
        "import torch\nfrom core.models import Model\n\n\ndef main(x):\n    model = Model(None)\n"
        "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n        return model.to(device)(x.to(device))\n"
    )
    files = {"core/__init__.py": "", "core/models.py": models, "infer.py": script, "main.py": inside}
    cuda = _project(tmp_path / "cuda", {**files, "core/renderer.py": renderer.format(line='self.bg = torch.ones(3, device="cuda")')})
    assert _check(cuda, "infer.py", "AMP201") == []
    assert _check(cuda, "main.py", "AMP201") == []
    # Only under a branch, after an early return, or nothing CUDA-bound at all: the device
    # variable is a real choice (traiNNer's init_distributed returns before set_device).
    branch = renderer.format(line='if opt.gpu:\n            self.bg = torch.ones(3, device="cuda")')
    early = renderer.format(line='if opt is None:\n            return\n        self.bg = torch.ones(3, device="cuda")')
    for name, line in (("branch", branch), ("early", early), ("plain", renderer.format(line="self.bg = torch.ones(3)"))):
        root = _project(tmp_path / name, {**files, "core/renderer.py": line})
        assert [(code, row) for code, row, _ in _check(root, "infer.py", "AMP201")] == [("AMP201", 10)]
        assert [(code, row) for code, row, _ in _check(root, "main.py", "AMP201")] == [("AMP201", 8)]


def test_a_star_imported_module_that_never_names_the_function_is_not_summarized(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # quip-sharp's lib/utils/__init__.py star-imports a generated 1.6 MB module of Hadamard
    # tables before the module that defines the helper a trainer calls; the tables module
    # only calls `utils.clean()`, which defines nothing. Summarizing it took 40 s.
    import amplint.analysis as analysis

    root = _project(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/utils/__init__.py": "from .tables import *\nfrom .losses import *\n",
            "lib/utils/tables.py": "from lib import utils\n\ndef get_had12():\n    utils.compute_loss\n    return [[1, -1], [-1, 1]]\n",
            "lib/utils/losses.py": LOSSES,
            "lib/train.py": TRAIN.replace("from losses import compute_loss", "from lib import utils").replace(
                "compute_loss(model(x), y)", "utils.compute_loss(model(x), y)"
            ),
        },
    )
    summarized: list[str] = []
    original = analysis.summarize_file

    def spy(path: str, data: bytes) -> object:
        summarized.append(Path(path).name)
        return original(path, data)

    monkeypatch.setattr(analysis, "summarize_file", spy)
    ((code, row, message),) = _check(root, "lib/train.py", "AMP104")
    assert (code, row) == ("AMP104", 6)
    assert "losses.py:5" in message
    assert "tables.py" not in summarized
    assert "losses.py" in summarized
    # A module that does define the name, even by importing it, is still followed.
    (root / "lib/utils/tables.py").write_text("from lib.utils.losses import compute_loss as compute_loss\n", encoding="utf-8")
    summarized.clear()
    assert [c for c, _, _ in _check(root, "lib/train.py", "AMP104")] == ["AMP104"]
    assert "tables.py" in summarized


OLD_TORCH_TRAIN = (
    "import torch\nfrom util.misc import inf\n\n"
    "def train_step(model, x):\n    with torch.cuda.amp.autocast():\n        return model(x).norm(inf)\n"
)


def test_code_that_imports_a_module_torch_dropped_runs_on_an_older_torch(tmp_path: Path) -> None:
    # ssacl and MixMIM copy MAE's `from torch._six import inf`: torch 2.0 dropped torch._six,
    # so that code runs on torch 1.x, where torch.cuda.amp is not deprecated.
    root = _project(
        tmp_path,
        {
            "util/__init__.py": "",
            "util/misc.py": "from torch._six import inf\nimport torch\nscaler = torch.cuda.amp.GradScaler()\n",
            "train.py": OLD_TORCH_TRAIN,
        },
    )
    assert _check(root, "util/misc.py", "AMP001") == []
    assert _check(root, "train.py", "AMP001") == []
    # A guarded import that falls back to the new spelling runs on current torch too.
    (root / "util/misc.py").write_text(
        "try:\n    from torch._six import inf\nexcept ImportError:\n    from torch import inf\n", encoding="utf-8"
    )
    assert [code for code, _, _ in _check(root, "train.py", "AMP001")] == ["AMP001"]
    # A module nobody imports says nothing about this file.
    (root / "util/misc.py").write_text("from torch import inf\n", encoding="utf-8")
    (root / "old.py").write_text("from torch._six import inf\n", encoding="utf-8")
    assert [code for code, _, _ in _check(root, "train.py", "AMP001")] == ["AMP001"]


def test_a_class_whose_constructor_builds_a_cuda_only_object_from_another_file(tmp_path: Path) -> None:
    # PhysicsLM4: the model adapter's __init__ builds lingua's GPUMemoryMonitor("cuda"), whose
    # own __init__ asks torch.cuda for the current device: no adapter exists without CUDA.
    metrics = (
        "import torch\n\n\nclass GPUMemoryMonitor:\n    def __init__(self, device='cuda:0'):\n"
        "        self.device = torch.device(device)\n        self.index = torch.cuda.current_device()\n"
    )
    adapter = (
        "import torch\nfrom lingua.metrics import GPUMemoryMonitor\n\n\nclass Adapter:\n"
        "    def __init__(self, model):\n        self.model = model\n        self.device = next(model.parameters()).device\n"
        "{monitor}"
        "\n    def generate(self, x):\n        with torch.amp.autocast(device_type='cuda', dtype=torch.bfloat16):\n"
        "            return self.model(x.to(self.device))\n"
    )
    files = {"lingua/__init__.py": "", "lingua/metrics.py": metrics}
    cuda = _project(tmp_path / "cuda", {**files, "eval.py": adapter.format(monitor="        self.monitor = GPUMemoryMonitor('cuda')\n")})
    assert _check(cuda, "eval.py", "AMP201") == []
    plain = _project(tmp_path / "plain", {**files, "eval.py": adapter.format(monitor="")})
    assert [(code, row) for code, row, _ in _check(plain, "eval.py", "AMP201")] == [("AMP201", 11)]


PIPELINE_BASE = (
    "import torch\n\n"
    "class InferencePipeline:\n"
    "    def __init__(self, device='cuda'):\n"
    "        self.device = torch.device(device)\n"
    "        print(torch.cuda.current_device())\n"
)
POINTMAP_PIPELINE = (
    "import torch\nfrom pipeline import InferencePipeline\n\n"
    "def camera(device='cpu'):\n    return torch.eye(3, device=device)\n\n"
    "class PointMapPipeline(InferencePipeline):\n"
    "    def __init__(self, *args, depth_model, **kwargs):\n"
    "        self.depth_model = depth_model\n"
    "{super_call}"
    "    def run(self, x):\n"
    "        with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n"
    "            return self.depth_model(x.to(self.device))\n"
)


@pytest.mark.parametrize(
    ("super_call", "reported"),
    [
        # sam-3d-objects (round BM): the subclass's constructor runs its base's, in another
        # file, which asks torch.cuda for the current device: no instance exists without CUDA.
        ("        super().__init__(*args, **kwargs)\n", False),
        # A constructor that never runs the base's proves nothing about CUDA.
        ("        self.device = kwargs['device']\n", True),
    ],
)
def test_a_subclass_whose_constructor_runs_a_base_constructor_that_needs_cuda(
    tmp_path: Path, super_call: str, reported: bool
) -> None:
    root = _project(tmp_path, {"pipeline.py": PIPELINE_BASE, "pointmap.py": POINTMAP_PIPELINE.format(super_call=super_call)})
    assert [code for code, _row, _message in _check(root, "pointmap.py", "AMP201")] == (["AMP201"] if reported else [])
