"""States as the run has them, through real runs and real CLI processes: an allowed failure is
``failure (allowed)`` in ``status`` (text and JSON) and in the DAG view's node views, a launch held
for a supervised approval is ``waiting for approval`` (nothing started), the run list names the
command that moves on a run that waits for a person, and the node pane's traceback of a failed
Python node starts at the author's code."""

from __future__ import annotations

import asyncio
import json

from rho_notebook.model.run_state import RunState
from rho_notebook.views.dag import RunTracker, read_run_view
from rho_notebook.views.detail import read_node_detail
from tests.cli.runhelp import kill_owner, run, start_run, status, wait_for_event
from tests.conftest import Project, star

C = "timeout_seconds = 60, max_output_bytes = 65536"

BOOM = """\
def helper(x):
    raise ValueError(f"bad value {x}")


def boom(x):
    return helper(x)
"""

ALLOWED = star(f"""
return workflow(name = "allowed", nodes = [
    python(name = "boom", module = "//nodes/boom.py", function = "boom", args = {{"x": 3}}, allow_failure = True, {C}),
    command(name = "fine", argv = ["true"], {C}),
])
""")

LAUNCH = star(f"""
return workflow(name = "launch", nodes = [
    command(name = "write", argv = ["touch", "written.txt"], {C}),
])
""")


def test_an_allowed_failure_is_shown_as_allowed_and_its_traceback_starts_at_the_authors_code(
    project: Project,
) -> None:
    project.write("nodes/boom.py", BOOM)
    project.write("wf.star", ALLOWED)
    result, data = run(project, "wf.star")
    assert result.returncode == 0, result.stderr
    assert data["outcome"] == "success"
    assert data["nodes"]["boom"]["state"] == "failure" and data["nodes"]["boom"]["shown"] == "failure_allowed"
    assert data["nodes"]["fine"]["shown"] == "success"
    run_id = data["run_id"]
    text = project.cli("status", run_id)
    assert text.returncode == 0, text.stderr
    line = next(line for line in text.stdout.splitlines() if line.strip().startswith("boom "))
    assert "failure (allowed)" in line, text.stdout

    view = asyncio.run(read_run_view(project.service, run_id))
    assert view.nodes["boom"]["shown"] == "failure_allowed" and view.nodes["fine"]["shown"] == "success"
    # the live view (a widget's tracker, fed the journal as the run goes) shows the same
    graph = asyncio.run(project.service.run_graph(run_id))
    events = asyncio.run(project.service.journal(run_id)).events
    fresh = RunState.fresh(run_id=run_id, plan_id=data["plan_id"], graph=graph, graph_digest=data["graph_digest"])
    tracker = RunTracker(fresh, graph=graph)
    for event in events:
        tracker.feed(event)
    assert tracker.nodes["boom"]["shown"] == "failure_allowed" and tracker.nodes["fine"]["shown"] == "success"

    # the pane shows the author's frames and the exception, none of the harness or fork server
    detail = asyncio.run(read_node_detail(project.service, run_id, "boom"))
    stderr = detail["stderr"]
    assert stderr is not None
    shown = stderr["text"]
    assert shown.startswith("Traceback (most recent call last):\n"), shown
    frames = [line for line in shown.splitlines() if line.lstrip().startswith("File ")]
    assert len(frames) == 2 and all("nodes/boom.py" in frame for frame in frames), shown
    assert "raise ValueError" in shown and shown.rstrip().endswith("ValueError: bad value 3")
    assert "_rho_harness" not in shown and "/proc/self/fd" not in shown
    # the log itself is as the process wrote it
    logs = project.cli("logs", run_id, "boom", "--stream", "stderr")
    assert "_rho_harness.py" in logs.stdout + logs.stderr


def test_a_launch_held_for_approval_is_waiting_for_approval_and_a_dead_owner_asks_for_resume(
    project: Project,
) -> None:
    project.write("wf.star", LAUNCH)
    proc = start_run(project, "wf.star", "--mode", "supervised", "--approval-timeout", "120")
    try:
        run_id, requested = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
        assert requested["approval"] == "launch"
        data = status(project, run_id)
        assert data["lifecycle"] == "waiting"
        assert data["nodes"]["write"]["state"] == "running"  # what the journal records
        assert data["nodes"]["write"]["shown"] == "waiting_for_approval"  # nothing started
        text = project.cli("status", run_id).stdout
        line = next(line for line in text.splitlines() if line.strip().startswith("write "))
        assert "waiting for approval" in line and "running" not in line, text
        view = asyncio.run(read_run_view(project.service, run_id))
        assert view.nodes["write"]["shown"] == "waiting_for_approval"
        runs = project.cli("runs")
        assert f"needs a person: rho-notebook status {run_id}" in runs.stdout, runs.stdout
        rows = json.loads(project.cli("runs", "--output", "json").stdout)
        assert rows[-1]["next"] == f"rho-notebook status {run_id}"

        kill_owner(project, run_id)  # the owner dies while the person is asked: nothing ran
        after = status(project, run_id)
        assert after["lifecycle"] == "needs_recovery"
        runs = project.cli("runs")
        assert f"needs a person: rho-notebook resume {run_id}" in runs.stdout, runs.stdout
        assert "--recover-uncertain" not in runs.stdout
        assert not (project.root / "written.txt").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
