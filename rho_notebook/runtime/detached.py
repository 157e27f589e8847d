"""A run's owner in a process of its own, detached from whoever started it.

Every front end starts runs this way: the CLI's ``run`` and ``resume``, the notebook (``rho.run``,
``%workflow``), the Jupyter server and MCP. What happens to the caller afterwards (Ctrl-C, a closed
pipe, SIGTERM or SIGHUP, a kernel restart or crash, JupyterLab shutting down) stops only its
*following* of the run (:mod:`rho_notebook.runtime.follow`); only a cancel request stops the run.

:func:`start_owner` starts the owner in a new session, nobody's child, with stdin from
``/dev/null`` and stdout and stderr appended to ``owner.log`` in the run's folder. It gets there
one of two ways:

- **from a fork server** (the default): a process with threads (a kernel, a server) must not fork
  itself, since a fork copies locks other threads may hold. It starts the standard library's
  ``multiprocessing`` fork server once, single-threaded, with the owner's modules imported, and
  asks it for each owner: the forked child leaves the session and forks the owner, which takes
  this process's current environment and working directory. A start costs a fork instead of an
  interpreter start and the owner's imports (about 0.4 s).
- **fork** (``fork=True``, taken only while the caller has no other thread: the CLI): the caller
  forks, the child leaves the session and forks the owner. The owner starts with everything the
  CLI already imported, so a run starts as fast as it did in-process.

The owner executes the run exactly as an in-process owner does
(:func:`~rho_notebook.runtime.owner.execute_run`). Nobody is at a prompt in the owner itself: a
request for a person is a file in the run's ``requests`` folder, answered by a follower (the
terminal's prompt, the widget, the sidebar) or ``rho-notebook approve``. While a follower that
can answer is attached (:class:`~rho_notebook.store.run_locks.FollowLock`), a supervised launch
waits as long as the node allows; with none, :attr:`OwnerOptions.approval_timeout` applies.

The starter learns how the start went over a private pipe, one JSON line at a time: the owner's
``pid`` right after the fork, then ``ok`` once the owner has journaled its first record (it holds
the run) or ``error`` (the pickled error, e.g. the run is owned elsewhere) when it could not take
the run. Pickle is safe here: the pipe is inherited, only our own child writes to it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gc
import json
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from rho_notebook.errors import RhoError, RunRefused
from rho_notebook.runtime.failpoints import rearm as rearm_failpoints
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import FollowLock

__all__ = ["start_owner", "OwnerOptions", "OWNER_LOG"]

OWNER_LOG = "owner.log"
"""The detached owner's stdout and stderr, in the run's folder."""

_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class OwnerOptions:
    """How the owner executes the run (what ``run``/``resume`` flags ask of it)."""

    resume: bool = False
    """Resume the run (else a created run is started)."""
    recover_uncertain: bool = False
    """Settle uncertain attempts (``resume --recover-uncertain``: a person inspected them)."""
    decisions: Mapping[str, str] = field(default_factory=dict)
    """A script run's ``--decide`` step -> rerun|skip."""
    approval_timeout: float | None = None
    """Seconds a supervised launch waits for a person when no follower that can answer is
    attached, then fails closed (``--approval-timeout``). None: as long as the node allows, as
    for a run started from a notebook or through MCP, whose person may come back later."""
    executor: str | None = None
    """``local``, ``dask`` or ``dask=ADDRESS`` for this execution (None: the run's recorded one)."""


def start_owner(
    layout: StoreLayout,
    run_id: str,
    options: OwnerOptions | None = None,
    *,
    fork: bool = False,
    ready_seconds: float = 60.0,
) -> int:
    """Start the owner of run ``run_id`` (a full ID) detached, and return its pid once it holds
    the run (or, if it is still starting after ``ready_seconds``, once it exists).

    ``fork`` forks this process itself when it has no other thread (the CLI); otherwise the
    owners' fork server forks the owner (see the module's docstring).

    Raises
    ------
    RhoError
        The owner could not take the run (the error it raised: owned elsewhere, damaged, already
        completed, needs recovery, a decision for no such step, ...).
    RunRefused
        The owner process could not be started, or ended without saying why (see ``owner.log``).
    """
    options = options or OwnerOptions()
    log_path = layout.run_dir(run_id) / OWNER_LOG
    try:
        log_fd = os.open(log_path, _LOG_FLAGS, 0o600)
    except OSError as err:
        msg = f"cannot open {log_path} for the owner of run {run_id}: {err}"
        raise RunRefused(msg) from None
    try:
        if fork and threading.active_count() == 1:
            read_end = _forked_owner(layout, run_id, options, log_fd=log_fd)
        else:
            read_end = _owner_server.request(layout, run_id, options)
    finally:
        os.close(log_fd)
    try:
        return _await_report(read_end, run_id=run_id, log=str(log_path), seconds=ready_seconds)
    finally:
        os.close(read_end)


