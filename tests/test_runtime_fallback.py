"""keep_float32 and MixedPrecision's fallback policy, on real CPU autocast.

CPU autocast runs float16 and bfloat16 and GradScaler("cpu") really skips steps, so an
overflow injected by scaling up the loss goes through the same path as on a GPU. What
only other hardware decides (no bfloat16 on a pre-Ampere GPU) is checked with the
detection patched.
"""

from __future__ import annotations

import copy
import io
import logging
import pickle
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import Fallback, MixedPrecision, OverflowWarning, StabilityMonitor

# -- keep_float32 --------------------------------------------------------------------------


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)
        self.second = torch.nn.Linear(4, 4)
        self.third = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, *, shift: torch.Tensor | None = None) -> torch.Tensor:
        h = self.first(x)
        h = self.second(h if shift is None else h + shift)
        out: torch.Tensor = self.third(h)
        return out


def _dtypes(model: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.dtype]:
    seen: dict[str, torch.dtype] = {}
    handles = [
        module.register_forward_hook(lambda m, a, out, name=name: seen.__setitem__(name, out.dtype))
        for name, module in model.named_children()
    ]
    model(x)
    for handle in handles:
        handle.remove()
    return seen


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kept_module_runs_in_float32_inside_autocast(dtype: torch.dtype) -> None:
    model = _Block()
    x = torch.randn(3, 4)
    kept = runtime.keep_float32(model, ["second"])
    with torch.autocast("cpu", dtype=dtype):
        seen = _dtypes(model, x)
        # The next module is under autocast again.
        assert torch.is_autocast_enabled("cpu")
    assert seen == {"first": dtype, "second": torch.float32, "third": dtype}
    with torch.autocast("cpu", dtype=dtype):
        h = model.first(x)
        got = model.second(h)
    # The same as float32 on the low-precision input, cast up: nothing else rounded.
    torch.testing.assert_close(
        got,
        torch.nn.functional.linear(h.float(), model.second.weight, model.second.bias),
        rtol=0,
        atol=0,
    )
    kept.remove()
    with torch.autocast("cpu", dtype=dtype):
        assert _dtypes(model, x)["second"] == dtype


def test_kept_module_outside_autocast_is_untouched() -> None:
    model = _Block()
    runtime.keep_float32(model, ["second"])
    x = torch.randn(2, 4, dtype=torch.float64)
    model.double()
    # No autocast: the float64 input is not cast down to float32.
    assert model(x).dtype == torch.float64


def test_keep_float32_casts_keyword_inputs() -> None:
    model = _Block()
    runtime.keep_float32(model, [""])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        shift = torch.ones(4, dtype=torch.bfloat16)
        assert model(torch.randn(2, 4), shift=shift).dtype == torch.float32


def test_keep_float32_restores_autocast_when_forward_raises() -> None:
    model = _Block()
    runtime.keep_float32(model, ["second"])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError):
            model.second(torch.randn(2, 5))  # wrong width
        assert torch.is_autocast_enabled("cpu")
        assert model.first(torch.randn(2, 4)).dtype == torch.bfloat16


def test_keep_float32_rejects_unknown_names_and_keeps_once() -> None:
    model = _Block()
    with pytest.raises(ValueError, match="no such submodule"):
        runtime.keep_float32(model, ["second", "fourth"])
    runtime.keep_float32(model, ["second"])
    again = runtime.keep_float32(model, ["second"])
    assert again.names == ("second",)
    assert len(model.second._forward_pre_hooks) == 1


def test_a_model_with_kept_modules_still_copies_and_pickles() -> None:
    model = _Block()
    runtime.keep_float32(model, ["second"])
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert _dtypes(clone, torch.randn(2, 4))["second"] == torch.float32


def test_keep_float32_does_not_change_the_state_dict() -> None:
    model = _Block()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    runtime.keep_float32(model, ["second"])
    assert list(model.state_dict()) == list(before)


# -- Fallback ------------------------------------------------------------------------------


def test_fallback_coerces_strings() -> None:
    assert Fallback.coerce("auto") == Fallback()
    assert Fallback.coerce("float32") == Fallback(dtype="float32")
    assert Fallback.coerce(None) is None
    assert Fallback(keep_fp32=["a", "b"]).keep_fp32 == ("a", "b")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"dtype": "float64"}, ValueError),
        ({"dtype": None}, ValueError),
        ({"keep_fp32": "attn"}, TypeError),
    ],
)
def test_fallback_validation(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Fallback(**kwargs)


def test_fallback_dtype_on_cpu() -> None:
    assert runtime.fallback_dtype("cpu", "auto") == torch.bfloat16
    assert runtime.fallback_dtype("cpu", "float32") == torch.float32
    with pytest.raises(ValueError):
        runtime.fallback_dtype("cpu", "int8")


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def install(capability: tuple[int, int]) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "GPU")
        monkeypatch.setattr(torch.version, "hip", None)

    yield install


