"""AMP001 deprecated-amp-namespace: its examples, import bookkeeping, layout,
nesting and shims, and real torch (CPU) proving that its fixes construct the same objects:
the original snippet warns about the deprecation, the fixed one does not."""

from __future__ import annotations

import ast
import warnings
from types import ModuleType
from typing import Any

import pytest

from amplint.api import check_source, fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp001_deprecated_amp_namespace import DeprecatedAmpNamespace
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)
from rules.snippets import run_snippet

RULE = DeprecatedAmpNamespace


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


# -- import bookkeeping, layout, nesting, shims ----------------------------------------


def _fix(source: str) -> str:
    fixed = fix_text(source, select=["AMP001"])
    ast.parse(fixed)
    assert fix_text(fixed, select=["AMP001"]) == fixed, "fix is not idempotent"
    return fixed


def _codes(source: str) -> list[tuple[int, int]]:
    return [(d.location.row, d.location.column) for d in check_source(source, select=["AMP001"])]


def test_crlf_line_endings_are_kept_including_the_added_import() -> None:
    source = "from torch.cuda.amp import autocast\r\n\r\nwith autocast():\r\n    pass\r\n"
    assert _fix(source) == 'import torch\r\n\r\nwith torch.amp.autocast("cuda"):\r\n    pass\r\n'


def test_a_safe_fix_keeps_the_module_import_a_value_use_with_an_unsafe_fix_still_needs() -> None:
    # CVlization's torch_em_trainer (round BK): `amp.autocast` passed as a value has only an
    # unsafe fix, so safe fixing must leave `import torch.cuda.amp as amp` in place.
    source = (
        "import torch.cuda.amp as amp\n\n\nclass Trainer:\n    def __init__(self, mixed):\n"
        "        self.scaler = amp.GradScaler() if mixed else None\n\n"
        "    def train(self, progress):\n        return self._impl(progress, amp.autocast)\n"
    )
    fixed = _fix(source)
    assert fixed == (
        "import torch\nimport torch.cuda.amp as amp\n\n\nclass Trainer:\n    def __init__(self, mixed):\n"
        '        self.scaler = torch.amp.GradScaler("cuda") if mixed else None\n\n'
        "    def train(self, progress):\n        return self._impl(progress, amp.autocast)\n"
    )
    unsafe = fix_text(source, select=["AMP001"], unsafe_fixes=True)
    assert "functools.partial(torch.amp.autocast, \"cuda\")" in unsafe and check_source(unsafe, select=["AMP001"]) == []


def test_unfixable_use_keeps_its_name_in_the_import() -> None:
    source = (
        "from torch.cuda.amp import autocast, GradScaler\n"
        "scaler = GradScaler(*scaler_args)\n"
        "with autocast(*autocast_args):\n    pass\n"
    )
    assert _fix(source) == (
        "import torch\n"
        "from torch.cuda.amp import autocast\n"
        'scaler = torch.amp.GradScaler("cuda", *scaler_args)\n'
        "with autocast(*autocast_args):\n    pass\n"
    )


def test_nested_deprecated_uses_converge_over_passes() -> None:
    source = (
        "import torch\n"
        "with torch.cuda.amp.autocast(enabled=isinstance(s, torch.cuda.amp.GradScaler)):\n    pass\n"
    )
    assert _fix(source) == (
        "import torch\n"
        'with torch.amp.autocast("cuda", enabled=isinstance(s, torch.amp.GradScaler)):\n    pass\n'
    )


def test_several_fixes_on_one_line_all_apply() -> None:
    source = "import torch\na, b = torch.cuda.amp.GradScaler(), torch.cpu.amp.GradScaler(enabled=False)\n"
    assert _fix(source) == (
        'import torch\na, b = torch.amp.GradScaler("cuda"), torch.amp.GradScaler("cpu", enabled=False)\n'
    )


