"""Fork servers: Python attempts forked from a warm, verified interpreter instead of a cold start.

A cold Python attempt costs an interpreter start, ``site`` and the harness's imports (~50 ms on
the development VM) against ~2 ms for a command of ``true``. A :class:`ForkServer` pays that once:
the frozen interpreter is launched exactly as a cold attempt is (its verified descriptor through
:func:`~rho_notebook.exec.launch.prepare_launch` and :func:`~rho_notebook.exec.launch.spawn`,
``-I``, the first attempt's environment and working directory) running
``rho_notebook/source/_py_forkserver.py``, which imports only the standard library and the
harness (from the run's verified copy, its digest checked against the plan's). Each attempt is
then one fork of that server, made ahead of it: the server offers each spare child it forked,
and an attempt sends its request straight to the spare, so that it starts without a round trip
through the server (the server's docstring gives the wire protocol).

Per attempt (:meth:`ForkServer.launch`), as a cold launch would:

- the interpreter's descriptor is verified again (the run's
  :class:`~rho_notebook.exec.handles.VerifiedHandles` re-check of the kept descriptor, or a full
  verification without them); a :class:`~rho_notebook.errors.VerificationError` fails the attempt
  closed, and an interpreter that verifies but is another inode than the server's is not served;
- the working directory is verified and its descriptor passed over the socket (the child
  ``fchdir``\\s to it), with the write ends of the two output pipes the caller reads, so output
  bounds, sinks and artifacts are :func:`~rho_notebook.exec.process.run_process`'s own;
- the child gets the exact environment a cold launch gets (``os.environ``; its
  ``/proc/PID/environ`` stays the server's start environment, so servers are not shared across
  ``RHO_RUN_ID``\\s, by which recovery finds a dead owner's processes) and leads its own session
  and process group before its pid is known here, so timeout and cancel stop the whole group as
  for any process; its pidfd comes with the server's offer (signals cannot hit a recycled pid);
- the server reaps the child (only a parent can) and reports its status; every frozen module is
  imported from the bytes whose digest is the plan's (a changed module fails the attempt).

Where a server cannot serve, :meth:`ForkServer.launch` and :meth:`ForkServers.starter` answer None
and the caller launches cold, as before: a server that failed to start (the reason goes to its
log), an interpreter replaced since, another interpreter, harness, distribution set or locale
(servers are keyed by them), a platform without pidfds or a Python older than 3.9, a spare that
died before its request or a fork that failed. Nothing is ever launched cold after a request
reached a spare, so no attempt can run twice.

Lifetime: a :class:`ForkServers` belongs to whoever owns the attempts (the run's Python executor,
closed with the run's verified handles; a Dask worker per process). :meth:`ForkServer.close`
closes the socket, at which the idle server exits; an owner that dies closes it as well (end of
file), so no server outlives its owner.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import select
import signal
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import LaunchError
from rho_notebook.exec.forked import Forked, Offered, received_fds, rights
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.launch import ProcessSpec, open_cwd, open_frozen, prepare_launch, spawn
from rho_notebook.exec.process import Child
from rho_notebook.oshelpers import signal_group
from rho_notebook.source.pymodules import HARNESS_PATH

__all__ = ["FORKSERVER_PATH", "ForkJob", "ForkServer", "ForkServers", "server_key"]

FORKSERVER_PATH = HARNESS_PATH.with_name("_py_forkserver.py")
"""The server script, run by the frozen interpreter from a descriptor of this file."""
START_SECONDS = 30.0
"""How long a server may take to start and load the harness before it is given up (cold launches)."""
_STOP_SECONDS = 2.0
_RECEIVE_BYTES = 64 * 1024
_AHEAD = 2
"""Spares asked for ahead of the launches waiting for one. Two, because a spare asked for at a
launch is forked only when a child's exit wakes the server: in a chain of Python nodes one ahead
was not ready at the next launch 60% of the time (a wait of 0.2-1.3 ms), two ahead 4%."""
_STARTUP_ENV = ("LANG", "LANGUAGE", "TZ", "RHO_RUN_ID")
"""Variables (besides ``LC_*``) a server serves only attempts that agree on: the interpreter reads
the locale at start (its streams' encoding would differ from a cold start's), and
``/proc/PID/environ`` of a forked attempt is the server's start environment, where recovery looks
for a dead owner's processes by ``RHO_RUN_ID``."""


