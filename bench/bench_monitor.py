#!/usr/bin/env python3
"""What StabilityMonitor costs per training step: time, and host-device transfers.

    python bench/bench_monitor.py [--device DEVICE] [--steps N] [--repeat N]
                                  [--width N] [--batch N] [--json]

Trains a small MLP with ``MixedPrecision`` on ``--device`` (default: the best one
present) in every low-precision dtype autocast runs there, three ways:

- ``torch``: the hand-written loop (``GradScaler`` scale/step/update, no clipping) —
  the reference;
- ``no monitor``: ``MixedPrecision(monitor=False)``, which still reads the loss scale to
  detect skipped steps;
- ``monitor``: ``MixedPrecision()`` — loss, true gradient norm and scale recorded and
  checked every step.

Reported per row: the median over ``--repeat`` runs of milliseconds per step, the
overhead against ``torch`` in microseconds per step, and how many times per step the
host waited for a tensor's value: ``Tensor.item``/``Tensor.tolist`` calls counted on
every device and, on CUDA, the synchronisations torch's sync debug mode reports. The
monitor's budget is one per step on top of torch's own (``GradScaler.step`` reads
``found_inf`` once). Then ``record()`` alone, fed Python numbers: the bookkeeping cost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from amplint import runtime

SCENARIOS = ("torch", "no monitor", "monitor")


@contextlib.contextmanager
def counting_transfers() -> Iterator[list[int]]:
    """Count ``Tensor.item`` and ``Tensor.tolist`` calls inside the block."""
    count = [0]
    originals = {name: getattr(torch.Tensor, name) for name in ("item", "tolist")}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return original(self, *args, **kwargs)

        return counted

    for name, original in originals.items():
        setattr(torch.Tensor, name, wrap(original))
    try:
        yield count
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def cuda_syncs(action: Callable[[], None]) -> int:
    """Synchronising CUDA calls made by ``action``, as torch's sync debug mode reports them."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            action()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


class Loop:
    """One model, optimizer and batch; ``step()`` is one training step of a scenario."""

    def __init__(
        self, scenario: str, device: torch.device, dtype: torch.dtype, width: int, batch: int
    ) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(width, width),
            torch.nn.GELU(),
            torch.nn.Linear(width, width),
            torch.nn.GELU(),
            torch.nn.Linear(width, 1),
        ).to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(batch, width, device=device)
        self.y = torch.randn(batch, 1, device=device)
        self.device, self.dtype, self.scenario = device, dtype, scenario
        self.scaler = runtime.grad_scaler(device, dtype)
        self.mp = runtime.MixedPrecision(device, dtype, monitor=scenario == "monitor")

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.scenario == "torch":
            with runtime.autocast(self.device, self.dtype):
                out = self.model(self.x)
            loss = torch.nn.functional.mse_loss(out.float(), self.y)
            self.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return
        with self.mp.autocast():
            out = self.model(self.x)
        self.mp.backward(torch.nn.functional.mse_loss(out.float(), self.y))
        self.mp.step(self.optimizer)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    device: torch.device, dtype: torch.dtype, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Every scenario at ``dtype``; the repeats take turns so that drift hits all alike."""
    loops = {s: Loop(s, device, dtype, args.width, args.batch) for s in SCENARIOS}
    runs: dict[str, list[float]] = {s: [] for s in SCENARIOS}
    for loop in loops.values():
        for _ in range(5):  # warm-up: kernels, allocator, the scaler's lazy state
            loop.step()
    for _ in range(args.repeat):
        for scenario, loop in loops.items():
            synchronize(device)
            start = time.perf_counter()
            for _ in range(args.steps):
                loop.step()
            synchronize(device)
            runs[scenario].append((time.perf_counter() - start) / args.steps)
    rows = []
    for scenario, loop in loops.items():
        with counting_transfers() as count:
            for _ in range(10):
                loop.step()
        row: dict[str, Any] = {
            "dtype": str(dtype).removeprefix("torch."),
            "scenario": scenario,
            "ms_per_step": statistics.median(runs[scenario]) * 1e3,
            "transfers_per_step": count[0] / 10,
            "cuda_syncs_per_step": None,
        }
        if device.type == "cuda":

            def ten_steps(loop: Loop = loop) -> None:
                for _ in range(10):
                    loop.step()

            row["cuda_syncs_per_step"] = cuda_syncs(ten_steps) / 10
        rows.append(row)
    return rows


def record_cost(repeat: int) -> float:
    """Microseconds per ``StabilityMonitor.record`` fed Python numbers (no tensors)."""
    monitor = runtime.StabilityMonitor()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(2000):
            monitor.record(1.0 + (i % 7) * 0.01, grad_norm=1.0 + (i % 5) * 0.1, scale=65536.0)
        times.append((time.perf_counter() - start) / 2000)
    return statistics.median(times) * 1e6


def dtypes_for(device: torch.device) -> list[torch.dtype]:
    found = []
    for dtype in (torch.float16, torch.bfloat16):
        if (
            dtype == torch.bfloat16
            and device.type == "cuda"
            and not runtime.capabilities(device).bf16_supported
        ):
            continue
        found.append(dtype)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()

    device = torch.device(args.device) if args.device else runtime.default_device()
    caps = runtime.capabilities(device)
    print(
        f"torch {torch.__version__}, Python {platform.python_version()}, device {device} "
        f"({caps.name}), {args.steps} steps x {args.repeat}, MLP width {args.width}, "
        f"batch {args.batch}, {torch.get_num_threads()} threads",
        flush=True,
    )
    rows = [row for dtype in dtypes_for(device) for row in measure(device, dtype, args)]
    baseline = {r["dtype"]: r["ms_per_step"] for r in rows if r["scenario"] == "torch"}
    for row in rows:
        row["overhead_us_per_step"] = (row["ms_per_step"] - baseline[row["dtype"]]) * 1e3

    header = (
        "dtype",
        "scenario",
        "ms/step",
        "overhead us/step",
        "transfers/step",
        "cuda syncs/step",
    )
    table = [header] + [
        (
            r["dtype"],
            r["scenario"],
            f"{r['ms_per_step']:.3f}",
            f"{r['overhead_us_per_step']:+.1f}",
            f"{r['transfers_per_step']:g}",
            "-" if r["cuda_syncs_per_step"] is None else f"{r['cuda_syncs_per_step']:g}",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    cost = record_cost(args.repeat)
    print(f"StabilityMonitor.record with Python numbers: {cost:.1f} us per step")
    if args.json:
        print(json.dumps({"rows": rows, "record_us": cost}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
