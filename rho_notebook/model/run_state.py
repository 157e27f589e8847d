"""The durable state of one run, rebuilt from its journal by a pure reducer.

The journal (events.jsonl) is the source of truth; state.json is an atomically written snapshot
of :class:`RunState` for cheap reads. :func:`apply` folds one journal record (a
:data:`~rho_notebook.model.events.JournalEvent`) into the state, dispatching on its ``kind`` to
one small function per kind; replaying a journal from the start always gives the same state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rho_notebook.model.budget import fold_budget_set
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
    from rho_notebook.model.graph import Graph

__all__ = ["AttemptRecord", "NodeRecord", "RunState", "apply", "replay"]


@dataclass(slots=True)
class AttemptRecord:
    number: int
    started_at: str
    ended_at: str | None = None
    pid: int | None = None
    state: str | None = None
    """Terminal node state this attempt produced; None while unfinished."""
    exit: dict[str, Any] | None = None
    """{"kind": exit|signal|timeout|cancelled|abnormal, "code", "signal"} for processes."""
    message: str = ""
    uncertain: bool = False
    abandoned: bool = False
    pending_approval: str | None = None
    """Request ID this attempt is waiting on (no process has started while it is set)."""
    approval: dict[str, Any] | None = None
    """The decision record once made: decision, by, comment, decided_at, via."""
    reused_from: dict[str, Any] | None = None
    """For a reused attempt (no launch): {"run_id", "node", "attempt"} of the stored success."""
    usage: dict[str, Any] | None = None
    """The tally of this attempt's ``model_called`` records (:mod:`~rho_notebook.model.ledger`)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "number": self.number,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "pid": self.pid,
            "state": self.state,
            "exit": dict(self.exit) if self.exit is not None else None,
            "message": self.message,
            "uncertain": self.uncertain,
            "abandoned": self.abandoned,
            "pending_approval": self.pending_approval,
            "approval": self.approval,
        }
        if self.reused_from is not None:
            data["reused_from"] = dict(self.reused_from)
        if self.usage is not None:
            data["usage"] = self.usage  # never changed in place: add_call makes a new tally
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        return cls(**data)


@dataclass(slots=True)
class NodeRecord:
    state: NodeState = NodeState.PENDING
    reason: str = ""
    attempts: list[AttemptRecord] = field(default_factory=list)
    step: dict[str, Any] | None = None
    """A script step's facts from its latest node_launched: kind, digest, facts, after, recovery."""
    replayed: int = 0
    """How many step calls were answered from the journal (step_replayed)."""
    instances: dict[int, dict[str, Any]] = field(default_factory=dict)
    """An aggregate step's instances by index: ``{state, attempt, message, value?}`` of the latest
    record of each (``value``: a success's result, kept in memory, not in the snapshot)."""
    handled: bool = False
    """A script step whose latest attempt failed or was denied while the script went on (a later
    step call came, or the run succeeded): shown ``failure (handled)`` / ``denial (handled)``."""

    @property
    def attempt(self) -> int:
        return self.attempts[-1].number if self.attempts else 0

    @property
    def untouched(self) -> bool:
        """Nothing happened to this node yet (its snapshot is a fresh record's)."""
        return (
            self.state is NodeState.PENDING
            and not self.attempts
            and not self.reason
            and self.step is None
            and not self.replayed
            and not self.instances
        )

    @property
    def current(self) -> AttemptRecord | None:
        return self.attempts[-1] if self.attempts else None

    def exit_code(self) -> int | None:
        current = self.current
        if current is None or current.exit is None or current.exit.get("kind") != "exit":
            return None
        code = current.exit.get("code")
        return code if isinstance(code, int) else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "state": self.state._value_,  # the member's value, read directly: .value is a descriptor call
            "reason": self.reason,
            "attempt": self.attempt,
            "exit_code": self.exit_code(),
            "attempts": [a.to_json() for a in self.attempts],
        }
        if self.step is not None:
            data["step"] = dict(self.step)
            data["replayed"] = self.replayed
            if self.handled:
                data["handled"] = True
        if self.instances:
            shown = ("state", "attempt", "message")
            data["instances"] = {str(i): {k: r[k] for k in shown} for i, r in sorted(self.instances.items())}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeRecord:
        return cls(
            state=node_state(data["state"]),
            reason=data.get("reason", ""),
            attempts=[AttemptRecord.from_json(a) for a in data.get("attempts", [])],
            step=data.get("step"),
            replayed=data.get("replayed", 0),
            instances={int(i): dict(r) for i, r in data.get("instances", {}).items()},
            handled=data.get("handled", False),
        )


