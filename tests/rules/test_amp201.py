"""AMP201 hardcoded-amp-device: its examples, and findings on real training
code that it must (or must not) report: each the smallest reproduction of something seen
while running amplint over public repositories (named in the test), kept so that it stays
decided."""

from __future__ import annotations

import pytest

from amplint.api import check_source
from amplint.engine.rule import Invalid
from amplint.rules.amp201_hardcoded_amp_device import HardcodedAmpDevice
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = HardcodedAmpDevice


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


def _rows(source: str) -> list[tuple[str, int]]:
    return [(d.code, d.location.row) for d in check_source(source.encode(), "train.py", select=["AMP201"])]


def test_nccl_after_a_cuda_device_count_assertion_is_fine() -> None:
    # yolov7's train.py asserts the CUDA device count before choosing NCCL (and chooses a
    # device elsewhere, so the file does mean to run without CUDA).
    choice = "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    source = (
        "import torch\nimport torch.distributed as dist\n" + choice + "\nif rank != -1:\n"
        "    assert torch.cuda.device_count() > rank\n    dist.init_process_group(backend='nccl')\n"
    )
    assert _rows(source) == []
    unguarded = "import torch\nimport torch.distributed as dist\n" + choice + "\nif rank != -1:\n    dist.init_process_group(backend='nccl')\n"
    assert _rows(unguarded) == [("AMP201", 6)]


def test_a_device_bound_to_cuda_is_not_a_device_choice() -> None:
    # timm's tests: `device = torch.device('cuda')` under a CUDA skipif.
    source = (
        "import torch\n\ndef test_cache():\n    device = torch.device('cuda')\n    x = x.to(device)\n"
        "    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n        pass\n"
    )
    assert _rows(source) == []
    chosen = source.replace("torch.device('cuda')", "torch.device(args.device)")
    assert _rows(chosen) == [("AMP201", 6)]


def test_a_region_that_turns_cuda_autocast_off_is_fine() -> None:
    # diffusers' timestep embeddings.
    source = "import torch\n\ndef embed(t):\n    with torch.amp.autocast('cuda', enabled=False):\n        return t.device\n"
    assert _rows(source) == []


GUARDED_SYNCHRONIZE = """\
import torch

def train_one_epoch(model, loader, device):
    for x in loader:
        x = x.to(device)
        with torch.amp.autocast("cuda"):
            loss = model(x).sum()
        loss.backward()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
"""


def test_a_guarded_cuda_synchronize_does_not_make_the_code_cuda_only() -> None:
    assert [d.code for d in check_source(GUARDED_SYNCHRONIZE, "train.py", select=["AMP201"])] == ["AMP201"]
    unguarded = GUARDED_SYNCHRONIZE.replace("        if torch.cuda.is_available():\n            torch", "        torch")
    assert check_source(unguarded, "train.py", select=["AMP201"]) == []


def test_torch_the_cuda_state_calls_raise_without_cuda(torch) -> None:  # type: ignore[no-untyped-def]
    from amplint.analysis.devices import CUDA_STATE_CALLS

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    for qualified in sorted(CUDA_STATE_CALLS):
        function = getattr(torch.cuda, qualified.rsplit(".", 1)[1])
        # A CPU-only build lacks the binding (AttributeError); a CUDA build without a GPU raises.
        with pytest.raises((AssertionError, RuntimeError, AttributeError)):
            arguments = {"get_device_properties": (0,), "set_per_process_memory_fraction": (0.5, 0)}
            function(*arguments.get(qualified.rsplit(".", 1)[1], ()))


SCALER_BESIDE_AUTOCAST = """\
import torch

def train(model, loader, optimizer, device="cpu"):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.autocast(device_type=DEVICE_TYPEDTYPE):
            loss = model(x.to(device)).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


@pytest.mark.parametrize(
    ("device_type", "dtype", "scaler_reported"),
    [
        ('"cuda" if torch.cuda.is_available() else "cpu"', "", False),
        # float16 on the other device too: the CUDA scaler is off there.
        ('"cuda" if torch.cuda.is_available() else "cpu"', ", dtype=torch.float16", True),
        # MPS autocast defaults to float16.
        ('"cuda" if torch.cuda.is_available() else "mps"', "", True),
        # A hardcoded CUDA autocast: its fix would leave this scaler behind.
        ('"cuda"', "", True),
        ("device.type", "", True),
    ],
)
def test_a_cuda_scaler_is_reported_unless_float16_runs_only_on_cuda(device_type: str, dtype: str, scaler_reported: bool) -> None:
    source = SCALER_BESIDE_AUTOCAST.replace("DEVICE_TYPE", device_type).replace("DTYPE", dtype)
    rows = [d.location.row for d in check_source(source, "train.py", select=["AMP201"])]
    assert (4 in rows) is scaler_reported


def test_torch_a_float32_autocast_runs_nothing_in_reduced_precision(torch) -> None:  # type: ignore[no-untyped-def]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with torch.autocast("cpu", dtype=torch.float32):
            # CPU rejects the dtype and disables itself; CUDA accepts it and keeps float32.
            assert not torch.is_autocast_enabled("cpu")
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.float32


CALLED_WITH_CUDA = """
import torch
import torch.multiprocessing as mp

def train(model, loader, device="cpu"):
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x.to(device), y)
        loss.backward()

def main():
    CALL
"""


@pytest.mark.parametrize(
    ("call", "reported"),
    [
        ('train(build(), load(), torch.device("cuda"))', False),
        ('train(build(), load(), device="cuda:0")', False),
        # The function is also handed on: whoever calls it then picks the device.
        ('train(build(), load(), "cuda"); mp.spawn(train, nprocs=2)', True),
        # Arguments spread from a sequence: which one is the device is not known.
        ('train(*args)', True),
        # No call in this file: the caller lives elsewhere.
        ("pass", True),
        ('train(build(), load(), "cpu")', True),
    ],
)
def test_a_device_parameter_every_call_fills_with_cuda_is_cuda_bound(call: str, reported: bool) -> None:
    source = CALLED_WITH_CUDA.replace("CALL", call)
    found = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert bool(found) is reported, found


SAME_FLAG = """
import torch
import torch.distributed as dist

