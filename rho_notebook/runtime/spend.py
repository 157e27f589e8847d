"""Where an attempt's model calls report what they spent, and ask the budgets before they call.

:class:`AttemptSpend` is the run's side of :class:`~rho_notebook.exec.base.ModelCalls`: each
completed call becomes a ``model_called`` journal record, made durable before the caller goes on
(a crash never forgets spend that a budget must count), and folded into the run's state by the
journal's own fold (:func:`rho_notebook.model.ledger.add_call`). Before a call, the run's
:class:`SpendGuard` (its budgets, :mod:`rho_notebook.runtime.budget`) may refuse it by raising
:class:`~rho_notebook.errors.BudgetExceeded`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rho_notebook.errors import BudgetExceeded
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.run_state import RunState

__all__ = ["AttemptSpend", "SpendGuard"]

_CALL_FIELDS = (
    "provider",
    "model",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "retries",
    "tool_calls",
    "seconds",
    "key",
)


class SpendGuard(Protocol):
    """The run's budgets as the spend recorder sees them."""

    def check(self, state: RunState, *, node: str, max_output_tokens: int | None, key: str | None) -> None:
        """Raise :class:`~rho_notebook.errors.BudgetExceeded` when a call of ``node`` that may
        output up to ``max_output_tokens`` (None: unknown) could pass a budget, given what
        ``state`` says was spent so far."""
        ...


@dataclass
class AttemptSpend:
    """The spend of attempt ``attempt`` of ``node`` in the run whose state is ``state``."""

    run_id: str
    node: str
    attempt: int
    state: RunState
    emit: Callable[[dict[str, Any]], object]
    """Appends a record to the run's journal and folds it into ``state``."""
    sync: Callable[[], object]
    """Makes every appended record durable."""
    guard: SpendGuard | None = None

    refused: BudgetExceeded | None = None
    """The budget's refusal of a call of this attempt, if one came: the attempt halts the run even
    when its executor caught the error (an item step turns errors into failures)."""

    async def before_call(self, *, max_output_tokens: int | None, key: str | None = None) -> None:
        if self.guard is not None:
            try:
                self.guard.check(self.state, node=self.node, max_output_tokens=max_output_tokens, key=key)
            except BudgetExceeded as err:
                self.refused = err
                raise

    async def after_call(self, call: Mapping[str, Any]) -> None:
        fields = {name: call[name] for name in _CALL_FIELDS if call.get(name) is not None}
        fields.setdefault("provider", "")
        fields.setdefault("model", "")
        for name in ("input_tokens", "output_tokens", "retries", "tool_calls"):
            fields.setdefault(name, 0)
        fields.setdefault("seconds", 0.0)
        self.emit(event(EventKind.MODEL_CALLED, self.run_id, node=self.node, attempt=self.attempt, **fields))
        self.sync()
