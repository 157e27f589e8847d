"""Budgets as durable guards: the run's limits, asked before each model call.

A run's budgets are ``budget_set`` journal records (:mod:`rho_notebook.model.budget` folds them), so
they outlive any owner: :func:`journal_budgets` appends them durably *before* an owner starts
(``run --max-tokens``, ``resume --raise-budget``), taking the owner lock for the moment it writes,
and :func:`workflow_budget_records` gives the ones a workflow's source asks for.

:class:`BudgetGuard` is the :class:`~rho_notebook.runtime.spend.SpendGuard` of an execution. Before
each call it adds up what the journal says was spent (the ledger, :mod:`rho_notebook.model.ledger`)
and refuses the call (:class:`~rho_notebook.errors.BudgetExceeded`) unless the spend so far plus the
call's requested maximum output stays within every limit of the run and of the calling node:

- tokens: input plus output tokens; a call that sets no maximum output is made while the spend is
  still below the limit (so the run passes it by at most that call);
- cost: priced with the settings' ``prices``; the maximum output is priced at the dearest output
  price in the table; a spend whose cost is unknown (a model with no price) is refused, never
  taken as 0;
- wall: the seconds this run has been executing, over every execution (a halted or stopped run's
  idle time does not count).

The driver turns the refusal into a halt (lifecycle ``needs_decision``), never a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rho_notebook.errors import BudgetExceeded, RunRefused
from rho_notebook.model.budget import HALT_PREFIX, RUN_SCOPE, Limits, is_budget_halt, limits_of
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import Graph, ItemNode
from rho_notebook.model.ledger import Price, Usage, node_usage, run_usage
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import NodeState
from rho_notebook.store.journal import JournalWriter
from rho_notebook.store.journal_reader import read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunStore

__all__ = [
    "BudgetGuard",
    "open_budgets",
    "budget_records",
    "executed_seconds",
    "halt_records",
    "halted_steps",
    "is_budget_halt",
    "journal_budgets",
    "load_prices",
    "unpriced_models",
    "workflow_budget_records",
]

_PREFIX = HALT_PREFIX
"""How every refusal's message begins (:func:`is_budget_halt`, which front ends read)."""

_UNITS = {"max_tokens": "tokens", "max_cost_usd": "cost", "max_wall_seconds": "wall"}


def budget_records(run_id: str, limits: Limits, *, source: str, node: str | None = None) -> list[dict[str, Any]]:
    """The ``budget_set`` record of ``limits`` (none when no limit is set)."""
    if limits.empty:
        return []
    scope = {"node": node} if node else {}
    return [event(EventKind.BUDGET_SET, run_id, **limits.fields(), **scope, source=source)]


def journal_budgets(layout: StoreLayout, run_id: str, records: list[dict[str, Any]]) -> None:
    """Append ``records`` to run ``run_id``'s journal durably, before its owner starts.

    Raises
    ------
    RunRefused
        Another process owns the run (its budget cannot change under it), or its journal is damaged.
    """
    if not records:
        return
    from rho_notebook.runtime.status import journal_state

    def undamaged() -> list[dict[str, Any]]:
        if journal_state(layout, run_id).damage is not None:
            msg = f"run {run_id} is damaged: no budget is recorded (see `rho-notebook status {run_id[:13]}`)"
            raise RunRefused(msg)
        return records

    if not RunStore(layout).append_unowned(run_id, undamaged):
        msg = f"run {run_id} is owned by a live process: its budget can change only while no owner runs it"
        raise RunRefused(msg)


def workflow_budget_records(graph: Graph, state: RunState) -> list[dict[str, Any]]:
    """The ``budget_set`` records of the budgets in the workflow's source (``define(budget=)``,
    a script's ``BUDGET``, a node's ``budget``) that the journal does not hold yet: a limit given
    at start (``run --max-tokens``) or raised stands over the source's."""
    records: list[dict[str, Any]] = []
    wanted: list[tuple[str, Any]] = [(RUN_SCOPE, getattr(graph, "budget", None))]
    # a node's fields are in its __dict__; a kind without ``budget`` has none (a getattr that
    # misses goes through pydantic's __getattr__ and an exception: 5 us a node at every open)
    wanted += [(node.name, budget) for node in graph.nodes if (budget := vars(node).get("budget"))]
    for scope, budget in wanted:
        if not budget:
            continue
        have = state.budgets.get(scope, {})
        fresh = {name: value for name, value in budget.limits().fields().items() if name not in have}
        if fresh:
            records += budget_records(state.run_id, Limits(**fresh), source="workflow", node=scope or None)
    return records


