"""The ledger in ``status`` and ``result`` (issue 34): a real run of agent nodes through the CLI
against a local OpenAI-compatible server on 127.0.0.1 that reports usage, read back as JSON and
text; the totals equal what the server reported, costs come from the settings' price table (an
unknown price is ``null``, never 0), and a command-only run's answers carry no ``usage``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.agents.fakeserver import OPENAI, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.conftest import Project, star

ENV = {KEY_ENV: SECRET}

WORKFLOW = """\
def build(inputs):
    first = agent(name = "first", agent = "reviewer", prompt = "Read src and summarize.",
                  access = "read_only", timeout_seconds = 300, max_output_bytes = 12000)
    second = agent(name = "second", agent = "reviewer", prompt = "Summarize again.",
                   access = "read_only", needs = ["first"], timeout_seconds = 300, max_output_bytes = 12000)
    done = command(name = "done", argv = ["echo", "done"], needs = ["second"],
                   timeout_seconds = 60, max_output_bytes = 1000)
    return workflow(name = "spend", nodes = [first, second, done])

WORKFLOW = define(build = build)
"""

COMMANDS = star(
    'return workflow(name = "plain", nodes = [command(name = "say", argv = ["echo", "hi"], '
    "timeout_seconds = 30, max_output_bytes = 1000)])"
)


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    started: list[ScriptedServer] = []

    def start(script: list[Any], **kwargs: Any) -> ScriptedServer:
        server = ScriptedServer(script, **kwargs).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def _replies() -> list[Any]:
    """first: a tool turn (5 in, 3 out) then an answer (11, 7); second: a 503 that is retried,
    then an answer (20, 4). The server reports 36 input and 14 output tokens over 3 answered calls."""
    busy = OPENAI.error(503, "busy")
    busy.headers["retry-after"] = "0"
    return [
        OPENAI.tools(("c1", "read_file", {"path": "src/main.py"})),
        OPENAI.answer("first summary", tokens=(11, 7)),
        busy,
        OPENAI.answer("second summary", tokens=(20, 4)),
    ]


def _run(project: Project, entry: str) -> str:
    plan = project.cli("plan", entry, "--output", "json", env=ENV)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    done = project.cli("run", json.loads(plan.stdout)["plan_id"], "--yes", "--output", "jsonl", env=ENV)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0, done.stdout + done.stderr
    return str(events[0]["run_id"])


def _json(project: Project, *args: str) -> Any:
    done = project.cli(*args, "--output", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _spend_run(project: Project, serve: Callable[..., ScriptedServer], **settings: Any) -> tuple[str, ScriptedServer]:
    server = serve(_replies())
    write_settings_for(project.home, server, **settings)
    project.write("src/main.py", "print('hello')\n")
    project.write("spend.star", WORKFLOW)
    return _run(project, "spend.star"), server


PRICES = {"local/test-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}


def test_status_and_result_count_what_the_server_reported(project: Project, serve: Callable[..., Any]) -> None:
    run_id, server = _spend_run(project, serve, prices=PRICES)
    answered = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(answered) == 4  # three answered calls and one 503 retried
    state = _json(project, "status", run_id)
    nodes = state["nodes"]
    first, second, done = nodes["first"]["usage"], nodes["second"]["usage"], nodes["done"]["usage"]
    assert (first["calls"], first["input_tokens"], first["output_tokens"], first["tool_calls"]) == (2, 16, 10, 1)
    assert (second["calls"], second["input_tokens"], second["output_tokens"], second["retries"]) == (1, 20, 4, 1)
    assert (done["calls"], done["input_tokens"], done["cost_usd"]) == (0, 0, 0.0)
    run = state["usage"]
    assert {
        k: run[k] for k in ("input_tokens", "output_tokens", "calls", "retries", "tool_calls", "cached_tokens")
    } == {
        "input_tokens": 36,
        "output_tokens": 14,
        "calls": 3,
        "retries": 1,
        "tool_calls": 1,
        "cached_tokens": 0,
    }
    assert run["cost_usd"] == pytest.approx((36 * 1.0 + 14 * 2.0) / 1e6)
    assert first["cost_usd"] == pytest.approx((16 + 20) / 1e6)
    assert run["wall_seconds"] > 0 and first["wall_seconds"] > 0
    assert set(run) >= {"reasoning_tokens", "wall_seconds"}

    result = _json(project, "result", run_id)
    assert result["usage"]["calls"] == 3 and result["usage"]["cost_usd"] == run["cost_usd"]
    assert {name: node["usage"]["calls"] for name, node in result["nodes"].items()} == {
        "first": 2,
        "second": 1,
        "done": 0,
    }

    text = project.cli("status", run_id)
    assert text.returncode == 0, text.stderr
    usage_line = next(line for line in text.stdout.splitlines() if line.startswith("usage"))
    assert "3 calls" in usage_line and "36 in / 14 out tokens" in usage_line and "$0.000064" in usage_line
    first_line = next(line for line in text.stdout.splitlines() if line.strip().startswith("first"))
    assert "[2 calls  16 in / 10 out tokens  1 tool call  $0.000036]" in first_line
    done_line = next(line for line in text.stdout.splitlines() if line.strip().startswith("done"))
    assert "[" not in done_line
    shown = project.cli("result", run_id)
    assert shown.returncode == 0 and "usage 3 calls" in shown.stdout


def test_a_model_without_a_price_costs_null_not_zero(project: Project, serve: Callable[..., Any]) -> None:
    run_id, _ = _spend_run(project, serve, prices={"local/other-model": PRICES["local/test-model"]})
    state = _json(project, "status", run_id)
    assert state["usage"]["cost_usd"] is None and state["nodes"]["first"]["usage"]["cost_usd"] is None
    assert state["usage"]["input_tokens"] == 36
    assert "cost unknown" in project.cli("status", run_id).stdout


def test_a_command_only_run_shows_no_usage(project: Project) -> None:
    project.write("wf.star", COMMANDS)
    run_id = _run(project, "wf.star")
    state = _json(project, "status", run_id)
    assert "usage" not in state and "usage" not in state["nodes"]["say"]
    assert "usage" not in _json(project, "result", run_id)
    assert "usage" not in project.cli("status", run_id).stdout


def test_mcp_workflow_status_answers_the_same_usage(project: Project, serve: Callable[..., Any]) -> None:
    from tests.cli.mcp_session import McpSession

    run_id, _ = _spend_run(project, serve, prices=PRICES)
    cli_state = _json(project, "status", run_id)
    session = McpSession(project)
    try:
        answer = session.answer("workflow_status", {"run_id": run_id})
    finally:
        session.close()
    assert answer["usage"] == cli_state["usage"]
    assert {name: node["usage"] for name, node in answer["nodes"].items()} == {
        name: node["usage"] for name, node in cli_state["nodes"].items()
    }
    assert answer["usage"]["calls"] == 3 and answer["usage"]["cost_usd"] == pytest.approx(64e-6)
    from rho_notebook.views.dag import read_run_view  # the sidebar's and REST API's DAG view

    view = asyncio.run(read_run_view(project.service, run_id))
    assert view.run is not None and view.run["usage"] == cli_state["usage"]
    assert view.nodes["first"]["usage"] == cli_state["nodes"]["first"]["usage"] and "usage" not in view.nodes["done"]


def test_rho_usage_is_a_table_of_typed_rows(
    project: Project, serve: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rho_notebook as rho
    from rho_notebook.service.usage import UsageRow

    run_id, _ = _spend_run(project, serve, prices=PRICES)
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    rows = rho.usage(run_id[:13])
    assert all(isinstance(row, UsageRow) for row in rows)
    assert [(row.key, row.level) for row in rows] == [
        ("run", "run"),
        ("done", "node"),
        ("first", "node"),
        ("second", "node"),
    ]
    run, first = rows[0].usage, rows[2].usage
    assert (run.calls, run.input_tokens, run.output_tokens, run.retries) == (3, 36, 14, 1)
    assert run.cost_usd == pytest.approx(64e-6) and first.tool_calls == 1
    assert run.to_json() == _json(project, "status", run_id)["usage"]
    table = rows._repr_html_()
    assert table.startswith("<table") and "<td>first</td>" in table
    assert "<td>36</td>" in table and "<td>$0.000064</td>" in table
    assert "first" in str(rows)


def test_a_reused_node_counts_zero_and_shows_what_it_saved(project: Project, serve: Callable[..., Any]) -> None:
    server = serve([*_replies(), OPENAI.answer("second again", tokens=(20, 4))])
    write_settings_for(project.home, server, prices=PRICES)
    project.write("src/main.py", "print('hello')\n")
    project.write(
        "spend.star",
        WORKFLOW.replace('access = "read_only", timeout', 'access = "read_only", reuse = True, timeout', 1),
    )
    first_run = _run(project, "spend.star")
    again = _run(project, "spend.star")
    assert len(server.requests) == 5  # the second run asked only for `second`
    state = _json(project, "status", again)
    reused = state["nodes"]["first"]
    assert reused["reused_from"]["run_id"] == first_run
    assert (reused["usage"]["calls"], reused["usage"]["input_tokens"], reused["usage"]["cost_usd"]) == (0, 0, 0.0)
    saved = reused["usage"]["saved"]
    assert (saved["calls"], saved["input_tokens"], saved["output_tokens"]) == (2, 16, 10)
    assert saved["cost_usd"] == pytest.approx(36e-6)
    assert (state["usage"]["calls"], state["usage"]["input_tokens"]) == (1, 20)
    assert state["usage"]["saved"]["calls"] == 2
    # every front end's status prices the run in its own store: `wait --output json` (as the REST
    # API, MCP and %workflow status) answers what `status` does, the reused node's saving included
    waited = json.loads(project.cli("wait", again, "--output", "json").stdout)
    assert waited["nodes"]["first"]["usage"] == reused["usage"] and waited["usage"] == state["usage"]
    line = next(line for line in project.cli("status", again).stdout.splitlines() if line.strip().startswith("first"))
    assert "(saved 2 calls, 26 tokens, $0.000036)" in line
    from rho_notebook.views.detail import read_node_detail

    pane = asyncio.run(read_node_detail(project.service, again, "first"))
    spend = pane.get("spend")
    assert spend is not None and spend["calls"] == 0 and spend["saved"]["calls"] == 2
    pane = asyncio.run(read_node_detail(project.service, again, "second"))
    assert pane.get("spend") is not None and pane["spend"]["input_tokens"] == 20
    assert asyncio.run(read_node_detail(project.service, again, "done")).get("spend") is None


ASKS = """\
from rho_notebook.script import emit_output, run_model


