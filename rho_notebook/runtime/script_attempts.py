"""One attempt of a script step: launched durably, passed through the launch gate, run, stored.

``node_launched`` (with the step's kind, digest, facts, ``after`` and recovery, and its arguments
when they are small enough to check a later replay offer from) is fsynced BEFORE the step's work
starts (one fsync, as a graph node's launch); a journaled success always has its value
(``{"output", "value"}``):

* a small one (``value.json`` at most :data:`~rho_notebook.exec.base.JOURNALED_VALUE_BYTES`) travels
  in the ``node_finished`` record itself (:data:`STEP_VALUE_FIELD`), which becomes durable with the
  next launch's fsync as every record does (group commit, :mod:`rho_notebook.runtime.driver`); its
  ``value.json`` is a copy the run's artifact writer makes, atomically but not durably, without
  anyone waiting (as a node's ``stdout`` and ``exit.json`` are), and only when the step wrote
  something else (a silent step gets no folder, as a silent command node gets none). A replay reads the copy, and the
  record when the copy is gone or torn (a machine that stopped before writing it back:
  :mod:`rho_notebook.runtime.script_values`). So a step waits on the fsyncs a command node waits on,
  and on none for its value file (two before, each a journal commit of the filesystem that the next
  launch's fsync then waited behind).
* a bigger one, a failure's, and any value of a step runner other than :class:`StepRunner` (a
  recording) is written to ``value.json`` durably before ``node_finished`` is journaled.

A :class:`StepRunner` gets the run's lazily made attempt folder (a command that succeeds silently
makes none) and the run's kept verified descriptors, as a graph node's executor does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rho_notebook.errors import BudgetExceeded, RhoError
from rho_notebook.exec.base import JOURNALED_VALUE_BYTES
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.state import NodeState
from rho_notebook.policy.gate import Launch
from rho_notebook.policy.permission import LaunchKind
from rho_notebook.runtime.execution import Execution
from rho_notebook.runtime.failpoints import failpoint
from rho_notebook.runtime.script_steps import PreparedStep, StepCall, StepResult, StepRunner
from rho_notebook.store.artifacts import AttemptFiles
from rho_notebook.store.files import atomic_write_json, ensure_private_dir, json_bytes
from rho_notebook.store.layout import VALUE_FILE

if TYPE_CHECKING:
    from rho_notebook.runtime.script_fork import PlannedFork

__all__ = ["STEP_VALUE_FIELD", "QuickSteps", "StepAttempts", "StepEnd", "Steps"]

_JOURNALED_ARGS = 16 * 1024
"""Largest step arguments (as JSON characters) journaled with the launch; a step with bigger ones
(a long prompt) is replayed by asking the runner, never from an offer."""

_EMPTY: dict[str, Any] = {"output": None, "value": None}

STEP_VALUE_FIELD = "step_value"
"""The ``node_finished`` field holding a success's ``{"output", "value"}`` when it is small (see the
module docstring)."""


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


@dataclass(frozen=True)
class StepEnd:
    """How one executed step attempt ended (journaled as its ``node_finished``)."""

    state: NodeState
    message: str
    payload: dict[str, Any]
    """``{"output", "value"}`` as stored (empty values when nothing was stored)."""


@dataclass
class StepAttempts:
    """Executes step attempts of one execution with its journal, gate and cancel signals."""

    execution: Execution
    steps: Steps
    _fork: PlannedFork | None = field(default=None, init=False)
    """A fork's source steps, once one of its taken steps had to be taken late (:meth:`_fork_take`)."""

    async def execute(self, call: StepCall, prepared: PreparedStep, *, decided: bool) -> StepEnd:
        """Launch a new attempt of ``call`` (``decided``: a person's ``rerun`` authorised it)."""
        ex = self.execution
        key = call.key
        record = ex.state.nodes.get(key)
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
        extra = {"decision": "rerun"} if decided else {}
        taken = None if decided else await self._fork_take(key, prepared, step)
        if taken is not None:
            return taken
        cancel = CancelSignal()
        ex.cancels[key] = cancel
        ex.emit(event(EventKind.NODE_LAUNCHED, ex.run_id, node=key, attempt=number, step=step, **extra))
        ex.journal.sync()
        failpoint("script_step_launched")
        try:
            state, message, exit_record, payload, inline = await self._run(call, prepared, number, cancel)
        finally:
            ex.cancels.pop(key, None)
        stored = {STEP_VALUE_FIELD: payload} if inline else {}
        ex.emit(
            event(
                EventKind.NODE_FINISHED,
                ex.run_id,
                node=key,
                attempt=number,
                state=state.value,
                exit=exit_record,
                message=message,
                **stored,
            )
        )
        failpoint("script_step_finished")
        return StepEnd(state, message, payload)

    async def _fork_take(self, key: str, prepared: PreparedStep, step: dict[str, Any]) -> StepEnd | None:
        """A fork's step that is taken from its source run (or a person's edit) but has no record
        here, its copy never journaled (a crash between the fork's creation and its copies, or a
        front end that created the run from the derived plan alone): take it now, from the source
        run, checked against the fork record's digests (runtime/script_fork.py). When that cannot
        be done, fail the step closed: nothing is launched for it. None for any other step."""
        ex = self.execution
        fork = ex.graph.fork
        if fork is None or key in ex.state.nodes:
            return None
        if key not in fork.taken_names() and not (fork.edit is not None and key == fork.node):
            return None
        from rho_notebook.runtime.script_fork import planned_fork, take_step  # (it imports this module)

        try:
            if self._fork is None:  # the source run is read once per execution
                self._fork = await asyncio.to_thread(planned_fork, ex.layout, fork)
            records, payload = await asyncio.to_thread(
                take_step, self._fork, ex.folder, ex.run_id, key, prepared.digest
            )
        except (RhoError, OSError) as err:
            why = err.message if isinstance(err, RhoError) else str(err)
            message = f"step {key} is taken from run {fork.source_run} in this fork, but it cannot be: {why}; nothing was launched"
            failed = {"state": NodeState.FAILURE.value, "exit": None, "message": message}
            ex.emit(
                event(EventKind.NODE_LAUNCHED, ex.run_id, node=key, attempt=1, step=step),
                event(EventKind.NODE_FINISHED, ex.run_id, node=key, attempt=1, **failed),
            )
            return StepEnd(NodeState.FAILURE, message, _EMPTY)
        ex.emit(*records)
        return StepEnd(NodeState.SUCCESS, str(records[-1]["message"]), payload)

    async def _run(
        self, call: StepCall, prepared: PreparedStep, number: int, cancel: CancelSignal
    ) -> tuple[NodeState, str, dict[str, Any] | None, dict[str, Any], bool]:
        """Ask when the mode says so, run the step, store its value: (state, message, exit, payload,
        whether the payload is journaled inline with ``node_finished``)."""
        ex = self.execution
        key = call.key
        launch = _step_launch(call, prepared, number)
        facts = prepared.facts if ex.gate.needs_facts(launch) else None
        refusal = await ex.gate.admit(launch, facts, cancel=cancel)
        if refusal is not None:
            return refusal.state, refusal.message, None, _EMPTY, False
        attempt_dir = ex.folder.attempt_dir(key, number)
        runner = self.steps if isinstance(self.steps, StepRunner) else None
        files = ex.artifacts.files(attempt_dir) if runner is not None else None

        async def started(pid: int) -> None:
            ex.emit(event(EventKind.PROCESS_STARTED, ex.run_id, node=key, attempt=number, pid=pid))

        try:
            if runner is not None:  # the run's lazy folder and kept verified descriptors, as a node's
                from rho_notebook.runtime.spend import AttemptSpend  # model calls report to the ledger

                spend = AttemptSpend(ex.run_id, key, number, ex.state, ex.emit, ex.journal.sync, guard=ex.spend_guard)
                result = await runner.run(
                    prepared,
                    attempt_dir=attempt_dir,
                    cancel=cancel,
                    on_started=started,
                    files=files,
                    verified=ex.verified,
                    model_calls=spend,
                )
            else:
                await asyncio.to_thread(ensure_private_dir, attempt_dir, below=ex.folder.path)
                result = await self.steps.run(prepared, attempt_dir=attempt_dir, cancel=cancel, on_started=started)
        except BudgetExceeded as err:  # no failure: the script driver halts the run (runtime/budget.py)
            return NodeState.CANCELLATION, err.message, None, _EMPTY, False
        except Exception as err:  # a step runner bug must end the step, not the run
            return NodeState.FAILURE, f"step runner error: {type(err).__name__}: {err}", None, _EMPTY, False
        refusal = await ex.gate.review(launch, facts, state=result.state, exit=result.exit)
        if refusal is not None:
            result = replace(result, state=refusal.state, message=refusal.message)
        payload = {"output": result.output, "value": result.value}
        try:  # before node_finished: a journaled success always has its value (a failure's is kept too)
            success = result.state is NodeState.SUCCESS
            inline = await _store_value(attempt_dir, files, payload, inline=success)
        except (OSError, RhoError, TypeError, ValueError) as err:
            return NodeState.FAILURE, f"the step's result could not be stored: {err}", result.exit, _EMPTY, False
        return result.state, result.message, result.exit, payload, inline