def halt_records(run_id: str, node: str, attempt: int, why: str) -> list[dict[str, Any]]:
    """The records that end an attempt a budget stopped before a model call: it ends (as a
    cancellation: no failure) and its node is pending again, so a resume launches a new attempt."""
    return [
        event(
            EventKind.NODE_FINISHED, run_id, node=node, attempt=attempt, state="cancellation", exit=None, message=why
        ),
        event(EventKind.NODE_RESET, run_id, node=node, reason=why),
    ]


def halted_steps(state: RunState, halted: Mapping[str, str], *, emit: Callable[..., object]) -> list[dict[str, str]]:
    """End the launches a halt left undone (ready nodes are reset, as a cancel does) and return
    the ``run_halted`` steps: each halted node and why."""
    ready = [name for name, record in sorted(state.nodes.items()) if record.state is NodeState.READY]
    if ready:
        emit(*(event(EventKind.NODE_RESET, state.run_id, node=name, reason="run halted by a budget") for name in ready))
    return [{"step": name, "why": why} for name, why in sorted(halted.items())]


def executed_seconds(events: list[dict[str, Any]]) -> float:
    """How long the run executed before now: each execution from its ``run_started`` to the last
    record it journaled (a killed owner's execution ends with its last record)."""
    spans: list[list[float]] = []
    for record in events:
        try:
            at = datetime.fromisoformat(str(record.get("at"))).timestamp()
        except ValueError:
            continue
        if record.get("kind") == "run_started":
            spans.append([at, at])
        elif spans:
            spans[-1][1] = at
    return sum(max(0.0, end - start) for start, end in spans)


def load_prices(home: Path, workspace: Path | None, *, trusted: bool) -> dict[str, Price]:
    """The settings' price table: ``"provider/model"`` -> :class:`Price` (none: empty)."""
    from rho_notebook.agents.settings import load_prices as settings_prices  # pydantic: only with a budget

    return settings_prices(home, workspace, trusted=trusted)


def unpriced_models(graph: Graph, home: Path, workspace: Path | None, *, trusted: bool) -> list[str]:
    """The ``provider/model`` of each agent of ``graph``, and of each item-graph model step that
    names no agent, that has no price in the settings, sorted."""
    from rho_notebook.agents.completion import select_provider
    from rho_notebook.agents.settings import load_settings

    settings = load_settings(home, workspace, trusted=trusted)
    prices = load_prices(home, workspace, trusted=trusted)
    missing: set[str] = set()
    asked: list[tuple[Any, Any]] = []
    for agent in graph.agents:
        if agent.runtime != "rho":
            missing.add(f"{agent.runtime}/{agent.model or 'default'}")
        else:
            asked.append((agent.provider, agent.model))
    for node in graph.nodes:
        if isinstance(node, ItemNode) and node.acting_kind == "model" and node.agent is None:
            asked.append((node.acting_params.get("provider"), node.acting_params.get("model")))
    for provider, model in asked:
        chosen = select_provider(settings, provider=provider, model=model)
        if f"{chosen.provider}/{chosen.model}" not in prices:
            missing.add(f"{chosen.provider}/{chosen.model}")
    return sorted(missing)


