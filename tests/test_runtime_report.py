"""precision_report on real CPU autocast: what it flags, what it measures, how it prints.

Expected errors are computed here with torch directly (a module run under
``torch.autocast`` against the same module in float32), and the overflow case is a model
whose float16 run really produces inf: the report must name that module, and the model
must then train without skipped steps when the module is kept in float32.
"""

from __future__ import annotations

import io
import json
import sys
import warnings
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import MixedPrecision, PrecisionReport, precision_report


class Similarity(torch.nn.Module):
    """Cosine similarity written by hand: the raw dot products come first."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        norms = h.norm(dim=-1)
        out: torch.Tensor = (h @ h.T) / (norms[:, None] * norms[None, :])
        return out


class Net(torch.nn.Module):
    """Attention over a batch by feature similarity; the features are not normalised."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.similarity = Similarity(width)
        self.value = torch.nn.Linear(width, width)
        self.head = torch.nn.Sequential(
            torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(4 * self.similarity(x), dim=-1)
        out: torch.Tensor = self.head(weights @ self.value(x / 255))
        return out


def _data(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(64, 16, generator=gen) * 255, torch.randn(64, 1, generator=gen)


def _net() -> Net:
    torch.manual_seed(0)
    return Net()


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 64),
        torch.nn.GELU(),
        torch.nn.LayerNorm(64),
        torch.nn.Linear(64, 4),
    )


# -- the overflowing module ----------------------------------------------------------------


def test_float16_overflow_is_real_in_this_model() -> None:
    model, (x, _) = _net(), _data()
    with torch.no_grad():
        assert torch.isfinite(model(x)).all()
        with torch.autocast("cpu", dtype=torch.float16):
            assert not torch.isfinite(model(x)).all()


def test_report_flags_the_overflowing_module_only() -> None:
    report = precision_report(_net(), _data()[0], torch.float16)
    assert report.keep_fp32 == ["similarity"]
    row = report.module("similarity")
    assert "overflow" in row.reasons and "range" in row.reasons and row.keep_fp32
    assert row.nonfinite and row.overflow_risk is not None and row.overflow_risk > 1
    # Its parent is suspect too but is not listed (the innermost module is); the head
    # only inherits the inf and is not suspect at all.
    assert report.module("").reasons and not report.module("").keep_fp32
    assert report.module("head.0").rel_error == float("inf")
    assert report.module("head.0").reasons == ()
    assert report.module("similarity.proj").reasons == ()
    assert report.output_rel_error == float("inf")


def test_bfloat16_has_the_range_and_flags_nothing() -> None:
    report = precision_report(_net(), _data()[0], torch.bfloat16)
    assert report.keep_fp32 == []
    risk = report.module("similarity").overflow_risk
    assert risk is not None and risk < 1e-30


def _train(model: Net, keep: list[str], steps: int = 25) -> list[bool]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = _data()
    mp = MixedPrecision("cpu", torch.float16, model=model, keep_fp32=keep)
    skipped = []
    for _ in range(steps):
        optimizer.zero_grad()
        with mp.autocast():
            out = model(x)
        mp.backward(torch.nn.functional.mse_loss(out.float(), y))
        skipped.append(mp.step(optimizer))
    return skipped


