"""Budgets: a run's spending limits, and each node's, folded from its ``budget_set`` records.

A budget is journaled (:class:`~rho_notebook.model.events.BudgetSet`) when a run starts with
``--max-tokens`` / ``--max-cost`` / ``--max-wall`` or a workflow budget, and again on ``resume
--raise-budget``, so a crash never resets it: whoever opens the run folds the same limits.

The fold keeps :attr:`~rho_notebook.model.run_state.RunState.budgets`: scope (``""`` for the run,
else a node or step name) -> ``{max_tokens, max_cost_usd, max_wall_seconds, source}``. A record
replaces the limits it carries (a limit given as None becomes unlimited) and keeps the others, so a
raise of one limit leaves the rest as they were.

This module is imported by the status fold, so it stays standard-library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rho_notebook.model.events import BudgetSet
    from rho_notebook.model.run_state import RunState

__all__ = [
    "HALT_PREFIX",
    "LIMITS",
    "NAMES",
    "RUN_SCOPE",
    "Limits",
    "fold_budget_set",
    "is_budget_halt",
    "limit_problem",
    "limits_of",
    "parse_budget",
    "resume_flags",
]

LIMITS = ("max_tokens", "max_cost_usd", "max_wall_seconds")
"""The limits of a budget, as ``budget_set`` records and ``RunState.budgets`` name them."""

NAMES = {"tokens": "max_tokens", "cost": "max_cost_usd", "wall": "max_wall_seconds"}
"""The short names of ``--raise-budget tokens=N|cost=USD|wall=S`` and ``budget = {...}``."""

RUN_SCOPE = ""
"""The scope of the run's own budget in ``RunState.budgets`` (other scopes are node names)."""

HALT_PREFIX = "budget "
"""How every budget's refusal of a model call begins (``budget tokens: ...``, ``budget c:cost: ...``):
the step it halted reads ``why`` so."""


def is_budget_halt(why: str) -> bool:
    """Whether a halted step's ``why`` (or a cancelled attempt's message) is a budget's refusal."""
    return why.startswith(HALT_PREFIX)


def resume_flags(halted: Sequence[Mapping[str, Any]]) -> str:
    """The flags of ``resume RUN`` that move on a run halted at ``halted`` (its ``[{step, why}]``):
    ``--raise-budget NAME=N`` for each budget named when budgets halted every step (a graph run
    takes no ``--decide``), else ``--decide STEP=rerun|skip`` for each step."""
    whys = [str(step.get("why", "")) for step in halted]
    if whys and all(map(is_budget_halt, whys)):
        names = dict.fromkeys(why.split(": ", 1)[0].removeprefix(HALT_PREFIX) for why in whys)
        return " ".join(f"--raise-budget {name}=N" for name in names)
    return " ".join(f"--decide {step.get('step', '')}=rerun|skip" for step in halted)


@dataclass(frozen=True)
class Limits:
    """One scope's limits; None is unlimited."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_seconds: float | None = None

    @property
    def empty(self) -> bool:
        return self.max_tokens is None and self.max_cost_usd is None and self.max_wall_seconds is None

    def fields(self) -> dict[str, Any]:
        """The limits that are set, as ``budget_set`` fields."""
        return {name: getattr(self, name) for name in LIMITS if getattr(self, name) is not None}


def fold_budget_set(state: RunState, ev: BudgetSet) -> None:
    """Fold one ``budget_set`` record into ``state.budgets``."""
    scope = ev.get("node") or RUN_SCOPE
    current = state.budgets.setdefault(scope, {})
    for name in LIMITS:
        if name in ev:
            current[name] = ev.get(name)
    current["source"] = ev.get("source", "")


def limits_of(budgets: Mapping[str, Mapping[str, Any]], scope: str = RUN_SCOPE) -> Limits:
    """The limits of ``scope`` in a folded ``RunState.budgets`` (none: unlimited)."""
    found = budgets.get(scope) or {}
    tokens = found.get("max_tokens")
    cost = found.get("max_cost_usd")
    wall = found.get("max_wall_seconds")
    return Limits(
        max_tokens=int(tokens) if isinstance(tokens, int | float) else None,
        max_cost_usd=float(cost) if isinstance(cost, int | float) else None,
        max_wall_seconds=float(wall) if isinstance(wall, int | float) else None,
    )


def limit_problem(name: str, raw: object) -> str | None:
    """What keeps ``raw`` from being limit ``name`` (one of :data:`LIMITS`), said as what to give
    instead; None when it is one. The one rule of every budget's front door: flags, ``rho.run``
    keywords, ``--raise-budget``, a workflow's, script's or step's ``budget``."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0:  # NaN is not > 0
        return "give a number above 0"
    if not math.isfinite(raw):
        return "give a finite number above 0"
    if name == "max_tokens" and int(raw) != raw:
        return "give a whole number of tokens"
    return None


def parse_budget(value: Mapping[str, Any], *, where: str) -> Limits:
    """``budget = {"tokens": N, "cost": USD, "wall": S}`` (the short names, or the ``max_*`` ones)
    as :class:`Limits`.

    Raises
    ------
    ValueError
        A key that is no limit, or a value that is not a number above 0; the message names ``where``.
    """
    out: dict[str, Any] = {}
    for key, raw in value.items():
        name = NAMES.get(key, key)
        if name not in LIMITS:
            msg = f"{where}: budget key {key!r} is not a limit; use tokens, cost or wall"
            raise ValueError(msg)
        problem = limit_problem(name, raw)
        if problem is not None:
            msg = f"{where}: budget {key} = {raw!r}: {problem}"
            raise ValueError(msg)
        out[name] = int(raw) if name == "max_tokens" else float(raw)
    return Limits(**out)
