"""Findings on real training code that the rules must (or must not) report.

Each case is the smallest reproduction of something seen while running amplint over
public repositories (named in the test), kept so that it stays decided.
"""

from __future__ import annotations

from amplint.api import check_source


def _codes(source: str, select: str) -> list[tuple[str, int]]:
    return [(d.code, d.location.row) for d in check_source(source.encode(), "train.py", select=[select])]


def test_apex_module_introspection_is_not_a_use() -> None:
    # DeepSpeed logs `amp.__path__`; only the import is reported.
    source = "from apex import amp\n\nprint(amp.__path__)\nmodel, opt = amp.initialize(model, opt)\n"
    assert _codes(source, "AMP003") == [("AMP003", 1), ("AMP003", 4)]


def test_nccl_after_a_cuda_device_count_assertion_is_fine() -> None:
    # yolov7's train.py asserts the CUDA device count before choosing NCCL (and chooses a
    # device elsewhere, so the file does mean to run without CUDA).
    choice = "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    source = (
        "import torch\nimport torch.distributed as dist\n" + choice + "\nif rank != -1:\n"
        "    assert torch.cuda.device_count() > rank\n    dist.init_process_group(backend='nccl')\n"
    )
    assert _codes(source, "AMP201") == []
    unguarded = "import torch\nimport torch.distributed as dist\n" + choice + "\nif rank != -1:\n    dist.init_process_group(backend='nccl')\n"
    assert _codes(unguarded, "AMP201") == [("AMP201", 6)]


def test_a_device_bound_to_cuda_is_not_a_device_choice() -> None:
    # timm's tests: `device = torch.device('cuda')` under a CUDA skipif.
    source = (
        "import torch\n\ndef test_cache():\n    device = torch.device('cuda')\n    x = x.to(device)\n"
        "    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n        pass\n"
    )
    assert _codes(source, "AMP201") == []
    chosen = source.replace("torch.device('cuda')", "torch.device(args.device)")
    assert _codes(chosen, "AMP201") == [("AMP201", 6)]


def test_a_region_that_turns_cuda_autocast_off_is_fine() -> None:
    # diffusers' timestep embeddings.
    source = "import torch\n\ndef embed(t):\n    with torch.amp.autocast('cuda', enabled=False):\n        return t.device\n"
    assert _codes(source, "AMP201") == []
