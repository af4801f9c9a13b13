"""AMP001 beyond its own examples: import bookkeeping, layout, nesting, shims."""

from __future__ import annotations

import ast

import pytest

from amplint.api import check_source, fix_text


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
