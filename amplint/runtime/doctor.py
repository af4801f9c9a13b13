"""``amplint doctor``: what this machine supports for mixed precision.

"Should I use bfloat16 here? Is TF32 on the table? Which NCCL-like backend?" are
answered by hardware facts that are tedious to look up per machine; this prints them
from what torch reports, next to the dtype amplint.runtime would pick. Importing this
module never imports torch, so the CLI can import it and report a missing torch itself.
"""

from __future__ import annotations

import platform
import sys

from amplint.runtime._devices import (
    Capabilities,
    capabilities,
    default_device,
    dist_backend,
    tf32_flags,
)
from amplint.runtime._torch import TorchNotInstalledError, needs_torch

__all__ = ["TorchNotInstalledError", "doctor_report", "main"]

EXIT_OK = 0
EXIT_NO_TORCH = 2

_HEADER = (
    "device",
    "name",
    "compute",
    "bf16",
    "fp16",
    "tf32",
    "tensor cores",
    "memory",
    "recommended",
    "GradScaler",
)


def _devices() -> list[str]:
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        found += [f"xpu:{i}" for i in range(torch.xpu.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _unknown_or_yes(flag: bool | None) -> str:
    return "-" if flag is None else _yes(flag)


def _memory(total: int | None) -> str:
    return "-" if total is None else f"{total / 2**30:.1f} GiB"


def _row(device: str, caps: Capabilities) -> tuple[str, ...]:
    capability = caps.compute_capability
    return (
        device,
        caps.name,
        "-" if capability is None else f"{capability[0]}.{capability[1]}",
        _yes(caps.bf16_supported),
        _yes(caps.fp16_supported),
        _yes(caps.tf32_supported),
        _unknown_or_yes(caps.tensor_cores),
        _memory(caps.total_memory),
        str(caps.recommended_dtype).removeprefix("torch."),
        "needed" if caps.needs_grad_scaler else "not needed",
    )


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


@needs_torch
def doctor_report() -> str:
    """The report as text. Raises :class:`TorchNotInstalledError` without torch."""
    import torch

    builds = [
        f"CUDA {torch.version.cuda}" if torch.version.cuda else None,
        f"ROCm {torch.version.hip}" if torch.version.hip else None,
        f"XPU {getattr(torch.version, 'xpu', None)}"
        if getattr(torch.version, "xpu", None)
        else None,
    ]
    build = ", ".join(b for b in builds if b) or "CPU only"
    default = default_device()
    devices = _devices()
    found = capabilities(default)
    lines = [
        f"torch {torch.__version__} ({build}), Python {platform.python_version()}",
        f"default device: {default.type} ({found.device_count} present); "
        f"distributed backend: {dist_backend(default)}",
        "",
    ]
    rows = {d: capabilities(d) for d in devices}
    lines += _table([_HEADER, *(_row(d, caps) for d, caps in rows.items())])
    lines += ["", _tf32_line(any(caps.tf32_supported for caps in rows.values()))]
    return "\n".join(lines) + "\n"


def _tf32_line(supported: bool) -> str:
    if not supported:
        return "TF32: no device here supports it"
    matmul, cudnn = tf32_flags()
    line = f"TF32: CUDA matmuls {'on' if matmul else 'off'}, cuDNN {'on' if cudnn else 'off'}"
    if not (matmul and cudnn):
        line += " (amplint.runtime.enable_tf32() turns them on)"
    return line


def main() -> int:
    """Print the report; 0 on success, 2 (message on stderr) when torch is missing."""
    try:
        report = doctor_report()
    except TorchNotInstalledError as error:
        print(f"amplint doctor: {error}", file=sys.stderr)
        return EXIT_NO_TORCH
    sys.stdout.write(report)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
