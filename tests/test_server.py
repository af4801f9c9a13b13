"""``amplint server`` driven by a real LSP client (pytest-lsp) over stdio: diagnostics on
open and change, code actions whose edits remove the finding, ``# noqa``, fix all,
hover, notebooks through the notebook document sync, the project's configuration, and
failures that must not end the session.

Edits are applied here, by the test's own position arithmetic (UTF-16, as LSP counts
by default), and the edited text is sent back as the editor would send it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

BAD = 'import torch\nnote = "\U0001f600"; d = torch.get_autocast_gpu_dtype()\n'
FIXED = 'import torch\nnote = "\U0001f600"; d = torch.get_autocast_dtype("cuda")\n'
# The finding: line 1, from after `d = ` to the end of the call. The emoji before it
# is one code point but two UTF-16 code units.
START = len('note = "') + 2 + len('"; d = ')
END = START + len("torch.get_autocast_gpu_dtype()")

CAPABILITIES = lsp.ClientCapabilities(
    general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
    text_document=lsp.TextDocumentClientCapabilities(
        synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(),
        hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown]),
        code_action=lsp.CodeActionClientCapabilities(
            code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                code_action_kind=lsp.ClientCodeActionKindOptions(
                    value_set=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll]
                )
            )
        ),
    ),
    notebook_document=lsp.NotebookDocumentClientCapabilities(
        synchronization=lsp.NotebookDocumentSyncClientCapabilities()
    ),
    window=lsp.WindowClientCapabilities(),
)

# A server whose AMP002 rule raises on the name `explode`, started the way an editor
# starts `amplint server`: the test reaches into the server's own process this way.
FAULTY_RULE = """
import libcst
from amplint.rules.amp002_deprecated_autocast_state import DeprecatedAutocastState
real = DeprecatedAutocastState.visit_Call
def visit_Call(self, node):
    if isinstance(node.func, libcst.Name) and node.func.value == "explode":
        raise RuntimeError("rule exploded")
    return real(self, node)
DeprecatedAutocastState.visit_Call = visit_Call
from amplint.server import main
main()
"""
# A server whose library call itself fails for files named broken.py.
FAULTY_API = """
import amplint.server.app as app
real = app.run_text
def run_text(text, path, options, **more):
    if path.endswith("broken.py"):
        raise RuntimeError("the library failed")
    return real(text, path, options, **more)
app.run_text = run_text
app.main()
"""


async def start(lsp_client: LanguageClient, root: Path) -> AsyncIterator[None]:
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n\n[tool.amplint]\n')
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=CAPABILITIES, root_uri=root.as_uri(), workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="demo")])
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "amplint", "server"]))  # type: ignore[untyped-decorator]
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    async for _ in start(lsp_client, tmp_path):
        yield


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", FAULTY_RULE]))  # type: ignore[untyped-decorator]
async def faulty_rule_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    async for _ in start(lsp_client, tmp_path):
        yield


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", FAULTY_API]))  # type: ignore[untyped-decorator]
async def faulty_api_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    async for _ in start(lsp_client, tmp_path):
        yield


# -- the test's own editor ---------------------------------------------------------------------


def offset(text: str, position: lsp.Position) -> int:
    """The string index of an LSP position (UTF-16 code units) in ``text``."""
    starts = [0] + [match.end() for match in re.finditer(r"\r\n|\r|\n", text)]
    index = starts[position.line]
    units = 0
    while units < position.character:
        units += 2 if ord(text[index]) > 0xFFFF else 1
        index += 1
    return index


def apply(text: str, edits: Sequence[lsp.TextEdit]) -> str:
    spans = sorted(((offset(text, e.range.start), offset(text, e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


async def until(condition: Callable[[], bool]) -> None:
    """Wait for the server's notifications to make ``condition`` true (a hang guard, not a
    timing requirement)."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout=60)


def cleared(client: LanguageClient, uri: str) -> bool:
    """Whether the last diagnostics published for ``uri`` were none."""
    return uri in client.diagnostics and not client.diagnostics[uri]


def codes(client: LanguageClient, uri: str) -> list[str]:
    return [str(d.code) for d in client.diagnostics.get(uri, ())]


