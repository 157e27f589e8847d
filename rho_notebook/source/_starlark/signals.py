"""The two ways evaluation stops on the worker's side; neither leaves the worker's process."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any


class Budget(Exception):
    def __init__(self, budget: str, limit: int, measured: int, detail: str = "") -> None:
        super().__init__(f"planning budget '{budget}' exceeded")
        self.budget, self.limit, self.measured, self.detail = budget, limit, measured, detail


class RhoBuiltinError(Exception):
    """Raised by a builtin; the worker remembers it because Starlark drops the cause."""

    def __init__(self, rule: str, message: str, at: list[Any] | None = None) -> None:
        super().__init__(message)
        self.rule, self.message, self.at = rule, message, at
