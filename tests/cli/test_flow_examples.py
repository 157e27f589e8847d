"""examples/flows through the real CLI, offline against a local OpenAI-compatible server on
127.0.0.1: the two-role review flow and the selector-routed support flow run, validate, and show
their calls as nodes named by flow step keys (journal, folders, status, result)."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest

from rho_notebook.flow import ModelCall, ModelReply, Session, use_backend
from tests.agents.fakeserver import OPENAI, Recorded, Reply
from tests.agents.helpers import KEY_ENV, SECRET
from tests.cli.flowhelp import ENV, Serve, echo, journal, result, run_flow, serve, setup, system_of
from tests.cli.runhelp import status
from tests.conftest import Project

__all__ = ["serve"]


def test_the_review_flow_runs_and_its_result_holds_the_final_text(project: Project, serve: Serve) -> None:
    server = serve(echo)
    setup(project, server, "review.py")

    code, run_id, shown = run_flow(project, "review.py", "Review", "Explain durable runs")
    assert code == 0, shown
    assert len(server.requests) == 2
    writer, reviewer = server.requests
    assert system_of(writer).startswith("You are the writer")
    assert reviewer.body["messages"][-1] == {"role": "assistant", "content": "[writer] Explain durable runs"} or (
        reviewer.body["messages"][-1]["content"] == "[writer] Explain durable runs"
    )

    output = result(project, run_id)["output"]
    assert output["text"] == "[reviewer] Explain durable runs"
    roles = [m["role"] for m in output["messages"]["messages"]]
    assert roles == ["user", "assistant", "assistant"]

    state = status(project, run_id)
    assert state["outcome"] == "success"
    assert {name: node["state"] for name, node in state["nodes"].items()} == {
        "review.writer#1": "success",
        "review.reviewer#1": "success",
    }
    launched = [r for r in journal(project, run_id) if r["kind"] == "node_launched"]
    assert [r["node"] for r in launched] == ["review.writer#1", "review.reviewer#1"]
    assert launched[1]["step"]["after"] == ["review.writer#1"]
    run_dir = project.home / "workflows" / "runs" / run_id
    assert (run_dir / "nodes" / "review.writer#1" / "attempts" / "1" / "completion.json").is_file()
    shown = project.cli("status", run_id, env=ENV)
    assert "review.writer#1" in shown.stdout and "review.reviewer#1" in shown.stdout, shown.stdout
    logs = project.cli("logs", run_id, "review.reviewer#1", env=ENV)
    assert logs.returncode == 0, logs.stderr


def route_and_answer(request: Recorded) -> Reply:
    """The selector picks billing (1 of 0..1 is technical) when the request says 'charged'."""
    if system_of(request).startswith("You route"):
        prompt = request.body["messages"][-1]["content"]
        assert "0. Billing: invoices" in prompt and "1. Technical: installation" in prompt
        if "charged" in prompt:
            return OPENAI.answer("0")
        if "crash" in prompt:
            return OPENAI.answer("Candidate 1 fits best.")
        return OPENAI.answer("none of them: -1")
    return echo(request)


def test_the_support_flow_routes_by_the_selector_answer(project: Project, serve: Serve) -> None:
    server = serve(route_and_answer)
    setup(project, server, "support.py")

    code, billing_run, shown = run_flow(project, "support.py", "Support", "I was charged twice")
    assert code == 0, shown
    assert result(project, billing_run)["output"]["text"] == "[billing] I was charged twice"
    assert sorted(status(project, billing_run)["nodes"]) == ["support.billing.agent#1", "support.route.router#1"]

    code, tech_run, shown = run_flow(project, "support.py", "Support", "The app crashes on start")
    assert code == 0, shown
    assert result(project, tech_run)["output"]["text"] == "[technical] The app crashes on start"

    code, none_run, shown = run_flow(project, "support.py", "Support", "What is the weather?")
    assert code == 0, shown
    assert result(project, none_run)["output"]["text"].endswith("a person will follow up.")
    assert sorted(status(project, none_run)["nodes"]) == ["support.route.router#1"]
    assert len(server.requests) == 5  # two routed requests of two calls each, one unrouted


def test_validate_prints_the_module_tree_of_both_examples(project: Project, serve: Serve) -> None:
    server = serve(echo)
    setup(project, server, "review.py", "support.py")

    checked = project.cli("validate", "support.py", "--flow", "Support", env=ENV)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "support  (Support)" in checked.stdout
    assert "selector (dynamic): candidates support.billing, support.technical" in checked.stdout
    assert "valid: flow Support of support.py passes validate (0 errors, 0 warnings" in checked.stdout

    as_json = project.cli("validate", "review.py", "--flow", "Review", "--output", "json", env=ENV)
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["valid"] is True and data["diagnostics"] == []
    assert [a["path"] for a in data["manifest"]["agents"]] == ["review.reviewer", "review.writer"]
    assert server.requests == []  # compiling calls no model


def test_the_review_flow_runs_in_memory_on_the_service_completion_client(
    project: Project, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a run (no channel in the environment) the flow's calls go to the installed backend;
    one built on ``Service.complete`` asks the same provider and journals nothing."""
    server = serve(echo)
    setup(project, server, "review.py")
    monkeypatch.setenv(KEY_ENV, SECRET)
    service = project.service
    asked: list[str] = []

    def backend(call: ModelCall) -> ModelReply:
        asked.append(call.key)
        answer = asyncio.run(
            service.complete(list(call.messages), provider=call.provider, model=call.model, workspace=project.workspace)
        )
        return ModelReply(content=answer["text"])

    spec = importlib.util.spec_from_file_location("review_example", project.root / "review.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    previous = use_backend(backend)
    try:
        final = module.Review()(Session.from_user_message("Explain memory"))
    finally:
        use_backend(previous)
    assert final.text() == "[reviewer] Explain memory"
    assert asked == ["review.writer#1", "review.reviewer#1"]
    assert len(server.requests) == 2
    assert not (project.home / "workflows" / "runs").exists()
