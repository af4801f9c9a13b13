"""Real torch (CPU wheel) proves that AMP001/AMP002 fixes construct the same objects.

Each snippet is executed as written and as amplint fixes it; the objects it builds must
carry the same settings, the original must warn about the deprecation, and the fixed
code must not.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from amplint.api import fix_text

torch = pytest.importorskip("torch")

DEPRECATION = (FutureWarning, DeprecationWarning)


def _run(source: str) -> tuple[dict[str, Any], list[str]]:
    namespace: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(source, "<snippet>", "exec"), namespace)
    messages = [str(w.message) for w in caught if issubclass(w.category, DEPRECATION)]
    return namespace, messages


def _autocast_state(ctx: Any) -> tuple[Any, ...]:
    return (ctx.device, ctx.fast_dtype, ctx._enabled, ctx._cache_enabled)


def _scaler_state(scaler: Any) -> tuple[Any, ...]:
    # A disabled scaler (always the case for "cuda" on a CPU-only machine) keeps no
    # settings; an enabled one exposes them all through state_dict().
    return (scaler._device, scaler._enabled, tuple(sorted(scaler.state_dict().items())))


AUTOCAST_SNIPPETS = [
    "import torch\nctx = torch.cpu.amp.autocast(False)\n",
    "import torch\nctx = torch.cpu.amp.autocast(True, torch.float16)\n",
    "import torch\nctx = torch.cpu.amp.autocast(True, torch.bfloat16, False)\n",
    "import torch\nctx = torch.cpu.amp.autocast(dtype=torch.float16, cache_enabled=False)\n",
    "from torch.cpu.amp import autocast as ac\nctx = ac(False, torch_dtype) if False else ac(True, None or __import__('torch').float16)\n",
    "import torch\nctx = torch.cuda.amp.autocast(False, torch.bfloat16)\n",
    "import torch.cpu.amp as amp\nctx = amp.autocast(True)\n",
    "import functools\nimport torch\nfactory = functools.partial(torch.cpu.amp.autocast, False, cache_enabled=False)\nctx = factory()\n",
    "import torch\nfactory = torch.cpu.amp.autocast if True else None\nctx = factory(enabled=False)\n",
]


@pytest.mark.parametrize("source", AUTOCAST_SNIPPETS)
def test_fixed_autocast_has_the_same_settings(source: str) -> None:
    fixed = fix_text(source)
    assert fixed != source
    original, old_warnings = _run(source)
    rewritten, new_warnings = _run(fixed)
    assert old_warnings, "the original snippet should use a deprecated API"
    assert new_warnings == [], f"fixed code still warns: {new_warnings}\n{fixed}"
    assert _autocast_state(rewritten["ctx"]) == _autocast_state(original["ctx"])


def test_positional_enabled_is_not_taken_for_a_dtype() -> None:
    # TorchFix's bug: torch.cpu.amp.autocast(True) → torch.amp.autocast("cpu", True)
    # passes True as the dtype, and torch then silently disables autocast.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.cpu.amp.autocast(True)._enabled is True
        assert torch.amp.autocast("cpu", True)._enabled is False
    fixed = fix_text("import torch\nctx = torch.cpu.amp.autocast(True)\n")
    namespace, _ = _run(fixed)
    assert namespace["ctx"]._enabled is True


def test_alias_called_positionally_gets_no_partial_fix() -> None:
    source = (
        "import torch\nfactory = torch.cpu.amp.autocast if True else None\nctx = factory(True)\n"
    )
    fixed = fix_text(source)
    assert fixed == source  # a partial would turn the positional True into the dtype
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import functools

        assert functools.partial(torch.amp.autocast, "cpu")(True)._enabled is False


SCALER_SNIPPETS = [
    "import torch\nscaler = torch.cpu.amp.GradScaler()\n",
    "import torch\nscaler = torch.cpu.amp.GradScaler(128.0, 3.0, 0.25, 10, True)\n",
    "import torch\nscaler = torch.cpu.amp.GradScaler(64.0, 2.5, 0.75, 3)\n",
    "import torch\nscaler = torch.cpu.amp.GradScaler(init_scale=4.0, enabled=False)\n",
    "import torch\nscaler = torch.cuda.amp.GradScaler(512.0, growth_interval=7)\n",
    "from torch.cpu.amp import GradScaler\nscaler = GradScaler(16.0)\n",
]


@pytest.mark.parametrize("source", SCALER_SNIPPETS)
def test_fixed_grad_scaler_has_the_same_settings(source: str) -> None:
    fixed = fix_text(source)
    original, old_warnings = _run(source)
    rewritten, new_warnings = _run(fixed)
    assert old_warnings
    assert new_warnings == [], fixed
    assert _scaler_state(rewritten["scaler"]) == _scaler_state(original["scaler"])


def test_new_grad_scaler_defaults_to_cuda_so_cpu_needs_the_device() -> None:
    # Why the fix must insert "cpu" for torch.cpu.amp.GradScaler.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.amp.GradScaler()._device == "cuda"


def test_fixed_scaler_isinstance_check_still_accepts_the_scaler() -> None:
    source = (
        "import torch\n"
        "scaler = torch.cpu.amp.GradScaler()\n"
        "ok = isinstance(scaler, torch.cpu.amp.GradScaler)\n"
    )
    rewritten, new_warnings = _run(fix_text(source))
    assert rewritten["ok"] is True
    assert new_warnings == []


def test_fixed_custom_fwd_and_bwd_run() -> None:
    source = (
        "import torch\n"
        "from torch.cuda.amp import custom_fwd, custom_bwd\n\n"
        "class Double(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    @custom_fwd\n"
        "    def forward(ctx, x):\n"
        "        return x * 2\n\n"
        "    @staticmethod\n"
        "    @custom_bwd\n"
        "    def backward(ctx, grad):\n"
        "        return grad * 2\n\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "Double.apply(x).sum().backward()\n"
        "grad = x.grad\n"
    )
    fixed = fix_text(source)
    assert "torch.cuda.amp" not in fixed
    original, old_warnings = _run(source)
    rewritten, new_warnings = _run(fixed)
    assert old_warnings and new_warnings == []
    assert torch.equal(rewritten["grad"], original["grad"])


STATE_SNIPPETS = [
    ("import torch\nvalue = torch.get_autocast_cpu_dtype()\n", "value"),
    ("import torch\nvalue = torch.get_autocast_gpu_dtype()\n", "value"),
    ("import torch\nvalue = torch.is_autocast_cpu_enabled()\n", "value"),
    (
        "import torch\ntorch.set_autocast_cpu_dtype(torch.float16)\nvalue = torch.get_autocast_dtype('cpu')\n"
        "torch.set_autocast_cpu_dtype(torch.bfloat16)\n",
        "value",
    ),
    (
        "import torch\ntorch.set_autocast_cpu_enabled(True)\nvalue = torch.is_autocast_enabled('cpu')\n"
        "torch.set_autocast_cpu_enabled(False)\n",
        "value",
    ),
]


@pytest.mark.parametrize(("source", "name"), STATE_SNIPPETS)
def test_fixed_autocast_state_calls_are_equivalent(source: str, name: str) -> None:
    fixed = fix_text(source)
    assert fixed != source
    original, old_warnings = _run(source)
    rewritten, new_warnings = _run(fixed)
    assert old_warnings and new_warnings == []
    assert rewritten[name] == original[name]
