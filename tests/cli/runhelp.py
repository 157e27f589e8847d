"""Helpers for CLI run tests: plan + run through real `rho-notebook` processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rho_notebook.model.plan import Plan
from rho_notebook.service import Consent, Service, StartRun
from rho_notebook.store.run_locks import OwnerLock
from tests.conftest import REPO, Project


async def create_run(service: Service, plan: Plan) -> str:
    """Create (not start) a run of a stored plan, its digest confirmed: the run ID."""
    return await service.create_run_of(plan, StartRun(plan=plan.plan_id, consent=Consent(yes=True)))


def plan_id(project: Project, entry: str = "wf.star", *args: str) -> str:
    result = project.cli("plan", entry, "--output", "json", *args)
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["plan_id"])


def run(
    project: Project, entry: str = "wf.star", *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    pid = plan_id(project, entry)
    result = project.cli("run", pid, "--yes", "--output", "jsonl", *args)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    run_id = events[0]["run_id"]
    return result, status(project, run_id)


def status(project: Project, run_id: str) -> dict[str, Any]:
    result = project.cli("status", run_id, "--output", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def start_run(
    project: Project, entry: str = "wf.star", *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start `rho-notebook run` in the background (its own session) and return the process."""
    pid = plan_id(project, entry)
    full_env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", pid, "--yes", "--output", "jsonl", *args],
        cwd=project.root,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_event(proc: subprocess.Popen[str], predicate: Any, timeout: float = 30) -> tuple[str, dict[str, Any]]:
    """Read the run's jsonl until an event matches; returns (run_id, event)."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        record = json.loads(line)
        if predicate(record):
            return record["run_id"], record
    raise AssertionError("event not seen: " + (proc.stderr.read() if proc.stderr else ""))


def only_run_id(project: Project) -> str:
    runs = sorted((project.home / "workflows" / "runs").iterdir())
    assert len(runs) == 1
    return runs[0].name


def run_folder(project: Project, run_id: str) -> Path:
    return project.home / "workflows" / "runs" / run_id


def owner_pid(project: Project, run_id: str) -> int | None:
    """The pid of the process that owns the run now (its own process, not the CLI following it);
    None when nobody owns it."""
    return OwnerLock.holder(run_folder(project, run_id) / "mutation.lock")


def kill_owner(project: Project, run_id: str, *, sig: int = signal.SIGKILL, timeout: float = 30) -> int:
    """Send ``sig`` to the run's owner process (what killing ``rho-notebook run`` did when the CLI
    was the owner) and wait until it no longer holds the run: its pid."""
    pid = owner_pid(project, run_id)
    assert pid, f"run {run_id} has no live owner"
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while owner_pid(project, run_id) is not None:
        assert time.monotonic() < deadline, f"the owner {pid} of run {run_id} still holds it"
        time.sleep(0.02)
    return pid


def owner_ended_its_run(project: Project, run_id: str) -> bool:
    """Whether the run's owner process logged the end of its execution (``run RUN LIFECYCLE`` in
    ``owner.log``): an owner SIGKILLed (a failpoint) never does."""
    log = run_folder(project, run_id) / "owner.log"
    text = log.read_text() if log.exists() else ""
    return re.search(rf"Z run {run_id} [a-z_]+", text) is not None
