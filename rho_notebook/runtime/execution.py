"""One execution of a run, whatever its form: what every run needs besides where its work comes from.

A run's work comes from a static graph (the DAG loop, :mod:`rho_notebook.runtime.driver`: Starlark
graphs and item graphs, driven by the pure scheduler) or from a stream of steps over the channel
(the channel loop, :mod:`rho_notebook.runtime.script_driver`: scripts and flows). Both loops hold
one :class:`Execution` (composition, not a base class), which owns:

- the **journal and snapshot**: :meth:`Execution.emit` appends records, folds them into the state
  and keeps the per-node maps the scheduler reads (:meth:`Execution.track`); state.json is an
  atomic, non-durable snapshot written at most every ``snapshot_interval`` seconds
  (:meth:`Execution.snapshot`), and forced when the run starts, a person is asked, and at the end;
- **cancel requests**: read when a poke says so or every :data:`REQUEST_RESCAN_SECONDS`
  (:meth:`Execution.take_cancel_requests`), and the end of a cancelled run
  (:meth:`Execution.finish_cancellation`: resets, ``run_completed``, then the acknowledgements);
- the **launch gate** (:class:`~rho_notebook.policy.gate.LaunchGate`) with its carried approvals and
  asking a person (:meth:`Execution.decide`);
- **completion and teardown**: queued artifacts settled, ``needs_recovery`` or ``run_completed``
  journaled durably, then the owner's control socket, verified handles, checkout and artifact
  writer closed (:meth:`Execution.close`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import orjson

from rho_notebook.exec.base import EnvironmentSnapshot
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import Graph
from rho_notebook.model.identity import FileIdentity
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest, facts_digest, read_request, write_request
from rho_notebook.policy.carried import CarriedApprovals, carries
from rho_notebook.policy.gate import LaunchGate
from rho_notebook.policy.hooks import HookSpec
from rho_notebook.policy.permission import PermissionMode
from rho_notebook.runtime.approval_wait import wait_for_decision
from rho_notebook.runtime.cancel import pending_cancel_requests, write_ack
from rho_notebook.runtime.checkout import CheckoutLock
from rho_notebook.runtime.failpoints import failpoint
from rho_notebook.runtime.spend import SpendGuard
from rho_notebook.runtime.wakeup import OwnerControl
from rho_notebook.store.artifacts import ArtifactWriter
from rho_notebook.store.files import atomic_write, json_bytes
from rho_notebook.store.ids import new_id
from rho_notebook.store.journal import JournalWriter
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunFolder

__all__ = ["REQUEST_RESCAN_SECONDS", "EventSink", "Execution", "snapshot_bytes"]

EventSink = Callable[[dict[str, Any]], None]

REQUEST_RESCAN_SECONDS = 0.5
"""The owner re-reads its requests folder at least this often (a poke makes it read at once)."""


def _asked(request: ApprovalRequest, *, timeout: float) -> dict[str, Any]:
    """The ``approval_requested`` record of ``request``."""
    return event(EventKind.APPROVAL_REQUESTED, request.run_id, **request.record_fields(), timeout_seconds=timeout)


_UNTOUCHED = json_bytes(NodeRecord().to_json(), compact=True).rstrip(b"\n")
_SLOT = "\x00"
_SLOT_JSON = b'"\\u0000"'
"""A node's placeholder while a snapshot is encoded, and its encoding (a control character is
always escaped, so this text can only come from a value that is just the placeholder)."""


def snapshot_bytes(state: RunState) -> bytes:
    """state.json's bytes: what ``json_bytes(state.to_json(), compact=True)`` writes (sorted keys,
    UTF-8, no spaces, a newline), encoded by orjson in a tenth of the time (the last snapshot of a
    500-node fan took 4 ms). Two spellings differ, never the data: a small or large float may be
    written otherwise (``0.00001`` for ``1e-05``), and one that is not finite is ``null`` (json
    writes ``NaN``, which is not JSON). What orjson refuses (an integer past 64 bits, a key that
    is not a string) is encoded by json. While no node has started (the snapshot a run starts
    with) every node's part is the same text: spliced in instead of building and encoding
    hundreds of equal records."""
    if all(record.untouched for record in state.nodes.values()):
        data = state.to_json(nodes=False)
        data["nodes"] = dict.fromkeys(state.nodes, _SLOT)
        encoded = _compact_json(data)
        if encoded.count(_SLOT_JSON) == len(state.nodes):  # else some name or field holds a NUL
            return encoded.replace(_SLOT_JSON, _UNTOUCHED)
    return _compact_json(state.to_json())


def _compact_json(data: dict[str, Any]) -> bytes:
    """``data`` as :func:`snapshot_bytes` writes it."""
    try:
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return json_bytes(data, compact=True)


def _request_kind(kind: str, facts: dict[str, Any]) -> Literal["node", "launch", "form"]:
    """The approval request kind: a node's form, a node's own approval, or a launch."""
    if kind != "node":
        return "launch"
    return "form" if "form" in facts else "node"


@dataclass(kw_only=True)
class Execution:
    """Journal, snapshot, cancel, gate, completion and teardown of one execution of a run.

    Create it with the replayed state and an open journal; a loop calls :meth:`open` first and
    :meth:`close` last."""

    run_id: str
    graph: Graph
    folder: RunFolder
    state: RunState
    journal: JournalWriter
    workspace: Path
    identities: Mapping[str, FileIdentity]
    layout: StoreLayout
    on_event: EventSink | None = None
    mode: PermissionMode = PermissionMode.AUTO
    checkout: CheckoutLock | None = None
    """Shared with other runs of the same workspace (fair in-process, flock across processes)."""
    hooks: Mapping[str, list[HookSpec]] = field(default_factory=dict)
    responder: Callable[[ApprovalRequest], None] | None = None
    """Someone who can answer approval requests now (terminal prompt, notebook widget)."""
    approval_timeout: float = 0.0
    """How long a supervised launch waits when nobody attends the run, then fails closed."""
    attended: Callable[[], bool] | None = None
    """Whether a person can answer requests now (None: whenever there is a ``responder``). A
    detached owner asks its followers (:class:`~rho_notebook.store.run_locks.FollowLock`)."""
    workspace_key: str = ""
    """The run's workspace key: launch approvals carry over within it (empty: nothing carries)."""
    origin: str = "cli"
    """The front end that started the run; runs started through MCP never carry approvals."""
    snapshot_interval: float = 1.0
    spend_guard: SpendGuard | None = None
    """The run's budgets, asked before each model call (None: no budget)."""
    cancels: dict[str, CancelSignal] = field(default_factory=dict)
    """Node or step key -> the cancel signal of its running attempt."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the loop has something to look at: an attempt ended, a poke, the rescan timer."""
    approval_wake: asyncio.Event = field(default_factory=asyncio.Event)
    node_states: dict[str, NodeState] = field(init=False)
    exit_codes: dict[str, int | None] = field(init=False)
    ready: set[str] = field(init=False)
    """Nodes in state READY (the scheduler reads these three maps, kept in step by :meth:`track`)."""
    environ: EnvironmentSnapshot = field(init=False)
    artifacts: ArtifactWriter = field(init=False)
    gate: LaunchGate = field(init=False)
    """Mode, hooks, carried approvals and asking a person, for every launch of this run."""
    verified: VerifiedHandles = field(init=False)
    """Frozen files verified once for this run and re-checked per launch (closed at the end)."""
    _last_snapshot: float = 0.0
    _known_requests: set[str] = field(default_factory=set)
    _requests_due: bool = True
    _control: OwnerControl | None = None
    _rescan: asyncio.TimerHandle | None = None

    def __post_init__(self) -> None:
        self.artifacts = ArtifactWriter(self.folder.path)
        self.gate = LaunchGate(
            run_id=self.run_id,
            mode=self.mode,
            hooks=self.hooks,
            workspace=self.workspace,
            emit=self.emit,
            carry=self.carry_approval,
            ask=partial(self.decide, kind="launch"),
            attended=self.attended if self.attended is not None else lambda: self.responder is not None,
            approval_timeout=self.approval_timeout,
        )
        self.verified = VerifiedHandles(self.workspace)
        self.environ = EnvironmentSnapshot(os.environ)  # read once: command nodes get the frozen allowlist of it
        self.node_states = {name: record.state for name, record in self.state.nodes.items()}
        self.exit_codes = {name: record.exit_code() for name, record in self.state.nodes.items()}
        self.ready = {name for name, st in self.node_states.items() if st is NodeState.READY}

    # -- journaling ---------------------------------------------------------------------------------

    def emit(self, *records: dict[str, Any], later: bool = False) -> None:
        """Append ``records`` (one write; ``later``: held for the turn's next write, see
        :meth:`JournalWriter.append`), fold them into the state and pass them to ``on_event``."""
        state, node_states, exit_codes, ready, on_event = (
            self.state,
            self.node_states,
            self.exit_codes,
            self.ready,
            self.on_event,
        )
        nodes = state.nodes
        for record in self.journal.append(records, later=later):
            apply(state, record)
            name = record.get("node")
            if name is not None and name in node_states:  # what track() does, inline: once per record
                node_record = nodes[name]
                node_states[name] = new_state = node_record.state
                exit_codes[name] = node_record.exit_code()
                if new_state is NodeState.READY:
                    ready.add(name)
                else:
                    ready.discard(name)
            if on_event is not None:
                on_event(record)

    def track(self, name: str, new_state: NodeState, exit_code: int | None) -> None:
        """Keep the per-node maps the scheduler reads in step with the state (O(1) per event)."""
        self.node_states[name] = new_state
        self.exit_codes[name] = exit_code
        if new_state is NodeState.READY:
            self.ready.add(name)
        else:
            self.ready.discard(name)

    def snapshot(self, *, force: bool = False) -> None:
        """Write state.json when ``snapshot_interval`` passed since the last one (or ``force``)."""
        now = time.monotonic()
        if not force and now - self._last_snapshot < self.snapshot_interval:
            return
        failpoint("before_snapshot")
        atomic_write(self.folder.state, snapshot_bytes(self.state), durable=False)
        self._last_snapshot = time.monotonic()
        failpoint("after_snapshot")

    def started(self, *, resumed: bool) -> None:
        """Journal ``run_started`` (not fsynced on its own: the first launch, approval request or
        completion syncs it; a run lost before any of those never started anything)."""
        self.emit(event(EventKind.RUN_STARTED, self.run_id, pid=os.getpid(), resumed=resumed))

    # -- control ---------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Listen for pokes and start the rescan timer."""
        self._control = OwnerControl(self.run_id, self.poke)
        await self._control.start()
        self._rescan = asyncio.get_running_loop().call_later(REQUEST_RESCAN_SECONDS, self._rescan_soon)

    def poke(self) -> None:
        self._requests_due = True
        self.wake.set()
        self.approval_wake.set()

    def _rescan_soon(self) -> None:
        """Every REQUEST_RESCAN_SECONDS: re-read the requests folder even without a poke."""
        self._requests_due = True
        self.wake.set()
        self._rescan = asyncio.get_running_loop().call_later(REQUEST_RESCAN_SECONDS, self._rescan_soon)

    def take_cancel_requests(self) -> list[str]:
        """New cancel requests, read when a poke said so or the rescan timer fired (every
        ``REQUEST_RESCAN_SECONDS``), so a lost poke delays a cancel by at most that much."""
        if not self._requests_due:
            return []
        self._requests_due = False
        fresh = pending_cancel_requests(
            self.folder.requests, self._known_requests | set(self.state.cancel_acknowledged)
        )
        for request_id in fresh:
            self._known_requests.add(request_id)
            self.emit(event(EventKind.CANCEL_REQUESTED, self.run_id, request_id=request_id))
            failpoint("after_cancel_requested")
        return fresh

    def cancel_running(self) -> None:
        """Stop every running attempt."""
        for cancel in self.cancels.values():
            cancel.set()

    # -- asking a person ----------------------------------------------------------------------------------

    async def decide(
        self,
        name: str,
        number: int,
        *,
        kind: str,
        facts: dict[str, Any],
        timeout: float,
        cancel: asyncio.Event,
        request_id: str | None,
    ) -> ApprovalDecision | None | str:
        """Ask a person about attempt ``number`` of node ``name`` (a script run asks for the script
        and its steps too); returns their decision, None on timeout, or "cancelled"."""
        if request_id is None:
            request = ApprovalRequest(
                request_id=new_id(),
                run_id=self.run_id,
                node=name,
                attempt=number,
                kind=_request_kind(kind, facts),
                facts=facts,
                facts_sha256=facts_digest(facts),
                requested_at=time.time(),
            )
            write_request(self.folder.requests, request)
            self.emit(_asked(request, timeout=timeout))
            self.journal.sync()
            self.snapshot(force=True)
        else:
            request = read_request(self.folder.requests, request_id)
            if self.on_event is not None:  # say again who is asked (not journaled: it was, once)
                self.on_event({**_asked(request, timeout=timeout), "rejoined": True})
        if self.responder is not None:
            self.responder(request)
        decision = await wait_for_decision(
            self.folder.requests, request, timeout=timeout, cancel=cancel, wake=self.approval_wake
        )
        if isinstance(decision, ApprovalDecision):
            self._decided(name, number, request, decision)
        return decision

    def _decided(self, name: str, number: int, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        """Journal a person's decision durably; a launch approval carries over in this workspace."""
        self.emit(
            event(
                EventKind.APPROVAL_DECIDED,
                self.run_id,
                node=name,
                attempt=number,
                request_id=request.request_id,
                decision=decision.decision,
                by=decision.by,
                comment=decision.comment,
                decided_at=decision.at,
                via=decision.via,
                facts_sha256=request.facts_sha256,
                **({"answer": decision.answer} if decision.answer is not None else {}),
            )
        )
        self.journal.sync()
        carried = self.carried_approvals()
        if carried is not None and request.kind != "form":
            carried.record(request, decision)

    def carried_approvals(self) -> CarriedApprovals | None:
        """Where this run's launch approvals carry over, or None when they do not (policy/carried.py)."""
        if not self.workspace_key or not carries(self.origin):
            return None
        return CarriedApprovals(self.layout, self.workspace_key)

    def carry_approval(self, name: str, number: int, facts: dict[str, Any]) -> bool:
        """Whether a person approved exactly these launch facts in this workspace before; if so,
        journal ``approval_carried`` (durably, before the launch) instead of asking again."""
        carried = self.carried_approvals()
        digest = facts_digest(facts)
        found = None if carried is None else carried.find(digest)
        if found is None:
            return False
        self.emit(
            event(
                EventKind.APPROVAL_CARRIED,
                self.run_id,
                node=name,
                attempt=number,
                facts_sha256=digest,
                from_run=found.run_id,
                by=found.by,
                decided_at=found.decided_at,
            )
        )
        self.journal.sync()
        return True

    # -- the end ---------------------------------------------------------------------------------------

    async def settle_artifacts(self) -> None:
        """Every queued artifact is on disk before the run can be seen completed."""
        errors = await self.artifacts.drain()
        if errors:
            self.emit(event(EventKind.ARTIFACT_FAILED, self.run_id, errors=errors[:20]))

    def finish_cancellation(self, requests: list[str]) -> None:
        """End a cancelled run: READY nodes reset, ``run_completed`` (durable), then each request
        acknowledged in the journal (durable) and in the requests folder."""
        resets = [
            event(EventKind.NODE_RESET, self.run_id, node=name, reason="run cancelled before launch")
            for name, record in sorted(self.state.nodes.items())
            if record.state is NodeState.READY
        ]
        if resets:
            self.emit(*resets)
        outcome = "cancellation"
        failpoint("before_completed")
        self.emit(event(EventKind.RUN_COMPLETED, self.run_id, outcome=outcome))
        self.journal.sync()
        failpoint("after_completed")
        for request_id in requests:
            self.emit(event(EventKind.CANCEL_ACKNOWLEDGED, self.run_id, request_id=request_id))
        self.journal.sync()
        for request_id in requests:
            write_ack(self.folder.requests, request_id, {"lifecycle": Lifecycle.COMPLETED.value, "outcome": outcome})
            if self._control is not None:
                self._control.acknowledge(request_id)
        self.snapshot(force=True)

    def needs_recovery(self, nodes: list[str]) -> None:
        """End an execution in which remote attempts became uncertain: ``needs_recovery`` names
        them (durably), so that resume applies the recovery rules (``--recover-uncertain``)."""
        self.emit(event(EventKind.NEEDS_RECOVERY, self.run_id, nodes=nodes))
        self.journal.sync()
        self.snapshot(force=True)

    def halted(self, steps: list[dict[str, str]]) -> None:
        """End an execution that needs a person's decision about ``steps`` (``run_halted``)."""
        self.emit(event(EventKind.RUN_HALTED, self.run_id, steps=steps))
        self.journal.sync()
        self.snapshot(force=True)

    def complete(self, outcome: str, message: str = "") -> None:
        """Journal ``run_completed`` with ``outcome`` (and ``message`` when there is one), durably."""
        failpoint("before_completed")
        fields = {"message": message} if message else {}
        self.emit(event(EventKind.RUN_COMPLETED, self.run_id, outcome=outcome, **fields))
        self.journal.sync()
        failpoint("after_completed")
        self.snapshot(force=True)

    async def close(self, *, closing: Callable[[], Awaitable[None]] | None = None) -> None:
        """Teardown, whatever happened: the rescan timer, the control socket, the verified
        handles, ``closing`` (the DAG loop's remote executor), the checkout and the artifact writer."""
        if self._rescan is not None:
            self._rescan.cancel()
        if self._control is not None:
            await self._control.close()
        self.verified.close()
        if closing is not None:
            await closing()
        if self.checkout is not None:
            self.checkout.close_idle()
        await self.artifacts.aclose()