def entry_point(config):
    if FIRST:
        if torch.cuda.is_available():
            pass
        else:
            raise RuntimeError("CUDA is not available")
    if SECOND:
        dist.init_process_group(backend="nccl")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    run(device)
"""


@pytest.mark.parametrize(
    ("first", "second", "reported"),
    [
        ('config["distributed"]', 'config["distributed"]', False),
        ("args.distributed", "args.distributed", False),
        # Another flag: the guard says nothing about this branch.
        ('config["distributed"]', 'config["dist"]', True),
        # A call may answer differently the second time.
        ("is_distributed()", "is_distributed()", True),
    ],
)
def test_nccl_under_a_flag_whose_earlier_branch_raises_without_cuda(first: str, second: str, reported: bool) -> None:
    source = SAME_FLAG.replace("FIRST", first).replace("SECOND", second)
    found = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert bool(found) is reported, found


def test_torch_entering_a_cuda_device_raises_without_cuda(torch) -> None:  # type: ignore[no-untyped-def]
    if torch.cuda.is_available():
        pytest.skip("a machine with CUDA")
    with pytest.raises(RuntimeError), torch.cuda.device(0):
        pass
    with torch.cuda.device(-1):  # the index that selects nothing
        pass


@pytest.mark.parametrize(
    "call",
    ["torch.cuda.mem_get_info()", "torch.cuda.ipc_collect()", "torch.cuda.set_per_process_memory_fraction(0.9, 0)"],
)
def test_torch_cuda_queries_that_raise_without_cuda_make_a_function_cuda_only(torch, call: str) -> None:  # type: ignore[no-untyped-def]
    source = f"""
import torch

def profile(model, x, device="cpu"):
    {call}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(x.to(device))
"""
    assert [d.code for d in check_source(source, "profile.py", select=["AMP201"])] == []
    without = source.replace(f"    {call}\n", "")
    assert [d.code for d in check_source(without, "profile.py", select=["AMP201"])] == ["AMP201"]
    if not torch.cuda.is_available():
        with pytest.raises((AssertionError, RuntimeError)):
            eval(call, {"torch": torch})


SCRIPT_HELPER = """\
import torch
import torch.distributed as dist
from torch.cuda.amp import GradScaler


def setup(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)


def main():
    scaler = GradScaler(){call}
{guard}"""


@pytest.mark.parametrize(
    ("call", "guard", "reported"),
    [
        # ViT-Lens: a script's helper that nothing calls does not run when the script does.
        ("", 'if __name__ == "__main__":\n    main()\n', False),
        # Called by the script: it runs.
        ("\n    setup(0, 1)", 'if __name__ == "__main__":\n    main()\n', True),
        # Named again (handed on, or exported): it may run.
        ("\n    launch(setup)", 'if __name__ == "__main__":\n    main()\n', True),
        # Not a script: a module's functions are there for others to call.
        ("", "", True),
    ],
)
def test_nccl_in_a_helper_the_script_never_calls(call: str, guard: str, reported: bool) -> None:
    assert (_rows(SCRIPT_HELPER.format(call=call, guard=guard)) == [("AMP201", 7)]) is reported


TENSOR_DEVICE = """\
import torch

def preprocess(model, batch):
    wavs = batch["wavs"]
    size = wavs.shape[0]
    device = {value}
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        return model(wavs).to(device)
"""


@pytest.mark.parametrize(
    ("value", "reported"),
    [
        # ACE-Step: the device a tensor lives on, as `wavs.device` itself, is no choice of device.
        ("wavs.device", False),
        # A module's (or anything not used as a tensor) may be the device the program chose.
        ("model.device", True),
        ('wavs.device if size else torch.device("cpu")', True),
    ],
)
def test_a_device_read_from_a_tensor_is_no_device_variable(value: str, reported: bool) -> None:
    assert (_rows(TENSOR_DEVICE.format(value=value)) == [("AMP201", 7)]) is reported


def test_the_fix_does_not_read_the_device_of_a_name_bound_again_since() -> None:
    # RVT's `update`: `pc` is a tensor where `pc.device` is read, then a list of tensors;
    # `pc.device` at the autocast would raise AttributeError.
    from amplint.api import fix_source_text
    from amplint.engine.project import ProjectFacts

    body = "    img = img.to(pc.device)\n{rebind}    with torch.autocast('cuda'):\n        return net(pc, img)\n"
    source = "import torch\n\ndef update(net, pc, img):\n" + body
    rebound = source.format(rebind="    pc = [p * 2 for p in pc]\n")
    kept = source.format(rebind="")
    project = ProjectFacts(runtime_helpers=True)
    assert "device_type(pc.device)" in fix_source_text(kept, select=["AMP201"], unsafe_fixes=True, project=project).new_text
    fixed = fix_source_text(rebound, select=["AMP201"], unsafe_fixes=True, project=project).new_text
    assert fixed in ("", rebound)


STRING_MATCHED = """\
import torch

device = {binding}
{extra}device_type = 'cuda' if 'cuda' in device else 'cpu'
ctx = torch.autocast(device_type=device_type, dtype=torch.float16)
"""


@pytest.mark.parametrize(
    ("binding", "extra", "reported"),
    [
        # baby-llama2-chinese: only CUDA or CPU reach the test, so the mapping is exact.
        ("'cuda' if torch.cuda.is_available() else 'cpu'", "", False),
        ("'cuda:0'", "", False),
        # Another device may reach it.
        ("'cuda' if torch.cuda.is_available() else 'mps'", "", True),
        ("args.device", "", True),
        # A configurator may rebind it at run time (nanoGPT's `exec(open('configurator.py').read())`).
        ("'cuda' if torch.cuda.is_available() else 'cpu'", "exec(open('configurator.py').read())\n", True),
    ],
)
def test_a_string_matched_device_of_cuda_or_cpu_only_maps_exactly(binding: str, extra: str, reported: bool) -> None:
    assert (_rows(STRING_MATCHED.format(binding=binding, extra=extra)) != []) is reported


MAIN_CALLS_SETUP = """\
import torch
import torch.distributed as distributed


def main(local_rank):
    device = "cuda"
    {main_body}
    with torch.amp.autocast(device_type=device, dtype=torch.bfloat16):
        pass


def distributed_setup():
    distributed.init_process_group(backend="nccl")
    return distributed.get_rank()


