"""Which layers of a model cannot take low precision: one float32 run against one autocast run.

Mixed precision breaks at particular layers — attention logits or an ``exp`` beyond
float16's 65504, a long reduction, a catastrophic cancellation — and the symptom
(skipped steps, a NaN loss) says nothing about where. :func:`precision_report` runs the
model twice on the same inputs, once in float32 and once under autocast, with a forward
hook on every module and a torch function mode that sees every op, and compares them
module by module. Its ``keep_fp32`` list feeds ``MixedPrecision(keep_fp32=...)``.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from amplint.runtime._amp import autocast
from amplint.runtime._devices import amp_dtype, autocast_usable
from amplint.runtime._probe import (
    LOW_PRECISION_NAMES,
    RngReplay,
    call_model,
    eval_mode,
    float_tensors,
    model_device,
    synchronize,
)
from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = ["ModuleReport", "OpReport", "PrecisionReport", "precision_report"]

# Attribute reads (``x.T``, ``x.shape``) reach a torch function mode as ``__get__``; they
# compute nothing.
_NOT_OPS = frozenset({"__get__", "__set__", "__delete__"})


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _op_name(func: Callable[..., Any]) -> str | None:
    name = getattr(func, "__name__", None)
    if not isinstance(name, str) or name in _NOT_OPS:
        return None
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        return name[2:-2]
    return name


@dataclass(frozen=True, slots=True)
class ModuleReport:
    """One module's float32-vs-autocast comparison (see :func:`precision_report`).

    ``rel_error`` and ``input_rel_error``: ``||amp - fp32|| / ||fp32||`` over the
    module's floating-point outputs (inputs), worst call; ``inf`` where autocast produced
    inf/NaN that float32 did not. ``max_abs``: the largest magnitude, computed in float32,
    of any value the module's ops store in the low-precision dtype; ``overflow_risk`` is
    that over the dtype's largest finite value (1 or more overflows).
    ``low_precision_fraction``: the share of the module's op time (children included)
    spent in ops with low-precision results. ``low_precision_ops``/``float32_ops``: the
    ops called directly in this module's forward, by the dtype they produced.
    ``reasons``: why it is suspect; ``keep_fp32``: whether it is in the report's list.
    """

    name: str
    type: str
    calls: int
    output_dtypes: tuple[str, ...]
    rel_error: float | None
    input_rel_error: float | None
    nonfinite: bool
    max_abs: float | None
    overflow_risk: float | None
    low_precision_fraction: float | None
    low_precision_ops: tuple[str, ...]
    float32_ops: tuple[str, ...]
    reasons: tuple[str, ...]
    keep_fp32: bool


@dataclass(frozen=True, slots=True)
class OpReport:
    """One op's calls under autocast: how many, how many produced low precision, their time."""

    name: str
    calls: int
    low_precision_calls: int
    seconds: float
    low_precision_seconds: float
    dtypes: tuple[str, ...]


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _fmt(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return format(value, spec)


@dataclass(frozen=True)
class PrecisionReport:
    """What :func:`precision_report` found. ``str(report)`` is the plain-text table."""

    device: str
    dtype: str
    max_rel_error: float
    overflow_margin: float
    output_rel_error: float | None
    ops_aligned: bool
    modules: list[ModuleReport] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)
    keep_fp32: list[str] = field(default_factory=list)

    def module(self, name: str) -> ModuleReport:
        """The row for the module with qualified name ``name``."""
        for row in self.modules:
            if row.name == name:
                return row
        raise KeyError(name)

    @property
    def low_precision_fraction(self) -> float | None:
        """The share of the whole model's op time spent producing low-precision results."""
        total = sum(op.seconds for op in self.ops)
        return sum(op.low_precision_seconds for op in self.ops) / total if total else None

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values; non-finite floats stay floats (see :meth:`to_json`)."""
        return {
            "device": self.device,
            "dtype": self.dtype,
            "max_rel_error": self.max_rel_error,
            "overflow_margin": self.overflow_margin,
            "output_rel_error": self.output_rel_error,
            "low_precision_fraction": self.low_precision_fraction,
            "ops_aligned": self.ops_aligned,
            "keep_fp32": list(self.keep_fp32),
            "modules": [asdict(m) for m in self.modules],
            "ops": [asdict(o) for o in self.ops],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON: inf and NaN are written as the strings ``"inf"`` and ``"nan"``."""
        return json.dumps(_json_safe(self.to_dict()), indent=indent, allow_nan=False)

    def _module_rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for m in self.modules:
            rows.append(
                (
                    m.name or "(model)",
                    m.type,
                    ",".join(m.output_dtypes) or "-",
                    _fmt(m.rel_error, ".2e"),
                    _fmt(m.overflow_risk, ".2e"),
                    _fmt(
                        None
                        if m.low_precision_fraction is None
                        else 100 * m.low_precision_fraction,
                        ".0f",
                    )
                    + ("%" if m.low_precision_fraction is not None else ""),
                    ("KEEP FP32: " if m.keep_fp32 else "") + ", ".join(m.reasons),
                    " ".join(m.low_precision_ops) or "-",
                )
            )
        return rows

    def _op_rows(self) -> list[tuple[str, ...]]:
        total = sum(op.seconds for op in self.ops) or 1.0
        return [
            (
                op.name,
                str(op.calls),
                str(op.low_precision_calls),
                f"{100 * op.seconds / total:.1f}%",
                ",".join(op.dtypes),
            )
            for op in self.ops
        ]

    _MODULE_HEADER = (
        "module",
        "type",
        "out dtype",
        "rel err",
        "max/range",
        "low-prec time",
        "flags",
        "low-precision ops",
    )
    _OP_HEADER = ("op", "calls", "low-prec calls", "time", "dtypes")

    def _title(self) -> str:
        fraction = self.low_precision_fraction
        share = "-" if fraction is None else f"{100 * fraction:.0f}%"
        return (
            f"precision report: autocast {self.dtype} on {self.device}; output rel error "
            f"{_fmt(self.output_rel_error, '.2e')}; {share} of op time in low precision"
        )

    def _advice(self) -> str:
        if not self.keep_fp32:
            return "keep in float32: nothing"
        return (
            f"keep in float32: {self.keep_fp32}  -> "
            "MixedPrecision(..., model=model, keep_fp32=report.keep_fp32)"
        )

    def to_text(self) -> str:
        """The report as plain-text tables."""
        lines = [self._title(), ""]
        lines += _plain_table([self._MODULE_HEADER, *self._module_rows()])
        lines += ["", "autocast coverage (ops under autocast):"]
        lines += _plain_table([self._OP_HEADER, *self._op_rows()])
        lines += ["", self._advice()]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_text()

    def print(self, file: TextIO | None = None, *, rich: bool | None = None) -> None:
        """Print the tables: with ``rich`` if it is installed (or ``rich=True``), else plain text.

        ``rich=False`` forces plain text; ``rich=True`` raises ``ImportError`` without it.
        """
        out = file if file is not None else sys.stdout
        if rich is not False:
            try:
                # Optional and imported only here: the report must work without it.
                console_module = importlib.import_module("rich.console")
                table_module = importlib.import_module("rich.table")
            except ImportError:
                if rich:
                    raise
            else:
                Table = table_module.Table
                # Written to a file or pipe, rich would wrap at 80 columns; give it the
                # plain table's width plus room for its borders instead.
                is_terminal = getattr(out, "isatty", lambda: False)()
                width = None if is_terminal else max(map(len, self.to_text().splitlines())) + 12
                console = console_module.Console(file=out, width=width)
                console.print(self._title())
                for title, header, rows in (
                    ("modules", self._MODULE_HEADER, self._module_rows()),
                    ("autocast coverage", self._OP_HEADER, self._op_rows()),
                ):
                    table = Table(title=title)
                    for column in header:
                        table.add_column(column)
                    for row in rows:
                        keep = any(cell.startswith("KEEP FP32") for cell in row)
                        table.add_row(*row, style="bold red" if keep else None)
                    console.print(table)
                console.print(self._advice(), markup=False)
                return
        out.write(self.to_text())


