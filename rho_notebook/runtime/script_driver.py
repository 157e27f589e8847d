"""The channel loop: owns one execution of a script or flow run (the script tier, docs/scripts.md).

A script run has no nodes in its frozen graph: ``Graph.script`` names a frozen module that runs in
the frozen interpreter (``Graph.python``), and its steps become nodes as they are called. One
execution:

1. ``run_started``, then one ``decision_recorded`` per ``--decide`` of this resume.
2. The script itself is a launch (frozen facts: script label and digest, interpreter and digest,
   cwd, environment policy): ``auto`` starts it, ``plan`` denies it (the run completes with
   outcome ``denial``, nothing ran), ``supervised`` asks a person through the same approval
   requests as a graph launch (a carried approval of the same facts counts).
3. The owner serves the private channel (:mod:`rho_notebook.runtime.script_channel`) and launches
   the interpreter with the harness in script mode, supervised like a Python node (verified
   interpreter, process group, timeout, bounded output into ``<run>/script/stdout|stderr``).
4. Each step call is prepared (:class:`~rho_notebook.runtime.script_steps.StepRunner`) and
   decided (:func:`~rho_notebook.runtime.replay.decide_call`): *replay* answers the
   stored ``value.json`` (read ahead in a thread while the interpreter starts) and journals
   ``step_replayed`` right after the answer is written, before anything more is read; *execute*
   journals ``node_launched`` with the step's facts and fsyncs it BEFORE the step's work starts,
   runs it, writes ``value.json`` (``{"output", "value"}``), journals ``node_finished`` and
   answers; *halt* journals ``step_halted`` and the run stops with ``run_halted`` (lifecycle
   ``needs_decision``); *diverge* journals ``step_diverged`` and the run fails.
   A halt or divergence is an exception the script sees (``DecisionRequired``,
   ``ReplayDivergenceError``): the runner answers the call, stops the steps still running, and
   gives the script :data:`HALT_GRACE_SECONDS` to exit (its handlers and ``finally`` run; every
   later step call gets the same answer and launches nothing) before it stops the script's
   process group. Whatever the script does then, the run ends ``needs_decision`` or diverged.
5. When the script process ends: ``script_exited``, then the outcome, which follows the script
   (:func:`~rho_notebook.runtime.script_process.outcome_of`): ``success`` when it exited 0 (a
   step that failed while the script went on is the script's to handle), ``failure`` when it
   raised, exited non-zero, was killed or timed out; ``cancellation`` after a cancel request (the
   script's process group and every running step are stopped, acknowledged as graph runs do).

Durability: as :mod:`rho_notebook.runtime.driver` (``node_launched`` is fsynced before a step
starts; other records are synced at the next launch and at the end), so after a crash every step
that may have run is known: its attempt never settled, and the next resume halts it unless it
declared ``recovery="rerun"`` or a person decides.

Journal, snapshot, cancel, the launch gate, completion and teardown are the
:class:`~rho_notebook.runtime.execution.Execution` the driver holds (the DAG loop holds one too);
the script's process is :mod:`rho_notebook.runtime.script_process`, the read-ahead of stored
values :mod:`rho_notebook.runtime.script_values`.

Failpoints (``RHO_NOTEBOOK_FAILPOINT``, runtime/failpoints.py) add ``script_step_launched``
(after a step's ``node_launched`` is durable) and ``script_step_finished`` (after its ``node_finished``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.errors import RhoError, StepInvalid
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.process import ProcessResult, run_process
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import NodeState
from rho_notebook.policy.approvals import who_am_i
from rho_notebook.policy.gate import Refusal
from rho_notebook.runtime.budget import is_budget_halt
from rho_notebook.runtime.execution import Execution
from rho_notebook.runtime.replay import Decision, Diverge, Execute, Halt, Replay, Skip, StepHistory, decide_call
from rho_notebook.runtime.script_attempts import QuickSteps, StepAttempts, Steps
from rho_notebook.runtime.script_channel import Answer, ScriptChannel
from rho_notebook.runtime.script_process import (
    SCRIPT_NODE,
    ScriptLogs,
    exit_of,
    exited_ok,
    outcome_of,
    script_facts,
    script_launch,
    script_process_spec,
    script_spec,
)
from rho_notebook.runtime.script_steps import PreparedStep, StepCall
from rho_notebook.runtime.script_values import StoredValues, step_answer

__all__ = ["MAX_OUTPUT_BYTES", "SCRIPT_NODE", "QuickSteps", "ScriptDriver", "Steps", "script_facts"]

MAX_OUTPUT_BYTES = 1_048_576
"""Largest ``emit_output`` value (as JSON) journaled as the run's output."""

