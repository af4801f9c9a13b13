"""The language server: amplint's findings in the editor, as the code is typed.

- Diagnostics for Python documents on open and on change (debounced), from the
  editor's text, with the configuration of the file's project (``api.run_text``:
  nearest configuration file, per-file ignores, target torch).
- Jupyter notebooks through the LSP notebook document sync: the cells' texts, in
  order, are checked as one notebook (``api.run_cells``) and each finding is published
  on its cell's document.
- Code actions per finding: apply its fix (labelled "(unsafe)" when it is) and add
  ``# noqa: CODE``; a source action ``source.fixAll.amplint`` applies every safe fix.
- Hover on a finding: the rule's summary and a link to its page.

Nothing a document contains may take the editor session down: an exception while
checking a document is logged (``window/logMessage``) and the document gets no
diagnostics; a rule that fails (AMP999) is logged with its traceback, and the other
rules' findings are still shown. Checks run one at a time on a worker thread, so the
server keeps answering while a large file is checked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

import amplint
from amplint.api import (
    INTERNAL_ERROR,
    PARSE_ERROR,
    FileReport,
    Mode,
    RunOptions,
    add_noqa_comment,
    rule_by_code,
    run_cells,
    run_text,
)
from amplint.diagnostics import Applicability, Diagnostic, Edit
from amplint.docs import rule_help_uri, rule_url
from amplint.server.positions import Units, contains, lines_of, overlaps, replacement, text_range

logger = logging.getLogger(__name__)

NAME = "amplint"
FIX_ALL = "source.fixAll.amplint"
# Seconds of quiet after a change before the document is checked again.
DEBOUNCE = 0.25
PYTHON_SUFFIXES = (".py", ".pyi")

T = TypeVar("T")


@dataclass
class Finding:
    """One published diagnostic and the amplint finding behind it."""

    published: lsp.Diagnostic
    diagnostic: Diagnostic


@dataclass
class Snapshot:
    """What one check saw and found: the text of each document (a Python file, or a
    notebook's cells) and the findings published on each."""

    path: str
    texts: dict[str, str]  # document URI → text
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    # A notebook: each cell's document URI by cell number (1-based, every cell counts)
    # and its kind, as the check saw them.
    cells: dict[int, str] = field(default_factory=dict)
    kinds: dict[int, str] = field(default_factory=dict)

    @property
    def is_notebook(self) -> bool:
        return bool(self.cells)

    def uri_of(self, cell: int | None, default: str) -> str | None:
        if cell is None:
            return default if not self.is_notebook else None
        return self.cells.get(cell)


class AmplintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            NAME,
            amplint.__version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            notebook_document_sync=lsp.NotebookDocumentSyncOptions(
                notebook_selector=[
                    lsp.NotebookDocumentFilterWithCells(
                        notebook="*", cells=[lsp.NotebookCellLanguage(language="python")]
                    )
                ],
            ),
        )
        # Checks run one at a time: the engine's project index is shared state.
        self.checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amplint-check")
        self.pending: dict[str, asyncio.Task[None]] = {}  # document or notebook URI
        self.snapshots: dict[str, Snapshot] = {}  # document or notebook URI
        self.owner: dict[str, str] = {}  # cell URI → notebook URI

    # -- helpers ---------------------------------------------------------------------------

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        logger.log(logging.ERROR if kind is lsp.MessageType.Error else logging.INFO, "%s", message)
        try:
            self.window_log_message(lsp.LogMessageParams(type=kind, message=message))
        except Exception:  # a lost connection must not turn a log line into a crash
            logger.exception("cannot send a log message")

    @property
    def units(self) -> Units:
        codec = self.workspace.position_codec
        return lambda text: int(codec.client_num_units(text))

    async def in_checker(self, function: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.checker, function)

    def publish(self, uri: str, diagnostics: Sequence[lsp.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=list(diagnostics)))

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self, key: str, delay: float) -> None:
        """Check ``key`` (a document or a notebook) after ``delay`` seconds of quiet."""
        previous = self.pending.pop(key, None)
        if previous is not None:
            previous.cancel()
        self.pending[key] = asyncio.get_running_loop().create_task(self._check_later(key, delay))

    async def _check_later(self, key: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            await self.check_and_publish(key)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - never let a check end the session
            self.log(f"amplint: checking {key} failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
        finally:
            if self.pending.get(key) is asyncio.current_task():
                del self.pending[key]

    def forget(self, key: str) -> None:
        task = self.pending.pop(key, None)
        if task is not None:
            task.cancel()
        snapshot = self.snapshots.pop(key, None)
        if snapshot is not None:
            for uri in snapshot.texts:
                self.owner.pop(uri, None)
                self.publish(uri, [])

    # -- checking --------------------------------------------------------------------------

    def current(self, key: str) -> Snapshot | None:
        """The texts to check for ``key`` now, or None when it is not a document amplint checks."""
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            path = _path_of(key, self.workspace.root_path, ".ipynb")
            snapshot = Snapshot(path=path if path.endswith(".ipynb") else path + ".ipynb", texts={})
            for number, cell in enumerate(notebook.cells, 1):
                document = self.workspace.get_text_document(cell.document)
                snapshot.cells[number] = cell.document
                snapshot.texts[cell.document] = document.source
                python = document.language_id in (None, "python")
                code = cell.kind == lsp.NotebookCellKind.Code
                snapshot.kinds[number] = "code" if code and python else "markdown" if not code else "raw"
            return snapshot
        if unquote(key) not in self.workspace.text_documents:
            return None
        document = self.workspace.get_text_document(key)
        path = _path_of(key, self.workspace.root_path, ".py")
        if document.language_id not in (None, "python") and not path.endswith(PYTHON_SUFFIXES):
            return None
        if path.endswith(".ipynb"):
            return None  # a notebook opened as JSON text: its cells come by notebook sync
        return Snapshot(path=path, texts={key: document.source})

    def run(self, snapshot: Snapshot, options: RunOptions) -> FileReport:
        """Check (or fix) what ``snapshot`` holds; runs on the checker thread."""
        if snapshot.is_notebook:
            cells = [(snapshot.kinds[number], snapshot.texts[uri]) for number, uri in sorted(snapshot.cells.items())]
            return run_cells(cells, snapshot.path, options)
        (text,) = snapshot.texts.values()
        return run_text(text, snapshot.path, options)

    async def check_and_publish(self, key: str) -> None:
        snapshot = self.current(key)
        if snapshot is None:
            return
        previous = self.snapshots.get(key)
        try:
            report = await self.in_checker(lambda: self.run(snapshot, RunOptions(mode=Mode.CHECK)))
            self.findings(key, snapshot, report)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - logged; the document gets no diagnostics
            self.log(
                f"amplint: internal error while checking {snapshot.path}; no diagnostics for it:\n"
                f"{traceback.format_exc()}",
                lsp.MessageType.Error,
            )
            snapshot.findings = {uri: [] for uri in snapshot.texts}
        self.snapshots[key] = snapshot
        for uri in snapshot.texts:
            if snapshot.is_notebook:
                self.owner[uri] = key
            self.publish(uri, [finding.published for finding in snapshot.findings.get(uri, [])])
        for uri in previous.texts if previous is not None else ():
            if uri not in snapshot.texts:  # a cell that was deleted
                self.owner.pop(uri, None)
                self.publish(uri, [])

    def findings(self, key: str, snapshot: Snapshot, report: FileReport) -> None:
        snapshot.findings = {uri: [] for uri in snapshot.texts}
        units = self.units
        lines = {uri: lines_of(text) for uri, text in snapshot.texts.items()}
        for diagnostic in report.diagnostics:
            if diagnostic.code == INTERNAL_ERROR:
                self.log(
                    f"amplint: {snapshot.path}: {diagnostic.message}\n{diagnostic.detail or ''}".rstrip(),
                    lsp.MessageType.Error,
                )
                continue
            uri = snapshot.uri_of(diagnostic.cell, key)
            if uri is None:  # a finding about the whole notebook: shown on its first cell
                uri = snapshot.cells[min(snapshot.cells)] if snapshot.cells else None
                if uri is None:
                    continue
            span = text_range(
                lines[uri],
                (diagnostic.location.row, diagnostic.location.column),
                (diagnostic.end_location.row, diagnostic.end_location.column),
                units,
            )
            snapshot.findings[uri].append(Finding(_published(diagnostic, span), diagnostic))

    # -- code actions ----------------------------------------------------------------------

    async def fresh_snapshot(self, uri: str) -> tuple[str, Snapshot] | None:
        """The snapshot of the document or notebook ``uri`` belongs to, checked again
        first when its text changed since the last check."""
        key = self.owner.get(uri, uri)
        current = self.current(key)
        if current is None:
            return None
        known = self.snapshots.get(key)
        if known is None or known.texts != current.texts or known.cells != current.cells:
            await self.check_and_publish(key)
            known = self.snapshots.get(key)
        return (key, known) if known is not None else None

    def fix_action(self, key: str, snapshot: Snapshot, finding: Finding) -> lsp.CodeAction | None:
        diagnostic = finding.diagnostic
        fix = diagnostic.fix
        if fix is None:
            return None
        changes = self.edits(key, snapshot, fix.edits)
        if changes is None:
            return None
        unsafe = fix.applicability is Applicability.UNSAFE
        return lsp.CodeAction(
            title=f"amplint: {fix.message} ({diagnostic.code}){' (unsafe)' if unsafe else ''}",
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=[finding.published],
            is_preferred=not unsafe,
            edit=lsp.WorkspaceEdit(changes=changes),
        )

    def edits(self, key: str, snapshot: Snapshot, edits: Sequence[Edit]) -> dict[str, list[lsp.TextEdit]] | None:
        changes: dict[str, list[lsp.TextEdit]] = {}
        units = self.units
        for edit in edits:
            uri = snapshot.uri_of(edit.cell, key)
            if uri is None:
                return None
            span = text_range(
                lines_of(snapshot.texts[uri]),
                (edit.location.row, edit.location.column),
                (edit.end_location.row, edit.end_location.column),
                units,
            )
            changes.setdefault(uri, []).append(lsp.TextEdit(range=span, new_text=edit.content))
        return changes

    def noqa_action(self, uri: str, snapshot: Snapshot, finding: Finding) -> lsp.CodeAction | None:
        text = snapshot.texts[uri]
        silenced = add_noqa_comment(text, finding.diagnostic)
        edit = replacement(text, silenced, self.units) if silenced is not None else None
        if edit is None:
            return None
        code = finding.diagnostic.code
        return lsp.CodeAction(
            title=f"amplint: add `# noqa: {code}` to silence {code} on this line",
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=[finding.published],
            edit=lsp.WorkspaceEdit(changes={uri: [edit]}),
        )

    async def fix_all_action(self, key: str, snapshot: Snapshot) -> lsp.CodeAction | None:
        options = RunOptions(mode=Mode.FIX, unsafe_fixes=False)
        report = await self.in_checker(lambda: self.run(snapshot, options))
        if report.fixed is None:
            return None
        changes: dict[str, list[lsp.TextEdit]] = {}
        units = self.units
        if snapshot.is_notebook:
            for number, new in (report.cells or {}).items():
                uri = snapshot.cells.get(number)
                edit = replacement(snapshot.texts[uri], new, units) if uri is not None else None
                if uri is not None and edit is not None:
                    changes[uri] = [edit]
        else:
            (text,) = snapshot.texts.values()
            edit = replacement(text, report.new_text, units)
            if edit is not None:
                changes[key] = [edit]
        if not changes:
            return None
        return lsp.CodeAction(
            title="amplint: fix all safe fixes",
            kind=FIX_ALL,
            edit=lsp.WorkspaceEdit(changes=changes),
        )

    async def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        found = await self.fresh_snapshot(uri)
        if found is None:
            return []
        key, snapshot = found
        wanted = params.context.only
        actions: list[lsp.CodeAction] = []
        if _wanted(lsp.CodeActionKind.QuickFix, wanted):
            for finding in snapshot.findings.get(uri, []):
                if not overlaps(finding.published.range, params.range):
                    continue
                for action in (self.fix_action(key, snapshot, finding), self.noqa_action(uri, snapshot, finding)):
                    if action is not None:
                        actions.append(action)
        # Fixing the whole file costs a check per pass: only when asked for (a lightbulb
        # request on every cursor move is Automatic and names no kind).
        asked = bool(wanted) or params.context.trigger_kind == lsp.CodeActionTriggerKind.Invoked
        if _wanted(FIX_ALL, wanted) and asked and any(f.diagnostic.fix for found in snapshot.findings.values() for f in found):
            fix_all = await self.fix_all_action(key, snapshot)
            if fix_all is not None:
                actions.append(fix_all)
        return actions

    # -- hover -----------------------------------------------------------------------------

    def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        uri = params.text_document.uri
        snapshot = self.snapshots.get(self.owner.get(uri, uri))
        if snapshot is None or snapshot.texts.get(uri) != self.text_of(uri):
            return None
        found = [f for f in snapshot.findings.get(uri, []) if contains(f.published.range, params.position)]
        if not found:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(
                kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(_explain(f.diagnostic) for f in found)
            ),
            range=found[0].published.range,
        )

    def text_of(self, uri: str) -> str | None:
        document = self.workspace.text_documents.get(unquote(uri))
        return None if document is None else str(document.source)


def _path_of(uri: str, root: str | None, suffix: str) -> str:
    """The file a document stands for (an unsaved one: a name in the workspace root)."""
    path = to_fs_path(uri)
    if path is None or not uri.startswith("file:"):
        name = Path(uri.rsplit("/", 1)[-1] or "untitled").name
        path = os.path.join(root or os.getcwd(), name if name.endswith(suffix) else name + suffix)
    return path


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether a code action of ``kind`` is asked for (an asked kind is a prefix of it)."""
    if not only:
        return True
    return any(kind == asked or kind.startswith(asked + ".") for asked in only)


def _published(diagnostic: Diagnostic, span: lsp.Range) -> lsp.Diagnostic:
    url = rule_help_uri(diagnostic.code)
    # A file amplint cannot parse is an error; a finding, like Ruff's, a warning.
    severity = lsp.DiagnosticSeverity.Error if diagnostic.code == PARSE_ERROR else lsp.DiagnosticSeverity.Warning
    return lsp.Diagnostic(
        range=span,
        message=diagnostic.message,
        severity=severity,
        code=diagnostic.code,
        code_description=lsp.CodeDescription(href=url) if url is not None else None,
        source=NAME,
    )


def _page_link(code: str) -> str:
    """A link to the rule's page: the published one, else the page in this checkout."""
    url = rule_help_uri(code)
    if url is not None:
        return f"[{code} rule page]({url})"
    local = Path(amplint.__file__).resolve().parent.parent / rule_url(code)
    if local.is_file():
        return f"[{code} rule page]({from_fs_path(str(local))})"
    return f"rule page: `{rule_url(code)}` (or run `amplint rule {code}`)"


def _explain(diagnostic: Diagnostic) -> str:
    rule = rule_by_code(diagnostic.code)
    title = f"**{diagnostic.code}** `{rule.name}`: {rule.summary}" if rule is not None else f"**{diagnostic.code}**"
    parts = [title, diagnostic.message]
    if diagnostic.fix is not None:
        safety = "safe" if diagnostic.fix.applicability is Applicability.SAFE else "unsafe"
        parts.append(f"Fix ({safety}): {diagnostic.fix.message}")
    parts.append(_page_link(diagnostic.code))
    return "\n\n".join(parts)


def create_server() -> AmplintServer:
    """A language server with amplint's features registered."""
    server = AmplintServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AmplintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AmplintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.schedule(ls.owner.get(uri, uri), DEBOUNCE)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AmplintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.schedule(ls.owner.get(uri, uri), 0)  # a configuration may have changed with it

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AmplintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: AmplintServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: AmplintServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, DEBOUNCE)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: AmplintServer, params: lsp.DidSaveNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: AmplintServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        ls.forget(params.notebook_document.uri)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]),
    )
    async def code_action(ls: AmplintServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        try:
            return await ls.code_actions(params)
        except Exception:  # noqa: BLE001 - logged; no actions rather than an error box
            ls.log(f"amplint: code actions failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return []

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: AmplintServer, params: lsp.HoverParams) -> lsp.Hover | None:
        try:
            return ls.hover(params)
        except Exception:  # noqa: BLE001 - logged; no hover rather than an error box
            ls.log(f"amplint: hover failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return None

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: AmplintServer, params: None) -> None:
        for task in list(ls.pending.values()):
            task.cancel()
        ls.checker.shutdown(wait=False, cancel_futures=True)

    return server


def main() -> None:
    """Serve the editor on stdin/stdout until it says exit."""
    logging.basicConfig(level=logging.WARNING, format="amplint server: %(levelname)s: %(message)s")
    create_server().start_io()
