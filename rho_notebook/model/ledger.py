"""The ledger: what a run's model calls spent, folded from the journal alone.

Each completed model call is journaled as a ``model_called`` record
(:class:`~rho_notebook.model.events.ModelCalled`). :func:`add_call` folds one into its attempt's
*tally* (plain JSON, kept in :attr:`~rho_notebook.model.run_state.AttemptRecord.usage` and so in
the state snapshot): token and call counts, plus the tokens of each ``provider/model`` so a cost can
be computed later from whatever prices the reader has. A tally never holds a cost: prices are
settings, not facts of the run, and a changed price table re-prices old runs.

:class:`Usage` is what readers show (``status``, ``result``, the widget, MCP): the counts, the wall
time and ``cost_usd``, which is None (never 0) as soon as one call's model has no price.
A reused attempt made no calls, so it counts zero new spend; a step answered from the journal on
resume keeps the tally of the attempt that made the call, so a replayed resume adds zero.

This module is imported by the status fold, so it stays standard-library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState

__all__ = [
    "COUNTS",
    "Price",
    "Usage",
    "add_call",
    "attempt_usage",
    "node_usage",
    "run_usage",
    "seconds_between",
    "tally_usage",
]

COUNTS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "calls", "retries", "tool_calls")
"""The additive counts of a tally and of :class:`Usage`."""

_PER_CALL = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "retries", "tool_calls")


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0  # bool is not int here: type(True) is bool


def add_call(tally: Mapping[str, Any] | None, call: Mapping[str, Any]) -> dict[str, Any]:
    """``tally`` (None: empty) with one ``model_called`` record added; ``tally`` is not changed.

    A call with a ``key`` (a flow's module path, a fork branch, an instance) is also added to
    ``by_key[key]``, so a node's spend rolls up by the keys inside it. Copied by hand, not
    deep-copied: the run's fold calls this once per model call (bench/ledger_fold.py)."""
    if tally is None:
        out = _empty()
        models: dict[str, list[int]] = out["models"]
    else:
        out = dict(tally)
        models = out["models"] = {model: tokens[:] for model, tokens in tally["models"].items()}
        if "by_key" in tally:  # each key's tally is replaced, never changed, by the recursion below
            out["by_key"] = dict(tally["by_key"])
    get = call.get
    counts = [_count(get(name)) for name in _PER_CALL]
    for name, count in zip(_PER_CALL, counts, strict=True):
        if count:
            out[name] += count
    out["calls"] += 1
    seconds = get("seconds")
    if isinstance(seconds, (int, float)) and type(seconds) is not bool and seconds > 0:
        out["call_seconds"] = round(out["call_seconds"] + seconds, 6)
    model = f"{get('provider', '')}/{get('model', '')}"
    tokens = models.get(model)
    if tokens is None:
        tokens = models[model] = [0, 0, 0]
    tokens[0] += counts[0]
    tokens[1] += counts[1]
    tokens[2] += counts[2]
    key = get("key")
    if isinstance(key, str) and key:
        by_key = out.setdefault("by_key", {})
        by_key[key] = add_call(by_key.get(key), {k: v for k, v in call.items() if k != "key"})
    return out


def _empty() -> dict[str, Any]:
    tally: dict[str, Any] = dict.fromkeys(COUNTS, 0)
    tally["call_seconds"] = 0.0
    tally["models"] = {}
    return tally


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
    counts = {name: _count(tally.get(name)) for name in COUNTS}
    return Usage(**counts, wall_seconds=wall_seconds, cost_usd=cost)


def seconds_between(start: str | None, end: str | None) -> float:
    """Seconds from ISO time ``start`` to ``end`` (0 when either is missing or unreadable)."""
    if not start or not end:
        return 0.0
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