HALT_GRACE_SECONDS = 5.0
"""How long a script may take to exit after a step call halted or diverged (its ``except`` and
``finally`` run) before the runner stops its process group."""


def _invalid(message: str) -> dict[str, Any]:
    return {"ok": False, "error": "invalid", "message": message}


@dataclass(kw_only=True)
class ScriptDriver:
    """Executes one script run as its owner (same ``execute(resumed=)`` shape as RunDriver)."""

    execution: Execution
    """Journal, snapshot, cancel, gate, completion and teardown of this execution."""
    steps: Steps
    """Prepares and runs one step: a StepRunner (a recording-backed one in ``record`` tests)."""
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    """This resume's ``--decide``: step key -> rerun | skip, each good for one call."""
    run_id: str = field(init=False)
    graph: Graph = field(init=False)
    _left: dict[str, Decision] = field(init=False, default_factory=dict)
    _seen: dict[str, str] = field(init=False, default_factory=dict)
    """Step key -> how its call ended in this execution (success, failure, skipped, ...)."""
    _halted: list[dict[str, str]] = field(init=False, default_factory=list)
    _diverged: list[tuple[str, str, str]] = field(init=False, default_factory=list)
    _stop: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    """Set to stop the script process (a cancel, or the grace after a halt or divergence ended)."""
    _stopping: dict[str, Any] | None = field(init=False, default=None)
    """The first halt's or divergence's answer, given again to every later step call."""
    _grace: asyncio.TimerHandle | None = field(init=False, default=None)
    _cancelling: bool = field(init=False, default=False)
    _inflight: set[asyncio.Task[Any]] = field(init=False, default_factory=set)
    _quick: QuickSteps | None = field(init=False, default=None)
    """``steps`` when it is a :class:`QuickSteps` (asked once: a runtime protocol check is slow)."""
    _attempts: StepAttempts = field(init=False)
    _stored: StoredValues = field(init=False)
    """The settled steps' values read ahead while the script starts, and the replay offers."""
    _read: asyncio.Future[None] | None = field(init=False, default=None)
    _replays: list[dict[str, Any]] = field(init=False, default_factory=list)
    """``step_replayed`` records answered in this turn of the loop, journaled at its end."""

    def __post_init__(self) -> None:
        ex = self.execution
        self.run_id = ex.run_id
        self.graph = ex.graph
        self._left = dict(self.decisions)
        self._quick = self.steps if isinstance(self.steps, QuickSteps) else None
        self._attempts = StepAttempts(ex, self.steps)
        self._stored = StoredValues(ex.folder, ex.state, self.steps.prepare, self._left)

    # -- the execution --------------------------------------------------------------------------------

    async def execute(self, *, resumed: bool) -> RunState:
        """Run the script until it exits, halts, diverges or is cancelled; returns the final state."""
        ex = self.execution
        await ex.open()
        try:
            ex.started(resumed=resumed)
            by = who_am_i()
            ex.emit(
                *(
                    event(EventKind.DECISION_RECORDED, self.run_id, node=key, decision=decision, by=by, via="cli")
                    for key, decision in sorted(self.decisions.items())
                )
            )
            ex.journal.sync()
            ex.snapshot(force=True)
            await self._run_script()
        finally:
            await ex.close()
        return ex.state

    async def _run_script(self) -> None:
        ex = self.execution
        try:
            facts = script_facts(self.graph)
        except (RhoError, KeyError) as err:
            message = err.message if isinstance(err, RhoError) else f"the script's module is not frozen: {err}"
            ex.complete("failure", message)
            return
        requests: list[str] = []
        denied = await self._gate(facts, requests)
        if denied is not None:
            if requests:
                ex.finish_cancellation(requests)
            else:
                ex.complete(*denied)
            return
        result, logs = await self._serve(requests)
        await self._drain_steps()
        record = exit_of(result)
        ex.emit(event(EventKind.SCRIPT_EXITED, self.run_id, exit=record))
        exited = NodeState.SUCCESS if exited_ok(result) else NodeState.FAILURE
        refusal = await ex.gate.review(script_launch(self.graph), facts, state=exited, exit=record)
        await ex.settle_artifacts()
        self._end(result, logs, refusal, requests)

    async def _serve(self, requests: list[str]) -> tuple[ProcessResult | str, ScriptLogs]:
        """Serve the channel while the script runs (its stored values read ahead meanwhile)."""
        ex = self.execution
        channel = ScriptChannel(ex.folder.path, self._handle)
        await channel.start()
        stored = self._stored
        stored.reading = True
        reading = asyncio.ensure_future(asyncio.to_thread(stored.read_ahead, stored.settled()))
        self._read = reading
        try:
            if ex.checkout is None:
                return await self._supervise(channel, requests)
            # the script is one mutating process in the workspace, its steps included: it
            # holds the checkout alone for its life (steps take nothing, so a fan-out runs)
            async with ex.checkout.write():
                ended = await self._supervise(channel, requests)
                await self._drain_steps()
                return ended
        finally:
            if self._grace is not None:
                self._grace.cancel()
            stored.reading = False
            await channel.close()
            await reading
            stored.clear()

    def _end(self, result: ProcessResult | str, logs: ScriptLogs, refusal: Refusal | None, requests: list[str]) -> None:
        """End the execution: cancelled, halted, diverged, or completed with the script's outcome."""
        ex = self.execution
        if self._cancelling or requests:
            ex.finish_cancellation(requests)
            return
        if self._halted:
            ex.halted(list(self._halted))
            return
        if self._diverged:
            key, stored, digest = self._diverged[0]
            message = (
                f"step {key} diverged: its execution-affecting inputs were {stored} and are now {digest} "
                "(the script changed at that step); start a new run of the changed script"
            )
            ex.complete("failure", message)
            return
        timeout = script_spec(self.graph).timeout_seconds
        outcome, message = outcome_of(result, logs, timeout_seconds=timeout)
        if refusal is not None and outcome == "success":
            outcome, message = refusal.state.value, refusal.message
        ex.complete(outcome, message)

    # -- the script launch ----------------------------------------------------------------------------

    async def _gate(self, facts: dict[str, Any], requests: list[str]) -> tuple[str, str] | None:
        """None when the script may start; else (outcome, message) of the run. Cancel requests
        taken while the gate runs (a person is asked, a hook runs) are added to ``requests``."""
        cancel = CancelSignal()
        watch = asyncio.ensure_future(self._watch_cancel(cancel, requests))
        try:
            refusal = await self.execution.gate.admit(script_launch(self.graph), facts, cancel=cancel)
        finally:
            watch.cancel()
        if refusal is None:
            return None
        if self._cancelling:
            return NodeState.CANCELLATION.value, refusal.message
        return refusal.state.value, refusal.message

    async def _watch_cancel(self, cancel: asyncio.Event, requests: list[str]) -> None:
        ex = self.execution
        while True:
            fresh = ex.take_cancel_requests()
            if fresh:
                requests.extend(fresh)
                self._cancelling = True
                cancel.set()
                return
            await ex.wake.wait()
            ex.wake.clear()

    async def _supervise(self, channel: ScriptChannel, requests: list[str]) -> tuple[ProcessResult | str, ScriptLogs]:
        """Launch the script and wait for it to end, applying cancel requests meanwhile; the
        result is why it did not start when it did not."""
        ex = self.execution
        logs = ScriptLogs(ex.folder.path / "script", modules=ex.folder.path / "python" / "modules")

        async def started(pid: int) -> None:
            ex.emit(event(EventKind.SCRIPT_LAUNCHED, self.run_id, pid=pid))
            ex.journal.sync()

        try:
            spec = await asyncio.to_thread(
                script_process_spec,
                self.graph,
                ex.folder.path,
                run_id=self.run_id,
                workspace=ex.workspace,
                identities=ex.identities,
                environ=ex.environ,
                channel_environment=channel.environment(),
            )
        except (RhoError, OSError, KeyError) as err:
            detail = err.message if isinstance(err, RhoError) else str(err)
            return detail, logs
        process = asyncio.ensure_future(
            run_process(
                spec,
                stdout_sink=logs.stdout,
                stderr_sink=logs.stderr,
                cancel=self._stop,
                on_started=started,
                handles=ex.verified,
            )
        )
        try:
            await self._wait_for(process, requests)
            try:
                return process.result(), logs
            except RhoError as err:
                return err.message, logs
            except OSError as err:  # the script's log could not be written: run_process stopped it
                return f"its output could not be stored ({err})", logs
        finally:
            logs.close()

    async def _wait_for(self, process: asyncio.Future[ProcessResult], requests: list[str]) -> None:
        """Until the script process ends: apply cancel requests, write snapshots."""
        ex = self.execution
        while not process.done():
            fresh = ex.take_cancel_requests()
            if fresh:
                requests.extend(fresh)
                self._cancelling = True
                self._stop_script()
            ex.snapshot()
            waker = asyncio.ensure_future(ex.wake.wait())
            either: set[asyncio.Future[Any]] = {process, waker}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            waker.cancel()
            ex.wake.clear()

    def _stop_script(self) -> None:
        """Stop the script's process group and every running step."""
        self._stop.set()
        self.execution.cancel_running()

    async def _drain_steps(self) -> None:
        """Steps still running when the script ended are stopped and settled."""
        self._flush_replays()
        if self._inflight:
            self.execution.cancel_running()
            await asyncio.gather(*self._inflight, return_exceptions=True)

    # -- the channel ----------------------------------------------------------------------------------

    def _handle(self, request: dict[str, Any]) -> Answer | Awaitable[Answer] | None:
        """The answer to a channel request, or (a step that prepares in a thread or executes) the
        task that answers it; a replay is answered right here, without a task or a thread."""
        op = request.get("op")
        if op != "step":
            return self._handle_other(op, request)
        if self._stop.is_set():
            return {"ok": False, "error": "cancelled"}
        if self._stopping is not None:
            return dict(self._stopping)
        call = self._call(request)
        if isinstance(call, dict):
            return call
        try:
            prepared = self._quick.prepare_now(call) if self._quick is not None else None
        except StepInvalid as err:
            return self._refuse(call, err)
        if prepared is None:
            return self._tracked(self._prepare_and_answer(call))
        answer = self._answer_call(call, prepared)
        if isinstance(answer, Execute):
            return self._tracked(self._execute_step(call, prepared, answer))
        return answer

    def _handle_other(self, op: object, request: dict[str, Any]) -> Answer | Awaitable[Answer] | None:
        """The requests that are not step calls: inputs, emit, offers, replayed."""
        if op == "inputs":
            return {"ok": True, "inputs": {decl.name: decl.value for decl in self.graph.inputs}}
        if op == "emit":
            value = request.get("value")
            size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
            if size > MAX_OUTPUT_BYTES:
                return _invalid(
                    f"emit_output value is {size} bytes as JSON, more than {MAX_OUTPUT_BYTES}; "
                    "write big outputs to a file and emit its path"
                )
            self.execution.emit(event(EventKind.SCRIPT_OUTPUT, self.run_id, value=value))
            return {"ok": True}
        if op == "offers":
            return self._tracked(self._offers_answer())
        if op == "replayed":
            self._replayed_offer(request)
            return None
        return _invalid(f"unknown request {op!r}")

    async def _offers_answer(self) -> Answer:
        if self._read is not None:
            await asyncio.shield(self._read)
        offers = {key: {"fingerprint": o.fingerprint, "answer": o.answer} for key, o in self._stored.offers.items()}
        return {"ok": True, "offers": offers}

    def _replayed_offer(self, request: dict[str, Any]) -> None:
        """The script answered a call from its offer: journal the replay (an offer already used, or
        one withdrawn because the call came here, journals nothing)."""
        key = request.get("key")
        if not isinstance(key, str):
            return
        offer = self._stored.offers.pop(key, None)
        if offer is None or offer.fingerprint != request.get("fingerprint") or key in self._seen:
            return
        self._seen[key] = NodeState.SUCCESS.value
        self._replayed_later(
            event(EventKind.STEP_REPLAYED, self.run_id, node=key, attempt=offer.attempt, digest=offer.digest)
        )

    def _tracked(self, work: Coroutine[Any, Any, Answer]) -> asyncio.Task[Answer]:
        """``work`` as its own task, tracked so that draining waits for the step (a connection
        carries many requests and lives as long as the script's thread)."""
        task = asyncio.ensure_future(work)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return task

    def _call(self, request: dict[str, Any]) -> StepCall | dict[str, Any]:
        """The step call of a request, or the answer refusing it."""
        key = request.get("key")
        if not isinstance(key, str) or not key:
            return _invalid("a step request needs a key")
        if key in self._seen:
            return _invalid(f"step {key} was called twice in one execution; give every call its own step_id")
        self._seen[key] = "running"
        self._stored.offers.pop(key, None)
        after = request.get("after") or []
        where = request.get("where")
        return StepCall(
            key=key,
            kind=str(request.get("kind")),
            args=request.get("args") or {},
            recovery=request.get("recovery"),
            after=tuple(str(a) for a in after) if isinstance(after, list) else (),
            where=where if isinstance(where, str) else None,
        )

    def _refuse(self, call: StepCall, err: StepInvalid) -> dict[str, Any]:
        self._seen.pop(call.key, None)
        return _invalid(err.message)

    async def _prepare_and_answer(self, call: StepCall) -> Answer:
        try:
            prepared = await asyncio.to_thread(self.steps.prepare, call)
        except StepInvalid as err:
            return self._refuse(call, err)
        if self._stopping is not None:  # a halt or divergence came while this call prepared
            return dict(self._stopping)
        answer = self._answer_call(call, prepared)
        if isinstance(answer, Execute):
            return await self._execute_step(call, prepared, answer)
        return answer

    # -- verdicts (runtime/replay.py decides) -----------------------------------------------------------

    def _answer_call(self, call: StepCall, prepared: PreparedStep) -> Answer | Execute:
        """Decide a prepared call: the answer (replay, skip, halt, divergence), or Execute."""
        key = call.key
        stored: dict[int, Any] = {}
        history = StepHistory.of(
            self.execution.state.nodes.get(key), readable=lambda number: self._stored.readable(key, number, stored)
        )
        verdict = decide_call(history, prepared.digest, call.recovery, self._left.get(key))
        if isinstance(verdict, Replay):
            return self._replay(key, verdict, prepared, stored)
        if isinstance(verdict, Skip):
            return self._skip(key, verdict, prepared, stored)
        if isinstance(verdict, Halt):
            return self._halt(key, verdict)
        if isinstance(verdict, Diverge):
            return self._diverge(key, verdict, prepared)
        if verdict.decided:
            self._left.pop(key, None)
        return verdict

    def _replay(self, key: str, verdict: Replay, prepared: PreparedStep, stored: dict[int, Any]) -> Answer:
        self._seen[key] = "success"
        # journaled just after the answer is written (before the loop reads anything more), so
        # that the script goes on while the owner journals: nothing new is decided by it
        replayed = event(
            EventKind.STEP_REPLAYED, self.run_id, node=key, attempt=verdict.attempt, digest=prepared.digest
        )
        self._replayed_later(replayed)
        line = self._stored.lines.pop((key, verdict.attempt), None)
        return line if line is not None else step_answer(key, "success", stored[verdict.attempt], replayed=True)

    def _skip(self, key: str, verdict: Skip, prepared: PreparedStep, stored: dict[int, Any]) -> Answer:
        self._left.pop(key, None)
        self._seen[key] = "skipped"
        record = self.execution.state.nodes[key].current
        state = record.state if record is not None and record.state else "skipped"
        self.execution.emit(
            event(
                EventKind.STEP_REPLAYED,
                self.run_id,
                node=key,
                attempt=verdict.attempt,
                digest=prepared.digest,
                decision="skip",
            )
        )
        payload = stored.get(verdict.attempt) if verdict.readable else None
        return step_answer(key, state, payload or {}, replayed=True)

    def _halt(self, key: str, verdict: Halt) -> dict[str, Any]:
        self._seen[key] = "halted"
        self._halted.append({"step": key, "why": verdict.why})
        self.execution.emit(event(EventKind.STEP_HALTED, self.run_id, node=key, why=verdict.why))
        return self._stopping_with({"ok": False, "error": "decision_required", "step": key, "why": verdict.why})

    def _diverge(self, key: str, verdict: Diverge, prepared: PreparedStep) -> Answer:
        self._seen[key] = "diverged"
        self._diverged.append((key, verdict.stored_digest, prepared.digest))
        self.execution.emit(
            event(
                EventKind.STEP_DIVERGED,
                self.run_id,
                node=key,
                stored_digest=verdict.stored_digest,
                digest=prepared.digest,
            )
        )
        return self._stopping_with(
            {
                "ok": False,
                "error": "divergence",
                "step": key,
                "stored_digest": verdict.stored_digest,
                "digest": prepared.digest,
            }
        )

    def _stopping_with(self, answer: dict[str, Any]) -> dict[str, Any]:
        """Answer a halting or diverging call with ``answer`` (an exception in the script) and let
        the script exit on its own: every later step call gets the first such answer and launches
        nothing, the steps still running are stopped, and the script's process group is stopped
        after :data:`HALT_GRACE_SECONDS` unless it exited before."""
        if self._stopping is None:
            self._stopping = answer
            self.execution.cancel_running()
            self._grace = asyncio.get_running_loop().call_later(HALT_GRACE_SECONDS, self._stop_script)
        return answer

    def _replayed_later(self, record: dict[str, Any]) -> None:
        """Journal a ``step_replayed`` once this turn of the loop has written its answers: the
        replays answered in one turn share one journal write (losing them in a crash loses nothing,
        as the next execution replays those calls again)."""
        if not self._replays:
            asyncio.get_running_loop().call_soon(self._flush_replays)
        self._replays.append(record)

    def _flush_replays(self) -> None:
        records, self._replays = self._replays, []
        if records:
            self.execution.emit(*records)

    # -- executing a step -----------------------------------------------------------------------------

    async def _execute_step(self, call: StepCall, prepared: PreparedStep, verdict: Execute) -> dict[str, Any]:
        ended = await self._attempts.execute(call, prepared, decided=verdict.decided)
        state = ended.state
        self._seen[call.key] = state.value
        if state is NodeState.CANCELLATION and self._stop.is_set():
            return {"ok": False, "error": "cancelled"}
        if state is NodeState.CANCELLATION and self._stopping is not None:  # stopped by a halt
            return dict(self._stopping)
        if state is NodeState.CANCELLATION and is_budget_halt(ended.message):  # a budget refused its call
            return self._halt(call.key, Halt(why=ended.message))
        answer = step_answer(call.key, state.value, ended.payload, replayed=False)
        if ended.message and state is not NodeState.SUCCESS:
            answer["message"] = ended.message
        return answer