def _step_launch(call: StepCall, prepared: PreparedStep, number: int) -> Launch:
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


async def _store_value(attempt_dir: Path, files: AttemptFiles | None, payload: dict[str, Any], *, inline: bool) -> bool:
    """Store a step's ``value.json``; True when ``payload`` is small enough to journal with
    ``node_finished`` (``inline`` allows it), the file then being a copy written without waiting.

    Otherwise the file is written durably before ``node_finished``; with ``files`` its folder is
    made first, without them the caller made it.
    """
    if inline and files is not None and _within(payload, JOURNALED_VALUE_BYTES) is not None:
        data = json_bytes(payload, compact=True)  # (indented JSON takes the slow pure-Python encoder)
        if len(data) <= JOURNALED_VALUE_BYTES:
            if files.prepared:  # a silent step gets no folder for its copy, as a silent command node
                files.write_later(VALUE_FILE, data)
            return True
    if files is not None:
        await files.ready()
    await asyncio.to_thread(atomic_write_json, attempt_dir / VALUE_FILE, payload)
    return False


def _within(value: Any, budget: int) -> int | None:
    """What is left of ``budget`` after a rough size of ``value`` (its strings and items), or None
    once it is spent: a cheap bound before encoding on the loop."""
    if isinstance(value, str):
        left = budget - len(value)
    elif isinstance(value, dict):
        left = budget - 2 * len(value)
        for name, item in value.items():
            if left < 0:
                return None
            found = _within(item, left - len(str(name)))
            if found is None:
                return None
            left = found
    elif isinstance(value, list):
        left = budget - len(value)
        for item in value:
            if left < 0:
                return None
            found = _within(item, left)
            if found is None:
                return None
            left = found
    else:
        left = budget - 8
    return left if left >= 0 else None
