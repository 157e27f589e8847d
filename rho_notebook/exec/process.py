"""Launch one verified command process and supervise its process group.

:func:`run_process` is what command and shell nodes await. It verifies every frozen file, starts
the process through the verified handles (:mod:`rho_notebook.exec.launch`, whose docstring says
how), streams bounded stdout/stderr to async sinks, enforces the timeout and cancellation on the
whole process group, and returns a :class:`ProcessResult`.

Supervision
-----------
The child leads a new session and process group (``start_new_session=True``); stdin is
``/dev/null``. On timeout or cancellation the whole group gets ``SIGTERM``, then ``SIGKILL`` after
``kill_grace_seconds``; the runner waits until no live (non-zombie) member remains. Members left
behind after the leader exits normally are stopped the same way, because the node is over and
nothing it started may keep running against the checkout. Descendants that leave the group
(``setsid``, ``setpgid``) are outside supervision; if one still holds an output pipe once the
group is gone, reading stops after the grace period and ``ProcessResult.detail`` says so. If
members survive ``SIGKILL`` for :data:`KILL_CONFIRM_SECONDS` the result is ``abnormal`` so that the
caller does not record a stopped process it could not stop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from rho_notebook.errors import LaunchError, UnsupportedPlatform
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.launch import ProcessSpec
from rho_notebook.exec.launch import platform_problem as _platform_problem
from rho_notebook.exec.launch import prepare_launch as _prepare
from rho_notebook.exec.launch import spawn as _spawn
from rho_notebook.model.base import FrozenModel
from rho_notebook.oshelpers import group_exists, kill_pidfd, live_group_members, signal_group

__all__ = [
    "KILL_CONFIRM_SECONDS",
    "Child",
    "OutputSink",
    "ProcessKind",
    "ProcessResult",
    "ProcessSpec",
    "Starter",
    "run_process",
    "waited",
]

KILL_CONFIRM_SECONDS = 5.0
"""How long to wait for the group to disappear after ``SIGKILL`` before reporting ``abnormal``."""

_CHUNK = 64 * 1024
_DRAIN_READS = 64
_POLL_FIRST = 0.002
_POLL_MAX = 0.05
_UNWIND_REAP_SECONDS = 1.0

OutputSink = Callable[[bytes], Awaitable[None]]
"""Receives each retained chunk of one output stream, in order, as it arrives."""

ProcessKind = Literal["exit", "signal", "timeout", "cancelled", "abnormal"]


class ProcessResult(FrozenModel):
    """How one command process ended."""

    kind: ProcessKind
    """``exit``/``signal`` from the leader's status; ``timeout``/``cancelled`` when the runner stopped
    the group; ``abnormal`` when the status is unknown or the group could not be stopped."""
    exit_code: int | None
    signal: int | None
    """Signal that ended the leader (also recorded for ``timeout`` and ``cancelled``)."""
    pid: int | None
    """Leader pid, also the process-group id; None only when cancelled before launch."""
    stdout_bytes: int
    """Every byte read from stdout, retained or not."""
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    started_at: float
    """Epoch seconds just before the fork."""
    ended_at: float
    """Epoch seconds when the group was gone and both pipes closed."""
    duration_ms: float
    """Monotonic milliseconds between ``started_at`` and ``ended_at``."""
    detail: str = ""
    """Explanation for ``abnormal`` results and for output pipes held past the group's end."""


class Child(Protocol):
    """A started group leader as supervision sees it: :func:`run_process` makes its own (reaped
    through its pidfd); a :data:`Starter` may hand over another process's child (a fork server's)."""

    pid: int
    """The leader's pid, also its process-group id."""
    exited: asyncio.Future[None]
    """Done once the leader's exit is known; then ``kind``, ``exit_code``, ``signal``, ``detail`` hold."""
    kind: ProcessKind
    exit_code: int | None
    signal: int | None
    detail: str

    def kill(self) -> None:
        """SIGKILL the leader (through its pidfd) unless it exited."""

    def release(self) -> None:
        """Supervision is over: free the pidfd (at once, or once the exit is known)."""


