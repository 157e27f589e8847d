"""The script driver: owns one execution of a script run (the script tier, docs/scripts.md).

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
   decided (:func:`~rho_notebook.runtime.script_replay.decide_call`): *replay* answers the
   stored ``value.json`` (read ahead in a thread while the interpreter starts) and journals
   ``step_replayed`` right after the answer is written, before anything more is read; *execute*
   journals ``node_launched`` with the step's facts and fsyncs it BEFORE the step's work starts,
   runs it, writes ``value.json`` (``{"output", "value"}``), journals ``node_finished`` and
   answers; *halt* journals ``step_halted`` and the run stops with ``run_halted`` (lifecycle
   ``needs_decision``); *diverge* journals ``step_diverged`` and the run fails.
5. When the script process ends: ``script_exited``, then the outcome: ``success`` when it exited
   0, nothing diverged and every step called in this execution ended in success (or was
   skipped by decision); ``failure`` otherwise; ``cancellation`` after a cancel request (the
   script's process group and every running step are stopped, acknowledged as graph runs do).

Durability: as :mod:`rho_notebook.runtime.driver` (``node_launched`` is fsynced before a step
starts; other records are synced at the next launch and at the end), so after a crash every step
that may have run is known: its attempt never settled, and the next resume halts it unless it
declared ``recovery="rerun"`` or a person decides.

Failpoints (``RHO_NOTEBOOK_FAILPOINT``, see driver.py) add ``script_step_launched`` (after a
step's ``node_launched`` is durable) and ``script_step_finished`` (after its ``node_finished``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rho_notebook.errors import PlanError, RhoError, StepInvalid
from rho_notebook.exec._supervised import exit_record
from rho_notebook.exec.base import node_environment
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.process import ProcessResult, ProcessSpec, run_process
from rho_notebook.exec.python import materialise
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import Graph, ScriptSpec
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import NodeState
from rho_notebook.oshelpers import read_fd
from rho_notebook.policy.approvals import who_am_i
from rho_notebook.policy.gate import Launch
from rho_notebook.policy.permission import LaunchKind
from rho_notebook.runtime.driver import RunDriver, failpoint
from rho_notebook.runtime.script_channel import Answer, ScriptChannel, encode_answer
from rho_notebook.runtime.script_replay import (
    Decision,
    Diverge,
    Execute,
    Halt,
    Replay,
    Skip,
    StepHistory,
    decide_call,
)
from rho_notebook.runtime.script_steps import PreparedStep, StepCall, StepResult
from rho_notebook.runtime.wakeup import OwnerControl
from rho_notebook.script._channel import request_fingerprint
from rho_notebook.store.files import atomic_write_json, ensure_private_dir, open_regular, read_nofollow

__all__ = ["MAX_OUTPUT_BYTES", "SCRIPT_NODE", "QuickSteps", "ScriptDriver", "Steps", "script_facts"]

SCRIPT_NODE = "(script)"
"""The name approval requests and orphan records use for the script's own process (never a step
key: those follow the node-name grammar)."""

_STDERR_TAIL = 4096

_JOURNALED_ARGS = 16 * 1024
"""Largest step arguments (as JSON characters) journaled with the launch; a step with bigger ones
(a long prompt) is replayed by asking the runner, never from an offer."""

_READ_AHEAD_BYTES = 32 * 1024 * 1024
"""Most bytes of stored step values read ahead of their replays in one execution."""

MAX_OUTPUT_BYTES = 1_048_576
"""Largest ``emit_output`` value (as JSON) journaled as the run's output."""

_PACKAGE_DIR = Path(__file__).resolve().parents[2]
"""The folder holding this ``rho_notebook`` package: the script's interpreter imports the
standard-library ``rho_notebook.script`` from there when it has no rho_notebook of its own."""


