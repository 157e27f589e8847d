"""The fold of a run's journal into its state: :func:`apply` folds one record (a
:data:`~rho_notebook.model.events.JournalEvent`) into a :class:`~rho_notebook.model.run_state.RunState`,
dispatching on its ``kind`` to one small function per kind; :func:`replay` folds many. Replaying a
journal from the start always gives the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rho_notebook.model.budget import fold_budget_set
from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState, node_state
from rho_notebook.model.tally import add_call

if TYPE_CHECKING:  # types only: status folds a journal without the graph's models or the record types
    from rho_notebook.model.events import (
        ApprovalCarried,
        ApprovalDecided,
        ApprovalRequested,
        AttemptUncertain,
        CancelAcknowledged,
        CancelRequested,
        InstanceFinished,
        InstanceLaunched,
        JournalEvent,
        ModelCalled,
        NeedsRecovery,
        NodeBlocked,
        NodeFinished,
        NodeLaunched,
        NodeReady,
        NodeReset,
        NodeReused,
        NodeSkipped,
        OwnerExited,
        ProcessStarted,
        RecoveryConfirmed,
        RunCompleted,
        RunHalted,
        RunStarted,
        ScriptOutput,
        StepReplayed,
    )

__all__ = ["apply", "replay"]


# ------------------------------------------------ one function per kind (model/events.py); other
# kinds change only last_seq and updated_at. ``ev["x"]`` only where every writer of old wrote ``x``.


def _attempt(state: RunState, ev: Mapping[str, Any]) -> AttemptRecord | None:
    record = state.nodes.get(ev.get("node", ""))
    if record is None:
        return None
    for attempt in reversed(record.attempts):
        if attempt.number == ev.get("attempt"):
            return attempt
    return None


def _run_started(state: RunState, ev: RunStarted) -> None:
    state.lifecycle = Lifecycle.RUNNING
    state.owner_pid = ev.get("pid")
    state.outcome = None
    state.halted = []
    state.open_failures = []
    if ev.get("resumed"):
        state.cancelled = False
    state.refresh_waiting()  # a resumed owner waits again on the requests the last one left


def _owner_exited(state: RunState, ev: OwnerExited) -> None:
    state.owner_pid = None


def _node_ready(state: RunState, ev: NodeReady) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        node.state, node.reason = NodeState.READY, ""


def _node_skipped(state: RunState, ev: NodeSkipped) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        node.state, node.reason = NodeState.SKIPPED, ev.get("reason", "")


def _node_blocked(state: RunState, ev: NodeBlocked) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        node.state, node.reason = NodeState.BLOCKED, ev.get("reason", "")


def _node_launched(state: RunState, ev: NodeLaunched) -> None:
    node = state.nodes.get(ev.get("node", ""))
    step = ev.get("step")
    if node is None:
        if step is None:
            return
        node = state.nodes[ev["node"]] = NodeRecord()  # a script step: its node appears when it first launches
    if step is not None:
        node.step = dict(step)
        node.handled = False
        _went_on(state)
    node.state, node.reason = NodeState.RUNNING, ""
    node.attempts.append(AttemptRecord(number=ev["attempt"], started_at=ev["at"], fork_copy=_fork_copy(ev)))
    state.refresh_waiting()


def _fork_copy(ev: Mapping[str, Any]) -> dict[str, Any] | None:
    """A fork's taken or edited node or step (its record's ``taken_from`` / ``edited``), else None."""
    for key in ("taken_from", "edited"):
        found = ev.get(key)
        if isinstance(found, dict):
            return {key: dict(found)}
    return None


def _node_reused(state: RunState, ev: NodeReused) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is None:
        return
    node.state, node.reason = NodeState.RUNNING, ""
    source = {"run_id": ev["source_run"], "node": ev["source_node"], "attempt": ev["source_attempt"]}
    copy = _fork_copy(ev)
    node.attempts.append(AttemptRecord(number=ev["attempt"], started_at=ev["at"], reused_from=source, fork_copy=copy))


def _approval_carried(state: RunState, ev: ApprovalCarried) -> None:
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.approval = {
            "request_id": None,
            "decision": "approve",
            "by": ev.get("by"),
            "comment": f"carried from run {ev.get('from_run')}",
            "decided_at": ev.get("decided_at"),
            "via": "carried",
        }


def _process_started(state: RunState, ev: ProcessStarted) -> None:
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.pid = ev.get("pid")


def _node_finished(state: RunState, ev: NodeFinished) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is None:
        return
    node.state = node_state(ev["state"])
    node.reason = ev.get("message", "")
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.pending_approval = None
        attempt.ended_at = ev["at"]
        attempt.state = ev["state"]
        exit_record = ev.get("exit")
        attempt.exit = dict(exit_record) if isinstance(exit_record, dict) else None
        attempt.message = ev.get("message", "")
    if node.step is not None and node.state in _HANDLEABLE and ev["node"] not in state.open_failures:
        state.open_failures.append(ev["node"])
    state.refresh_waiting()


def _approval_requested(state: RunState, ev: ApprovalRequested) -> None:
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.pending_approval = ev["request_id"]
    state.asked = True
    state.refresh_waiting()


_DECISION_KEYS = ("request_id", "decision", "by", "comment", "decided_at", "via")


def _approval_decided(state: RunState, ev: ApprovalDecided) -> None:
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.pending_approval = None
        attempt.approval = {k: ev.get(k) for k in _DECISION_KEYS}
    state.refresh_waiting()


def _node_reset(state: RunState, ev: NodeReset) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        node.state, node.reason = NodeState.PENDING, ev.get("reason", "")


def _attempt_uncertain(state: RunState, ev: AttemptUncertain) -> None:
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.uncertain = True


def _recovery_confirmed(state: RunState, ev: RecoveryConfirmed) -> None:
    for name in ev.get("nodes", []):
        record = state.nodes.get(name)
        if record is not None and record.current is not None:
            record.current.abandoned = True
            record.state = NodeState.PENDING


def _cancel_requested(state: RunState, ev: CancelRequested) -> None:
    if ev["request_id"] not in state.cancel_pending:
        state.cancel_pending.append(ev["request_id"])
    state.cancelled = True
    if state.lifecycle in (Lifecycle.RUNNING, Lifecycle.WAITING):
        state.lifecycle = Lifecycle.CANCELLING


def _cancel_acknowledged(state: RunState, ev: CancelAcknowledged) -> None:
    if ev["request_id"] in state.cancel_pending:
        state.cancel_pending.remove(ev["request_id"])
    state.cancel_acknowledged.append(ev["request_id"])


def _run_completed(state: RunState, ev: RunCompleted) -> None:
    state.lifecycle = Lifecycle.COMPLETED
    state.outcome = ev["outcome"]
    # a script that succeeded handled every failure it met; in a run that failed, any of them may be
    # why (and resume runs each again), so none is shown handled
    if state.outcome in ("success", "failure"):
        for record in state.nodes.values():
            if record.step is not None and record.state in _HANDLEABLE:
                record.handled = state.outcome == "success"
    state.open_failures = []


def _needs_recovery(state: RunState, ev: NeedsRecovery) -> None:
    state.lifecycle = Lifecycle.NEEDS_RECOVERY


_HANDLEABLE = (NodeState.FAILURE, NodeState.DENIAL)


def _went_on(state: RunState, _ev: Any = None) -> None:
    """A script made a step call: the steps that failed or were denied before it were handled."""
    for name in state.open_failures:
        record = state.nodes.get(name)
        if record is not None and record.state in _HANDLEABLE:
            record.handled = True
    state.open_failures = []


def _step_replayed(state: RunState, ev: StepReplayed) -> None:
    _went_on(state)
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        node.replayed += 1
        if ev.get("decision") == "skip" and node.state in _HANDLEABLE:  # its stored failure is the answer
            node.handled = False
            state.open_failures.append(ev["node"])


def _run_halted(state: RunState, ev: RunHalted) -> None:
    state.lifecycle = Lifecycle.NEEDS_DECISION
    state.halted = [dict(h) for h in ev.get("steps", [])]
    state.owner_pid = None


def _script_output(state: RunState, ev: ScriptOutput) -> None:
    state.output = ev.get("value")


def _model_called(state: RunState, ev: ModelCalled) -> None:
    attempt = _attempt(state, ev)
    if attempt is not None:
        attempt.usage = add_call(attempt.usage, ev)


def _instance_launched(state: RunState, ev: InstanceLaunched) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        node.instances[ev["instance"]] = {"state": "running", "attempt": ev["attempt"], "message": ""}


def _instance_finished(state: RunState, ev: InstanceFinished) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is not None:
        found = {"state": ev["state"], "attempt": ev["attempt"], "message": ev.get("message", "")}
        node.instances[ev["instance"]] = {**found, **({"value": ev["value"]} if "value" in ev else {})}


_FOLDS: dict[str, Callable[[RunState, Any], None]] = {
    "run_started": _run_started,
    "owner_exited": _owner_exited,
    "node_ready": _node_ready,
    "node_skipped": _node_skipped,
    "node_blocked": _node_blocked,
    "node_launched": _node_launched,
    "node_reused": _node_reused,
    "approval_carried": _approval_carried,
    "process_started": _process_started,
    "node_finished": _node_finished,
    "approval_requested": _approval_requested,
    "approval_decided": _approval_decided,
    "node_reset": _node_reset,
    "attempt_uncertain": _attempt_uncertain,
    "recovery_confirmed": _recovery_confirmed,
    "cancel_requested": _cancel_requested,
    "cancel_acknowledged": _cancel_acknowledged,
    "run_completed": _run_completed,
    "needs_recovery": _needs_recovery,
    "step_replayed": _step_replayed,
    "step_halted": _went_on,
    "step_diverged": _went_on,
    "run_halted": _run_halted,
    "script_output": _script_output,
    "instance_launched": _instance_launched,
    "instance_finished": _instance_finished,
    "model_called": _model_called,
    "budget_set": fold_budget_set,
}
"""Each journal kind that changes a run's state -> how (the discriminator of JournalEvent)."""


def apply(state: RunState, ev: JournalEvent | dict[str, Any]) -> None:
    """Fold one journal record into ``state`` (in place)."""
    seq = int(ev.get("seq", 0))
    if seq > state.last_seq:
        state.last_seq = seq
    state.updated_at = ev.get("at", state.updated_at)
    fold = _FOLDS.get(ev["kind"])
    if fold is not None:
        fold(state, ev)


def replay(state: RunState, events: Iterable[JournalEvent | dict[str, Any]]) -> RunState:
    for ev in events:
        apply(state, ev)
    return state
