"""The widget shows what a run's model calls spent (issue 34): the run view's ``usage`` (the run
header), each node view's ``usage`` (the DAG's hover) and the node pane's ``spend``, for a real
run of agent nodes against a local OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import pytest

from rho_notebook.widgets._run import RunController
from rho_notebook.widgets._testing import RecordingComm
from tests.agents.fakeserver import ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.test_usage_status import PRICES, WORKFLOW, _replies
from tests.conftest import Project
from tests.widgets.helpers import comm_of, start_run, wait_for


def test_the_run_header_nodes_and_pane_show_the_spend(
    project: Project, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ScriptedServer(_replies()) as server:
        write_settings_for(project.home, server, prices=PRICES)
        project.write("src/main.py", "print('hello')\n")
        project.write("wf.star", WORKFLOW)
        plan = project.plan("wf.star")
        handle = start_run(project, plan)
        controller = RunController(handle)
        widget = controller.widget
        handle.start()
        handle.wait()
        wait_for(lambda: widget.run.get("lifecycle") == "completed", what="the run to complete")
        wait_for(lambda: widget.run.get("usage", {}).get("calls") == 3, what="the run's usage")
    usage = widget.run["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["retries"]) == (36, 14, 1)
    assert usage["cost_usd"] == pytest.approx(64e-6)
    assert widget.nodes["first"]["usage"]["calls"] == 2 and "usage" not in widget.nodes["done"]
    comm_of(comms, widget).from_front_end({"kind": "select", "node": "second"})
    wait_for(lambda: widget.detail.get("node") == "second", what="the pane")
    assert widget.detail["spend"]["input_tokens"] == 20 and widget.detail["spend"]["retries"] == 1
    controller.close()