def test_auto_fallback_is_float32_without_native_bfloat16(fake_gpu: Any) -> None:
    fake_gpu((7, 0))  # V100: bfloat16 only emulated
    assert runtime.fallback_dtype("cuda", "auto") == torch.float32


def test_auto_fallback_is_bfloat16_from_ampere(fake_gpu: Any) -> None:
    fake_gpu((8, 0))
    assert runtime.fallback_dtype("cuda", "auto") == torch.bfloat16


# -- MixedPrecision falls back ---------------------------------------------------------------


def _problem() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    return model, optimizer, torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)


def _step(
    mp: MixedPrecision,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_factor: float = 1.0,
) -> bool:
    optimizer.zero_grad()
    with mp.autocast():
        out = model(x)
    mp.backward(torch.nn.functional.mse_loss(out.float(), y) * loss_factor)
    return mp.step(optimizer)


WINDOW = 10
INJECT_AT = 6
# Scaled by GradScaler's 65536 too, this overflows float16 in backward on every step.
BLOW_UP = 1e8


def _run_with_injected_overflow(
    mp: MixedPrecision, steps: int = 30
) -> tuple[list[bool], list[int], list[torch.dtype]]:
    """Train; from INJECT_AT the loss is scaled up until the fallback switches the dtype."""
    model, optimizer, x, y = _problem()
    skipped, warned, dtypes = [], [], []
    for step in range(1, steps + 1):
        inject = step >= INJECT_AT and mp.dtype == torch.float16
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            skipped.append(_step(mp, model, optimizer, x, y, BLOW_UP if inject else 1.0))
        if any(issubclass(w.category, OverflowWarning) for w in caught):
            warned.append(step)
        dtypes.append(mp.dtype)
    return skipped, warned, dtypes