Starter = Callable[[ProcessSpec, VerifiedHandles | None, int, int], Awaitable[Child | None]]
"""Starts ``spec`` elsewhere with output on the given pipe write ends (closed by the caller), or answers None."""


class _Capture:
    """One output pipe: read on readiness, count everything, retain up to a bound, feed the sink.

    A delivery task exists only while retained chunks wait for the sink, so a silent process
    costs no task at all.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, *, limit: int, sink: OutputSink, on_failure: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._limit = limit
        self._sink = sink
        self._on_failure = on_failure
        self.seen = 0
        self.retained = 0
        self.truncated = False
        self.held_open = False
        self.failure: BaseException | None = None
        self.closed: asyncio.Future[None] = loop.create_future()
        self._pending: deque[bytes] = deque()
        self._delivery: asyncio.Task[None] | None = None
        # Left blocking: a read after readiness cannot block (level-triggered, one reader), and
        # drain_and_close() switches to non-blocking only in the rare case it still has to read.
        loop.add_reader(fd, self._on_readable)

    def _take(self, data: bytes) -> None:
        self.seen += len(data)
        room = self._limit - self.retained
        if len(data) > room:
            self.truncated = True
            data = data[:room]
        if not data:
            return
        self.retained += len(data)
        self._pending.append(data)
        if self._delivery is None and self.failure is None:
            self._delivery = self._loop.create_task(self._deliver())

    async def _deliver(self) -> None:
        try:
            while self._pending:
                await self._sink(self._pending.popleft())
        except Exception as err:  # recorded before the task ends, so flush() always sees it
            self.failure = err
            self._on_failure()
        finally:
            self._delivery = None

    async def flush(self) -> None:
        """Wait until every retained chunk went to the sink; re-raise a sink failure."""
        while self._delivery is not None:
            await self._delivery
        if self.failure is not None:
            raise self.failure

    def _read(self) -> bytes | None:
        """Bytes read, ``b""`` at end of file, None when nothing is available now."""
        try:
            return os.read(self._fd, _CHUNK)
        except (BlockingIOError, InterruptedError):
            return None

    def _on_readable(self) -> None:
        data = self._read()
        if data is None:
            return
        if data:
            self._take(data)
        else:
            self.close()

    def drain_and_close(self) -> None:
        """Take what the pipe already holds, then stop reading even if a writer remains."""
        if self._fd < 0:
            return
        os.set_blocking(self._fd, False)
        for _ in range(_DRAIN_READS):
            data = self._read()
            if data == b"":
                break
            if data is None:
                self.held_open = True
                break
            self._take(data)
        else:
            self.held_open = True
        self.close()

    def close(self) -> None:
        if self._fd < 0:
            return
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1
        if not self.closed.done():
            self.closed.set_result(None)

    def abandon(self) -> None:
        """Stop reading and delivering at once (the run is being torn down)."""
        self.close()
        self._pending.clear()
        if self._delivery is not None:
            self._delivery.cancel()


def waited(si_code: int, si_status: int) -> tuple[ProcessKind, int | None, int | None, str]:
    """``(kind, exit_code, signal, detail)`` of a child reaped with ``waitid`` (its si_code, si_status)."""
    if si_code == os.CLD_EXITED:
        return "exit", si_status, None, ""
    if si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return "signal", None, si_status, ""
    return "abnormal", None, None, f"unexpected wait status code {si_code}"


class _Leader:
    """The child itself: exit observed through its pidfd and reaped with ``waitid(P_PIDFD)``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, proc: subprocess.Popen[bytes], pidfd: int) -> None:
        self._loop = loop
        self._proc = proc
        self._pidfd = pidfd
        self.pid = proc.pid
        """The leader's pid, also its process-group id."""
        self._detached = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.kind: ProcessKind = "abnormal"
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.detail = ""
        loop.add_reader(pidfd, self._on_ready)

    def _on_ready(self) -> None:
        try:
            if (status := os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOHANG)) is None:
                return
        except ChildProcessError:
            self.detail = (
                "exit status unavailable: the process was reaped elsewhere "
                "(SIGCHLD ignored, or another waitpid(-1) in this process)"
            )
        else:
            self.kind, self.exit_code, self.signal, self.detail = waited(status.si_code, status.si_status)
        self._proc.returncode = -(self.signal or 1) if self.exit_code is None else self.exit_code
        self._loop.remove_reader(self._pidfd)
        if not self.exited.done():
            self.exited.set_result(None)
        if self._detached:
            os.close(self._pidfd)

    def kill(self) -> None:
        if not self.exited.done():
            kill_pidfd(self._pidfd)

    def release(self) -> None:
        """Close the pidfd once reaped; until then keep it registered to reap in the background."""
        if self.exited.done():
            os.close(self._pidfd)
        else:
            self._detached = True


