"""A lint or check finding of a Python script or flow: the rule, how bad, where."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rho_notebook.errors import Diagnostic

__all__ = ["Finding", "Severity"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One lint finding of a script: the rule, how bad, where (1-based line and column)."""

    rule: str
    severity: Severity
    message: str
    file: str
    line: int
    column: int
    flows: tuple[str, ...] = field(default=(), kw_only=True)
    """The flows to name (``flow.unnamed``; in JSON when set), as :class:`Diagnostic` ``flows``."""

    def render(self) -> str:
        """``file:line:col: warning[rule]: message``, like a diagnostic."""
        return f"{self.file}:{self.line}:{self.column}: {self.severity}[{self.rule}]: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            **({"flows": list(self.flows)} if self.flows else {}),
        }

    def diagnostic(self) -> Diagnostic:
        return Diagnostic(self.rule, self.message, self.file, self.line, self.column, flows=self.flows)
