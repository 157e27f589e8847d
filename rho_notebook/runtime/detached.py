"""A run's owner in a process of its own, detached from whoever started it.

Every front end starts runs this way: the CLI's ``run`` and ``resume``, the notebook (``rho.run``,
``%workflow``), the Jupyter server and MCP. What happens to the caller afterwards (Ctrl-C, a closed
pipe, SIGTERM or SIGHUP, a kernel restart or crash, JupyterLab shutting down) stops only its
*following* of the run (:mod:`rho_notebook.runtime.follow`); only a cancel request stops the run.

:func:`start_owner` starts the owner in a new session, nobody's child, with stdin from
``/dev/null`` and stdout and stderr appended to ``owner.log`` in the run's folder. It gets there
one of two ways:

- **spawn** (the default): ``python -m rho_notebook.runtime.detached RUN_ID [options]``, which
  forks the owner and exits. A process with threads (a kernel, a server) must spawn: forking a
  threaded process copies locks other threads may hold.
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

import argparse
import asyncio
import base64
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.errors import RhoError, RunRefused
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import FollowLock

__all__ = ["start_owner", "OwnerOptions", "OWNER_LOG", "main"]

OWNER_LOG = "owner.log"
"""The detached owner's stdout and stderr, in the run's folder."""

_MODULE = "rho_notebook.runtime.detached"


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

    def argv(self) -> list[str]:
        """These options as :func:`main` parses them."""
        args: list[str] = []
        if self.resume:
            args.append("--resume")
        if self.recover_uncertain:
            args.append("--recover-uncertain")
        if self.decisions:
            args += ["--decisions", json.dumps(dict(self.decisions), sort_keys=True)]
        if self.approval_timeout is not None:
            args += ["--approval-timeout", repr(float(self.approval_timeout))]
        if self.executor is not None:
            args += ["--executor", self.executor]
        return args


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

    ``fork`` forks this process instead of spawning a new interpreter, when this process has no
    other thread (else it spawns: see the module's docstring).

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
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        msg = f"cannot open {log_path} for the owner of run {run_id}: {err}"
        raise RunRefused(msg) from None
    read_end, write_end = os.pipe()
    try:
        try:
            if fork and threading.active_count() == 1:
                _fork_owner(layout, run_id, options, log_fd=log_fd, report=(read_end, write_end))
            else:
                _spawn_owner(layout, run_id, options, log_fd=log_fd, report_fd=write_end)
        finally:
            os.close(write_end)
            os.close(log_fd)
        return _await_report(read_end, run_id=run_id, log=str(log_path), seconds=ready_seconds)
    finally:
        os.close(read_end)


def _spawn_owner(layout: StoreLayout, run_id: str, options: OwnerOptions, *, log_fd: int, report_fd: int) -> None:
    """``python -m rho_notebook.runtime.detached``, in a new session; it forks the owner and exits."""
    argv = [sys.executable, "-m", _MODULE, run_id, *options.argv(), "--report-fd", str(report_fd)]
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(layout.home)}
    try:
        starter = subprocess.Popen(  # noqa: S603 - our own module, no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            pass_fds=(report_fd,),
            start_new_session=True,
            env=env,
        )
    except OSError as err:
        msg = f"cannot start an owner process for run {run_id}: {err}"
        raise RunRefused(msg) from None
    starter.wait()  # it forks the owner and exits at once


def _fork_owner(
    layout: StoreLayout, run_id: str, options: OwnerOptions, *, log_fd: int, report: tuple[int, int]
) -> None:
    """Fork this (single-threaded) process: the child leaves the caller's session and forks the
    owner, which runs the run and ends with it; the caller waits only for the child."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        os.waitpid(pid, 0)
        return
    code = 1
    try:
        os.close(report[0])
        os.setsid()
        if os.fork() != 0:
            os._exit(0)  # the owner below is re-parented: nobody's child
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(devnull)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        code = _run_owner(layout, run_id, options, _Reporter(report[1]))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


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
    return asyncio.run(_own(layout, run_id, options, reporter))


async def _own(layout: StoreLayout, run_id: str, options: OwnerOptions, reporter: _Reporter) -> int:
    from rho_notebook.policy.approvals import ApprovalRequest
    from rho_notebook.runtime.owner import execute_run

    folder = layout.run_dir(run_id)

    def on_event(record: dict[str, Any]) -> None:
        if reporter.fd is not None:
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
    _log(f"run {run_id} {state.lifecycle.value}" + (f" {state.outcome}" if state.outcome else ""))
    return 0 if state.outcome == "success" else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m rho_notebook.runtime.detached RUN_ID [OPTIONS] [--report-fd N]`` (:class:`OwnerOptions`)."""
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description="own one run, detached")
    parser.add_argument("run_id", help="the run's full ID")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--recover-uncertain", action="store_true")
    parser.add_argument("--decisions", default="{}", help="a script run's decisions: JSON step -> rerun|skip")
    parser.add_argument("--approval-timeout", type=float, default=None)
    parser.add_argument("--executor", default=None)
    parser.add_argument("--report-fd", type=int, default=None, help="where to report the start (start_owner's pipe)")
    args = parser.parse_args(argv)
    options = OwnerOptions(
        resume=args.resume,
        recover_uncertain=args.recover_uncertain,
        decisions=json.loads(args.decisions),
        approval_timeout=args.approval_timeout,
        executor=args.executor,
    )
    if os.fork() != 0:
        os._exit(0)  # the starter's child exits: the owner below is re-parented, nobody's child
    return _run_owner(StoreLayout.default(), args.run_id, options, _Reporter(args.report_fd))


if __name__ == "__main__":
    sys.exit(main())
