"""The ledger: what a run's model calls spent, priced from the tallies the journal's fold keeps.

Each attempt's *tally* (:mod:`rho_notebook.model.tally`: token and call counts, plus the tokens of
each ``provider/model``) holds no cost: prices are settings, not facts of the run, and a changed
price table re-prices old runs. :class:`Usage` is what readers show (``status``, ``result``, the
widget, MCP): the counts, the wall time and ``cost_usd``, which is None (never 0) as soon as one
call's model has no price.
A reused attempt made no calls, so it counts zero new spend; a step answered from the journal on
resume keeps the tally of the attempt that made the call, so a replayed resume adds zero.

Standard library only, like the fold; the fold itself (``status``, ``runs``) does not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from rho_notebook.model.tally import COUNTS, count_of

if TYPE_CHECKING:
    from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState

__all__ = [
    "Price",
    "Usage",
    "attempt_usage",
    "node_usage",
    "run_usage",
    "seconds_between",
    "tally_usage",
]


@dataclass(frozen=True)
class Price:
    """What one ``provider/model`` costs, in US dollars per million tokens (settings ``prices``).
    Cached input tokens cost ``cached_input_per_mtok`` when given, else the input price."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
        cached = min(cached_tokens, input_tokens)
        cached_price = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        return (
            (input_tokens - cached) * self.input_per_mtok + cached * cached_price + output_tokens * self.output_per_mtok
        ) / 1_000_000


@dataclass(frozen=True)
class Usage:
    """What a call, attempt, node or run spent, as every front end shows it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    calls: int = 0
    retries: int = 0
    tool_calls: int = 0
    wall_seconds: float = 0.0
    cost_usd: float | None = 0.0
    """None when a call's model has no price: an unknown cost is never shown as 0."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens (what ``--max-tokens`` limits)."""
        return self.input_tokens + self.output_tokens

    def plus(self, other: Usage) -> Usage:
        """The sum; the cost is None when either is unknown."""
        counts = {name: getattr(self, name) + getattr(other, name) for name in COUNTS}
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(**counts, wall_seconds=self.wall_seconds + other.wall_seconds, cost_usd=cost)

    def to_json(self) -> dict[str, Any]:
        """The ``usage`` object of ``status`` / ``result`` JSON and MCP (cost rounded to 1e-6 USD)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["wall_seconds"] = round(self.wall_seconds, 3)
        data["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
        return data


def tally_usage(tally: Mapping[str, Any] | None, prices: Mapping[str, Price], *, wall_seconds: float = 0.0) -> Usage:
    """The :class:`Usage` of a tally (None: nothing spent) priced with ``prices``
    (``"provider/model"`` -> :class:`Price`)."""
    if not tally:
        return Usage(wall_seconds=wall_seconds)
    cost: float | None = 0.0
    for model, (input_tokens, output_tokens, cached_tokens) in tally.get("models", {}).items():
        price = prices.get(model)
        if price is None:
            cost = None
            break
        cost = (cost or 0.0) + price.cost(input_tokens, output_tokens, cached_tokens)
    counts = {name: count_of(tally.get(name)) for name in COUNTS}
    return Usage(**counts, wall_seconds=wall_seconds, cost_usd=cost)


def seconds_between(start: str | None, end: str | None) -> float:
    """Seconds from ISO time ``start`` to ``end`` (0 when either is missing or unreadable)."""
    if not start or not end:
        return 0.0
    from datetime import datetime  # here: only a reader that shows spend calls this

    try:
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except ValueError:
        return 0.0


def attempt_usage(attempt: AttemptRecord, prices: Mapping[str, Price]) -> Usage:
    """One attempt: its calls, and its wall time from launch to end (0 while it runs, and for a
    reused attempt, which launched nothing)."""
    wall = 0.0 if attempt.reused_from is not None else seconds_between(attempt.started_at, attempt.ended_at)
    return tally_usage(attempt.usage, prices, wall_seconds=wall)


def node_usage(node: NodeRecord, prices: Mapping[str, Price]) -> Usage:
    """Every attempt of a node, retries included."""
    return _sum(attempt_usage(attempt, prices) for attempt in node.attempts)


def run_usage(state: RunState, prices: Mapping[str, Price]) -> Usage:
    """Every node of a run; its wall time is the span from the first launch to the last end
    (nodes run side by side, so their wall times do not add up)."""
    total = _sum(node_usage(node, prices) for node in state.nodes.values())
    starts = [a.started_at for n in state.nodes.values() for a in n.attempts if a.started_at]
    ends = [a.ended_at for n in state.nodes.values() for a in n.attempts if a.ended_at]
    span = seconds_between(min(starts), max(ends)) if starts and ends else 0.0
    counts = {name: getattr(total, name) for name in COUNTS}
    return Usage(**counts, wall_seconds=span, cost_usd=total.cost_usd)


def _sum(usages: Iterable[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total.plus(usage)
    return total
