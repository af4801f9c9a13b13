"""The runtime documentation pages: every Python example runs, and the links resolve.

The examples are the pages' promise ("a runnable example per component"), so they are
executed here as written, on CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "runtime").glob("*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


@pytest.fixture(autouse=True)
def _one_thread_and_tf32_restored() -> Iterator[None]:
    """One intra-op thread; and the hardware page's enable_tf32() undone (on a GPU box)."""
    threads = torch.get_num_threads()
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def test_there_is_a_page_per_component() -> None:
    assert {p.stem for p in PAGES} == {
        "monitor", "fallback", "precision_report", "amp_check", "hardware",
    }  # fmt: skip


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_examples_run(page: Path) -> None:
    blocks = FENCE.findall(page.read_text(encoding="utf-8"))
    assert blocks, f"{page.name} has no Python example"
    for block in blocks:
        exec(compile(block, str(page), "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("page", [ROOT / "docs" / "runtime.md", *PAGES], ids=lambda p: p.name)
def test_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" not in target:
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"


def test_the_overview_links_every_page() -> None:
    overview = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    for page in PAGES:
        assert f"runtime/{page.name}" in overview
