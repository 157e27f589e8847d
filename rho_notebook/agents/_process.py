"""Supervised child processes for agents: the bash/shell tool and the ``claude`` program.

The child leads its own session and process group (``start_new_session``). Output is kept up to a
byte bound per stream (the rest is read and dropped so the child never blocks on a full pipe). On
timeout, and when the awaiting task is cancelled, the whole group gets SIGTERM and, after a grace
period, SIGKILL; after a normal exit, members left in the group are killed too, because the agent
step is over and nothing it started may keep running against the checkout. "Exited" means the
leader exited (its status is known), not that every pipe is closed, so a member that left the
group and keeps a pipe open cannot hold the caller for longer than the grace period.

Frozen command nodes use :mod:`rho_notebook.exec.process` instead (verified handles); agent tool
commands are chosen by the model at run time, so there is no frozen file to verify.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.oshelpers import signal_group

__all__ = ["ProcessOutcome", "run_supervised"]

_CHUNK = 64 * 1024
_POLL_FIRST = 0.002
_POLL_MAX = 0.05
_KILL_CONFIRM = 5.0


@dataclass(frozen=True)
class ProcessOutcome:
    pid: int
    exit_code: int | None
    """The exit status; None when a signal ended the process (see ``signal``)."""
    signal: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration_ms: float


async def run_supervised(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    max_bytes: int,
    stdin: bytes | None = None,
    grace: float = 2.0,
    on_started: Callable[[int], Awaitable[None]] | None = None,
) -> ProcessOutcome:
    """Run ``argv`` to completion (or timeout) as the leader of a new process group.

    Cancelling the awaiting task stops the group (SIGTERM, then SIGKILL after ``grace``) before
    the cancellation propagates, also when it arrives while the process is being created.

    Raises
    ------
    OSError
        The program could not be started (not found, not executable).
    """
    started = time.monotonic()
    proc = await _spawn(
        argv,
        grace=grace,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    gathered: asyncio.Future[tuple[tuple[bytes, bool], tuple[bytes, bool]]] | None = None
    try:
        if proc.stdout is None or proc.stderr is None:
            msg = "subprocess pipes were not created"
            raise RuntimeError(msg)
        gathered = asyncio.gather(_read_bounded(proc.stdout, max_bytes), _read_bounded(proc.stderr, max_bytes))
        if on_started is not None:
            await on_started(proc.pid)
        if stdin is not None:
            await _feed(proc, stdin)
        timed_out = not await _exited(proc, timeout)
        if timed_out:
            await _stop_group(proc, grace)
        signal_group(proc.pid, signal.SIGKILL)  # members left behind by a leader that exited
        try:
            (out, out_cut), (err, err_cut) = await asyncio.wait_for(asyncio.shield(gathered), grace)
        except TimeoutError:  # a member left the group and still holds a pipe
            gathered.cancel()
            (out, out_cut), (err, err_cut) = (b"", True), (b"", True)
    except BaseException:
        await _stop_group(proc, grace)
        if gathered is not None:
            gathered.cancel()
        raise
    code = proc.returncode
    return ProcessOutcome(
        pid=proc.pid,
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        stdout=out,
        stderr=err,
        stdout_truncated=out_cut,
        stderr_truncated=err_cut,
        timed_out=timed_out,
        duration_ms=round((time.monotonic() - started) * 1000, 3),
    )


async def _spawn(argv: Sequence[str], *, grace: float, **options: Any) -> asyncio.subprocess.Process:
    """Create the process; a cancellation during creation stops it before propagating."""
    creating = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **options))
    try:
        return await asyncio.shield(creating)
    except asyncio.CancelledError:
        try:
            proc = await creating
        except OSError:
            raise asyncio.CancelledError from None
        await _stop_group(proc, grace)
        raise


async def _exited(proc: asyncio.subprocess.Process, timeout: float | None) -> bool:
    """Wait until the leader has exited (not for its pipes, which asyncio's wait() also needs)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = _POLL_FIRST
    while proc.returncode is None:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        await asyncio.sleep(delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, _POLL_MAX)
    return True


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    if proc.stdin is None:
        return
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        proc.stdin.close()


async def _read_bounded(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    kept = bytearray()
    truncated = False
    while chunk := await stream.read(_CHUNK):
        room = limit - len(kept)
        if len(chunk) > room:
            truncated = True
        if room > 0:
            kept += chunk[:room]
    return bytes(kept), truncated


async def _stop_group(proc: asyncio.subprocess.Process, grace: float) -> None:
    """SIGTERM the group, SIGKILL it after ``grace``, and wait (bounded) for the leader's exit."""
    if proc.returncode is None:
        signal_group(proc.pid, signal.SIGTERM)
        await _exited(proc, grace)
    signal_group(proc.pid, signal.SIGKILL)
    await _exited(proc, _KILL_CONFIRM)
