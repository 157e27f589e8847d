"""``%workflow run NAME --executor dask=ADDRESS`` from a cell (docs/distributed.md): the notebook's
background runner sends the attempts to a real Dask scheduler, a ``placement = "local"`` node
stays with the kernel's runner, and the run manifest records the choice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Project
from tests.kernel.helpers import C, ok, workflow_cell

REMOTE = workflow_cell(
    "remote",
    f'        command(name = "a", argv = ["true"], {C}),\n'
    f'        command(name = "b", argv = ["true"], needs = ["a"], placement = "local", {C}),\n',
)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield str(cluster.scheduler_address)


def test_a_cell_runs_its_workflow_on_a_dask_scheduler(ip: Any, ws: Project, scheduler: str) -> None:
    ok(ip, REMOTE)
    ok(ip, f"run = %workflow run remote --yes --executor dask={scheduler}")
    ok(ip, "final = await run")
    run_id = ip.user_ns["run"].run_id
    assert ip.user_ns["final"].outcome == "success"
    manifest = json.loads((ws.home / "workflows" / "runs" / run_id / "manifest.json").read_text())
    assert manifest["executor"] == f"dask={scheduler}"
    events = [json.loads(line) for line in ws.cli("events", run_id, check=True).stdout.splitlines()]
    exits = {e["node"]: e["exit"] for e in events if e["kind"] == "node_finished"}
    assert exits["a"]["worker"].startswith("tcp://")  # ran on the cluster's worker
    assert "worker" not in exits["b"]  # placement = "local": the kernel's runner launched it
