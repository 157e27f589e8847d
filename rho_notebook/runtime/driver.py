"""The run driver: applies scheduler decisions, journals every change and awaits executors.

Durability contract:

- ``node_launched`` and everything before it is fsynced before the attempt's process starts, so
  after a crash every attempt that may have run is known (and becomes uncertain if unfinished).
  A remote attempt (``remote``, exec/dask.py) is submitted from its task, after that fsync too.
- A remote attempt whose answer is lost (AttemptUncertain) gets ``attempt_uncertain`` instead of
  a result; the other nodes go on, and the execution ends with ``needs_recovery`` naming it.
- Other records (process_started, node_finished, decisions) are appended at once and fsynced in
  groups: at the latest before the next launch, before a cancel acknowledgement and at completion.
- state.json is an atomic, non-durable snapshot written when the run starts, when a person is
  asked, at most every ``snapshot_interval`` seconds, and at the end. It is a convenience copy:
  status folds the journal itself, and the journal is what recovery trusts.

Failpoints: when the owner process starts with ``RHO_NOTEBOOK_FAILPOINT=name:N`` in its
environment, it SIGKILLs itself the N-th time it reaches the named point (used by the crash tests;
see ``FAILPOINTS``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rho_notebook.errors import AttemptUncertain
from rho_notebook.exec.base import (
    AttemptContext,
    AttemptResult,
    EnvironmentSnapshot,
    Executor,
    UnavailableValue,
    render_template,
)
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.command import process_facts
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.item import item_launch_facts
from rho_notebook.exec.python import python_facts
from rho_notebook.model.agent import agent_launch_facts
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import (
    AgentNode,
    CommandNode,
    Graph,
    ItemNode,
    Node,
    PythonNode,
    ShellNode,
    placement_of,
)
from rho_notebook.model.identity import FileIdentity
from rho_notebook.model.itemrun import stalled_steps
from rho_notebook.model.mapping import RunContext
from rho_notebook.model.run_state import RunState, apply
from rho_notebook.model.state import TERMINAL_STATES, Lifecycle, NodeState, workflow_outcome
from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest, facts_digest, read_request, write_request
from rho_notebook.policy.carried import CarriedApprovals, carries
from rho_notebook.policy.gate import Launch, LaunchGate
from rho_notebook.policy.hooks import HookSpec
from rho_notebook.policy.permission import LaunchDecision, PermissionMode, launch_kind, read_only
from rho_notebook.runtime.approval_wait import wait_for_decision
from rho_notebook.runtime.cancel import pending_cancel_requests, write_ack
from rho_notebook.runtime.checkout import CheckoutLock
from rho_notebook.runtime.reuse import ReuseKeys, Seed, look_up, may_reuse, taken_records, unseeded_records
from rho_notebook.runtime.scheduler import Scheduler, uses_checkout, uses_checkout_alone
from rho_notebook.runtime.wakeup import OwnerControl
from rho_notebook.store.artifacts import ArtifactWriter
from rho_notebook.store.files import atomic_write_json
from rho_notebook.store.ids import new_id
from rho_notebook.store.journal import JournalWriter
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.reuse import ReuseIndex
from rho_notebook.store.runs import RunFolder

__all__ = ["RunDriver", "EventSink", "FAILPOINTS", "failpoint"]

EventSink = Callable[[dict[str, Any]], None]

FAILPOINTS = (
    "before_launch_sync",
    "after_launch_sync",
    "after_process_started",
    "after_finished_append",
    "after_decisions_append",
    "before_snapshot",
    "after_snapshot",
    "before_completed",
    "after_completed",
    "after_cancel_requested",
    "script_step_launched",
    "script_step_finished",
)
_failpoint_counts: dict[str, int] = {}

REQUEST_RESCAN_SECONDS = 0.5
"""The owner re-reads its requests folder at least this often (a poke makes it read at once)."""


_ARMED = os.environ.get("RHO_NOTEBOOK_FAILPOINT", "").partition(":")
"""(point, ":", count) read once at import: failpoints are armed in the environment a test
starts the owner process with (a lookup per call cost five environment reads per node)."""


def failpoint(name: str) -> None:
    point, _, count = _ARMED
    if point != name:
        return
    _failpoint_counts[name] = _failpoint_counts.get(name, 0) + 1
    if _failpoint_counts[name] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def _asked(request: ApprovalRequest, *, timeout: float) -> dict[str, Any]:
    """The ``approval_requested`` record of ``request``."""
    return event(
        EventKind.APPROVAL_REQUESTED,
        request.run_id,
        node=request.node,
        attempt=request.attempt,
        request_id=request.request_id,
        approval=request.kind,
        facts=request.facts,
        facts_sha256=request.facts_sha256,
        timeout_seconds=timeout,
    )


def _rendered_part(node: Node) -> str:
    if isinstance(node, AgentNode) or (isinstance(node, ItemNode) and node.slot == "agent"):
        return "the prompt"
    return "args" if isinstance(node, PythonNode) else "argv"


@dataclass
class RunDriver:
    """Executes one run as its owner. Create it with the replayed state and an open journal."""

    run_id: str
    graph: Graph
    folder: RunFolder
    state: RunState
    journal: JournalWriter
    executors: Mapping[str, Executor]
    workspace: Path
    identities: Mapping[str, FileIdentity]
    layout: StoreLayout
    on_event: EventSink | None = None
    mode: PermissionMode = PermissionMode.AUTO
    checkout: CheckoutLock | None = None
    hooks: Mapping[str, list[HookSpec]] = field(default_factory=dict)
    responder: Callable[[ApprovalRequest], None] | None = None
    """Someone who can answer approval requests now (terminal prompt, notebook widget)."""
    approval_timeout: float = 0.0
    """How long a supervised launch waits when no responder is available, then fails closed."""
    workspace_key: str = ""
    """The run's workspace key: launch approvals carry over within it (empty: nothing carries)."""
    origin: str = "cli"
    """The front end that started the run; runs started through MCP never carry approvals."""
    reuse: bool = True
    """Take a stored success of a reusable node instead of launching it (False: ``run --no-reuse``)."""
    seeded: Mapping[str, Seed | str] = field(default_factory=dict)
    """``try``: node -> its successful attempt in the source run, taken instead of a launch whatever
    its reuse flag (or why there is none: the node then fails with that message)."""
    """Shared with other runs of the same workspace (fair in-process, flock across processes)."""
    snapshot_interval: float = 1.0
    remote: Executor | None = None
    """Where nodes with ``placement = "any"`` (command, shell, Python) run when set, e.g. an
    :class:`~rho_notebook.exec.dask.DaskExecutor`; agent, approval and ``placement = "local"``
    nodes always use ``executors``. The driver closes it (``aclose``) when the run's loop ends."""
    run_fields: Mapping[str, str | None] = field(default_factory=dict)
    """Who started the run (the manifest's initiator, via, client): item-graph mappings read them."""
    outputs: dict[str, Any] = field(default_factory=dict)
    _tasks: dict[asyncio.Task[tuple[str, int, AttemptResult]], str] = field(default_factory=dict)
    _done: deque[asyncio.Task[tuple[str, int, AttemptResult]]] = field(default_factory=deque)
    """Attempt tasks that ended and were not yet journaled, in the order they ended."""
    _rescan: asyncio.TimerHandle | None = None
    _cancels: dict[str, CancelSignal] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _approval_wake: asyncio.Event = field(default_factory=asyncio.Event)
    _last_snapshot: float = 0.0
    _uncertain: dict[str, str] = field(default_factory=dict)
    """Node -> why: remote attempts of this execution whose result is lost (AttemptUncertain)."""
    _known_requests: set[str] = field(default_factory=set)
    _requests_due: bool = True
    _control: OwnerControl | None = None
    scheduler: Scheduler = field(init=False)
    _node_states: dict[str, NodeState] = field(init=False)
    _node_exit_codes: dict[str, int | None] = field(init=False)
    _ready: set[str] = field(init=False)
    _environ: EnvironmentSnapshot = field(init=False)
    artifacts: ArtifactWriter = field(init=False)
    gate: LaunchGate = field(init=False)
    """Mode, hooks, carried approvals and asking a person, for every launch of this run."""
    verified: VerifiedHandles = field(init=False)
    """Frozen files verified once for this run and re-checked per launch (closed at the end)."""
    _keys: ReuseKeys | None = field(init=False, default=None)
    """Reuse keys of this graph; None when no node may be reused."""
    _launch_keys: dict[str, str] = field(init=False, default_factory=dict)
    """Node -> reuse key computed when its current attempt launched (indexed if it succeeds)."""
    _index_pending: list[tuple[str, str, int]] = field(init=False, default_factory=list)
    """(key, node, attempt) of successes whose node_finished is journaled but maybe not yet fsynced."""
    """value.json copies of reused and seeded attempts not yet queued to the artifact writer."""

    def __post_init__(self) -> None:
        self.scheduler = Scheduler(self.graph, remote=self.remote is not None)
        self.artifacts = ArtifactWriter(self.folder.path)
        self.gate = LaunchGate(
            run_id=self.run_id,
            mode=self.mode,
            hooks=self.hooks,
            workspace=self.workspace,
            emit=self._emit,
            carry=self._carry_approval,
            ask=partial(self._decide, kind="launch"),
            responder_present=self.responder is not None,
            approval_timeout=self.approval_timeout,
        )
        self.verified = VerifiedHandles(self.workspace)
        self._environ = EnvironmentSnapshot(os.environ)  # read once: command nodes get the frozen allowlist of it
        self._node_states = {name: record.state for name, record in self.state.nodes.items()}
        self._node_exit_codes = {name: record.exit_code() for name, record in self.state.nodes.items()}
        self._ready = {name for name, st in self._node_states.items() if st is NodeState.READY}
        if self.workspace_key and any(may_reuse(node) for node in self.graph.nodes):
            self._keys = ReuseKeys(self.graph, workspace_key=self.workspace_key, workspace=self.workspace)

    # -- journaling ---------------------------------------------------------------------------------

    def _emit(self, *records: dict[str, Any]) -> None:
        for record in self.journal.append(list(records)):
            apply(self.state, record)
            name = record.get("node")
            if name is not None and name in self._node_states:
                node_record = self.state.nodes[name]
                self._track(name, node_record.state, node_record.exit_code())
            if self.on_event is not None:
                self.on_event(record)

    def _track(self, name: str, new_state: NodeState, exit_code: int | None) -> None:
        """Keep the per-node maps the scheduler reads in step with the state (O(1) per event)."""
        self._node_states[name] = new_state
        self._node_exit_codes[name] = exit_code
        if new_state is NodeState.READY:
            self._ready.add(name)
        else:
            self._ready.discard(name)

    def _snapshot(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_snapshot < self.snapshot_interval:
            return
        failpoint("before_snapshot")
        atomic_write_json(self.folder.state, self.state.to_json(), durable=False, compact=True)
        self._last_snapshot = time.monotonic()
        failpoint("after_snapshot")

    # -- lookups ---------------------------------------------------------------------------------------

    def _output(self, name: str) -> Any:
        return self.outputs.get(name, UNAVAILABLE)

    # -- control ---------------------------------------------------------------------------------------

    def _poke(self) -> None:
        self._requests_due = True
        self._wake.set()
        self._approval_wake.set()

    def _take_cancel_requests(self) -> list[str]:
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
            self._emit(event(EventKind.CANCEL_REQUESTED, self.run_id, request_id=request_id))
            failpoint("after_cancel_requested")
        return fresh

    # -- attempts --------------------------------------------------------------------------------------

    async def _decide(
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
                kind="form" if kind == "node" and "form" in facts else ("node" if kind == "node" else "launch"),
                facts=facts,
                facts_sha256=facts_digest(facts),
                requested_at=time.time(),
            )
            write_request(self.folder.requests, request)
            self._emit(_asked(request, timeout=timeout))
            self.journal.sync()
            self._snapshot(force=True)
        else:
            request = read_request(self.folder.requests, request_id)
            if self.on_event is not None:  # say again who is asked (not journaled: it was, once)
                self.on_event({**_asked(request, timeout=timeout), "rejoined": True})
        if self.responder is not None:
            self.responder(request)
        decision = await wait_for_decision(
            self.folder.requests, request, timeout=timeout, cancel=cancel, wake=self._approval_wake
        )
        if isinstance(decision, ApprovalDecision):
            self._emit(
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
            carried = self._carried_approvals()
            if carried is not None and request.kind != "form":
                carried.record(request, decision)
        return decision

    def _carried_approvals(self) -> CarriedApprovals | None:
        """Where this run's launch approvals carry over, or None when they do not (policy/carried.py)."""
        if not self.workspace_key or not carries(self.origin):
            return None
        return CarriedApprovals(self.layout, self.workspace_key)

    def _carry_approval(self, name: str, number: int, facts: dict[str, Any]) -> bool:
        """Whether a person approved exactly these launch facts in this workspace before; if so,
        journal ``approval_carried`` (durably, before the launch) instead of asking again."""
        carried = self._carried_approvals()
        digest = facts_digest(facts)
        found = None if carried is None else carried.find(digest)
        if found is None:
            return False
        self._emit(
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

    def _launch_facts(self, node: Node) -> dict[str, Any]:
        """What a person or a hook decides on before this node starts."""
        if isinstance(node, (CommandNode, ShellNode)):
            return process_facts(node, self._output)
        if isinstance(node, PythonNode):
            return python_facts(node, self.graph, self._output)
        if isinstance(node, ItemNode):
            return item_launch_facts(node, self.graph, self._output, RunContext(self.run_id, **self.run_fields))
        if isinstance(node, AgentNode):
            prompt = render_template(node.prompt, self._output)
            return agent_launch_facts(self.graph.agent(node.agent), access=node.access, prompt=prompt)
        return {}

    async def _attempt(
        self, node: Node, number: int, cancel: asyncio.Event, *, resume_request: str | None = None
    ) -> tuple[str, int, AttemptResult]:
        files = self.artifacts.files(self.folder.attempt_dir(node.name, number))

        async def started(pid: int) -> None:
            self._emit(event(EventKind.PROCESS_STARTED, self.run_id, node=node.name, attempt=number, pid=pid))
            failpoint("after_process_started")

        async def output(stream: str, chunk: bytes) -> None:
            if self.on_event is not None:
                self.on_event(
                    event(
                        EventKind.OUTPUT_CHUNK,
                        self.run_id,
                        node=node.name,
                        attempt=number,
                        stream=stream,
                        bytes=len(chunk),
                    )
                )

        async def ask(facts: dict[str, Any], timeout: float) -> ApprovalDecision | None | str:
            return await self._decide(
                node.name, number, kind="node", facts=facts, timeout=timeout, cancel=cancel, request_id=resume_request
            )

        def finish(state: NodeState, message: str) -> tuple[str, int, AttemptResult]:
            return node.name, number, AttemptResult(state=state, message=message)

        launch = Launch(
            kind=launch_kind(node),
            node=node.name,
            attempt=number,
            read_only=read_only(node),
            approval_seconds=float(node.timeout_seconds),
        )
        remote = self.remote is not None and placement_of(node) == "any"
        executor = self.remote if remote else self.executors.get(node.kind)
        if executor is None:
            return finish(NodeState.FAILURE, f"no executor for {node.kind} nodes in this version of rho_notebook")
        ctx = AttemptContext(
            run_id=self.run_id,
            node=node,
            attempt=number,
            attempt_dir=files.path,
            files=files,
            workspace=self.workspace,
            identities=self.identities,
            environment=self.graph.environment,
            outputs=self._output,
            cancel=cancel,
            on_started=started,
            on_output=output if self.on_event is not None else None,
            request_approval=ask,
            source_environ=self._environ,
            verified=self.verified,
            graph=self.graph,
            run_fields=self.run_fields,
        )
        facts: dict[str, Any] | None = None
        if self.gate.needs_facts(launch) or (
            isinstance(node, AgentNode) and self.gate.policy(launch) is not LaunchDecision.DENY
        ):  # an agent's prompt is rendered here, so a missing value fails it before it starts
            try:
                facts = self._launch_facts(node)
            except UnavailableValue as err:
                return finish(NodeState.FAILURE, f"cannot render {_rendered_part(node)}: {err}")
        refusal = await self.gate.admit(launch, facts, cancel=cancel, resume_request=resume_request)
        if refusal is not None:
            return finish(refusal.state, refusal.message)
        try:
            if self.checkout is None or not uses_checkout(node) or (remote and self.graph.checkout == "shared"):
                # a shared checkout: each worker has its own copy, remote nodes take no cross-host lock
                result = await executor.execute(ctx)
            elif not uses_checkout_alone(node):
                async with self.checkout.read():
                    result = await executor.execute(ctx)
            else:
                async with self.checkout.write():
                    result = await executor.execute(ctx)
        except AttemptUncertain as err:  # no result to journal: the attempt stays uncertain
            self._uncertain[node.name] = err.message
            return node.name, number, AttemptResult(state=NodeState.RUNNING, message=err.message)
        except Exception as err:  # an executor bug must end the node, not the run
            result = AttemptResult(state=NodeState.FAILURE, message=f"executor error: {type(err).__name__}: {err}")
        refusal = await self.gate.review(launch, facts, state=result.state, exit=result.exit)
        if refusal is not None:
            result = AttemptResult(
                state=refusal.state, message=refusal.message, exit=result.exit, artifacts=result.artifacts
            )
        return node.name, number, result

    def _launch(self, names: list[str]) -> None:
        records = []
        for name in names:
            number = self.state.nodes[name].attempt + 1
            records.append(event(EventKind.NODE_LAUNCHED, self.run_id, node=name, attempt=number))
        self._emit(*records)
        failpoint("before_launch_sync")
        if not all(isinstance(node := self.graph_nodes[name], ItemNode) and node.pure for name in names):
            self.journal.sync()  # a launch with effects outside the run is durable before it starts
        failpoint("after_launch_sync")
        self._record_reusable()
        for name in names:
            cancel = CancelSignal()
            self._cancels[name] = cancel
            number = self.state.nodes[name].attempt
            self._start_attempt(name, self._attempt(self.graph_nodes[name], number, cancel))

    # -- reuse ------------------------------------------------------------------------------------------

    def _take_stored(self, names: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
        """Of the nodes the scheduler would launch, those that are seeded or whose reuse key has a
        verified entry in the reuse index, and the records (not yet journaled) that finish them
        without a launch; the keys of the others are remembered for the index."""
        seeded = [name for name in names if name in self.seeded]
        candidates = [
            name
            for name in names
            if name not in self.seeded
            and may_reuse(self.graph_nodes[name])
            and all(self._node_states[need] is NodeState.SUCCESS for need in self.graph_nodes[name].needs)
        ]
        # Looked up on the loop: a few small reads per node. A thread hop per launch decision
        # cost 2.5 ms a node in bench/reuse.py (GIL hand-offs), the reads themselves 0.1 ms.
        found = (
            look_up(
                self._keys,
                candidates,
                nodes=self.graph_nodes,
                outputs=self._output,
                index=ReuseIndex(self.layout) if self.reuse else None,
                workspace_key=self.workspace_key,
            )
            if candidates
            else {}
        )
        records: list[dict[str, Any]] = []
        taken: list[str] = []
        for name in seeded:
            taken.append(name)
            records.extend(self._seeded_records(name, self.seeded[name]))
        for name in candidates:
            if name not in found:
                continue
            key, hit, value = found[name]
            if hit is None:
                self._launch_keys[name] = key
                continue
            number = self.state.nodes[name].attempt + 1
            source = hit.entry
            self._store_value(name, number, hit.value_bytes, value)
            records.extend(
                taken_records(
                    self.run_id,
                    name,
                    number,
                    (source.run_id, source.node, source.attempt),
                    key=key,
                    message=f"reused from run {source.run_id} (node {source.node}, attempt {source.attempt})",
                )
            )
            taken.append(name)
        return taken, records

    def _seeded_records(self, name: str, seed: Seed | str) -> list[dict[str, Any]]:
        number = self.state.nodes[name].attempt + 1
        if isinstance(seed, str):
            return unseeded_records(self.run_id, name, number, seed)
        value: Any = UNAVAILABLE if seed.value_bytes is None else json.loads(seed.value_bytes)
        self._store_value(name, number, seed.value_bytes, value)
        return taken_records(
            self.run_id,
            name,
            number,
            (seed.run_id, seed.node, seed.attempt),
            key=None,
            message=f"taken from run {seed.run_id} (node {seed.node}, attempt {seed.attempt}) for this try",
        )

    def _store_value(self, name: str, number: int, data: bytes | None, value: Any) -> None:
        """A taken value is this attempt's output. No copy is written: readers find it in the source
        attempt the journal names (``RunState.value_sources``); creating an attempt folder per
        reused node cost more than the rest of reuse together (bench/reuse.py)."""
        if data is None or value is UNAVAILABLE:
            return
        self.outputs[name] = value

    def _record_reusable(self) -> None:
        """Index the successes whose node_finished is now fsynced (call right after a journal sync):
        an entry never names an attempt the journal does not prove succeeded."""
        if not self._index_pending:
            return
        index = ReuseIndex(self.layout)
        for key, name, number in self._index_pending:
            self.artifacts.submit(
                index.record_attempt,
                key,
                run_id=self.run_id,
                node=name,
                attempt=number,
                workspace_key=self.workspace_key,
            )
        self._index_pending.clear()

    def _running_names(self) -> list[str]:
        return list(self._tasks.values())

    def _rejoin_waiting(self) -> None:
        """Attempts that were waiting for a person when the last owner stopped wait again."""
        for name, request_id in sorted(self.state.waiting_requests().items()):
            cancel = CancelSignal()
            self._cancels[name] = cancel
            number = self.state.nodes[name].attempt
            self._start_attempt(name, self._attempt(self.graph_nodes[name], number, cancel, resume_request=request_id))
        self.state.refresh_waiting()

    def _finish(self, name: str, number: int, result: AttemptResult) -> None:
        self._cancels.pop(name, None)
        if name in self._uncertain and result.state is NodeState.RUNNING:
            self._emit(
                event(EventKind.ATTEMPT_UNCERTAIN, self.run_id, node=name, attempt=number, message=result.message)
            )
            return
        if result.value is not UNAVAILABLE and result.state is NodeState.SUCCESS:
            self.outputs[name] = result.value
            node = self.graph_nodes[name]
            if isinstance(node, ItemNode) and node.step_kind == "output":
                self._emit(event(EventKind.SCRIPT_OUTPUT, self.run_id, value=result.value))
        key = self._launch_keys.pop(name, None)
        if key is not None and result.state is NodeState.SUCCESS:
            self._index_pending.append((key, name, number))
        self._emit(
            event(
                EventKind.NODE_FINISHED,
                self.run_id,
                node=name,
                attempt=number,
                state=result.state.value,
                exit=result.exit,
                message=result.message,
            )
        )
        failpoint("after_finished_append")

    # -- the loop --------------------------------------------------------------------------------------

    @property
    def graph_nodes(self) -> dict[str, Node]:
        return self.scheduler.nodes

    async def execute(self, *, resumed: bool) -> RunState:
        """Run until every node is terminal or the run is cancelled; returns the final state."""
        self._control = OwnerControl(self.run_id, self._poke)
        await self._control.start()
        self._rescan = asyncio.get_running_loop().call_later(REQUEST_RESCAN_SECONDS, self._rescan_soon)
        try:
            # not fsynced on its own: the first launch, approval request or completion syncs it
            # (a run lost before any of those never started anything)
            self._emit(event(EventKind.RUN_STARTED, self.run_id, pid=os.getpid(), resumed=resumed))
            self._snapshot(force=True)
            self._rejoin_waiting()
            await self._loop()
        finally:
            if self._rescan is not None:
                self._rescan.cancel()
            await self._control.close()
            self.verified.close()
            closing = getattr(self.remote, "aclose", None)
            if closing is not None:
                await closing()
            if self.checkout is not None:
                self.checkout.close_idle()
            await self.artifacts.aclose()
        return self.state

    async def _loop(self) -> None:
        dirty: set[str] | None = None
        cancelling = False
        requests: list[str] = []
        while True:
            fresh = self._take_cancel_requests()
            if fresh:
                requests.extend(fresh)
                if not cancelling:
                    cancelling = True
                    for cancel in self._cancels.values():
                        cancel.set()
            decision = self.scheduler.decide(
                self._node_states,
                exit_codes=self._node_exit_codes,
                outputs=self._output,
                launching=not cancelling,
                dirty=dirty,
                ready=self._ready,
                running=self._running_names(),
            )
            dirty = set()
            decided = []
            for name, new_state, reason in decision.decided:
                kind = {NodeState.READY: EventKind.NODE_READY, NodeState.SKIPPED: EventKind.NODE_SKIPPED}.get(
                    new_state, EventKind.NODE_BLOCKED
                )
                decided.append(
                    event(kind, self.run_id, node=name, reason=reason)
                    if reason
                    else event(kind, self.run_id, node=name)
                )
            launches = decision.launches
            taken: list[str] = []
            stored: list[dict[str, Any]] = []
            if launches and (self._keys is not None or self.seeded):
                taken, stored = self._take_stored(launches)
            if decided or stored:
                self._emit(*decided, *stored)  # one journal write for the decisions and the reused nodes
                if decided:
                    failpoint("after_decisions_append")
            if taken:
                self._wake.set()  # their children are decided next, even while other attempts run
                for name in taken:
                    dirty.update(self.scheduler.children[name])
                launches = [name for name in launches if name not in taken]
            if launches:
                self._launch(launches)
            if not self._tasks:
                if cancelling or requests:
                    await self._settle()
                    self._finish_cancellation(requests)
                    return
                if not decision.launches and not decision.decided:
                    # nothing changed and nothing runs: every node is terminal (or blocked for good).
                    # No O(nodes) "all terminal?" test here: after reused nodes this point is
                    # reached once per node, and one more empty pass ends the run as well.
                    await self._settle()
                    if self._uncertain:
                        self._needs_recovery()
                    else:
                        self._complete()
                    return
                continue
            self._snapshot()
            if not self._done and not self._wake.is_set():
                await self._wake.wait()  # an attempt ended, a poke, or the rescan timer
            self._wake.clear()
            while self._done:
                attempt_task = self._done.popleft()
                name = self._tasks.pop(attempt_task)
                finished_name, number, result = attempt_task.result()
                self._finish(finished_name, number, result)
                dirty.update(self.scheduler.children[name])

    def _start_attempt(self, name: str, attempt: Awaitable[tuple[str, int, AttemptResult]]) -> None:
        task = asyncio.ensure_future(attempt)
        self._tasks[task] = name
        task.add_done_callback(self._attempt_ended)

    def _attempt_ended(self, task: asyncio.Task[tuple[str, int, AttemptResult]]) -> None:
        self._done.append(task)
        self._wake.set()

    def _rescan_soon(self) -> None:
        """Every REQUEST_RESCAN_SECONDS: re-read the requests folder even without a poke."""
        self._requests_due = True
        self._wake.set()
        self._rescan = asyncio.get_running_loop().call_later(REQUEST_RESCAN_SECONDS, self._rescan_soon)

    async def _settle(self) -> None:
        """Before the run ends: index the last successes (after fsyncing their records), then
        wait for every queued file."""
        if self._index_pending:
            self.journal.sync()
            self._record_reusable()
        await self._settle_artifacts()

    async def _settle_artifacts(self) -> None:
        """Every queued artifact is on disk before the run can be seen completed."""
        errors = await self.artifacts.drain()
        if errors:
            self._emit(event(EventKind.ARTIFACT_FAILED, self.run_id, errors=errors[:20]))

    def _finish_cancellation(self, requests: list[str]) -> None:
        resets = [
            event(EventKind.NODE_RESET, self.run_id, node=name, reason="run cancelled before launch")
            for name, record in sorted(self.state.nodes.items())
            if record.state is NodeState.READY
        ]
        if resets:
            self._emit(*resets)
        outcome = "cancellation"
        failpoint("before_completed")
        self._emit(event(EventKind.RUN_COMPLETED, self.run_id, outcome=outcome))
        self.journal.sync()
        failpoint("after_completed")
        for request_id in requests:
            self._emit(event(EventKind.CANCEL_ACKNOWLEDGED, self.run_id, request_id=request_id))
        self.journal.sync()
        for request_id in requests:
            write_ack(self.folder.requests, request_id, {"lifecycle": Lifecycle.COMPLETED.value, "outcome": outcome})
            if self._control is not None:
                self._control.acknowledge(request_id)
        self._snapshot(force=True)

    def _needs_recovery(self) -> None:
        """End an execution in which remote attempts became uncertain: ``needs_recovery`` names
        them (durably), so that resume applies the recovery rules (``--recover-uncertain``)."""
        self._emit(event(EventKind.NEEDS_RECOVERY, self.run_id, nodes=sorted(self._uncertain)))
        self.journal.sync()
        self._snapshot(force=True)

    def _complete(self) -> None:
        states = [(record.state, self.graph_nodes[name].allow_failure) for name, record in self.state.nodes.items()]
        if any(s not in TERMINAL_STATES for s, _ in states):
            outcome = "blocked"
        else:
            stalled = self.graph.items is not None and bool(
                stalled_steps(self.graph_nodes, self._node_states, self._output)
            )
            outcome = workflow_outcome(states, stalled=stalled).value
        failpoint("before_completed")
        self._emit(event(EventKind.RUN_COMPLETED, self.run_id, outcome=outcome))
        self.journal.sync()
        failpoint("after_completed")
        self._snapshot(force=True)