@dataclass
class BudgetGuard:
    """The budgets of one execution, checked before each model call (a SpendGuard)."""

    prices: Mapping[str, Price] = field(default_factory=dict)
    earlier_seconds: float = 0.0
    """How long earlier executions of the run took (:func:`executed_seconds`)."""
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def open(cls, layout: StoreLayout, run_id: str, *, prices: Mapping[str, Price]) -> BudgetGuard:
        """The guard of an execution starting now (before its ``run_started`` is journaled)."""
        events = read_journal(RunStore(layout).folder(run_id).events).events
        return cls(prices=dict(prices), earlier_seconds=executed_seconds(list(events)))

    def check(self, state: RunState, *, node: str, max_output_tokens: int | None, key: str | None) -> None:
        run_limits = limits_of(state.budgets)
        if not run_limits.empty:
            self._within(state, run_limits, run_usage(state, self.prices), node=node, scope=None, out=max_output_tokens)
        record = state.nodes.get(node)
        node_limits = limits_of(state.budgets, node)
        if record is not None and not node_limits.empty:
            self._within(
                state, node_limits, node_usage(record, self.prices), node=node, scope=node, out=max_output_tokens
            )

    def _within(
        self, state: RunState, limits: Limits, spent: Usage, *, node: str, scope: str | None, out: int | None
    ) -> None:
        whose = "the run's" if scope is None else f"node {scope}'s"
        if limits.max_tokens is not None:
            passes = spent.tokens + out > limits.max_tokens if out is not None else spent.tokens >= limits.max_tokens
            if passes:
                extra = f" and this call may output up to {out}" if out is not None else ""
                why = f"{spent.tokens} tokens spent{extra}"
                used = spent.tokens >= limits.max_tokens
                self._refuse(state, "max_tokens", limits.max_tokens, spent.tokens, why, whose, node, scope, used=used)
        if limits.max_cost_usd is not None:
            dearest = max((p.output_per_mtok for p in self.prices.values()), default=0.0)
            cost = spent.cost_usd
            if cost is None:
                why = "the spend so far has no known cost (a model without a price in settings `prices`)"
                self._refuse(state, "max_cost_usd", limits.max_cost_usd, float("nan"), why, whose, node, scope)
            else:
                ahead = (out or 0) * dearest / 1_000_000
                if cost + ahead > limits.max_cost_usd or (out is None and cost >= limits.max_cost_usd):
                    why, used = f"${cost:.6f} spent", cost >= limits.max_cost_usd
                    self._refuse(state, "max_cost_usd", limits.max_cost_usd, cost, why, whose, node, scope, used=used)
        if limits.max_wall_seconds is not None:
            elapsed = self.earlier_seconds + (time.monotonic() - self.started)
            if elapsed >= limits.max_wall_seconds:
                why = f"the run has executed {elapsed:.1f} s"
                limit = limits.max_wall_seconds
                self._refuse(state, "max_wall_seconds", limit, elapsed, why, whose, node, scope, used=True)

    @staticmethod
    def _refuse(  # noqa: PLR0913 (one message from the facts of one check)
        state: RunState,
        limit: str,
        value: float,
        spent: float,
        why: str,
        whose: str,
        node: str,
        scope: str | None,
        *,
        used: bool = False,
    ) -> None:
        """Refuse the call; ``used``: the limit is reached already (else the call could pass it)."""
        unit = _UNITS[limit]
        shown = f"${value}" if unit == "cost" else (f"{value:g} s" if unit == "wall" else f"{value:g}")
        name = unit if scope is None else f"{scope}:{unit}"
        what = (
            f"is used up before the next model call of {node}"
            if used
            else f"could be passed by the next model call of {node}"
        )
        msg = (
            f"{_PREFIX}{name}: {whose} {unit} budget ({shown}) {what} "
            f"({why}); raise it with `rho-notebook resume {state.run_id[:13]} --raise-budget {name}=N`"
        )
        raise BudgetExceeded(msg, budget=name, limit=float(value), spent=spent, node=node)


def open_budgets(
    layout: StoreLayout, state: RunState, journal: JournalWriter, *, graph: Graph, workspace: Path, trusted: bool
) -> BudgetGuard | None:
    """As an owner opens a run: journal (durably) the workflow's budgets not yet recorded, and
    return the execution's guard (None when the run has no budget).

    Raises
    ------
    RunRefused
        A cost budget while an agent's model has no price (exit 3, before anything launches).
    """
    records = workflow_budget_records(graph, state)
    if records:
        for record in journal.append(records):
            apply(state, record)
        journal.sync()
    if not state.budgets:
        return None
    if any(limits.get("max_cost_usd") is not None for limits in state.budgets.values()):
        missing = unpriced_models(graph, layout.home, workspace, trusted=trusted)
        if missing:
            msg = (
                f"run {state.run_id} has a cost budget, and {', '.join(missing)} has no price in settings `prices`: "
                "add one (docs/usage.md#budgets); nothing was launched"
            )
            raise RunRefused(msg)
    prices = load_prices(layout.home, workspace, trusted=trusted)
    return BudgetGuard.open(layout, state.run_id, prices=prices)
