"""What ``rho-notebook mcp`` refuses: malformed calls (each a tool error with a message naming
the argument, never a traceback), and anything only a person may do.

The second half calls every tool with every argument shape against runs that wait for a person
(an approval node, a supervised launch), then checks that nothing was approved, answered,
trusted or plan-approved: the store's decision files, plan approvals, trust and settings are as
they were, and the pending requests are still pending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.mcp_session import McpSession, make_project
from tests.conftest import Project, star

C = "timeout_seconds = 60, max_output_bytes = 10000"
OK = star(f'return workflow(name = "ok", nodes = [command(name = "t", argv = ["touch", "touched"], {C})])')
GATE = star(f"""
return workflow(name = "gate", nodes = [
    approval(name = "ok", prompt = "Ship it?", timeout_seconds = 600, max_output_bytes = 1000),
    command(name = "ship", argv = ["touch", "shipped"], needs = ["ok"], {C}),
])
""")
WRONG = "sha256:" + "0" * 64


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = make_project(tmp_path_factory.mktemp("mcp-refusals"))
    project.write("ok.star", OK)
    project.write("gate.star", GATE)
    project.write("bad.star", "def build(inputs):\n    return workflow(name = 1)\n\nWORKFLOW = define(build = build)\n")
    project.write("notes.txt", "not a workflow\n")
    return project


@pytest.fixture(scope="module")
def mcp(ws: Project) -> Iterator[McpSession]:
    session = McpSession(ws)
    yield session
    for row in session.answer("workflow_runs", {"limit": 500}):  # no owner outlives the module
        if row["lifecycle"] in ("running", "waiting", "planned"):
            session.call("workflow_cancel", {"run_id": row["run_id"], "timeout_seconds": 10})
    session.close()


@pytest.fixture(scope="module")
def ids(ws: Project, mcp: McpSession) -> dict[str, str]:
    """A supervised run waiting on its launch (started by the model) and a run waiting on an
    approval node (its plan approved by a person): what the refusals are tried against."""
    ok = mcp.answer("workflow_plan", {"file": "ok.star"})
    gate = mcp.answer("workflow_plan", {"file": "gate.star"})
    assert ws.cli("approve-plan", gate["plan_id"]).returncode == 0
    launch = mcp.answer("workflow_run", {"plan_id": ok["plan_id"], "graph_digest": ok["graph_digest"]})
    node = mcp.answer("workflow_run", {"plan_id": gate["plan_id"], "graph_digest": gate["graph_digest"]})
    for run in (launch, node):
        waiting = mcp.answer("workflow_wait", {"run_id": run["run_id"], "timeout_seconds": 60})
        assert waiting["lifecycle"] == "waiting", waiting
    return {
        "plan": ok["plan_id"],
        "digest": ok["graph_digest"],
        "gate_plan": gate["plan_id"],
        "gate_digest": gate["graph_digest"],
        "launch_run": launch["run_id"],
        "node_run": node["run_id"],
    }


# -- malformed calls -------------------------------------------------------------------------------

MALFORMED: list[tuple[str, dict[str, Any], str]] = [
    ("workflow_nosuch", {}, "no tool 'workflow_nosuch'; the tools are: workflow_list"),
    ("workflow_list", {"file": "ok.star"}, "file: is not an argument of this tool"),
    ("workflow_validate", {}, "file: Field required"),
    ("workflow_validate", {"file": 3}, "file: Input should be a valid string"),
    ("workflow_validate", {"file": ""}, "file: String should have at least 1 character"),
    ("workflow_validate", {"file": "ok.star", "inputs": []}, "inputs: Input should be a valid dictionary"),
    ("workflow_validate", {"file": "ok.star", "inputs": {"x": "y" * 1_000_001}}, "at most 1000000 are accepted"),
    ("workflow_validate", {"file": "nosuch.star"}, '"message": "nosuch.star: no such file"'),
    (
        "workflow_validate",
        {"file": "notes.txt"},
        "takes an entry .star, a SCRIPT.py or a FILE.graph.yaml, not 'notes.txt'",
    ),
    ("workflow_validate", {"file": "x.ipynb"}, "plan a notebook with workflow_plan"),
    ("workflow_validate", {"file": "../outside.star"}, '"rule": "load.outside_root"'),
    ("workflow_plan", {"file": "bad.star"}, '"valid": false'),
    ("workflow_plan", {"file": "ok.star", "workflow": "x"}, "leave it out for a .star file"),
    ("workflow_plan", {"file": "ok.star", "inputs": {"nosuch": 1}}, '"valid": false'),
    ("workflow_run", {}, "plan_id: Field required; graph_digest: Field required"),
    ("workflow_run", {"plan_id": "{plan}", "graph_digest": "abc"}, "graph_digest: String should match pattern"),
    (
        "workflow_run",
        {"plan_id": "{plan}", "graph_digest": "{digest}", "mode": "yolo"},
        "mode: Input should be 'auto', 'plan' or 'supervised'",
    ),
    ("workflow_run", {"plan_id": "../../etc", "graph_digest": "{digest}"}, "plan_id: String should match pattern"),
    ("workflow_run", {"plan_id": "{plan}", "graph_digest": "{digest}", "yes": True}, "yes: is not an argument"),
    ("workflow_run", {"plan_id": "{plan}", "graph_digest": WRONG}, "nothing was started"),
    ("workflow_status", {"run_id": None}, "run_id: Input should be a valid string"),
    ("workflow_status", {"run_id": "ffffffff"}, "error["),
    ("workflow_wait", {"run_id": "{launch_run}", "timeout_seconds": -1}, "greater than or equal to 0"),
    ("workflow_wait", {"run_id": "{launch_run}", "timeout_seconds": 10_000}, "less than or equal to 300"),
    ("workflow_wait", {"run_id": "{launch_run}", "timeout_seconds": "soon"}, "timeout_seconds: Input should be"),
    ("workflow_cancel", {"run_id": "{launch_run}", "timeout_seconds": 31}, "less than or equal to 30"),
    (
        "workflow_resume",
        {"run_id": "{launch_run}", "graph_digest": "{digest}", "recover_uncertain": True},
        "recover_uncertain: is not an argument of this tool",
    ),
    (
        "workflow_resume",
        {"run_id": "{launch_run}", "graph_digest": "{digest}", "decisions": {"t": "approve"}},
        "decisions.t: Input should be 'rerun' or 'skip'",
    ),
    ("workflow_resume", {"run_id": "{launch_run}", "graph_digest": WRONG}, "you confirmed digest"),
    ("workflow_logs", {"run_id": "{launch_run}", "node": "nosuch"}, "has no node 'nosuch'"),
    ("workflow_logs", {"run_id": "{launch_run}", "node": "t", "offset": -1}, "offset: Input should be greater"),
    ("workflow_logs", {"run_id": "{launch_run}", "node": "t", "stream": "both"}, "stream: Input should be"),
    ("workflow_runs", {"state": "happy"}, "state: Input should be"),
    ("workflow_runs", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("workflow_plan_approval", {}, "give exactly one of plan_id and graph_digest"),
    ("workflow_plan_approval", {"plan_id": "{plan}", "graph_digest": "{digest}"}, "give exactly one"),
    ("workflow_result", {"run_id": "zzz"}, "run_id: String should match pattern"),
    ("workflow_status", {"run_id": "0000"}, "no run matches '0000'; list them with the `workflow_runs` tool"),
]


def filled(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in ids:
        return ids[value[1:-1]]
    if isinstance(value, dict):
        return {key: filled(item, ids) for key, item in value.items()}
    return value


def test_there_are_at_least_thirty_malformed_calls() -> None:
    assert len(MALFORMED) >= 30


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"), MALFORMED, ids=[f"{i:02d}-{c[0]}" for i, c in enumerate(MALFORMED)]
)
def test_a_malformed_call_is_a_tool_error_that_says_what_is_wrong(
    mcp: McpSession, ids: dict[str, str], tool: str, arguments: dict[str, Any], expected: str
) -> None:
    text = mcp.error(tool, filled(arguments, ids))
    assert expected in text
    assert "Traceback" not in text and 'File "' not in text


# -- nothing a tool does is a person's decision --------------------------------------------------


def snapshot(ws: Project) -> dict[str, Any]:
    """What a person's decisions write: approval decisions, plan approvals, trust, settings."""
    runs = ws.home / "workflows" / "runs"

    def files(folder: Path) -> dict[str, str]:
        return {p.name: p.read_text() for p in sorted(folder.iterdir())} if folder.exists() else {}

    return {
        "decisions": sorted(str(p.relative_to(runs)) for p in runs.rglob("*.decision.json")),
        "plan_approvals": files(ws.home / "plan-approvals"),
        "trust": (ws.home / "trust.json").read_text() if (ws.home / "trust.json").exists() else None,
        "user_settings": (ws.home / "settings.json").exists(),
        "project_settings": (ws.root / ".rho" / "settings.json").exists(),
    }