if __name__ == "__main__":
    {guard_body}
"""


@pytest.mark.parametrize(
    ("main_body", "guard_body", "reported"),
    [
        # MMAudio's batch_eval.py: the script's entry point needs CUDA, and it is the only caller.
        ("torch.cuda.set_device(local_rank)", "main(distributed_setup())", False),
        ("torch.cuda.set_device(local_rank)", "rank = distributed_setup()\n    main(rank)", False),
        # The entry point runs anywhere.
        ("pass", "main(distributed_setup())", True),
        # Called under a condition, or also handed on: it may run without CUDA.
        ("torch.cuda.set_device(local_rank)", "if rank:\n        distributed_setup()\n    main(0)", True),
        ("torch.cuda.set_device(local_rank)", "launch(distributed_setup)\n    main(distributed_setup())", True),
    ],
)
def test_nccl_in_a_function_only_the_cuda_script_entry_calls(main_body: str, guard_body: str, reported: bool) -> None:
    source = MAIN_CALLS_SETUP.format(main_body=main_body, guard_body=guard_body)
    assert (("AMP201", 13) in _rows(source)) is reported


def test_a_device_read_from_a_tensor_in_a_tuple_assignment_is_no_device_variable() -> None:
    # SimpleTuner's `B, device = latents.shape[0], latents.device`: the same as two statements.
    source = TENSOR_DEVICE.replace("    device = {value}\n", "    size, device = wavs.shape[0], {value}\n")
    assert _rows(source.format(value="wavs.device")) == []
    assert _rows(source.format(value="model.device")) == [("AMP201", 7)]


STR_OF_TENSOR_DEVICE = """\
import torch

def forward(model, x):
    with torch.autocast(device_type=str(x.device), dtype=torch.float16):
        return model(x)
"""


@pytest.mark.parametrize(
    ("declared", "reported"),
    [
        # earth2studio declares torch>=2.5, whose autocast takes "cuda:0": no problem left.
        ((2, 5), False),
        ((2, 4), False),
        # torch 2.3 and older reject "cuda:0", and an undeclared torch may be one of them.
        ((2, 3), True),
        ((1, 13), True),
        (None, True),
    ],
)
def test_str_of_a_device_is_reported_only_where_an_older_torch_may_run_it(
    declared: tuple[int, int] | None, reported: bool
) -> None:
    from amplint.engine.project import ProjectFacts

    found = check_source(STR_OF_TENSOR_DEVICE, "model.py", select=["AMP201"], project=ProjectFacts(target_torch=declared))
    assert [(d.code, d.location.row) for d in found] == ([("AMP201", 4)] if reported else [])


def test_torch_autocast_takes_an_indexed_device_type(torch) -> None:  # type: ignore[no-untyped-def]
    # What makes (c) silent on a declared torch>=2.4: "cpu:0" (the CPU analogue of
    # str(torch.device("cuda:0"))) turns the device's autocast on, with the dtype asked for.
    x = torch.randn(4, 4)
    with torch.autocast(device_type=str(x.device) + ":0", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("cpu")
        assert (x @ x).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


SELF_DEVICE_STRING_MATCHED = """\
import torch

class LightningModel:
    def __init__(self):
        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'

    def generate(self, model, x):
        device_type = 'cuda' if 'cuda' in self.device else 'cpu'
        ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        with ctx:
            return model(x)
{extra}"""


@pytest.mark.parametrize(
    ("extra", "reported"),
    [
        # gptcore: `self.device` is only ever CUDA or CPU, so the string test maps it exactly.
        ("", False),
        # A method that sets it to any device makes the mapping lossy again.
        ("\n    def to(self, device):\n        self.device = device\n", True),
        # So does another object's `.device` set in the file (it may be this class's).
        ("\ndef move(m, device):\n    m.device = device\n", True),
    ],
)
def test_a_self_device_bound_only_to_cuda_or_cpu_is_mapped_exactly(extra: str, reported: bool) -> None:
    source = SELF_DEVICE_STRING_MATCHED.format(extra=extra)
    assert _rows(source) == ([("AMP201", 8)] if reported else [])


DEVICE_STRING_TEST = """\
import torch

def train(model, x, device):
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
        return model(x)
"""


@pytest.mark.parametrize(
    ("newest", "reported"),
    [
        # Sophia and Adam-mini run torch 2.1: its own builds autocast on CUDA and CPU only
        # (MPS autocast came in 2.5, XPU joined torch in 2.4), so "cpu" loses nothing.
        ((2, 1), False),
        ((2, 3), False),
        ((2, 4), True),
        ((2, 5), True),
        (None, True),
    ],
)
def test_a_device_string_test_is_reported_only_where_torch_may_autocast_elsewhere(
    newest: tuple[int, int] | None, reported: bool
) -> None:
    from amplint.engine.project import ProjectFacts

    found = check_source(DEVICE_STRING_TEST, "train.py", select=["AMP201"], project=ProjectFacts(newest_torch=newest))
    assert [(d.code, d.location.row) for d in found] == ([("AMP201", 4)] if reported else [])



PROPERTY_DEVICE = """\
import torch
import torch.nn as nn

class VLM(nn.Module):
    @property
    def device(self):
        return {returned}

    def generate(self, input_ids):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.llm.generate(input_ids.to(self.device))
{extra}"""


@pytest.mark.parametrize(
    ("returned", "extra", "reported"),
    [
        # Where the caller put the model (openvla): silent while the file chooses no device.
        ("next(self.parameters()).device", "", False),
        ("next(self.llm.parameters()).device", "", False),
        ("next(self.parameters()).device", "\ndef main():\n    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n    return VLM().to(device)\n", True),
        # A property that picks the device itself is a device choice.
        ("torch.device('cuda' if torch.cuda.is_available() else 'cpu')", "", True),
    ],
)
def test_a_device_property_reading_the_parameters_is_the_callers_choice(returned: str, extra: str, reported: bool) -> None:
    source = PROPERTY_DEVICE.format(returned=returned, extra=extra)
    assert [d.code for d in check_source(source, "vlm.py", select=["AMP201"])] == (["AMP201"] if reported else [])


ENABLED_BY_FLAG = """\
import torch

