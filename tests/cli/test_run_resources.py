"""A run gives back what it held: an owner process (a notebook kernel runs many runs) ends a run
holding no descriptor on its store, its workspace or its frozen executables (checkout lock file,
kept verified handles, journal). Only /dev/null, every child's stdin, stays open for good."""

from __future__ import annotations

import asyncio
import gc
import os

from rho_notebook.exec import verify
from rho_notebook.runtime.owner import execute_run
from tests.cli.runhelp import create_run
from tests.conftest import Project, star


def _targets() -> list[str]:
    """Where this process's open descriptors point (one that closes meanwhile is skipped)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return found


def test_runs_leave_no_descriptor_open(project: Project, monkeypatch) -> None:
    monkeypatch.setattr(verify, "SETTLED_SECONDS", 0.0)  # the test's files may be kept as handles
    project.write("tool.sh", "#!/bin/sh\ntrue\n", mode=0o755)
    c = "timeout_seconds = 10, max_output_bytes = 100"
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "r", nodes = [command(name = "a", argv = ["./tool.sh"], {c}), command(name = "b", argv = ["true"], needs = ["a"], {c})])'
        ),
    )
    plan = project.plan("wf.star")
    service = project.service
    # what a run opens: its store (journal, checkout lock), the workspace (cwd), frozen executables
    ours = (str(project.home), str(project.root), os.path.realpath("/bin/sh"), os.path.realpath("/bin/true"))

    def held() -> list[str]:
        return [target for target in _targets() if target.startswith(ours)]

    async def runs() -> list[str]:
        assert held() == []
        for _ in range(2):
            state = await execute_run(service.layout, await create_run(service, plan), resume=False)
            assert state.outcome == "success"
        return held()

    gc.collect()
    gc.disable()  # nothing closed by the collector behind the run's back
    try:
        assert asyncio.run(runs()) == []
    finally:
        gc.enable()
