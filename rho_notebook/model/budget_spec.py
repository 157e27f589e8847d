"""A budget written in a workflow's source, as the frozen graph holds it (and so its digest).

``define(..., budget = {"tokens": N, "cost": USD, "wall": S})`` in Starlark, a script's or flow's
module-level ``BUDGET = {...}``, and ``budget = {...}`` on an agent node. The canonical encoding
has no floats (:mod:`rho_notebook.model.canonical`), so a cost is held in whole micro-dollars and a
wall time in whole seconds. A graph without a budget leaves the field out of its encoding, so every
digest from before budgets stays the same. The run journals it as ``budget_set`` when it starts
(:func:`rho_notebook.runtime.budget.workflow_budget_records`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from rho_notebook.model.base import FrozenModel
from rho_notebook.model.budget import Limits, parse_budget

__all__ = ["BudgetSpec", "budget_spec"]


def _none(value: object) -> bool:
    return value is None


class BudgetSpec(FrozenModel):
    """A source's limits; None is unlimited."""

    tokens: int | None = Field(default=None, exclude_if=_none)
    cost_microusd: int | None = Field(default=None, exclude_if=_none)
    """The cost limit in millionths of a US dollar."""
    wall_seconds: int | None = Field(default=None, exclude_if=_none)

    def limits(self) -> Limits:
        cost = None if self.cost_microusd is None else self.cost_microusd / 1_000_000
        wall = None if self.wall_seconds is None else float(self.wall_seconds)
        return Limits(max_tokens=self.tokens, max_cost_usd=cost, max_wall_seconds=wall)


def budget_spec(value: Mapping[str, Any], *, where: str) -> BudgetSpec | None:
    """``budget = {...}`` as written (tokens, cost, wall) as a :class:`BudgetSpec`; None when empty.

    Raises
    ------
    ValueError
        A key that is no limit or a value that is not a number above 0 (the message names ``where``).
    """
    limits = parse_budget(value, where=where)
    if limits.empty:
        return None
    cost = None if limits.max_cost_usd is None else max(1, round(limits.max_cost_usd * 1_000_000))
    wall = None if limits.max_wall_seconds is None else max(1, round(limits.max_wall_seconds))
    return BudgetSpec(tokens=limits.max_tokens, cost_microusd=cost, wall_seconds=wall)
