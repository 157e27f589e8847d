"""A Dask worker lost mid-attempt leaves no traceback on the owner's stderr (issue 28, finding 2).

``run --executor dask`` starts a ``LocalCluster`` whose scheduler lives in the owner's process, so
whatever the scheduler logs lands on the owner's stderr. When the worker running an attempt is
killed, Dask runs the task again (it finds its claim taken) and the owner gives the attempt up
(it takes its token back): neither may wait on the claim queue until a timeout, which the
scheduler logs as ``distributed.core - ERROR - Exception while handling op queue_get`` with a
traceback. The run ends ``needs_recovery`` as docs/distributed.md says.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from rho_notebook.oshelpers import kill_group_of, processes_with_env
from tests.cli.runhelp import start_run, status, wait_for_event
from tests.conftest import Project, star

pytest.importorskip("distributed")


def test_a_killed_worker_leaves_no_traceback_on_the_owners_stderr(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            'return workflow(name = "lost", nodes = [command(name = "once", argv = ["sh", "-c", '
            '"echo $PPID >> side.txt; exec sleep 120"], timeout_seconds = 120, max_output_bytes = 100)])'
        ),
    )
    proc = start_run(project, "wf.star", "--executor", "dask")
    run_id = ""
    try:
        run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "node_launched", timeout=90)
        side = project.root / "side.txt"
        deadline = time.monotonic() + 60
        while not (side.exists() and side.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(int(side.read_text().split()[0]), signal.SIGKILL)  # the worker that launched it
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_with_env("RHO_RUN_ID", run_id) if run_id else []:
            kill_group_of(pid, signal.SIGKILL)  # the `sleep` its killed worker left behind
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "queue_get" not in err and "distributed.core - ERROR" not in err, err
    assert status(project, run_id)["lifecycle"] == "needs_recovery"
    kinds = [json.loads(line)["kind"] for line in out.splitlines() if line.strip()]
    assert "attempt_uncertain" in kinds, kinds
    assert len(side.read_text().splitlines()) == 1  # launched once: the second execution found its claim taken
