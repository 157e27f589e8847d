"""Recovery of a run whose owner died: uncertain attempts, orphan processes, nodes to re-decide.

An attempt that was launched but has no journaled result is *uncertain*: its process may still be
running or may have finished. The owner that opens such a run journals the uncertainty and refuses
(:class:`~rho_notebook.errors.NeedsRecovery`) until the person passes ``--recover-uncertain``;
then any process tree still carrying the run's ``RHO_RUN_ID`` is stopped and the node gets a new
attempt. On resume, cancelled nodes are reset for a new attempt and the nodes downstream of every
reset node that were skipped, blocked or ready are decided again.

Script runs (``graph.script``) are recovered differently: their unsettled steps are decided when
the script calls them again, so only leftover processes are stopped here.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from rho_notebook.errors import NeedsRecovery, NothingToResume
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import Graph, ItemNode
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.oshelpers import kill_group_of, processes_with_env
from rho_notebook.runtime.scheduler import Scheduler
from rho_notebook.store.journal import JournalWriter

__all__ = ["nothing_to_resume", "recovery_events", "resume_refusal"]


def nothing_to_resume(state: RunState, *, script: bool) -> str | None:
    """Why resuming this run would start nothing (None: it would start something), as the CLI
    says it (:func:`resume_refusal`)."""
    refusal = resume_refusal(state, script=script)
    return None if refusal is None else refusal.message


def resume_refusal(state: RunState, *, script: bool) -> NothingToResume | None:
    """The refusal of a resume that would start nothing (None: it would start something).

    A run completed with success has nothing left. A graph run completed otherwise has nothing
    either unless a node of it was cancelled: a graph resume starts again only cancelled or
    interrupted work, never a failed, denied or blocked node. A ``script`` (or flow) run is
    executed again from the top, replaying what succeeded, so it resumes after a failure too.
    Said by the owner as it opens the run and by the service before it journals a resume's
    budget raise or starts an owner."""
    if state.lifecycle is not Lifecycle.COMPLETED:
        return None
    run_id = state.run_id
    refusal = partial(NothingToResume, run_id=run_id, plan_id=state.plan_id, graph_digest=state.graph_digest)
    if state.outcome == "success":
        return refusal(f"run {run_id} already completed with outcome success; nothing to resume", fork_at=None)
    if script or any(rec.state is NodeState.CANCELLATION for rec in state.nodes.values()):
        return None
    failed = sorted(name for name, rec in state.nodes.items() if rec.state is NodeState.FAILURE)
    problem = (
        f"run {run_id} completed with outcome {state.outcome} and has nothing to resume: resume starts again only "
        f"cancelled or interrupted nodes, not failed, denied or blocked ones"
    )
    if not failed:
        return refusal(f"{problem}; plan and run the workflow again", fork_at=None)
    return refusal(problem, fork_at=failed[0])  # its message names the CLI's fork command


def _stop_orphans(run_id: str) -> list[int]:
    """SIGKILL every process (and its group) whose environment proves it belongs to ``run_id``."""
    pids = processes_with_env("RHO_RUN_ID", run_id)
    for pid in pids:
        kill_group_of(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and processes_with_env("RHO_RUN_ID", run_id):
        time.sleep(0.01)
    return pids


def _descendants_of_reset(graph_children: Mapping[str, list[str]], roots: list[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        for child in graph_children.get(name, []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def recovery_events(
    state: RunState,
    journal: JournalWriter,
    *,
    graph: Graph,
    pending: list[dict[str, Any]],
    resume: bool,
    recover_uncertain: bool,
) -> list[dict[str, Any]]:
    """The events that open an owned execution: ``pending``, then uncertain attempts, recovery and
    the resets of a resume (not yet journaled; the caller appends and applies them).

    Raises
    ------
    NeedsRecovery
        When attempts are uncertain and ``recover_uncertain`` is false; ``pending``, the uncertain
        attempts and the needs_recovery event are journaled (and synced) first.
    """
    run_id = state.run_id
    records = list(pending)
    if graph.script is not None:
        return _script_recovery(state, records)
    waiting = state.waiting_requests()
    running = [
        name for name, rec in sorted(state.nodes.items()) if rec.state is NodeState.RUNNING and name not in waiting
    ]
    # a reused attempt started no process: one whose node_finished was lost is simply taken again
    untaken = [name for name in running if (taken := state.nodes[name].current) is not None and taken.reused_from]
    records.extend(
        event(EventKind.NODE_RESET, run_id, node=name, reason="its reuse was not journaled as finished")
        for name in untaken
    )
    # an item step without effects outside the run (ItemNode.pure) is simply computed again
    pure = [name for name in running if name not in untaken and _is_pure(graph, name)]
    records.extend(
        event(EventKind.NODE_RESET, run_id, node=name, reason="an item step without outside effects is started again")
        for name in pure
    )
    untaken += pure
    uncertain = [name for name in running if name not in untaken]
    for name in uncertain:
        rec = state.nodes[name]
        if rec.current is not None and not rec.current.uncertain:
            records.append(event(EventKind.ATTEMPT_UNCERTAIN, run_id, node=name, attempt=rec.attempt))
    if uncertain and not recover_uncertain:
        records.append(event(EventKind.NEEDS_RECOVERY, run_id, nodes=uncertain))
        journal.append(records)
        journal.sync()
        msg = (
            f"run {run_id} needs recovery: attempts of {', '.join(uncertain)} have no journaled result "
            "(the owner exited uncleanly). Inspect `rho-notebook status` and the node artifacts, make sure no "
            "earlier process remains, then resume with --recover-uncertain"
        )
        raise NeedsRecovery(msg)
    if uncertain:
        for pid in _stop_orphans(run_id):
            records.append(event(EventKind.ORPHAN_STOPPED, run_id, pid=pid))
        records.append(event(EventKind.RECOVERY_CONFIRMED, run_id, nodes=uncertain))
    # cancel requests made while no owner was alive are applied by the driver as it starts
    if resume:
        records.extend(_resume_resets(state, graph, set(uncertain) | set(untaken)))
    return records


def _resume_resets(state: RunState, graph: Graph, reset: set[str]) -> list[dict[str, Any]]:
    """The resets of a resume: cancelled nodes start a new attempt, and what follows them or the
    ``reset`` nodes (skipped, blocked, ready) is decided again."""
    run_id = state.run_id
    cancelled = [name for name, rec in sorted(state.nodes.items()) if rec.state is NodeState.CANCELLATION]
    downstream = _descendants_of_reset(Scheduler(graph).children, sorted(reset | set(cancelled)))
    records = [
        event(EventKind.NODE_RESET, run_id, node=name, reason="new attempt after cancellation")
        for name in sorted(cancelled)
    ]
    records.extend(
        event(EventKind.NODE_RESET, run_id, node=name, reason="re-decided after resume")
        for name in sorted(downstream)
        if state.nodes[name].state in (NodeState.SKIPPED, NodeState.BLOCKED, NodeState.READY)
    )
    return records


def _is_pure(graph: Graph, name: str) -> bool:
    node = graph.node(name)
    return isinstance(node, ItemNode) and node.pure


def _script_recovery(state: RunState, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A script run never needs ``--recover-uncertain``: a step whose attempt never settled is
    decided when the re-executed script calls it again (it halts for a person's ``--decide``
    unless it declared ``recovery="rerun"``, runtime/replay.py). What a dead owner left
    running (its script process, a step's process tree) is stopped before anything starts."""
    unsettled = any(
        rec.current is not None and rec.current.state is None and not rec.current.reused_from
        for rec in state.nodes.values()
    )
    if unsettled or state.owner_pid is not None:
        for pid in _stop_orphans(state.run_id):
            records.append(event(EventKind.ORPHAN_STOPPED, state.run_id, pid=pid))
    return records
