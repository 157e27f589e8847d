"""Helpers for widget tests (imported by the tests; fixtures live in conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rho_notebook.model.plan import Plan
from rho_notebook.widgets._testing import RecordingComm, ThreadRunHandle
from tests.conftest import Project, star


def comm_of(comms: list[RecordingComm], widget: Any) -> RecordingComm:
    for found in comms:
        if found.comm_id == widget.model_id:
            return found
    msg = f"no recorded comm for widget {widget.model_id}"
    raise AssertionError(msg)


def wait_for(predicate: Callable[[], bool], *, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout} s waiting for {what}"
            raise AssertionError(msg)
        time.sleep(0.01)


def merge_front_end(messages: list[dict[str, Any]], initial: dict[str, Any]) -> dict[str, Any]:
    """What the front-end store does with snapshots and patches: newest version per node wins."""
    views = {name: dict(view) for name, view in initial.items()}
    for msg in messages:
        for name, view in (msg.get("nodes") or {}).items():
            if name not in views or view.get("v", 0) >= views[name].get("v", 0):
                views[name] = view
    return views


SMALL = star(
    """
    a = command(name = "a", argv = ["sh", "-c", "echo hello from a; echo warn >&2"], timeout_seconds = 10, max_output_bytes = 1000)
    b = command(name = "b", argv = ["sh", "-c", "echo '{\\"n\\": 3, \\"tags\\": [\\"x\\"]}'"], needs = ["a"],
        output = schema.stdout_json(schema.record({"n": schema.integer(), "tags": schema.list(schema.string())})),
        timeout_seconds = 10, max_output_bytes = 1000)
    c = command(name = "c", argv = ["true"], needs = ["a", "b"], when = condition.equals(exit_code("b"), 0),
        timeout_seconds = 10, max_output_bytes = 1000)
    d = command(name = "d", argv = ["sh", "-c", "yes x | head -c 5000"], needs = ["a"], timeout_seconds = 10,
        max_output_bytes = 100, allow_failure = True)
    e = command(name = "e", argv = ["false"], needs = ["c"], allow_failure = True, timeout_seconds = 10, max_output_bytes = 100)
    f = command(name = "f", argv = ["true"], needs = ["e"], timeout_seconds = 10, max_output_bytes = 100)
    return workflow(name = "small", nodes = [a, b, c, d, e, f])
    """
)


def start_run(project: Project, plan: Plan, *, resume: bool = False) -> ThreadRunHandle:
    service = project.service
    run_id = project.create_run(plan)
    return ThreadRunHandle(service, run_id, resume=resume)
