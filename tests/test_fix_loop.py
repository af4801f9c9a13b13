"""The fix loop re-lints: what `fix` says remains is what a following `check` reports.

A fix can introduce text that another rule reacts to (AMP001 inserts the `"cuda"` that
AMP201 flags); the pre-filter is therefore recomputed on every pass's text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amplint.api import check_source, fix_source_text
from amplint.diagnostics import Diagnostic
from amplint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").glob("*.py"))

# Issue 12's repro: the fix of AMP001 writes "cuda" into a class with a device variable.
TRAINER = '''import torch
from torch.cuda.amp import autocast, GradScaler

class Trainer:
    def __init__(self, config, model):
        self.device = torch.device(config.device)
        self.model = model.to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters())
        self.scaler = GradScaler(enabled=config.mixed_precision)

    def train_step(self, batch):
        with autocast(enabled=True):
            loss = self.model(**batch).loss
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
'''


def _sources() -> list[tuple[str, str]]:
    found = [("trainer", TRAINER)]
    found += [(path.name, path.read_text(encoding="utf-8")) for path in FIXTURES]
    for rule in all_rules():
        found += [(f"{rule.code}-invalid-{index}", example.code) for index, example in enumerate(rule.INVALID)]
    return found


def _key(diagnostic: Diagnostic) -> tuple[str, int, int, str]:
    return (diagnostic.code, diagnostic.location.row, diagnostic.location.column, diagnostic.message)


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_remaining_after_fix_equals_a_following_check(name: str, text: str, unsafe: bool) -> None:
    report = fix_source_text(text, f"{name}.py", select=["ALL"], unsafe_fixes=unsafe)
    following = check_source(report.new_text or text, f"{name}.py", select=["ALL"])
    assert sorted(map(_key, report.diagnostics)) == sorted(map(_key, following))


def test_trainer_fix_reports_the_cuda_it_introduced() -> None:
    report = fix_source_text(TRAINER, "trainer.py", select=["ALL"])
    assert report.fixes_applied.get("AMP001") == 3
    remaining = sorted(d.code for d in report.diagnostics)
    # The literal "cuda" the fix wrote beside `self.device` is AMP201 (a) twice.
    assert remaining == ["AMP201", "AMP201"]
