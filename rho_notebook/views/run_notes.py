"""What a run's status says besides its nodes: why it failed, where it ran, which process owns it
now, and what a person does next when the run waits for one.

``rho-notebook status`` prints these lines around the node lines. They answer the questions a
bare lifecycle leaves open: ``outcome failure`` names the failed nodes or the script's error (the
``message`` of ``run_completed``); ``executor`` says ``local``, ``dask`` (a cluster the owner
started) or ``dask ADDRESS``, and each node line names the Dask worker its attempt ran on; a live
run names its owner's pid; ``needs_recovery`` and ``waiting`` end with the exact command that goes
on (``needs_decision``: :func:`~rho_notebook.views.text.decision_lines`).

They read the store synchronously through :mod:`rho_notebook.service.glance` (the CLI prints them
with no event loop and, for a run that waits for nobody, no pydantic model: issue 31).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rho_notebook.errors import RhoError
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import glance
from rho_notebook.service.listing import owner_pid
from rho_notebook.service.wire import LIVE_LIFECYCLES, node_order, status_json, unsettled_nodes
from rho_notebook.views.text import budget_lines, decision_lines, node_status_lines, output_text, usage_text

if TYPE_CHECKING:
    from rho_notebook.service import StoreLayout

__all__ = ["cancel_text", "executor_text", "failure_reason", "status_head_lines", "next_step_lines", "status_lines"]

_LABEL = "{:<10} {}"
"""One labelled line of ``status`` (``reason     ...``), aligned with ``lifecycle  ...``."""


def cancel_text(run_id: str, cancellation_state: str, lifecycle: str, *, waited: float) -> str:
    """What ``cancel`` (the CLI verb and ``%workflow cancel``) says it did: acknowledged, not
    yet acknowledged after ``waited`` seconds, no owner to apply it yet, or nothing to cancel."""
    if cancellation_state == "already_completed":
        return f"run {run_id} has already completed: nothing to cancel"
    if cancellation_state == "acknowledged":
        return f"cancel requested for run {run_id}: acknowledged by the owner; the run is now {lifecycle}"
    if lifecycle in ("running", "waiting", "cancelling"):
        return (
            f"cancel requested for run {run_id}: not acknowledged within {waited:g} s; the request is recorded "
            f"and its owner applies it at its next look (rho-notebook status {run_id[:13]})"
        )
    return (
        f"cancel requested for run {run_id}: no owner runs it ({lifecycle}); "
        f"it is applied when an owner next opens the run (rho-notebook resume {run_id[:13]})"
    )


def executor_text(executor: str) -> str:
    """Where a run's attempts run, from its manifest: ``local``, ``dask ADDRESS``, or ``dask``
    with the local cluster its owner starts."""
    if executor.startswith("dask="):
        return f"dask {executor.removeprefix('dask=')}"
    if executor == "dask":
        return "dask (a local cluster started by the run's owner)"
    return executor


def failure_reason(state: RunState, *, message: str | None, allowed: frozenset[str] = frozenset()) -> str | None:
    """Why a completed run did not succeed: the script's error (``message``), else the nodes whose
    state made the outcome (``allowed``: nodes whose failure does not count); None for a run that
    succeeded or has not completed."""
    if state.lifecycle is not Lifecycle.COMPLETED or state.outcome in (None, "success"):
        return None
    if message:
        return message
    if state.outcome == "cancellation":
        return "the run was cancelled (rho-notebook cancel)"
    verb = {"failure": "failed", "denial": "was denied"}.get(str(state.outcome))
    if verb is None:
        return None
    names = [
        name for name in node_order(state) if state.nodes[name].state.value == state.outcome and name not in allowed
    ]
    if len(names) == 1:
        record = state.nodes[names[0]]
        return f"node {names[0]} {verb}" + (f": {record.reason}" if record.reason else "")
    if names:
        return f"nodes {', '.join(names)} {verb.replace('was', 'were')} (their lines below say why)"
    return None


def status_head_lines(layout: StoreLayout, state: RunState) -> list[str]:
    """``reason``, ``executor`` and ``owner`` lines of ``status`` (those that apply) of a run of
    the store at ``layout``."""
    lines = []
    if state.lifecycle is Lifecycle.COMPLETED and state.outcome not in (None, "success"):
        message = glance.completion_message(layout, state)
        allowed = glance.allowed_failures(layout, state.run_id) if message is None else frozenset()
        reason = failure_reason(state, message=message, allowed=allowed)
        if reason:
            lines.append(_LABEL.format("reason", reason))
    manifest = glance.manifest_facts(layout, state.run_id)
    if manifest is not None:
        lines.append(_LABEL.format("executor", executor_text(manifest.executor)))
    live = state.lifecycle in LIVE_LIFECYCLES
    pid = owner_pid(layout, state.run_id) if live else None
    if pid is not None:
        lines.append(_LABEL.format("owner", f"pid {pid}" if pid else "a process that did not record its pid"))
    return lines


def next_step_lines(layout: StoreLayout, state: RunState, *, command: str = "rho-notebook") -> list[str]:
    """What a person does next: for ``needs_recovery``, how to inspect and resume; for
    ``waiting``, the approve or answer command of each pending request; empty otherwise."""
    run_id = state.run_id
    if state.lifecycle is Lifecycle.NEEDS_RECOVERY:
        unsettled = unsettled_nodes(state)
        if not unsettled:
            return [
                _LABEL.format("next", f"its owner stopped before the run ended; go on with: {command} resume {run_id}")
            ]
        node = unsettled[0] if len(unsettled) == 1 else "NODE"
        return [
            _LABEL.format("next", f"its owner stopped while {', '.join(unsettled)} ran: no result is recorded"),
            f"{'':10} check what ran and that no process of it remains ({command} logs {run_id[:13]} {node}),",
            f"{'':10} then go on with: {command} resume {run_id} --recover-uncertain",
        ]
    if state.lifecycle is not Lifecycle.WAITING:
        return []
    from rho_notebook.service.decisions import pending_approvals  # the approval models: only when waiting

    try:
        pending = pending_approvals(layout, run_id)
    except (RhoError, OSError) as err:  # a requests folder the store refuses: say so, status goes on
        message = err.message if isinstance(err, RhoError) else str(err)
        return [_LABEL.format("next", f"its approval requests cannot be read: {message}")]
    lines = []
    for request in pending:
        approve = f"{command} approve {run_id[:13]} {request.request_id[:13]}"
        if request.kind == "form":
            step = request.facts.get("step", request.node)
            todo = f"{command} answer {run_id[:13]} {step} FIELD=VALUE...  (or {approve} --deny)"
        else:
            todo = f"{approve}  (or add --deny)"
        lines.append(_LABEL.format("next", f"{request.node} waits for a person: {todo}"))
    return lines


def status_lines(layout: StoreLayout, state: RunState) -> list[str]:
    """All that ``status`` says of a run of the store at ``layout``, line by line: the same text for
    ``rho-notebook status`` and ``%workflow status`` (its usage and budgets, each node's state as
    the run has it and its spend, why it failed, what a person does next)."""
    data = status_json(state, layout=layout)
    lines = [
        _LABEL.format("run", state.run_id),
        _LABEL.format("workflow", f"{state.workflow}   plan {state.plan_id}"),
        _LABEL.format("digest", state.graph_digest),
        _LABEL.format("lifecycle", state.lifecycle.value + (f"   outcome {state.outcome}" if state.outcome else "")),
    ]
    if "usage" in data:  # only a run that made (or saved) a model call
        lines.append(_LABEL.format("usage", usage_text(data["usage"])))
    lines += budget_lines(data.get("budgets", []))  # while a budget is set (docs/usage.md#budgets)
    if state.damage is not None:
        lines.append(_LABEL.format("damage", state.damage))
        lines.append(
            _LABEL.format("", "(nodes below are the journal's readable part; resume is refused: docs/running.md)")
        )
    else:
        lines += status_head_lines(layout, state)
    rows = [(name, state.nodes[name], node["shown"], node.get("usage")) for name, node in data["nodes"].items()]
    lines += node_status_lines(rows)
    if "output" in data:
        lines.append(_LABEL.format("output", output_text(data["output"])))
    return lines + decision_lines(state) + next_step_lines(layout, state)
