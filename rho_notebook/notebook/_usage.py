"""How a magic says the user got something wrong: ``UsageError`` (shown without a traceback), and
an invalid workflow's diagnostics as text, pointing at the cell's lines."""

from __future__ import annotations

import re

from IPython.core.error import UsageError

from rho_notebook.errors import InvalidWorkflow, NotFound, RhoError

__all__ = ["diagnostics_text", "usage_error"]

_MISSING_INPUT = re.compile(r"^missing required input '([^']+)' \(([^)]+)\)")


def diagnostics_text(err: InvalidWorkflow, *, what: str, retry: str | None = None) -> str:
    """The problems of ``what``, one per line; when the only problems are required inputs that were
    not given and ``retry`` is the magic line to run again, say that and how to pass them."""
    found = err.diagnostics()
    missing = [_MISSING_INPUT.match(d.message) if d.rule == "input.missing" else None for d in found]
    if retry is not None and found and all(missing):
        named = [m for m in missing if m is not None]
        noun = "input" if len(named) == 1 else "inputs"
        which = ", ".join(f"{m[1]!r} ({m[2]})" for m in named)
        flags = " ".join(f"--input '{m[1]}=JSON'" for m in named)
        return f"{what} needs the required {noun} {which}; pass {'it' if len(named) == 1 else 'them'} on the magic line: {retry} {flags}"
    head = f"{what} is not valid ({len(found)} problem{'s' if len(found) != 1 else ''}):"
    return "\n".join([head, *(d.render() for d in found)])


def usage_error(err: RhoError, *, what: str = "") -> UsageError:
    if isinstance(err, InvalidWorkflow):
        return UsageError(diagnostics_text(err, what=what or "the workflow"))
    if isinstance(err, NotFound):  # what lists the runs and plans here is a %workflow verb
        return UsageError(f"error[{err.rule}]: {err.listed_with('%workflow {}')}")
    return UsageError(f"error[{err.rule}]: {err.message}")