class Embedder:
    def __init__(self):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def embed(self, model, batches, fp16):
        use_amp = {flag}
        autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp)
        for x in batches:
            with autocast:
                model(x.to(self.device))
"""


@pytest.mark.parametrize(
    ("flag", "reported"),
    [
        # AMP on only where the device is CUDA: the literal is exactly right (round AZ).
        ('bool(fp16 and self.device.type == "cuda")', False),
        ('fp16 and self.device.type == "cuda"', False),
        ("bool(fp16)", True),
    ],
)
def test_an_enabled_flag_that_tests_the_device_through_bool(flag: str, reported: bool) -> None:
    source = ENABLED_BY_FLAG.format(flag=flag)
    assert [d.code for d in check_source(source, "embed.py", select=["AMP201"])] == (["AMP201"] if reported else [])


CONFIG_DICT_DEVICE = """\
import torch

def get_config():
    return {{"epoch": 15, "device": {value}}}

def train_val(config, model, loader, optimizer):
    device = config["device"]
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.amp.autocast("cuda"):
            loss = model(x.to(device))
        scaler.scale(loss).backward()
{extra}"""


@pytest.mark.parametrize(
    ("value", "extra", "reported"),
    [
        # HybridHash: the file's only "device" entry is CUDA, so `config["device"]` is CUDA.
        ('torch.device("cuda:0")', "", False),
        ('"cuda"', "", False),
        # Another entry, or an assignment of the key, may choose another device.
        ('torch.device("cuda:0")', '\ndef cpu_config():\n    return {"device": "cpu"}\n', True),
        ('torch.device("cuda:0")', '\ndef override(config, args):\n    config["device"] = args.device\n', True),
        ("args.device", "", True),
    ],
)
def test_a_device_read_from_a_config_key_the_file_sets_only_to_cuda(value: str, extra: str, reported: bool) -> None:
    source = CONFIG_DICT_DEVICE.format(value=value, extra=extra)
    codes = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


SPAWNED_WORKER = """\
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def main_worker(index, opt):
    if opt.distributed:
        dist.init_process_group(backend="nccl", world_size=opt.world_size, rank=index)
    model = build(opt).to(opt.device)


if __name__ == "__main__":
    opt = get_opt()
    opt.device = torch.device("cpu" if opt.no_cuda else "cuda")
    opt.ngpus_per_node = torch.cuda.device_count()
{extra}    if opt.distributed:
        mp.spawn(main_worker, nprocs=opt.ngpus_per_node, args=(opt,))
{direct}
"""


@pytest.mark.parametrize(
    ("extra", "direct", "reported"),
    [
        # 3D-ResNets: one worker per CUDA device; the direct call runs only where the
        # worker's `if opt.distributed:` is false.
        ("", "    else:\n        main_worker(-1, opt)", False),
        ("", "", False),
        # The count attribute is set to something else too: not one worker per GPU.
        ("    opt.ngpus_per_node = 4\n", "    else:\n        main_worker(-1, opt)", True),
        # A direct call outside the `else` runs the NCCL branch without CUDA.
        ("", "    main_worker(-1, opt)", True),
        # An `else` of another test does not exclude the worker's branch.
        ("", "    elif opt.single:\n        pass\n    else:\n        main_worker(-1, opt)", False),
        ("", "    if opt.other:\n        pass\n    else:\n        main_worker(-1, opt)", True),
    ],
)
def test_nccl_in_a_worker_spawned_per_cuda_device_through_an_attribute(extra: str, direct: str, reported: bool) -> None:
    source = SPAWNED_WORKER.format(extra=extra, direct=direct)
    codes = [d.code for d in check_source(source, "main.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


STRING_MATCHED_PARAMETER = """\
import torch


def setup(device_name, dtype="bfloat16"):
    device_type = 'cuda' if 'cuda' in device_name else 'cpu'
    return torch.amp.autocast(device_type=device_type)

{calls}
"""


@pytest.mark.parametrize(
    ("calls", "reported"),
    [
        # Tiny-GRPO: the file's one call passes CUDA or CPU, so the mapping is exact.
        ('env = setup("cuda" if torch.cuda.is_available() else "cpu")', False),
        ('env = setup("cuda:0")\nother = setup(device_name="cpu")', False),
        # A call that may pass another device, or none in this file: reported as before.
        ('env = setup("cuda" if torch.cuda.is_available() else "mps")', True),
        ("env = setup(args.device)", True),
        ("", True),
    ],
)
def test_a_string_test_on_a_parameter_the_file_fills_with_cuda_or_cpu(calls: str, reported: bool) -> None:
    codes = [d.code for d in check_source(STRING_MATCHED_PARAMETER.format(calls=calls), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


IMPORTED_WITH_CUDA = """\
import torch

{first}
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

def train(model, x):
    with torch.autocast('cuda', dtype=torch.bfloat16):
        return model(x.to(device))
{after}"""


@pytest.mark.parametrize(
    ("first", "after", "reported"),
    [
        # LDM.py (round BF): `torch.cuda.get_device_name()` at import raises without CUDA.
        ("print(torch.cuda.get_device_name())", "", False),
        ("torch.cuda.set_device(0)", "", False),
        # physicsnemo's DoMINO trainer (round BL): NVIDIA's management library needs the driver.
        ("from pynvml import nvmlInit\nnvmlInit()", "", False),
        ("from pynvml import nvmlInit\nif torch.cuda.is_available():\n    nvmlInit()", "", True),
        # Under a condition, or after the function, it does not make the function CUDA-only.
        ("if torch.cuda.is_available():\n    print(torch.cuda.get_device_name())", "", True),
        ("", "print(torch.cuda.get_device_name())\n", True),
        ("print(torch.cuda.is_available())", "", True),
    ],
)
def test_a_module_that_requires_cuda_at_import_makes_later_functions_cuda_only(first: str, after: str, reported: bool) -> None:
    codes = [d.code for d in check_source(IMPORTED_WITH_CUDA.format(first=first, after=after), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


SCALER_BUILT_ON_CUDA = """\
import torch
from torch.amp import GradScaler, autocast


class Trainer:
    def __init__(self, config, model):
        self.config = config
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(self.device)
        self.scaler = None

    def setup_amp(self):
        if {test}:
            self.scaler = GradScaler()
        else:
            self.scaler = None
{extra}
    def step(self, batch):
        if self.scaler is not None:
            with autocast(device_type="cuda", dtype=torch.bfloat16):
                return self.model(batch.to(self.device))
        return self.model(batch.to(self.device))