class _OwnerServer:
    """This process's fork server for owners: a single-threaded interpreter started once
    (:func:`serve`), with the owner's modules imported, that forks an owner per request.

    A request is one message on a private ``SOCK_SEQPACKET`` socket pair: the run, the options,
    this process's current environment and working directory as JSON, and the write end of the
    owner's report pipe passed along (``SCM_RIGHTS``). The server ends when this process closes
    its end (or dies); it ignores SIGINT (a kernel's interrupt reaches its whole process group).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None

    def request(self, layout: StoreLayout, run_id: str, options: OwnerOptions) -> int:
        """Ask for the owner of ``run_id``; the read end of its report pipe (the caller closes it)."""
        message = json.dumps(
            {
                "home": str(layout.home),
                "run_id": run_id,
                "options": {**dataclasses.asdict(options), "decisions": dict(options.decisions)},
                "environ": dict(os.environ),
                "cwd": os.getcwd(),
            }
        ).encode()
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                for attempt in (1, 2):
                    try:
                        socket.send_fds(self._connected(), [message], [write_end])
                        break
                    except OSError as err:
                        self._forget()  # the server died: start another once
                        if attempt == 2:
                            os.close(read_end)
                            msg = f"cannot start an owner process for run {run_id}: {err}"
                            raise RunRefused(msg) from None
        finally:
            os.close(write_end)
        return read_end

    def _connected(self) -> socket.socket:
        if self._socket is not None and self._process is not None and self._process.poll() is None:
            return self._socket
        self._forget()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            bootstrap = f"import sys, json; sys.path[:] = json.loads(sys.argv[1]); from {__name__} import serve; serve(int(sys.argv[2]))"
            self._process = subprocess.Popen(  # noqa: S603 - our own module, no shell
                [sys.executable, "-c", bootstrap, json.dumps(sys.path), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        self._socket = ours
        return ours

    def _forget(self) -> None:
        if self._socket is not None:
            self._socket.close()
        self._socket = self._process = None


_owner_server = _OwnerServer()


def serve(fd: int) -> None:
    """The owners' fork server (:class:`_OwnerServer`): fork an owner per request until the
    process that started it closes its end of socket ``fd``."""
    import rho_notebook.exec.agent  # noqa: F401 - imported once here, not in every owner
    import rho_notebook.exec.approval  # noqa: F401
    import rho_notebook.runtime.owner  # noqa: F401

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = socket.socket(fileno=fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(server, 1 << 22, 1)
        except OSError:
            return
        if not message:
            return  # the process that started us is gone
        if not fds:
            continue
        child = os.fork()
        if child == 0:
            server.close()
            _owner_from_server(json.loads(message), fds[0])
        os.close(fds[0])
        os.waitpid(child, 0)  # it forks the owner and exits at once


def _owner_from_server(request: dict[str, Any], report: int) -> NoReturn:
    """In the fork server's child: leave the session, fork the owner (which takes the caller's
    environment and working directory); this child exits at once."""

    def own() -> int:
        os.setsid()
        if os.fork() != 0:
            return 0  # this child exits: the owner below is re-parented, nobody's child
        os.environ.clear()
        os.environ.update(request["environ"])
        os.environ["RHO_NOTEBOOK_HOME"] = request["home"]
        os.chdir(request["cwd"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rearm_failpoints()
        layout = StoreLayout(home=Path(request["home"]))
        run_id = request["run_id"]
        _become_owner_process(os.open(layout.run_dir(run_id) / OWNER_LOG, _LOG_FLAGS, 0o600))
        return _run_owner(layout, run_id, OwnerOptions(**request["options"]), _Reporter(report))

    _exit_after(own)


def _forked_owner(layout: StoreLayout, run_id: str, options: OwnerOptions, *, log_fd: int) -> int:
    """Fork this (single-threaded) process: the child leaves the caller's session and forks the
    owner, which runs the run and ends with it; the caller waits only for the child. The read end
    of the owner's report pipe (the caller closes it)."""
    report = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        os.close(report[1])
        os.waitpid(pid, 0)
        return report[0]

    def own() -> int:
        os.close(report[0])
        os.setsid()
        if os.fork() != 0:
            return 0  # this child exits: the owner below is re-parented, nobody's child
        _become_owner_process(log_fd)
        return _run_owner(layout, run_id, options, _Reporter(report[1]))

    _exit_after(own)