def pending(ws: Project, run_id: str) -> list[str]:
    return [request.request_id for request in asyncio.run(ws.service.pending_approvals(run_id))]


def every_call(ids: dict[str, str], done_run: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool with every argument shape, on the runs that wait for a person."""
    calls: list[tuple[str, dict[str, Any]]] = [("workflow_list", {})]
    for file in ("ok.star", "gate.star"):
        calls += [("workflow_validate", {"file": file}), ("workflow_validate", {"file": file, "inputs": {}})]
        calls += [("workflow_plan", {"file": file}), ("workflow_plan", {"file": file, "inputs": {}})]
    for plan, digest in ((ids["plan"], ids["digest"]), (ids["gate_plan"], ids["gate_digest"])):
        calls += [("workflow_run", {"plan_id": plan, "graph_digest": digest})]
        calls += [
            ("workflow_run", {"plan_id": plan, "graph_digest": digest, "mode": m})
            for m in ("auto", "plan", "supervised")
        ]
        calls += [("workflow_plan_approval", {"plan_id": plan}), ("workflow_plan_approval", {"graph_digest": digest})]
    for run, digest, node in (
        (ids["launch_run"], ids["digest"], "t"),
        (ids["node_run"], ids["gate_digest"], "ok"),
    ):
        calls += [
            ("workflow_status", {"run_id": run}),
            ("workflow_wait", {"run_id": run}),
            ("workflow_wait", {"run_id": run, "timeout_seconds": 0}),
            ("workflow_result", {"run_id": run}),
            ("workflow_logs", {"run_id": run, "node": node}),
            ("workflow_logs", {"run_id": run, "node": node, "stream": "stderr", "offset": 0, "limit": 10}),
            ("workflow_resume", {"run_id": run, "graph_digest": digest}),
            ("workflow_resume", {"run_id": run, "graph_digest": digest, "decisions": {}}),
            ("workflow_resume", {"run_id": run, "graph_digest": digest, "decisions": {node: "rerun"}}),
            ("workflow_resume", {"run_id": run, "graph_digest": digest, "decisions": {node: "skip"}}),
        ]
    calls += [("workflow_runs", {}), ("workflow_runs", {"limit": 500})]
    calls += [("workflow_runs", {"state": s}) for s in ("running", "waiting", "completed", "needs_decision")]
    calls += [
        ("workflow_cancel", {"run_id": done_run}),
        ("workflow_cancel", {"run_id": done_run, "timeout_seconds": 0}),
    ]
    return calls


def test_no_tool_approves_answers_trusts_or_approves_a_plan(ws: Project, mcp: McpSession, ids: dict[str, str]) -> None:
    # A finished run to cancel (cancelling the waiting ones would end the wait, not decide it).
    planned = mcp.answer("workflow_plan", {"file": "ok.star"})
    done_run = mcp.answer("workflow_run", {**{k: planned[k] for k in ("plan_id", "graph_digest")}, "mode": "plan"})[
        "run_id"
    ]
    assert mcp.answer("workflow_wait", {"run_id": done_run, "timeout_seconds": 60})["lifecycle"] == "completed"

    before = snapshot(ws)
    waiting = {run: pending(ws, run) for run in (ids["launch_run"], ids["node_run"])}
    assert all(len(requests) == 1 for requests in waiting.values())

    answered = []
    for tool, arguments in every_call(ids, done_run):
        result = mcp.call(tool, arguments)
        answered.append((tool, result.is_error))
    for run in (ids["launch_run"], ids["node_run"]):
        mcp.read(f"rho://runs/{run}/events")
    mcp.read(f"rho://runs/{ids['node_run']}/nodes/ok/output")

    assert snapshot(ws) == before
    assert {run: pending(ws, run) for run in waiting} == waiting
    for run in waiting:
        assert mcp.answer("workflow_status", {"run_id": run})["lifecycle"] == "waiting"
    assert not (ws.root / "touched").exists() and not (ws.root / "shipped").exists()
    assert ("workflow_list", False) in answered and ("workflow_resume", True) in answered
