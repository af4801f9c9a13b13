"""The analysis layer: facts about a file that several rules share, computed once.

Rules ask ``context.analysis`` (a :class:`FileAnalysis`) and nothing else. Each part is
built from the parts below it, so the dependencies form a chain with no cycle::

    tree ─ names ─ bindings ─ classes ─ calls ─ values ─ compat ─ training ─ wrappers ─ autocast ─ scalers ─ devices ─ project

``tree``: parents, ancestors, scopes, statements and the file index; ``names``: what a
name or attribute resolves to; ``bindings``: what a name is bound to; ``classes``: what
each ``self.<attr>`` of a class is assigned across its methods; ``values``: the static
values of expressions (strings, dtypes; ``member_values`` also through class members and
config fields); ``compat``: compatibility fallbacks;
``training``, ``autocast``, ``scalers``, ``devices``: the AMP facts; ``calls``: which
project function a call runs; ``wrappers``, ``scaler_makers``: project functions that make an autocast or a GradScaler; ``project``: what
calling a function of this or another project file does (through the engine's index). PyTorch's AMP API
itself is data, in ``torch_api``.
"""

from __future__ import annotations

import functools

import libcst as cst

from amplint.analysis.autocast import AutocastAnalysis
from amplint.analysis.bindings import Bindings
from amplint.analysis.calls import CallTargets
from amplint.analysis.classes import Classes
from amplint.analysis.compat import Compat
from amplint.analysis.devices import DeviceAnalysis
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.project import ProjectAnalysis
from amplint.analysis.scalers import ScalerAnalysis
from amplint.analysis.syntax import root_name
from amplint.analysis.training import TrainingAnalysis
from amplint.analysis.tree import Tree
from amplint.analysis.values import Values
from amplint.analysis.wrappers import AutocastWrappers, ScalerMakers
from amplint.engine.context import SourceContext
from amplint.engine.deep import run_deep
from amplint.engine.index import Summary
from amplint.engine.parse import parse_source
from amplint.engine.source import SourceError, decode


class FileAnalysis:
    """Every shared fact about one file. Building the parts costs nothing: each computes
    what it is asked, on first use."""

    def __init__(self, source: SourceContext) -> None:
        self.source = source
        self.tree = Tree(source)
        self.names = NameResolver(source, self.tree)
        self.bindings = Bindings(source, self.tree)
        self.classes = Classes(self.tree)
        self.values = Values(self.names, self.bindings, self.classes)
        self.modules = ProjectModules(source, summarize_file)
        self.calls = CallTargets(source, self.tree, self.names, self.bindings, self.classes, self.modules)
        self.member_values = Values(self.names, self.bindings, self.classes, members=True, modules=self.modules, calls=self.calls)
        self.compat = Compat(self.tree, self.names)
        self.training = TrainingAnalysis(source, self.tree, self.names, self.bindings)
        self.wrappers = AutocastWrappers(source, self.tree, self.names, self.bindings, self.member_values, self.calls, self.modules)
        self.scaler_makers = ScalerMakers(source, self.tree, self.names, self.calls, self.modules)
        self.autocast = AutocastAnalysis(self.tree, self.names, self.bindings, self.member_values, self.wrappers)
        self.scalers = ScalerAnalysis(self.tree, self.names, self.bindings, self.classes, self.training, self.autocast)
        self.devices = DeviceAnalysis(source, self.tree, self.names, self.bindings, self.classes, self.calls, self.member_values)
        self.project = ProjectAnalysis(
            source,
            self.tree,
            self.names,
            self.bindings,
            self.classes,
            self.member_values,
            self.training,
            self.autocast,
            self.modules,
            self.calls,
            self.wrappers,
            self.scaler_makers,
            self.devices,
        )

    @functools.cached_property
    def another_framework(self) -> bool:
        """Is this another framework's code: it imports PaddlePaddle, MindSpore, OneFlow,
        Jittor or MegEngine and nothing of torch? Their AMP APIs mirror torch's names
        (`paddle.amp.GradScaler`, whose `step()` also updates: insightface's arcface_paddle,
        round BA) with other semantics, so no rule applies."""
        imported: list[cst.Name | None] = []
        for statement in self.tree.index.imports:
            if isinstance(statement, cst.Import):
                imported.extend(root_name(alias.name) for alias in statement.names)
            elif statement.module is not None and not statement.relative:
                imported.append(root_name(statement.module))
        roots = {name.value for name in imported if name is not None}
        return bool(roots & OTHER_FRAMEWORKS) and not any(root.startswith("torch") for root in roots)


OTHER_FRAMEWORKS = frozenset({"paddle", "mindspore", "oneflow", "jittor", "megengine"})


def summarize_file(path: str, data: bytes) -> Summary | None:
    """The summary of another file of the project, from its own analysis (never raises:
    another file's oddity must not fail this file's lint)."""
    try:
        source = decode(data)
    except SourceError:
        return None

    def build() -> Summary | None:
        parsed = parse_source(path, source.text)
        if parsed.module is None:
            return None
        return FileAnalysis(SourceContext(path, source, parsed.module)).project.summary

    try:
        return run_deep(build)
    except Exception:  # noqa: BLE001 - an analysis bug on a callee file leaves its facts unknown
        return None
