"""Launch one verified command process and supervise its process group.

:func:`run_process` is what command and shell nodes await. It verifies every frozen file, starts
the process through the verified handles, streams bounded stdout/stderr to async sinks, enforces
the timeout and cancellation on the whole process group, and returns a :class:`ProcessResult`.

Launch through verified handles (Linux only)
--------------------------------------------
Every frozen file (the executable and each ``#!`` interpreter) is opened with
:func:`~rho_notebook.exec.verify.open_verified` and the working directory with
:func:`~rho_notebook.exec.verify.open_verified_dir` (or, within a run, taken from the run's
:class:`~rho_notebook.exec.handles.VerifiedHandles`, which re-check a kept descriptor instead of
walking the path again). The child is then started from those descriptors, never from the paths:

=====================================  =====================================================
frozen executable                      what is executed, and its argv
=====================================  =====================================================
binary (no interpreters)               ``/proc/self/fd/E``; argv unchanged (argv[0] = display
                                       name)
``#!/bin/sh -e`` (interpreters =       ``/proc/self/fd/I``; ``["/bin/sh", "-e",
(sh,), interpreter_args = ("-e",))     "/proc/self/fd/S", *argv[1:]]``
``#!/usr/bin/env python3``             ``/proc/self/fd/P`` (the verified python3; env is
(interpreters = (env, python3),        verified but not run); ``["python3",
interpreter_args = ("python3",))       "/proc/self/fd/S", *argv[1:]]``
=====================================  =====================================================

This is the kernel's own ``#!`` mapping with the script path replaced by its verified handle:
the kernel drops argv[0], runs the interpreter with argv ``[interpreter as written, optional
argument, script path, *argv[1:]]``. The interpreter's argv[0] is taken from the ``#!`` line of
the verified script (not the canonical frozen path) because programs look at it: bash enters
POSIX mode as ``sh``, and Python finds a virtual environment's ``pyvenv.cfg`` next to it. For
``env NAME`` the verified NAME binary is launched directly with argv[0] ``NAME``, exactly what
``env`` would ``execvp``, minus the ``PATH`` lookup that could choose an unverified file. ``env``
with options (``-S``, ``-i``) or assignments, and longer interpreter chains, are refused with
:class:`LaunchError` rather than approximated. Consequence: a script sees its own path as
``/proc/self/fd/S`` (``$0``, ``sys.argv[0]``), so it cannot locate sibling files from it.

The handles reach the child as follows. ``subprocess.Popen`` forks (with ``vfork``), the child
``chdir``\\s to ``/proc/self/fd/D``, then closes every descriptor not in ``pass_fds`` and calls
``execve("/proc/self/fd/P", ...)``. ``/proc/self`` is resolved *in the child*, whose descriptor
table is a copy of ours, and ``/proc/self/fd/N`` is a kernel "magic link" to the open file
itself, not to its path, so neither step can be redirected by renaming or replacing paths after
verification. The directory descriptor is ``O_CLOEXEC`` and not passed: CPython's child runs
``chdir`` before it closes descriptors, so the child uses it and does not inherit it (if that order
ever changed the ``chdir`` would fail and the launch would fail closed; a test pins it). The
program and script descriptors are in ``pass_fds`` because ``execve`` needs them and the
interpreter re-opens ``/proc/self/fd/S`` after ``execve``; so the child inherits read-only
descriptors of its own program and script, which is also what ``fexecve`` of a script does.
No ``preexec_fn`` is used, so CPython keeps its ``vfork`` fast path.

Why Popen and pidfds instead of ``asyncio.create_subprocess_exec``: asyncio's default child
watcher in 3.11 starts a thread per child and layers transports, protocols and stream buffers over
the pipes (its watcher API is deprecated in 3.12). Here the child is started with ``Popen`` (the
same blocking fork/exec step asyncio performs on the loop), both pipes are read with
``loop.add_reader`` and the exit is observed with ``os.pidfd_open`` + ``loop.add_reader``, then
reaped with ``waitid(P_PIDFD)`` and signalled with ``pidfd_send_signal``, which cannot hit a
recycled pid. ``bench/process_launch.py`` measured, per ``/usr/bin/true``, median: subprocess.run
0.88-0.90 ms, asyncio default 1.25-1.46 ms, the Popen+pidfd core alone 1.00-1.10 ms, and the
whole of :func:`run_process` including verification 1.28-1.47 ms (p90 1.55-2.0 ms). The ~3.1 ms
asyncio figure quoted when this module was specified did not reproduce on the measuring VM; the
Popen+pidfd core was still the fastest correct path measured, ~0.25-0.35 ms below asyncio's for
the same launch, and it is what leaves room for verification under the same budget.

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
import functools
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, cast

from pydantic import Field, field_validator

from rho_notebook.errors import LaunchError, UnsupportedPlatform
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.verify import FileIdentity, open_verified_async, open_verified_dir, resolve_path
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.graph import FrozenExecutable, FrozenFile
from rho_notebook.oshelpers import group_exists, live_group_members, signal_group

__all__ = [
    "KILL_CONFIRM_SECONDS",
    "OutputSink",
    "ProcessKind",
    "ProcessResult",
    "ProcessSpec",
    "run_process",
]

KILL_CONFIRM_SECONDS = 5.0
"""How long to wait for the group to disappear after ``SIGKILL`` before reporting ``abnormal``."""

_CHUNK = 64 * 1024
_DRAIN_READS = 64
_POLL_FIRST = 0.002
_POLL_MAX = 0.05
_SHEBANG_BYTES = 256
_UNWIND_REAP_SECONDS = 1.0

OutputSink = Callable[[bytes], Awaitable[None]]
"""Receives each retained chunk of one output stream, in order, as it arrives."""

ProcessKind = Literal["exit", "signal", "timeout", "cancelled", "abnormal"]


class ProcessSpec(FrozenModel):
    """Everything needed to start one command process; built by the node executor from the plan."""

    argv: tuple[str, ...]
    """argv[0] is the display name as written in the workflow; the program comes from ``executable``."""
    executable: FrozenExecutable
    executable_identities: dict[str, FileIdentity] = Field(default_factory=dict)
    """Identity per frozen path (``FrozenFile.path``, as written in the plan) to compare, when pinned."""
    cwd: Path
    """Absolute, canonical working directory (already resolved from ``//``)."""
    cwd_identity: FileIdentity | None = None
    env: dict[str, str]
    """The child's complete environment; nothing is inherited."""
    timeout_seconds: float = Field(gt=0)
    max_output_bytes: int = Field(ge=0)
    """Retention bound per stream; bytes past it are read, counted and dropped."""
    workspace: Path
    """Absolute, canonical workspace root that ``//`` paths resolve against."""
    kill_grace_seconds: float = Field(default=2.0, ge=0)

    @field_validator("argv")
    @classmethod
    def _argv_shape(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            msg = "argv must hold at least the display name (argv[0])"
            raise ValueError(msg)
        if any("\0" in part for part in value):
            msg = "argv values must not contain NUL bytes"
            raise ValueError(msg)
        return value

    @field_validator("env")
    @classmethod
    def _env_shape(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not key or "=" in key or "\0" in key or "\0" in item:
                msg = f"environment variable {key!r} is not valid (empty, '=' or NUL in the name, or NUL in the value)"
                raise ValueError(msg)
        return value

    @field_validator("cwd", "workspace")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        if not value.is_absolute():
            msg = f"{value} must be an absolute path"
            raise ValueError(msg)
        return value


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


@functools.cache
def _platform_problem() -> str | None:
    if not sys.platform.startswith("linux"):
        return (
            f"frozen command execution needs Linux, this is {sys.platform!r}: the verified executable, "
            "interpreter and working directory are launched through /proc/self/fd handles, and "
            "launching by path instead would let a file swapped after verification run"
        )
    if not os.path.isdir("/proc/self/fd"):
        return "frozen command execution needs /proc mounted (verified handles are launched via /proc/self/fd)"
    try:
        probe = os.pidfd_open(os.getpid())
    except (AttributeError, OSError) as err:
        return f"frozen command execution needs pidfd_open (Linux 5.3 or newer): {err}"
    try:
        os.waitid(os.P_PIDFD, probe, os.WEXITED | os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError as err:
        return f"frozen command execution needs waitid(P_PIDFD) (Linux 5.4 or newer): {err}"
    finally:
        os.close(probe)
    return None


def _require_platform() -> None:
    problem = _platform_problem()
    if problem is not None:
        raise UnsupportedPlatform(problem)


@dataclass(frozen=True)
class _Launch:
    """Verified descriptors and the argv that executes them."""

    program_fd: int
    argv: tuple[str, ...]
    pass_fds: tuple[int, ...]
    cwd_fd: int
    opened: tuple[int, ...]

    def close(self) -> None:
        for fd in self.opened:
            os.close(fd)


def _shebang_interpreter(script_fd: int, shown: str) -> str:
    """The interpreter as written on the verified script's ``#!`` line."""
    head = os.pread(script_fd, _SHEBANG_BYTES, 0)
    words = head[2:].split(b"\n", 1)[0].split() if head.startswith(b"#!") else []
    if not words:
        msg = f"{shown} is frozen with interpreters but has no '#!' line; the plan is inconsistent, create a new plan"
        raise LaunchError(msg)
    return os.fsdecode(words[0])


def _map_launch(
    exe: FrozenExecutable, argv: tuple[str, ...], *, file_fd: int, interpreter_fds: Sequence[int]
) -> tuple[int, tuple[str, ...], tuple[int, ...]]:
    """(program descriptor, argv, descriptors the child needs) per the table in the module docstring."""
    shown = exe.file.path
    if not exe.interpreters:
        if exe.interpreter_args:
            msg = f"{shown} has interpreter arguments but no interpreter; the plan is inconsistent"
            raise LaunchError(msg)
        return file_fd, argv, (file_fd,)
    script = f"/proc/self/fd/{file_fd}"
    written = _shebang_interpreter(file_fd, shown)
    via_env = PurePosixPath(written).name == "env"
    if len(exe.interpreters) == 1 and not via_env:
        program = interpreter_fds[0]
        return program, (written, *exe.interpreter_args, script, *argv[1:]), (program, file_fd)
    if len(exe.interpreters) == 2 and via_env:
        if not exe.interpreter_args:
            msg = f"{shown}: '#!{written}' names no program; the plan is inconsistent"
            raise LaunchError(msg)
        name, *rest = exe.interpreter_args
        if name.startswith("-") or "=" in name:
            msg = (
                f"{shown}: '#!{written} {name}' uses env options or assignments, which cannot be "
                "launched through verified handles; name the interpreter directly in the '#!' line"
            )
            raise LaunchError(msg)
        program = interpreter_fds[1]
        return program, (name, *rest, script, *argv[1:]), (program, file_fd)
    chain = " -> ".join(f.path for f in exe.interpreters)
    msg = (
        f"{shown}: interpreter chain {chain} ('#!{written}') is not supported; a script may name one "
        "interpreter binary directly or through /usr/bin/env"
    )
    raise LaunchError(msg)


async def _open_frozen(
    frozen: FrozenFile, spec: ProcessSpec, opened: list[int], handles: VerifiedHandles | None
) -> int:
    identity = spec.executable_identities.get(frozen.path)
    if handles is None:
        fd = await open_verified_async(
            resolve_path(frozen.path, spec.workspace), sha256=frozen.sha256, identity=identity
        )
    else:
        fd = await handles.open_file(frozen, identity=identity)
    opened.append(fd)
    return fd


async def _prepare(spec: ProcessSpec, handles: VerifiedHandles | None = None) -> _Launch:
    """Verify every frozen file and the working directory (or re-check the run's kept handles of
    them); map them to a launch."""
    opened: list[int] = []
    try:
        file_fd = await _open_frozen(spec.executable.file, spec, opened, handles)
        interpreter_fds = [await _open_frozen(f, spec, opened, handles) for f in spec.executable.interpreters]
        if handles is None:
            cwd_fd = open_verified_dir(spec.cwd, identity=spec.cwd_identity)
        else:
            cwd_fd = handles.open_dir(spec.cwd, identity=spec.cwd_identity)
        opened.append(cwd_fd)
        program, argv, pass_fds = _map_launch(
            spec.executable, spec.argv, file_fd=file_fd, interpreter_fds=interpreter_fds
        )
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    return _Launch(program_fd=program, argv=argv, pass_fds=pass_fds, cwd_fd=cwd_fd, opened=tuple(opened))


@functools.cache
def _devnull() -> int:
    """One read-only ``/dev/null`` descriptor for every child's stdin, kept for the life of the
    process (``subprocess.DEVNULL`` opens and closes one per launch)."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


def _spawn(spec: ProcessSpec, launch: _Launch, *, stdout_fd: int, stderr_fd: int) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            launch.argv,
            executable=f"/proc/self/fd/{launch.program_fd}",
            stdin=_devnull(),
            stdout=stdout_fd,
            stderr=stderr_fd,
            cwd=f"/proc/self/fd/{launch.cwd_fd}",
            env=spec.env,
            pass_fds=launch.pass_fds,
            close_fds=True,
            start_new_session=True,
        )
    except OSError as err:
        msg = f"could not start {spec.argv[0]!r} ({spec.executable.file.path}) in {spec.cwd}: {err.strerror or err}"
        raise LaunchError(msg) from err


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


class _Leader:
    """The child itself: exit observed through its pidfd and reaped with ``waitid(P_PIDFD)``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, proc: subprocess.Popen[bytes], pidfd: int) -> None:
        self._loop = loop
        self._proc = proc
        self._pidfd = pidfd
        self._detached = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.kind: ProcessKind = "abnormal"
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.detail = ""
        loop.add_reader(pidfd, self._on_ready)

    def _on_ready(self) -> None:
        try:
            status = os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            self.detail = (
                "exit status unavailable: the process was reaped elsewhere "
                "(SIGCHLD ignored, or another waitpid(-1) in this process)"
            )
            self._proc.returncode = -1
        else:
            if status is None:
                return
            if status.si_code == os.CLD_EXITED:
                self.kind, self.exit_code = "exit", status.si_status
                self._proc.returncode = status.si_status
            elif status.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                self.kind, self.signal = "signal", status.si_status
                self._proc.returncode = -status.si_status
            else:
                self.detail = f"unexpected wait status code {status.si_code}"
                self._proc.returncode = -1
        self._loop.remove_reader(self._pidfd)
        if not self.exited.done():
            self.exited.set_result(None)
        if self._detached:
            os.close(self._pidfd)

    def kill(self) -> None:
        if self.exited.done():
            return
        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass

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


async def _stop_group(pgid: int, leader: _Leader, *, grace: float) -> tuple[int, ...]:
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
    leader: _Leader, captures: Sequence[_Capture], *, cancel: asyncio.Event, deadline: float, wake: _Wake
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


async def _reap_briefly(leader: _Leader) -> None:
    """After SIGKILL on an unwinding path: give the leader a moment to be reaped right here.

    Runs while a ``CancelledError`` or sink failure propagates; a second cancellation (which then
    propagates instead) or a slow death leaves the pidfd registered so the event loop reaps it later.
    """
    if not leader.exited.done():
        await asyncio.wait([leader.exited], timeout=_UNWIND_REAP_SECONDS)


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
        now = time.time()
        return ProcessResult(
            kind="cancelled", exit_code=None, signal=None, pid=None, stdout_bytes=0, stderr_bytes=0,
            stdout_truncated=False, stderr_truncated=False, started_at=now, ended_at=now, duration_ms=0.0,
            detail="cancelled before launch",
        )  # fmt: skip
    loop = asyncio.get_running_loop()
    launch = await _prepare(spec, handles)
    readers: list[int] = []
    writers: list[int] = []
    try:
        for _ in range(2):
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            readers.append(read_end)
            writers.append(write_end)
        started_at = time.time()
        began = time.perf_counter()
        proc = _spawn(spec, launch, stdout_fd=writers[0], stderr_fd=writers[1])
    except BaseException:
        _close_fds(readers)
        raise
    finally:
        _close_fds(writers)
        launch.close()
    pgid = proc.pid
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError as err:
        signal_group(pgid, signal.SIGKILL)
        proc.wait()
        _close_fds(readers)
        msg = f"started {spec.argv[0]!r} but could not watch it (pidfd_open: {err.strerror or err}); it was killed"
        raise LaunchError(msg) from err
    deadline = loop.time() + spec.timeout_seconds
    wake = _Wake(loop)
    stdout = _Capture(loop, readers[0], limit=spec.max_output_bytes, sink=stdout_sink, on_failure=wake)
    stderr = _Capture(loop, readers[1], limit=spec.max_output_bytes, sink=stderr_sink, on_failure=wake)
    captures = (stdout, stderr)
    leader = _Leader(loop, proc, pidfd)
    finished = False
    try:
        if on_started is not None:
            await on_started(proc.pid)
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
    ended_at = time.time()
    duration_ms = round((time.perf_counter() - began) * 1000, 3)
    details = [leader.detail] if leader.detail else []
    held = [name for name, c in (("stdout", stdout), ("stderr", stderr)) if c.held_open]
    if held:
        details.append(
            f"stopped reading {' and '.join(held)} after the process group ended: a process outside "
            "the group (for example one that called setsid) still held it open"
        )
    kind: ProcessKind = leader.kind if reason is None else reason
    if survivors:
        kind = "abnormal"
        details.append(
            f"process group {pgid} still had live members {list(survivors)} {KILL_CONFIRM_SECONDS:g}s after SIGKILL"
        )
    return ProcessResult(
        kind=kind,
        exit_code=leader.exit_code,
        signal=leader.signal,
        pid=proc.pid,
        stdout_bytes=stdout.seen,
        stderr_bytes=stderr.seen,
        stdout_truncated=stdout.truncated,
        stderr_truncated=stderr.truncated,
        started_at=started_at,
        ended_at=ended_at,
        duration_ms=duration_ms,
        detail="; ".join(details),
    )
