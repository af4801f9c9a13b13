"""Fixes keep the layout their input was written in (issue 13).

For every fix form of every rule that has fixes, the input is written in several
layouts (one line, hanging indent, aligned with the open bracket, nested inside
`if`/`for`/`with`/`class`/`def`, comments, trailing commas, tabs) and the fixed text,
written by hand here, keeps that layout. Every case also runs with CRLF line endings.
The fixed text must parse, and fixing it again must change nothing. Where a form
cannot keep a layout it offers no fix for it (``fixed=None``), never a broken one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from amplint.api import check_source, fix_source_text


@dataclass(frozen=True)
class Case:
    form: str  # "AMP001-scaler-call": the rule and the form of its fix
    layout: str
    source: str
    fixed: str | None  # None: the rule fires, and no fix is offered for this layout

    @property
    def code(self) -> str:
        return self.form.split("-")[0]


def pad(prefix: str) -> str:
    """The indentation that aligns a continuation line with the end of ``prefix``."""
    return " " * len(prefix)


def indent(text: str, by: str = "    ") -> str:
    return "".join(by + line if line.strip() else line for line in text.splitlines(keepends=True))


# Blocks a statement list can be nested in; the statements keep their meaning in each.
WRAPPERS = {
    "in-if": "if ready:\n",
    "in-for": "for step in range(3):\n",
    "in-with": "with lock:\n",
    "in-class": "class Trainer:\n",
    "in-def": "def run():\n",
}


def nested(form: str, header: str, body: str, fixed_header: str, fixed_body: str) -> Iterator[Case]:
    """``body`` (and its fixed form) nested one level inside each kind of block."""
    for name, opening in WRAPPERS.items():
        yield Case(form, name, header + opening + indent(body), fixed_header + opening + indent(fixed_body))


CASES: list[Case] = []


def add(form: str, layout: str, source: str, fixed: str | None) -> None:
    CASES.append(Case(form, layout, source, fixed))


# -- AMP001: deprecated torch.cuda.amp --------------------------------------------------------

TORCH = "import torch\n\n"

add(
    "AMP001-autocast-call",
    "one-line",
    TORCH + "with torch.cuda.amp.autocast(True, torch.bfloat16):\n    pass\n",
    TORCH + 'with torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16):\n    pass\n',
)
AUTOCAST_HANGING = "with torch.cuda.amp.autocast(\n    True,\n    torch.bfloat16,\n):\n    pass\n"
AUTOCAST_HANGING_FIXED = 'with torch.amp.autocast(\n    "cuda", enabled=True,\n    dtype=torch.bfloat16,\n):\n    pass\n'
add("AMP001-autocast-call", "hanging", TORCH + AUTOCAST_HANGING, TORCH + AUTOCAST_HANGING_FIXED)
add(
    "AMP001-autocast-call",
    "aligned",
    TORCH + "with torch.cuda.amp.autocast(True,\n" + pad("with torch.cuda.amp.autocast(") + "torch.bfloat16):\n    pass\n",
    TORCH
    + 'with torch.amp.autocast("cuda", enabled=True,\n'
    + pad("with torch.amp.autocast(")
    + "dtype=torch.bfloat16):\n    pass\n",
)
add(
    "AMP001-autocast-call",
    "comments",
    TORCH
    + "with torch.cuda.amp.autocast(  # mixed precision\n"
    + "    True,  # on\n"
    + "    # the dtype\n"
    + "    torch.bfloat16,\n"
    + "):  # block\n    pass\n",
    TORCH
    + "with torch.amp.autocast(  # mixed precision\n"
    + '    "cuda", enabled=True,  # on\n'
    + "    # the dtype\n"
    + "    dtype=torch.bfloat16,\n"
    + "):  # block\n    pass\n",
)
add(
    "AMP001-autocast-call",
    "trailing-comma",
    TORCH + "with torch.cuda.amp.autocast(enabled=True,):\n    pass\n",
    TORCH + 'with torch.amp.autocast("cuda", enabled=True,):\n    pass\n',
)
add(
    "AMP001-autocast-call",
    "tabs",
    TORCH + "def run():\n\twith torch.cuda.amp.autocast(\n\t\tTrue,\n\t):\n\t\tpass\n",
    TORCH + 'def run():\n\twith torch.amp.autocast(\n\t\t"cuda", enabled=True,\n\t):\n\t\tpass\n',
)
CASES.extend(nested("AMP001-autocast-call", TORCH, AUTOCAST_HANGING, TORCH, AUTOCAST_HANGING_FIXED))

add(
    "AMP001-scaler-call",
    "one-line",
    TORCH + "scaler = torch.cuda.amp.GradScaler(init_scale=1, growth_interval=1)\n",
    TORCH + 'scaler = torch.amp.GradScaler("cuda", init_scale=1, growth_interval=1)\n',
)
SCALER_HANGING = "scaler = torch.cuda.amp.GradScaler(\n    init_scale=1,\n    growth_interval=1,\n)\n"
SCALER_HANGING_FIXED = 'scaler = torch.amp.GradScaler(\n    "cuda", init_scale=1,\n    growth_interval=1,\n)\n'
add("AMP001-scaler-call", "hanging", TORCH + SCALER_HANGING, TORCH + SCALER_HANGING_FIXED)
add(
    "AMP001-scaler-call",
    "aligned",
    TORCH + "scaler = torch.cuda.amp.GradScaler(init_scale=1,\n" + pad("scaler = torch.cuda.amp.GradScaler(") + "growth_interval=1)\n",
    TORCH + 'scaler = torch.amp.GradScaler("cuda", init_scale=1,\n' + pad("scaler = torch.amp.GradScaler(") + "growth_interval=1)\n",
)
add(
    "AMP001-scaler-call",
    "aligned-with-inner-bracket",
    TORCH
    + "scaler = torch.cuda.amp.GradScaler(init_scale=min(2.0**16,\n"
    + pad("scaler = torch.cuda.amp.GradScaler(init_scale=min(")
    + "limit),\n"
    + pad("scaler = torch.cuda.amp.GradScaler(")
    + "enabled=use_amp)\n",
    TORCH
    + 'scaler = torch.amp.GradScaler("cuda", init_scale=min(2.0**16,\n'
    + pad('scaler = torch.amp.GradScaler("cuda", init_scale=min(')
    + "limit),\n"
    + pad("scaler = torch.amp.GradScaler(")
    + "enabled=use_amp)\n",
)
add(
    "AMP001-scaler-call",
    "comments",
    TORCH
    + "scaler = torch.cuda.amp.GradScaler(  # the scaler\n"
    + "    init_scale=1,  # start small\n"
    + "    # and grow fast\n"
    + "    growth_interval=1,\n"
    + ")  # done\n",
    TORCH
    + "scaler = torch.amp.GradScaler(  # the scaler\n"
    + '    "cuda", init_scale=1,  # start small\n'
    + "    # and grow fast\n"
    + "    growth_interval=1,\n"
    + ")  # done\n",
)
add(
    "AMP001-scaler-call",
    "no-arguments",
    TORCH + "scaler = torch.cuda.amp.GradScaler()  # fp16\n",
    TORCH + 'scaler = torch.amp.GradScaler("cuda")  # fp16\n',
)
add(
    # The report of issue 13: a method of a class, continuation lines deeper than the call.
    "AMP001-scaler-call",
    "method-of-class",
    TORCH
    + "class Trainer:\n"
    + "    def __init__(self):\n"
    + "        self.scaler = torch.cuda.amp.GradScaler(\n"
    + "            init_scale=1,\n"
    + "            growth_interval=1,\n"
    + "        )\n",
    TORCH
    + "class Trainer:\n"
    + "    def __init__(self):\n"
    + "        self.scaler = torch.amp.GradScaler(\n"
    + '            "cuda", init_scale=1,\n'
    + "            growth_interval=1,\n"
    + "        )\n",
)
add(
    "AMP001-scaler-call",
    "tabs",
    TORCH
    + "class Trainer:\n"
    + "\tdef __init__(self):\n"
    + "\t\tself.scaler = torch.cuda.amp.GradScaler(\n"
    + "\t\t\tinit_scale=1,\n"
    + "\t\t)\n",
    TORCH
    + "class Trainer:\n"
    + "\tdef __init__(self):\n"
    + "\t\tself.scaler = torch.amp.GradScaler(\n"
    + '\t\t\t"cuda", init_scale=1,\n'
    + "\t\t)\n",
)
add(
    "AMP001-scaler-call",
    "tabs-then-aligned",
    TORCH
    + "def run():\n"
    + "\tscaler = torch.cuda.amp.GradScaler(init_scale=1,\n"
    + "\t"
    + pad("scaler = torch.cuda.amp.GradScaler(")
    + "growth_interval=1)\n",
    TORCH
    + "def run():\n"
    + '\tscaler = torch.amp.GradScaler("cuda", init_scale=1,\n'
    + "\t"
    + pad("scaler = torch.amp.GradScaler(")
    + "growth_interval=1)\n",
)
CASES.extend(nested("AMP001-scaler-call", TORCH, SCALER_HANGING, TORCH, SCALER_HANGING_FIXED))

add(
    "AMP001-custom-fwd-call",
    "one-line",
    TORCH + "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\ndef forward(ctx, x):\n    return x\n",
    TORCH + '@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\ndef forward(ctx, x):\n    return x\n',
)
add(
    "AMP001-custom-fwd-call",
    "hanging",
    TORCH + "@torch.cuda.amp.custom_fwd(\n    cast_inputs=torch.float32,\n)\ndef forward(ctx, x):\n    return x\n",
    TORCH + '@torch.amp.custom_fwd(\n    device_type="cuda", cast_inputs=torch.float32,\n)\ndef forward(ctx, x):\n    return x\n',
)
add(
    "AMP001-custom-fwd-call",
    "aligned",
    TORCH
    + "forward = torch.cuda.amp.custom_fwd(forward,\n"
    + pad("forward = torch.cuda.amp.custom_fwd(")
    + "cast_inputs=torch.float32)\n",
    TORCH
    + "forward = torch.amp.custom_fwd(forward,\n"
    + pad("forward = torch.amp.custom_fwd(")
    + 'device_type="cuda", cast_inputs=torch.float32)\n',
)
add(
    "AMP001-custom-fwd-call",
    "one-per-line",
    TORCH + "forward = torch.cuda.amp.custom_fwd(\n    forward,\n    cast_inputs=torch.float32,\n)\n",
    TORCH + 'forward = torch.amp.custom_fwd(\n    forward,\n    device_type="cuda",\n    cast_inputs=torch.float32,\n)\n',
)
add(
    "AMP001-custom-fwd-call",
    "one-per-line-appended",
    TORCH + "forward = torch.cuda.amp.custom_fwd(\n    forward,  # the function\n)\n",
    TORCH + 'forward = torch.amp.custom_fwd(\n    forward,  # the function\n    device_type="cuda",\n)\n',
)
add(
    "AMP001-custom-fwd-call",
    "one-per-line-appended-no-trailing-comma",
    TORCH + "forward = torch.cuda.amp.custom_fwd(\n    forward\n)\n",
    TORCH + 'forward = torch.amp.custom_fwd(\n    forward,\n    device_type="cuda"\n)\n',
)

DECORATED = "class Fn(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_fwd  # fp16 in\n    def forward(ctx, x):\n        return x\n"
DECORATED_FIXED = (
    "class Fn(torch.autograd.Function):\n    @staticmethod\n"
    '    @torch.amp.custom_fwd(device_type="cuda")  # fp16 in\n    def forward(ctx, x):\n        return x\n'
)
add("AMP001-decorator", "comment", TORCH + DECORATED, TORCH + DECORATED_FIXED)
add(
    "AMP001-decorator",
    "tabs",
    TORCH + "class Fn(torch.autograd.Function):\n\t@staticmethod\n\t@torch.cuda.amp.custom_bwd\n\tdef backward(ctx, g):\n\t\treturn g\n",
    TORCH
    + 'class Fn(torch.autograd.Function):\n\t@staticmethod\n\t@torch.amp.custom_bwd(device_type="cuda")\n'
    + "\tdef backward(ctx, g):\n\t\treturn g\n",
)
CASES.extend(nested("AMP001-decorator", TORCH, DECORATED, TORCH, DECORATED_FIXED))

VALUE_HEADER = "import contextlib\nimport torch\n\n"
VALUE_FIXED_HEADER = "import contextlib\nimport functools\nimport torch\n\n"
add(
    "AMP001-value",
    "one-line",
    VALUE_HEADER + "ctx = torch.cuda.amp.autocast if use_amp else contextlib.nullcontext\n",
    VALUE_FIXED_HEADER + 'ctx = functools.partial(torch.amp.autocast, "cuda") if use_amp else contextlib.nullcontext\n',
)
VALUE_HANGING = "ctx = (\n    torch.cuda.amp.autocast  # fp16\n    if use_amp\n    else contextlib.nullcontext\n)\n"
VALUE_HANGING_FIXED = (
    'ctx = (\n    functools.partial(torch.amp.autocast, "cuda")  # fp16\n    if use_amp\n    else contextlib.nullcontext\n)\n'
)
add("AMP001-value", "hanging", VALUE_HEADER + VALUE_HANGING, VALUE_FIXED_HEADER + VALUE_HANGING_FIXED)
CASES.extend(nested("AMP001-value", VALUE_HEADER, VALUE_HANGING, VALUE_FIXED_HEADER, VALUE_HANGING_FIXED))

PARTIAL_HEADER = "import functools\nimport torch\n\n"
add(
    "AMP001-partial",
    "one-line",
    PARTIAL_HEADER + "ctx = functools.partial(torch.cuda.amp.autocast, True, dtype=torch.bfloat16)\n",
    PARTIAL_HEADER + 'ctx = functools.partial(torch.amp.autocast, "cuda", enabled=True, dtype=torch.bfloat16)\n',
)
add(
    "AMP001-partial",
    "one-per-line",
    PARTIAL_HEADER + "ctx = functools.partial(\n    torch.cuda.amp.autocast,\n    True,\n    dtype=torch.bfloat16,\n)\n",
    PARTIAL_HEADER
    + 'ctx = functools.partial(\n    torch.amp.autocast,\n    "cuda",\n    enabled=True,\n    dtype=torch.bfloat16,\n)\n',
)
add(
    "AMP001-partial",
    "aligned",
    PARTIAL_HEADER + "ctx = functools.partial(torch.cuda.amp.autocast,\n" + pad("ctx = functools.partial(") + "True)\n",
    PARTIAL_HEADER + "ctx = functools.partial(torch.amp.autocast,\n" + pad("ctx = functools.partial(") + '"cuda", enabled=True)\n',
)

add(
    "AMP001-type",
    "annotation",
    TORCH + "def save(scaler: torch.cuda.amp.GradScaler,  # the scaler\n         path: str) -> None:\n    pass\n",
    TORCH + "def save(scaler: torch.amp.GradScaler,  # the scaler\n         path: str) -> None:\n    pass\n",
)
add(
    "AMP001-type",
    "hanging",
    TORCH + "assert isinstance(\n    scaler,\n    torch.cuda.amp.GradScaler,\n)\n",
    TORCH + "assert isinstance(\n    scaler,\n    torch.amp.GradScaler,\n)\n",
)
add(
    "AMP001-type",
    "aligned",
    TORCH + "assert isinstance(scaler,\n" + pad("assert isinstance(") + "torch.cuda.amp.GradScaler)\n",
    TORCH + "assert isinstance(scaler,\n" + pad("assert isinstance(") + "torch.amp.GradScaler)\n",
)

add(
    "AMP001-import",
    "one-line",
    "import os\nfrom torch.cuda.amp import autocast, GradScaler\n\nscaler = GradScaler()\nwith autocast():\n    pass\n",
    'import os\nimport torch\n\nscaler = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda"):\n    pass\n',
)
add(
    # A name whose use cannot be rewritten (`*args`) stays in the import, the others go.
    "AMP001-import",
    "parenthesized-kept-name",
    "from torch.cuda.amp import (\n    GradScaler,  # the scaler\n    autocast,  # the context\n)\n\n"
    "scaler = GradScaler()\nwith autocast(*args):\n    pass\n",
    "import torch\nfrom torch.cuda.amp import (\n    autocast,  # the context\n)\n\n"
    'scaler = torch.amp.GradScaler("cuda")\nwith autocast(*args):\n    pass\n',
)
add(
    # The report: no blank first line is left in the block.
    "AMP001-import",
    "function-local",
    "import os\n\n\ndef train():\n    from torch.cuda.amp import autocast\n\n    with autocast():\n        pass\n",
    'import os\nimport torch\n\n\ndef train():\n    with torch.amp.autocast("cuda"):\n        pass\n',
)
add(
    "AMP001-import",
    "function-local-between-blank-lines",
    "import os\n\n\ndef train():\n    step = 0\n\n    from torch.cuda.amp import autocast\n\n    with autocast():\n        pass\n",
    'import os\nimport torch\n\n\ndef train():\n    step = 0\n\n    with torch.amp.autocast("cuda"):\n        pass\n',
)
add(
    "AMP001-import",
    "function-local-last",
    "import os\n\n\ndef train():\n    step = 0\n\n    from torch.cuda.amp import autocast\n\n\nrun()\n",
    "import os\n\n\ndef train():\n    step = 0\n\n\nrun()\n",
)
add(
    "AMP001-import",
    "function-local-tabs",
    "import os\n\n\ndef train():\n\tfrom torch.cuda.amp import GradScaler\n\n\treturn GradScaler()\n",
    'import os\nimport torch\n\n\ndef train():\n\treturn torch.amp.GradScaler("cuda")\n',
)
add(
    # `import torch` joins the import block, not the project's own imports after it.
    "AMP001-import",
    "local-imports-after-the-block",
    "import os\nimport sys\nfrom . import helpers\n\n\ndef train():\n    from torch.cuda.amp import autocast\n\n    with autocast():\n        pass\n",
    'import os\nimport sys\nimport torch\nfrom . import helpers\n\n\ndef train():\n    with torch.amp.autocast("cuda"):\n        pass\n',
)
add(
    "AMP001-import",
    "after-sys-path-manipulation",
    "import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(__file__))\nimport helpers\n\n\n"
    "def train():\n    from torch.cuda.amp import autocast\n    with autocast():\n        pass\n",
    "import os\nimport sys\nimport torch\n\nsys.path.insert(0, os.path.dirname(__file__))\nimport helpers\n\n\n"
    'def train():\n    with torch.amp.autocast("cuda"):\n        pass\n',
)

add(
    "AMP001-import",
    "module-alias-in-function",
    "import os\n\n\ndef train():\n    import torch.cuda.amp as amp\n\n    scaler = amp.GradScaler()\n    return scaler\n",
    'import os\nimport torch\n\n\ndef train():\n    scaler = torch.amp.GradScaler("cuda")\n    return scaler\n',
)
add(
    # A `try: import … except ImportError:` block is part of the import block.
    "AMP001-import",
    "after-try-import",
    "import os\ntry:\n    import apex\nexcept ImportError:\n    apex = None\nimport numpy as np\n\n\n"
    "def train():\n    from torch.cuda.amp import autocast\n    with autocast():\n        pass\n",
    "import os\ntry:\n    import apex\nexcept ImportError:\n    apex = None\nimport numpy as np\nimport torch\n\n\n"
    'def train():\n    with torch.amp.autocast("cuda"):\n        pass\n',
)

# -- AMP002: deprecated autocast state functions -------------------------------------------------

add(
    "AMP002-call",
    "one-line",
    TORCH + "dtype = torch.get_autocast_gpu_dtype()  # the dtype\n",
    TORCH + 'dtype = torch.get_autocast_dtype("cuda")  # the dtype\n',
)
AMP002_HANGING = "torch.set_autocast_cpu_dtype(\n    torch.bfloat16,  # bf16 on CPU\n)\n"
AMP002_HANGING_FIXED = 'torch.set_autocast_dtype(\n    "cpu", torch.bfloat16,  # bf16 on CPU\n)\n'
add("AMP002-call", "hanging", TORCH + AMP002_HANGING, TORCH + AMP002_HANGING_FIXED)
add(
    "AMP002-call",
    "aligned",
    TORCH
    + "torch.set_autocast_cpu_dtype(pick(torch.bfloat16,\n"
    + pad("torch.set_autocast_cpu_dtype(pick(")
    + "torch.float16))\n",
    TORCH + 'torch.set_autocast_dtype("cpu", pick(torch.bfloat16,\n' + pad('torch.set_autocast_dtype("cpu", pick(') + "torch.float16))\n",
)
add(
    "AMP002-call",
    "trailing-comma",
    TORCH + "torch.set_autocast_cpu_enabled(True,)\n",
    TORCH + 'torch.set_autocast_enabled("cpu", True,)\n',
)
add(
    # The lines of a multi-line string are its value: they stay, the code around moves.
    "AMP002-call",
    "aligned-multiline-string",
    TORCH
    + 'torch.set_autocast_cpu_dtype(pick("""bf16\n'
    + '  or fp16""",\n'
    + pad("torch.set_autocast_cpu_dtype(pick(")
    + "torch.float16))\n",
    TORCH
    + 'torch.set_autocast_dtype("cpu", pick("""bf16\n'
    + '  or fp16""",\n'
    + pad('torch.set_autocast_dtype("cpu", pick(')
    + "torch.float16))\n",
)
CASES.extend(nested("AMP002-call", TORCH, AMP002_HANGING, TORCH, AMP002_HANGING_FIXED))

