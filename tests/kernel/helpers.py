"""Helpers for the notebook tests: running cells in a real shell and building workflow cells."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.utils.capture import CapturedIO, capture_output

from rho_notebook.runtime.cancel import request_cancel
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import OwnerLock
from tests.conftest import Project

C = "timeout_seconds = 30, max_output_bytes = 4096"


def cell(ip: Any, source: str) -> tuple[Any, CapturedIO]:
    """Run one cell as a front end would (stored in history, so it gets an In[N] number)."""
    with capture_output() as captured:
        result = ip.run_cell(source, store_history=True)
    return result, captured


def ok(ip: Any, source: str) -> tuple[Any, CapturedIO]:
    result, captured = cell(ip, source)
    error = result.error_before_exec or result.error_in_exec
    assert error is None, f"{type(error).__name__}: {error}\nstdout: {captured.stdout}\nstderr: {captured.stderr}"
    return result.result, captured


def usage_error(ip: Any, source: str) -> str:
    result, captured = cell(ip, source)
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, captured.stdout, captured.stderr)
    return str(result.error_in_exec)


def workflow_cell(name: str, nodes: str, *, header: str | None = None, inputs: str = "{}") -> str:
    """A %%workflow cell whose build() returns ``nodes`` (a Starlark list expression body)."""
    return (
        f"%%workflow {header if header is not None else name}\n"
        "def build(inputs):\n"
        f'    return workflow(name = "{name}", nodes = [\n'
        f"{nodes}"
        "    ])\n"
        "\n"
        f"WORKFLOW = define(inputs = {inputs}, build = build)\n"
    )


def status_json(project: Project, run_id: str) -> dict[str, Any]:
    result = project.cli("status", run_id, "--output", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def wait_until(predicate: Any, *, timeout: float = 30.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError("condition not reached in time")


def owner_pid(home: Path, run_id: str) -> int | None:
    """The pid of the process that owns run ``run_id`` now (its owner process), or None."""
    return OwnerLock.holder(StoreLayout(home=home).run_dir(run_id) / "mutation.lock")


def stop_owners(home: Path, *, timeout: float = 30.0) -> list[str]:
    """Cancel every run of the store at ``home`` whose owner process still runs, and wait for the
    owners to end: a run's owner outlives the kernel and the server that started it, but not the
    test (whose temporary folders go away). The runs it cancelled."""
    runs = home / "workflows" / "runs"
    live = [d.name for d in sorted(runs.iterdir()) if owner_pid(home, d.name)] if runs.is_dir() else []
    layout = StoreLayout(home=home)
    for run_id in live:
        request_cancel(layout, run_id, wait_seconds=0.0)
    deadline = time.monotonic() + timeout
    while any(owner_pid(home, run_id) for run_id in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    return live