def _plain_table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


# -- recording ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Op:
    name: str
    modules: tuple[str, ...]
    low: bool
    seconds: float
    dtypes: tuple[str, ...]
    amax: Any  # a 0-d tensor (float32 run only)


@dataclass(slots=True)
class _Call:
    inputs: list[Any]
    outputs: list[Any]


class _Run:
    """One forward pass: the module stack, every op, and each module call's tensors."""

    def __init__(self, device: torch.device, *, values: bool) -> None:
        self.device = device
        self.values = values
        self.sync = device.type != "cpu"
        self.stack: list[str] = []
        self.pending_inputs: list[list[Any]] = []
        self.ops: list[_Op] = []
        self.calls: dict[str, list[_Call]] = {}
        self.order: list[str] = []
        # Set while the hooks do their own tensor work, which is not the model's.
        self.paused = False

    def enter(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if name not in self.calls:
            self.calls[name] = []
            self.order.append(name)
        self.stack.append(name)
        self.paused = True
        self.pending_inputs.append([t.detach() for t in float_tensors((args, kwargs))])
        self.paused = False

    def exit(self, name: str, output: Any) -> None:
        if not self.stack or self.stack[-1] != name:
            return
        self.stack.pop()
        inputs = self.pending_inputs.pop()
        self.paused = True
        self.calls[name].append(_Call(inputs, [t.detach() for t in float_tensors(output)]))
        self.paused = False

    def op(self, name: str, result: Any, started: float) -> None:
        import torch

        tensors = [t for t in float_tensors(result) if not t._is_view()]
        if not tensors:
            return
        if self.sync:
            synchronize(self.device)
        seconds = time.perf_counter() - started
        dtypes = tuple(sorted({_dtype_name(t.dtype) for t in tensors}))
        amax = None
        if self.values:
            maxima = [
                t.detach().abs().float().nan_to_num(nan=0.0, posinf=math.inf).amax()
                for t in tensors
                if t.numel()
            ]
            amax = torch.stack(maxima).amax() if maxima else None
        low = any(d in LOW_PRECISION_NAMES for d in dtypes)
        self.ops.append(_Op(name, tuple(self.stack), low, seconds, dtypes, amax))


@functools.lru_cache(maxsize=1)
def _recorder_class() -> type:
    from torch.overrides import TorchFunctionMode

    class OpRecorder(TorchFunctionMode):
        """Times every torch function call and hands its result to the run."""

        def __init__(self, run: _Run) -> None:
            super().__init__()
            self.run = run

        def __torch_function__(
            self,
            func: Callable[..., Any],
            types: Any,
            args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None,
        ) -> Any:
            name = None if self.run.paused else _op_name(func)
            started = time.perf_counter()
            result = func(*args, **(kwargs or {}))
            if name is not None:
                self.run.op(name, result, started)
            return result

    return OpRecorder


def _record(model: torch.nn.Module, sample_inputs: Any, run: _Run) -> None:
    handles = []
    try:
        for name, module in model.named_modules():
            handles.append(
                module.register_forward_pre_hook(
                    functools.partial(_pre_hook, run, name), with_kwargs=True
                )
            )
            handles.append(
                module.register_forward_hook(
                    functools.partial(_post_hook, run, name), always_call=True
                )
            )
        if run.sync:
            synchronize(run.device)
        with _recorder_class()(run):
            call_model(model, sample_inputs)
    finally:
        for handle in handles:
            handle.remove()


def _pre_hook(run: _Run, name: str, module: Any, args: Any, kwargs: Any) -> None:
    run.enter(name, args, kwargs)


def _post_hook(run: _Run, name: str, module: Any, args: Any, output: Any) -> None:
    run.exit(name, output)


# -- comparing -------------------------------------------------------------------------------


class _Scalars:
    """0-d tensors collected during analysis and read back in one transfer."""

    def __init__(self) -> None:
        self._tensors: list[Any] = []

    def add(self, tensor: Any) -> int:
        self._tensors.append(tensor)
        return len(self._tensors) - 1

    def read(self) -> list[float]:
        import torch

        if not self._tensors:
            return []
        values: list[float] = torch.stack(
            [t.detach().double().cpu().reshape(()) for t in self._tensors]
        ).tolist()
        return values


def _compare(scalars: _Scalars, amp: list[Any], ref: list[Any]) -> tuple[int, int, int] | None:
    """Indices of (count of new non-finite values, squared error, squared reference)."""
    import torch

    if (
        not ref
        or len(amp) != len(ref)
        or any(a.shape != r.shape for a, r in zip(amp, ref, strict=True))
    ):
        return None
    zero = torch.zeros((), dtype=torch.float64, device=amp[0].device)
    bad, num, den = zero, zero, zero
    for a, r in zip(amp, ref, strict=True):
        a64, r64 = a.double(), r.double().to(a.device)
        finite_ref = torch.isfinite(r64)
        both = torch.isfinite(a64) & finite_ref
        bad = bad + (finite_ref & ~both).sum().to(zero)
        num = num + torch.where(both, a64 - r64, 0).pow(2).sum().to(zero)
        den = den + torch.where(both, r64, 0).pow(2).sum().to(zero)
    return scalars.add(bad), scalars.add(num), scalars.add(den)


def _rel_error(
    values: list[float], found: tuple[int, int, int] | None
) -> tuple[float | None, bool]:
    if found is None:
        return None, False
    bad, num, den = (values[i] for i in found)
    if bad > 0:
        return math.inf, True
    if den == 0:
        return (0.0 if num == 0 else math.inf), False
    return math.sqrt(num / den), False


def _worst(errors: list[float | None]) -> float | None:
    known = [e for e in errors if e is not None]
    return max(known) if known else None


def _is_descendant(name: str, ancestor: str) -> bool:
    return name != ancestor and (ancestor == "" or name.startswith(ancestor + "."))


@needs_torch
def precision_report(
    model: torch.nn.Module,
    sample_inputs: Any,
    dtype: torch.dtype | None = None,
    *,
    max_rel_error: float = 0.05,
    overflow_margin: float = 0.5,
) -> PrecisionReport:
    """Compare every module of ``model`` in float32 and under autocast on ``sample_inputs``.

    ``sample_inputs`` is one tensor, a tuple/list of positional arguments, or a dict of
    keyword arguments. The model runs on its own device, in eval mode and without
    gradients, twice from the same random state; its training flags, the global random
    state and its parameters are left as they were. ``dtype`` defaults to
    :func:`amp_dtype` of that device.

    A module is suspect when autocast makes its output inf/NaN while its inputs are
    finite (``overflow``), when a value it stores in low precision reaches
    ``overflow_margin`` of the dtype's range in float32 (``range``), or when its
    relative error first exceeds ``max_rel_error`` (its inputs' error is below it:
    ``error``). ``report.keep_fp32`` lists the innermost suspect modules.
    """
    import torch

    device = model_device(model, sample_inputs)
    chosen = dtype if dtype is not None else amp_dtype(device)
    if chosen == torch.float32 or not chosen.is_floating_point:
        raise ValueError(f"precision_report compares float32 with a lower precision, not {chosen}")
    if not autocast_usable(device.type):
        raise ValueError(f"autocast cannot run on {device}: nothing to compare")
    finfo_max = float(torch.finfo(chosen).max)

    reference = _Run(device, values=True)
    mixed = _Run(device, values=False)
    with eval_mode(model), torch.no_grad():
        rng = RngReplay(device)
        try:
            with torch.autocast(device.type, enabled=False):
                _record(model, sample_inputs, reference)
            rng.rewind()
            with autocast(device, chosen):
                _record(model, sample_inputs, mixed)
        finally:
            rng.rewind()

    aligned = [op.name for op in reference.ops] == [op.name for op in mixed.ops]
    scalars = _Scalars()
    # Largest float32 magnitude of the values each module stores in low precision.
    peak: dict[str, int] = {}
    peaks: dict[str, Any] = {}
    for i, op in enumerate(reference.ops):
        if op.amax is None or (aligned and not mixed.ops[i].low):
            continue
        for name in op.modules:
            current = peaks.get(name)
            peaks[name] = op.amax if current is None else torch.maximum(current, op.amax)
    for name, value in peaks.items():
        peak[name] = scalars.add(value)

    comparisons: dict[str, list[tuple[Any, Any]]] = {}
    for name in mixed.order:
        pairs = zip(mixed.calls.get(name, []), reference.calls.get(name, []), strict=False)
        comparisons[name] = [
            (_compare(scalars, m.outputs, r.outputs), _compare(scalars, m.inputs, r.inputs))
            for m, r in pairs
        ]
    values = scalars.read()

    modules = dict(model.named_modules())
    rows: dict[str, dict[str, Any]] = {}
    for name in mixed.order:
        out_errors, in_errors, nonfinite, nonfinite_in = [], [], False, False
        for out_found, in_found in comparisons[name]:
            error, bad = _rel_error(values, out_found)
            in_error, in_bad = _rel_error(values, in_found)
            out_errors.append(error)
            in_errors.append(in_error)
            nonfinite |= bad
            nonfinite_in |= in_bad
        rel_error, input_rel_error = _worst(out_errors), _worst(in_errors)
        max_abs = values[peak[name]] if name in peak else None
        risk = None if max_abs is None else max_abs / finfo_max
        reasons = []
        if nonfinite and not nonfinite_in:
            reasons.append("overflow")
        if risk is not None and risk >= overflow_margin:
            reasons.append("range")
        if (
            rel_error is not None
            and not nonfinite
            and rel_error > max_rel_error
            and (input_rel_error is None or input_rel_error <= max_rel_error)
        ):
            reasons.append("error")
        own_ops = [op for op in mixed.ops if op.modules and op.modules[-1] == name]
        inclusive = [op for op in mixed.ops if name in op.modules]
        total = sum(op.seconds for op in inclusive)
        rows[name] = {
            "name": name,
            "type": type(modules[name]).__name__,
            "calls": len(mixed.calls.get(name, [])),
            "output_dtypes": tuple(
                sorted({_dtype_name(t.dtype) for c in mixed.calls.get(name, []) for t in c.outputs})
            ),
            "rel_error": rel_error,
            "input_rel_error": input_rel_error,
            "nonfinite": nonfinite,
            "max_abs": max_abs,
            "overflow_risk": risk,
            "low_precision_fraction": (
                sum(op.seconds for op in inclusive if op.low) / total if total else None
            ),
            "low_precision_ops": tuple(dict.fromkeys(op.name for op in own_ops if op.low)),
            "float32_ops": tuple(dict.fromkeys(op.name for op in own_ops if not op.low)),
            "reasons": tuple(reasons),
        }
    suspects = [name for name, row in rows.items() if row["reasons"]]
    keep = [n for n in suspects if not any(_is_descendant(other, n) for other in suspects)]

    op_totals: dict[str, dict[str, Any]] = {}
    for op in mixed.ops:
        entry = op_totals.setdefault(
            op.name, {"calls": 0, "low": 0, "seconds": 0.0, "low_seconds": 0.0, "dtypes": set()}
        )
        entry["calls"] += 1
        entry["low"] += op.low
        entry["seconds"] += op.seconds
        entry["low_seconds"] += op.seconds if op.low else 0.0
        entry["dtypes"].update(op.dtypes)
    ops = [
        OpReport(
            name,
            e["calls"],
            e["low"],
            e["seconds"],
            e["low_seconds"],
            tuple(sorted(e["dtypes"])),
        )
        for name, e in sorted(op_totals.items(), key=lambda item: -item[1]["seconds"])
    ]
    root = rows.get("")
    return PrecisionReport(
        device=str(device),
        dtype=_dtype_name(chosen),
        max_rel_error=max_rel_error,
        overflow_margin=overflow_margin,
        output_rel_error=None if root is None else root["rel_error"],
        ops_aligned=aligned,
        modules=[ModuleReport(**row, keep_fp32=row["name"] in keep) for row in rows.values()],
        ops=ops,
        keep_fp32=keep,
    )
