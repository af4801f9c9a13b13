"""AMP003 apex-amp: its examples, a finding on real code, and the
migration of the canonical apex.amp loop.

apex.amp cannot be imported any more, so the original loop cannot run; the claim checked
here is that the rewritten function is the native recipe and runs: GradScaler and
autocast constructed for the device, the loss scaled, the optimizer stepped through the
scaler. The run is on CPU, where autocast and GradScaler exist too ("cuda" becomes "cpu"
for the run only)."""

from __future__ import annotations

from types import ModuleType

import pytest

from amplint.api import check_source, fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp003_apex_amp import ApexAmp
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = ApexAmp


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


def test_apex_module_introspection_is_not_a_use() -> None:
    # DeepSpeed logs `amp.__path__`; only the import is reported.
    source = "from apex import amp\n\nprint(amp.__path__)\nmodel, opt = amp.initialize(model, opt)\n"
    found = check_source(source.encode(), "train.py", select=["AMP003"])
    assert [(d.code, d.location.row) for d in found] == [("AMP003", 1), ("AMP003", 4)]


APEX_LOOP = '''import torch
from apex import amp

scaler = 2.0


def train(model, optimizer, loader):
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x) * scaler, y)
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
'''

# Written by hand: `scaler` is taken by a module global, so the GradScaler is `grad_scaler`.
NATIVE_LOOP = '''import torch

scaler = 2.0


def train(model, optimizer, loader):
    grad_scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        with torch.amp.autocast("cuda"):
            loss = torch.nn.functional.mse_loss(model(x) * scaler, y)
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
'''


def test_the_canonical_loop_becomes_the_native_recipe() -> None:
    fixed = fix_text(APEX_LOOP, select=["AMP003"], unsafe_fixes=True)
    assert fixed == NATIVE_LOOP
    assert fix_text(fixed, select=["ALL"], unsafe_fixes=True) == fixed


def test_the_migrated_loop_trains_on_cpu(torch: ModuleType) -> None:
    namespace: dict[str, object] = {}
    exec(compile(NATIVE_LOOP.replace('"cuda"', '"cpu"'), "native.py", "exec"), namespace)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(32, 4)
    loader = [(inputs, 2.0 * inputs.sum(dim=1, keepdim=True))] * 20
    before = torch.nn.functional.mse_loss(model(inputs) * 2.0, loader[0][1]).item()
    train = namespace["train"]
    assert callable(train)
    train(model, optimizer, loader)
    after = torch.nn.functional.mse_loss(model(inputs) * 2.0, loader[0][1]).item()
    assert after < before / 2


OPTIONAL_IMPORT = """\
try:
    from apex import amp
except ImportError:
    HANDLER
USE
"""


@pytest.mark.parametrize(
    ("handler", "use", "reported"),
    [
        ("pass", "", False),
        ("amp = None", "", False),
        # The fallback is read: the name matters (SimMIM's `assert amp is not None`).
        ("amp = None", "assert amp is not None", True),
        ("pass", "model, opt = amp.initialize(model, opt)", True),
        # The handler stops the program: it fails on a current apex.
        ('raise ImportError("install apex")', "", True),
    ],
)
def test_an_optional_apex_import_that_nothing_reads_is_silent(handler: str, use: str, reported: bool) -> None:
    source = OPTIONAL_IMPORT.replace("HANDLER", handler).replace("USE", use)
    rows = [d.location.row for d in check_source(source, "train.py", select=["AMP003"])]
    assert (2 in rows) is reported


OLD_TORCH_BRANCH = """\
import torch
from packaging import version

if {test}:
    from apex import amp
    _use_apex = True
else:
    _use_native_amp = True
"""


@pytest.mark.parametrize(
    ("test", "reported"),
    [
        # private-transformers (round BG): the branch runs only on a torch before 1.6.
        ('version.parse(torch.__version__) < version.parse("1.6")', False),
        ('torch.__version__ < "1.5"', False),
        ("TORCH_VERSION < (1, 6)", False),
        # Newer torch, or a user option: it may run.
        ('version.parse(torch.__version__) < version.parse("2.0")', True),
        ('version.parse(torch.__version__) >= version.parse("1.6")', True),
        ("args.apex", True),
    ],
)
def test_apex_in_a_branch_only_torch_before_native_amp_runs(test: str, reported: bool) -> None:
    codes = [d.code for d in check_source(OLD_TORCH_BRANCH.format(test=test), "trainer.py", select=["AMP003"])]
    assert (codes != []) is reported, codes
