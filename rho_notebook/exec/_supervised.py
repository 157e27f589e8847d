"""One supervised process attempt, shared by the command and the Python executor.

:func:`supervise` launches a :class:`~rho_notebook.exec.process.ProcessSpec` with
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
from rho_notebook.exec.base import AttemptContext, AttemptResult, node_environment
from rho_notebook.exec.process import ProcessResult, ProcessSpec, run_process
from rho_notebook.model.graph import FrozenExecutable
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import json_bytes

__all__ = ["Ended", "FileSink", "conclude", "exit_record", "process_spec", "supervise"]

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

    def __init__(self, stream: str, ctx: AttemptContext) -> None:
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
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


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


def process_spec(
    ctx: AttemptContext,
    executable: FrozenExecutable,
    *,
    argv: tuple[str, ...],
    cwd: str,
    kill_grace_seconds: float,
) -> ProcessSpec:
    """The launch facts of ``ctx.node``: ``executable`` (and its interpreters) pinned to the
    identities the plan recorded, ``cwd`` (``//``-relative) and the node's environment policy."""
    node = ctx.node
    frozen = [executable.file.path, *(i.path for i in executable.interpreters)]
    return ProcessSpec.model_validate(
        {
            "argv": argv,
            "executable": executable,
            "executable_identities": {p: ctx.identities[p] for p in frozen if p in ctx.identities},
            "cwd": ctx.workspace / cwd[2:] if cwd != "//" else ctx.workspace,
            "cwd_identity": ctx.identities.get(cwd),
            "env": node_environment(ctx.environment, ctx.source_environ, run_id=ctx.run_id, node=node.name),
            "timeout_seconds": node.timeout_seconds,
            "max_output_bytes": node.max_output_bytes,
            "workspace": ctx.workspace,
            "kill_grace_seconds": kill_grace_seconds,
        }
    )


@dataclass
class Ended:
    """A process that exited (any code): what the executor judges."""

    ctx: AttemptContext
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
    ctx: AttemptContext, result: ProcessResult, record: dict[str, Any], artifacts: dict[str, str]
) -> AttemptResult:
    """The attempt result of a process that did not exit by itself."""
    if result.kind == "cancelled":
        return AttemptResult(state=NodeState.CANCELLATION, message="cancelled", exit=record, artifacts=artifacts)
    if result.kind == "timeout":
        message = f"timed out after {ctx.node.timeout_seconds} s; the process tree was stopped"
    elif result.kind == "signal":
        message = f"killed by signal {result.signal}"
    else:
        message = f"ended abnormally: {result.detail}"
    return AttemptResult(state=NodeState.FAILURE, message=message, exit=record, artifacts=artifacts)


async def supervise(ctx: AttemptContext, spec: ProcessSpec, *, judge: Judge) -> AttemptResult:
    """Run ``spec`` as the attempt's process; ``judge`` decides an exit, this the other endings."""
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
    return await conclude(ctx, result, stdout=stdout, stderr=stderr, judge=judge)


async def conclude(
    ctx: AttemptContext, result: ProcessResult, *, stdout: FileSink, stderr: FileSink, judge: Judge
) -> AttemptResult:
    """The attempt result of a process that ran (here or on a worker, exec/dask.py) and whose
    retained output is in ``stdout``/``stderr``: ``judge`` decides an exit, this the other endings."""
    record = exit_record(result)
    artifacts = {sink.stream: sink.stream for sink in (stdout, stderr) if sink.created}
    if result.kind == "exit":
        attempt = await judge(
            Ended(ctx=ctx, result=result, record=record, artifacts=artifacts, stdout=stdout, stderr=stderr)
        )
    else:
        attempt = _stopped(ctx, result, record, artifacts)
    if ctx.has_directory():
        # the journal's node_finished holds the exit durably; a folder that exists anyway
        # (output, value) also gets a copy so that it describes itself
        ctx.write_later("exit.json", json_bytes(record, compact=True))
        attempt.artifacts["exit"] = "exit.json"
    return attempt