def test_import_inside_a_function() -> None:
    source = (
        "import torch\n\n"
        "def train(model):\n"
        "    from torch.cuda.amp import autocast\n"
        "    with autocast(dtype=torch.bfloat16):\n"
        "        return model()\n"
    )
    assert _fix(source) == (
        "import torch\n\n"
        "def train(model):\n"
        '    with torch.amp.autocast("cuda", dtype=torch.bfloat16):\n'
        "        return model()\n"
    )


def test_sole_import_of_a_block_becomes_pass() -> None:
    source = (
        "import torch\nif True:\n    from torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    )
    assert (
        _fix(source) == 'import torch\nif True:\n    pass\nscaler = torch.amp.GradScaler("cuda")\n'
    )


def test_module_alias_import_with_other_names_keeps_the_others() -> None:
    source = "import os, torch.cuda.amp as amp\n\nwith amp.autocast():\n    pass\n"
    assert _fix(source) == 'import torch\nimport os\n\nwith torch.amp.autocast("cuda"):\n    pass\n'


def test_module_alias_kept_while_a_use_is_not_fixable() -> None:
    source = "import torch.cuda.amp as amp\n\nf = amp.autocast_mode._cast\nwith amp.autocast():\n    pass\n"
    assert _fix(source) == (
        "import torch\nimport torch.cuda.amp as amp\n\n"
        'f = amp.autocast_mode._cast\nwith torch.amp.autocast("cuda"):\n    pass\n'
    )


def test_multiline_call_keeps_its_layout_and_comments() -> None:
    source = (
        "import torch\n"
        "scaler = torch.cuda.amp.GradScaler(\n"
        "    init_scale=2.0**14,  # start low\n"
        "    enabled=use_amp,\n"
        ")\n"
    )
    assert _fix(source) == (
        "import torch\n"
        "scaler = torch.amp.GradScaler(\n"
        '    "cuda", init_scale=2.0**14,  # start low\n'
        "    enabled=use_amp,\n"
        ")\n"
    )


@pytest.mark.parametrize(
    "source",
    [
        # The shim pattern: try the new API, fall back to the old one.
        "try:\n    from torch.amp import GradScaler\nexcept ImportError:\n    from torch.cuda.amp import GradScaler\n",
        # Version-gated branches.
        (
            "import torch\n"
            "if TORCH_NEW:\n    ctx = torch.amp.autocast('cuda')\n"
            "elif OTHER:\n    ctx = None\n"
            "else:\n    ctx = torch.cuda.amp.autocast()\n"
        ),
        "import torch\nctx = torch.amp.autocast('cuda') if new else torch.cuda.amp.autocast()\n",
        # Names bound on several paths are not resolved.
        (
            "try:\n    from apex.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\n"
            "with autocast():\n    pass\n"
        ),
    ],
)
def test_compatibility_fallbacks_and_ambiguous_names_are_silent(source: str) -> None:
    found = check_source(source, select=["AMP001"])
    # Only an unguarded deprecated import may fire; no use is resolved or fixed.
    assert all("import" in d.message or "deprecated; use `torch.amp`" in d.message for d in found)
    assert not any("(...)" in d.message for d in found)


def test_try_body_without_the_replacement_is_not_a_shim() -> None:
    source = "import torch\ntry:\n    import apex\nexcept ImportError:\n    scaler = torch.cuda.amp.GradScaler()\n"
    assert _codes(source) == [(5, 14)]


def test_diagnostic_positions_are_one_based_and_at_the_expression_start() -> None:
    source = "import torch\nx = 1; s = torch.cuda.amp.GradScaler()\n"
    assert _codes(source) == [(2, 12)]


def test_torch_bound_to_something_else_gets_no_fix_but_is_reported() -> None:
    source = "import torch.cuda.amp as amp\ntorch = None\nwith amp.autocast():\n    pass\n"
    assert _codes(source) == [(3, 6)]
    assert fix_text(source, select=["AMP001"]) == source


# -- real torch: the fixed code builds the same objects ---------------------------------


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
@pytest.mark.usefixtures("torch")
def test_fixed_autocast_has_the_same_settings(source: str) -> None:
    fixed = fix_text(source)
    assert fixed != source
    original, old_warnings = run_snippet(source)
    rewritten, new_warnings = run_snippet(fixed)
    assert old_warnings, "the original snippet should use a deprecated API"
    assert new_warnings == [], f"fixed code still warns: {new_warnings}\n{fixed}"
    assert _autocast_state(rewritten["ctx"]) == _autocast_state(original["ctx"])


def test_positional_enabled_is_not_taken_for_a_dtype(torch: ModuleType) -> None:
    # TorchFix's bug: torch.cpu.amp.autocast(True) → torch.amp.autocast("cpu", True)
    # passes True as the dtype, and torch then silently disables autocast.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.cpu.amp.autocast(True)._enabled is True
        assert torch.amp.autocast("cpu", True)._enabled is False
    fixed = fix_text("import torch\nctx = torch.cpu.amp.autocast(True)\n")
    namespace, _ = run_snippet(fixed)
    assert namespace["ctx"]._enabled is True


def test_alias_called_positionally_gets_no_partial_fix(torch: ModuleType) -> None:
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
@pytest.mark.usefixtures("torch")
def test_fixed_grad_scaler_has_the_same_settings(source: str) -> None:
    fixed = fix_text(source)
    original, old_warnings = run_snippet(source)
    rewritten, new_warnings = run_snippet(fixed)
    assert old_warnings
    assert new_warnings == [], fixed
    assert _scaler_state(rewritten["scaler"]) == _scaler_state(original["scaler"])


def test_new_grad_scaler_defaults_to_cuda_so_cpu_needs_the_device(torch: ModuleType) -> None:
    # Why the fix must insert "cpu" for torch.cpu.amp.GradScaler.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.amp.GradScaler()._device == "cuda"


@pytest.mark.usefixtures("torch")
def test_fixed_scaler_isinstance_check_still_accepts_the_scaler() -> None:
    source = (
        "import torch\n"
        "scaler = torch.cpu.amp.GradScaler()\n"
        "ok = isinstance(scaler, torch.cpu.amp.GradScaler)\n"
    )
    rewritten, new_warnings = run_snippet(fix_text(source))
    assert rewritten["ok"] is True
    assert new_warnings == []


def test_fixed_custom_fwd_and_bwd_run(torch: ModuleType) -> None:
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
    original, old_warnings = run_snippet(source)
    rewritten, new_warnings = run_snippet(fixed)
    assert old_warnings and new_warnings == []
    assert torch.equal(rewritten["grad"], original["grad"])


def test_a_string_where_enabled_or_init_scale_goes_is_reported_without_a_fix(torch: ModuleType) -> None:
    # Intro_Deep_Learning (round BI): `from torch.cuda.amp import autocast, GradScaler`, then
    # `autocast("cuda")` and `GradScaler("cuda")`. The string lands in `enabled` and
    # `init_scale`, which raise once used (shown here on the CPU device).
    with pytest.raises(TypeError, match="must be bool"), torch.amp.autocast("cpu", enabled="cuda"):
        pass
    with pytest.raises(TypeError):
        torch.amp.GradScaler("cpu", "cuda").scale(torch.ones(1, requires_grad=True))
    source = 'import torch\nfrom torch.cuda.amp import autocast, GradScaler\nscaler = GradScaler("cuda")\nwith autocast("cuda"):\n    pass\n'
    found = {d.location.row: d for d in check_source(source, "train.py", select=["AMP001"])}
    assert "its first argument is `init_scale` here" in found[3].message and found[3].fix is None
    assert "its first argument is `enabled` here" in found[4].message and found[4].fix is None
    # Keyword or boolean first arguments keep their fix.
    assert fix_text("import torch\nwith torch.cuda.amp.autocast(True):\n    pass\n", select=["AMP001"]) == (
        'import torch\nwith torch.amp.autocast("cuda", enabled=True):\n    pass\n'
    )
