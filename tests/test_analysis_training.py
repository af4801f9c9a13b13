"""The training analysis: backwards, optimizer steps, losses, statements, inference code."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from amplint.analysis.context import RuleContext
from amplint.analysis.training import is_accumulation_test
from amplint.engine.source import decode


def _context(source: str) -> RuleContext:
    decoded = decode(textwrap.dedent(source).encode())
    return RuleContext("snippet.py", decoded, cst.parse_module(decoded.text))


def _code(context: RuleContext, nodes: list[cst.Call] | list[cst.BaseStatement]) -> list[str]:
    return [context.module.code_for_node(node).strip().splitlines()[0] for node in nodes]


def _function(context: RuleContext, name: str) -> cst.FunctionDef:
    (function,) = [f for f in context.analysis.tree.index.functions if f.name.value == name]
    return function


def test_tensor_backwards_and_delegated_ones() -> None:
    context = _context(
        """
        import torch
        loss.backward()
        loss.backward(retain_graph=True)
        scaler.scale(loss).backward()
        torch.autograd.backward(loss)
        accelerator.backward(loss)
        model_engine.backward(loss)
        loss.backward(gradient)
        """
    )
    training = context.analysis.training
    assert _code(context, training.backward_calls) == [
        "loss.backward()",
        "loss.backward(retain_graph=True)",
        "scaler.scale(loss).backward()",
        "torch.autograd.backward(loss)",
    ]
    assert _code(context, training.delegated_backward_calls) == [
        "accelerator.backward(loss)",
        "model_engine.backward(loss)",
        "loss.backward(gradient)",
    ]
    assert training.trains


def test_optimizer_steps_and_names() -> None:
    context = _context(
        """
        import torch
        opt = torch.optim.AdamW(params)
        self.optimizer = torch.optim.SGD(params, lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        opt.step()
        self.optimizer.step()
        scaler.step(opt)
        sched.step()
        env.step(action)
        """
    )
    training = context.analysis.training
    assert _code(context, training.optimizer_steps) == ["opt.step()", "self.optimizer.step()", "scaler.step(opt)"]
    assert training.optimizer_names == frozenset({"opt", "self.optimizer"})


def test_a_file_without_backward_or_step_does_not_train() -> None:
    context = _context("import torch\nwith torch.no_grad():\n    y = model(x)\nsched.step()\n")
    assert not context.analysis.training.trains


def test_scope_facts_are_per_function() -> None:
    context = _context(
        """
        import torch
        import torch.nn.functional as F
        criterion = torch.nn.CrossEntropyLoss()
        def train(model, x, y, opt):
            out = model(x)
            loss = criterion(out, y)
            aux_loss = F.mse_loss(out, y)
            total = loss + aux_loss
            total.backward()
            opt.step()
        def evaluate(model, x, y):
            val_loss = criterion(model(x), y)
            return val_loss
        """
    )
    training = context.analysis.training
    train, evaluate = _function(context, "train"), _function(context, "evaluate")
    assert training.scope_trains(train) and not training.scope_trains(evaluate)
    assert not training.scope_trains(context.module)
    assert training.loss_names(train) == frozenset({"loss", "aux_loss"})
    assert training.loss_names(evaluate) == frozenset({"val_loss"})
    assert _code(context, training.scope_backward_calls(train)) == ["total.backward()"]
    assert _code(context, training.scope_optimizer_steps(train)) == ["opt.step()"]


def test_statements_in_source_order_without_entering_nested_scopes() -> None:
    context = _context(
        """
        def train(loader):
            for step, batch in enumerate(loader):
                loss = model(batch)
                if (step + 1) % accum == 0:
                    opt.step()
                else:
                    pass
            def helper():
                inner = 1
            done = True
        """
    )
    statements = context.analysis.tree.statements(_function(context, "train"))
    assert _code(context, statements) == [
        "for step, batch in enumerate(loader):",
        "loss = model(batch)",
        "if (step + 1) % accum == 0:",
        "opt.step()",
        "pass",
        "def helper():",
        "done = True",
    ]
    module_statements = context.analysis.tree.statements(context.module)
    assert _code(context, module_statements) == ["def train(loader):"]


def _expression(source: str) -> cst.BaseExpression:
    return cst.parse_expression(source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("(step + 1) % accum == 0", True),
        ("step % gradient_accumulation_steps == 0", True),
        ("(i + 1) % n == 0 or i == len(loader) - 1", True),
        ("not (i + 1) % n", True),
        ("0 == (i + 1) % n", True),
        ("step > warmup", False),
        ("args.accum", False),
        ("x % 2", False),
    ],
)
def test_accumulation_tests(source: str, expected: bool) -> None:
    assert is_accumulation_test(_expression(source)) is expected


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("F.cross_entropy(out, y)", True),
        ("criterion(out, y)", True),
        ("self.criterion(out, y)", True),
        ("loss_fn(out, y)", True),
        ("compute_loss(out, y)", True),
        ("model.discriminator_loss(out)", True),
        ("bce(out, y)", True),  # bound to nn.BCEWithLogitsLoss() below
        ("losses.update(loss.item())", False),
        ("loss_meter.update(loss)", False),
        ("loss.item()", False),
        ("print_loss(loss)", False),
        ("np.mean(out)", False),  # an imported function named for something else
    ],
)
def test_loss_calls(call: str, expected: bool) -> None:
    context = _context(
        f"import numpy as np\nimport torch\nimport torch.nn.functional as F\n"
        f"bce = torch.nn.BCEWithLogitsLoss()\nresult = {call}\n"
    )
    (statement,) = [
        s for s in context.module.body if context.module.code_for_node(s).startswith("result")
    ]
    assert isinstance(statement, cst.SimpleStatementLine)
    assign = statement.body[0]
    assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
    assert context.analysis.training.is_loss_call(assign.value) is expected


@pytest.mark.parametrize(
    ("source", "inference"),
    [
        ("import torch\nwith torch.no_grad():\n    y = m(x)\n", True),
        ("import torch\nwith torch.inference_mode():\n    y = m(x)\n", True),
        ("import torch\n@torch.no_grad()\ndef f():\n    y = m(x)\n", True),
        ("import torch\n@torch.inference_mode\ndef f():\n    y = m(x)\n", True),
        ("def evaluate():\n    y = m(x)\n", True),
        ("def log_validation():\n    y = m(x)\n", True),
        ("def run_inference():\n    y = m(x)\n", True),
        ("def train_one_epoch():\n    y = m(x)\n", False),
        ("def step():\n    y = m(x)\n", False),
        # no_grad only covers its own body.
        ("import torch\nwith torch.no_grad():\n    pass\ny = m(x)\n", False),
        # A no_grad that is not torch's.
        ("with no_grad():\n    y = m(x)\n", False),
    ],
)
def test_in_inference(source: str, inference: bool) -> None:
    context = _context(source)
    (target,) = [
        node
        for node in context.analysis.tree.index.assigns
        if context.module.code_for_node(node).strip() == "y = m(x)"
    ]
    assert context.analysis.training.in_inference(target) is inference
