"""Other modules of the project, reached through the engine's project index.

The analysis of one file may need a fact another file holds: a dtype constant in
``config.py``, what a function of ``losses.py`` calls. The engine's index finds the file
a module name refers to and keeps its summary (``amplint.analysis.project`` computes and
reads summaries); this is the thin door to it, usable by every part of the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amplint.engine.context import SourceContext
from amplint.engine.index import Summarizer, Summary

# The version of the summaries' layout: a change makes cached summaries stale.
SUMMARY_VERSION = "amp-summary-8"


@dataclass(eq=False)
class ProjectModules:
    """Other modules of the project, through the engine's index (None: a file alone)."""

    source: SourceContext
    # Computes another file's summary (from its own analysis); given by the FileAnalysis.
    summarize: Summarizer

    def summary_of(self, path: Path) -> Summary | None:
        index = self.source.index
        return index.summary(path, self.summarize, SUMMARY_VERSION) if index is not None else None

    def may_define(self, path: Path, name: str) -> bool:
        """Could the module at ``path`` define (or re-export) ``name``? True when unsure."""
        index = self.source.index
        return index.may_define(path, name) if index is not None else True

    def module_path(self, module: str, importer: str, level: int = 0) -> Path | None:
        index = self.source.index
        return index.module_path(module, importer, level) if index is not None else None

    def checkout_module_path(self, module: str, importer: str) -> Path | None:
        index = self.source.index
        return index.checkout_module_path(module, importer) if index is not None else None

    def display(self, path: str) -> str:
        """A path as messages show it: relative to the project root that holds it (as a
        reader finds it from the repository), else absolute."""
        resolved = Path(path).resolve()
        roots = self.source.index.roots if self.source.index is not None else ()
        holder = next((root for root in roots if root in resolved.parents), None)
        return resolved.relative_to(holder).as_posix() if holder is not None else str(resolved)

    def constant(self, qualified: str) -> dict[str, list[str]] | None:
        """A module-level constant of another project module (``config.AMP_DTYPE``), if known."""
        if "." not in qualified or qualified.startswith(("torch.", "builtins.")):
            return None
        module, _, name = qualified.rpartition(".")
        found = self.module_path(module, self.source.path)
        if found is None or found == Path(self.source.path).resolve():
            return None
        summary = self.summary_of(found)
        constant = summary.get("constants", {}).get(name) if summary is not None else None
        return constant if isinstance(constant, dict) else None
