"""The budgets ``status`` shows while a run has one: each scope's limits and what is spent against them.

A run's budgets are folded from its ``budget_set`` records (:mod:`rho_notebook.model.budget`); what
is spent comes from the ``usage`` objects the same answer already carries (the ledger,
:mod:`rho_notebook.service.usage`), so ``status`` prices nothing twice. The run's own budget counts
the run's spend, a node's (or a script step's) that node's, over all its attempts. The wall limit
counts the seconds the run has executed, which the journal's fold does not keep: ``status`` shows
that limit without a spend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired

from typing_extensions import TypedDict  # (pydantic's wire schema needs it on Python < 3.12)

from rho_notebook.model.budget import RUN_SCOPE, limits_of
from rho_notebook.model.run_state import RunState

__all__ = ["BudgetJson", "add_budgets"]


class BudgetJson(TypedDict):
    """One budget of a run (``status``'s ``budgets``, present while a budget is set)."""

    node: str | None
    """The node or script step it limits; None: the run's own."""
    source: str
    """Who set it last: ``run`` (``--max-*``), ``workflow`` (the source), ``step``, ``raise``."""
    max_tokens: NotRequired[int]
    max_cost_usd: NotRequired[float]
    max_wall_seconds: NotRequired[float]
    spent_tokens: int
    """Input plus output tokens spent so far in its scope."""
    spent_cost_usd: float | None
    """The cost spent so far in its scope; None when a model has no price (never shown as 0)."""


def add_budgets(answer: Any, state: RunState) -> None:
    """Give a ``status`` answer that already has its ``usage`` objects its ``budgets`` (none when
    the run has no budget: the answer stays as it was)."""
    budgets: list[BudgetJson] = []
    for scope in sorted(state.budgets):
        limits = limits_of(state.budgets, scope)
        if limits.empty:
            continue
        if scope == RUN_SCOPE:
            usage: Mapping[str, Any] = answer.get("usage") or {}
        else:
            usage = (answer["nodes"].get(scope) or {}).get("usage") or {}
        cost = usage.get("cost_usd", 0.0)
        entry: BudgetJson = {
            "node": scope or None,
            "source": str(state.budgets[scope].get("source", "")),
            "spent_tokens": int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0)),
            "spent_cost_usd": None if cost is None else float(cost),
        }
        entry.update(limits.fields())  # type: ignore[typeddict-item]
        budgets.append(entry)
    if budgets:
        answer["budgets"] = budgets
