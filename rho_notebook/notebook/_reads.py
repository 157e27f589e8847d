"""The Python API's reading verbs (``rho.status``, ``rho.result``, ``rho.usage``, ``rho.runs``,
``rho.plans``, ``rho.logs``), exported by :mod:`rho_notebook.notebook.api`: each reads the store
through the service, awaited on the background runner's loop (``wait_for``: the API's one bridge, ``call``),
and never takes ownership of a run."""

from __future__ import annotations

from typing import Literal

from rho_notebook.model.plan import PlanManifest
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import RunResult, RunsQuery, Service, Stream, wait_for
from rho_notebook.service.flags import check_keywords
from rho_notebook.service.usage import UsageTable, run_ledger

__all__ = ["status", "result", "usage", "runs", "plans", "logs"]


def status(run_id: str) -> RunState:
    """One durable snapshot of a run (never takes ownership): ``rho-notebook status``."""
    return wait_for(Service.default().status(run_id))


def result(run_id: str) -> RunResult:
    """Per node: state, attempts, exit, validated output and artifact paths.

    ``rho.result(run_id).to_json()`` is exactly ``rho-notebook result RUN --output json``.
    """
    return wait_for(Service.default().run_result(run_id))


def usage(run_id: str) -> UsageTable:
    """What a run's model calls spent (docs/usage.md): a list of typed rows
    (:class:`~rho_notebook.service.usage.UsageRow`: ``key``, ``level``, ``usage``, ``saved``), the
    run's first, then one per node, then one per roll-up of script and flow steps by key prefix.
    A notebook shows it as a table (``_repr_html_``; no pandas); ``row.usage.cost_usd`` is None
    when a model has no price in settings. The same counts as ``status``'s ``usage`` objects.
    """
    svc = Service.default()
    state = wait_for(svc.status(run_id))
    return run_ledger(state, layout=svc.layout).rows()


def runs(*, state: str | None = None, limit: int | None = None) -> list[RunState]:
    """Runs in the store, oldest first; ``state`` filters by lifecycle, ``limit`` keeps the newest."""
    if state is not None and state not in {lc.value for lc in Lifecycle}:
        msg = f"unknown lifecycle {state!r}; one of {', '.join(lc.value for lc in Lifecycle)}"
        raise ValueError(msg)
    check_keywords(at_least_one={"limit": limit})
    query = RunsQuery(state=Lifecycle(state) if state is not None else None, limit=limit or 0)
    return wait_for(Service.default().runs(query))


def plans() -> list[PlanManifest]:
    """Saved plans, oldest first."""
    return wait_for(Service.default().plans())


def logs(run_id: str, node: str, *, stream: Literal["stdout", "stderr", "both"] = "both") -> dict[str, str]:
    """The retained stdout / stderr of a node's latest attempt (decoded as UTF-8, replacing errors).

    Raises
    ------
    NotFound
        No such run, or the run has no such node.
    """
    check_keywords(choices={"stream": (stream, ("stdout", "stderr", "both"))})
    streams: tuple[Stream, ...] = ("stdout", "stderr") if stream == "both" else (stream,)
    return wait_for(Service.default().log_text(run_id, node, streams=streams))
