"""The closing lines of a text report, in Ruff's words, and the ``--show-fixes`` list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from amplint.diagnostics import Diagnostic
from amplint.output.paths import display_path
from amplint.rules import rule_by_code


def plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}{suffix if count != 1 else ''}"


def _fix_counts(diagnostics: Sequence[Diagnostic], unsafe: bool) -> tuple[int, int]:
    """(fixable with the current setting, fixable only with ``--unsafe-fixes``)."""
    applicable = sum(1 for d in diagnostics if d.fixable_with(unsafe))
    hidden = 0 if unsafe else sum(1 for d in diagnostics if d.fixable_with(True)) - applicable
    return applicable, hidden


def fix_hint(diagnostics: Sequence[Diagnostic], unsafe: bool) -> list[str]:
    applicable, hidden = _fix_counts(diagnostics, unsafe)
    hidden_text = (
        f"{plural(hidden, 'hidden fix', 'es')} can be enabled with the `--unsafe-fixes` option"
    )
    if applicable and hidden:
        return [f"[*] {applicable} fixable with the `--fix` option ({hidden_text})."]
    if applicable:
        return [f"[*] {applicable} fixable with the `--fix` option."]
    if hidden:
        return [f"No fixes available ({hidden_text})."]
    return []


def failure_lines(not_checked: int, not_written: int) -> list[str]:
    """What the run could not do; such a run never says that all checks passed."""
    lines = []
    if not_checked:
        lines.append(f"{plural(not_checked, 'path')} could not be checked.")
    if not_written:
        lines.append(f"{plural(not_written, 'file')} could not be written.")
    return lines


def check_summary(
    remaining: Sequence[Diagnostic],
    *,
    fixed: int,
    unsafe: bool,
    applied: bool,
    not_checked: int = 0,
    not_written: int = 0,
) -> list[str]:
    """``Found N errors.`` and the fix hint, or ``All checks passed!``; then what could
    not be checked or written (errors printed before, on stderr)."""
    count = len(remaining)
    failures = failure_lines(not_checked, not_written)
    if count == 0 and fixed == 0:
        return failures or ["All checks passed!"]
    if applied and fixed:
        lines = [f"Found {plural(count + fixed, 'error')} ({fixed} fixed, {count} remaining)."]
    else:
        lines = [f"Found {plural(count, 'error')}."]
    return lines + fix_hint(remaining, unsafe) + failures


def diff_summary(
    would_fix: int, remaining: Sequence[Diagnostic], unsafe: bool, *, not_checked: int = 0
) -> str:
    _, hidden = _fix_counts(remaining, unsafe)
    if would_fix:
        extra = f" ({plural(hidden, 'additional fix', 'es')} available with `--unsafe-fixes`)"
        line = f"Would fix {plural(would_fix, 'error')}{extra if hidden else ''}."
    elif hidden:
        line = f"No errors would be fixed ({plural(hidden, 'fix', 'es')} available with `--unsafe-fixes`)."
    else:
        line = "No errors would be fixed."
    return "\n".join([line, *failure_lines(not_checked, 0)])


def add_noqa_summary(added: int, left: int, *, not_checked: int = 0, not_written: int = 0) -> list[str]:
    """``Added N noqa directives.``, and what could not be silenced."""
    lines = [f"Added {plural(added, 'noqa directive')}."]
    if left:
        lines.append(f"{plural(left, 'finding')} could not be silenced (listed above).")
    return lines + failure_lines(not_checked, not_written)


def fix_listing(title: str, per_file: Sequence[tuple[str, Mapping[str, int]]]) -> str:
    """``Fixed 3 errors:``, then ``- path:`` and one ``N times CODE (name)`` line per rule, like Ruff."""
    entries = [(path, counts) for path, counts in per_file if any(counts.values())]
    if not entries:
        return ""
    total = sum(sum(counts.values()) for _, counts in entries)
    lines = [f"{title} {plural(total, 'error')}:"]
    for path, counts in entries:
        lines.append(f"- {display_path(path)}:")
        for code, count in sorted(counts.items()):
            if count:
                rule = rule_by_code(code)
                lines.append(
                    f"    {count} \N{MULTIPLICATION SIGN} {code} ({rule.name if rule else code})"
                )
    return "".join(line + "\n" for line in lines)