def test_injected_overflow_warns_within_the_window_and_falls_back_to_bfloat16(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mp = MixedPrecision(
        "cpu", torch.float16, fallback="auto", monitor=StabilityMonitor(window=WINDOW)
    )
    with caplog.at_level(logging.WARNING, logger="amplint.runtime"):
        skipped, warned, dtypes = _run_with_injected_overflow(mp)
    assert not any(skipped[: INJECT_AT - 1])
    assert warned and INJECT_AT <= warned[0] < INJECT_AT + WINDOW
    switch_step = dtypes.index(torch.bfloat16) + 1
    assert switch_step == warned[0]  # the same step that warned
    assert mp.fallback_history == [
        {
            "step": switch_step,
            "reason": mp.fallback_history[0]["reason"],
            "kind": "dtype",
            "from": "float16",
            "to": "bfloat16",
        }
    ]
    assert "skipped" in mp.fallback_history[0]["reason"]
    assert not mp.scaler.is_enabled()
    assert not any(skipped[switch_step:])  # bfloat16 needs no scaler and skips nothing
    with mp.autocast():
        assert torch.nn.Linear(2, 2)(torch.randn(1, 2)).dtype == torch.bfloat16
    assert any("switching from float16 to bfloat16" in r.getMessage() for r in caplog.records)


def test_without_a_fallback_the_dtype_stays(caplog: pytest.LogCaptureFixture) -> None:
    mp = MixedPrecision("cpu", torch.float16, monitor=StabilityMonitor(window=WINDOW))
    skipped, warned, dtypes = _run_with_injected_overflow(mp)
    assert warned and set(dtypes) == {torch.float16}
    assert all(skipped[INJECT_AT:])
    assert mp.fallback_history == []


def test_falls_back_to_float32_where_bfloat16_is_unsupported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unsupported = runtime.capabilities("cpu")
    monkeypatch.setattr(
        "amplint.runtime._fallback.capabilities",
        lambda device: type(unsupported)(
            **{
                **{f: getattr(unsupported, f) for f in unsupported.__slots__},
                "bf16_supported": False,
            }
        ),
    )
    mp = MixedPrecision(
        "cpu", torch.float16, fallback="auto", monitor=StabilityMonitor(window=WINDOW)
    )
    skipped, _, dtypes = _run_with_injected_overflow(mp)
    assert torch.float32 in dtypes and mp.fallback_history[0]["to"] == "float32"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "unsupported autocast dtype" warning from torch
        with mp.autocast():
            assert torch.nn.Linear(2, 2)(torch.randn(1, 2)).dtype == torch.float32
    assert not any(skipped[dtypes.index(torch.float32) + 1 :])


def _through_torch_save(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer, weights_only=True)
    return loaded


def test_state_dict_round_trips_the_fallback() -> None:
    mp = MixedPrecision(
        "cpu", torch.float16, fallback="auto", monitor=StabilityMonitor(window=WINDOW)
    )
    _run_with_injected_overflow(mp)
    state = _through_torch_save(mp.state_dict())
    assert state["dtype"] == "bfloat16" and state["initial_dtype"] == "float16"

    resumed = MixedPrecision(
        "cpu", torch.float16, fallback="auto", monitor=StabilityMonitor(window=WINDOW)
    )
    resumed.load_state_dict(state)
    assert resumed.dtype == torch.bfloat16 and not resumed.scaler.is_enabled()
    assert resumed.fallback_history == mp.fallback_history
    # repr, because the history holds a NaN gradient norm (nan != nan).
    assert repr(resumed.state_dict()) == repr(mp.state_dict())
    model, optimizer, x, y = _problem()
    assert _step(resumed, model, optimizer, x, y) is False
    with resumed.autocast():
        assert torch.nn.Linear(2, 2)(torch.randn(1, 2)).dtype == torch.bfloat16


def test_an_explicitly_different_dtype_wins_over_the_checkpoints_fallback() -> None:
    mp = MixedPrecision(
        "cpu", torch.float16, fallback="auto", monitor=StabilityMonitor(window=WINDOW)
    )
    _run_with_injected_overflow(mp)
    state = mp.state_dict()
    resumed = MixedPrecision("cpu", torch.float32, enabled=False)
    resumed.load_state_dict(state)
    assert resumed.dtype == torch.float32


class _Similarity(torch.nn.Module):
    """Cosine similarity written by hand: the raw dot products overflow float16."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        norms = h.norm(dim=-1)
        out: torch.Tensor = (h @ h.T) / (norms[:, None] * norms[None, :])
        return out


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.similarity = _Similarity()
        self.value = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(4 * self.similarity(x), dim=-1)
        out: torch.Tensor = self.head(weights @ self.value(x / 255))
        return out


def _net_problem() -> tuple[_Net, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = _Net()
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(32, 6, generator=gen) * 255  # unnormalised features
    return model, torch.optim.SGD(model.parameters(), lr=0.05), x, torch.randn(32, 3, generator=gen)


def test_fallback_keeps_modules_in_float32_first_then_trains_in_float16() -> None:
    model, optimizer, x, y = _net_problem()
    mp = MixedPrecision(
        "cpu",
        torch.float16,
        model=model,
        fallback=Fallback(keep_fp32=("similarity",)),
        monitor=StabilityMonitor(window=WINDOW),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skipped = [_step(mp, model, optimizer, x, y) for _ in range(3 * WINDOW)]
    assert skipped[0] is True  # float16 overflows from the start
    assert [s["kind"] for s in mp.fallback_history] == ["keep_fp32"]
    assert mp.fallback_history[0]["modules"] == ["similarity"]
    assert mp.dtype == torch.float16 and mp.keep_fp32 == ["similarity"]
    switch = mp.fallback_history[0]["step"]
    assert not any(skipped[switch:])


def test_fallback_moves_to_the_dtype_when_keeping_modules_is_not_enough() -> None:
    model, optimizer, x, y = _net_problem()
    mp = MixedPrecision(
        "cpu",
        torch.float16,
        model=model,
        fallback=Fallback(keep_fp32=("head",)),  # the wrong module
        monitor=StabilityMonitor(window=WINDOW),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(4 * WINDOW):
            _step(mp, model, optimizer, x, y)
    assert [s["kind"] for s in mp.fallback_history] == ["keep_fp32", "dtype"]
    assert mp.dtype == torch.bfloat16
    assert mp.fallback_history[1]["step"] > mp.fallback_history[0]["step"]


def test_resumed_run_keeps_the_modules_the_fallback_kept() -> None:
    model, optimizer, x, y = _net_problem()
    mp = MixedPrecision(
        "cpu",
        torch.float16,
        model=model,
        fallback=Fallback(keep_fp32=("similarity",)),
        monitor=StabilityMonitor(window=WINDOW),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(WINDOW):
            _step(mp, model, optimizer, x, y)
    state = _through_torch_save(mp.state_dict())

    fresh, optimizer2, _, _ = _net_problem()
    fresh.load_state_dict(model.state_dict())
    with pytest.raises(ValueError, match="model="):
        MixedPrecision("cpu", torch.float16).load_state_dict(state)
    resumed = MixedPrecision("cpu", torch.float16, model=fresh)
    resumed.load_state_dict(state)
    assert resumed.keep_fp32 == ["similarity"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not any(_step(resumed, fresh, optimizer2, x, y) for _ in range(5))


def test_static_keep_fp32_needs_the_model() -> None:
    with pytest.raises(ValueError, match="model="):
        MixedPrecision("cpu", torch.float16, keep_fp32=["similarity"])
    with pytest.raises(ValueError, match="model="):
        MixedPrecision("cpu", torch.float16, fallback=Fallback(keep_fp32=("x",)))
    model, *_ = _net_problem()
    with pytest.raises(ValueError, match="no such submodule"):
        MixedPrecision("cpu", torch.float16, model=model, keep_fp32=["nope"])


def test_fallback_does_nothing_for_bfloat16_runs() -> None:
    mp = MixedPrecision("cpu", torch.bfloat16, fallback="float32")
    model, optimizer, x, y = _problem()
    for _ in range(3):
        _step(mp, model, optimizer, x, y)
    assert mp.dtype == torch.bfloat16 and mp.fallback_history == []
