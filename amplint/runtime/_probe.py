"""What precision_report and amp_check share: calling a model on sample inputs and watching it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

LOW_PRECISION_NAMES = ("float16", "bfloat16")


def call_model(model: Any, sample_inputs: Any) -> Any:
    """``model(sample_inputs)``: a tensor is one argument, a tuple or list the positional
    arguments, a mapping the keyword arguments."""
    if isinstance(sample_inputs, Mapping):
        return model(**sample_inputs)
    if isinstance(sample_inputs, (tuple, list)):
        return model(*sample_inputs)
    return model(sample_inputs)


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in ``value``, looking inside tuples, lists and dicts, in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flat_tensors(item)]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in flat_tensors(item)]
    return []


def float_tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in flat_tensors(value) if t.is_floating_point()]


def model_device(model: torch.nn.Module, sample_inputs: Any) -> torch.device:
    """Where ``model`` runs: its first parameter or buffer, else its first input tensor, else CPU."""
    import torch

    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    for tensor in flat_tensors(sample_inputs):
        return tensor.device
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (a no-op on the CPU), so a clock reading means something."""
    import torch

    if device.type == "cpu":
        return
    backend = getattr(torch, device.type, None)
    sync = getattr(backend, "synchronize", None)
    if sync is not None:
        sync(device) if device.type in ("cuda", "xpu") else sync()


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """``model.eval()`` for the block, then every submodule's own training flag back."""
    flags = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in flags:
            module.training = training


class RngReplay:
    """Start several runs from the same random state, and leave the global state as it was."""

    def __init__(self, device: torch.device) -> None:
        import torch

        self._device = device
        self._backend = None if device.type == "cpu" else getattr(torch, device.type, None)
        self._cpu = torch.get_rng_state()
        self._other = self._get_device_state()

    def _get_device_state(self) -> Any:
        get_state = getattr(self._backend, "get_rng_state", None)
        if get_state is None:
            return None
        return get_state(self._device) if self._device.type in ("cuda", "xpu") else get_state()

    def rewind(self) -> None:
        import torch

        torch.set_rng_state(self._cpu)
        set_state = getattr(self._backend, "set_rng_state", None)
        if self._other is not None and set_state is not None:
            if self._device.type in ("cuda", "xpu"):
                set_state(self._other, self._device)
            else:
                set_state(self._other)
