"""A run gives back what it held: an owner process (a notebook kernel runs many runs) ends a run
with the descriptors it started with — checkout lock file, kept verified handles, journal. Only
the first run opens one descriptor for good: /dev/null, every child's stdin."""

from __future__ import annotations

import asyncio
import gc
import os

from rho_notebook.exec import verify
from rho_notebook.run.owner import execute_run
from tests.conftest import Project, star


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_runs_leave_no_descriptor_open(project: Project, monkeypatch) -> None:
    monkeypatch.setattr(verify, "SETTLED_SECONDS", 0.0)  # the test's files may be kept as handles
    project.write("tool.sh", "#!/bin/sh\ntrue\n", mode=0o755)
    c = "timeout_seconds = 10, max_output_bytes = 100"
    project.write(
        "wf.star",
        star(f'return workflow(name = "r", nodes = [command(name = "a", argv = ["./tool.sh"], {c}), command(name = "b", argv = ["true"], needs = ["a"], {c})])'),
    )
    plan = project.plan("wf.star")
    service = project.service

    async def two_runs() -> set[str]:
        # a first run opens what the process keeps for good (one /dev/null for children's stdin)
        assert (await execute_run(service.layout, service.create_run(plan), resume=False)).outcome == "success"
        before = _open_fds()  # inside the loop: its own selector and self-pipe are open already
        for _ in range(2):
            state = await execute_run(service.layout, service.create_run(plan), resume=False)
            assert state.outcome == "success"
        held = [os.readlink(f"/proc/self/fd/{fd}") for fd in _open_fds() if os.path.exists(f"/proc/self/fd/{fd}")]
        assert not [path for path in held if "checkout-locks" in path or path.endswith(("tool.sh", "/true"))]
        return _open_fds() - before

    gc.collect()
    gc.disable()  # no collector-driven closing in the middle of the count
    try:
        leaked = asyncio.run(two_runs())
    finally:
        gc.enable()
    assert leaked == set(), {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in leaked if os.path.exists(f"/proc/self/fd/{fd}")}
