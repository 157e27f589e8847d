"""Every error rho_notebook raises on purpose, rooted at :class:`RhoError`.

Errors carry structured, keyword-only fields (file, line, column, budget, ...) so that
front ends can point at the problem, and they pickle across process boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Diagnostic",
    "RhoError",
    "SourceError",
    "InvalidWorkflow",
    "InputError",
    "LimitError",
    "PlanError",
    "StoreError",
    "NotFound",
    "AmbiguousId",
]


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a workflow, with the rule it breaks and where it is."""

    rule: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None

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

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
        }


class RhoError(Exception):
    """Root of every error rho_notebook raises deliberately."""

    rule = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.__dict__))

    def diagnostics(self) -> list[Diagnostic]:
        return [Diagnostic(rule=self.rule, message=self.message)]


def _rebuild(cls: type[RhoError], message: str, state: dict[str, Any]) -> RhoError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class InvalidWorkflow(RhoError):
    """The workflow source or graph breaks one or more rules; holds every diagnostic found."""

    rule = "invalid"

    def __init__(self, found: list[Diagnostic]) -> None:
        if not found:
            msg = "InvalidWorkflow needs at least one diagnostic"
            raise ValueError(msg)
        super().__init__("\n".join(d.render() for d in found))
        self.found = list(found)

    def diagnostics(self) -> list[Diagnostic]:
        return list(self.found)


class SourceError(InvalidWorkflow):
    """Starlark source could not be loaded or evaluated (syntax, load rules, runtime errors)."""

    rule = "source"

    def __init__(
        self,
        message: str,
        *,
        rule: str = "source",
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__([Diagnostic(rule=rule, message=message, file=file, line=line, column=column)])
        self.rule = rule


class InputError(InvalidWorkflow):
    """A supplied input is missing, unknown, malformed or of the wrong type."""

    rule = "input"


class LimitError(InvalidWorkflow):
    """A named planning budget was exceeded."""

    rule = "limit"

    def __init__(
        self,
        *,
        budget: str,
        limit: int,
        measured: int,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        detail: str = "",
    ) -> None:
        extra = f" ({detail})" if detail else ""
        message = (
            f"planning budget '{budget}' exceeded: accepted limit {limit}, "
            f"measured {measured}{extra}"
        )
        super().__init__(
            [Diagnostic(rule=f"limit.{budget}", message=message, file=file, line=line, column=column)]
        )
        self.budget = budget
        self.limit = limit
        self.measured = measured


class PlanError(RhoError):
    """A plan could not be created or loaded (resolution of executables or agents, store content)."""

    rule = "plan"


class StoreError(RhoError):
    """The durable store is unreadable, unsafe (symlinks, permissions) or inconsistent."""

    rule = "store"


class NotFound(StoreError):
    """No plan or run matches the given ID or prefix."""

    rule = "not_found"


class AmbiguousId(StoreError):
    """An ID prefix matches more than one plan or run."""

    rule = "ambiguous_id"