@dataclass(repr=False)
class RunState:
    run_id: str
    plan_id: str
    graph_digest: str
    workflow: str
    nodes: dict[str, NodeRecord]
    lifecycle: Lifecycle = Lifecycle.PLANNED
    outcome: str | None = None
    owner_pid: int | None = None
    last_seq: int = 0
    updated_at: str = ""
    cancel_pending: list[str] = field(default_factory=list)
    cancel_acknowledged: list[str] = field(default_factory=list)
    cancelled: bool = False
    """True once a cancel request was applied to this execution (cleared by resume)."""
    asked: bool = False
    """True once any approval was requested in this run."""
    output: Any = None
    """A script run's emit_output value (script_output), None when it emitted none."""
    halted: list[dict[str, Any]] = field(default_factory=list)
    """A script run's halted steps [{step, why}] while it needs a decision."""
    open_failures: list[str] = field(default_factory=list)
    """Script steps that failed or were denied in this execution with no step call after them yet
    (each becomes ``handled`` when one comes or the run succeeds; see ``_went_on``)."""
    damage: str | None = None
    """Why the journal cannot be trusted (lifecycle ``damaged``); set when read, never journaled."""
    budgets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Scope ("" the run, else a node) -> its limits (:mod:`~rho_notebook.model.budget`)."""

    @classmethod
    def fresh(cls, *, run_id: str, plan_id: str, graph: Graph, graph_digest: str) -> RunState:
        return cls(
            run_id=run_id,
            plan_id=plan_id,
            graph_digest=graph_digest,
            workflow=graph.name,
            nodes={node.name: NodeRecord() for node in graph.nodes},
        )

    def succeeded_attempts(self) -> dict[str, int]:
        """Node -> number of its attempt that succeeded (the one whose output later nodes read)."""
        return {
            name: r.attempt for name, r in self.nodes.items() if r.state is NodeState.SUCCESS and r.current is not None
        }

    def value_sources(self) -> dict[str, tuple[str, str, int]]:
        """Where the value of each succeeded node is: (run, node, attempt). A reused or seeded
        attempt's value is its source attempt's (no copy is written: bench/reuse.py)."""
        found: dict[str, tuple[str, str, int]] = {}
        for name, attempt in self.succeeded_attempts().items():
            current = self.nodes[name].current
            source = current.reused_from if current is not None else None
            if source is None:
                found[name] = (self.run_id, name, attempt)
            else:
                found[name] = (str(source["run_id"]), str(source["node"]), int(source["attempt"]))
        return found

    def waiting_requests(self) -> dict[str, str]:
        """node -> approval request ID, for attempts waiting on a person."""
        found = {}  # only an approval_requested sets an attempt waiting, and it sets ``asked``
        for name, record in self.nodes.items() if self.asked else ():
            current = record.current
            if record.state is NodeState.RUNNING and current is not None and current.pending_approval:
                found[name] = current.pending_approval
        return found

    def __repr__(self) -> str:
        """One line, whatever the graph's size (asyncio.run reprs it; a generated one took 1.5 ms)."""
        counts = Counter(record.state for record in self.nodes.values())
        shown = ", ".join(sorted(f"{state.value}: {count}" for state, count in counts.items()))
        outcome = f", outcome={self.outcome!r}" if self.outcome else ""
        return f"<RunState {self.run_id} {self.lifecycle.value}{outcome} nodes={{{shown}}}>"

    def refresh_waiting(self) -> None:
        """running <-> waiting: waiting while every running attempt waits for a person."""
        if not self.asked:  # first: O(1), no enum member read (0.2 us each) at every launch and end
            return  # nobody was ever asked in this run: nothing waits, nor ever did (waiting needs a request)
        if self.lifecycle not in (Lifecycle.RUNNING, Lifecycle.WAITING):
            return
        running = [r for r in self.nodes.values() if r.state is NodeState.RUNNING]
        waiting = running and all(r.current is not None and r.current.pending_approval for r in running)
        self.lifecycle = Lifecycle.WAITING if waiting else Lifecycle.RUNNING

    def uncertain_nodes(self) -> list[str]:
        return sorted(
            name
            for name, record in self.nodes.items()
            if record.current is not None and record.current.uncertain and not record.current.abandoned
        )

    def to_json(self, *, nodes: bool = True) -> dict[str, Any]:
        """The snapshot (state.json) as JSON data; without ``nodes`` the ``nodes`` key is left out."""
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "plan_id": self.plan_id,
            "graph_digest": self.graph_digest,
            "workflow": self.workflow,
            "lifecycle": self.lifecycle.value,
            "outcome": self.outcome,
            "owner_pid": self.owner_pid,
            "last_seq": self.last_seq,
            "updated_at": self.updated_at,
            "cancel_pending": list(self.cancel_pending),
            "cancel_acknowledged": list(self.cancel_acknowledged),
            "cancelled": self.cancelled,
            "asked": self.asked,
        }
        if nodes:
            data["nodes"] = {name: record.to_json() for name, record in sorted(self.nodes.items())}
        if self.output is not None:
            data["output"] = self.output
        if self.halted:
            data["halted"] = [dict(h) for h in self.halted]
        if self.open_failures:
            data["open_failures"] = list(self.open_failures)
        if self.damage is not None:
            data["damage"] = self.damage
        if self.budgets:
            data["budgets"] = {scope: dict(limits) for scope, limits in self.budgets.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        return cls(
            run_id=data["run_id"],
            plan_id=data["plan_id"],
            graph_digest=data["graph_digest"],
            workflow=data["workflow"],
            nodes={name: NodeRecord.from_json(rec) for name, rec in data["nodes"].items()},
            lifecycle=Lifecycle(data["lifecycle"]),
            outcome=data.get("outcome"),
            owner_pid=data.get("owner_pid"),
            last_seq=data.get("last_seq", 0),
            updated_at=data.get("updated_at", ""),
            cancel_pending=list(data.get("cancel_pending", [])),
            cancel_acknowledged=list(data.get("cancel_acknowledged", [])),
            cancelled=data.get("cancelled", False),
            asked=data.get("asked", False),
            output=data.get("output"),
            halted=list(data.get("halted", [])),
            open_failures=list(data.get("open_failures", [])),
            damage=data.get("damage"),
            budgets={scope: dict(limits) for scope, limits in data.get("budgets", {}).items()},
        )


# ------------------------------------------------ the fold, one function per kind (model/events.py); other
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
    node.attempts.append(AttemptRecord(number=ev["attempt"], started_at=ev["at"]))
    state.refresh_waiting()


def _node_reused(state: RunState, ev: NodeReused) -> None:
    node = state.nodes.get(ev.get("node", ""))
    if node is None:
        return
    node.state, node.reason = NodeState.RUNNING, ""
    source = {"run_id": ev["source_run"], "node": ev["source_node"], "attempt": ev["source_attempt"]}
    node.attempts.append(AttemptRecord(number=ev["attempt"], started_at=ev["at"], reused_from=source))


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