def ask(n):
    return run_model([{"role": "user", "content": f"q{n}"}], provider="local", model="test-model", step_id=f"ask-{n}")


emit_output([ask(n).ok for n in (1, 2, 3)])
"""


def _forked(project: Project, run_id: str, *args: str) -> Any:
    done = project.cli("fork", run_id, *args, "--yes", "--output", "json", env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_a_forks_taken_nodes_and_steps_count_zero_and_show_what_they_saved(
    project: Project, serve: Callable[..., Any]
) -> None:
    """A script fork's taken step copied its source's exit record, and the ledger read that as a
    call of the fork (the old-run fallback): the fork's usage counted 2 calls where 1 was made. A
    taken node or step now counts zero and shows in ``saved`` what its source attempt spent, through
    a fork of a fork; the edited one saves nothing."""
    server = serve([OPENAI.answer("fine", tokens=(11, 7))], repeat_last=True)
    write_settings_for(project.home, server, prices=PRICES)
    project.write("asks.py", ASKS)
    source = _run(project, "asks.py")
    forked = _forked(project, source, "--at", "ask-2", "--value", '"edited"')
    assert [r.body["messages"][-1]["content"] for r in server.requests] == ["q1", "q2", "q3", "q3"]
    state = _json(project, "status", forked["run_id"])
    assert (state["usage"]["calls"], state["usage"]["input_tokens"]) == (1, 11), state["usage"]
    taken = state["nodes"]["ask-1"]["usage"]
    assert taken["calls"] == 0 and (taken["saved"]["calls"], taken["saved"]["output_tokens"]) == (1, 7)
    edited = state["nodes"]["ask-2"].get("usage") or {"calls": 0}
    assert edited["calls"] == 0 and "saved" not in edited  # edited: no call, nothing saved
    assert state["usage"]["saved"]["calls"] == 1

    project.write("spend.star", WORKFLOW)
    graph_run = _run(project, "spend.star")
    first = _forked(project, graph_run, "--at", "done")
    again = _forked(project, first["run_id"], "--at", "done")
    for fork in (first, again):  # the fork of a fork saved what the first run spent
        state = _json(project, "status", fork["run_id"])
        assert state["usage"]["calls"] == 0 and state["usage"]["saved"]["calls"] == 2, state["usage"]
        assert state["nodes"]["first"]["usage"]["saved"]["input_tokens"] == 11
