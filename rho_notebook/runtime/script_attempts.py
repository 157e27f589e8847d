"""One attempt of a script step: launched durably, passed through the launch gate, run, stored.

``node_launched`` (with the step's kind, digest, facts, ``after`` and recovery, and its arguments
when they are small enough to check a later replay offer from) is fsynced BEFORE the step's work
starts; the step's ``value.json`` (``{"output", "value"}``) is written before ``node_finished``,
so that a journaled success always has its value.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rho_notebook.errors import RhoError
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.state import NodeState
from rho_notebook.policy.gate import Launch
from rho_notebook.policy.permission import LaunchKind
from rho_notebook.runtime.execution import Execution
from rho_notebook.runtime.failpoints import failpoint
from rho_notebook.runtime.script_steps import PreparedStep, StepCall, StepResult
from rho_notebook.store.files import atomic_write_json, ensure_private_dir
from rho_notebook.store.layout import VALUE_FILE

__all__ = ["QuickSteps", "StepAttempts", "StepEnd", "Steps"]

_JOURNALED_ARGS = 16 * 1024
"""Largest step arguments (as JSON characters) journaled with the launch; a step with bigger ones
(a long prompt) is replayed by asking the runner, never from an offer."""

_EMPTY: dict[str, Any] = {"output": None, "value": None}


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
        cancel = CancelSignal()
        ex.cancels[key] = cancel
        ex.emit(event(EventKind.NODE_LAUNCHED, ex.run_id, node=key, attempt=number, step=step, **extra))
        ex.journal.sync()
        failpoint("script_step_launched")
        try:
            state, message, exit_record, payload = await self._run(call, prepared, number, cancel)
        finally:
            ex.cancels.pop(key, None)
        ex.emit(
            event(
                EventKind.NODE_FINISHED,
                ex.run_id,
                node=key,
                attempt=number,
                state=state.value,
                exit=exit_record,
                message=message,
            )
        )
        failpoint("script_step_finished")
        return StepEnd(state, message, payload)

    async def _run(
        self, call: StepCall, prepared: PreparedStep, number: int, cancel: CancelSignal
    ) -> tuple[NodeState, str, dict[str, Any] | None, dict[str, Any]]:
        """Ask when the mode says so, run the step, store its value: (state, message, exit, payload)."""
        ex = self.execution
        key = call.key
        launch = _step_launch(call, prepared, number)
        facts = prepared.facts if ex.gate.needs_facts(launch) else None
        refusal = await ex.gate.admit(launch, facts, cancel=cancel)
        if refusal is not None:
            return refusal.state, refusal.message, None, _EMPTY
        attempt_dir = ex.folder.attempt_dir(key, number)
        await asyncio.to_thread(ensure_private_dir, attempt_dir, below=ex.folder.path)

        async def started(pid: int) -> None:
            ex.emit(event(EventKind.PROCESS_STARTED, ex.run_id, node=key, attempt=number, pid=pid))

        try:
            result = await self.steps.run(prepared, attempt_dir=attempt_dir, cancel=cancel, on_started=started)
        except Exception as err:  # a step runner bug must end the step, not the run
            return NodeState.FAILURE, f"step runner error: {type(err).__name__}: {err}", None, _EMPTY
        refusal = await ex.gate.review(launch, facts, state=result.state, exit=result.exit)
        if refusal is not None:
            result = replace(result, state=refusal.state, message=refusal.message)
        payload = {"output": result.output, "value": result.value}
        try:  # before node_finished: a journaled success always has its value (a failure's is kept too)
            await asyncio.to_thread(atomic_write_json, attempt_dir / VALUE_FILE, payload)
        except (OSError, RhoError, TypeError, ValueError) as err:
            return NodeState.FAILURE, f"the step's result could not be stored: {err}", result.exit, _EMPTY
        return result.state, result.message, result.exit, payload


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
