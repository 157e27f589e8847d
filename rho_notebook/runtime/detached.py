"""A run's owner in a process of its own, detached from whoever started it.

The model-facing tool (MCP) starts runs and answers at once; the run must not depend on the
tool's server staying up. :func:`start_owner` starts ``python -m rho_notebook.runtime.detached
RUN_ID`` in a new session (no shell, stdin from ``/dev/null``, stdout and stderr appended to
``owner.log`` in the run's folder). That process forks the owner and exits at once, so the owner
is nobody's child: closing the server, its terminal or its session never stops the run.

The owner executes the run exactly as ``rho-notebook run``/``resume`` does
(:func:`~rho_notebook.runtime.owner.execute_run`), with one difference: nobody is at a prompt, so
a supervised launch or an approval node waits for a person for as long as the node's own timeout
(a request in the run's ``requests`` folder, decided with ``rho-notebook approve``, the widget or
the sidebar) instead of failing closed at once as a headless ``run`` does.

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
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any

from rho_notebook.errors import RhoError, RunRefused
from rho_notebook.store.layout import StoreLayout

__all__ = ["start_owner", "OWNER_LOG", "main"]

OWNER_LOG = "owner.log"
"""The detached owner's stdout and stderr, in the run's folder."""

_MODULE = "rho_notebook.runtime.detached"


def start_owner(
    layout: StoreLayout,
    run_id: str,
    *,
    resume: bool = False,
    decisions: Mapping[str, str] | None = None,
    ready_seconds: float = 60.0,
) -> int:
    """Start the owner of run ``run_id`` (a full ID) detached, and return its pid once it holds
    the run (or, if it is still starting after ``ready_seconds``, once it exists).

    ``resume`` resumes the run (``decisions``: a script run's ``--decide`` step -> rerun/skip);
    otherwise a created run is started. Uncertain attempts are never recovered here: that takes a
    person (``rho-notebook resume RUN --recover-uncertain``).

    Raises
    ------
    RhoError
        The owner could not take the run (the error it raised: owned elsewhere, damaged, already
        completed, a decision for no such step, ...).
    RunRefused
        The owner process could not be started, or ended without saying why (see ``owner.log``).
    """
    folder = layout.run_dir(run_id)
    log_path = folder / OWNER_LOG
    argv = [sys.executable, "-m", _MODULE, run_id]
    if resume:
        argv.append("--resume")
    if decisions:
        argv += ["--decisions", json.dumps(dict(decisions), sort_keys=True)]
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        msg = f"cannot open {log_path} for the owner of run {run_id}: {err}"
        raise RunRefused(msg) from None
    read_end, write_end = os.pipe()
    try:
        argv += ["--report-fd", str(write_end)]
        env = {**os.environ, "RHO_NOTEBOOK_HOME": str(layout.home)}
        try:
            starter = subprocess.Popen(  # noqa: S603 - our own module, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                pass_fds=(write_end,),
                start_new_session=True,
                env=env,
            )
        except OSError as err:
            msg = f"cannot start an owner process for run {run_id}: {err}"
            raise RunRefused(msg) from None
    finally:
        os.close(write_end)
        os.close(log_fd)
    try:
        starter.wait()  # it forks the owner and exits at once
        return _await_report(read_end, run_id=run_id, log=str(log_path), seconds=ready_seconds)
    finally:
        os.close(read_end)


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


async def _own(run_id: str, *, resume: bool, decisions: dict[str, str], reporter: _Reporter) -> int:
    from rho_notebook.policy.approvals import ApprovalRequest
    from rho_notebook.runtime.owner import execute_run

    def on_event(record: dict[str, Any]) -> None:
        if reporter.fd is not None:
            reporter.send({"ok": True}, last=True)

    def ask_a_person(request: ApprovalRequest) -> None:
        _log(
            f"run {run_id}: node {request.node} waits for a person: "
            f"rho-notebook approve {run_id} {request.request_id} (or --deny), or the widget or the sidebar"
        )

    _log(f"owning run {run_id}" + (" (resume)" if resume else ""))
    try:
        state = await execute_run(
            StoreLayout.default(), run_id, resume=resume, responder=ask_a_person, decisions=decisions, on_event=on_event
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
    """``python -m rho_notebook.runtime.detached RUN_ID [--resume] [--decisions JSON] [--report-fd N]``."""
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description="own one run, detached")
    parser.add_argument("run_id", help="the run's full ID")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--decisions", default="{}", help="a script run's decisions: JSON step -> rerun|skip")
    parser.add_argument("--report-fd", type=int, default=None, help="where to report the start (start_owner's pipe)")
    args = parser.parse_args(argv)
    decisions = json.loads(args.decisions)
    if os.fork() != 0:
        os._exit(0)  # the starter's child exits: the owner below is re-parented, nobody's child
    reporter = _Reporter(args.report_fd)
    reporter.send({"pid": os.getpid()})
    return asyncio.run(_own(args.run_id, resume=args.resume, decisions=decisions, reporter=reporter))


if __name__ == "__main__":
    sys.exit(main())