async def _wait_group_gone(pgid: int, deadline: float) -> tuple[int, ...]:
    """Poll until no live member of ``pgid`` remains; return the survivors at ``deadline``."""
    loop = asyncio.get_running_loop()
    delay = _POLL_FIRST
    while True:
        if not group_exists(pgid):
            return ()
        live = await asyncio.to_thread(live_group_members, pgid)
        remaining = deadline - loop.time()
        if not live or remaining <= 0:
            return live
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, _POLL_MAX)


async def _stop_group(pgid: int, leader: Child, *, grace: float) -> tuple[int, ...]:
    """SIGTERM the group, SIGKILL it after ``grace``; return members still alive after that."""
    loop = asyncio.get_running_loop()
    if grace > 0:
        signal_group(pgid, signal.SIGTERM)
        deadline = loop.time() + grace
        if not leader.exited.done():
            await asyncio.wait([leader.exited], timeout=grace)
        if leader.exited.done() and not await _wait_group_gone(pgid, deadline):
            return ()
    signal_group(pgid, signal.SIGKILL)
    leader.kill()
    if not leader.exited.done():
        await asyncio.wait([leader.exited], timeout=KILL_CONFIRM_SECONDS)
    return await _wait_group_gone(pgid, loop.time() + KILL_CONFIRM_SECONDS)


class _Wake:
    """One future resolved by whichever terminal event comes first: exit, cancel, timeout, sink failure."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[None] = loop.create_future()

    def __call__(self, *_: object) -> None:
        if not self.future.done():
            self.future.set_result(None)


async def _await_end(
    leader: Child, captures: Sequence[_Capture], *, cancel: asyncio.Event, deadline: float, wake: _Wake
) -> Literal["timeout", "cancelled"] | None:
    """Wait for the leader's exit, the deadline or cancellation; None means the leader exited."""
    if cancel.is_set():
        return "cancelled"
    loop = asyncio.get_running_loop()
    cancel_wait: asyncio.Task[Any] | None = None
    if isinstance(cancel, CancelSignal):
        cancel.add_listener(wake)
    else:  # a plain Event can only be awaited
        cancel_wait = loop.create_task(cancel.wait())
        cancel_wait.add_done_callback(wake)
    leader.exited.add_done_callback(wake)
    timer = loop.call_at(deadline, wake)
    try:
        await wake.future
    finally:
        timer.cancel()
        if cancel_wait is None:
            cast(CancelSignal, cancel).remove_listener(wake)
        else:
            cancel_wait.cancel()
    for capture in captures:
        if capture.failure is not None:
            raise capture.failure
    if leader.exited.done():
        return None
    return "cancelled" if cancel.is_set() else "timeout"


async def _reap_briefly(leader: Child) -> None:
    """After SIGKILL on an unwinding path: give the leader a moment to be reaped right here.

    Runs while a ``CancelledError`` or sink failure propagates; a second cancellation (which then
    propagates instead) or a slow death leaves the pidfd registered so the event loop reaps it later.
    """
    if not leader.exited.done():
        await asyncio.wait([leader.exited], timeout=_UNWIND_REAP_SECONDS)


def _require_platform() -> None:
    """Fail closed where a verified launch is impossible (before anything is verified)."""
    problem = _platform_problem()
    if problem is not None:
        raise UnsupportedPlatform(problem)


def _close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        os.close(fd)


