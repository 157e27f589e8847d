"""JSON shapes of plans, runs, results and approval requests, for front ends that speak JSON.

One place owns these shapes so that the jupyter-server REST API (:mod:`rho_notebook.server`)
answers with exactly what ``rho-notebook status|result|runs --output json`` prints: the run
status of :func:`status_json` and the result of :func:`result_json` are the CLI's shapes; the
list rows of :func:`run_row_json` are the CLI's ``runs --output json`` rows with a few more keys.
Everything here is a pure function of records already read from the store, except
:func:`result_json`, which reads the small ``value.json`` of successful attempts.
"""

from __future__ import annotations

import json
from typing import Any

from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.plan.plan import PlanManifest
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.run.state import RunState
from rho_notebook.store.files import read_nofollow
from rho_notebook.store.runs import RunFolder, RunManifest

__all__ = [
    "LIVE_LIFECYCLES",
    "plan_json",
    "status_json",
    "run_row_json",
    "result_json",
    "approval_json",
]

LIVE_LIFECYCLES = frozenset({Lifecycle.RUNNING, Lifecycle.WAITING, Lifecycle.CANCELLING})
"""Lifecycles in which an owner is executing the run."""



def plan_json(manifest: PlanManifest) -> dict[str, Any]:
    """A saved plan: identity, digest, inputs, sources and the authority list (no graph)."""
    return {
        "plan_id": manifest.plan_id,
        "workflow": manifest.workflow,
        "graph_digest": manifest.graph_digest,
        "created_at": manifest.created_at,
        "entry": manifest.entry,
        "workspace_root": manifest.workspace_root,
        "workspace_trusted": manifest.workspace_trusted,
        "inputs": manifest.inputs,
        "sources": [source.model_dump(mode="json") for source in manifest.sources],
        "authority": [item.model_dump(mode="json") for item in manifest.authority],
        "stats": dict(manifest.stats),
    }


def status_json(state: RunState) -> dict[str, Any]:
    """One durable snapshot of a run: ``rho-notebook status --output json``."""
    nodes = {}
    for name, record in sorted(state.nodes.items()):
        current = record.current
        nodes[name] = {
            "state": record.state.value,
            "attempt": record.attempt,
            "exit_code": record.exit_code(),
            "reason": record.reason,
            "uncertain": bool(current and current.uncertain and not current.abandoned),
        }
    return {
        "run_id": state.run_id,
        "plan_id": state.plan_id,
        "graph_digest": state.graph_digest,
        "workflow": state.workflow,
        "lifecycle": state.lifecycle.value,
        "outcome": state.outcome,
        "nodes": nodes,
    }


def _counts(state: RunState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in state.nodes.values():
        counts[record.state.value] = counts.get(record.state.value, 0) + 1
    return {s.value: counts[s.value] for s in NodeState if s.value in counts}


def run_row_json(state: RunState, manifest: RunManifest | None = None) -> dict[str, Any]:
    """A row of the run list: the CLI's ``runs --output json`` row, plus the graph digest, node
    state counts, how many nodes wait for a person, and (with ``manifest``) when, from which
    front end and in which permission mode the run was created."""
    row: dict[str, Any] = {
        "run_id": state.run_id,
        "plan_id": state.plan_id,
        "workflow": state.workflow,
        "lifecycle": state.lifecycle.value,
        "outcome": state.outcome,
        "updated_at": state.updated_at,
        "graph_digest": state.graph_digest,
        "live": state.lifecycle in LIVE_LIFECYCLES,
        "counts": _counts(state),
        "total": len(state.nodes),
        "waiting": len(state.waiting_requests()),
        "last_seq": state.last_seq,
    }
    if manifest is not None:
        row.update(created_at=manifest.created_at, origin=manifest.origin, mode=manifest.mode)
    return row


def result_json(folder: RunFolder, state: RunState) -> dict[str, Any]:
    """Per node: state, attempts, exit, artifact paths and validated output (``result --output json``)."""
    nodes: dict[str, Any] = {}
    for name, record in sorted(state.nodes.items()):
        entry: dict[str, Any] = {"state": record.state.value, "attempts": [a.to_json() for a in record.attempts]}
        if record.current is not None:
            entry["exit"] = record.current.exit
            found = folder.artifacts(name, record.attempt)
            entry["artifacts"] = {key: str(path) for key, path in found.items()}
            if "value" in found and record.state is NodeState.SUCCESS:
                entry["output"] = json.loads(read_nofollow(found["value"]))
        nodes[name] = entry
    return {"run_id": state.run_id, "lifecycle": state.lifecycle.value, "outcome": state.outcome, "nodes": nodes}


def approval_json(request: ApprovalRequest, *, waiting: bool) -> dict[str, Any]:
    """A pending approval request; ``waiting`` says whether the run's owner is waiting on it now
    (False for a request whose node has since ended, e.g. timed out)."""
    return {**request.model_dump(mode="json"), "waiting": waiting}
