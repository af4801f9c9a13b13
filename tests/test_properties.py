"""Property tests of the decode → parse → lint → fix → encode round trip.

hypothesmith writes syntactically valid Python; AMP snippets are spliced in so that the
rules have something to find. Whatever the source: no internal error, the fixed text
still compiles, a second fix changes nothing, and encoding gives the bytes back.
"""

from __future__ import annotations

import warnings

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplint.api import check_source, fix_text
from amplint.engine.source import decode

AMP_SNIPPETS = [
    "import torch\n",
    "scaler = torch.cuda.amp.GradScaler()\n",
    "with torch.cuda.amp.autocast():\n    loss = model(x).half()\n",
    "loss = criterion(out, y)\nloss.backward()\noptimizer.step()\n",
    "d = torch.get_autocast_gpu_dtype()\n",
    "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nscaler.step(optimizer)\n",
    "with torch.autocast('cuda', dtype=torch.bfloat16):\n    y = F.binary_cross_entropy(torch.sigmoid(a), b)\n",
]

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():  # generated code has invalid escapes and the like
            warnings.simplefilter("ignore")
            compile(text, "<fixed>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# hypothesmith compiles what it generates, which warns about odd but valid code.
@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
@SETTINGS
@given(
    generated=hypothesmith.from_grammar(),
    snippets=st.lists(st.sampled_from(AMP_SNIPPETS), max_size=4),
    generated_first=st.booleans(),
)
def test_fixing_generated_code_never_breaks_it(generated: str, snippets: list[str], generated_first: bool) -> None:
    amp = "".join(snippets)
    generated = generated if generated.endswith("\n") or not generated else generated + "\n"
    text = generated + amp if generated_first else amp + generated
    diagnostics = check_source(text.encode("utf-8"), "generated.py", select=["ALL"])
    assert not [d for d in diagnostics if d.code == "AMP999"], [d.message for d in diagnostics]
    fixed = fix_text(text, select=["ALL"], unsafe_fixes=True)
    if fixed != text and _compiles(text):
        assert _compiles(fixed), fixed
    assert fix_text(fixed, select=["ALL"], unsafe_fixes=True) == fixed


@SETTINGS
@given(
    text=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=200),
    bom=st.booleans(),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_decoding_then_encoding_gives_the_bytes_back(text: str, bom: bool, newline: str) -> None:
    body = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", newline)
    data = (b"\xef\xbb\xbf" if bom else b"") + body.encode("utf-8")
    try:
        source = decode(data)
    except Exception:  # noqa: BLE001 - undecodable inputs are the other tests' business
        return
    assert source.encode(source.text) == data