def _exit_after(own: Callable[[], int]) -> NoReturn:
    """A forked owner's whole life: ``own()``, then exit with its code, never returning into the
    code of the process it was forked from."""
    code = 1
    try:
        code = own()
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _become_owner_process(log_fd: int) -> None:
    """In a forked owner: stdin from /dev/null, stdout and stderr to its log (Python's streams
    too: the caller's may not have been fds 1 and 2), the default signal handlers."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(devnull)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def _await_report(fd: int, *, run_id: str, log: str, seconds: float) -> int:
    """Read the owner's report lines until it holds the run, fails, or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    buffer = b""
    pid: int | None = None
    while True:
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            pid, holds = _read_report(json.loads(line), pid, run_id=run_id, log=log)
            if holds and pid is not None:
                return pid
        remaining = deadline - time.monotonic()
        if remaining <= 0 and pid is not None:
            return pid  # still starting: status shows when it holds the run
        if remaining <= 0:
            msg = f"the owner of run {run_id} did not start within {seconds:g} s; see {log}"
            raise RunRefused(msg)
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            msg = f"the owner of run {run_id} exited before it held the run; see {log}"
            raise RunRefused(msg)
        buffer += chunk


def _read_report(report: dict[str, Any], pid: int | None, *, run_id: str, log: str) -> tuple[int | None, bool]:
    """(the owner's pid so far, whether it says it holds the run) after one report line; an
    error report is raised (the owner's own RhoError as it is)."""
    if "pid" in report:
        return int(report["pid"]), False
    if "error" in report:
        err = pickle.loads(base64.b64decode(report["error"]))  # noqa: S301 - our own child, private pipe
        if isinstance(err, RhoError):
            raise err
        msg = f"the owner of run {run_id} failed to start: {err}; see {log}"
        raise RunRefused(msg)
    return pid, bool(report.get("ok"))


# -- the owner's side --------------------------------------------------------------------------------


class _Reporter:
    """The owner's end of the report pipe; writes never fail the run (the starter may be gone)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def send(self, report: dict[str, Any], *, last: bool = False) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, json.dumps(report).encode() + b"\n")
        except OSError:
            pass  # the starter exited (a closed MCP server): nobody is waiting for the report
        if last:
            os.close(self.fd)
            self.fd = None


def _log(line: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}", file=sys.stderr, flush=True)


def _run_owner(layout: StoreLayout, run_id: str, options: OwnerOptions, reporter: _Reporter) -> int:
    """In the owner process: report the pid, own the run to its end; the process's exit code."""
    reporter.send({"pid": os.getpid()})
    # What the owner inherited (the CLI's or the fork server's modules and objects) lives until it
    # exits: out of the collector's way, a full collection during the run scans only the run's own
    # objects (one cost 25 ms in a 500-node fan), and the inherited pages stay shared.
    gc.freeze()
    return asyncio.run(_own(layout, run_id, options, reporter))


async def _own(layout: StoreLayout, run_id: str, options: OwnerOptions, reporter: _Reporter) -> int:
    from rho_notebook.policy.approvals import ApprovalRequest
    from rho_notebook.runtime.owner import execute_run

    folder = layout.run_dir(run_id)

    def on_event(record: dict[str, Any]) -> None:
        # it holds the run once the run has started: a resumed run's first records reset its
        # nodes, and until its run_started the run still reads as it ended (a wait or cancel
        # right after the start would take it for finished)
        if reporter.fd is not None and record.get("kind") == "run_started":
            reporter.send({"ok": True}, last=True)

    def ask_a_person(request: ApprovalRequest) -> None:
        _log(
            f"run {run_id}: node {request.node} waits for a person: "
            f"rho-notebook approve {run_id} {request.request_id} (or --deny), or the widget or the sidebar"
        )

    def attended() -> bool:
        return options.approval_timeout is None or FollowLock.attended(folder)

    _log(f"owning run {run_id} (pid {os.getpid()})" + (" (resume)" if options.resume else ""))
    try:
        state = await execute_run(
            layout,
            run_id,
            resume=options.resume,
            recover_uncertain=options.recover_uncertain,
            responder=ask_a_person,
            approval_timeout=options.approval_timeout or 0.0,
            attended=attended,
            decisions=options.decisions,
            executor=options.executor,
            on_event=on_event,
        )
    except RhoError as err:
        reporter.send({"error": base64.b64encode(pickle.dumps(err)).decode()}, last=True)
        _log(f"error[{err.rule}]: {err.message}")
        return err.exit_code
    except BaseException as err:
        reporter.send({"error": base64.b64encode(pickle.dumps(RuntimeError(repr(err)))).decode()}, last=True)
        traceback.print_exc()
        return 1
    reporter.send({"ok": True}, last=True)  # (a no-op once run_started was reported)
    _log(f"run {run_id} {state.lifecycle.value}" + (f" {state.outcome}" if state.outcome else ""))
    return 0 if state.outcome == "success" else 1
