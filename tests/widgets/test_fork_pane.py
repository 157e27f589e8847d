"""The "fork from here" of the widget's node pane (issue 35): the front end's ``fork`` messages on a real
anywidget with recorded comms, over a real completed run; the fork starts in an owner process of
its own (the kernel's background runner), exactly as from a notebook.

A value that does not fit the node's output schema is answered with the refusal naming the field
and nothing is planned or started; a valid value is planned (the answer carries the derived plan's
ID and digest, no run is created); the confirmed plan starts, and the fork's d gets the edited
value while nothing before it is launched. A start naming no plan planned in this pane is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rho_notebook import widgets
from rho_notebook.service import Service
from rho_notebook.widgets._hub import Hub
from rho_notebook.widgets._testing import RecordingComm
from tests.conftest import Project, wait_journaled
from tests.fork_chain import fork_chain, launched
from tests.widgets.helpers import comm_of, start_run, wait_for


@dataclass
class _Session:
    """The least a hub needs: no workflow cells, the project's store."""

    service: Service
    workflows: list[Any] = field(default_factory=list)


def _answers(comm: RecordingComm) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in comm.custom() if m["kind"] == "fork_answer"}


def _ask(comm: RecordingComm, message: dict[str, Any]) -> dict[str, Any]:
    comm.from_front_end({"kind": "fork", **message})
    wait_for(lambda: message["id"] in _answers(comm), what=f"the kernel's answer to {message['id']}")
    return _answers(comm)[message["id"]]


def _runs(project: Project) -> set[str]:
    return {p.name for p in (project.home / "workflows" / "runs").iterdir()}


def test_fork_from_the_widget_pane(project: Project, comms: list[RecordingComm]) -> None:
    project.write("chain.star", fork_chain())
    handle = start_run(project, project.plan("chain.star"))
    handle.start()
    handle.wait()
    run_id = handle.run_id
    view = widgets.watch_run(run_id, service=project.service)
    comm = comm_of(comms, view)
    before = _runs(project)

    refused = _ask(comm, {"id": "f1", "node": "c", "value": {"word": "seven", "count": "seven"}})
    assert "answer" not in refused and "count" in refused["error"], refused
    planned = _ask(comm, {"id": "f2", "node": "c", "value": {"word": "seven", "count": 7}})["answer"]
    assert planned["graph_digest"].startswith("sha256:") and "run_id" not in planned
    # the words the sidebar's pane shows for the same fork (one ForkPlan.summary, not one per front end)
    said = f"Fork run {run_id} at c (c takes the edited value, what follows runs anew): the derived plan's graph digest"
    assert planned["summary"] == said
    assert _runs(project) == before, "planning a fork creates no run"

    stranger = _ask(comm, {"id": "f3", "node": "c", "plan_id": "nope", "graph_digest": planned["graph_digest"]})
    assert "plan it again" in stranger["error"]
    wrong = _ask(comm, {"id": "f4", "node": "c", "plan_id": planned["plan_id"], "graph_digest": "sha256:" + "0" * 64})
    assert "confirm" in wrong["error"] and _runs(project) == before

    start = {"id": "f5", "node": "c", "plan_id": planned["plan_id"], "graph_digest": planned["graph_digest"]}
    started = _ask(comm, start)["answer"]
    fork_id = started["run_id"]
    assert fork_id not in before and started["graph_digest"] == planned["graph_digest"]
    completed = wait_journaled(project.home, fork_id, "run_completed", timeout=60)
    assert completed["outcome"] == "success" and launched(project.home, fork_id) == ["d"]
    attempt = project.service.attempt_dir(fork_id, "d", 1)
    assert "d got seven" in (attempt / "stdout").read_text()
    manifest = json.loads((project.home / "workflows" / "runs" / fork_id / "manifest.json").read_text())
    assert manifest["forked_from"] == {"run": run_id, "node": "c"} and manifest["origin"] == "notebook"

    # the hub lists the fork with its lineage; the source run has none
    hub = Hub(_Session(service=project.service))
    texts = [
        " ".join(c.value for c in row.children if isinstance(getattr(c, "value", None), str))
        for row in hub.finished_rows
    ]
    assert len(texts) == 2 and sum("forked from" in text for text in texts) == 1, texts
    assert any(f"forked from {run_id[:13]} at c" in text for text in texts), texts


def test_a_plan_view_cannot_fork(project: Project, comms: list[RecordingComm]) -> None:
    project.write("chain.star", fork_chain())
    view = widgets.graph_view(project.plan("chain.star"))
    comm = comm_of(comms, view)
    assert "cannot fork" in _ask(comm, {"id": "p1", "node": "c"})["error"]