def script_facts(graph: Graph) -> dict[str, Any]:
    """The frozen launch facts of a script run: what ``supervised`` asks a person about.

    Raises
    ------
    PlanError
        The graph has no script or no frozen interpreter.
    KeyError
        The script's module is not frozen in the graph.
    """
    spec, runtime = graph.script, graph.python
    if spec is None or runtime is None:
        msg = f"script run {graph.name!r} has no frozen script or interpreter; plan again"
        raise PlanError(msg)
    return {
        "script": spec.module,
        "sha256": graph.python_module(spec.module).sha256,
        "interpreter": runtime.interpreter.file.path,
        "interpreter_sha256": runtime.interpreter.file.sha256,
        "cwd": spec.cwd,
        "environment": {"names": list(graph.environment.names), "prefixes": list(graph.environment.prefixes)},
    }


class Steps(Protocol):
    """What the driver needs of a step runner (:class:`StepRunner` and the recording runner)."""

    def prepare(self, call: StepCall) -> PreparedStep: ...

    async def run(
        self,
        prepared: PreparedStep,
        *,
        attempt_dir: Path,
        cancel: asyncio.Event,
        on_started: Callable[[int], Awaitable[None]] | None = None,
    ) -> StepResult: ...


@runtime_checkable
class QuickSteps(Steps, Protocol):
    """A step runner that can also prepare a call without blocking, when that is cheap
    (:meth:`StepRunner.prepare_now`): the driver then skips the thread hop (most of a replayed
    call's cost in the owner)."""

    def prepare_now(self, call: StepCall) -> PreparedStep | None: ...


