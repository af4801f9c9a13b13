"""AMP901 ``unused-noqa``: a ``# noqa`` code of amplint's that silences nothing.

The engine finds it, not a rule: it needs every diagnostic the rules produce *before*
``# noqa`` comments are applied. A file whose noqa comments name an enabled amplint code
is linted a second time with those comments blanked out (same rows and columns), which
gives exactly the findings the comments would have silenced; the pass costs nothing on
files without such comments, and the rule is off by default.

Only amplint's own codes are judged (``AMPnnn``): other tools' codes and a bare
``# noqa`` are left alone. A code is *unused* when nothing of that code is reported on
its row, *non-enabled* when the rule does not run on the file, *unknown* when no rule
has it. The fix removes the judged codes, or the whole directive when none remain; it is
safe: a removed code silenced nothing.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amplint.diagnostics import Applicability, Diagnostic, Edit, Fix
from amplint.engine.alignment import Locator
from amplint.engine.catalog import INTERNAL_ERROR, PARSE_ERROR, FixAvailability
from amplint.engine.context import SourceContext
from amplint.engine.noqa import _NOQA as NOQA_DIRECTIVE
from amplint.engine.rule import Invalid, Rule
from amplint.engine.source import line_starts

UNUSED_NOQA = "AMP901"
# Findings no noqa comment can silence: naming them in one silences nothing.
NEVER_SUPPRESSED = frozenset({PARSE_ERROR, INTERNAL_ERROR})
_AMPLINT_CODE = re.compile(r"AMP\d{3}")
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_MAYBE_NOQA = re.compile(r"noqa", re.IGNORECASE)


class UnusedNoqaRule(Rule[SourceContext]):
    """## What it does
    Reports a `# noqa` comment that names an amplint code which silences nothing on its
    line: the finding was fixed or moved, the rule is not enabled for the file, or the
    code does not exist. Only amplint's codes (`AMPnnn`) are judged; other tools' codes
    and a bare `# noqa` are left alone.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line, and a misspelt code
    silences nothing while looking as if it did. After `--add-noqa` has suppressed every
    finding of a large codebase, this rule shows which suppressions the fixes since
    have made unnecessary.

    ## Example
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")  # noqa: AMP001
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    ```

    ## Fix safety
    Safe: the fix removes only codes that silence nothing (the whole directive when no
    code remains), and keeps other tools' codes and the rest of the comment.
    """

    code = UNUSED_NOQA
    name = "unused-noqa"
    summary = "Unused `noqa` directive"
    triggers = frozenset()
    engine_code = True
    default_enabled = False
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = Applicability.SAFE
    VALID = (
        """
        import torch
        scaler = torch.cuda.amp.GradScaler()  # noqa: AMP001
        """,
        """
        import torch
        scaler = torch.cuda.amp.GradScaler()  # noqa
        """,
        "x = 1  # noqa: E501\n",
        "x = 1  # noqa: AMP001, AMP901\n",
    )
    INVALID = (
        Invalid(
            code="""
              import torch
            - scaler = torch.amp.GradScaler('cuda')  # noqa: AMP001
            + scaler = torch.amp.GradScaler('cuda')
            """,
            line=2, column=40, message="`AMP001`",
        ),
        Invalid(
            code="""
            - x = 1  # noqa: E501, AMP123 why
            + x = 1  # noqa: E501 why
            """,
            line=1, column=8, message="unknown: `AMP123`",
        ),
        Invalid(
            code="""
            - x = 1  # noqa: AMP001  -- kept for the migration
            + x = 1  # -- kept for the migration
            """,
            line=1, column=8, message="Unused `noqa` directive (non-enabled: `AMP001`)",
        ),
    )


@dataclass(frozen=True)
class Directive:
    """One ``# noqa`` directive: where it and its comment are, and its codes."""

    row: int
    comment: tuple[int, int]  # offsets of the whole comment
    span: tuple[int, int]  # offsets of the directive within the comment
    codes: tuple[tuple[str, int, int], ...]  # each code, upper-cased, with its offsets
    codes_span: tuple[int, int] | None  # the list of codes; None for a bare directive


def _comments(text: str) -> list[tuple[int, int, str]] | None:
    """Every comment token as (row, column, string); None if the text does not tokenize."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        return [
            (token.start[0], token.start[1], token.string)
            for token in tokenize.generate_tokens(io.StringIO(normalized).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None


def directives(text: str) -> list[Directive] | None:
    """The noqa directives of ``text`` (comments only, never strings); None when the text
    cannot be tokenised (nothing is then judged)."""
    if "#" not in text or not _MAYBE_NOQA.search(text):
        return []
    comments = _comments(text)
    if comments is None:
        return None
    starts = line_starts(text)
    found: list[Directive] = []
    for row, column, comment in comments:
        match = NOQA_DIRECTIVE.search(comment)
        if match is None:
            continue
        base = starts[row - 1] + column
        codes: tuple[tuple[str, int, int], ...] = ()
        codes_span = None
        if match.group("codes") is not None:
            first = match.start("codes")
            codes = tuple(
                (code.group().upper(), base + first + code.start(), base + first + code.end())
                for code in _CODE.finditer(match.group("codes"))
            )
            codes_span = (base + first, base + match.end("codes"))
        found.append(
            Directive(
                row=row,
                comment=(base, base + len(comment)),
                span=(base + match.start(), base + match.end()),
                codes=codes,
                codes_span=codes_span,
            )
        )
    return found


def amplint_codes(directive: Directive) -> list[str]:
    return [code for code, _, _ in directive.codes if _AMPLINT_CODE.fullmatch(code)]






def unused_noqa(
    path: str,
    text: str,
    found: Sequence[Directive],
    unsilenced: Iterable[Diagnostic],
    *,
    enabled: Iterable[str],
    known: Iterable[str],
) -> list[Diagnostic]:
    """AMP901 for each directive of ``found`` with amplint codes that silence nothing.

    ``unsilenced`` are the file's findings before noqa comments apply; ``enabled`` the
    codes that run on the file; ``known`` every code there is.
    """
    used = {(d.location.row, d.code) for d in unsilenced if d.code not in NEVER_SUPPRESSED}
    enabled_codes, known_codes = set(enabled), set(known)
    locate = Locator(text)
    diagnostics: list[Diagnostic] = []
    for directive in found:
        codes = amplint_codes(directive)
        if not codes or UNUSED_NOQA in codes:
            continue  # naming AMP901 keeps the directive as it is
        kinds: dict[str, list[str]] = {"unused": [], "non-enabled": [], "unknown": []}
        for code in codes:
            if code not in known_codes:
                kinds["unknown"].append(code)
            elif code not in enabled_codes:
                kinds["non-enabled"].append(code)
            elif (directive.row, code) not in used:
                kinds["unused"].append(code)
        judged = {code for listed in kinds.values() for code in listed}
        if not judged:
            continue
        detail = "; ".join(
            f"{kind}: {', '.join(f'`{code}`' for code in listed)}" for kind, listed in kinds.items() if listed
        )
        start, end = directive.span
        diagnostics.append(
            Diagnostic(
                code=UNUSED_NOQA,
                message=f"Unused `noqa` directive ({detail})",
                path=path,
                location=locate(start),
                end_location=locate(end),
                fix=Fix(
                    message="Remove the unused codes" if _keeps_codes(directive, judged) else "Remove the `noqa` directive",
                    edits=(_edit(text, directive, judged, locate),),
                    applicability=Applicability.SAFE,
                ),
            )
        )
    return diagnostics


def _kept(directive: Directive, removed: set[str]) -> list[str]:
    """The codes that stay, as written."""
    return [code for code, _, _ in directive.codes if code not in removed]


def _keeps_codes(directive: Directive, removed: set[str]) -> bool:
    return bool(_kept(directive, removed))


def _edit(text: str, directive: Directive, removed: set[str], locate: Locator) -> Edit:
    kept = _kept(directive, removed)
    if kept:
        assert directive.codes_span is not None
        start, end = directive.codes_span
        return _make_edit(start, end, ", ".join(kept), locate)
    comment_start, comment_end = directive.comment
    start, end = directive.span
    before = text[comment_start:start]
    after = text[end:comment_end]
    if before.strip():
        # An explanation before the directive stays.
        return _make_edit(comment_start + len(before.rstrip()), end, "", locate)
    rest = after.strip()
    if rest:
        # An explanation after the directive stays, as a comment of its own.
        return _make_edit(comment_start, comment_end, rest if rest.startswith("#") else f"# {rest}", locate)
    # The whole comment goes, with the spaces before it.
    line_start = text.rfind("\n", 0, comment_start) + 1
    line_start = max(line_start, text.rfind("\r", 0, comment_start) + 1)
    code_end = comment_start
    while code_end > line_start and text[code_end - 1] in " \t":
        code_end -= 1
    return _make_edit(code_end, comment_end, "", locate)


def _make_edit(start: int, end: int, content: str, locate: Locator) -> Edit:
    return Edit(start, end, content, locate(start), locate(end))


def apply_fixes(text: str, diagnostics: Sequence[Diagnostic]) -> str:
    """``text`` with every AMP901 fix applied (their edits never overlap: one per comment)."""
    edits = sorted(
        (edit for d in diagnostics if d.code == UNUSED_NOQA and d.fix is not None for edit in d.fix.edits),
        key=lambda edit: edit.start,
    )
    pieces: list[str] = []
    cursor = 0
    for edit in edits:
        pieces.append(text[cursor : edit.start])
        pieces.append(edit.content)
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces)