def test_kept_in_float32_the_flagged_model_trains_without_skipped_steps() -> None:
    report = precision_report(_net(), _data()[0], torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not any(_train(_net(), report.keep_fp32))


def test_without_keeping_it_every_step_is_skipped() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert all(_train(_net(), []))


def test_report_of_a_model_with_kept_modules_shows_them_in_float32() -> None:
    model = _net()
    runtime.keep_float32(model, ["similarity"])
    report = precision_report(model, _data()[0], torch.float16)
    assert report.keep_fp32 == []
    row = report.module("similarity")
    assert row.output_dtypes == ("float32",)
    assert row.low_precision_ops == () and "matmul" in row.float32_ops
    assert report.module("similarity.proj").low_precision_fraction == 0.0
    assert report.module("value").low_precision_fraction == 1.0


# -- measurements --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_relative_error_of_one_layer_matches_torch(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 16)
    x = torch.randn(8, 32)
    with torch.no_grad():
        exact = layer(x).double()
        with torch.autocast("cpu", dtype=dtype):
            low = layer(x).double()
    expected = float((low - exact).norm() / exact.norm())
    report = precision_report(layer, x, dtype)
    assert report.module("").rel_error == pytest.approx(expected, rel=1e-9)
    assert report.module("").output_dtypes == (str(dtype).removeprefix("torch."),)
    assert 0 < expected < 0.05


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_healthy_model_is_not_flagged(dtype: torch.dtype) -> None:
    report = precision_report(_mlp(), torch.randn(16, 32), dtype)
    assert report.keep_fp32 == []
    assert all(not row.reasons for row in report.modules)
    assert report.output_rel_error is not None and 0 < report.output_rel_error < 0.05
    assert [row.name for row in report.modules] == ["", "0", "1", "2", "3", "4", "5"]


def test_max_abs_is_the_float32_value_of_what_low_precision_stores() -> None:
    class Big(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 40000.0

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Big())
    x = torch.randn(3, 4)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.float16):
            h = model[0](x)
        expected = float((h.float() * 40000.0).abs().max())
    report = precision_report(model, x, torch.float16)
    row = report.module("1")
    assert row.max_abs == pytest.approx(expected, rel=1e-3)
    assert row.overflow_risk == pytest.approx(expected / 65504, rel=1e-3)
    # Values this large overflow or come within overflow_margin of float16's 65504.
    assert ("range" in row.reasons) is (expected >= 0.5 * 65504)


def test_range_flag_without_an_overflow() -> None:
    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 50000.0

    layer = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(2))
    model = torch.nn.Sequential(layer, Scale())
    x = torch.tensor([[1.0, -0.9]])
    report = precision_report(model, x, torch.float16)
    row = report.module("1")
    assert not row.nonfinite and row.reasons == ("range",) and report.keep_fp32 == ["1"]
    assert precision_report(model, x, torch.float16, overflow_margin=0.9).keep_fp32 == []