"""


@pytest.mark.parametrize(
    ("test", "extra", "reported"),
    [
        # vqa-model-builder (round BF): the scaler exists only on CUDA, so the branch runs there.
        ('self.config.use_amp and self.device.type == "cuda"', "", False),
        ("torch.cuda.is_available()", "", False),
        # Built on any device, or also elsewhere: the branch may run off CUDA.
        ("self.config.use_amp", "", True),
        (
            'self.device.type == "cuda"',
            "\n    def resume(self, state):\n        self.scaler = GradScaler()\n        self.scaler.load_state_dict(state)\n",
            True,
        ),
    ],
)
def test_a_branch_on_a_scaler_built_only_on_cuda_is_a_device_test(test: str, extra: str, reported: bool) -> None:
    codes = [d.code for d in check_source(SCALER_BUILT_ON_CUDA.format(test=test, extra=extra), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


FLAG_PARAMETER = """\
import torch
from contextlib import nullcontext


def train_one_epoch(model, loader, device, amp_enabled: bool):
    for images in loader:
        with (torch.autocast("cuda", dtype=torch.bfloat16) if amp_enabled else nullcontext()):
            loss = model(images.to(device))
        loss.backward()


def run(config, model, loader):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp_enabled = {flag}
    train_one_epoch(model, loader, device, amp_enabled=bool(amp_enabled))
"""


@pytest.mark.parametrize(
    ("flag", "reported"),
    [
        # ME-IIS (round BF): the caller turns AMP on only on CUDA and passes the flag down.
        ('bool(config.amp) and device.type == "cuda"', False),
        ("torch.cuda.is_available() and config.amp", False),
        # A flag that says nothing of the device: AMP may be asked for off CUDA.
        ("bool(config.amp)", True),
    ],
)
def test_an_amp_flag_parameter_the_file_fills_with_a_device_test(flag: str, reported: bool) -> None:
    codes = [d.code for d in check_source(FLAG_PARAMETER.format(flag=flag), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


@pytest.mark.parametrize(
    ("read", "reported"),
    [
        # 2Mamba2Furious (round BG): where a weight lives is no choice of device.
        ("layer.self_attn.q_proj.weight.device", False),
        ("model.head.bias.device", False),
        ("p.grad.device", False),
        # A configured device read through an object is one.
        ("trainer.args.device", True),
    ],
)
def test_the_device_of_a_weight_is_no_device_variable(read: str, reported: bool) -> None:
    source = f"import torch\n\ndef step(model, layer, p, trainer, x):\n    x = x.to({read})\n    with torch.autocast('cuda', dtype=torch.bfloat16):\n        return model(x)\n"
    codes = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


WARM_UP = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def benchmark(model, x, runs):
    x = x.to(device)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        model(x)
    for _ in range(runs):
{loop}        with torch.autocast("cuda", dtype=torch.bfloat16):
            model(x)
"""