@dataclass(frozen=True, kw_only=True)
class ForkJob:
    """What one forked attempt runs: the harness's ``main(argv)`` with frozen modules checked."""

    argv: tuple[str, ...]
    """The harness's argv as a cold launch passes it: ``(harness, modules_dir, request, result)``."""
    modules_dir: str
    modules: Mapping[str, str]
    """Path below ``modules_dir`` (``nodes/calc.py``) -> the plan's ``sha256:`` digest of it."""
    paths: tuple[str, ...] = ()
    """Folders the attempts import from (``modules_dir``, the frozen ``sys.path``): the server that
    starts for this job lists them once (no import), so that every fork finds the listings cached."""
    site_dirs: tuple[str, ...] = ()
    """The frozen site directories the harness adds to ``paths`` (``site.addsitedir``): the server
    that starts for this job adds them once, so that a fork reads no ``.pth`` file (the server's
    docstring says when a fork does it itself)."""
    request: bytes | None = None
    """The harness's request (the bytes of ``argv[2]``'s file) sent with the fork, read by the
    child from memory: the file may then be written while the attempt runs. None: the file is read."""
    result_fd: int | None = None
    """A memory file of the caller's that the child writes its result to instead of ``argv[3]``'s
    file (whose folder then need not exist yet); None: the file. A server that cannot do that
    does not serve a job that asks for it (:meth:`ForkServer.launch` answers None)."""


def server_key(spec: ProcessSpec, *, harness_sha256: str, runtime: str = "") -> tuple[str, ...]:
    """What a server is shared by: the interpreter (path and digest), harness, the caller's
    ``runtime`` (e.g. the distribution set) and the environment the interpreter reads at start."""
    startup = sorted((k, v) for k, v in spec.env.items() if k in _STARTUP_ENV or k.startswith("LC_"))
    file = spec.executable.file
    return (file.path, file.sha256, harness_sha256, runtime, json.dumps(startup))


