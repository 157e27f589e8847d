"""Node and run views of a run state: what the DAG view shows for each node and for the run.

Each view carries a version ``v`` (newest wins in the front end); :func:`same_view` compares two
views without it. A node view's ``shown`` is the state as the run has it
(:func:`~rho_notebook.service.wire.shown_state`): front ends style and count nodes by it, so an
allowed failure is not a red failure of a run that succeeded, nor is a script step's failure the
script went on from (``failure (handled)``), and a launch held for a person's approval is not
drawn running.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.service.wire import (
    LIVE_LIFECYCLES,
    NodeView,
    RunView,
    allowed_failures_of,
    halted_json,
    instances_json,
    outcome_name,
    person_command,
    reused_from_json,
    shown_state,
)

__all__ = [
    "STATE_ORDER",
    "allowed_failures",
    "halted_by_step",
    "node_view",
    "node_view_copy",
    "node_views",
    "run_times",
    "run_view_of",
    "same_view",
]

STATE_ORDER = tuple(state.value for state in NodeState)


def allowed_failures(graph: Graph) -> frozenset[str]:
    """The nodes of ``graph`` whose failure does not fail the run (``allow_failure = True``)."""
    return frozenset(node.name for node in graph.nodes if node.allow_failure)


def node_view(
    record: NodeRecord, version: int = 0, *, halted: str | None = None, allowed: bool = False, name: str | None = None
) -> NodeView:
    """The view of one node; ``halted`` says why a script run stopped at this step; ``allowed``:
    the node's failure does not count (``allow_failure``), so a failure is shown as allowed."""
    current = record.current
    view: NodeView = {
        "state": record.state.value,
        "shown": shown_state(record, allowed=allowed),
        "attempt": record.attempt,
        "started_at": current.started_at if current is not None else None,
        "ended_at": current.ended_at if current is not None else None,
        "reason": record.reason,
        "exit_code": record.exit_code(),
        "uncertain": bool(current is not None and current.uncertain and not current.abandoned),
        "v": version,
    }
    reused = reused_from_json(record)
    if reused is not None:
        view["reused_from"] = reused
    if record.step is not None:
        view["step_kind"] = str(record.step.get("kind", ""))
        view["replayed"] = record.replayed
    if halted is not None:
        view["halted"] = halted
    instances = instances_json(name, record) if name is not None else None
    if instances is not None:
        view["instances"] = instances
    return view


def halted_by_step(state: RunState) -> dict[str, str]:
    """Why a script run stopped, by the step it stopped at."""
    return {h["step"]: h["why"] for h in halted_json(state)}


def node_views(
    state: RunState | None, graph: Graph | None = None, *, version: int = 0, allowed: frozenset[str] | None = None
) -> dict[str, NodeView]:
    """The view of every node: of ``graph`` in its order (a node ``state`` has no record of is
    pending), else of ``state``'s nodes by name; a script run's steps in arrival order.
    ``allowed``: the nodes whose failure does not count (default: ``graph``'s, else
    :func:`~rho_notebook.service.wire.allowed_failures_of` the run)."""
    records = state.nodes if state is not None else {}
    if graph is not None and graph.script is None:
        names = [node.name for node in graph.nodes]
    elif any(record.step is not None for record in records.values()) or graph is not None:
        names = list(records)
    else:
        names = sorted(records)
    halted = halted_by_step(state) if state is not None else {}
    if allowed is None and graph is not None:
        allowed = allowed_failures(graph)
    elif allowed is None:
        allowed = allowed_failures_of(state) if state is not None else frozenset()
    return {
        name: node_view(
            records.get(name) or NodeRecord(), version, halted=halted.get(name), allowed=name in allowed, name=name
        )
        for name in names
    }


def node_view_copy(view: NodeView) -> NodeView:
    copied: NodeView = {**view}
    if "reused_from" in view:
        copied["reused_from"] = {**view["reused_from"]}
    return copied


def same_view(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two views show the same thing (their versions aside)."""
    return all(a.get(k) == b.get(k) for k in set(a) | set(b) if k != "v")


def run_view_of(
    state: RunState, *, started_at: str | None = None, ended_at: str | None = None, version: int = 0
) -> RunView:
    live = state.lifecycle in LIVE_LIFECYCLES
    lifecycle = state.lifecycle.value
    view: RunView = {
        "run_id": state.run_id,
        "plan_id": state.plan_id,
        "workflow": state.workflow,
        "graph_digest": state.graph_digest,
        "lifecycle": state.lifecycle.value,
        "outcome": outcome_name(state),
        "started_at": started_at,
        "ended_at": ended_at,
        "cancel_pending": bool(state.cancel_pending),
        "can_cancel": live,
        "can_resume": lifecycle == "needs_decision"
        or (lifecycle in ("completed", "needs_recovery") and state.outcome != "success"),
        "v": version,
    }
    if any(record.step is not None for record in state.nodes.values()):
        view["script"] = True
    if state.halted:
        view["halted"] = halted_json(state)
    command = person_command(state)
    if command is not None and state.lifecycle is not Lifecycle.WAITING:  # a waiting run's form says what to do
        view["next"] = command
    if state.output is not None:
        view["output"] = state.output
    return view


def run_times(events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """Start of the latest execution and, if it finished, its end, from journal records."""
    started: str | None = None
    ended: str | None = None
    for ev in events:
        if ev.get("kind") == "run_started":
            started, ended = ev.get("at"), None
        elif ev.get("kind") == "run_completed":
            ended = ev.get("at")
    return started, ended
