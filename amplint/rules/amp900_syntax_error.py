from __future__ import annotations

from amplint.rules.base import Rule


class SyntaxErrorRule(Rule):
    """## What it does
    Reports a file that amplint cannot analyse: it does not parse, it cannot be decoded
    (UTF-8 by default; a PEP 263 coding cookie and a UTF-8 BOM are honoured), it cannot
    be read, or it is larger than `max-file-size` (default 4 MiB). The diagnostic points
    at the syntax error when there is one. The rest of the run goes on, and `fix` never
    touches such a file.

    A file that CPython compiles but libcst's parser does not handle (a few rare forms,
    such as `(x): int` in a function) is valid code, so it gets no AMP900, which would
    fail a CI on correct code: a warning on stderr says it was not checked. Conversely,
    newer syntax that libcst parses (PEP 695 generics, PEP 701 f-strings) is analysed
    even when the Python running amplint is too old to compile it.

    amplint is not a syntax checker: a file that contains none of the enabled rules'
    trigger words (such as `amp`, `autocast`, `GradScaler`, `backward`) is never parsed,
    so a syntax error there is not reported. An empty file is valid Python.

    ## Why is this bad?
    A file amplint cannot parse is a file it cannot check: an AMP mistake in it would
    go unnoticed. The diagnostic makes that visible instead of silently skipping it.

    ## Example
    ```python
    import torch

    with torch.amp.autocast("cuda":
        pass
    ```

    ## Use instead
    ```python
    import torch

    with torch.amp.autocast("cuda"):
        pass
    ```

    ## Fix safety
    No fix. Generated or legacy (Python 2) files can be excluded with `extend-exclude`
    or silenced with `per-file-ignores = {"legacy/*.py" = ["AMP900"]}`.
    """

    code = "AMP900"
    name = "syntax-error"
    summary = "File cannot be decoded, read or parsed"
    # Reported by the engine itself, never by a traversal: no trigger words.
    triggers = frozenset()