def open_python(client: LanguageClient, path: Path, text: str) -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    return uri


def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def actions(client: LanguageClient, uri: str, diagnostic: lsp.Diagnostic, only: list[str] | None = None) -> list[lsp.CodeAction]:
    result = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=lsp.CodeActionContext(diagnostics=[diagnostic], only=only),
        )
    )
    return [action for action in result or [] if isinstance(action, lsp.CodeAction)]


def edits_for(action: lsp.CodeAction, uri: str) -> list[lsp.TextEdit]:
    assert action.edit is not None and action.edit.changes is not None
    return list(action.edit.changes[uri])


# -- Python files ------------------------------------------------------------------------------


async def test_a_finding_is_published_and_its_fix_removes_it(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_python(client, tmp_path / "train.py", BAD)
    await until(lambda: bool(client.diagnostics.get(uri)))
    (diagnostic,) = client.diagnostics[uri]
    assert diagnostic.code == "AMP002"
    assert diagnostic.source == "amplint"
    assert diagnostic.range == lsp.Range(
        start=lsp.Position(line=1, character=START), end=lsp.Position(line=1, character=END)
    )

    found = await actions(client, uri, diagnostic)
    titles = [action.title for action in found]
    fix = next(action for action in found if "get_autocast_dtype" in action.title)
    assert fix.kind == lsp.CodeActionKind.QuickFix
    assert "(unsafe)" not in fix.title
    assert any("# noqa: AMP002" in title for title in titles)
    fixed = apply(BAD, edits_for(fix, uri))
    assert fixed == FIXED

    change(client, uri, 2, fixed)
    await until(lambda: cleared(client, uri))


async def test_an_unsafe_fix_is_labelled(client: LanguageClient, tmp_path: Path) -> None:
    text = "import torch\nmodel = Net().cuda().half()\nloss = model(x.half()).sum()\nloss.backward()\n"
    uri = open_python(client, tmp_path / "train.py", text)
    await until(lambda: bool(client.diagnostics.get(uri)))
    diagnostic = client.diagnostics[uri][0]
    assert diagnostic.code == "AMP101"
    titles = [action.title for action in await actions(client, uri, diagnostic)]
    assert any(title.endswith("(unsafe)") for title in titles), titles


async def test_add_noqa_silences_the_finding(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_python(client, tmp_path / "train.py", BAD)
    await until(lambda: bool(client.diagnostics.get(uri)))
    (diagnostic,) = client.diagnostics[uri]
    noqa = next(action for action in await actions(client, uri, diagnostic) if "noqa" in action.title)
    silenced = apply(BAD, edits_for(noqa, uri))
    assert silenced == BAD.replace("dtype()\n", "dtype()  # noqa: AMP002\n")
    change(client, uri, 2, silenced)
    await until(lambda: cleared(client, uri))


async def test_fix_all_is_a_source_action_of_the_safe_fixes(client: LanguageClient, tmp_path: Path) -> None:
    training = "model = Net().cuda().half()\nloss = model(x).sum()\nloss.backward()\n"
    text = BAD + "scaler = torch.cuda.amp.GradScaler()\n" + training
    uri = open_python(client, tmp_path / "train.py", text)
    await until(lambda: codes(client, uri) == ["AMP002", "AMP001", "AMP101"])
    first = client.diagnostics[uri][0]
    (fix_all,) = await actions(client, uri, first, only=[lsp.CodeActionKind.SourceFixAll])
    assert fix_all.kind == "source.fixAll.amplint"
    fixed = apply(text, edits_for(fix_all, uri))
    # The unsafe AMP101 fix (removing `.half()`) is not among "fix all safe".
    assert fixed == FIXED + 'scaler = torch.amp.GradScaler("cuda")\n' + training
    change(client, uri, 2, fixed)
    await until(lambda: codes(client, uri) == ["AMP101"])


async def test_hover_shows_the_rule_and_a_link_to_its_page(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_python(client, tmp_path / "train.py", BAD)
    await until(lambda: bool(client.diagnostics.get(uri)))
    inside = lsp.Position(line=1, character=START + 3)
    hover = await client.text_document_hover_async(lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=inside))
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    value = hover.contents.value
    assert "**AMP002**" in value
    assert "Deprecated autocast state function" in value  # the rule's summary
    assert "AMP002.md" in value  # its page
    outside = lsp.Position(line=0, character=0)
    assert await client.text_document_hover_async(lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=outside)) is None


async def test_the_project_configuration_of_the_file_applies(client: LanguageClient, tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.amplint]\nignore = ["AMP002"]\n')
    ignored = open_python(client, sub / "train.py", BAD)
    checked = open_python(client, tmp_path / "train.py", BAD)
    await until(lambda: ignored in client.diagnostics and bool(client.diagnostics.get(checked)))
    assert cleared(client, ignored)
    assert codes(client, checked) == ["AMP002"]


async def test_changes_are_checked_from_the_editor_text_not_the_file(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_python(client, tmp_path / "train.py", "import torch\n")
    await until(lambda: uri in client.diagnostics)
    assert cleared(client, uri)
    change(client, uri, 2, BAD)  # never saved: the file on disk stays clean
    await until(lambda: bool(client.diagnostics.get(uri)))
    assert codes(client, uri) == ["AMP002"]


# -- notebooks ---------------------------------------------------------------------------------


def cell_uri(path: Path, number: int) -> str:
    return f"vscode-notebook-cell:{path.as_posix()}#cell{number}"


def open_notebook(client: LanguageClient, path: Path, cells: list[tuple[str, str]]) -> list[str]:
    """Open a notebook of (kind, text) cells, as VS Code does; the cells' URIs."""
    uris = [cell_uri(path, number) for number in range(1, len(cells) + 1)]
    client.notebook_document_did_open(
        lsp.DidOpenNotebookDocumentParams(
            notebook_document=lsp.NotebookDocument(
                uri=path.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    lsp.NotebookCell(kind=lsp.NotebookCellKind.Code if kind == "code" else lsp.NotebookCellKind.Markup, document=uri)
                    for (kind, _), uri in zip(cells, uris, strict=True)
                ],
            ),
            cell_text_documents=[
                lsp.TextDocumentItem(uri=uri, language_id="python" if kind == "code" else "markdown", version=1, text=text)
                for (kind, text), uri in zip(cells, uris, strict=True)
            ],
        )
    )
    return uris


def change_cell(client: LanguageClient, path: Path, version: int, uri: str, text: str) -> None:
    client.notebook_document_did_change(
        lsp.DidChangeNotebookDocumentParams(
            notebook_document=lsp.VersionedNotebookDocumentIdentifier(version=version, uri=path.as_uri()),
            change=lsp.NotebookDocumentChangeEvent(
                cells=lsp.NotebookDocumentCellChanges(
                    text_content=[
                        lsp.NotebookDocumentCellContentChanges(
                            document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                            changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
                        )
                    ]
                )
            ),
        )
    )


async def test_a_notebook_gets_diagnostics_per_cell_and_the_fix_removes_them(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    train = "%%time\nscaler = torch.cuda.amp.GradScaler()"
    uris = open_notebook(
        client,
        path,
        [("markdown", "# Mixed precision"), ("code", "!pip install torch\nimport torch"), ("code", train)],
    )
    await until(lambda: bool(client.diagnostics.get(uris[2])))
    assert cleared(client, uris[1])
    (diagnostic,) = client.diagnostics[uris[2]]
    assert diagnostic.code == "AMP001"
    # Row 2 of the third cell, counted in that cell.
    assert diagnostic.range.start == lsp.Position(line=1, character=len("scaler = "))

    fix = next(a for a in await actions(client, uris[2], diagnostic) if "GradScaler" in a.title)
    assert fix.edit is not None and fix.edit.changes is not None and set(fix.edit.changes) == {uris[2]}
    fixed = apply(train, edits_for(fix, uris[2]))
    assert fixed == '%%time\nscaler = torch.amp.GradScaler("cuda")'
    change_cell(client, path, 2, uris[2], fixed)
    await until(lambda: cleared(client, uris[2]))


async def test_a_notebook_fix_can_edit_two_cells(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    first, second = "from torch.cuda.amp import GradScaler\n", "scaler = GradScaler()"
    uris = open_notebook(client, path, [("code", first), ("code", second)])
    await until(lambda: bool(client.diagnostics.get(uris[1])))
    diagnostic = client.diagnostics[uris[1]][0]
    fix = next(a for a in await actions(client, uris[1], diagnostic) if "GradScaler" in a.title)
    assert fix.edit is not None and fix.edit.changes is not None
    assert set(fix.edit.changes) == {uris[0], uris[1]}  # `import torch` goes into the first cell
    new_second = apply(second, edits_for(fix, uris[1]))
    assert new_second == 'scaler = torch.amp.GradScaler("cuda")'
    assert apply(first, edits_for(fix, uris[0])).startswith("import torch\n")


async def test_fix_all_in_a_notebook_edits_each_changed_cell(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    cells = [("code", "import torch\nd = torch.get_autocast_gpu_dtype()"), ("markdown", "text"), ("code", "s = torch.cuda.amp.GradScaler()")]
    uris = open_notebook(client, path, cells)
    await until(lambda: bool(client.diagnostics.get(uris[0])) and bool(client.diagnostics.get(uris[2])))
    (fix_all,) = await actions(client, uris[0], client.diagnostics[uris[0]][0], only=[lsp.CodeActionKind.SourceFixAll])
    assert fix_all.edit is not None and fix_all.edit.changes is not None
    assert set(fix_all.edit.changes) == {uris[0], uris[2]}
    assert apply(cells[0][1], edits_for(fix_all, uris[0])) == 'import torch\nd = torch.get_autocast_dtype("cuda")'
    assert apply(cells[2][1], edits_for(fix_all, uris[2])) == 's = torch.amp.GradScaler("cuda")'
    # Asked from a cell without findings (the markdown one), it is the same action.
    anywhere = lsp.Diagnostic(range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)), message="")
    assert await actions(client, uris[1], anywhere, only=[lsp.CodeActionKind.SourceFixAll]) == [fix_all]


# -- failures ----------------------------------------------------------------------------------


async def test_a_rule_that_raises_is_logged_and_the_session_goes_on(faulty_rule_client: LanguageClient, tmp_path: Path) -> None:
    client = faulty_rule_client
    # The deprecated call makes AMP002 run on the file (its trigger words are there).
    text = "import torch\nexplode()\nd = torch.get_autocast_gpu_dtype()\nscaler = torch.cuda.amp.GradScaler()\n"
    uri = open_python(client, tmp_path / "train.py", text)
    await until(lambda: uri in client.diagnostics)
    # The failing rule's findings are lost; the others' are shown; no AMP999 squiggle.
    assert codes(client, uri) == ["AMP001"]
    await until(lambda: any("rule exploded" in m.message for m in client.log_messages))
    logged = next(m for m in client.log_messages if "rule exploded" in m.message)
    assert logged.type == lsp.MessageType.Error
    assert "AMP002" in logged.message
    # Still serving: the next document is checked as usual.
    other = open_python(client, tmp_path / "other.py", BAD)
    await until(lambda: bool(client.diagnostics.get(other)))
    assert codes(client, other) == ["AMP002"]


async def test_an_internal_error_leaves_that_document_without_diagnostics(faulty_api_client: LanguageClient, tmp_path: Path) -> None:
    client = faulty_api_client
    broken = open_python(client, tmp_path / "broken.py", BAD)
    await until(lambda: broken in client.diagnostics)
    assert cleared(client, broken)
    await until(lambda: any("the library failed" in m.message for m in client.log_messages))
    assert client.error is None
    # Code actions and hover on it answer (nothing) rather than fail.
    assert await actions(client, broken, lsp.Diagnostic(range=lsp.Range(start=lsp.Position(line=1, character=0), end=lsp.Position(line=1, character=5)), message="")) == []
    fine = open_python(client, tmp_path / "fine.py", BAD)
    await until(lambda: bool(client.diagnostics.get(fine)))
    assert codes(client, fine) == ["AMP002"]

