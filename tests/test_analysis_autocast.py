"""The autocast analysis: which ``with`` items are autocast blocks, and what is known of them."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from amplint.analysis.autocast import AutocastBlock
from amplint.analysis.context import RuleContext
from amplint.analysis.torch_api import DEFAULT_DTYPE
from amplint.engine.source import decode


def _context(source: str) -> RuleContext:
    text = textwrap.dedent(source)
    decoded = decode(text.encode())
    return RuleContext("snippet.py", decoded, cst.parse_module(decoded.text))


def _blocks(source: str) -> list[AutocastBlock]:
    return _context(source).analysis.autocast.blocks


def _only(source: str) -> AutocastBlock:
    blocks = _blocks(source)
    assert len(blocks) == 1, blocks
    return blocks[0]


def _set(*values: str) -> frozenset[str]:
    return frozenset(values)


# -- spellings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "devices", "dtypes"),
    [
        ("import torch\nwith torch.autocast('cuda'):\n    pass\n", _set("cuda"), _set("float16")),
        ("import torch\nwith torch.amp.autocast(device_type='cpu'):\n    pass\n", _set("cpu"), _set("bfloat16")),
        ("import torch as th\nwith th.autocast('cuda', th.bfloat16):\n    pass\n", _set("cuda"), _set("bfloat16")),
        ("from torch import autocast\nwith autocast('cuda', dtype=None):\n    pass\n", _set("cuda"), _set("float16")),
        ("from torch.cuda.amp import autocast as ac\nwith ac():\n    pass\n", _set("cuda"), _set("float16")),
        ("import torch\nwith torch.cpu.amp.autocast():\n    pass\n", _set("cpu"), _set("bfloat16")),
        # Old positional order: (enabled, dtype, cache_enabled).
        (
            "import torch\nwith torch.cuda.amp.autocast(True, torch.bfloat16):\n    pass\n",
            _set("cuda"),
            _set("bfloat16"),
        ),
        ("from torch.cuda import amp\nwith amp.autocast(dtype=torch.half):\n    pass\n", _set("cuda"), None),
        ("import torch\nwith torch.autocast(device_type=device):\n    pass\n", None, None),
        ("import torch\nwith torch.autocast('cuda', dtype=amp_dtype):\n    pass\n", _set("cuda"), None),
    ],
)
def test_torch_spellings_and_what_is_known(
    source: str, devices: frozenset[str] | None, dtypes: frozenset[str] | None
) -> None:
    use = _only(source).use
    assert use.device_types == devices
    assert use.dtypes == dtypes
    assert not use.method and not use.disabled


def test_torch_half_needs_torch_bound() -> None:
    # `torch` is not bound in that snippet, so `torch.half` is not a known dtype;
    # with it bound it is float16.
    use = _only("import torch\nfrom torch.cuda import amp\nwith amp.autocast(dtype=torch.half):\n    pass\n").use
    assert use.dtypes == _set("float16")
    assert use.deprecated


def test_method_autocast_has_unknown_device_and_dtype() -> None:
    use = _only("with accelerator.autocast():\n    loss = model(x)\n").use
    assert use.method
    assert use.device_types is None and use.dtypes is None


@pytest.mark.parametrize(
    "source",
    [
        "with autocast():\n    pass\n",  # not imported: some other autocast
        "def autocast():\n    ...\nwith autocast():\n    pass\n",
        "import torch\nwith torch.no_grad():\n    pass\n",
        "import torch\nwith open(p) as f, torch.inference_mode():\n    pass\n",
        "import torch\nautocast = torch.autocast\nautocast = my_ctx\nwith autocast('cuda'):\n    pass\n",
        "import torch\n# with torch.autocast('cuda'):\ns = \"with torch.autocast('cuda'):\"\n",
        "import torch\nctx = torch.autocast('cuda')\nctx = make_ctx()\nwith ctx:\n    pass\n",
        "import torch\nfor ctx in (torch.autocast('cuda'),):\n    with ctx:\n        pass\n",
    ],
)
def test_not_autocast(source: str) -> None:
    assert _blocks(source) == []


def test_shadowed_torch_is_not_torch() -> None:
    source = "import torch\n\ndef f(torch):\n    with torch.autocast('cuda'):\n        pass\n"
    (block,) = _blocks(source)
    # A parameter named torch is some object: its .autocast() is a method autocast.
    assert block.use.method


# -- names, partials, conditionals ---------------------------------------------------------


def test_nanogpt_conditional_bound_to_a_name() -> None:
    block = _only(
        """
        from contextlib import nullcontext
        import torch
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
        dtype = 'bfloat16' if torch.cuda.is_bf16_supported() else 'float16'
        device_type = 'cuda' if 'cuda' in device else 'cpu'
        ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
        ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
        with ctx:
            logits = model(x)
        """
    )
    use = block.use
    assert use.device_types == _set("cuda", "cpu")
    # The dict lookup's key can only be 'bfloat16' or 'float16', so float32 is excluded.
    assert use.dtypes == _set("bfloat16", "float16")
    assert isinstance(use.conditional, cst.IfExp)
    assert isinstance(use.call, cst.Call) and isinstance(use.device_expr, cst.Name)
    assert use.device_expr.value == "device_type"


def test_conditional_written_directly_as_the_item() -> None:
    use = _only(
        "import torch\nfrom contextlib import nullcontext\n"
        "with torch.autocast('cuda', dtype=torch.bfloat16) if amp else nullcontext():\n    pass\n"
    ).use
    assert use.dtypes == _set("bfloat16")
    assert use.conditional is not None


def test_conditional_of_two_autocasts_unions_them() -> None:
    use = _only(
        "import torch\n"
        "ctx = torch.autocast('cuda', torch.float16) if fp16 else torch.autocast('cuda', torch.bfloat16)\n"
        "with ctx:\n    pass\n"
    ).use
    assert use.dtypes == _set("float16", "bfloat16")
    assert len(use.alternatives) == 2


def test_partial_then_called() -> None:
    use = _only(
        "import functools, torch\n"
        "amp_ctx = functools.partial(torch.autocast, device_type='cuda', dtype=torch.bfloat16)\n"
        "def step():\n    with amp_ctx():\n        pass\n"
    ).use
    assert use.device_types == _set("cuda") and use.dtypes == _set("bfloat16")


def test_partial_positional_arguments_merge_with_the_call() -> None:
    use = _only(
        "from functools import partial\nimport torch\nac = partial(torch.autocast, 'cpu')\n"
        "with ac(torch.float16):\n    pass\n"
    ).use
    assert use.device_types == _set("cpu") and use.dtypes == _set("float16")


def test_timm_style_name_bound_to_noop_or_partial() -> None:
    use = _only(
        """
        from contextlib import suppress
        from functools import partial
        import torch
        amp_autocast = suppress
        if args.amp:
            amp_autocast = partial(torch.autocast, device_type=device.type, dtype=amp_dtype)
        with amp_autocast():
            loss = model(x)
        """
    ).use
    assert use.device_types is None and use.dtypes is None
    assert not use.disabled


def test_callable_conditional() -> None:
    use = _only(
        "import torch\nfrom contextlib import nullcontext\nac = torch.autocast if amp else nullcontext\n"
        "with ac('cuda', dtype=torch.bfloat16):\n    pass\n"
    ).use
    assert use.dtypes == _set("bfloat16")


def test_name_bound_in_function_seen_inside_it() -> None:
    context = _context(
        """
        import torch
        def train(device_type):
            ctx = torch.autocast(device_type, dtype=torch.bfloat16)
            with ctx:
                pass
        """
    )
    (block,) = context.analysis.autocast.blocks
    assert block.use.dtypes == _set("bfloat16") and block.use.device_types is None


def test_device_from_a_literal_dict_lookup() -> None:
    use = _only(
        "import torch\nkind = 'gpu'\ndevice_type = {'gpu': 'cuda', 'cpu': 'cpu'}[kind]\n"
        "with torch.autocast(device_type):\n    pass\n"
    ).use
    assert use.device_types == _set("cuda")


def test_dtype_bound_by_a_default_and_an_if_is_either() -> None:
    # RULES.md rev 4: a dtype bound on the branches of an if/elif chain is the set of them.
    use = _only(
        "import torch\ndt = torch.float16\nif bf16:\n    dt = torch.bfloat16\n"
        "with torch.autocast('cuda', dtype=dt):\n    pass\n"
    ).use
    assert use.dtypes == _set("float16", "bfloat16")


def test_dtype_from_an_if_elif_chain_is_the_set_of_its_branches() -> None:
    use = _only(
        "import torch\nif args.bf16:\n    dt = torch.bfloat16\nelif args.fp16:\n    dt = torch.float16\n"
        "else:\n    dt = torch.float32\nwith torch.autocast('cuda', dtype=dt):\n    pass\n"
    ).use
    assert use.dtypes == _set("float16", "bfloat16", "float32")


def test_dtype_rebound_in_sequence_is_unknown() -> None:
    # Not alternatives: which binding reaches the block depends on the order of execution.
    for source in (
        "import torch\ndt = torch.float16\nf(dt)\ndt = torch.bfloat16\nwith torch.autocast('cuda', dtype=dt):\n    pass\n",
        "import torch\nif a:\n    dt = torch.float16\nif b:\n    dt = torch.bfloat16\nwith torch.autocast('cuda', dtype=dt):\n    pass\n",
        "import torch\ndt = torch.float16\nx = 1\nif b:\n    dt = torch.bfloat16\nwith torch.autocast('cuda', dtype=dt):\n    pass\n",
    ):
        assert _only(source).use.dtypes is None, source


def test_dtype_from_class_members_and_config_fields() -> None:
    trainer = (
        "import torch\n\nclass Trainer:\n    def __init__(self, bf16):\n"
        "        self.dtype = torch.bfloat16 if bf16 else torch.float16\n\n"
        "    def step(self):\n        with torch.autocast('cuda', dtype=self.dtype):\n            pass\n"
    )
    assert _only(trainer).use.dtypes == _set("float16", "bfloat16")
    config = (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Config:\n"
        "    dtype: str = 'bfloat16'\n\nconfig = Config()\n"
        "with torch.autocast('cuda', dtype=getattr(torch, config.dtype)):\n    pass\n"
    )
    assert _only(config).use.dtypes == _set("bfloat16")
    # Set by the constructor: the default no longer holds.
    overridden = config.replace("config = Config()", "config = Config(dtype='float16')")
    assert _only(overridden).use.dtypes == _set("bfloat16", "float16")
    # Built elsewhere, or assigned from outside the class: unknown.
    for unknown in (
        config.replace("config = Config()", "config = load_config()"),
        config.replace("config = Config()", "config = Config()\nconfig.dtype = args.dtype"),
        trainer.replace("    def step(self):", "    def set(self, d):\n        self.dtype = d\n\n    def step(self):"),
    ):
        assert _only(unknown).use.dtypes is None, unknown


def test_star_arguments_make_everything_but_the_implied_device_unknown() -> None:
    use = _only("import torch\nwith torch.cuda.amp.autocast(**kw):\n    pass\n").use
    assert use.device_types == _set("cuda") and use.dtypes is None


# -- disabled regions, enclosing, scopes ---------------------------------------------------


def test_disabled_only_when_literally_false() -> None:
    assert _only("import torch\nwith torch.autocast('cuda', enabled=False):\n    pass\n").disabled
    assert _only("import torch\nwith torch.cuda.amp.autocast(False):\n    pass\n").disabled
    assert not _only("import torch\nwith torch.autocast('cuda', enabled=use_amp):\n    pass\n").disabled
    assert not _only("import torch\nwith torch.autocast('cuda', enabled=True):\n    pass\n").disabled


def _find(context: RuleContext, code: str) -> cst.CSTNode:
    class Finder(cst.CSTVisitor):
        found: cst.CSTNode | None = None

        def on_visit(self, node: cst.CSTNode) -> bool:
            if (
                self.found is None
                and isinstance(node, cst.SimpleStatementLine)
                and context.module.code_for_node(node).strip() == code
            ):
                self.found = node
            return True

    finder = Finder()
    context.module.visit(finder)
    assert finder.found is not None, code
    return finder.found


def test_enclosing_is_the_innermost_block_and_stops_at_functions() -> None:
    context = _context(
        """
        import torch
        with torch.autocast('cuda'):
            a = 1
            with torch.autocast('cuda', enabled=False):
                b = 2
                with open(p):
                    c = 3
            def closure():
                d = 4
        e = 5
        """
    )
    autocast = context.analysis.autocast
    outer, inner = autocast.blocks
    assert autocast.enclosing(_find(context, "a = 1")) is outer
    assert autocast.enclosing(_find(context, "b = 2")) is inner
    assert autocast.enclosing(_find(context, "c = 3")) is inner
    assert autocast.in_disabled_region(_find(context, "c = 3"))
    assert not autocast.in_disabled_region(_find(context, "a = 1"))
    assert autocast.enclosing(_find(context, "d = 4")) is None
    assert autocast.enclosing(_find(context, "e = 5")) is None


def test_with_item_expression_is_not_in_the_body() -> None:
    context = _context("import torch\nwith torch.autocast('cuda'):\n    pass\n")
    (block,) = context.analysis.autocast.blocks
    assert context.analysis.autocast.enclosing(block.item.item) is None


def test_blocks_per_scope() -> None:
    context = _context(
        """
        import torch
        with torch.autocast('cpu'):
            pass
        def train():
            with torch.autocast('cuda'):
                pass
            def inner():
                with torch.autocast('cuda', dtype=torch.bfloat16):
                    pass
        class T:
            def step(self):
                with torch.autocast('cuda'), torch.autocast('cpu'):
                    pass
        """
    )
    autocast = context.analysis.autocast
    module = context.module
    functions = {f.name.value: f for f in context.analysis.tree.index.functions}
    assert [b.use.device_types for b in autocast.blocks_in(module)] == [_set("cpu")]
    assert [b.use.dtypes for b in autocast.blocks_in(functions["train"])] == [_set("float16")]
    assert [b.use.dtypes for b in autocast.blocks_in(functions["inner"])] == [_set("bfloat16")]
    step_blocks = autocast.blocks_in(functions["step"])
    assert len(step_blocks) == 2 and step_blocks[0].statement is step_blocks[1].statement
    assert autocast.blocks_of(step_blocks[0].statement) == step_blocks


def test_default_dtypes_match_the_installed_torch() -> None:
    torch = pytest.importorskip("torch")
    for device, dtype in DEFAULT_DTYPE.items():
        assert torch.get_autocast_dtype(device) == getattr(torch, dtype), device