# -- AMP003: apex.amp -----------------------------------------------------------------------------

APEX = "import torch\nfrom apex import amp\n\n\n"
APEX_FIXED = "import torch\n\n\n"
add(
    "AMP003-migration",
    "multi-line-calls",
    APEX
    + "def train(model, optimizer, loader):\n"
    + "    model, optimizer = amp.initialize(model, optimizer, opt_level='O1')\n"
    + "    for x, y in loader:\n"
    + "        out = model(x)\n"
    + "        loss = torch.nn.functional.cross_entropy(out,\n"
    + "                                                 y)\n"
    + "        with amp.scale_loss(loss, optimizer) as scaled_loss:\n"
    + "            scaled_loss.backward(\n"
    + "                retain_graph=True,  # keep it\n"
    + "            )\n"
    + "        optimizer.step()\n",
    APEX_FIXED
    + "def train(model, optimizer, loader):\n"
    + '    scaler = torch.amp.GradScaler("cuda")\n'
    + "    for x, y in loader:\n"
    + '        with torch.amp.autocast("cuda"):\n'
    + "            out = model(x)\n"
    + "            loss = torch.nn.functional.cross_entropy(out,\n"
    + "                                                     y)\n"
    + "        scaler.scale(loss).backward(\n"
    + "            retain_graph=True,  # keep it\n"
    + "        )\n"
    + "        scaler.step(optimizer)\n"
    + "        scaler.update()\n",
)
add(
    "AMP003-migration",
    "tabs-and-multiline-string",
    APEX
    + "def train(model, optimizer, batch):\n"
    + "\tmodel, optimizer = amp.initialize(model, optimizer)\n"
    + '\tloss = model(batch, note="""first\nsecond""")\n'
    + "\twith amp.scale_loss(loss, optimizer) as scaled:\n"
    + "\t\tscaled.backward()\n"
    + "\toptimizer.step()\n",
    APEX_FIXED
    + "def train(model, optimizer, batch):\n"
    + '\tscaler = torch.amp.GradScaler("cuda")\n'
    + '\twith torch.amp.autocast("cuda"):\n'
    + '\t\tloss = model(batch, note="""first\nsecond""")\n'
    + "\tscaler.scale(loss).backward()\n"
    + "\tscaler.step(optimizer)\n"
    + "\tscaler.update()\n",
)
APEX_METHOD = (
    "def train(self, loss):\n"
    "    self.model, self.optimizer = amp.initialize(self.model, self.optimizer)\n"
    "    loss = self.model(  # forward\n"
    "        batch,\n"
    "    )\n"
    "    with amp.scale_loss(loss, self.optimizer) as scaled:\n"
    "        scaled.backward()\n"
    "    self.optimizer.step()\n"
)
APEX_METHOD_FIXED = (
    "def train(self, loss):\n"
    '    scaler = torch.amp.GradScaler("cuda")\n'
    '    with torch.amp.autocast("cuda"):\n'
    "        loss = self.model(  # forward\n"
    "            batch,\n"
    "        )\n"
    "    scaler.scale(loss).backward()\n"
    "    scaler.step(self.optimizer)\n"
    "    scaler.update()\n"
)
CASES.extend(nested("AMP003-migration", APEX, APEX_METHOD, APEX_FIXED, APEX_METHOD_FIXED))

