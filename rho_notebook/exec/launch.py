"""Launch one verified process: frozen files opened through no-follow handles, started from them.

:func:`prepare_launch` verifies every frozen file and the working directory (or re-checks the
run's kept handles of them) and maps them to a :class:`VerifiedLaunch`; :func:`spawn` starts it.
:mod:`rho_notebook.exec.process` supervises what was started.

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
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import Field, field_validator

from rho_notebook.errors import LaunchError
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.verify import open_verified_async, open_verified_dir, resolve_path
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.graph import FrozenExecutable, FrozenFile
from rho_notebook.model.identity import FileIdentity

__all__ = ["ProcessSpec", "VerifiedLaunch", "open_cwd", "open_frozen", "platform_problem", "prepare_launch", "spawn"]

_SHEBANG_BYTES = 256


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


@functools.cache
def platform_problem() -> str | None:
    """Why this host cannot launch through verified handles; None when it can (checked once)."""
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


@dataclass(frozen=True)
class VerifiedLaunch:
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


async def open_frozen(frozen: FrozenFile, spec: ProcessSpec, handles: VerifiedHandles | None) -> int:
    """A verified descriptor of ``frozen`` (one of ``spec``'s files, pinned to its recorded
    identity), from the run's kept handles when given; the caller closes it."""
    identity = spec.executable_identities.get(frozen.path)
    if handles is None:
        return await open_verified_async(
            resolve_path(frozen.path, spec.workspace), sha256=frozen.sha256, identity=identity
        )
    return await handles.open_file(frozen, identity=identity)


def open_cwd(spec: ProcessSpec, handles: VerifiedHandles | None) -> int:
    """A verified descriptor of ``spec``'s working directory; the caller closes it."""
    if handles is None:
        return open_verified_dir(spec.cwd, identity=spec.cwd_identity)
    return handles.open_dir(spec.cwd, identity=spec.cwd_identity)


async def _open_frozen(
    frozen: FrozenFile, spec: ProcessSpec, opened: list[int], handles: VerifiedHandles | None
) -> int:
    fd = await open_frozen(frozen, spec, handles)
    opened.append(fd)
    return fd


async def prepare_launch(spec: ProcessSpec, handles: VerifiedHandles | None = None) -> VerifiedLaunch:
    """Verify every frozen file and the working directory (or re-check the run's kept handles of
    them); map them to a launch."""
    opened: list[int] = []
    try:
        file_fd = await _open_frozen(spec.executable.file, spec, opened, handles)
        interpreter_fds = [await _open_frozen(f, spec, opened, handles) for f in spec.executable.interpreters]
        cwd_fd = open_cwd(spec, handles)
        opened.append(cwd_fd)
        program, argv, pass_fds = _map_launch(
            spec.executable, spec.argv, file_fd=file_fd, interpreter_fds=interpreter_fds
        )
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    return VerifiedLaunch(program_fd=program, argv=argv, pass_fds=pass_fds, cwd_fd=cwd_fd, opened=tuple(opened))


@functools.cache
def _devnull() -> int:
    """One read-only ``/dev/null`` descriptor for every child's stdin, kept for the life of the
    process (``subprocess.DEVNULL`` opens and closes one per launch)."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


def spawn(spec: ProcessSpec, launch: VerifiedLaunch, *, stdout_fd: int, stderr_fd: int) -> subprocess.Popen[bytes]:
    """Start ``launch`` in a new session, stdin ``/dev/null``, output to the given descriptors."""
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
