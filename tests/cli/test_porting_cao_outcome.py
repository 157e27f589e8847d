"""CAO's fan-out pattern (issue 33 point 1): a step's failure caught per item, the script
finishes, and the run completes with exit 0, as CAO reports it. The failed step is shown
``failure (handled)`` in ``status`` (text and JSON), the run's node views, the live tracker a
widget folds, the widget itself and the DAG picture.

Real runs through the real CLI; the reviewer agent is answered by a local OpenAI-compatible server
on 127.0.0.1 that fails the request about one item (HTTP 500).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import pytest

from rho_notebook import widgets
from rho_notebook.model.run_state import RunState
from rho_notebook.views.dag import RunTracker, read_run_view
from rho_notebook.views.picture import run_bundle
from rho_notebook.widgets._testing import recording_comms
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.flowhelp import echo, run_flow, system_of
from tests.cli.runhelp import status
from tests.conftest import REPO, Project

ENV = {KEY_ENV: SECRET}

PORTS = REPO / "docs" / "examples" / "porting"
FANOUT = (PORTS / "cao_fanout.py").read_text()
"""docs/porting.md's port of the seed's fan-out, read from its file (one copy): a step that fails
returns a handle with ``ok`` False instead of raising ShimError (docs/scripts.md "Compared with
CAO's script tier"), so the per-unit tolerance is ``if not h.ok``; a stop of the run (our 409) is
RunStopped, re-raised as the seed's warning asks. The provider argument is the agent's own setting."""
REVIEWER = (PORTS / "agents" / "reviewer.md").read_text()


def answer(request: Recorded) -> Reply:
    """``summary of NAME``; the request about ``beta`` fails (the provider answers HTTP 500)."""
    prompt = str(request.body["messages"][-1]["content"])
    name = re.search(r"Summarize (\w+)\.", prompt)
    assert name is not None, prompt
    if name[1] == "beta":
        return Reply(status=500, body={"error": {"message": "upstream unavailable"}})
    return OPENAI.answer(f"summary of {name[1]}")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer([answer], repeat_last=True) as started:
        yield started


def test_the_seeds_fan_out_with_a_failure_caught_per_item_completes_with_exit_0(
    project: Project, server: ScriptedServer
) -> None:
    """Seed: cao-workflows.txt "Fan-out (concurrency)", as docs/porting.md ports it (the items
    from an input whose default is ``alpha beta gamma``), run as the page says it ends."""
    write_settings_for(project.home, server)
    project.write("agents/reviewer.md", REVIEWER)
    project.write("fanout.py", FANOUT)

    ran = project.cli("run", "fanout.py", "--yes", "--output", "jsonl", env=ENV)
    assert ran.returncode == 0, ran.stdout + ran.stderr  # CAO: "completed", exit 0
    run_id = next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"]
    assert len(server.requests) == 3

    data = status(project, run_id)
    assert (data["lifecycle"], data["outcome"]) == ("completed", "success")
    assert data["output"] == {
        "alpha": "summary of alpha",
        "beta": data["output"]["beta"],
        "gamma": "summary of gamma",
    }
    assert data["output"]["beta"].startswith("ERROR: ") and "500" in data["output"]["beta"]
    shown = {key: (node["state"], node["shown"]) for key, node in data["nodes"].items()}
    assert shown == {
        "summarize:alpha": ("success", "success"),
        "summarize:beta": ("failure", "failure_handled"),
        "summarize:gamma": ("success", "success"),
    }
    text = project.cli("status", run_id)
    assert text.returncode == 0, text.stderr
    line = next(line for line in text.stdout.splitlines() if line.strip().startswith("summarize:beta "))
    assert "failure (handled)" in line, text.stdout

    # node views (the hub, the sidebar, a finished DAG view) read from the store
    view = asyncio.run(read_run_view(project.service, run_id))
    assert view.nodes["summarize:beta"]["shown"] == "failure_handled"
    assert view.run["outcome"] == "success"

    # the live view: a tracker fed the journal as the run went
    graph = asyncio.run(project.service.run_graph(run_id))
    events = asyncio.run(project.service.journal(run_id)).events
    fresh = RunState.fresh(run_id=run_id, plan_id=data["plan_id"], graph=graph, graph_digest=data["graph_digest"])
    tracker = RunTracker(fresh, graph=graph)
    for record in events:
        tracker.feed(record)
    assert tracker.nodes["summarize:beta"]["shown"] == "failure_handled"
    assert tracker.nodes["summarize:alpha"]["shown"] == "success"

    # the widget of a finished run, and the DAG picture saved with a notebook
    with recording_comms():
        widget = widgets.watch_run(run_id, service=project.service)
        assert widget.nodes["summarize:beta"]["shown"] == "failure_handled"
    final = asyncio.run(project.service.status(run_id))
    picture = run_bundle(graph, final)
    assert 'data-state="failure_handled"' in picture["image/svg+xml"]
    assert "failure (handled)" in picture["text/plain"], picture["text/plain"]


def test_a_script_that_raises_after_the_failure_fails_and_the_failure_is_not_handled(
    project: Project, server: ScriptedServer
) -> None:
    """The other side of the rule: the same fan-out without the per-unit tolerance (the failure
    re-raised in the main thread) fails the run, exit 1, and the step shows a plain failure (in a
    failed run every failed step is a failure: resume runs each again), whatever the other
    threads called after it."""
    write_settings_for(project.home, server)
    project.write("agents/reviewer.md", REVIEWER)
    strict = FANOUT.replace('return name, f"ERROR: {h.message}"', "raise RuntimeError(h.message)")
    assert strict != FANOUT
    project.write("strict.py", strict)

    ran = project.cli("run", "strict.py", "--yes", "--output", "jsonl", env=ENV)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    run_id = next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"]
    data = status(project, run_id)
    assert data["outcome"] == "failure"
    beta = data["nodes"]["summarize:beta"]
    assert (beta["state"], beta["shown"]) == ("failure", "failure")


CAUGHT_FLOW = """\
from rho_notebook.flow import AgentParam, FlowError, Workflow, run_session_loop


class Review(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam(system="You are the writer. Draft it.")
        self.backup = AgentParam(system="You are the backup. Draft it.")

    def forward(self, session):
        try:
            return run_session_loop(session, self.writer)
        except FlowError:  # the writer's provider failed: the flow goes on without it
            return run_session_loop(session, self.backup)
"""


def test_a_flow_that_catches_a_failed_call_succeeds_and_the_call_is_handled(project: Project) -> None:
    """Not from the seed: the same rule for a flow run (docs/flows.md), whose calls are steps of the
    script tier: the outcome follows the flow, which caught the writer's FlowError."""

    def writer_fails(request: Recorded) -> Reply:
        if system_of(request).startswith("You are the writer"):
            return Reply(status=500, body={"error": {"message": "upstream unavailable"}})
        return echo(request)

    with ScriptedServer([writer_fails], repeat_last=True) as flaky:
        write_settings_for(project.home, flaky)
        project.write("review.py", CAUGHT_FLOW)
        code, run_id, shown = run_flow(project, "review.py", "Review", "Explain outcomes")
        assert code == 0, shown
        data = status(project, run_id)
        assert data["outcome"] == "success"
        assert data["output"]["text"] == "[backup] Explain outcomes"
        nodes = {key: (node["state"], node["shown"]) for key, node in data["nodes"].items()}
        assert nodes == {
            "review.writer#1": ("failure", "failure_handled"),
            "review.backup#1": ("success", "success"),
        }
