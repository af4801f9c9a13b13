from __future__ import annotations

import libcst as cst

from amplint.analysis.torch_api import (
    DEPRECATED_SINCE,
    DEPRECATED_STATE_FUNCTIONS,
    STATE_REPLACEMENTS,
)
from amplint.diagnostics import Applicability
from amplint.fixes.calls import CallEdits
from amplint.rules.base import AnalysisRule, Invalid


def is_state_replacement(name: str) -> bool:
    return name in STATE_REPLACEMENTS


class DeprecatedAutocastState(AnalysisRule, code="AMP002", name="deprecated-autocast-state", summary="Deprecated autocast state function", fix=Applicability.SAFE):
    """## What it does
    Flags calls of the device-specific autocast state functions that PyTorch 2.4
    deprecated: `torch.get_autocast_gpu_dtype()`, `torch.get_autocast_cpu_dtype()`,
    `torch.set_autocast_gpu_dtype(d)`, `torch.set_autocast_cpu_dtype(d)`,
    `torch.is_autocast_cpu_enabled()`, `torch.set_autocast_cpu_enabled(e)`, and their
    `ipu`/`xla` variants.

    ## Why is this bad?
    Each call emits a deprecation warning, and the functions will be removed. The
    replacements take the device type as their first argument, so one code path serves
    every device.

    Not flagged: `torch.is_autocast_enabled()` / `torch.set_autocast_enabled(e)` without
    a device (not deprecated), `torch.is_autocast_cache_enabled()`, assignments to these
    names (monkeypatching), and compatibility fallbacks (an `except` clause whose `try`
    uses the replacement, or an `if`/`else` branch whose sibling does).

    ## Example
    ```python
    import torch

    dtype = torch.get_autocast_gpu_dtype()
    torch.set_autocast_cpu_enabled(True)
    ```

    ## Use instead
    ```python
    import torch

    dtype = torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cpu", True)
    ```

    ## Fix safety
    Safe: the replacement is the exact function the deprecated one forwards to.
    """

    triggers = frozenset(old.removeprefix("torch.") for old in DEPRECATED_STATE_FUNCTIONS)

    VALID = (
        "import torch\nenabled = torch.is_autocast_enabled()\n",
        "import torch\ntorch.set_autocast_enabled(True)\ncache = torch.is_autocast_cache_enabled()\n",
        "import torch\ndtype = torch.get_autocast_dtype('cuda')\n",
        "import torch\ntorch.get_autocast_gpu_dtype = lambda: torch.float16\n",
        # A project function with the same name is not torch's.
        "def get_autocast_gpu_dtype():\n    return None\n\nget_autocast_gpu_dtype()\n",
        (
            "import torch\n"
            "if hasattr(torch, 'get_autocast_dtype'):\n"
            "    dtype = torch.get_autocast_dtype('cuda')\n"
            "else:\n"
            "    dtype = torch.get_autocast_gpu_dtype()\n"
        ),
        (
            "import torch\n"
            "try:\n"
            "    dtype = torch.get_autocast_dtype('cpu')\n"
            "except AttributeError:\n"
            "    dtype = torch.get_autocast_cpu_dtype()\n"
        ),
        "import torch\n# torch.get_autocast_gpu_dtype() in a comment\ns = 'torch.get_autocast_gpu_dtype()'\n",
    )
    INVALID = (
        # OLMo's model.py: branches chosen by device are not compatibility fallbacks.
        Invalid(
            (
                "import torch\nif t.device.type == 'cuda':\n    dt = torch.get_autocast_gpu_dtype()\n"
                "elif t.device.type == 'mps':\n    dt = torch.get_autocast_dtype('mps')\n"
            ),
            fixed=(
                "import torch\nif t.device.type == 'cuda':\n    dt = torch.get_autocast_dtype(\"cuda\")\n"
                "elif t.device.type == 'mps':\n    dt = torch.get_autocast_dtype('mps')\n"
            ),
            line=3,
            column=10,
            message="use `torch.get_autocast_dtype(\"cuda\")`",
        ),
        Invalid(
            "import torch\ndtype = torch.get_autocast_gpu_dtype()\n",
            fixed='import torch\ndtype = torch.get_autocast_dtype("cuda")\n',
            line=2,
            column=9,
            message='use `torch.get_autocast_dtype("cuda")`',
        ),
        Invalid(
            "import torch as th\nth.set_autocast_cpu_dtype(th.bfloat16)\n",
            fixed='import torch as th\nth.set_autocast_dtype("cpu", th.bfloat16)\n',
            line=2,
            column=1,
            message='use `torch.set_autocast_dtype("cpu", ...)`',
        ),
        Invalid(
            "import torch\nif torch.is_autocast_cpu_enabled():\n    torch.set_autocast_cpu_enabled(False)\n",
            fixed=(
                'import torch\nif torch.is_autocast_enabled("cpu"):\n'
                '    torch.set_autocast_enabled("cpu", False)\n'
            ),
            count=2,
            line=2,
            column=4,
            message='use `torch.is_autocast_enabled("cpu")`',
        ),
        Invalid(
            "from torch import get_autocast_xla_dtype\nd = get_autocast_xla_dtype()\n",
            count=1,  # the function was imported by name: no fix can keep that import meaningful
            line=2,
            column=5,
            message='use `torch.get_autocast_dtype("xla")`',
        ),
        Invalid(
            "import torch\ntorch.set_autocast_gpu_dtype(dtype=torch.float16)\n",
            fixed='import torch\ntorch.set_autocast_dtype("cuda", dtype=torch.float16)\n',
            line=2,
            column=1,
            message='use `torch.set_autocast_dtype("cuda", ...)`',
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.context.project.torch_has(DEPRECATED_SINCE):
            return  # the device-taking replacements arrived with the deprecation, in 2.4
        qualified = self.qualified_name(node.func)
        if qualified not in DEPRECATED_STATE_FUNCTIONS:
            return
        if self.context.analysis.compat.in_fallback(node, is_state_replacement):
            return
        new_name, device = DEPRECATED_STATE_FUNCTIONS[qualified]
        arguments = f'"{device}", ...' if new_name.startswith("set_") else f'"{device}"'
        message = f"`{qualified}()` is deprecated; use `torch.{new_name}({arguments})`"
        fix = None
        if isinstance(node.func, cst.Attribute):
            # Only the name and the new first argument change: the call keeps its layout.
            editor = CallEdits(self.context, node)
            editor.replace_node(node.func.attr, new_name)
            editor.add(0, f'"{device}"')
            edit = editor.edit()
            if edit is not None:
                fix = self.make_fix(f"Replace with `torch.{new_name}({arguments})`", [edit])
        self.report(node, message, fix=fix)
