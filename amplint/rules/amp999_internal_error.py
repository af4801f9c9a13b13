from __future__ import annotations

from amplint.rules.base import Rule


class InternalErrorRule(Rule):
    """## What it does
    Reports a bug in amplint itself: a rule raised an exception on this file, or the
    worker process analysing it died. The message names the rule and the exception;
    `--verbose` prints the traceback. The other rules' findings for the file are kept,
    the run goes on, and amplint exits with status 2 at the end.

    ## Why is this bad?
    The file was not fully checked. Please report it with the traceback and, if you
    can, the smallest source that reproduces it.

    ## Fix safety
    No fix. This code cannot be selected away: an internal error always fails the run.
    """

    code = "AMP999"
    name = "internal-error"
    summary = "amplint failed on this file"
    triggers = frozenset()
