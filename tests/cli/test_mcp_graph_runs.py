"""Item graphs through ``rho-notebook mcp``: planned and run like any workflow (docs/graphs.md, docs/mcp.md).

The SDK's own client over stdio against the real server, as in test_mcp_runs.py. A person's part
(``approve-plan``, ``answer``) is played by the real CLI, never by a tool.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli.mcp_session import CLIENT_NAME, McpSession, make_project
from tests.conftest import REPO, Project
from tests.unit.test_itemgraph_validate import TRIAGE


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = make_project(tmp_path_factory.mktemp("mcp-graphs"))
    project.write("triage.graph.yaml", TRIAGE)
    shutil.copytree(REPO / "examples" / "graphs", project.root / "examples" / "graphs")
    return project


@pytest.fixture(scope="module")
def mcp(ws: Project) -> Iterator[McpSession]:
    session = McpSession(ws)
    yield session
    session.close()


def plan_and_run(mcp: McpSession, file: str, inputs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    planned: dict[str, Any] = mcp.answer("workflow_plan", {"file": file, "inputs": inputs})
    started: dict[str, Any] = mcp.answer(
        "workflow_run", {"plan_id": planned["plan_id"], "graph_digest": planned["graph_digest"]}
    )
    return planned, started


def wait(mcp: McpSession, run_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = mcp.answer("workflow_wait", {"run_id": run_id, "timeout_seconds": 120})
    return answer


@pytest.mark.parametrize(("score", "level"), [(70, "high"), (10, "low")])
def test_the_must_show_triage_graph_is_planned_and_run_through_mcp(
    ws: Project, mcp: McpSession, score: int, level: str
) -> None:
    planned, started = plan_and_run(mcp, "triage.graph.yaml", {"score": score})
    cli = ws.cli("plan", "triage.graph.yaml", "--input", f"score={score}", "--output", "json")
    assert cli.returncode == 0, cli.stderr
    assert planned == json.loads(cli.stdout)  # stored once per graph: the CLI gets the same plan
    assert sorted(node["name"] for node in planned["nodes"]) == ["done", "high", "low", "route", "start"]
    # supervised, as every unapproved MCP run; its steps launch nothing and ask no one, so it never waits
    assert (started["workflow"], started["mode"]) == ("triage", "supervised")
    assert not any("human step" in note for note in started["person"])

    run_id = started["run_id"]
    done = wait(mcp, run_id)
    assert (done["lifecycle"], done["outcome"], done["timed_out"]) == ("completed", "success", False)
    result = mcp.answer("workflow_result", {"run_id": run_id})
    item = result["nodes"]["done"]["output"]
    assert (item["level"], item["label"], item["score"]) == (level, f"ticket {score}", score)
    other = "low" if level == "high" else "high"
    assert result["nodes"][other]["state"] == "skipped"

    manifest = json.loads((ws.home / "workflows" / "runs" / run_id / "manifest.json").read_text())
    assert (manifest["via"], manifest["client"]) == ("mcp", CLIENT_NAME)


def test_the_example_waits_at_its_human_step_until_a_person_answers_with_the_cli(ws: Project, mcp: McpSession) -> None:
    file = "examples/graphs/triage.graph.yaml"
    planned: dict[str, Any] = mcp.answer("workflow_plan", {"file": file, "inputs": {"score": 70}})
    assert any(item["kind"] == "executable" for item in planned["authority"]), planned["authority"]
    approved = ws.cli("approve-plan", planned["plan_id"])  # a person lets its command launch unasked
    assert approved.returncode == 0, approved.stderr
    started: dict[str, Any] = mcp.answer(
        "workflow_run", {"plan_id": planned["plan_id"], "graph_digest": planned["graph_digest"]}
    )
    run_id = started["run_id"]
    assert started["mode"] == "auto"
    assert any("human step(s) escalate" in note and "rho-notebook answer" in note for note in started["person"])

    waiting = wait(mcp, run_id)
    assert waiting["lifecycle"] == "waiting", waiting
    (note,) = waiting["person"]
    assert f"rho-notebook answer {run_id} escalate assignee=JSON note=JSON" in note
    assert "no tool can answer it" in note

    answered = ws.cli("answer", run_id, "escalate", 'assignee="oncall"')
    assert answered.returncode == 0, answered.stderr
    done = wait(mcp, run_id)
    assert (done["lifecycle"], done["outcome"]) == ("completed", "success"), done
    item = mcp.answer("workflow_result", {"run_id": run_id})["nodes"]["done"]["output"]
    assert (item["level"], item["label"], item["assignee"], item["category"]) == (
        "high",
        "ticket 70",
        "oncall",
        "hardware",
    )