# -- AMP101: manual half casts ----------------------------------------------------------------------

TRAIN_TAIL = "    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n"


def training(cast: str) -> str:
    return "def train(model, batch, optimizer, device):\n" + cast + TRAIN_TAIL


add(
    "AMP101-to-argument",
    "one-line",
    TORCH + training("    x = batch.to(device, torch.float16)  # move and cast\n"),
    TORCH + training("    x = batch.to(device)  # move and cast\n"),
)
AMP101_HANGING = training("    x = batch.to(\n        device,  # the GPU\n        torch.float16,  # half\n    )\n")
AMP101_HANGING_FIXED = training("    x = batch.to(\n        device,  # the GPU\n    )\n")
add("AMP101-to-argument", "hanging", TORCH + AMP101_HANGING, TORCH + AMP101_HANGING_FIXED)
add(
    "AMP101-to-argument",
    "hanging-no-trailing-comma",
    TORCH + training("    x = batch.to(\n        device,\n        dtype=torch.float16\n    )\n"),
    TORCH + training("    x = batch.to(\n        device\n    )\n"),
)
add(
    "AMP101-to-argument",
    "hanging-dtype-first",
    TORCH + training("    x = batch.to(\n        torch.float16,  # half\n        non_blocking=True,\n    )\n"),
    TORCH + training("    x = batch.to(\n        non_blocking=True,\n    )\n"),
)
add(
    "AMP101-to-argument",
    "aligned",
    TORCH + training("    x = batch.to(device,\n" + pad("    x = batch.to(") + "torch.float16)\n"),
    TORCH + training("    x = batch.to(device)\n"),
)
add(
    # Removing the dtype with the comma before it would take the device's comment along.
    "AMP101-to-argument",
    "aligned-comment-before",
    TORCH + training("    x = batch.to(device,  # the GPU\n" + pad("    x = batch.to(") + "torch.float16)\n"),
    None,
)
add(
    "AMP101-to-argument",
    "trailing-comma",
    TORCH + training("    x = batch.to(device, torch.float16,)\n"),
    TORCH + training("    x = batch.to(device,)\n"),
)
CASES.extend(nested("AMP101-to-argument", TORCH, AMP101_HANGING, TORCH, AMP101_HANGING_FIXED))

