"""What ``validate`` answers for a script or an item graph, built once for every front end: the
findings as JSON and as lines for people, and the verdict (``{"valid", "diagnostics"}``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.service.wire import ValidateJson, validate_json

__all__ = ["Checked"]


class _Finding(Protocol):
    @property
    def severity(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...

    def render(self) -> str: ...


@dataclass
class Checked:
    """The findings of one ``validate``, in the order they were found."""

    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    """Each finding's JSON (file, line, column, rule, severity, message)."""
    lines: list[str] = field(default_factory=list)
    """Each finding as ``file:line:col: severity[rule]: message``."""

    @classmethod
    def of(cls, findings: Iterable[_Finding]) -> Checked:
        found = list(findings)
        return cls([f.to_json() for f in found], [f.render() for f in found])

    def add_errors(self, err: InvalidWorkflow) -> None:
        """Add the diagnostics of ``err`` (inputs that do not fit, say) as errors."""
        for diagnostic in err.diagnostics():
            self.diagnostics.append({**diagnostic.to_json(), "severity": "error"})
            self.lines.append(diagnostic.render())

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.get("severity") == "error")

    @property
    def warnings(self) -> int:
        return len(self.diagnostics) - self.errors

    def to_json(self) -> ValidateJson:
        """``{"valid", "diagnostics"}``: what ``validate --output json`` prints and MCP answers."""
        return validate_json(self.diagnostics, valid=self.errors == 0)
