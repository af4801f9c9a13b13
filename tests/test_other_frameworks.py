"""Another framework's code (PaddlePaddle, MindSpore, ...) mirrors torch's AMP names with
other semantics: no rule applies to a file that imports one of them and nothing of torch."""

from __future__ import annotations

import pytest

from amplint.api import check_source

# insightface's arcface_paddle: a paddle.amp.GradScaler subclass whose step() also updates.
PADDLE_TRAINING = """\
{imports}
from utils.amp import LSCGradScaler

def train(model, opt, loader):
    scaler = LSCGradScaler(init_loss_scaling=1024)
    for x in loader:
        with paddle.amp.auto_cast():
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(opt)
"""


@pytest.mark.parametrize(
    ("imports", "reported"),
    [
        ("import paddle", []),
        ("import mindspore as ms\nimport paddle", []),
        ("from paddle import amp\nimport paddle", []),
        # A file that also imports torch is torch code.
        ("import paddle\nimport torch", ["AMP303"]),
        ("import paddle\nfrom torch import nn", ["AMP303"]),
        ("import torch", ["AMP303"]),
    ],
)
def test_a_file_of_another_framework_is_not_torch_code(imports: str, reported: list[str]) -> None:
    source = PADDLE_TRAINING.format(imports=imports)
    assert [d.code for d in check_source(source, "train.py", select=["ALL"])] == reported
