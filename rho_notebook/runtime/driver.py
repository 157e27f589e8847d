"""The DAG loop: applies scheduler decisions to a frozen graph, journals every change and awaits executors.

Starlark graphs and item graphs run here; what every run needs whatever its form (journal and
snapshot, cancel, the launch gate, completion, teardown) is the :class:`~rho_notebook.runtime.
execution.Execution` the driver holds. Which launches take a stored result instead (reuse, ``try``
seeds) is decided by :mod:`rho_notebook.runtime.replay`.

Durability contract:

- ``node_launched`` and everything before it is fsynced before the attempt's process starts, so
  after a crash every attempt that may have run is known (and becomes uncertain if unfinished).
  A remote attempt (``remote``, exec/dask.py) is submitted from its task, after that fsync too.
- Group commit: one scheduler turn journals the attempts that ended since the last turn, its
  decisions and its launches with one write (the first two are held by the journal until the
  launches, or until the loop waits), then fsyncs once before any of those launches starts; a
  turn without launches fsyncs nothing. So neither a finish nor a
  launch costs an fsync of its own: the records that are not launches (process_started,
  node_finished, decisions) become durable with the next launch (whose node may read their
  values), a person being asked, a cancel acknowledgement or the completion. A turn that only
  launches pure item steps (no effect outside the run) is not fsynced.
- A remote attempt whose answer is lost (AttemptUncertain) gets ``attempt_uncertain`` instead of
  a result; the other nodes go on, and the execution ends with ``needs_recovery`` naming it.
- state.json is an atomic, non-durable snapshot written when the run starts, when a person is
  asked, at most every ``snapshot_interval`` seconds, and at the end. It is a convenience copy:
  status folds the journal itself, and the journal is what recovery trusts.

Failpoints: see :mod:`rho_notebook.runtime.failpoints`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rho_notebook.errors import AttemptUncertain, BudgetExceeded, UnavailableValue, UnlistableAggregate
from rho_notebook.exec.base import AttemptContext, AttemptResult, Executor
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.launch_facts import node_launch_facts, rendered_part
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import (
    AgentNode,
    ApprovalNode,
    Graph,
    ItemNode,
    Node,
    placement_of,
)
from rho_notebook.model.itemrun import InstanceLog, stalled_steps
from rho_notebook.model.mapping import RunContext, with_people
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import TERMINAL_STATES, NodeState, workflow_outcome
from rho_notebook.policy.approvals import ApprovalDecision
from rho_notebook.policy.gate import Launch
from rho_notebook.policy.permission import LaunchDecision, LaunchKind, launch_kind, read_only
from rho_notebook.runtime.budget import halt_records, halted_steps
from rho_notebook.runtime.execution import REQUEST_RESCAN_SECONDS, EventSink, Execution
from rho_notebook.runtime.failpoints import FAILPOINTS, failpoint
from rho_notebook.runtime.replay import (
    LaunchNode,
    NoSeed,
    TakeStored,
    may_reuse,
    node_records,
    reuse_verdict,
    seed_verdict,
    split_launches,
)
from rho_notebook.runtime.reuse import ReuseKeys, Seed, look_up
from rho_notebook.runtime.scheduler import Decision, OpenNeeds, Scheduler
from rho_notebook.runtime.spend import AttemptSpend
from rho_notebook.store.reuse import ReuseIndex

__all__ = ["FAILPOINTS", "REQUEST_RESCAN_SECONDS", "EventSink", "RunDriver", "failpoint"]

_DECIDED_KINDS = {NodeState.READY: EventKind.NODE_READY, NodeState.SKIPPED: EventKind.NODE_SKIPPED}
"""The record of a scheduler decision (any other decided state is ``node_blocked``)."""

_Ended = tuple[str, int, AttemptResult]
"""(node, attempt, result) of an attempt task."""


def _failed(node: Node, number: int, state: NodeState, message: str) -> _Ended:
    return node.name, number, AttemptResult(state=state, message=message)


@dataclass(kw_only=True)
class RunDriver:
    """Executes one graph run as its owner: the scheduler's decisions applied through ``execution``."""

    execution: Execution
    """Journal, snapshot, cancel, gate, completion and teardown of this execution."""
    executors: Mapping[str, Executor]
    reuse: bool = True
    """Take a stored success of a reusable node instead of launching it (False: ``run --no-reuse``)."""
    seeded: Mapping[str, Seed | str] = field(default_factory=dict)
    """``try``: node -> its successful attempt in the source run, taken instead of a launch whatever
    its reuse flag (or why there is none: the node then fails with that message)."""
    remote: Executor | None = None
    """Where nodes with ``placement = "any"`` (command, shell, Python) run when set, e.g. an
    :class:`~rho_notebook.exec.dask.DaskExecutor`; agent, approval and ``placement = "local"``
    nodes always use ``executors``. The driver closes it (``aclose``) when the run's loop ends."""
    run_fields: Mapping[str, str | None] = field(default_factory=dict)
    """Who started the run (the manifest's initiator, via, client): item-graph mappings read them."""
    outputs: dict[str, Any] = field(default_factory=dict)
    run_id: str = field(init=False)
    graph: Graph = field(init=False)
    scheduler: Scheduler = field(init=False)
    _tasks: dict[str, asyncio.Task[None]] = field(init=False, default_factory=dict)
    """Node -> the task of its running attempt."""
    _done: deque[_Ended | Exception | asyncio.CancelledError] = field(init=False, default_factory=deque)
    """What attempts that ended and were not yet journaled returned (or raised), in the order they ended."""
    _uncertain: dict[str, str] = field(init=False, default_factory=dict)
    """Node -> why: remote attempts of this execution whose result is lost (AttemptUncertain)."""
    _halted: dict[str, str] = field(init=False, default_factory=dict)
    """Node -> why: attempts a budget stopped before a model call (the run halts, runtime/budget.py)."""
    _keys: ReuseKeys | None = field(init=False, default=None)
    """Reuse keys of this graph; None when no node may be reused."""
    _launch_keys: dict[str, str] = field(init=False, default_factory=dict)
    """Node -> reuse key computed when its current attempt launched (indexed if it succeeds)."""
    _index_pending: list[tuple[str, str, int]] = field(init=False, default_factory=list)
    """(key, node, attempt) of successes whose node_finished is journaled but maybe not yet fsynced."""
    _open_needs: OpenNeeds = field(init=False)
    """Which nodes a pass must look at (set when the loop starts)."""
    _gated: dict[tuple[LaunchKind, bool], bool] = field(init=False, default_factory=dict)
    """(launch kind, read-only agent) -> whether the gate has work for such a launch in this run
    (not :meth:`LaunchGate.passes`): asked once per kind, not per attempt."""

    def __post_init__(self) -> None:
        ex = self.execution
        self.run_id = ex.run_id
        self.graph = ex.graph
        self.scheduler = Scheduler(self.graph, remote=self.remote is not None)
        if ex.workspace_key and any(may_reuse(node) for node in self.graph.nodes):
            self._keys = ReuseKeys(self.graph, workspace_key=ex.workspace_key, workspace=ex.workspace)

    @property
    def graph_nodes(self) -> dict[str, Node]:
        return self.scheduler.nodes

    def _output(self, name: str) -> Any:
        return self.outputs.get(name, UNAVAILABLE)

    # -- the loop --------------------------------------------------------------------------------------

    async def execute(self, *, resumed: bool) -> RunState:
        """Run until every node is terminal or the run is cancelled; returns the final state."""
        ex = self.execution
        await ex.open()
        try:
            ex.started(resumed=resumed)
            ex.snapshot(force=True)
            self._rejoin_waiting()
            await self._loop()
        finally:
            await ex.close(closing=getattr(self.remote, "aclose", None))
        return ex.state

    async def _loop(self) -> None:
        ex = self.execution
        dirty: set[str] | None = None
        self._open_needs = OpenNeeds(self.scheduler, ex.node_states)
        cancelling = False
        requests: list[str] = []
        while True:
            fresh = ex.take_cancel_requests()
            if fresh:
                requests.extend(fresh)
                if not cancelling:
                    cancelling = True
                    ex.cancel_running()
            decision = self.scheduler.decide(
                ex.node_states,
                exit_codes=ex.exit_codes,
                outputs=self._output,
                launching=not cancelling and not self._halted,
                dirty=dirty,
                ready=ex.ready,
                running=self._tasks.keys(),
            )
            narrowed, dirty = dirty is not None, set()
            launches = self._apply(decision, dirty)
            if launches:
                self._launch(launches)
            ex.journal.flush()  # the turn's records (held since its start), before anything is awaited
            if not self._tasks:
                if cancelling or requests:
                    await self._settle()
                    ex.finish_cancellation(requests)
                    return
                if not decision.launches and not decision.decided:
                    if narrowed:  # one full pass before the end: OpenNeeds only narrows a pass
                        dirty = None
                        continue
                    # nothing changed and nothing runs: every node is terminal (or blocked for good)
                    await self._end()
                    return
                continue
            ex.snapshot()
            if not self._done and not ex.wake.is_set():
                await ex.wake.wait()  # an attempt ended, a poke, or the rescan timer
            ex.wake.clear()
            self._journal_ended(dirty)

    def _apply(self, decision: Decision, dirty: set[str]) -> list[str]:
        """Journal the scheduler's decisions and the launches that take a stored result (one
        write), and put in ``dirty`` the nodes their ends leave without an open need; returns
        the launches left to start."""
        ex = self.execution
        run_id = self.run_id
        decided = [
            event(_DECIDED_KINDS.get(new_state, EventKind.NODE_BLOCKED), run_id, node=name, reason=reason)
            if reason
            else event(_DECIDED_KINDS.get(new_state, EventKind.NODE_BLOCKED), run_id, node=name)
            for name, new_state, reason in decision.decided
        ]
        launches = decision.launches
        taken: list[str] = []
        stored: list[dict[str, Any]] = []
        if launches and (self._keys is not None or self.seeded):
            taken, stored = self._take_stored(launches)
        if decided or stored:
            ex.emit(*decided, *stored, later=True)  # written with the turn's launches, or before it waits
            if decided:
                failpoint("after_decisions_append", first=ex.journal.flush)
        for name, new_state, _ in decision.decided:
            if new_state in TERMINAL_STATES:  # skipped or blocked in the pass
                self._open_needs.ended(name, dirty)
        if taken:
            ex.wake.set()  # their children are decided next, even while other attempts run
            for name in taken:
                self._open_needs.ended(name, dirty)
            launches = [name for name in launches if name not in taken]
        return launches

    def _journal_ended(self, dirty: set[str]) -> None:
        """Journal the attempts that ended since the last turn, in the order they ended, with one
        write (group commit: not fsynced here; the next launch, approval request or completion
        makes them durable together, see the module docstring)."""
        records: list[dict[str, Any]] = []
        names = []
        while self._done:
            ended = self._done.popleft()
            if not isinstance(ended, tuple):
                raise ended  # not an executor's error (_executed turns those into a failure): a bug
            name, number, result = ended
            del self._tasks[name]
            names.append(name)
            records.extend(self._finish(name, number, result))
        if records:
            self.execution.emit(*records, later=True)
            failpoint("after_finished_append", first=self.execution.journal.flush)
        states = self.execution.node_states
        for name in names:
            if states[name] in TERMINAL_STATES:  # not a halted or uncertain attempt's node
                self._open_needs.ended(name, dirty)

    def _start_attempt(self, name: str, attempt: Coroutine[Any, Any, _Ended]) -> None:
        self._tasks[name] = asyncio.get_running_loop().create_task(self._reported(attempt))

    async def _reported(self, attempt: Coroutine[Any, Any, _Ended]) -> None:
        """Run ``attempt`` and hand the loop what it returned or raised: from the attempt's own
        task, a loop iteration sooner than a done callback would."""
        ended: _Ended | Exception | asyncio.CancelledError
        try:
            ended = await attempt
        except (Exception, asyncio.CancelledError) as err:
            ended = err
        self._done.append(ended)
        self.execution.wake.set()

    # -- launches --------------------------------------------------------------------------------------

    def _launch(self, names: list[str]) -> None:
        ex = self.execution
        nodes = self.graph_nodes
        numbers = [ex.state.nodes[name].attempt + 1 for name in names]
        ex.emit(
            *[
                event(EventKind.NODE_LAUNCHED, self.run_id, node=name, attempt=number)
                for name, number in zip(names, numbers, strict=True)
            ]
        )
        failpoint("before_launch_sync")
        if not all(isinstance(node := nodes[name], ItemNode) and node.pure for name in names):
            # one fsync for every launch of this turn and every record before them (the attempts
            # that ended since the last one): a launch with effects outside the run is durable
            # before it starts, and so is everything it may have read
            ex.journal.sync()
            self._record_reusable()
        failpoint("after_launch_sync")
        cancels = ex.cancels
        for name, number in zip(names, numbers, strict=True):
            cancel = cancels[name] = CancelSignal()
            self._start_attempt(name, self._attempt(nodes[name], number, cancel))

    def _rejoin_waiting(self) -> None:
        """Attempts that were waiting for a person when the last owner stopped wait again."""
        ex = self.execution
        for name, request_id in sorted(ex.state.waiting_requests().items()):
            cancel = CancelSignal()
            ex.cancels[name] = cancel
            number = ex.state.nodes[name].attempt
            self._start_attempt(name, self._attempt(self.graph_nodes[name], number, cancel, resume_request=request_id))
        ex.state.refresh_waiting()

    def _context(self, node: Node, number: int, cancel: asyncio.Event, resume_request: str | None) -> AttemptContext:
        """What an executor gets for attempt ``number`` of ``node``: only the hooks its kind uses
        (model calls for agents and item steps, asking a person for approval nodes and item steps)."""
        ex = self.execution
        name = node.name
        files = ex.artifacts.attempt_files(partial(ex.folder.attempt_dir, name, number))
        item = isinstance(node, ItemNode)
        calls = item or isinstance(node, AgentNode)
        return AttemptContext(
            run_id=self.run_id,
            node=node,
            attempt=number,
            files=files,
            workspace=ex.workspace,
            identities=ex.identities,
            environment=self.graph.environment,
            outputs=self._output,
            cancel=cancel,
            on_started=partial(self._process_started, name, number),
            on_output=partial(self._output_chunk, name, number) if ex.on_event is not None else None,
            model_calls=AttemptSpend(
                self.run_id, name, number, ex.state, ex.emit, ex.journal.sync, guard=ex.spend_guard
            )
            if calls
            else None,
            request_approval=partial(self._ask, name, number, cancel, resume_request)
            if item or isinstance(node, ApprovalNode)
            else None,
            source_environ=ex.environ,
            verified=ex.verified,
            graph=self.graph,
            run_fields=with_people(self.run_fields, ex.state) if item else self.run_fields,
            instances=InstanceLog.of(ex.state.nodes[name].instances, ex.emit, ex.journal.sync)
            if isinstance(node, ItemNode) and node.step_kind == "aggregate"
            else None,
        )

    async def _process_started(self, name: str, number: int, pid: int) -> None:
        self.execution.emit(event(EventKind.PROCESS_STARTED, self.run_id, node=name, attempt=number, pid=pid))
        failpoint("after_process_started")

    async def _output_chunk(self, name: str, number: int, stream: str, chunk: bytes) -> None:
        on_event = self.execution.on_event
        if on_event is not None:
            on_event(
                event(EventKind.OUTPUT_CHUNK, self.run_id, node=name, attempt=number, stream=stream, bytes=len(chunk))
            )

    async def _ask(
        self,
        name: str,
        number: int,
        cancel: asyncio.Event,
        resume_request: str | None,
        facts: dict[str, Any],
        timeout: float,
    ) -> ApprovalDecision | None | str:
        return await self.execution.decide(
            name, number, kind="node", facts=facts, timeout=timeout, cancel=cancel, request_id=resume_request
        )

    def _gate_facts(self, node: Node, launch: Launch, run_fields: Mapping[str, Any]) -> dict[str, Any] | None:
        """The launch facts the gate needs (None when it needs none). An agent's prompt is
        rendered whenever it may start, so a missing value fails it before it starts.

        Raises
        ------
        UnavailableValue
            A value the facts render is missing.
        """
        gate = self.execution.gate
        if gate.needs_facts(launch) or (isinstance(node, AgentNode) and gate.policy(launch) is not LaunchDecision.DENY):
            return node_launch_facts(node, self.graph, self._output, RunContext(self.run_id, **run_fields))
        return None

    async def _attempt(
        self, node: Node, number: int, cancel: asyncio.Event, *, resume_request: str | None = None
    ) -> _Ended:
        kind, only_reads, executor, gated = self._static_launch(node)
        if executor is None:
            return _failed(
                node, number, NodeState.FAILURE, f"no executor for {node.kind} nodes in this version of rho_notebook"
            )
        ctx = self._context(node, number, cancel, resume_request)
        if not gated:  # the gate passes every launch like this one at once (LaunchGate.passes)
            return node.name, number, (await self._executed(executor, ctx))[0]
        gate = self.execution.gate
        launch = Launch(
            kind=kind,
            node=node.name,
            attempt=number,
            read_only=only_reads,
            approval_seconds=float(node.timeout_seconds),
        )
        try:
            facts = self._gate_facts(node, launch, ctx.run_fields)
        except UnavailableValue as err:  # an aggregate's unlistable list is the whole reason: nothing to render
            shown = str(err) if isinstance(err, UnlistableAggregate) else f"cannot render {rendered_part(node)}: {err}"
            return _failed(node, number, NodeState.FAILURE, shown)
        if facts is not None and facts.get("instances") == [] and isinstance(node, ItemNode):
            # an aggregate over an empty list starts nothing: nobody is asked, no hook reads it
            return node.name, number, (await self._executed(executor, ctx))[0]
        refusal = await gate.admit(launch, facts, cancel=cancel, resume_request=resume_request)
        if refusal is not None:
            return _failed(node, number, refusal.state, refusal.message)
        result, reviewable = await self._executed(executor, ctx)
        # without facts there is nothing to review (LaunchGate.review returns at once): no coroutine
        if reviewable and facts is not None:
            refusal = await gate.review(launch, facts, state=result.state, exit=result.exit)
            if refusal is not None:
                result = AttemptResult(
                    state=refusal.state, message=refusal.message, exit=result.exit, artifacts=result.artifacts
                )
        return node.name, number, result

    def _static_launch(self, node: Node) -> tuple[LaunchKind, bool, Executor | None, bool]:
        """What an attempt of ``node`` launches as, whether it is a read-only agent, where it runs,
        and whether the gate has work for it (an agent's prompt is rendered whenever it may start)."""
        kind, only_reads = launch_kind(node), read_only(node)
        gated = self._gated.get((kind, only_reads))
        if gated is None:
            gated = self._gated[kind, only_reads] = not self.execution.gate.passes(kind, read_only=only_reads)
        remote = self.remote is not None and placement_of(node) == "any"
        executor = self.remote if remote else self.executors.get(node.kind)
        return kind, only_reads, executor, gated or isinstance(node, AgentNode)

    async def _executed(self, executor: Executor, ctx: AttemptContext) -> tuple[AttemptResult, bool]:
        """The attempt's result, run holding the checkout as the node needs it, and whether its
        executor made it (after hooks may review it) rather than a budget or a lost remote answer."""
        name = ctx.node.name
        checkout = self.execution.checkout
        # neither for a node that takes no checkout slot: in a shared checkout each worker has its
        # own copy, so remote nodes take no cross-host lock
        _, alone, shares = self.scheduler.slot_facts(name)
        try:
            if checkout is None or not (alone or shares):
                result = await executor.execute(ctx)
            elif shares:
                async with checkout.read():
                    result = await executor.execute(ctx)
            else:
                async with checkout.write():
                    result = await executor.execute(ctx)
        except AttemptUncertain as err:  # no result to journal: the attempt stays uncertain
            self._uncertain[name] = err.message
            return AttemptResult(state=NodeState.RUNNING, message=err.message), False
        except BudgetExceeded as err:  # not a failure: the node waits for a raise (_finish, _end)
            self._halted[name] = err.message
            return AttemptResult(state=NodeState.CANCELLATION, message=err.message), False
        except Exception as err:  # an executor bug must end the node, not the run
            result = AttemptResult(state=NodeState.FAILURE, message=f"executor error: {type(err).__name__}: {err}")
        refused = ctx.model_calls.refused if isinstance(ctx.model_calls, AttemptSpend) else None
        if refused is not None:  # an executor that caught the refusal made no call either: a halt
            self._halted[name] = refused.message
            return AttemptResult(state=NodeState.CANCELLATION, message=refused.message), False
        return result, True

    def _finish(self, name: str, number: int, result: AttemptResult) -> list[dict[str, Any]]:
        """The records that end attempt ``number`` of ``name`` (the caller journals them), and
        its value kept for the nodes that read it."""
        ex = self.execution
        ex.cancels.pop(name, None)
        if name in self._uncertain and result.state is NodeState.RUNNING:
            return [event(EventKind.ATTEMPT_UNCERTAIN, self.run_id, node=name, attempt=number, message=result.message)]
        if name in self._halted:
            return halt_records(self.run_id, name, number, self._halted[name])
        records = []
        if result.value is not UNAVAILABLE and result.state is NodeState.SUCCESS:
            self.outputs[name] = result.value
            node = self.graph_nodes[name]
            if isinstance(node, ItemNode) and node.step_kind == "output":
                records.append(event(EventKind.SCRIPT_OUTPUT, self.run_id, value=result.value))
        key = self._launch_keys.pop(name, None)
        if key is not None and result.state is NodeState.SUCCESS:
            self._index_pending.append((key, name, number))
        journaled = result.journal_value and result.state is NodeState.SUCCESS and result.value is not UNAVAILABLE
        records.append(
            event(
                EventKind.NODE_FINISHED,
                self.run_id,
                node=name,
                attempt=number,
                state=result.state._value_,  # as event() reads it
                exit=result.exit,
                message=result.message,
                **({"step_value": result.value} if journaled else {}),  # value.json is a copy (AttemptResult)
            )
        )
        return records

    # -- stored results (runtime/replay.py decides) ----------------------------------------------------

    def _take_stored(self, names: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
        """Of the nodes the scheduler would launch, those that are seeded or whose reuse key has a
        verified entry in the reuse index, and the records (not yet journaled) that finish them
        without a launch; the keys of the others are remembered for the index."""
        ex = self.execution
        seeded, candidates = split_launches(names, nodes=self.graph_nodes, states=ex.node_states, seeded=self.seeded)
        # Looked up on the loop: a few small reads per node. A thread hop per launch decision
        # cost 2.5 ms a node in bench/reuse.py (GIL hand-offs), the reads themselves 0.1 ms.
        found = (
            look_up(
                self._keys,
                candidates,
                nodes=self.graph_nodes,
                outputs=self._output,
                index=ReuseIndex(ex.layout) if self.reuse else None,
                workspace_key=ex.workspace_key,
            )
            if candidates
            else {}
        )
        records: list[dict[str, Any]] = []
        taken: list[str] = []
        for name in seeded:
            taken.append(name)
            records.extend(self._take(name, seed_verdict(self.seeded[name], self.graph.fork)))
        for name in candidates:
            if name not in found:
                continue
            verdict = reuse_verdict(*found[name])
            if isinstance(verdict, LaunchNode):
                if verdict.key is not None:
                    self._launch_keys[name] = verdict.key
                continue
            taken.append(name)
            records.extend(self._take(name, verdict))
        return taken, records

    def _take(self, name: str, verdict: TakeStored | NoSeed) -> list[dict[str, Any]]:
        """The records finishing ``name`` without a launch. A taken value is this attempt's output.
        No copy is written: readers find it in the source attempt the journal names
        (``RunState.value_sources``); creating an attempt folder per reused node cost more than
        the rest of reuse together (bench/reuse.py)."""
        number = self.execution.state.nodes[name].attempt + 1
        if isinstance(verdict, TakeStored) and verdict.value_bytes is not None and verdict.value is not UNAVAILABLE:
            self.outputs[name] = verdict.value
        return node_records(verdict, self.run_id, name, number)

    def _record_reusable(self) -> None:
        """Index the successes whose node_finished is now fsynced (call right after a journal sync):
        an entry never names an attempt the journal does not prove succeeded."""
        if not self._index_pending:
            return
        ex = self.execution
        index = ReuseIndex(ex.layout)
        for key, name, number in self._index_pending:
            ex.artifacts.submit(
                index.record_attempt,
                key,
                run_id=self.run_id,
                node=name,
                attempt=number,
                workspace_key=ex.workspace_key,
            )
        self._index_pending.clear()

    # -- the end ---------------------------------------------------------------------------------------

    async def _settle(self) -> None:
        """Before the run ends: index the last successes (after fsyncing their records), then
        wait for every queued file."""
        if self._index_pending:
            self.execution.journal.sync()
            self._record_reusable()
        await self.execution.settle_artifacts()

    async def _end(self) -> None:
        """Every node is terminal (or blocked for good): ``needs_recovery`` when remote attempts
        became uncertain, else ``run_completed`` with the workflow's outcome."""
        await self._settle()
        if self._uncertain:
            self.execution.needs_recovery(sorted(self._uncertain))
            return
        ex = self.execution
        if self._halted:
            ex.halted(halted_steps(ex.state, self._halted, emit=ex.emit))
            return
        states = [(record.state, self.graph_nodes[name].allow_failure) for name, record in ex.state.nodes.items()]
        if any(s not in TERMINAL_STATES for s, _ in states):
            outcome = "blocked"
        else:
            stalled = self.graph.items is not None and bool(
                stalled_steps(self.graph_nodes, ex.node_states, self._output)
            )
            outcome = workflow_outcome(states, stalled=stalled).value
        ex.complete(outcome)