@pytest.mark.parametrize(
    ("loop", "reported"),
    [
        # instanseg (round BG): `torch.cuda.synchronize()` raises without CUDA, wherever it runs.
        ("        torch.cuda.synchronize()\n", False),
        ("        print(torch.cuda.current_device())\n", False),
        # Under a device test it proves nothing.
        ("        if device.type == 'cuda':\n            torch.cuda.synchronize()\n", True),
        ("", True),
    ],
)
def test_a_cuda_state_call_anywhere_in_the_function_makes_it_cuda_only(loop: str, reported: bool) -> None:
    codes = [d.code for d in check_source(WARM_UP.format(loop=loop), "infer.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


DTYPE_SET_ON_CUDA = """\
import torch

def generate(pipeline, args, weight_dtype):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    autocast_dtype = None
    if {test}:
        autocast_dtype = weight_dtype
    with torch.no_grad():
        if autocast_dtype is None:
            return pipeline(args.prompt, device=device)
        else:
            with torch.autocast("cuda", dtype=autocast_dtype):
                return pipeline(args.prompt, device=device)
"""


@pytest.mark.parametrize(
    ("test", "reported"),
    [
        # Video_inpainting_DPO (round BG): the dtype is set only on CUDA, so the else runs there.
        ('device.type == "cuda" and weight_dtype in {torch.float16, torch.bfloat16}', False),
        # Set on any device: the autocast may run off CUDA.
        ("weight_dtype in {torch.float16, torch.bfloat16}", True),
    ],
)
def test_the_else_of_a_none_test_on_a_value_set_only_on_cuda(test: str, reported: bool) -> None:
    codes = [d.code for d in check_source(DTYPE_SET_ON_CUDA.format(test=test), "generate.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


GUARDED_PAIRS = """\
import torch
from torch.amp import GradScaler, autocast


class Trainer:
    def __init__(self, config, model):
        self.device = torch.device(config.device)
        self.model = model.to(self.device)
        self.scaler = {scaler}

    def step(self, x, optimizer):
        if {guard}:
            with autocast('cuda'):
                loss = self.model(x.to(self.device))
        else:
            loss = self.model(x.to(self.device))
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()
"""


@pytest.mark.parametrize(
    ("scaler", "guard", "reported"),
    [
        # TradingBOT (round BH): the scaler meets float16 only in a block opened on CUDA.
        ("GradScaler('cuda')", "self.device.type == 'cuda'", False),
        ("GradScaler('cuda') if config.amp and self.device.type == 'cuda' else None", "self.scaler is not None", False),
        # A block opened on any device: the scaler is reported with it.
        ("GradScaler('cuda')", "config.amp", True),
        ("GradScaler('cuda') if config.amp and not self.device.type == 'cuda' else None", "self.scaler is not None", True),
    ],
)
def test_a_scaler_whose_blocks_open_only_on_cuda(scaler: str, guard: str, reported: bool) -> None:
    codes = [d.code for d in check_source(GUARDED_PAIRS.format(scaler=scaler, guard=guard), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


SCALER_FLAG = """\
import torch
from torch.amp import GradScaler, autocast


def train(model, x, scaler, device):
    amp_enabled = scaler is not None and scaler.is_enabled()
    with autocast(device_type='cuda', enabled=amp_enabled):
        return model(x.to(device))


def main(model, x, config):
    cuda_available = torch.cuda.is_available()
    device = torch.device('cuda' if cuda_available else 'cpu')
    scaler = GradScaler('cuda', enabled={enabled})
    train(model, x, scaler, device)
"""


@pytest.mark.parametrize(
    ("enabled", "reported"),
    [
        # Transformer4LongTailed (round BH): the scaler is on only with CUDA, and the
        # autocast's flag is the scaler's.
        ("bool(config.use_amp) and cuda_available", False),
        ("bool(config.use_amp)", True),
    ],
)
def test_an_enabled_flag_read_from_a_scaler_enabled_only_on_cuda(enabled: str, reported: bool) -> None:
    codes = [d.code for d in check_source(SCALER_FLAG.format(enabled=enabled), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


@pytest.mark.parametrize(
    ("binding", "reported"),
    [
        # EfficientSED (round BI): a cast of a batch entry is still that data.
        ('y = batch["y"].float()', False),
        ('y = batch["y"].long()', False),
        # A batch entry read as it is may be anything.
        ('y = batch["y"]', True),
    ],
)
def test_the_device_of_a_cast_batch_entry_is_where_data_lives(binding: str, reported: bool) -> None:
    source = (
        "import torch\n\ndef step(model, batch):\n"
        f"    {binding}\n"
        "    zero = torch.tensor(0.0, device=y.device)\n"
        "    with torch.autocast('cuda', dtype=torch.float16):\n"
        "        return model(batch) + zero\n"
    )
    codes = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


BOUND_AFTER = """\
import torch

def validation_step(model, batch, bones):
{before}    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(batch)
{loop}    for bones_b in bones:
        device = bones_b.device
        out = out.to(device)
    return out
"""


@pytest.mark.parametrize(
    ("before", "loop", "reported"),
    [
        # UniRig (round BH): `device` is bound only after the block, where the block never runs again.
        ("", "", False),
        # Bound before too, or the block inside the loop that binds it: a device variable.
        ("    device = batch.device if batch.is_cuda else torch.device('cpu')\n", "", True),
    ],
)
def test_a_device_bound_only_after_the_autocast_is_no_device_variable_there(before: str, loop: str, reported: bool) -> None:
    codes = [d.code for d in check_source(BOUND_AFTER.format(before=before, loop=loop), "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


def test_a_device_bound_later_in_a_loop_around_the_autocast_is_a_device_variable() -> None:
    source = (
        "import torch\n\ndef run(model, batches, args):\n    for batch in batches:\n"
        "        with torch.autocast('cuda', dtype=torch.float16):\n            out = model(batch)\n"
        "        device = args.device if args.device else 'cpu'\n        out = out.to(device)\n"
    )
    codes = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert codes == ["AMP201"], codes


TENSOR_BOUND_IN_BLOCK = """\
import torch

class WorldModel(torch.nn.Module):
    def update(self, obs):
{before}        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            flattened = self.encoder(obs)
            mask = make_mask(obs.shape[1], flattened.device)
            out = self.transformer(flattened, mask)
        return out
"""


@pytest.mark.parametrize(
    ("before", "reported"),
    [
        # STORM (round BJ): the tensor whose `.device` is read is computed inside the block.
        ("", False),
        # Bound before the block as well: its device may be any device at the autocast.
        ("        flattened = obs.to(self.device if torch.cuda.is_available() else 'cpu')\n", True),
    ],
)
def test_the_device_of_a_tensor_computed_inside_the_block_is_no_device_variable(before: str, reported: bool) -> None:
    source = TENSOR_BOUND_IN_BLOCK.format(before=before)
    codes = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


def test_module_level_device_of_a_result_read_after_the_block_is_no_device_variable() -> None:
    # TeaCache's Mochi demo (round BJ): `frames` exists only once the block has run.
    source = (
        "import torch\n\npipe = load()\n"
        "with torch.autocast('cuda', torch.bfloat16):\n    frames = pipe(prompt='a').frames[0]\n"
        "print(frames.device)\n"
    )
    codes = [d.code for d in check_source(source, "demo.py", select=["AMP201"])]
    assert codes == [], codes


TORTOISE = """\
import torch

class Tortoise:
    def __init__(self):
        self.device = {device}

    def inference(self, text, half=True):
        self.model = self.model.to(self.device)
        with torch.autocast(device_type="cuda", dtype={dtype}, enabled=half):
            return self.model(text)
"""


@pytest.mark.parametrize(
    ("device", "dtype", "reported"),
    [
        # coqui's Tortoise (round BJ): off CUDA the device is the CPU, where float16
        # autocast is what nobody asked for; the literal keeps it CUDA-only.
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', "torch.float16", False),
        ('"cuda" if torch.cuda.is_available() else "cpu"', "torch.float16", False),
        # bfloat16 is what CPU autocast runs: the literal loses it there.
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', "torch.bfloat16", True),
        # MPS is a choice too: float16 autocast works there and the literal turns it off.
        ('torch.device("cuda" if torch.cuda.is_available() else "mps")', "torch.float16", True),
    ],
)
def test_float16_on_a_device_that_is_cuda_or_cpu(device: str, dtype: str, reported: bool) -> None:
    codes = [d.code for d in check_source(TORTOISE.format(device=device, dtype=dtype), "tts.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


PARALLEL_SETUP = """\
import torch.distributed as dist
from veomni.distributed.parallel_state import init_parallel_state

def setup(args):
    device = "cuda" if args.gpu else "cpu"
    if args.world_size > 1:
        dist.init_process_group(backend="nccl", init_method="env://")
        init_parallel_state(dp_size=args.world_size, device_type={device_type})
"""


@pytest.mark.parametrize(
    ("device_type", "reported"),
    [
        # dllm-distillation (round BJ): the project's own setup is told it runs on CUDA.
        ('"cuda"', False),
        ("device", True),
    ],
)
def test_a_project_call_given_a_cuda_device_type_requires_cuda(device_type: str, reported: bool) -> None:
    source = PARALLEL_SETUP.format(device_type=device_type)
    codes = [d.code for d in check_source(source, "dist.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


HANDED_SCALER = """\
import torch

def train_one_epoch(model, data, optimizer, scaler{device_parameter}):
    for x, y in data:
        with torch.amp.autocast({autocast_device}):
            loss = model(x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

def main(model, data):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    optimizer = torch.optim.AdamW(model.to(device).parameters())
    scaler = torch.amp.GradScaler("cuda")
    train_one_epoch(model, data, optimizer, scaler)
"""


@pytest.mark.parametrize(
    ("autocast_device", "device_parameter", "rows"),
    [
        # nlp-anderson (round BK): the scaler (row 14) is handed to a function whose autocast
        # is CUDA's alone and not reported (no device variable there): both are CUDA-only.
        ('"cuda"', "", []),
        # The autocast is reported (its function has a device): its fix would leave the
        # CUDA scaler behind, so the scaler is reported too.
        ('"cuda"', ", device=None", [5, 14]),
        # The autocast follows the device: off CUDA it may run float16 that the scaler leaves unscaled.
        ("device.type", ", device=None", [14]),
    ],
)
def test_a_scaler_handed_to_cuda_only_autocasts(autocast_device: str, device_parameter: str, rows: list[int]) -> None:
    source = HANDED_SCALER.format(autocast_device=autocast_device, device_parameter=device_parameter)
    found = [d.location.row for d in check_source(source, "train.py", select=["AMP201"])]
    assert found == rows, found


EVALUATOR = """\
import torch

class Evaluator:
    def __init__(self, data, device):
        self.data = data
        self.device = device

    def evaluate(self, model, use_fp16=False):
        for x in self.data:
            with torch.amp.autocast("cuda", enabled={enabled}):
                model(x.to(self.device))

def main(data, model):
    device = torch.device({device})
    evaluator = Evaluator(data, device)
    evaluator.evaluate(model, use_fp16=True)
"""


@pytest.mark.parametrize(
    ("enabled", "device", "reported"),
    [
        # sarkd5 (round BK): the flag says float16, CUDA's default dtype, and the device the
        # file hands the evaluator is CUDA or the CPU.
        ("use_fp16", '"cuda" if torch.cuda.is_available() else "cpu"', False),
        # A flag that says nothing of float16: off CUDA the block loses bfloat16 CPU autocast.
        ("True", '"cuda" if torch.cuda.is_available() else "cpu"', True),
        ("use_fp16 or use_bf16", '"cuda" if torch.cuda.is_available() else "cpu"', True),
        # The device may be MPS, where float16 autocast runs.
        ("use_fp16", '"cuda" if torch.cuda.is_available() else "mps"', True),
    ],
)
def test_a_float16_flag_on_a_device_handed_in_as_cuda_or_cpu(enabled: str, device: str, reported: bool) -> None:
    source = EVALUATOR.format(enabled=enabled, device=device)
    if "use_bf16" in enabled:
        source = source.replace("use_fp16=False)", "use_fp16=False, use_bf16=False)")
    codes = [d.code for d in check_source(source, "evaluate.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


CONFIGURED = """\
import torch
import yaml
from omegaconf import DictConfig

def main(path, model, loader):
    with open(path) as file:
        cfg = {loaded}
    model = model.to(cfg.device)
    for images, labels in loader:
        with torch.autocast(device_type="cuda"):
            loss = model(images.to(cfg.device)).mean()
        loss.backward()
{extra}"""


@pytest.mark.parametrize(
    ("loaded", "extra", "reported"),
    [
        # learn-new-things (round BL): the device comes from a config file the script reads,
        # and the script never chooses another device itself.
        ("DictConfig(yaml.safe_load(file))", "", False),
        ("yaml.safe_load(file)", "", False),
        # The file also picks the CPU somewhere: the device is a choice it makes.
        ("DictConfig(yaml.safe_load(file))", "    cpu = torch.device('cpu')\n", True),
        # Not read from a file: the script's own object.
        ("make_config(file)", "", True),
    ],
)
def test_a_device_from_a_config_file_arrives_from_outside(loaded: str, extra: str, reported: bool) -> None:
    source = CONFIGURED.format(loaded=loaded, extra=extra)
    codes = [d.code for d in check_source(source, "train.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


def test_a_member_scaler_serving_unreported_cuda_autocasts_is_cuda_only_too() -> None:
    # physicsnemo's crash trainer (round BL): the scaler in `__init__` beside a device
    # chosen at run time, the CUDA autocast in `forward`, which reads no device itself.
    source = (
        "import torch\nfrom torch.amp import GradScaler, autocast\n\n\nclass Trainer:\n"
        "    def __init__(self, cfg, model):\n"
        "        device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "        self.model = model.to(device)\n"
        "        self.scaler = GradScaler('cuda', enabled=cfg.amp)\n\n"
        "    def forward(self, sample):\n        with autocast(device_type='cuda', enabled=True):\n"
        "            return self.model(sample)\n"
    )
    assert [d.code for d in check_source(source, "train.py", select=["AMP201"])] == []
    # The autocast follows the device instead: off CUDA it may run float16 unscaled.
    moved = source.replace("with autocast(device_type='cuda',", "with autocast(device_type=self.model.device.type,")
    assert [d.location.row for d in check_source(moved, "train.py", select=["AMP201"])] == [9]


PARAMETERS_DEVICE = """\
import torch
{choice}

def train_step(model, batch):
    device = next(model.parameters()).device
    ids = batch.to(device)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        return model(ids)
"""


@pytest.mark.parametrize(
    ("choice", "reported"),
    [
        # jetson-llm-train (round BM): the device of the model's own parameters is wherever
        # the code that built the model put it, and this file chooses no other device.
        ("", False),
        # The availability test only makes a question about the GPU safe to ask: no device.
        ("if torch.cuda.is_available() and torch.cuda.get_device_properties(0).is_integrated:\n    pass", False),
        ("integrated = torch.cuda.get_device_properties(0).is_integrated if torch.cuda.is_available() else False", False),
        # Where the file itself may put models elsewhere, the device is a real variable.
        ("DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'", True),
        ("FALLBACK = torch.device('mps')", True),
    ],
)
def test_the_device_of_a_models_own_parameters_arrives_from_outside(choice: str, reported: bool) -> None:
    assert (_rows(PARAMETERS_DEVICE.format(choice=choice)) != []) is reported


PLACEHOLDER_THEN_PARAMETERS_DEVICE = """\
import torch

class Trainer:
    def __init__(self, model):
        self.model = model
        self.device = None

    def setup(self):
        self.scaler = torch.amp.GradScaler("cuda")
        self.device = next(self.model.parameters()).device
{extra}"""


@pytest.mark.parametrize(
    ("extra", "reported"),
    [
        # jetson-llm-train's base trainer: `None` until the model is loaded, then its device.
        ("", False),
        ("\n    def to(self, device):\n        self.device = device\n\nt = Trainer(m)\nt.to(torch.device('cpu'))\n", True),
    ],
)
def test_a_none_placeholder_for_self_device_chooses_nothing(extra: str, reported: bool) -> None:
    assert (_rows(PLACEHOLDER_THEN_PARAMETERS_DEVICE.format(extra=extra)) != []) is reported


def _notebook_rows(cells: list[str]) -> list[tuple[str, int | None, int]]:
    from amplint.api import RunOptions, run_cells

    report = run_cells([("code", cell) for cell in cells], "nb.ipynb", RunOptions(select=("AMP201",), cache=False))
    return [(d.code, d.cell, d.location.row) for d in report.diagnostics]


def test_nccl_in_a_notebook_function_no_cell_calls_does_not_run() -> None:
    # Paper-Replications' Gemma3 notebook (round BM) defines a DDP `setup()` that no cell
    # calls; the notebook runs top to bottom, as a script does.
    setup = (
        "import torch\nimport torch.distributed as dist\n\n"
        "def setup(rank, world_size):\n    dist.init_process_group('nccl', rank=rank, world_size=world_size)\n"
    )
    device = "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    y = model(x.to(device))\n"
    assert [row for row in _notebook_rows([setup, device]) if row[1] == 1] == []
    assert [row[:2] for row in _notebook_rows([setup, device, "setup(0, 1)\n"]) if row[1] == 1] == [("AMP201", 1)]


DDP_OR_CLASS_CONSTANT = """\
import os
import torch
import torch.distributed as dist


def setup_ddp():
    dist.init_process_group(backend='nccl')
    local_rank = int(os.environ['LOCAL_RANK'])
    torch.cuda.set_device(local_rank)
    device = {setup_device}
    return local_rank, device

class ModelArgs:
    device = 'cuda'
    dropout = 0.1
{extra}

def train(model, batch):
    if 'RANK' in os.environ:
        local_rank, device = setup_ddp()
    else:
        device = ModelArgs.device
    x = batch.to(device)
    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):
        return model(x)
"""


@pytest.mark.parametrize(
    ("setup_device", "extra", "reported"),
    [
        # Paper-Replications' Kimi-K2 trainer (round BM): the device is the CUDA device the
        # DDP set-up returns, or a class constant "cuda" that nothing sets again.
        ("torch.device(f'cuda:{local_rank}')", "", False),
        # The class constant is set from outside: a device variable after all.
        ("torch.device(f'cuda:{local_rank}')", "\nModelArgs.device = os.environ.get('DEVICE', 'cpu')\n", True),
        # The set-up may return another device.
        ("torch.device(f'cuda:{local_rank}') if torch.cuda.is_available() else torch.device('cpu')", "", True),
    ],
)
def test_a_device_from_a_set_up_function_or_class_constant_that_is_only_cuda(setup_device: str, extra: str, reported: bool) -> None:
    source = DDP_OR_CLASS_CONSTANT.replace("{setup_device}", setup_device).replace("{extra}", extra)
    assert (_rows(source) != []) is reported


SPAWNED_UNDER_CUDA_TEST = """\
import torch
import torch.distributed as dist


def distributed_training(rank, num_gpus):
    device = torch.device(f"cuda:{{rank}}" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")
    dist.init_process_group(backend="nccl")


if __name__ == "__main__":
    args = parse()
{launch}
"""


@pytest.mark.parametrize(
    ("launch", "reported"),
    [
        # mini-llm (round BM): the workers are spawned only where CUDA is available.
        ("    if torch.cuda.is_available():\n        torch.multiprocessing.spawn(distributed_training, args=(args.n,), nprocs=args.n)\n    else:\n        single(args)", False),
        # Spawned without a test, and once more with one: it may run without CUDA.
        ("    torch.multiprocessing.spawn(distributed_training, args=(args.n,), nprocs=args.n)", True),
        ("    if torch.cuda.is_available():\n        torch.multiprocessing.spawn(distributed_training, args=(args.n,), nprocs=args.n)\n    torch.multiprocessing.spawn(distributed_training, args=(args.n,), nprocs=2)", True),
    ],
)
def test_nccl_in_a_worker_spawned_only_under_a_cuda_test(launch: str, reported: bool) -> None:
    codes = [d.code for d in check_source(SPAWNED_UNDER_CUDA_TEST.format(launch=launch), "trainer.py", select=["AMP201"])]
    assert (codes != []) is reported, codes


AMP_RESOLVED_OFF_CUDA = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_amp(device, precision):
    if device.type != "cuda":
        return {off}
    if precision == "bf16":
        return True, torch.bfloat16
    return True, torch.float16


def resolve_amp_dtype():
    if device.type != "cuda":
        return None
    return torch.float16


def train_step(model, x, precision):
    use_amp, amp_dtype = resolve_amp(device, precision)
    with torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=use_amp):
        return model(x.to(device))


def infer(model, x):
    half = resolve_amp_dtype()
    if half is None:
        return model(x.to(device))
    else:
        with torch.autocast(device_type="cuda", dtype=half):
            return model(x.to(device))
"""


@pytest.mark.parametrize(
    ("off", "rows"),
    [
        # vqafromscratch (round BK) and neural-operator-jetson-benchmark (round BN): a helper
        # of the file turns AMP off (a tuple of False/None, or None) wherever the device is
        # not CUDA, so the literal "cuda" is only reached on CUDA.
        ("False, None", []),
        # A helper that may leave AMP on off CUDA proves nothing.
        ("True, torch.bfloat16", [("AMP201", 22)]),
    ],
)
def test_amp_turned_off_off_cuda_by_a_helper_of_the_file(off: str, rows: list[tuple[str, int]]) -> None:
    assert _rows(AMP_RESOLVED_OFF_CUDA.replace("{off}", off)) == rows
