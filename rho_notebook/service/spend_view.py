"""What a run spent, as ``status`` and ``result`` show it: its usage and its budgets.

:func:`add_spend` gives an answer its ``usage`` objects when the run made or saved a model call
(built by :mod:`rho_notebook.service.usage`, which is imported only then: ``status`` and ``runs``
of a command-only run start without the ledger's builder) and, for ``status``, the budgets it
shows while a run has one: each scope's limits and what is spent against them. A run's budgets are folded from its ``budget_set`` records (:mod:`rho_notebook.model.budget`); what
is spent comes from the ``usage`` objects the same answer already carries (the ledger,
:mod:`rho_notebook.service.usage`), so ``status`` prices nothing twice. The run's own budget counts
the run's spend, a node's (or a script step's) that node's, over all its attempts. The wall limit
counts the seconds the run has executed, which the journal's fold does not keep: ``status`` shows
that limit without a spend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired

from typing_extensions import TypedDict  # (pydantic's wire schema needs it on Python < 3.12)

from rho_notebook.model.budget import RUN_SCOPE, limits_of
from rho_notebook.model.run_state import RunState
from rho_notebook.model.tally import may_have_spent

if TYPE_CHECKING:
    from pathlib import Path

    from rho_notebook.store.layout import StoreLayout

__all__ = ["BudgetJson", "add_budgets", "add_spend"]


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


def add_spend(
    answer: Any,
    state: RunState,
    *,
    layout: StoreLayout | None = None,
    run_folder: Path | None = None,
    budgets: bool = True,
) -> None:
    """Give a ``status`` (``budgets``) or ``result`` answer (``nodes`` by name) what the run spent:
    when the run may have spent (:func:`~rho_notebook.model.tally.may_have_spent`; else the
    ledger's builder is not even imported), :func:`~rho_notebook.service.usage.add_usage` with the
    run's store ``layout`` (or the store holding ``run_folder``), then :func:`add_budgets`. The one
    place every front end's ``status`` and ``result`` learn what a run spent."""
    if may_have_spent(state):
        from rho_notebook.service.usage import add_usage

        add_usage(answer, state, layout=layout, run_folder=run_folder)
    if budgets:
        add_budgets(answer, state)


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
