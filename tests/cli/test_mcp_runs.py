"""``rho-notebook mcp`` end to end: the SDK's own client over stdio against the real server.

One server serves the whole module (one store, one workspace). A person's part (``approve-plan``,
``approve``) is played by the real CLI in the test, never by a tool: the tools only read it.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.cli.mcp_session import CLIENT_NAME, McpSession, make_project
from tests.conftest import Project, star, wait_journaled
from tests.unit.test_itemgraph_validate import TRIAGE

HELLO = "examples/hello/hello.star"
C = "timeout_seconds = 60, max_output_bytes = 200000"
TOOL_NAMES = {
    "workflow_list",
    "workflow_validate",
    "workflow_plan",
    "workflow_run",
    "workflow_status",
    "workflow_wait",
    "workflow_result",
    "workflow_cancel",
    "workflow_resume",
    "workflow_logs",
    "workflow_runs",
    "workflow_events",
    "workflow_plan_approval",
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return make_project(tmp_path_factory.mktemp("mcp-runs"))


@pytest.fixture(scope="module")
def mcp(ws: Project) -> Iterator[McpSession]:
    session = McpSession(ws)
    yield session
    session.close()


def cli_json(ws: Project, *args: str) -> Any:
    result = ws.cli(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def plan(mcp: McpSession, file: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = mcp.answer("workflow_plan", {"file": file, "inputs": inputs or {}})
    return answer


def approve_plan(ws: Project, plan_id: str) -> None:
    """A person who read the plan approves it (the CLI, not a tool)."""
    result = ws.cli("approve-plan", plan_id)
    assert result.returncode == 0, result.stderr


def start(mcp: McpSession, planned: dict[str, Any], **extra: Any) -> dict[str, Any]:
    answer: dict[str, Any] = mcp.answer(
        "workflow_run", {"plan_id": planned["plan_id"], "graph_digest": planned["graph_digest"], **extra}
    )
    return answer


def wait(mcp: McpSession, run_id: str, timeout: float = 120) -> dict[str, Any]:
    answer: dict[str, Any] = mcp.answer("workflow_wait", {"run_id": run_id, "timeout_seconds": timeout})
    return answer


def pending_request(ws: Project, run_id: str) -> str:
    pending = asyncio.run(ws.service.pending_approvals(run_id))
    assert len(pending) == 1, pending
    return pending[0].request_id


def test_every_tool_is_listed_with_a_closed_schema(mcp: McpSession) -> None:
    tools = {tool.name: tool for tool in mcp.tools()}
    assert set(tools) == TOOL_NAMES
    for tool in tools.values():
        assert tool.input_schema.get("additionalProperties") is False, tool.name
        assert tool.description
    assert set(tools["workflow_run"].input_schema["required"]) == {"plan_id", "graph_digest"}


def test_list_validate_plan_run_wait_result_on_the_hello_example(ws: Project, mcp: McpSession) -> None:
    listed = mcp.answer("workflow_list")
    assert {"file": HELLO, "kind": "starlark", "name": "hello"} in listed["workflows"]

    inputs = {"pattern": "*.py"}
    valid = mcp.answer("workflow_validate", {"file": HELLO, "inputs": inputs})
    assert valid["valid"] is True and "plan_id" not in valid
    planned = plan(mcp, HELLO, inputs)
    assert planned == cli_json(ws, "plan", HELLO, "--input", 'pattern="*.py"', "--output", "json")
    assert planned["graph_digest"] == valid["graph_digest"]
    assert sorted(node["name"] for node in planned["nodes"]) == ["big", "count", "report"]
    assert any(item["kind"] == "executable" for item in planned["authority"]), planned["authority"]

    unapproved = mcp.answer("workflow_plan_approval", {"plan_id": planned["plan_id"]})
    assert unapproved["approved"] is False
    assert f"rho-notebook approve-plan {planned['plan_id']}" in unapproved["person"]
    approve_plan(ws, planned["plan_id"])
    approved = mcp.answer("workflow_plan_approval", {"graph_digest": planned["graph_digest"]})
    assert approved["approved"] is True and approved["record"]["graph_digest"] == planned["graph_digest"]

    started = start(mcp, planned)
    run_id = started["run_id"]
    assert started["mode"] == "auto" and "approved" in started["mode_reason"]
    assert started["person"] == []  # nothing in this run waits for a person
    done = wait(mcp, run_id)
    assert (done["lifecycle"], done["outcome"], done["timed_out"]) == ("completed", "success", False)

    assert mcp.answer("workflow_status", {"run_id": run_id}) == cli_json(ws, "status", run_id, "--output", "json")
    result = mcp.answer("workflow_result", {"run_id": run_id})
    assert result == cli_json(ws, "result", run_id, "--output", "json")
    assert result["nodes"]["count"]["output"]["files"] >= 1
    assert run_id in [row["run_id"] for row in mcp.answer("workflow_runs")]

    manifest = json.loads((ws.home / "workflows" / "runs" / run_id / "manifest.json").read_text())
    assert (manifest["via"], manifest["client"]) == ("mcp", CLIENT_NAME)

    events = mcp.read(f"rho://runs/{run_id}/events")
    assert events == ws.cli("events", run_id).stdout
    assert json.loads(events.splitlines()[-1])["kind"] == "run_completed"
    later = mcp.read(f"rho://runs/{run_id}/events?after_seq=3")
    assert [json.loads(line)["seq"] for line in later.splitlines()][0] == 4
    output = json.loads(mcp.read(f"rho://runs/{run_id}/nodes/count/output"))
    assert output == result["nodes"]["count"]


def test_a_notebook_is_planned_as_the_cli_plans_it(ws: Project, mcp: McpSession) -> None:
    cell = "%%workflow nb\n" + star(
        f'return workflow(name = "nb", nodes = [command(name = "t", argv = ["true"], {C})])'
    )
    nbformat.write(
        new_notebook(cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell(cell)]), ws.root / "n.ipynb"
    )
    assert {"file": "n.ipynb", "kind": "notebook", "name": "nb"} in mcp.answer("workflow_list")["workflows"]
    planned = plan(mcp, "n.ipynb")
    assert planned["workflow"] == "nb"
    ran = ws.cli("run", "n.ipynb", "--yes")  # the CLI plans a notebook as it runs it
    assert ran.returncode == 0, ran.stderr
    assert f"  workflow nb  digest {planned['graph_digest']}\n" in ran.stdout
    missing = mcp.error("workflow_plan", {"file": "n.ipynb", "workflow": "nosuch"})
    assert "has no %%workflow nosuch cell" in missing and "its workflows: nb" in missing


def test_a_wrong_digest_is_refused_and_starts_nothing(ws: Project, mcp: McpSession) -> None:
    ws.write(
        "touch.star",
        star(f'return workflow(name = "touch", nodes = [command(name = "t", argv = ["touch", "x"], {C})])'),
    )
    planned = plan(mcp, "touch.star")
    before = mcp.answer("workflow_runs", {"limit": 500})
    refused = mcp.error("workflow_run", {"plan_id": planned["plan_id"], "graph_digest": "sha256:" + "0" * 64})
    assert "nothing was started" in refused and planned["graph_digest"] in refused
    assert mcp.answer("workflow_runs", {"limit": 500}) == before
    assert not (ws.root / "x").exists()


def test_a_supervised_run_waits_for_a_person_who_approves_with_the_cli(ws: Project, mcp: McpSession) -> None:
    ws.write(
        "launch.star",
        star(f'return workflow(name = "launch", nodes = [command(name = "write", argv = ["touch", "written"], {C})])'),
    )
    planned = plan(mcp, "launch.star")
    started = start(mcp, planned, mode="auto")
    run_id = started["run_id"]
    assert started["mode"] == "supervised"
    assert f"rho-notebook approve-plan {planned['graph_digest']}" in started["mode_reason"]
    assert any(f"rho-notebook approve {run_id}" in note for note in started["person"])

    waiting = wait(mcp, run_id)
    assert (waiting["lifecycle"], waiting["timed_out"]) == ("waiting", False)
    request_id = pending_request(ws, run_id)
    assert f"rho-notebook approve {run_id} {request_id}" in waiting["person"][0]
    assert not (ws.root / "written").exists()

    assert ws.cli("approve", run_id, request_id).returncode == 0  # the person
    done = wait(mcp, run_id)
    assert (done["lifecycle"], done["outcome"]) == ("completed", "success")
    assert (ws.root / "written").exists()


def test_an_approval_node_waits_and_the_answer_says_a_person_must_approve(ws: Project, mcp: McpSession) -> None:
    ws.write(
        "gate.star",
        star(f"""
        return workflow(name = "gate", nodes = [
            approval(name = "ok", prompt = "Ship it?", timeout_seconds = 300, max_output_bytes = 1000),
            command(name = "ship", argv = ["touch", "shipped"], needs = ["ok"], {C}),
        ])
        """),
    )
    planned = plan(mcp, "gate.star")
    approve_plan(ws, planned["plan_id"])
    started = start(mcp, planned)
    run_id = started["run_id"]
    assert any("approval node(s) ok" in note for note in started["person"])

    waiting = wait(mcp, run_id)
    assert waiting["lifecycle"] == "waiting"
    request_id = pending_request(ws, run_id)
    assert waiting["person"] == [
        f"node ok waits for a person to approve this approval node: rho-notebook approve {run_id} {request_id} "
        "(or --deny), or the notebook widget or the JupyterLab sidebar; no tool can approve it"
    ]
    assert ws.cli("approve", run_id, request_id).returncode == 0
    done = wait(mcp, run_id)
    assert (done["lifecycle"], done["outcome"]) == ("completed", "success")
    assert (ws.root / "shipped").exists()


def test_cancel_stops_a_running_run(ws: Project, mcp: McpSession) -> None:
    ws.write(
        "slow.star",
        star(f'return workflow(name = "slow", nodes = [command(name = "nap", argv = ["sleep", "60"], {C})])'),
    )
    planned = plan(mcp, "slow.star")
    approve_plan(ws, planned["plan_id"])
    run_id = start(mcp, planned)["run_id"]
    wait_journaled(ws.home, run_id, "process_started", node="nap")

    cancelled = mcp.answer("workflow_cancel", {"run_id": run_id, "timeout_seconds": 10})
    assert cancelled["run_id"] == run_id and cancelled["cancellation_state"] == "acknowledged"
    done = wait(mcp, run_id)
    assert (done["lifecycle"], done["outcome"]) == ("completed", "cancellation")


def test_logs_are_truncated_with_a_marker_and_paged(ws: Project, mcp: McpSession) -> None:
    ws.write(
        "loud.star",
        star(f"""
        return workflow(name = "loud", nodes = [
            command(name = "say", argv = ["python3", "-c", "for i in range(5000): print(f'line {{i:05d}}')"], {C}),
        ])
        """),
    )
    planned = plan(mcp, "loud.star")
    approve_plan(ws, planned["plan_id"])
    run_id = start(mcp, planned)["run_id"]
    assert wait(mcp, run_id)["outcome"] == "success"
    whole = ws.cli("logs", run_id, "say", "--stream", "stdout").stdout
    assert len(whole) == 5000 * 11

    pages = []
    offset: int | None = 0
    while offset is not None:
        got = mcp.answer("workflow_logs", {"run_id": run_id, "node": "say", "offset": offset})
        pages.append(got)
        offset = got["next_offset"]
    assert len(pages) == 3 and pages[0]["truncated"] and not pages[-1]["truncated"]
    first = pages[0]["text"]
    assert first.endswith("more characters; call workflow_logs with stream='stdout' and offset=20000]")
    assert "".join(page["text"].split("\n[... truncated")[0] for page in pages) == whole

    small = mcp.answer("workflow_logs", {"run_id": run_id, "node": "say", "offset": 11, "limit": 11})
    assert small["text"].startswith("line 00001\n\n[... truncated: ") and small["next_offset"] == 22


def test_long_outputs_and_journals_are_cut_with_a_marker_and_paged(ws: Project, mcp: McpSession) -> None:
    big = "import json; print(json.dumps('x' * 30000))"
    ws.write(
        "big.star",
        star(f"""
        echoes = [command(name = "e%d" % i, argv = ["true"], {C}) for i in range(40)]
        big = command(name = "big", argv = ["python3", "-c", "{big}"], output = schema.stdout_json(schema.string()), {C})
        return workflow(name = "big", nodes = echoes + [big])
        """),
    )
    planned = plan(mcp, "big.star")
    approve_plan(ws, planned["plan_id"])
    run_id = start(mcp, planned)["run_id"]
    assert wait(mcp, run_id)["outcome"] == "success"

    whole = cli_json(ws, "result", run_id, "--output", "json")["nodes"]["big"]
    assert whole["output"] == "x" * 30000
    cut = mcp.answer("workflow_result", {"run_id": run_id})["nodes"]["big"]["output"]
    assert cut == f"[... truncated: 30002 characters of JSON; read the resource rho://runs/{run_id}/nodes/big/output]"
    uri = f"rho://runs/{run_id}/nodes/big/output"
    first = mcp.read(uri)
    text, marker = first.split("\n[... truncated: ")
    assert len(text) == 20000 and marker.endswith(f"read {uri}?offset=20000]")
    assert json.loads(text + mcp.read(uri + "?offset=20000")) == whole

    events = ws.cli("events", run_id).stdout.splitlines()
    read: list[str] = []
    after = 0
    while True:
        page = mcp.read(f"rho://runs/{run_id}/events?after_seq={after}").splitlines()
        if not page[-1].startswith("[... truncated"):
            read += page
            break
        read += page[:-1]
        after = json.loads(page[-2])["seq"]
        assert page[-1] == f"[... truncated: read rho://runs/{run_id}/events?after_seq={after} for the rest]"
    assert read == events and len("\n".join(events)) > 20000


def test_resume_with_decisions_goes_on_after_a_manual_halt(ws: Project, mcp: McpSession) -> None:
    ws.write(
        "check.py",
        textwrap.dedent("""\
        from rho_notebook.script import emit_output, run_command

        check = run_command(
            argv=["sh", "-c", "echo ran >> check.log; echo checked; [ -f fixed ]"],
            step_id="check",
            recovery="manual",
            timeout_seconds=60,
            max_output_bytes=10000,
        )
        emit_output({"output": check.output, "state": check.state})
        if not check.ok:
            raise SystemExit(1)  # the run fails with its step (a handled failure would end it success)
        """),
    )
    assert {"file": "check.py", "kind": "script", "name": "check"} in mcp.answer("workflow_list")["workflows"]
    assert mcp.answer("workflow_validate", {"file": "check.py"})["valid"] is True
    planned = plan(mcp, "check.py")
    approve_plan(ws, planned["plan_id"])
    run_id = start(mcp, planned)["run_id"]
    first = wait(mcp, run_id)
    assert first["lifecycle"] == "completed" and first["nodes"]["check"]["state"] == "failure"

    digest = {"run_id": run_id, "graph_digest": planned["graph_digest"]}
    mcp.answer("workflow_resume", digest)
    halted = wait(mcp, run_id)
    assert halted["lifecycle"] == "needs_decision" and halted["halted"][0]["step"] == "check"
    assert "workflow_resume(decisions=...)" in halted["person"][0]

    refused = mcp.error("workflow_resume", {**digest, "decisions": {"nosuch": "rerun"}})
    assert "error[decision_needs_person]" in refused and "nosuch" in refused
    resumed = mcp.answer("workflow_resume", {**digest, "decisions": {"check": "skip"}})
    assert resumed["decisions"] == {"check": "skip"}
    done = wait(mcp, run_id)
    assert done["lifecycle"] == "completed" and done["output"] == {"output": "checked\n", "state": "failure"}
    assert (ws.root / "check.log").read_text() == "ran\n"  # skip: the step never ran again


def test_closing_the_server_never_stops_a_run(ws: Project) -> None:
    ws.write(
        "gated.star",
        star(f"""
        return workflow(name = "gated", nodes = [command(name = "w", argv = ["sh", "-c", "while [ ! -f go ]; do sleep 0.05; done; touch after"], {C})])
        """),
    )
    session = McpSession(ws)
    try:
        planned = plan(session, "gated.star")
        approve_plan(ws, planned["plan_id"])
        run_id = start(session, planned)["run_id"]
        wait_journaled(ws.home, run_id, "process_started", node="w")
    finally:
        session.close()
    (ws.root / "go").write_text("")  # the server is gone; the run's own owner goes on
    assert wait_journaled(ws.home, run_id, "run_completed")["outcome"] == "success"
    assert Path(ws.root / "after").exists()


def test_an_item_graph_is_listed_and_validated_as_the_cli_validates_it(ws: Project, mcp: McpSession) -> None:
    ws.write("triage.graph.yaml", TRIAGE)
    assert {"file": "triage.graph.yaml", "kind": "graph", "name": "triage"} in mcp.answer("workflow_list")["workflows"]
    assert mcp.answer("workflow_validate", {"file": "triage.graph.yaml"}) == {"valid": True, "diagnostics": []}
    ws.write("bad.graph.yaml", TRIAGE.replace("=ticket {{", "ticket {{"))
    refused = json.loads(mcp.error("workflow_validate", {"file": "bad.graph.yaml"}))
    cli = ws.cli("validate", "bad.graph.yaml", "--output", "json")
    assert refused == json.loads(cli.stdout) and refused["valid"] is False
    (finding,) = refused["diagnostics"]
    assert finding["rule"] == "graph.mapping_without_equals" and "'start'" in finding["message"]
