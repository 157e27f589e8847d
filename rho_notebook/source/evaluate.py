"""Evaluating workflow source in the supervised planning worker (the parent side of the channel).

The parent owns everything the worker may not do: it reads modules (label rules, no symlinks),
validates inputs against the declaration, enforces the wall-time budget by killing the worker,
and turns worker diagnostics into :mod:`rho_notebook.errors` with file:line:column.

:func:`talk_to_worker` is the one way to run a worker (planning here, item-graph code steps in
:mod:`rho_notebook.source.code_step`): a fresh process per request, stopped at the wall budget and
killed and reaped however the conversation ends, cancellation included.
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rho_notebook.errors import Diagnostic, InvalidWorkflow, LimitError, RhoError, SourceError, WorkerStopped
from rho_notebook.source.labels import SourceReader, SourceText
from rho_notebook.source.limits import Limits

__all__ = [
    "Evaluation",
    "evaluate_source",
    "WORKER_PATH",
    "InputChecker",
    "WorkerChannel",
    "talk_to_worker",
]

WORKER_PATH = Path(__file__).with_name("_worker.py")
_HEADER = struct.Struct(">I")
_STARTUP_ALLOWANCE_S = 5.0
_STDERR_KEEP = 16_384
_WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
_T = TypeVar("_T")

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


class WorkerChannel:
    """The parent's end of the framed JSON channel to one worker process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        stdin = self.process.stdin
        if stdin is None:
            raise RhoError("planning worker has no input channel")
        stdin.write(_HEADER.pack(len(data)) + data)
        await stdin.drain()

    async def receive(self) -> dict[str, Any]:
        """The next frame; if the worker closed its channel, wait for it to exit and say how."""
        stdout = self.process.stdout
        if stdout is None:
            raise RhoError("planning worker has no output channel")
        try:
            head = await stdout.readexactly(_HEADER.size)
            (size,) = _HEADER.unpack(head)
            payload = await stdout.readexactly(size)
        except asyncio.IncompleteReadError:
            await self.process.wait()
            raise _WorkerDied(self.process.returncode) from None
        result: dict[str, Any] = json.loads(payload)
        return result


async def talk_to_worker(
    talk: Callable[[WorkerChannel], Awaitable[_T]],
    *,
    worker_limits: dict[str, int],
) -> _T:
    """Start a fresh worker, run ``talk`` with it under the wall budget and return what it returns.

    The worker is killed and reaped however this ends: a result, an error, the wall budget or the
    cancellation of the awaiting task (which then propagates).

    Raises
    ------
    WorkerStopped
        When the wall budget (plus a start-up allowance) ran out or the worker died.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        str(WORKER_PATH),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_WORKER_ENV,
        start_new_session=True,
    )
    stderr_task = asyncio.ensure_future(_read_bounded(process))
    wall_s = worker_limits["evaluator_wall_ms"] / 1000
    try:
        return await asyncio.wait_for(talk(WorkerChannel(process)), timeout=wall_s + _STARTUP_ALLOWANCE_S)
    except TimeoutError:
        measured = int((wall_s + _STARTUP_ALLOWANCE_S) * 1000)
        raise WorkerStopped(
            {
                "rule": "limit.evaluator_wall_ms",
                "budget": "evaluator_wall_ms",
                "limit": worker_limits["evaluator_wall_ms"],
                "measured": measured,
                "message": "the planning worker was stopped",
            }
        ) from None
    except _WorkerDied as died:
        stderr = await stderr_task
        raise WorkerStopped(_death_diagnostic(died.returncode, stderr, worker_limits)) from None
    finally:
        if process.returncode is None:
            try:
                process.kill()
            except ProcessLookupError:
                pass
        await process.wait()
        if not stderr_task.done():
            stderr_task.cancel()


async def evaluate_source(
    entry: SourceText,
    *,
    reader: SourceReader,
    check_inputs: InputChecker,
    limits: Limits,
) -> Evaluation:
    """Evaluate ``entry`` in a fresh worker process and return the raw graph.

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


class _WorkerDied(Exception):
    def __init__(self, returncode: int | None) -> None:
        super().__init__(f"planning worker exited with {returncode}")
        self.returncode = returncode


async def _read_bounded(process: asyncio.subprocess.Process) -> bytes:
    stream = process.stderr
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < _STDERR_KEEP:
            kept += chunk[: _STDERR_KEEP - len(kept)]
    return bytes(kept)


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


_ALLOC = re.compile(rb"memory allocation of (\d+) bytes failed")


def _death_diagnostic(returncode: int | None, stderr: bytes, worker_limits: dict[str, int]) -> dict[str, Any]:
    """Why a worker died, as a worker diagnostic: a memory or CPU budget, or a crash."""
    alloc = _ALLOC.search(stderr)
    if alloc or b"MemoryError" in stderr:
        limit = worker_limits["evaluator_address_space"]
        requested = int(alloc.group(1)) if alloc else 0
        return {
            "rule": "limit.evaluator_address_space",
            "budget": "evaluator_address_space",
            "limit": limit,
            "measured": limit + requested,
            "message": f"the planning worker's address space reached its limit and a further {requested}-byte request failed",
        }
    if returncode is not None and returncode in (-24, -9):  # SIGXCPU, or the kernel's kill at the hard limit
        return {
            "rule": "limit.evaluator_wall_ms",
            "budget": "evaluator_wall_ms",
            "limit": worker_limits["evaluator_wall_ms"],
            "measured": worker_limits["evaluator_wall_ms"],
            "message": "the planning worker hit its CPU-time limit",
        }
    tail = stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
    return {
        "rule": "worker.crashed",
        "message": f"the planning worker exited unexpectedly (code {returncode}): {' | '.join(tail)}",
    }


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