async def run_process(
    spec: ProcessSpec,
    *,
    stdout_sink: OutputSink,
    stderr_sink: OutputSink,
    cancel: asyncio.Event,
    on_started: Callable[[int], Awaitable[None]] | None = None,
    handles: VerifiedHandles | None = None,
    start: Starter | None = None,
) -> ProcessResult:
    """Verify, launch and supervise one command process.

    Parameters
    ----------
    spec
        The frozen process facts.
    stdout_sink, stderr_sink
        Awaited with each retained chunk, in order, while the process runs. At most
        ``spec.max_output_bytes`` are passed per stream. A sink that raises stops the process
        group (``SIGKILL``) and the exception propagates.
    cancel
        Setting it stops the group (``SIGTERM``, grace, ``SIGKILL``); the result is ``cancelled``.
        Already set on entry: nothing is verified or launched. A
        :class:`~rho_notebook.exec.cancel.CancelSignal` is watched with a listener; a plain
        Event needs a waiting task per launch.
    on_started
        Awaited with the pid (= process-group id) right after the launch, e.g. to journal
        ownership before waiting.
    handles
        The run's kept verified descriptors (:class:`~rho_notebook.exec.handles.VerifiedHandles`,
        made for ``spec.workspace``); without them every frozen path is verified from scratch.
    start
        Tried first (a fork server, :mod:`~rho_notebook.exec.python_forks`); None from it: launch here.

    Returns
    -------
    ProcessResult
        Returned once the leader is reaped, no live member of its group remains (or
        :data:`KILL_CONFIRM_SECONDS` passed after ``SIGKILL``: ``abnormal``) and both pipes are
        closed.

    Raises
    ------
    UnsupportedPlatform
        Not Linux, or no ``/proc``/pidfd support: fails closed before verification.
    VerificationError
        A frozen file or the working directory differs from the plan; nothing was launched.
    LaunchError
        The verified program could not be executed; nothing is running.

    If the awaiting task is cancelled (or a sink or ``on_started`` raises), the group is sent
    ``SIGKILL`` and the leader is reaped before the exception propagates; if it takes longer than
    a second, the event loop reaps it in the background.
    """
    _require_platform()
    if cancel.is_set():
        return _cancelled_before_launch()
    loop = asyncio.get_running_loop()
    leader, readers, started_at, began = await _begin(spec, handles, start)
    deadline = loop.time() + spec.timeout_seconds
    wake = _Wake(loop)
    stdout = _Capture(loop, readers[0], limit=spec.max_output_bytes, sink=stdout_sink, on_failure=wake)
    stderr = _Capture(loop, readers[1], limit=spec.max_output_bytes, sink=stderr_sink, on_failure=wake)
    ending = await _supervise(
        spec, leader, (stdout, stderr), cancel=cancel, deadline=deadline, wake=wake, on_started=on_started
    )
    return ProcessResult(
        kind=ending.kind,
        exit_code=leader.exit_code,
        signal=leader.signal,
        pid=leader.pid,
        stdout_bytes=stdout.seen,
        stderr_bytes=stderr.seen,
        stdout_truncated=stdout.truncated,
        stderr_truncated=stderr.truncated,
        started_at=started_at,
        ended_at=time.time(),
        duration_ms=round((time.perf_counter() - began) * 1000, 3),
        detail=ending.detail,
    )


def _watch(spec: ProcessSpec, proc: subprocess.Popen[bytes], readers: list[int]) -> int:
    """A pidfd of the started process; if none can be had, the process is killed (LaunchError)."""
    try:
        return os.pidfd_open(proc.pid)
    except OSError as err:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        _close_fds(readers)
        msg = f"started {spec.argv[0]!r} but could not watch it (pidfd_open: {err.strerror or err}); it was killed"
        raise LaunchError(msg) from err


def _cancelled_before_launch() -> ProcessResult:
    now = time.time()
    return ProcessResult(
        kind="cancelled", exit_code=None, signal=None, pid=None, stdout_bytes=0, stderr_bytes=0,
        stdout_truncated=False, stderr_truncated=False, started_at=now, ended_at=now, duration_ms=0.0,
        detail="cancelled before launch",
    )  # fmt: skip