class _LogSink:
    """Appends one stream of the script process to ``<run>/script/<stream>``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.tail = b""

    async def __call__(self, chunk: bytes) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        view = memoryview(chunk)
        while view:
            view = view[os.write(self.fd, view) :]
        self.tail = (self.tail + chunk)[-_STDERR_TAIL:]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def last_line(self) -> str:
        lines = [line.strip() for line in self.tail.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][:500] if lines else ""


@dataclass(kw_only=True)
class ScriptDriver(RunDriver):
    """Executes one script run as its owner (same ``execute(resumed=)`` shape as RunDriver)."""

    steps: Steps
    """Prepares and runs one step: a StepRunner (a recording-backed one in ``record`` tests)."""
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    """This resume's ``--decide``: step key -> rerun | skip, each good for one call."""
    _left: dict[str, Decision] = field(init=False, default_factory=dict)
    _seen: dict[str, str] = field(init=False, default_factory=dict)
    """Step key -> how its call ended in this execution (success, failure, skipped, ...)."""
    _halted: list[dict[str, str]] = field(init=False, default_factory=list)
    _diverged: list[tuple[str, str, str]] = field(init=False, default_factory=list)
    _stop: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    """Set to stop the script process (halt, divergence, cancel)."""
    _cancelling: bool = field(init=False, default=False)
    _inflight: set[asyncio.Task[Any]] = field(init=False, default_factory=set)
    _quick: tuple[QuickSteps | None] | None = field(init=False, default=None)
    """``steps`` when it is a :class:`QuickSteps` (asked once: a runtime protocol check is slow)."""
    _stored: dict[tuple[str, int], bytes] = field(init=False, default_factory=dict)
    _replay_lines: dict[tuple[str, int], bytes] = field(init=False, default_factory=dict)
    """The encoded replay answer of each settled success read ahead (built in the read-ahead
    thread, so that answering a replay encodes nothing)."""
    _offers: dict[str, _Offer] = field(init=False, default_factory=dict)
    """Replay offers made to the script process (built in the read-ahead thread; read on the loop
    only once ``_reading_done`` is set): a key leaves when its offer is used or its call comes here."""
    _read: asyncio.Future[None] | None = field(init=False, default=None)
    _replays: list[dict[str, Any]] = field(init=False, default_factory=list)
    """``step_replayed`` records answered in this turn of the loop, journaled at its end."""
    """(step key, attempt) -> its ``value.json``, read ahead while the script starts (each is taken once)."""
    _reading: bool = field(init=False, default=False)
    """Whether the read-ahead may go on (cleared when the script ends)."""

    # -- the execution --------------------------------------------------------------------------------

    async def execute(self, *, resumed: bool) -> RunState:
        """Run the script until it exits, halts, diverges or is cancelled; returns the final state."""
        self._left = dict(self.decisions)
        self._control = OwnerControl(self.run_id, self._poke)
        await self._control.start()
        self._rescan = asyncio.get_running_loop().call_later(0.5, self._rescan_soon)
        try:
            self._emit(event(EventKind.RUN_STARTED, self.run_id, pid=os.getpid(), resumed=resumed))
            by = who_am_i()
            self._emit(
                *(
                    event(EventKind.DECISION_RECORDED, self.run_id, node=key, decision=decision, by=by, via="cli")
                    for key, decision in sorted(self.decisions.items())
                )
            )
            self.journal.sync()
            self._snapshot(force=True)
            await self._run_script()
        finally:
            if self._rescan is not None:
                self._rescan.cancel()
            await self._control.close()
            self.verified.close()
            if self.checkout is not None:
                self.checkout.close_idle()
            await self.artifacts.aclose()
        return self.state

    async def _run_script(self) -> None:
        try:
            facts = script_facts(self.graph)
        except (RhoError, KeyError) as err:
            message = err.message if isinstance(err, RhoError) else f"the script's module is not frozen: {err}"
            self._complete_with("failure", message)
            return
        requests: list[str] = []
        denied = await self._gate(facts, requests)
        if denied is not None:
            outcome, message = denied
            if requests:
                self._finish_cancellation(requests)
            else:
                self._complete_with(outcome, message)
            return
        channel = ScriptChannel(self.folder.path, self._handle)
        await channel.start()
        self._reading = True
        reading = asyncio.ensure_future(asyncio.to_thread(self._read_ahead, self._settled()))
        self._read = reading
        try:
            if self.checkout is None:
                result, stderr = await self._supervise(channel, requests)
            else:
                # the script is one mutating process in the workspace, its steps included: it
                # holds the checkout alone for its life (steps take nothing, so a fan-out runs)
                async with self.checkout.write():
                    result, stderr = await self._supervise(channel, requests)
                    await self._drain_steps()
        finally:
            self._reading = False
            await channel.close()
            await reading
            self._stored.clear()
            self._replay_lines.clear()
            self._offers.clear()
        await self._drain_steps()
        if isinstance(result, str):
            record: dict[str, Any] = {"kind": "not_started", "code": None, "signal": None, "detail": result}
        else:
            record = exit_record(result)
        self._emit(event(EventKind.SCRIPT_EXITED, self.run_id, exit=record))
        ok = not isinstance(result, str) and result.kind == "exit" and result.exit_code == 0
        exited = NodeState.SUCCESS if ok else NodeState.FAILURE
        refusal = await self.gate.review(self._script_launch(), facts, state=exited, exit=record)
        await self._settle_artifacts()
        if self._cancelling or requests:
            self._finish_cancellation(requests)
            return
        if self._halted:
            self._emit(event(EventKind.RUN_HALTED, self.run_id, steps=list(self._halted)))
            self.journal.sync()
            self._snapshot(force=True)
            return
        if self._diverged:
            key, stored, digest = self._diverged[0]
            message = (
                f"step {key} diverged: its execution-affecting inputs were {stored} and are now {digest} "
                "(the script changed at that step); start a new run of the changed script"
            )
            self._complete_with("failure", message)
            return
        outcome, message = self._outcome(result, stderr)
        if refusal is not None and outcome == "success":
            outcome, message = refusal.state.value, refusal.message
        self._complete_with(outcome, message)

    def _settled(self) -> list[tuple[str, int]]:
        """(key, attempt) of each step whose last attempt settled: what a replay answers from."""
        return [
            (key, record.attempts[-1].number)
            for key, record in self.state.nodes.items()
            if record.attempts and record.attempts[-1].state is not None
        ]

    def _read_ahead(self, attempts: list[tuple[str, int]]) -> None:
        """Read the stored values of ``attempts`` into ``_stored`` (in a thread, while the script's
        interpreter starts), so that a replay does not wait for the file; at most
        ``_READ_AHEAD_BYTES`` in all, and a value the replay reads first is read twice, harmlessly
        (a settled attempt's value never changes)."""
        budget = _READ_AHEAD_BYTES
        for key, number in attempts:
            if not self._reading:
                return
            try:
                fd, info = open_regular(self.folder.attempt_dir(key, number) / "value.json")
            except (OSError, RhoError):
                continue
            try:
                if info.st_size > budget:
                    return
                data = read_fd(fd)
            except OSError:
                continue
            finally:
                os.close(fd)
            budget -= len(data)
            self._stored[(key, number)] = data
            if self.state.nodes[key].attempts[-1].state == NodeState.SUCCESS.value:
                line = _replay_line(key, data)
                if line is not None:
                    self._replay_lines[(key, number)] = line
                    self._offer(key, number, data)

    def _offer(self, key: str, number: int, data: bytes) -> None:
        """Offer the replay of ``key``'s stored success when its journaled request still prepares
        to its journaled digest (in the read-ahead thread; see rho_notebook.script._channel)."""
        step = self.state.nodes[key].step or {}
        args, digest = step.get("args"), step.get("digest")
        if key in self._left or not isinstance(args, dict) or not isinstance(digest, str):
            return
        after = step.get("after") or []
        call = StepCall(
            key=key, kind=str(step.get("kind")), args=args, recovery=step.get("recovery"), after=tuple(after)
        )
        try:
            prepared = self.steps.prepare(call)
        except (StepInvalid, RhoError, OSError, ValueError):
            return
        if prepared.digest != digest:
            return  # changed since (an executable, an agent's definition): the call decides
        fields = {"kind": call.kind, "args": args, "after": list(after), "recovery": call.recovery}
        answer = _answer(key, NodeState.SUCCESS.value, json.loads(data), replayed=True)
        self._offers[key] = _Offer(
            fingerprint=request_fingerprint(fields), answer=answer, attempt=number, digest=digest
        )

    def _outcome(self, result: ProcessResult | str, stderr: _LogSink) -> tuple[str, str]:
        if isinstance(result, str):
            return "failure", f"the script could not be started: {result}"
        if result.kind != "exit":
            how = {
                "timeout": f"timed out after {self._spec().timeout_seconds} s",
                "signal": f"was killed by signal {result.signal}",
            }.get(result.kind, f"ended abnormally: {result.detail}")
            return "failure", f"the script {how}"
        if result.exit_code != 0:
            last = stderr.last_line()
            return "failure", f"the script exited with code {result.exit_code}" + (f": {last}" if last else "")
        failed = sorted(key for key, how in self._seen.items() if how not in ("success", "skipped"))
        if failed:
            return "failure", "steps that did not succeed: " + ", ".join(f"{k} ({self._seen[k]})" for k in failed)
        return "success", ""

    def _complete_with(self, outcome: str, message: str) -> None:
        failpoint("before_completed")
        fields = {"message": message} if message else {}
        self._emit(event(EventKind.RUN_COMPLETED, self.run_id, outcome=outcome, **fields))
        self.journal.sync()
        failpoint("after_completed")
        self._snapshot(force=True)

    # -- the script launch ----------------------------------------------------------------------------

    def _script_launch(self) -> Launch:
        """The script's own process as a launch (one per execution)."""
        return Launch(
            kind=LaunchKind.SCRIPT, node=SCRIPT_NODE, attempt=1, approval_seconds=float(self._spec().timeout_seconds)
        )

    async def _gate(self, facts: dict[str, Any], requests: list[str]) -> tuple[str, str] | None:
        """None when the script may start; else (outcome, message) of the run. Cancel requests
        taken while the gate runs (a person is asked, a hook runs) are added to ``requests``."""
        cancel = CancelSignal()
        watch = asyncio.ensure_future(self._watch_cancel(cancel, requests))
        try:
            refusal = await self.gate.admit(self._script_launch(), facts, cancel=cancel)
        finally:
            watch.cancel()
        if refusal is None:
            return None
        if self._cancelling:
            return NodeState.CANCELLATION.value, refusal.message
        return refusal.state.value, refusal.message

    async def _watch_cancel(self, cancel: asyncio.Event, requests: list[str]) -> None:
        while True:
            fresh = self._take_cancel_requests()
            if fresh:
                requests.extend(fresh)
                self._cancelling = True
                cancel.set()
                return
            await self._wake.wait()
            self._wake.clear()

    def _spec(self) -> ScriptSpec:
        spec = self.graph.script
        if spec is None:
            msg = "ScriptDriver needs a graph with a script"
            raise TypeError(msg)
        return spec

    def _process_spec(self, channel: ScriptChannel) -> ProcessSpec:
        spec = self._spec()
        runtime = self.graph.python
        if runtime is None:
            msg = f"script run {self.graph.name!r} has no frozen interpreter; plan again"
            raise PlanError(msg)
        folder = materialise(self.folder.path, self.graph)
        self.graph.python_module(spec.module)  # frozen, or KeyError: plan again
        request = {
            "script": spec.module,
            "sys_path": list(runtime.sys_path),
            "site_dirs": list(runtime.site_dirs),
            "package_dir": str(_PACKAGE_DIR),
        }
        if spec.flow is not None:  # a flow run (docs/flows.md): the harness runs this workflow
            request["flow"] = spec.flow
        script_dir = self.folder.path / "script"
        atomic_write_json(script_dir / "request.json", request, durable=False)
        env = node_environment(self.graph.environment, self._environ, run_id=self.run_id, node=SCRIPT_NODE)
        env.update(channel.environment())
        executable = runtime.interpreter
        frozen = [executable.file.path, *(i.path for i in executable.interpreters)]
        return ProcessSpec.model_validate(
            {
                "argv": (
                    executable.file.path,
                    "-I",
                    str(folder / "_rho_harness.py"),
                    "--script",
                    str(folder / "modules"),
                    str(script_dir / "request.json"),
                ),
                "executable": executable,
                "executable_identities": {p: self.identities[p] for p in frozen if p in self.identities},
                "cwd": self.workspace / spec.cwd[2:] if spec.cwd != "//" else self.workspace,
                "cwd_identity": self.identities.get(spec.cwd),
                "env": env,
                "timeout_seconds": spec.timeout_seconds,
                "max_output_bytes": spec.max_output_bytes,
                "workspace": self.workspace,
            }
        )

    async def _supervise(self, channel: ScriptChannel, requests: list[str]) -> tuple[ProcessResult | str, _LogSink]:
        """Launch the script and wait for it to end, applying cancel requests meanwhile; the
        result is why it did not start when it did not."""
        script_dir = self.folder.path / "script"
        stdout, stderr = _LogSink(script_dir / "stdout"), _LogSink(script_dir / "stderr")

        async def started(pid: int) -> None:
            self._emit(event(EventKind.SCRIPT_LAUNCHED, self.run_id, pid=pid))
            self.journal.sync()

        try:
            spec = await asyncio.to_thread(self._process_spec, channel)
        except (RhoError, OSError, KeyError) as err:
            detail = err.message if isinstance(err, RhoError) else str(err)
            return detail, stderr
        process = asyncio.ensure_future(
            run_process(
                spec,
                stdout_sink=stdout,
                stderr_sink=stderr,
                cancel=self._stop,
                on_started=started,
                handles=self.verified,
            )
        )
        try:
            while not process.done():
                fresh = self._take_cancel_requests()
                if fresh:
                    requests.extend(fresh)
                    self._cancel_everything()
                self._snapshot()
                waker = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({process, waker}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                self._wake.clear()
            try:
                return process.result(), stderr
            except RhoError as err:
                return err.message, stderr
            except OSError as err:  # the script's log could not be written: run_process stopped it
                return f"its output could not be stored ({err})", stderr
        finally:
            stdout.close()
            stderr.close()

    def _cancel_everything(self) -> None:
        self._cancelling = True
        self._stop_script()

    def _stop_script(self) -> None:
        """Stop the script's process group and every running step."""
        self._stop.set()
        for cancel in self._cancels.values():
            cancel.set()

    async def _drain_steps(self) -> None:
        """Steps still running when the script ended are stopped and settled."""
        self._flush_replays()
        if self._inflight:
            for cancel in self._cancels.values():
                cancel.set()
            await asyncio.gather(*self._inflight, return_exceptions=True)

    # -- the channel ----------------------------------------------------------------------------------

    def _handle(self, request: dict[str, Any]) -> Answer | Awaitable[Answer] | None:
        """The answer to a channel request, or (a step that prepares in a thread or executes) the
        task that answers it; a replay is answered right here, without a task or a thread."""
        op = request.get("op")
        if op == "inputs":
            return {"ok": True, "inputs": {decl.name: decl.value for decl in self.graph.inputs}}
        if op == "emit":
            value = request.get("value")
            size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
            if size > MAX_OUTPUT_BYTES:
                message = f"emit_output value is {size} bytes as JSON, more than {MAX_OUTPUT_BYTES}; write big outputs to a file and emit its path"
                return {"ok": False, "error": "invalid", "message": message}
            self._emit(event(EventKind.SCRIPT_OUTPUT, self.run_id, value=value))
            return {"ok": True}
        if op == "offers":
            return self._tracked(self._offers_answer())
        if op == "replayed":
            self._replayed_offer(request)
            return None
        if op != "step":
            return {"ok": False, "error": "invalid", "message": f"unknown request {op!r}"}
        if self._stop.is_set():
            return {"ok": False, "error": "cancelled"}
        call = self._call(request)
        if isinstance(call, dict):
            return call
        try:
            prepared = self._prepare_now(call)
        except StepInvalid as err:
            return self._invalid(call, err)
        if prepared is None:
            return self._tracked(self._prepare_and_answer(call))
        answer = self._answer_call(call, prepared)
        if isinstance(answer, Execute):
            return self._tracked(self._execute_step(call, prepared, answer))
        return answer

    async def _offers_answer(self) -> Answer:
        if self._read is not None:
            await asyncio.shield(self._read)
        offers = {key: {"fingerprint": o.fingerprint, "answer": o.answer} for key, o in self._offers.items()}
        return {"ok": True, "offers": offers}

    def _replayed_offer(self, request: dict[str, Any]) -> None:
        """The script answered a call from its offer: journal the replay (an offer already used, or
        one withdrawn because the call came here, journals nothing)."""
        key = request.get("key")
        if not isinstance(key, str):
            return
        offer = self._offers.pop(key, None)
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
            return {"ok": False, "error": "invalid", "message": "a step request needs a key"}
        if key in self._seen:
            message = f"step {key} was called twice in one execution; give every call its own step_id"
            return {"ok": False, "error": "invalid", "message": message}
        self._seen[key] = "running"
        self._offers.pop(key, None)
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

    def _invalid(self, call: StepCall, err: StepInvalid) -> dict[str, Any]:
        self._seen.pop(call.key, None)
        return {"ok": False, "error": "invalid", "message": err.message}

    async def _prepare_and_answer(self, call: StepCall) -> Answer:
        try:
            prepared = await asyncio.to_thread(self.steps.prepare, call)
        except StepInvalid as err:
            return self._invalid(call, err)
        answer = self._answer_call(call, prepared)
        if isinstance(answer, Execute):
            return await self._execute_step(call, prepared, answer)
        return answer

    def _answer_call(self, call: StepCall, prepared: PreparedStep) -> Answer | Execute:
        """Decide a prepared call: the answer (replay, skip, halt, divergence), or Execute."""
        key = call.key
        stored: dict[int, Any] = {}

        def readable(number: int) -> bool:
            if (key, number) in self._replay_lines:
                return True
            try:
                data = self._stored.pop((key, number), None)
                if data is None:
                    data = read_nofollow(self.folder.attempt_dir(key, number) / "value.json")
                stored[number] = json.loads(data)
            except (OSError, RhoError, ValueError):
                return False
            return isinstance(stored[number], dict)

        history = StepHistory.of(self.state.nodes.get(key), readable=readable)
        verdict = decide_call(history, prepared.digest, call.recovery, self._left.get(key))
        if isinstance(verdict, Replay):
            self._seen[key] = "success"
            # journaled just after the answer is written (before the loop reads anything more), so
            # that the script goes on while the owner journals: nothing new is decided by it
            replayed = event(
                EventKind.STEP_REPLAYED, self.run_id, node=key, attempt=verdict.attempt, digest=prepared.digest
            )
            self._replayed_later(replayed)
            line = self._replay_lines.pop((key, verdict.attempt), None)
            return line if line is not None else _answer(key, "success", stored[verdict.attempt], replayed=True)
        if isinstance(verdict, Skip):
            self._left.pop(key, None)
            self._seen[key] = "skipped"
            record = self.state.nodes[key].current
            state = record.state if record is not None and record.state else "skipped"
            self._emit(
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
            return _answer(key, state, payload or {}, replayed=True)
        if isinstance(verdict, Halt):
            self._seen[key] = "halted"
            self._halted.append({"step": key, "why": verdict.why})
            self._emit(event(EventKind.STEP_HALTED, self.run_id, node=key, why=verdict.why))
            asyncio.get_running_loop().call_soon(self._stop_script)  # after this answer is written
            return {"ok": False, "error": "decision_required", "step": key, "why": verdict.why}
        if isinstance(verdict, Diverge):
            self._seen[key] = "diverged"
            self._diverged.append((key, verdict.stored_digest, prepared.digest))
            self._emit(
                event(
                    EventKind.STEP_DIVERGED,
                    self.run_id,
                    node=key,
                    stored_digest=verdict.stored_digest,
                    digest=prepared.digest,
                )
            )
            asyncio.get_running_loop().call_soon(self._stop_script)
            return {
                "ok": False,
                "error": "divergence",
                "step": key,
                "stored_digest": verdict.stored_digest,
                "digest": prepared.digest,
            }
        if verdict.decided:
            self._left.pop(key, None)
        return verdict

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
            self._emit(*records)

    def _prepare_now(self, call: StepCall) -> PreparedStep | None:
        if self._quick is None:
            self._quick = (self.steps if isinstance(self.steps, QuickSteps) else None,)
        quick = self._quick[0]
        return quick.prepare_now(call) if quick is not None else None

    async def _execute_step(self, call: StepCall, prepared: PreparedStep, verdict: Execute) -> dict[str, Any]:
        key = call.key
        record = self.state.nodes.get(key)
        number = (record.attempt if record is not None else 0) + 1
        step: dict[str, Any] = {
            "kind": call.kind,
            "digest": prepared.digest,
            "facts": prepared.facts,
            "after": list(call.after),
            "recovery": call.recovery,
        }
        if len(json.dumps(call.args, ensure_ascii=False)) <= _JOURNALED_ARGS:
            step["args"] = call.args  # what a later execution's replay offer is checked from
        extra = {"decision": "rerun"} if verdict.decided else {}
        cancel = CancelSignal()
        self._cancels[key] = cancel
        self._emit(event(EventKind.NODE_LAUNCHED, self.run_id, node=key, attempt=number, step=step, **extra))
        self.journal.sync()
        failpoint("script_step_launched")
        try:
            state, message, exit_record, payload = await self._run_step(call, prepared, number, cancel)
        finally:
            self._cancels.pop(key, None)
        self._emit(
            event(
                EventKind.NODE_FINISHED,
                self.run_id,
                node=key,
                attempt=number,
                state=state.value,
                exit=exit_record,
                message=message,
            )
        )
        failpoint("script_step_finished")
        self._seen[key] = state.value
        if state is NodeState.CANCELLATION and self._stop.is_set():
            return {"ok": False, "error": "cancelled"}
        answer = _answer(key, state.value, payload, replayed=False)
        if message and state is not NodeState.SUCCESS:
            answer["message"] = message
        return answer

    async def _run_step(
        self, call: StepCall, prepared: PreparedStep, number: int, cancel: CancelSignal
    ) -> tuple[NodeState, str, dict[str, Any] | None, dict[str, Any]]:
        """Ask when the mode says so, run the step, store its value: (state, message, exit, payload)."""
        key = call.key
        empty: dict[str, Any] = {"output": None, "value": None}
        launch = self._step_launch(call, prepared, number)
        facts = prepared.facts if self.gate.needs_facts(launch) else None
        refusal = await self.gate.admit(launch, facts, cancel=cancel)
        if refusal is not None:
            return refusal.state, refusal.message, None, empty
        attempt_dir = self.folder.attempt_dir(key, number)
        await asyncio.to_thread(ensure_private_dir, attempt_dir, below=self.folder.path)

        async def started(pid: int) -> None:
            self._emit(event(EventKind.PROCESS_STARTED, self.run_id, node=key, attempt=number, pid=pid))

        try:
            result = await self.steps.run(prepared, attempt_dir=attempt_dir, cancel=cancel, on_started=started)
        except Exception as err:  # a step runner bug must end the step, not the run
            return NodeState.FAILURE, f"step runner error: {type(err).__name__}: {err}", None, empty
        refusal = await self.gate.review(launch, facts, state=result.state, exit=result.exit)
        if refusal is not None:
            result = replace(result, state=refusal.state, message=refusal.message)
        payload = {"output": result.output, "value": result.value}
        try:  # before node_finished: a journaled success always has its value (a failure's is kept too)
            await asyncio.to_thread(atomic_write_json, attempt_dir / "value.json", payload)
        except (OSError, RhoError, TypeError, ValueError) as err:
            return NodeState.FAILURE, f"the step's result could not be stored: {err}", result.exit, empty
        return result.state, result.message, result.exit, payload

    def _step_launch(self, call: StepCall, prepared: PreparedStep, number: int) -> Launch:
        """A step call as a launch: command steps (a flow's tool calls too) are process launches,
        agent steps are agents (read-only ones start in every mode), model steps one completion."""
        kinds = {"command": LaunchKind.COMMAND, "agent": LaunchKind.AGENT, "model": LaunchKind.MODEL}
        budget = call.args.get("timeout_seconds") if isinstance(call.args, dict) else None
        return Launch(
            kind=kinds.get(call.kind, LaunchKind.COMMAND),
            node=call.key,
            attempt=number,
            read_only=call.kind == "agent" and prepared.facts.get("access") == "read_only",
            approval_seconds=float(budget or 3600),
        )


@dataclass(frozen=True)
class _Offer:
    """A replay the script process may answer itself (rho_notebook.script._channel)."""

    fingerprint: str
    answer: dict[str, Any]
    attempt: int
    digest: str


def _replay_line(key: str, data: bytes) -> bytes | None:
    """The channel's answer line replaying a success whose ``value.json`` holds ``data``; None when
    that is not a JSON object (the replay then finds it unreadable and halts)."""
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    return encode_answer(_answer(key, NodeState.SUCCESS.value, payload, replayed=True))


def _answer(key: str, state: str, payload: dict[str, Any], *, replayed: bool) -> dict[str, Any]:
    return {
        "ok": True,
        "key": key,
        "state": state,
        "output": payload.get("output"),
        "value": payload.get("value"),
        "replayed": replayed,
    }
