"""A script step's own budget: ``run_model(..., budget={...})`` and ``run_step(..., budget={...})``.

A step's budget is checked as an agent node's is (:class:`~rho_notebook.runtime.budget.BudgetGuard`),
the step key standing for the node: before each of the step's model calls, the spend of every
attempt of that key plus the call's requested maximum output must stay within it, else the call is
not made and the run halts (``resume RUN --raise-budget KEY:tokens=N`` or ``--decide KEY=skip``).

Steps arrive one call at a time, so a step's budget cannot be journaled when the run opens, as the
workflow's are: it is journaled (``budget_set`` of scope KEY, source ``step``) as the step's attempt
starts, durably before its first call. A limit the journal already holds stands (an earlier
execution's, or a raise), as a raised limit stands over a workflow's. The budget is no part of the
step's digest: raising it and resuming replays the steps that finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import StepInvalid
from rho_notebook.exec.base import ModelCalls
from rho_notebook.model.budget import Limits, parse_budget
from rho_notebook.model.ledger import Price
from rho_notebook.runtime.budget import BudgetGuard, budget_records, load_prices
from rho_notebook.runtime.spend import AttemptSpend
from rho_notebook.store.layout import StoreLayout

__all__ = ["StepGuards", "step_budget"]


def step_budget(key: str, raw: Any) -> Limits | None:
    """An agent or model step's ``budget`` argument as limits (None: none given).

    Raises
    ------
    StepInvalid
        Not a dict of ``tokens`` / ``cost`` / ``wall`` numbers above 0; the message names the step.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        msg = f"step {key!r}: budget must be a dict such as {{'tokens': 20000, 'cost': 0.5}}, got {raw!r:.80}"
        raise StepInvalid(msg)
    try:
        limits = parse_budget(raw, where=f"step {key!r}")
    except ValueError as err:
        raise StepInvalid(str(err)) from None
    return None if limits.empty else limits


@dataclass
class StepGuards:
    """The budgets of one execution's steps (one per :class:`~rho_notebook.runtime.script_steps.StepRunner`)."""

    layout: StoreLayout
    run_id: str
    workspace: Path
    trusted: bool
    guard: BudgetGuard | None = None
    """Opened for the first step with a budget when the run opened with none of its own."""
    prices: dict[str, Price] | None = None
    """The settings' prices, read once a model step's cost budget asks."""

    def limits(self, key: str, raw: Any, *, model: str) -> Limits | None:
        """:func:`step_budget` of a model step that calls ``model`` (``provider/model``), whose cost
        limit needs that model's price (blocking: it may read the settings).

        Raises
        ------
        StepInvalid
            A bad budget, or a cost limit while ``model`` has no price in settings ``prices``.
        """
        limits = step_budget(key, raw)
        if limits is not None and limits.max_cost_usd is not None:
            if self.prices is None:
                self.prices = load_prices(self.layout.home, self.workspace, trusted=self.trusted)
            if model not in self.prices:
                msg = f"step {key!r}: a cost budget needs a price for {model} in settings `prices` (docs/usage.md#budgets)"
                raise StepInvalid(msg)
        return limits

    async def arm(self, key: str, limits: Limits, calls: ModelCalls | None) -> None:
        """Before step ``key``'s attempt calls a model: journal its limits (durably) and make sure
        the attempt's spend recorder asks a guard. Nothing when the attempt reports to no run
        journal (a runner used outside a run)."""
        if not isinstance(calls, AttemptSpend):
            return
        have = calls.state.budgets.get(key, {})
        fresh = {name: value for name, value in limits.fields().items() if name not in have}
        if fresh:
            for record in budget_records(self.run_id, Limits(**fresh), source="step", node=key):
                calls.emit(record)
            calls.sync()
        if calls.guard is None:
            if self.guard is None:
                prices = self.prices
                if prices is None:
                    prices = await asyncio.to_thread(
                        load_prices, self.layout.home, self.workspace, trusted=self.trusted
                    )
                self.guard = await asyncio.to_thread(BudgetGuard.open, self.layout, self.run_id, prices=prices)
            calls.guard = self.guard