async def _with_pipes(begin: Callable[[int, int], Awaitable[Any]]) -> tuple[Any, list[int], float, float]:
    """``begin(stdout, stderr write ends)`` on fresh pipes: (its result, read ends, epoch and perf starts)."""
    readers: list[int] = []
    writers: list[int] = []
    try:
        for _ in range(2):
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            readers.append(read_end)
            writers.append(write_end)
        started_at = time.time()
        began = time.perf_counter()
        begun = await begin(writers[0], writers[1])
    except BaseException:
        _close_fds(readers)
        raise
    finally:
        _close_fds(writers)
    return begun, readers, started_at, began


async def _begin(
    spec: ProcessSpec, handles: VerifiedHandles | None, start: Starter | None
) -> tuple[Child, list[int], float, float]:
    """Start the process through ``start`` if it takes it, else here (see :func:`_with_pipes`)."""
    if start is not None:
        child, readers, started_at, began = await _with_pipes(lambda out, err: start(spec, handles, out, err))
        if child is not None:
            return child, readers, started_at, began
        _close_fds(readers)
    return await _start(spec, handles)


async def _start(spec: ProcessSpec, handles: VerifiedHandles | None) -> tuple[Child, list[int], float, float]:
    """Verify and start the process here (the verified descriptors are closed after the fork)."""
    launch = await _prepare(spec, handles)

    async def begin(stdout_fd: int, stderr_fd: int) -> subprocess.Popen[bytes]:
        return _spawn(spec, launch, stdout_fd=stdout_fd, stderr_fd=stderr_fd)

    try:
        proc, readers, started_at, began = await _with_pipes(begin)
    finally:
        launch.close()
    pidfd = _watch(spec, proc, readers)
    return _Leader(asyncio.get_running_loop(), proc, pidfd), readers, started_at, began


@dataclass(frozen=True)
class _Ending:
    kind: ProcessKind
    detail: str


async def _supervise(
    spec: ProcessSpec,
    leader: Child,
    captures: tuple[_Capture, _Capture],
    *,
    cancel: asyncio.Event,
    deadline: float,
    wake: _Wake,
    on_started: Callable[[int], Awaitable[None]] | None,
) -> _Ending:
    """Wait for the end (exit, timeout, cancel), stop what is left of the group, drain both pipes;
    on any exception kill the group and reap the leader before it propagates."""
    pgid = leader.pid
    finished = False
    try:
        if on_started is not None:
            await on_started(pgid)
        reason = await _await_end(leader, captures, cancel=cancel, deadline=deadline, wake=wake)
        survivors: tuple[int, ...] = ()
        if reason is not None or group_exists(pgid):
            survivors = await _stop_group(pgid, leader, grace=spec.kill_grace_seconds)
        open_pipes = [c.closed for c in captures if not c.closed.done()]
        if open_pipes:
            await asyncio.wait(open_pipes, timeout=spec.kill_grace_seconds)
        for capture in captures:
            capture.drain_and_close()
            await capture.flush()
        finished = True
    finally:
        try:
            if not finished:
                signal_group(pgid, signal.SIGKILL)
                leader.kill()
                for capture in captures:
                    capture.abandon()
                await _reap_briefly(leader)
        finally:
            leader.release()
    return _ending(leader, captures, reason, survivors)


def _ending(
    leader: Child,
    captures: tuple[_Capture, _Capture],
    reason: Literal["timeout", "cancelled"] | None,
    survivors: tuple[int, ...],
) -> _Ending:
    """How the process ended, and what the result's ``detail`` explains."""
    details = [leader.detail] if leader.detail else []
    held = [name for name, c in zip(("stdout", "stderr"), captures, strict=True) if c.held_open]
    if held:
        details.append(
            f"stopped reading {' and '.join(held)} after the process group ended: a process outside "
            "the group (for example one that called setsid) still held it open"
        )
    kind: ProcessKind = leader.kind if reason is None else reason
    if survivors:
        kind = "abnormal"
        details.append(
            f"process group {leader.pid} still had live members {list(survivors)} {KILL_CONFIRM_SECONDS:g}s after SIGKILL"
        )
    return _Ending(kind=kind, detail="; ".join(details))