class ForkServer:
    """One running fork server (see the module docstring); made by :meth:`start`."""

    def __init__(self, sock: socket.socket, *, pid: int, pidfd: int, interpreter: tuple[int, int]) -> None:
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._demand = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        """The demand counter the server reads when it wakes: spares asked for (module docstring)."""
        self.pid = pid
        self._pidfd = pidfd
        self._interpreter = interpreter
        """(st_dev, st_ino) of the interpreter the server runs."""
        self._hello: asyncio.Future[dict[str, Any]] | None = None
        """The answer to ``hello`` while the start waits for it."""
        self._spares: collections.deque[Offered] = collections.deque()
        """Spares the server offered that no attempt took yet."""
        self._takers: collections.deque[asyncio.Future[Offered | None]] = collections.deque()
        """Launches waiting for a spare (None: none will come, launch cold)."""
        self._asked = 1
        """Spares asked for and not offered yet (the first comes unasked)."""
        self._children: dict[int, Forked] = {}
        """Spare id -> the attempt it runs."""
        self.failure: str | None = None
        """Why the server no longer serves (None while it does)."""
        self.memory_results = False
        """Whether its children can write their result to a memory file (:attr:`ForkJob.result_fd`)."""
        self._loop.add_reader(sock.fileno(), self._on_readable)

    @classmethod
    async def start(
        cls, spec: ProcessSpec, *, handles: VerifiedHandles | None, harness: Path, harness_sha256: str,
        log: Path | None = None, paths: tuple[str, ...] = (), job: ForkJob | None = None,
    ) -> ForkServer:  # fmt: skip
        """Launch a server as ``spec`` (a cold attempt's launch: its interpreter, env and cwd) would
        be launched, and wait until it loaded the harness copy ``harness`` of digest ``harness_sha256``
        (and added the site directories of ``job``, importing its frozen modules only as a fork does).

        Raises :class:`~rho_notebook.errors.VerificationError` as a launch does, and
        :class:`~rho_notebook.errors.LaunchError` when the server could not start (stderr to ``log``).
        """
        theirs, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid, pidfd, interpreter = await _launch_server(spec, handles, theirs.fileno(), log)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        server = cls(ours, pid=pid, pidfd=pidfd, interpreter=interpreter)
        try:
            hello: dict[str, Any] = {
                "op": "hello",
                "harness": str(harness),
                "sha256": harness_sha256,
                "paths": list(paths),
            }
            if job is not None and job.site_dirs:
                hello.update(site_dirs=list(job.site_dirs), modules_dir=job.modules_dir, modules=dict(job.modules))
            ready = server._hello = server._loop.create_future()
            server._send(hello, (server._demand,))
            answer = await asyncio.wait_for(ready, START_SECONDS)
            if answer.get("op") != "ready":
                msg = f"the fork server did not start: {answer.get('message', answer)}"
                raise LaunchError(msg)
            server.memory_results = answer.get("results") is True
        except BaseException as err:
            server.close()
            if isinstance(err, (TimeoutError, OSError)):
                msg = f"the fork server did not answer within {START_SECONDS:g} s ({err})"
                raise LaunchError(msg) from err
            raise
        return server

    def _send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        """Send ``message`` to the server (OSError: nothing was sent)."""
        data = json.dumps(message, separators=(",", ":")).encode()
        self._sock.sendmsg([data], rights(fds) if fds else [], socket.MSG_DONTWAIT)

    def _top_up(self, *, ahead: int = _AHEAD) -> None:
        """Ask the server for as many spares as launches wait for, and ``ahead`` more for the next
        launches, by adding to its demand counter; wake it only when no child of it runs (whose
        exit would wake it)."""
        wanted = len(self._takers) + ahead - self._asked - len(self._spares)
        if self.failure is None and wanted > 0:
            os.eventfd_write(self._demand, wanted)
            self._asked += wanted
            if not self._children:
                self._wake()

    def _wake(self) -> None:
        """Wake the server, which then reads its demand counter: a launch waits for a spare."""
        try:
            self._send({"op": "wake"})
        except OSError:  # the server is gone: _lost's
            pass

    async def launch(
        self, spec: ProcessSpec, job: ForkJob, *, handles: VerifiedHandles | None, stdout_fd: int, stderr_fd: int
    ) -> Forked | None:
        """Start ``job`` as ``spec``'s attempt with its output on the given pipes, in the spare the
        server offered (waiting for one if none is there); None when this server cannot serve it
        (nothing was started: launch cold). A job with a :attr:`~ForkJob.result_fd` is served
        only by a server whose children can write there (:attr:`memory_results`).

        Raises :class:`~rho_notebook.errors.VerificationError` when the interpreter or the working
        directory fails verification (nothing was started).
        """
        if self.failure is not None or (job.result_fd is not None and not self.memory_results):
            return None
        fd = await open_frozen(spec.executable.file, spec, handles)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if (st.st_dev, st.st_ino) != self._interpreter:
            return None
        spare = await self._spare()
        if spare is None:
            return None
        message = {
            "op": "fork", "argv": list(job.argv), "env": spec.env,
            "modules_dir": job.modules_dir, "modules": dict(job.modules),
        }  # fmt: skip
        if job.request is not None:
            message["request"] = job.request.decode("utf-8")
        try:
            cwd_fd = open_cwd(spec, handles)
        except BaseException:
            self._spares.appendleft(spare)  # not used: the next attempt takes it
            raise
        fds = (stdout_fd, stderr_fd, cwd_fd) if job.result_fd is None else (stdout_fd, stderr_fd, cwd_fd, job.result_fd)
        try:
            data = json.dumps(message, separators=(",", ":")).encode()
            spare.sock.sendmsg([data], rights(fds), socket.MSG_DONTWAIT)
        except OSError:  # the spare is gone (or the request does not fit): nothing started
            spare.close()
            self._top_up()
            return None
        finally:
            os.close(cwd_fd)
        spare.sock.close()
        child = self._children[spare.ident] = Forked(self._loop, spare.pid, spare.pidfd)
        self._top_up()
        return child

    async def _spare(self) -> Offered | None:
        """The next spare the server offers (None: it will offer none)."""
        if self._spares:
            return self._spares.popleft()
        if self.failure is not None:
            return None
        taker: asyncio.Future[Offered | None] = self._loop.create_future()
        self._takers.append(taker)
        self._top_up()
        self._wake()  # even when the spares asked for before cover it: the server may not have read them
        try:
            return await taker
        except asyncio.CancelledError:
            given = taker.result() if taker.done() and not taker.cancelled() else None
            if given is not None:  # given just before the cancel: the next launch takes it
                self._offered(given)
            raise
        finally:
            if taker in self._takers:
                self._takers.remove(taker)

    def _on_readable(self) -> None:
        while True:
            try:
                data, ancillary, _, _ = self._sock.recvmsg(
                    _RECEIVE_BYTES, socket.CMSG_SPACE(4 * 4), socket.MSG_DONTWAIT
                )
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                self._lost(f"the fork server's socket failed ({err})")
                return
            fds = received_fds(ancillary)
            if not data:
                self._lost("the fork server exited")
                return
            self._answer(json.loads(data), fds)

    def _answer(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        if op == "spare" and len(fds) == 2:
            self._asked -= 1
            self._offered(Offered(int(message["id"]), int(message["pid"]), fds[0], socket.socket(fileno=fds[1])))
            return
        for fd in fds:
            os.close(fd)
        if op == "exit":
            ident = int(message["id"])
            finished = self._children.pop(ident, None)
            if finished is not None:
                finished.finish(int(message["si_code"]), int(message["si_status"]))
                return
            for spare in self._spares:  # it died unused: drop it, ask for another
                if spare.ident == ident:
                    self._spares.remove(spare)
                    spare.close()
                    self._top_up()
                    break
        elif op == "no_spare":  # the fork failed: one waiting launch goes cold, none is asked for ahead
            self._asked -= 1
            self._give(None)
            self._top_up(ahead=0)
            if self._takers:
                self._wake()  # (it is awake now, but may have read the demand before this)
        elif self._hello is not None and not self._hello.done():  # "ready" or "error": the answer to hello
            self._hello.set_result(message)

    def _offered(self, spare: Offered) -> None:
        if not self._give(spare):
            self._spares.append(spare)

    def _give(self, spare: Offered | None) -> bool:
        """Hand ``spare`` to the first launch waiting for one; False when none waits."""
        while self._takers:
            taker = self._takers.popleft()
            if not taker.done():
                taker.set_result(spare)
                return True
        return False

    def _lost(self, why: str) -> None:
        """The server is gone: nothing more is served; waiting launches launch cold, spares are
        dropped, running children are stopped."""
        if self.failure is None:
            self.failure = why
        self._loop.remove_reader(self._sock.fileno())
        if self._hello is not None and not self._hello.done():
            self._hello.set_result({"op": "error", "message": why})
        while self._give(None):
            pass
        while self._spares:
            self._spares.popleft().close()
        for child in self._children.values():
            child.lost(f"exit status unknown: {why} while the attempt ran; its process group was stopped")
        self._children.clear()

    def close(self) -> None:
        """Stop serving: close the socket (the idle server exits at end of file) and reap the
        server, killing it if it takes longer than a couple of seconds. Called at the end of the
        owner's work, when no attempt runs; blocks for the server's exit (about a millisecond)."""
        if self._sock.fileno() < 0:
            return
        self._lost("the fork server was closed")
        self._sock.close()
        os.close(self._demand)
        _reap(self._pidfd)


async def _launch_server(
    spec: ProcessSpec, handles: VerifiedHandles | None, sock_fd: int, log: Path | None
) -> tuple[int, int, tuple[int, int]]:
    """Start the server process: (pid, pidfd, (st_dev, st_ino) of its interpreter)."""
    source = os.open(FORKSERVER_PATH, os.O_RDONLY | os.O_CLOEXEC)
    opened = [source]
    try:
        argv = (spec.argv[0], "-I", f"/proc/self/fd/{source}", str(source), str(sock_fd))
        server_spec = spec.model_copy(update={"argv": argv})
        launch = await prepare_launch(server_spec, handles)
        opened.extend(launch.opened)
        st = os.fstat(launch.program_fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(log, flags, 0o600) if log is not None else os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        opened.append(out)
        launch = dataclasses.replace(launch, pass_fds=(*launch.pass_fds, source, sock_fd))
        proc = spawn(server_spec, launch, stdout_fd=out, stderr_fd=out)
    finally:
        for fd in opened:
            os.close(fd)
    proc.returncode = 0  # reaped through its pidfd (close); Popen must not warn or wait for it
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError as err:
        signal_group(proc.pid, signal.SIGKILL)
        os.waitpid(proc.pid, 0)
        msg = f"could not watch the fork server (pidfd_open: {err.strerror or err})"
        raise LaunchError(msg) from err
    return proc.pid, pidfd, (st.st_dev, st.st_ino)


def _reap(pidfd: int) -> None:
    """Wait for the server behind ``pidfd`` to exit (SIGKILL after a grace) and reap it."""
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(_STOP_SECONDS * 1000):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            poller.poll()
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
    except (ChildProcessError, ProcessLookupError):
        pass
    finally:
        os.close(pidfd)


Starter = Callable[[ProcessSpec, VerifiedHandles | None, int, int], Awaitable[Child | None]]


class ForkServers:
    """The fork servers of one owner, one per :func:`server_key`, each started on first use.

    ``log`` is the file a server's own stderr goes to (and the reason a server could not start);
    None discards it. :meth:`close` stops them all.
    """

    def __init__(self, *, log: Path | None = None) -> None:
        self.log = log
        self._servers: dict[tuple[str, ...], asyncio.Future[ForkServer | None]] = {}
        self._closed = False

    def starter(self, job: ForkJob, *, harness: Path, harness_sha256: str, runtime: str = "") -> Starter:
        """A starter for :func:`~rho_notebook.exec.process.run_process`: forks ``job`` from the
        server of the launch's key (started now if it is the first), or answers None (launch cold)."""

        async def start(
            spec: ProcessSpec, handles: VerifiedHandles | None, stdout_fd: int, stderr_fd: int
        ) -> Child | None:
            server = await self.server(
                spec, handles=handles, harness=harness, harness_sha256=harness_sha256, runtime=runtime, paths=job.paths,
                job=job,
            )  # fmt: skip
            if server is None:
                return None
            return await server.launch(spec, job, handles=handles, stdout_fd=stdout_fd, stderr_fd=stderr_fd)

        return start

    async def server(
        self, spec: ProcessSpec, *, handles: VerifiedHandles | None, harness: Path, harness_sha256: str,
        runtime: str = "", paths: tuple[str, ...] = (), job: ForkJob | None = None,
    ) -> ForkServer | None:  # fmt: skip
        """The server for ``spec``'s key, started on first use (for ``job``: its site directories are
        added once there); None when none can serve it."""
        if self._closed:
            return None
        key = server_key(spec, harness_sha256=harness_sha256, runtime=runtime)
        made = self._servers.get(key)
        if made is None:
            made = self._servers[key] = asyncio.ensure_future(
                self._start(spec, handles, harness, harness_sha256, paths, job)
            )
        try:
            server = await asyncio.shield(made)
        except Exception:
            if self._servers.get(key) is made:  # verification failed: the next attempt verifies again
                del self._servers[key]
            raise
        if server is not None and server.failure is not None:
            return None
        return server

    async def _start(
        self,
        spec: ProcessSpec,
        handles: VerifiedHandles | None,
        harness: Path,
        harness_sha256: str,
        paths: tuple[str, ...],
        job: ForkJob | None,
    ) -> ForkServer | None:
        try:
            server = await ForkServer.start(
                spec, handles=handles, harness=harness, harness_sha256=harness_sha256, log=self.log, paths=paths,
                job=job,
            )  # fmt: skip
        except LaunchError as err:
            self._note(f"fork server not started, Python attempts launch cold: {err.message}")
            return None
        if self._closed:
            server.close()
            return None
        return server

    def _note(self, line: str) -> None:
        if self.log is None:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.log, flags, 0o600)
        except OSError:
            return
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def close(self) -> None:
        """Stop every server (started ones at once; one still starting is stopped when it is up)."""
        self._closed = True
        self._stop(list(self._servers))

    def close_run(self, run_id: str) -> None:
        """Stop the servers of run ``run_id`` (an owner serving many runs, such as a Dask worker,
        calls it when that run's attempts are over; servers are not shared across runs)."""
        self._stop([key for key in self._servers if ["RHO_RUN_ID", run_id] in json.loads(key[-1])])

    def _stop(self, keys: list[tuple[str, ...]]) -> None:
        for key in keys:
            made = self._servers.pop(key)
            if made.done():
                _close_started(made)
            else:
                made.add_done_callback(_close_started)


def _close_started(made: asyncio.Future[ForkServer | None]) -> None:
    """Close the server ``made`` started, if it started one."""
    if not made.cancelled() and made.exception() is None:
        server = made.result()
        if server is not None:
            server.close()
