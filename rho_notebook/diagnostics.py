"""One problem found in a workflow (:class:`Diagnostic`): the rule it breaks, what is wrong and
where, as front ends print it and answer it as JSON.

Errors carry diagnostics (:meth:`rho_notebook.errors.RhoError.diagnostics`); import the class from
:mod:`rho_notebook.errors`, which re-exports it. Standard library only, like the rest of the base.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Diagnostic"]


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a workflow, with the rule it breaks and where it is."""

    rule: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    suggestion: str | None = field(default=None, kw_only=True)
    """The name the person probably meant (``flow.name``: the flow to name); not rendered, not in JSON."""
    input: str | None = field(default=None, kw_only=True)
    """The input a value is missing for (``input.missing``; in JSON when set), for front ends' own words."""
    flows: tuple[str, ...] = field(default=(), kw_only=True)
    """The flows the module defines (``flow.name``) or to name (``flow.unnamed``; in JSON when set), so
    that a front end that names a flow otherwise than ``--flow`` can word the finding its own way."""
    step: str | None = field(default=None, kw_only=True)
    """The item-graph step the finding is about (in JSON when set), as a document finding names it."""
    field: str | None = dataclasses.field(default=None, kw_only=True)
    """The dotted path inside that step its location points at (``params.source``; in JSON when set)."""

    def location(self) -> str:
        if self.file is None:
            return ""
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    def render(self) -> str:
        where = self.location()
        prefix = f"{where}: " if where else ""
        return f"{prefix}error[{self.rule}]: {self.message}"

    def inline(self, *, rule: bool = True, within: str | None = None) -> str:
        """This finding as a phrase inside another message, on one line: ``[RULE] FILE:LINE:COL: MESSAGE``.

        Never ``error[RULE]:``, which reads as a finding of its own. ``rule=False`` where the
        outer finding carries this one's rule; the location is left out when there is none or it
        is in ``within``, the file the outer finding is about."""
        where = self.location() if self.file not in (None, within) else ""
        return f"[{self.rule}] " * rule + f"{where}: " * bool(where) + self.message

    @staticmethod
    def inline_all(found: Iterable[Diagnostic]) -> str:
        """Every finding of ``found`` :meth:`inline`, joined with ``"; "`` (a nested error's diagnostics)."""
        return "; ".join(d.inline() for d in found)

    def to_json(self) -> dict[str, Any]:
        found = {"rule": self.rule, "message": self.message, "file": self.file, "line": self.line}
        named = {"input": self.input, "flows": list(self.flows) or None, "step": self.step, "field": self.field}
        return {**found, "column": self.column, **{key: value for key, value in named.items() if value is not None}}
