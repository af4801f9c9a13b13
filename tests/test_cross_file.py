"""Facts that cross functions and files (issue 16): small projects on disk, checked through
the engine as `amplint check` checks them, so that the project index finds the modules."""

from __future__ import annotations

from pathlib import Path

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
            "fp16.py": "import torch\nimport config\n\ndef step(m, x):\n    with torch.autocast('cuda', dtype=config.HALF):\n"
            "        loss = m(x)\n    loss.backward()\n",
            "unknown.py": "import torch\nimport config\n\ndef step(m, x):\n    with torch.autocast('cuda', dtype=config.UNKNOWN):\n"
            "        loss = m(x)\n    loss.backward()\n",
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
