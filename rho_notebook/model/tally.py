"""An attempt's tally: what its model calls spent, folded from the journal's ``model_called`` records.

Each completed model call is journaled as a ``model_called`` record
(:class:`~rho_notebook.model.events.ModelCalled`). :func:`add_call` folds one into its attempt's
*tally* (plain JSON, kept in :attr:`~rho_notebook.model.run_state.AttemptRecord.usage` and so in
the state snapshot): token and call counts, plus the tokens of each ``provider/model`` so a cost can
be computed later from whatever prices the reader has (:mod:`rho_notebook.model.ledger`).

The status fold imports this module: standard library only, and nothing built at import (``status``
and ``runs`` of a command-only run never price anything, issue 31).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rho_notebook.model.run_state import RunState

__all__ = ["COUNTS", "add_call", "count_of", "may_have_spent"]

COUNTS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "calls", "retries", "tool_calls")
"""The additive counts of a tally and of :class:`~rho_notebook.model.ledger.Usage`."""

_PER_CALL = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "retries", "tool_calls")


def count_of(value: Any) -> int:
    """``value`` as a count: a positive int, else 0."""
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
    counts = [count_of(get(name)) for name in _PER_CALL]
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


_CALLING = ("agent", "model")
"""Exit kinds of attempts that call models (an old run's spend is in their summaries)."""


def may_have_spent(state: RunState) -> bool:
    """Whether an attempt of the run made a model call or reused a node that may have (a cheap
    look before building the ledger, or importing what builds it: a command-only run has neither)."""
    for record in state.nodes.values():
        for attempt in record.attempts:
            if attempt.usage is not None or attempt.reused_from is not None:
                return True
            if attempt.exit is not None and attempt.exit.get("kind") in _CALLING:
                return True
    return False
