"""One supervised process attempt, shared by the command and the Python operations.

A :class:`ProcessOperation` is what every process launch runs, whoever asked for it (a command,
shell or Python node, an item-graph command step, a script's command step).
:func:`supervise` turns it into a :class:`~rho_notebook.exec.process.ProcessSpec`, launches it with
:func:`~rho_notebook.exec.process.run_process`, streams stdout and stderr into the attempt's
``stdout``/``stderr`` artifacts (created on the first byte), turns the ways a process can end
without exiting (cancelled, timed out, killed, abnormal, not started) into attempt results, hands
an exit to the executor's own judgement, and leaves ``exit.json`` in a folder that exists anyway.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rho_notebook.errors import RhoError
from rho_notebook.exec.base import Attempt, AttemptResult, node_environment
from rho_notebook.exec.process import ProcessResult, ProcessSpec, Starter, run_process
from rho_notebook.model.graph import FrozenExecutable
from rho_notebook.model.schema import Schema
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import json_bytes
from rho_notebook.store.layout import EXIT_FILE

__all__ = ["Ended", "FileSink", "Judge", "ProcessOperation", "conclude", "exit_record", "process_spec", "supervise"]

_STDERR_TAIL = 4096
"""Bytes of stderr kept in memory for a failure message (the whole stream is in the artifact)."""


class _OutputNotStored(Exception):
    """A retained output chunk could not be written to its stream file; run_process then stops the
    process group (a sink failure), and the attempt ends abnormally."""


class FileSink:
    """Writes a stream's retained bytes to its artifact file, created on the first byte (a silent
    command leaves no empty files behind, which keeps a launch to the syscalls it needs).

    ``kept`` holds all of stdout's retained bytes (a typed command's value is parsed from them);
    ``tail`` the last few KiB of stderr."""

    def __init__(self, stream: str, ctx: Attempt) -> None:
        self.fd: int | None = None
        self.created = False
        self.stream = stream
        self.ctx = ctx
        self.kept = bytearray() if stream == "stdout" else None
        self.tail = b""

    async def __call__(self, chunk: bytes) -> None:
        try:
            if self.fd is None:
                folder = await self.ctx.directory()
                self.fd = os.open(
                    folder / self.stream, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                self.created = True
            view = memoryview(chunk)
            while view:
                view = view[os.write(self.fd, view) :]
        except (RhoError, OSError) as err:
            detail = err.message if isinstance(err, RhoError) else (err.strerror or str(err))
            raise _OutputNotStored(f"{self.stream} could not be stored ({detail})") from err
        if self.kept is not None:
            self.kept += chunk
        else:
            self.tail = (self.tail + chunk)[-_STDERR_TAIL:]
        if self.ctx.on_output is not None:
            await self.ctx.on_output(self.stream, chunk)

    def close(self) -> None:
        """Close the stream file once; the descriptor is forgotten first, so a failing close is not retried."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def exit_record(result: ProcessResult) -> dict[str, Any]:
    """How a supervised process ended, as journaled (``node_finished.exit``, ``exit.json``)."""
    return {
        "kind": result.kind,
        "code": result.exit_code,
        "signal": result.signal,
        "pid": result.pid,
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "duration_ms": round(result.duration_ms, 3),
        "detail": result.detail,
    }


@dataclass(frozen=True, kw_only=True)
class ProcessOperation:
    """One launch of a frozen executable, as a command node, an item-graph command step, a script's
    command step or a Python node asks for it."""

    name: str
    """The node's name or the step's key (``RHO_NODE`` of the process)."""
    executable: FrozenExecutable
    """The program (Python: the interpreter), pinned to the plan's or the step's freeze."""
    argv: tuple[str, ...]
    """The exact argv (argv[0] is the display name)."""
    cwd: str
    """``//``-relative working directory."""
    timeout_seconds: int
    max_output_bytes: int
    output: Schema | None = None
    """The schema stdout's JSON value must match (command nodes with ``stdout_json``)."""


def process_spec(ctx: Attempt, operation: ProcessOperation, *, kill_grace_seconds: float) -> ProcessSpec:
    """The launch facts of ``operation``: its executable (and interpreters) pinned to the identities
    the plan or the step recorded, its ``cwd`` and the run's environment policy."""
    executable, cwd = operation.executable, operation.cwd
    frozen = [executable.file.path, *(i.path for i in executable.interpreters)]
    return ProcessSpec.model_validate(
        {
            "argv": operation.argv,
            "executable": executable,
            "executable_identities": {p: ctx.identities[p] for p in frozen if p in ctx.identities},
            "cwd": ctx.workspace / cwd[2:] if cwd != "//" else ctx.workspace,
            "cwd_identity": ctx.identities.get(cwd),
            "env": node_environment(ctx.environment, ctx.source_environ, run_id=ctx.run_id, node=operation.name),
            "timeout_seconds": operation.timeout_seconds,
            "max_output_bytes": operation.max_output_bytes,
            "workspace": ctx.workspace,
            "kill_grace_seconds": kill_grace_seconds,
        }
    )


