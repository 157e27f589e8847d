"""Evaluating workflow source in the supervised planning worker (the parent side of the channel).

The parent owns everything the worker may not do: it reads modules (label rules, no symlinks),
validates inputs against the declaration, enforces the wall-time budget by killing the worker,
and turns worker diagnostics into :mod:`rho_notebook.errors` with file:line:column.

:func:`talk_to_worker` is the one way to run a worker (planning here, item-graph code steps in
:mod:`rho_notebook.source.code_step`): the process's warm worker when it keeps one
(:mod:`rho_notebook.source.warm`), else a fresh process for the request; stopped at the wall
budget, and killed and reaped however a fresh worker's conversation ends, cancellation included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rho_notebook.errors import Diagnostic, InvalidWorkflow, LimitError, RhoError, SourceError, WorkerStopped
from rho_notebook.source.labels import SourceReader, SourceText
from rho_notebook.source.limits import Limits
from rho_notebook.source.warm import warm_pool
from rho_notebook.source.workers import WORKER_PATH, PipeChannel, start_worker, stop_worker, wall_diagnostic

__all__ = [
    "Evaluation",
    "evaluate_source",
    "WORKER_PATH",
    "InputChecker",
    "WorkerChannel",
    "talk_to_worker",
]

_STARTUP_ALLOWANCE_S = 5.0
_T = TypeVar("_T")

WorkerChannel = PipeChannel
"""The parent's end of a worker's channel: ``await send(frame)``, ``await receive()``."""

InputChecker = Callable[[dict[str, Any]], dict[str, Any]]
"""Validates the declared inputs (raw tagged dict) and returns the values build() receives;
raises InvalidWorkflow (InputError) on missing, unknown or wrong-typed inputs."""


@dataclass
class Evaluation:
    """What one evaluation returned: the raw tagged graph and everything needed to freeze it."""

    graph: dict[str, Any]
    declared_inputs: dict[str, Any]
    input_values: dict[str, Any]
    sources: list[SourceText]
    """Every module evaluated, entry first, then in load order."""
    stats: dict[str, int] = field(default_factory=dict)

    def display(self, label: str | None) -> str | None:
        for source in self.sources:
            if source.label == label:
                return source.display
        return label


async def talk_to_worker(
    talk: Callable[[WorkerChannel], Awaitable[_T]],
    *,
    worker_limits: dict[str, int],
) -> _T:
    """Run ``talk`` with a worker under the wall budget and return what it returns.

    The worker is the process's warm one when it keeps one, else a fresh process. A fresh worker
    is killed and reaped however this ends; a warm one goes back to the pool only when its request
    ended cleanly (:meth:`~rho_notebook.source.warm.WorkerPool.release`), else it is killed too.

    Raises
    ------
    WorkerStopped
        When the wall budget (plus a start-up allowance) ran out or the worker died.
    """
    pool = warm_pool()
    worker = start_worker(worker_limits, warm=False) if pool is None else pool.acquire(worker_limits)
    channel = worker.channel
    wall_s = worker_limits["evaluator_wall_ms"] / 1000
    try:
        channel.open_call()
        return await asyncio.wait_for(talk(channel), timeout=wall_s + _STARTUP_ALLOWANCE_S)
    except TimeoutError:
        raise WorkerStopped(wall_diagnostic(worker_limits, int((wall_s + _STARTUP_ALLOWANCE_S) * 1000))) from None
    finally:
        channel.close_call()
        if pool is None or pool is not warm_pool() or not pool.release(worker):
            await stop_worker(worker)


async def evaluate_source(
    entry: SourceText,
    *,
    reader: SourceReader,
    check_inputs: InputChecker,
    limits: Limits,
) -> Evaluation:
    """Evaluate ``entry`` in a planning worker (:func:`talk_to_worker`) and return the raw graph.

    Raises
    ------
    SourceError, InputError, LimitError
        With every diagnostic pointing at the module (its display name), line and column.
    """
    worker_limits = limits.worker_limits()
    sources: dict[str, SourceText] = {entry.label: entry}
    try:
        return await talk_to_worker(
            lambda chan: _converse(chan, entry, sources, reader, check_inputs, worker_limits),
            worker_limits=worker_limits,
        )
    except WorkerStopped as stopped:
        raise _stopped_error(stopped.diagnostic, entry) from None


async def _converse(
    chan: WorkerChannel,
    entry: SourceText,
    sources: dict[str, SourceText],
    reader: SourceReader,
    check_inputs: InputChecker,
    worker_limits: dict[str, int],
) -> Evaluation:
    await chan.send({"op": "evaluate", "entry": entry.label, "text": entry.text, "limits": worker_limits})
    declared: dict[str, Any] = {}
    values: dict[str, Any] = {}
    input_error: InvalidWorkflow | None = None
    while True:
        message = await chan.receive()
        op = message["op"]
        if op == "load":
            label = message["label"]
            try:
                source = reader.read(label)
            except SourceError as err:
                found = err.diagnostics()[0]
                await chan.send({"op": "source_error", "rule": found.rule, "message": found.message})
                continue
            sources[label] = source
            await chan.send({"op": "source", "label": label, "text": source.text})
        elif op == "declared":
            declared = message["inputs"]
            try:
                values = check_inputs(declared)
            except InvalidWorkflow as err:
                input_error = err
                await chan.send({"op": "inputs_error"})
                continue
            await chan.send({"op": "inputs", "values": values})
        elif op == "done" and input_error is not None:
            raise input_error
        elif op == "error":
            raise _diagnostic_error(message["diagnostic"], sources)
        elif op == "result":
            return Evaluation(
                graph=message["graph"],
                declared_inputs=declared,
                input_values=values,
                sources=list(sources.values()),
                stats=message["stats"],
            )
        else:
            raise RhoError(f"planning worker sent an unknown frame {op!r}")


def _display(label: str | None, sources: dict[str, SourceText]) -> str | None:
    if label is None:
        return None
    source = sources.get(label)
    return source.display if source else label


def _diagnostic_error(found: dict[str, Any], sources: dict[str, SourceText]) -> InvalidWorkflow:
    file = _display(found.get("file"), sources)
    if "budget" in found:
        return LimitError(
            budget=found["budget"],
            limit=found["limit"],
            measured=found["measured"],
            file=file,
            line=found.get("line"),
            column=found.get("column"),
            detail=found.get("message", ""),
        )
    message = found["message"]
    for label, source in sources.items():
        message = message.replace(label, source.display) if label != source.display else message
    return SourceError(message, rule=found["rule"], file=file, line=found.get("line"), column=found.get("column"))


def _stopped_error(found: dict[str, Any], entry: SourceText) -> InvalidWorkflow:
    if "budget" in found:
        return LimitError(
            budget=found["budget"],
            limit=found["limit"],
            measured=found["measured"],
            file=entry.display,
            detail=found["message"],
        )
    return InvalidWorkflow([Diagnostic(rule=found["rule"], message=found["message"], file=entry.display)])