def test_error_flag_names_where_precision_is_lost() -> None:
    class Cancel(torch.nn.Module):
        """x + 1000 - 1000: float16 keeps only ~0.5 of resolution near 1000."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x + 1000.0) - 1000.0

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), Cancel(), torch.nn.Linear(8, 2))
    report = precision_report(model, torch.randn(4, 8), torch.float16)
    assert report.module("1").reasons == ("error",)
    assert report.module("1").input_rel_error is not None
    assert report.module("1").input_rel_error < 0.05 < report.module("1").rel_error  # type: ignore[operator]
    assert report.module("2").reasons == ()  # inherits the error, does not cause it
    assert report.keep_fp32 == ["1"]


def test_autocast_coverage_lists_ops_by_dtype() -> None:
    report = precision_report(_mlp(), torch.randn(16, 32), torch.bfloat16)
    ops = {op.name: op for op in report.ops}
    assert ops["linear"].calls == 3 and ops["linear"].low_precision_calls == 3
    assert ops["linear"].dtypes == ("bfloat16",)
    assert report.module("0").low_precision_ops == ("linear",)
    assert report.low_precision_fraction is not None and 0 < report.low_precision_fraction <= 1
    assert report.ops_aligned


def test_float32_ops_under_autocast_show_up_as_such() -> None:
    class Softmaxed(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x, dim=-1, dtype=torch.float32)

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Softmaxed())
    report = precision_report(model, torch.randn(2, 4), torch.bfloat16)
    row = report.module("1")
    assert row.float32_ops == ("softmax",) and row.low_precision_ops == ()
    assert row.low_precision_fraction == 0.0


# -- the model is left alone ---------------------------------------------------------------


def test_model_state_and_random_state_are_left_alone() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)
    )
    model.train()
    model[3].eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(16, 8)
    rng = torch.get_rng_state()
    report = precision_report(model, x, torch.bfloat16)
    assert model.training and model[0].training and not model[3].training
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.grad is None for p in model.parameters())
    # Dropout off for the comparison, so the error is rounding, not different masks.
    assert report.output_rel_error is not None and report.output_rel_error < 0.05


class _TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(5, 3)

    def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.a(left) + self.b(right)
        return out


@pytest.mark.parametrize("form", ["tuple", "list", "dict"])
def test_sample_inputs_forms(form: str) -> None:
    left, right = torch.randn(2, 4), torch.randn(2, 5)
    inputs: Any = {
        "tuple": (left, right),
        "list": [left, right],
        "dict": {"left": left, "right": right},
    }[form]
    report = precision_report(_TwoInputs(), inputs, torch.bfloat16)
    assert {row.name for row in report.modules} == {"", "a", "b"}


def test_default_dtype_is_the_devices_amp_dtype() -> None:
    assert precision_report(_mlp(), torch.randn(2, 32)).dtype == "bfloat16"


def test_nothing_to_compare_is_an_error() -> None:
    with pytest.raises(ValueError, match="float32"):
        precision_report(_mlp(), torch.randn(2, 32), torch.float32)
    meta = torch.nn.Linear(2, 2, device="meta")
    with pytest.raises(ValueError, match="autocast cannot run"):
        precision_report(meta, torch.randn(1, 2, device="meta"), torch.float16)


# -- output ----------------------------------------------------------------------------------


def _strict_json(text: str) -> Any:
    def reject(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=reject)


def test_to_dict_and_strict_json() -> None:
    report = precision_report(_net(), _data()[0], torch.float16)
    data = report.to_dict()
    assert data["keep_fp32"] == ["similarity"] and data["dtype"] == "float16"
    assert data["output_rel_error"] == float("inf")
    parsed = _strict_json(report.to_json())
    assert parsed["output_rel_error"] == "inf"
    rows = {row["name"]: row for row in parsed["modules"]}
    assert rows["similarity"]["keep_fp32"] is True
    assert rows["similarity"]["reasons"] == ["overflow", "range"]
    assert {op["name"] for op in parsed["ops"]} >= {"linear", "matmul", "softmax"}


def test_plain_text_table() -> None:
    report = precision_report(_net(), _data()[0], torch.float16)
    text = str(report)
    assert text == report.to_text()
    assert "autocast float16 on cpu" in text
    line = next(line for line in text.splitlines() if line.startswith("similarity "))
    assert "KEEP FP32: overflow, range" in line and "Similarity" in line
    assert "keep in float32: ['similarity']" in text
    assert "autocast coverage" in text


def test_print_without_rich_is_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # An earlier test may have imported rich's submodules: block them all.
    for name in [
        "rich",
        "rich.console",
        "rich.table",
        *[m for m in sys.modules if m.startswith("rich.")],
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    report = precision_report(_mlp(), torch.randn(2, 32), torch.bfloat16)
    out = io.StringIO()
    report.print(out)
    assert out.getvalue() == report.to_text()
    with pytest.raises(ImportError):
        report.print(io.StringIO(), rich=True)


def test_print_with_rich() -> None:
    pytest.importorskip("rich")
    report = precision_report(_net(), _data()[0], torch.float16)
    out = io.StringIO()
    report.print(out)
    text = out.getvalue()
    assert text != report.to_text()
    assert "similarity" in text and "KEEP FP32" in text and "keep in float32" in text
    plain = io.StringIO()
    report.print(plain, rich=False)
    assert plain.getvalue() == report.to_text()


def test_report_type_is_exported() -> None:
    assert isinstance(precision_report(_mlp(), torch.randn(2, 32)), PrecisionReport)
    assert "precision_report" in runtime.__all__