AMP101_CHAIN = (
    "def train(loader, optimizer):\n"
    "    model = (\n"
    "        Net()\n"
    "        .cuda()  # on the GPU\n"
    "        .half()\n"
    "    )\n"
    "    for x in loader:\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)
AMP101_CHAIN_FIXED = (
    "def train(loader, optimizer):\n"
    "    model = (\n"
    "        Net()\n"
    "        .cuda()  # on the GPU\n"
    "    )\n"
    "    for x in loader:\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)
add("AMP101-chain", "hanging", TORCH + AMP101_CHAIN, TORCH + AMP101_CHAIN_FIXED)
add(
    "AMP101-chain",
    "one-line",
    TORCH + "model = Net().cuda().half()\nloss = model(x).sum()\nloss.backward()\n",
    TORCH + "model = Net().cuda()\nloss = model(x).sum()\nloss.backward()\n",
)
add(
    "AMP101-chain",
    "comment-inside-the-cast",
    TORCH
    + "def train(loader, optimizer):\n"
    + "    model = (\n"
    + "        Net()\n"
    + "        .cuda()\n"
    + "        # half precision\n"
    + "        .half()\n"
    + "    )\n"
    + "    for x in loader:\n"
    + "        model(x).sum().backward()\n"
    + "        optimizer.step()\n",
    None,
)
CASES.extend(nested("AMP101-chain", TORCH, AMP101_CHAIN, TORCH, AMP101_CHAIN_FIXED))

AMP101_IDLE = (
    "def train(model, loader, optimizer):\n"
    "    model.half()\n"
    "\n"
    "    for x in loader:\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)
AMP101_IDLE_FIXED = (
    "def train(model, loader, optimizer):\n"
    "    for x in loader:\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)
add("AMP101-statement", "first-in-block", TORCH + AMP101_IDLE, TORCH + AMP101_IDLE_FIXED)
add(
    "AMP101-statement",
    "tabs",
    TORCH + AMP101_IDLE.replace("    ", "\t"),
    TORCH + AMP101_IDLE_FIXED.replace("    ", "\t"),
)
CASES.extend(nested("AMP101-statement", TORCH, AMP101_IDLE, TORCH, AMP101_IDLE_FIXED))

# -- AMP102: loss computed after the autocast block ------------------------------------------------

F_HEADER = "import torch\nimport torch.nn.functional as F\n\n\n"


def loss_step(loss_lines: str) -> str:
    return (
        "def step(model, x, y):\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        out = model(x)\n" + loss_lines + "    loss.backward()\n"
    )


def loss_step_fixed(loss_lines: str) -> str:
    return (
        "def step(model, x, y):\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        out = model(x)\n" + indent(loss_lines) + "    loss.backward()\n"
    )


for layout, lines in {
    "one-line": "    loss = F.cross_entropy(out, y)  # main loss\n",
    "hanging": "    loss = F.cross_entropy(\n        out,\n        y,\n    )\n",
    "aligned": "    loss = F.cross_entropy(out,\n" + pad("    loss = F.cross_entropy(") + "y)\n",
    "comment-above": "    # the main loss\n    loss = F.cross_entropy(out, y)\n",
}.items():
    add("AMP102-move", layout, F_HEADER + loss_step(lines), F_HEADER + loss_step_fixed(lines))
add(
    # Lines inside a multi-line string keep their bytes when the statement moves.
    "AMP102-move",
    "string-argument",
    F_HEADER + loss_step('    loss = criterion(out, y, tag="""a\nb""")\n'),
    F_HEADER
    + "def step(model, x, y):\n"
    + "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
    + "        out = model(x)\n"
    + '        loss = criterion(out, y, tag="""a\nb""")\n'
    + "    loss.backward()\n",
)
add(
    "AMP102-move",
    "tabs",
    F_HEADER
    + "def step(model, x, y):\n"
    + "\twith torch.autocast('cuda'):\n"
    + "\t\tout = model(x)\n"
    + "\tloss = F.cross_entropy(\n"
    + "\t\tout, y)\n"
    + "\tloss.backward()\n",
    F_HEADER
    + "def step(model, x, y):\n"
    + "\twith torch.autocast('cuda'):\n"
    + "\t\tout = model(x)\n"
    + "\t\tloss = F.cross_entropy(\n"
    + "\t\t\tout, y)\n"
    + "\tloss.backward()\n",
)
AMP102_HANGING = loss_step("    loss = F.cross_entropy(\n        out,\n        y,\n    )\n")
AMP102_HANGING_FIXED = loss_step_fixed("    loss = F.cross_entropy(\n        out,\n        y,\n    )\n")
CASES.extend(nested("AMP102-move", F_HEADER, AMP102_HANGING, F_HEADER, AMP102_HANGING_FIXED))

# -- AMP103: backward inside the autocast block -----------------------------------------------------


def backward_step(backward_lines: str, *, fixed: bool) -> str:
    return (
        "def step(model, x, scaler):\n"
        "    with torch.autocast('cuda'):\n"
        "        loss = model(x).sum()\n" + (backward_lines if fixed else indent(backward_lines))
    )


for layout, lines in {
    "one-line": "    scaler.scale(loss).backward()  # scaled\n",
    "hanging": "    scaler.scale(loss).backward(\n        retain_graph=True,\n    )\n",
    "aligned": "    scaler.scale(loss).backward(inputs=params,\n" + pad("    scaler.scale(loss).backward(") + "retain_graph=True)\n",
}.items():
    add("AMP103-dedent", layout, TORCH + backward_step(lines, fixed=False), TORCH + backward_step(lines, fixed=True))
add(
    # The string's second line is its value: it stays as written while the call moves out.
    "AMP103-dedent",
    "string-argument",
    TORCH + backward_step('        loss.backward(gradient=g, note="""a\n  b""")\n', fixed=True),
    TORCH + backward_step('    loss.backward(gradient=g, note="""a\n  b""")\n', fixed=True),
)
add(
    "AMP103-dedent",
    "tabs",
    TORCH + "def step(model, x):\n\twith torch.autocast('cuda'):\n\t\tloss = model(x).sum()\n\t\tloss.backward()\n",
    TORCH + "def step(model, x):\n\twith torch.autocast('cuda'):\n\t\tloss = model(x).sum()\n\tloss.backward()\n",
)
AMP103_HANGING = backward_step("    scaler.scale(loss).backward(\n        retain_graph=True,\n    )\n", fixed=False)
AMP103_HANGING_FIXED = backward_step("    scaler.scale(loss).backward(\n        retain_graph=True,\n    )\n", fixed=True)
CASES.extend(nested("AMP103-dedent", TORCH, AMP103_HANGING, TORCH, AMP103_HANGING_FIXED))

# -- AMP104: binary_cross_entropy under CUDA autocast -------------------------------------------------


def bce_step(lines: str) -> str:
    return "def step(model, x, y):\n    with torch.autocast('cuda'):\n" + lines + "    return loss\n"


for layout, (lines, fixed_lines) in {
    "one-line": (
        "        loss = F.binary_cross_entropy(torch.sigmoid(model(x)), y, reduction='sum')\n",
        "        loss = F.binary_cross_entropy_with_logits(model(x), y, reduction='sum')\n",
    ),
    "hanging": (
        "        loss = F.binary_cross_entropy(\n            torch.sigmoid(model(x)),  # probabilities\n            y,\n        )\n",
        "        loss = F.binary_cross_entropy_with_logits(\n            model(x),  # probabilities\n            y,\n        )\n",
    ),
    "aligned": (
        "        loss = F.binary_cross_entropy(torch.sigmoid(logits),\n"
        + pad("        loss = F.binary_cross_entropy(")
        + "y, weight=w)\n",
        "        loss = F.binary_cross_entropy_with_logits(logits,\n"
        + pad("        loss = F.binary_cross_entropy_with_logits(")
        + "y, weight=w)\n",
    ),
    "sigmoid-spans-lines": (
        "        loss = F.binary_cross_entropy(torch.sigmoid(\n            model(x)\n        ), y)\n",
        "        loss = F.binary_cross_entropy_with_logits(model(x), y)\n",
    ),
    "method": (
        "        loss = F.binary_cross_entropy(\n            model(x).sigmoid(),\n            y,\n        )\n",
        "        loss = F.binary_cross_entropy_with_logits(\n            model(x),\n            y,\n        )\n",
    ),
    "keyword-input": (
        "        loss = F.binary_cross_entropy(target=y,\n"
        + pad("        loss = F.binary_cross_entropy(")
        + "input=F.sigmoid(z))\n",
        "        loss = F.binary_cross_entropy_with_logits(target=y,\n"
        + pad("        loss = F.binary_cross_entropy_with_logits(")
        + "input=z)\n",
    ),
}.items():
    add("AMP104-inline", layout, F_HEADER + bce_step(lines), F_HEADER + bce_step(fixed_lines))
add(
    # A comment inside the sigmoid's parentheses would go with them.
    "AMP104-inline",
    "comment-inside-sigmoid",
    F_HEADER + bce_step("        loss = F.binary_cross_entropy(torch.sigmoid(\n            logits  # raw\n        ), y)\n"),
    None,
)
add(
    "AMP104-inline",
    "tabs",
    F_HEADER + "def step(model, x, y):\n\twith torch.autocast('cuda'):\n\t\tloss = F.binary_cross_entropy(\n\t\t\tmodel(x).sigmoid(), y)\n\treturn loss\n",
    F_HEADER + "def step(model, x, y):\n\twith torch.autocast('cuda'):\n\t\tloss = F.binary_cross_entropy_with_logits(\n\t\t\tmodel(x), y)\n\treturn loss\n",
)
BCE_HANGING = bce_step("        loss = F.binary_cross_entropy(\n            torch.sigmoid(model(x)),\n            y,\n        )\n")
BCE_HANGING_FIXED = bce_step("        loss = F.binary_cross_entropy_with_logits(\n            model(x),\n            y,\n        )\n")
CASES.extend(nested("AMP104-inline", F_HEADER, BCE_HANGING, F_HEADER, BCE_HANGING_FIXED))

ASSIGNED: dict[str, tuple[str, str | None]] = {
    "one-line": (
        "        logits = model(x)\n        probs = torch.sigmoid(logits)\n        loss = F.binary_cross_entropy(probs, y)\n",
        "        logits = model(x)\n        loss = F.binary_cross_entropy_with_logits(logits, y)\n",
    ),
    "hanging": (
        "        out = model(x)\n"
        "        probs = out.logits.sigmoid()  # probabilities\n"
        "\n"
        "        loss = F.binary_cross_entropy(\n"
        "            probs,\n"
        "            y,\n"
        "        )\n",
        "        out = model(x)\n"
        "\n"
        "        loss = F.binary_cross_entropy_with_logits(\n"
        "            out.logits,\n"
        "            y,\n"
        "        )\n",
    ),
    "aligned": (
        "        logits = model(x)\n"
        "        probs = torch.sigmoid(logits)\n"
        "        loss = F.binary_cross_entropy(probs,\n" + pad("        loss = F.binary_cross_entropy(") + "y)\n",
        "        logits = model(x)\n"
        "        loss = F.binary_cross_entropy_with_logits(logits,\n" + pad("        loss = F.binary_cross_entropy_with_logits(") + "y)\n",
    ),
    "logits-from-a-call": (
        "        probs = torch.sigmoid(model(x)[0])\n\n        loss = F.binary_cross_entropy(probs, y)\n",
        None,  # `model(x)[0]` is a call: reading it again is not reading the same value
    ),
}
for layout, (assigned, assigned_fixed) in ASSIGNED.items():
    add(
        "AMP104-assigned",
        layout,
        F_HEADER + bce_step(assigned),
        F_HEADER + bce_step(assigned_fixed) if assigned_fixed is not None else None,
    )
add(
    "AMP104-assigned",
    "first-in-block-no-blank-line-left",
    F_HEADER
    + "def step(logits, y):\n    with torch.autocast('cuda'):\n        probs = torch.sigmoid(logits)\n\n"
    + "        loss = F.binary_cross_entropy(probs, y)\n    return loss\n",
    F_HEADER
    + "def step(logits, y):\n    with torch.autocast('cuda'):\n"
    + "        loss = F.binary_cross_entropy_with_logits(logits, y)\n    return loss\n",
)

FROM_IMPORT = "import torch\nfrom torch.nn.functional import {names}\n\n\n"
add(
    "AMP104-from-import",
    "one-line",
    FROM_IMPORT.format(names="binary_cross_entropy, mse_loss")
    + bce_step("        loss = binary_cross_entropy(torch.sigmoid(model(x)), y)\n        loss = loss + mse_loss(x, y)\n"),
    FROM_IMPORT.format(names="binary_cross_entropy_with_logits, mse_loss")
    + bce_step("        loss = binary_cross_entropy_with_logits(model(x), y)\n        loss = loss + mse_loss(x, y)\n"),
)
add(
    "AMP104-from-import",
    "parenthesized-two-uses",
    FROM_IMPORT.format(names="(\n    binary_cross_entropy,  # bce\n    mse_loss,\n)")
    + bce_step(
        "        first = binary_cross_entropy(torch.sigmoid(model(x)), y)\n"
        "        loss = binary_cross_entropy(torch.sigmoid(model(x)), y)\n"
    ),
    FROM_IMPORT.format(names="(\n    binary_cross_entropy,  # bce\n    binary_cross_entropy_with_logits,\n    mse_loss,\n)")
    + bce_step(
        "        first = binary_cross_entropy_with_logits(model(x), y)\n"
        "        loss = binary_cross_entropy_with_logits(model(x), y)\n"
    ),
)
add(
    "AMP104-from-import",
    "name-taken-torch-bound",
    FROM_IMPORT.format(names="binary_cross_entropy")
    + "binary_cross_entropy_with_logits = None\n\n\n"
    + bce_step("        loss = binary_cross_entropy(torch.sigmoid(model(x)), y)\n"),
    FROM_IMPORT.format(names="binary_cross_entropy")
    + "binary_cross_entropy_with_logits = None\n\n\n"
    + bce_step("        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)\n"),
)

# -- AMP201: hardcoded AMP device -----------------------------------------------------------------

RUNTIME_FIXED = "import torch\nimport amplint.runtime\n\n"
DEVICE_HANGING = (
    "def forward(model, x, device='cpu'):\n"
    "    with torch.autocast(\n"
    '        "cuda",  # the GPU\n'
    "        dtype=torch.bfloat16,\n"
    "    ):\n"
    "        return model(x)\n"
)
DEVICE_HANGING_FIXED = (
    "def forward(model, x, device='cpu'):\n"
    "    with torch.autocast(\n"
    "        amplint.runtime.device_type(device),  # the GPU\n"
    "        dtype=torch.bfloat16,\n"
    "    ):\n"
    "        return model(x)\n"
)
add("AMP201-device", "hanging", TORCH + DEVICE_HANGING, RUNTIME_FIXED + DEVICE_HANGING_FIXED)
add(
    "AMP201-device",
    "aligned",
    TORCH
    + "def forward(model, x, device='cpu'):\n"
    + "    with torch.autocast('cuda',\n"
    + pad("    with torch.autocast(")
    + "dtype=torch.bfloat16):\n"
    + "        return model(x)\n",
    RUNTIME_FIXED
    + "def forward(model, x, device='cpu'):\n"
    + "    with torch.autocast(amplint.runtime.device_type(device),\n"
    + pad("    with torch.autocast(")
    + "dtype=torch.bfloat16):\n"
    + "        return model(x)\n",
)
add(
    "AMP201-device",
    "after-relative-imports",
    "import torch\nfrom . import helpers\n\n"
    + "def forward(model, x, device='cpu'):\n    with torch.autocast('cuda'):\n        return model(x)\n",
    "import torch\nimport amplint.runtime\nfrom . import helpers\n\n"
    + "def forward(model, x, device='cpu'):\n    with torch.autocast(amplint.runtime.device_type(device)):\n        return model(x)\n",
)
CASES.extend(nested("AMP201-device", TORCH, DEVICE_HANGING, RUNTIME_FIXED, DEVICE_HANGING_FIXED))

DEVICE_TEST = (
    "def forward(model, x, device):\n"
    "    device_type = (\n"
    '        "cuda"\n'
    '        if "cuda" in device\n'
    '        else "cpu"\n'
    "    )\n"
    "    with torch.autocast(device_type):\n"
    "        return model(x)\n"
)
add(
    "AMP201-device-test",
    "parenthesized",
    TORCH + DEVICE_TEST,
    RUNTIME_FIXED
    + "def forward(model, x, device):\n"
    + "    device_type = (\n"
    + "        amplint.runtime.device_type(device)\n"
    + "    )\n"
    + "    with torch.autocast(device_type):\n"
    + "        return model(x)\n",
)
add(
    "AMP201-device-test",
    "one-line",
    TORCH
    + "def forward(model, x, device):\n"
    + '    device_type = "cuda" if device.startswith("cuda") else "cpu"  # for autocast\n'
    + "    with torch.autocast(device_type):\n"
    + "        return model(x)\n",
    RUNTIME_FIXED
    + "def forward(model, x, device):\n"
    + "    device_type = amplint.runtime.device_type(device)  # for autocast\n"
    + "    with torch.autocast(device_type):\n"
    + "        return model(x)\n",
)
add(
    "AMP201-str-device",
    "aligned",
    TORCH
    + "def forward(model, x, device):\n"
    + "    with torch.autocast(str(device),\n"
    + pad("    with torch.autocast(")
    + "dtype=torch.bfloat16):\n"
    + "        return model(x)\n",
    RUNTIME_FIXED
    + "def forward(model, x, device):\n"
    + "    with torch.autocast(amplint.runtime.device_type(device),\n"
    + pad("    with torch.autocast(")
    + "dtype=torch.bfloat16):\n"
    + "        return model(x)\n",
)
add(
    "AMP201-device-test",
    "comment-inside",
    TORCH + DEVICE_TEST.replace('        if "cuda" in device\n', '        if "cuda" in device  # GPU?\n'),
    None,
)

NCCL = (
    "def setup(rank, world):\n"
    "    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    "    dist.init_process_group(\n"
    "        'nccl',  # fast on GPUs\n"
    "        rank=rank,\n"
    "        world_size=world,\n"
    "    )\n"
)
NCCL_FIXED = NCCL.replace("        'nccl',", "        'nccl' if torch.cuda.is_available() else 'gloo',")
NCCL_HEADER = "import torch\nimport torch.distributed as dist\n\n"
add("AMP201-backend", "hanging", NCCL_HEADER + NCCL, NCCL_HEADER + NCCL_FIXED)
CASES.extend(nested("AMP201-backend", NCCL_HEADER, NCCL, NCCL_HEADER, NCCL_FIXED))

# -- AMP202: autocast disabled off CUDA (off by default) -------------------------------------------

AMP202_HEADER = "import torch\nfrom contextlib import nullcontext\n\n"
AMP202_FIXED_HEADER = "import torch\nfrom contextlib import nullcontext\nimport amplint.runtime\n\n"
AMP202_BODY = (
    "def train(model, x, device_type):\n"
    "    ctx = (\n"
    "        nullcontext()\n"
    "        if device_type == 'cpu'\n"
    "        else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)\n"
    "    )\n"
    "    with ctx:\n"
    "        loss = model(x)\n"
    "    loss.backward()\n"
)
AMP202_BODY_FIXED = (
    "def train(model, x, device_type):\n"
    "    ctx = (\n"
    "        amplint.runtime.autocast(device_type, dtype=torch.bfloat16)\n"
    "    )\n"
    "    with ctx:\n"
    "        loss = model(x)\n"
    "    loss.backward()\n"
)
add("AMP202-conditional", "parenthesized", AMP202_HEADER + AMP202_BODY, AMP202_FIXED_HEADER + AMP202_BODY_FIXED)
add(
    "AMP202-conditional",
    "comment-inside",
    AMP202_HEADER + AMP202_BODY.replace("        nullcontext()\n", "        nullcontext()  # fp32 on CPU\n"),
    None,
)
CASES.extend(nested("AMP202-conditional", AMP202_HEADER, AMP202_BODY, AMP202_FIXED_HEADER, AMP202_BODY_FIXED))

# -- AMP301: clip before unscale_ -----------------------------------------------------------------

AMP301 = (
    "def step(model, loss, optimizer, scaler):\n"
    "    scaler.scale(loss).backward()\n"
    "    # clip\n"
    "    torch.nn.utils.clip_grad_norm_(\n"
    "        model.parameters(),\n"
    "        max_norm=1.0,\n"
    "    )\n"
    "    scaler.step(optimizer)\n"
    "    scaler.update()\n"
)
AMP301_FIXED = AMP301.replace("    torch.nn.utils", "    scaler.unscale_(optimizer)\n    torch.nn.utils")
add("AMP301-unscale", "hanging", TORCH + AMP301, TORCH + AMP301_FIXED)
add(
    "AMP301-unscale",
    "in-branch-tabs",
    TORCH
    + "def step(model, loss, opt, scaler, sync):\n"
    + "\tscaler.scale(loss).backward()\n"
    + "\tif sync:\n"
    + "\t\ttorch.nn.utils.clip_grad_value_(model.parameters(),\n"
    + "\t\t                               1.0)\n"
    + "\t\tscaler.step(opt)\n"
    + "\t\tscaler.update()\n",
    TORCH
    + "def step(model, loss, opt, scaler, sync):\n"
    + "\tscaler.scale(loss).backward()\n"
    + "\tif sync:\n"
    + "\t\tscaler.unscale_(opt)\n"
    + "\t\ttorch.nn.utils.clip_grad_value_(model.parameters(),\n"
    + "\t\t                               1.0)\n"
    + "\t\tscaler.step(opt)\n"
    + "\t\tscaler.update()\n",
)
add(
    # `unscale_` before the `if` line would run on every iteration, outside the condition.
    "AMP301-unscale",
    "one-line-suite",
    TORCH
    + "def step(model, loss, opt, scaler, sync):\n"
    + "    scaler.scale(loss).backward()\n"
    + "    if sync: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); scaler.step(opt)\n"
    + "    scaler.update()\n",
    None,
)
CASES.extend(nested("AMP301-unscale", TORCH, AMP301, TORCH, AMP301_FIXED))

# -- AMP302: GradScaler with bfloat16 --------------------------------------------------------------

BF16 = "\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
for layout, (call, fixed_call) in {
    "one-line": ("scaler = torch.amp.GradScaler('cuda')  # scaler\n", "scaler = torch.amp.GradScaler('cuda', enabled=False)  # scaler\n"),
    "hanging": (
        "scaler = torch.amp.GradScaler(\n    'cuda',\n    init_scale=1024,  # small\n)\n",
        "scaler = torch.amp.GradScaler(\n    'cuda',\n    init_scale=1024,  # small\n    enabled=False,\n)\n",
    ),
    "hanging-no-trailing-comma": (
        "scaler = torch.amp.GradScaler(\n    'cuda',\n    init_scale=1024\n)\n",
        "scaler = torch.amp.GradScaler(\n    'cuda',\n    init_scale=1024,\n    enabled=False\n)\n",
    ),
    "aligned": (
        "scaler = torch.amp.GradScaler('cuda',\n" + pad("scaler = torch.amp.GradScaler(") + "init_scale=1024)\n",
        "scaler = torch.amp.GradScaler('cuda',\n" + pad("scaler = torch.amp.GradScaler(") + "init_scale=1024, enabled=False)\n",
    ),
    "trailing-comma": ("scaler = torch.amp.GradScaler('cuda',)\n", "scaler = torch.amp.GradScaler('cuda', enabled=False,)\n"),
    "no-arguments": ("scaler = torch.amp.GradScaler()\n", "scaler = torch.amp.GradScaler(enabled=False)\n"),
    "enabled-replaced": (
        "scaler = torch.amp.GradScaler(\n    'cuda',\n    enabled=True,  # always\n)\n",
        "scaler = torch.amp.GradScaler(\n    'cuda',\n    enabled=False,  # always\n)\n",
    ),
}.items():
    add("AMP302-enabled", layout, TORCH + call + BF16, TORCH + fixed_call + BF16)
AMP302_NESTED = (
    "def train(model):\n"
    "    scaler = torch.amp.GradScaler(\n"
    "        'cuda',\n"
    "    )\n"
    "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
    "        loss = model()\n"
    "    scaler.scale(loss).backward()\n"
)
AMP302_NESTED_FIXED = AMP302_NESTED.replace("        'cuda',\n", "        'cuda',\n        enabled=False,\n")
CASES.extend(nested("AMP302-enabled", TORCH, AMP302_NESTED, TORCH, AMP302_NESTED_FIXED))

# -- AMP303: the GradScaler step protocol -------------------------------------------------------------

AMP303_UPDATE = (
    "def train(loss, optimizer):\n"
    "    scaler = make_scaler()\n"
    "    scaler.scale(loss).backward()\n"
    "    scaler.step(\n"
    "        optimizer,\n"
    "    )  # step\n"
    "\n"
    "    log(loss)\n"
)
AMP303_UPDATE_FIXED = AMP303_UPDATE.replace("    )  # step\n", "    )  # step\n    scaler.update()\n")
add("AMP303-update", "hanging", AMP303_UPDATE, AMP303_UPDATE_FIXED)
add(
    "AMP303-update",
    "tabs",
    AMP303_UPDATE.replace("    ", "\t"),
    AMP303_UPDATE_FIXED.replace("    ", "\t"),
)
CASES.extend(nested("AMP303-update", "", AMP303_UPDATE, "", AMP303_UPDATE_FIXED))

AMP303_STEP = (
    "def train(model, loss, scaler):\n"
    "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "    scaler.scale(loss).backward()\n"
    "    optimizer.step()  # apply\n"
)
AMP303_STEP_FIXED = (
    "def train(model, loss, scaler):\n"
    "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "    scaler.scale(loss).backward()\n"
    "    scaler.step(optimizer)  # apply\n"
    "    scaler.update()\n"
)
add("AMP303-step", "comment", TORCH + AMP303_STEP, TORCH + AMP303_STEP_FIXED)
add(
    # An update after `if sync: optimizer.step()` would run on every iteration, and
    # `update()` without a `step()` raises.
    "AMP303-step",
    "one-line-suite",
    TORCH + AMP303_STEP.replace("    optimizer.step()  # apply\n", "    if sync: optimizer.step()\n"),
    None,
)
CASES.extend(nested("AMP303-step", TORCH, AMP303_STEP, TORCH, AMP303_STEP_FIXED))


# -- the checks ------------------------------------------------------------------------------------


def _fix(source: str, code: str) -> str:
    report = fix_source_text(source, select=[code], unsafe_fixes=True)
    return report.new_text or source


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("case", CASES, ids=[f"{case.form}-{case.layout}" for case in CASES])
def test_fix_keeps_the_layout(case: Case, newline: str) -> None:
    source = case.source.replace("\n", newline)
    assert any(d.code == case.code for d in check_source(source, select=[case.code])), "the rule must fire"
    fixed = _fix(source, case.code)
    if case.fixed is None:
        assert fixed == source, "no fix is offered for this layout"
        return
    expected = case.fixed.replace("\n", newline)
    assert fixed == expected
    ast.parse(fixed)
    assert _fix(fixed, case.code) == fixed, "fixing again changes nothing"


def test_every_fixing_rule_has_layout_cases() -> None:
    forms = {case.form.split("-")[0] for case in CASES if case.fixed is not None}
    assert forms == {
        "AMP001", "AMP002", "AMP003", "AMP101", "AMP102", "AMP103", "AMP104",
        "AMP201", "AMP202", "AMP301", "AMP302", "AMP303",
    }  # fmt: skip
