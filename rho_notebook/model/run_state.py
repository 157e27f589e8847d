"""The durable state of one run, rebuilt from its journal by a pure reducer.

The journal (events.jsonl) is the source of truth; state.json is an atomically written snapshot
of :class:`RunState` for cheap reads. The reducer, one small function per record kind, is
:mod:`rho_notebook.model.run_fold` (:func:`~rho_notebook.model.run_fold.apply`,
:func:`~rho_notebook.model.run_fold.replay`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rho_notebook.model.state import Lifecycle, NodeState, node_state

if TYPE_CHECKING:  # types only: status folds a journal without the graph's models or the record types
    from rho_notebook.model.graph import Graph

__all__ = ["AttemptRecord", "NodeRecord", "RunState"]


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
    fork_copy: dict[str, Any] | None = None
    """A fork's copy journaled in place of a launch (docs/fork.md): ``{"taken_from": {run, node,
    attempt}}`` or ``{"edited": {by, via, value_digest}}``. It made no model call, whatever the
    copied exit record says."""

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
        if self.fork_copy is not None:
            data["fork_copy"] = self.fork_copy
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