@dataclass
class Ended:
    """A process that exited (any code): what the executor judges."""

    ctx: Attempt
    operation: ProcessOperation
    result: ProcessResult
    record: dict[str, Any]
    """The exit record journaled with ``node_finished``."""
    artifacts: dict[str, str]
    """``stdout``/``stderr`` when they were written; the executor adds its own."""
    stdout: FileSink
    stderr: FileSink

    def failure(self, message: str) -> AttemptResult:
        return AttemptResult(state=NodeState.FAILURE, message=message, exit=self.record, artifacts=self.artifacts)

    def success(self, value: Any) -> AttemptResult:
        """Success with ``value`` (UNAVAILABLE when the node has none)."""
        return AttemptResult(state=NodeState.SUCCESS, exit=self.record, value=value, artifacts=self.artifacts)


Judge = Callable[[Ended], Awaitable[AttemptResult]]


def _stopped(
    operation: ProcessOperation, result: ProcessResult, record: dict[str, Any], artifacts: dict[str, str]
) -> AttemptResult:
    """The attempt result of a process that did not exit by itself."""
    if result.kind == "cancelled":
        return AttemptResult(state=NodeState.CANCELLATION, message="cancelled", exit=record, artifacts=artifacts)
    if result.kind == "timeout":
        message = f"timed out after {operation.timeout_seconds} s; the process tree was stopped"
    elif result.kind == "signal":
        message = f"killed by signal {result.signal}"
    else:
        message = f"ended abnormally: {result.detail}"
    return AttemptResult(state=NodeState.FAILURE, message=message, exit=record, artifacts=artifacts)


async def supervise(
    ctx: Attempt, operation: ProcessOperation, *, judge: Judge, kill_grace_seconds: float, start: Starter | None = None
) -> AttemptResult:
    """Run ``operation`` as the attempt's process; ``judge`` decides an exit, this the other endings.
    ``start`` is tried before a launch here (a Python node's fork server, ``run_process``)."""
    spec = process_spec(ctx, operation, kill_grace_seconds=kill_grace_seconds)
    stdout = FileSink("stdout", ctx)
    stderr = FileSink("stderr", ctx)
    try:
        result = await run_process(
            spec,
            stdout_sink=stdout,
            stderr_sink=stderr,
            cancel=ctx.cancel,
            on_started=ctx.on_started,
            handles=ctx.verified,
            start=start,
        )
    except _OutputNotStored as err:
        detail = f"{err}; the process group was stopped"
        record = {"kind": "abnormal", "code": None, "signal": None, "detail": detail}
        return AttemptResult(state=NodeState.FAILURE, message=detail, exit=record)
    except RhoError as err:
        record = {"kind": "not_started", "code": None, "signal": None, "detail": err.message}
        return AttemptResult(state=NodeState.FAILURE, message=err.message, exit=record)
    finally:
        stdout.close()
        stderr.close()
    return await conclude(ctx, operation, result, stdout=stdout, stderr=stderr, judge=judge)


async def conclude(
    ctx: Attempt,
    operation: ProcessOperation,
    result: ProcessResult,
    *,
    stdout: FileSink,
    stderr: FileSink,
    judge: Judge,
) -> AttemptResult:
    """The attempt result of a process that ran (here or on a worker, exec/dask.py) and whose
    retained output is in ``stdout``/``stderr``: ``judge`` decides an exit, this the other endings."""
    record = exit_record(result)
    artifacts = {sink.stream: sink.stream for sink in (stdout, stderr) if sink.created}
    if result.kind == "exit":
        attempt = await judge(
            Ended(
                ctx=ctx,
                operation=operation,
                result=result,
                record=record,
                artifacts=artifacts,
                stdout=stdout,
                stderr=stderr,
            )
        )
    else:
        attempt = _stopped(operation, result, record, artifacts)
    if ctx.has_directory():
        # the journal's node_finished holds the exit durably; a folder that exists anyway
        # (output, value) also gets a copy so that it describes itself
        ctx.write_later(EXIT_FILE, json_bytes(record, compact=True))
        attempt.artifacts["exit"] = EXIT_FILE
    return attempt
