"""The ledger's recording (issue 34, Must-show 1): every model call of a run is journaled as it
completes, and the totals folded from the journal equal what a local OpenAI-compatible server on
127.0.0.1 says it served, for a Starlark graph with agent nodes (one retried), a script with
parallel ``run_model`` steps, a flow with forked branches and an item graph with model steps; a
resume that replays what succeeded adds nothing.

Runs are real: the service's in-process runner or the CLI in a subprocess, real agent loops and
HTTP requests, the real journal and status fold. The server's counts (:meth:`ScriptedServer.totals`)
are computed from the usage objects it actually sent."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rho_notebook.model.ledger import Price, Usage, node_usage, run_usage
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Consent, StartRun
from rho_notebook.store.journal import read_journal
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.runhelp import start_run, wait_for_event
from tests.cli.test_flow_runs import TEAM
from tests.conftest import Project, star

PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_input_per_mtok": 0.5}
PRICES = {"local/test-model": Price(2.0, 8.0, 0.5)}
AGENT = """---
description: test agent
runtime: rho
model-policy: inherit
tools: [read_file]
---
Be brief.
"""
ENV = {KEY_ENV: SECRET}


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Recorded], Reply]], ScriptedServer]]:
    started: list[ScriptedServer] = []

    def start(answer: Callable[[Recorded], Reply]) -> ScriptedServer:
        server = ScriptedServer([answer], repeat_last=True).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


class Answers:
    """Answers every request with usage that differs per request (cached and reasoning details
    included); the first request whose body holds ``rate_limit_once`` gets HTTP 429 (retried by
    the client), the first holding ``fail_once`` HTTP 500 (the call fails)."""

    def __init__(self, *, fail_once: str = "", rate_limit_once: str = "", hold_once: str = "") -> None:
        self.fail_once, self.rate_limit_once, self.hold_once = fail_once, rate_limit_once, hold_once
        self.held = threading.Event()
        """Never set: the held request is answered only if its client stays (it is cancelled)."""
        self.count = 0
        self.failed = 0
        self.lock = threading.Lock()

    def __call__(self, request: Recorded) -> Reply:
        text = json.dumps(request.body)
        with self.lock:
            self.count += 1
            n = self.count
            if self.rate_limit_once and self.rate_limit_once in text:
                self.rate_limit_once = ""
                return OPENAI.error(429, "slow down", headers={"retry-after": "0"})
            if self.hold_once and self.hold_once in text:
                self.hold_once = ""
                self.failed += 1
                return Reply(body={}, hold=self.held)
            if self.fail_once and self.fail_once in text:
                self.fail_once = ""
                self.failed += 1
                return OPENAI.error(500, "upstream unavailable")
        answer = '{"verdict": "ok"}' if "verdict" in json.dumps(request.body["messages"]) else f"answer {n}"
        return OPENAI.answer(answer, tokens=(100 + n, 10 + n), cached=n % 3 * 20, reasoning=n % 2 * 4)


def configure(project: Project, server: ScriptedServer) -> None:
    write_settings_for(project.home, server, prices={"local/test-model": PRICE})
    project.write(".rho/agents/tester.md", AGENT)


def model_calls(project: Project, run_id: str) -> list[dict[str, Any]]:
    path = project.home / "workflows" / "runs" / run_id / "events.jsonl"
    return [r for r in read_journal(path).events if r["kind"] == "model_called"]


def assert_ledger_matches(
    project: Project, state: RunState, server: ScriptedServer, *, retries: int, failed: int = 0
) -> Usage:
    """The run's usage folded from its journal equals the server's own counts, and is priced;
    ``retries`` requests were retried and ``failed`` ended their call without an answer."""
    usage = run_usage(state, PRICES)
    served = server.totals()
    assert usage.calls == served["calls"] == len(model_calls(project, state.run_id))
    assert usage.input_tokens == served["input_tokens"]
    assert usage.output_tokens == served["output_tokens"]
    assert usage.cached_tokens == served["cached_tokens"] > 0
    assert usage.reasoning_tokens == served["reasoning_tokens"] > 0
    assert usage.retries == retries == served["requests"] - served["calls"] - failed
    cost = (
        (served["input_tokens"] - served["cached_tokens"]) * 2.0
        + served["cached_tokens"] * 0.5
        + served["output_tokens"] * 8.0
    ) / 1_000_000
    assert usage.cost_usd == pytest.approx(cost)
    assert run_usage(state, {}).cost_usd is None  # no price: unknown, never 0
    return usage


# -- a Starlark graph with agent nodes ----------------------------------------------------------------

GRAPH = star(
    """
    a = agent(name = "a", agent = "tester", prompt = "say A", timeout_seconds = 60, max_output_bytes = 10000)
    b = agent(name = "b", agent = "tester", prompt = "say B", timeout_seconds = 60, max_output_bytes = 10000)
    c = agent(name = "c", agent = "tester", prompt = "say C", needs = ["a", "b"], timeout_seconds = 60, max_output_bytes = 10000)
    return workflow(name = "spend", nodes = [a, b, c])
    """
)


def test_a_graph_of_agent_nodes_counts_every_call_retries_included_and_a_resume_adds_only_new_calls(
    project: Project, serve: Any
) -> None:
    answers = Answers(rate_limit_once="say A", hold_once="say C")
    server = serve(answers)
    configure(project, server)
    project.write("spend.star", GRAPH)
    proc = start_run(project, "spend.star", env=ENV)
    try:
        run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "node_launched")
        server.wait_for_requests(4, timeout=30)  # a (429, then again), b, and c, held
        cancel = project.cli("cancel", run_id, "--wait", "20", "--output", "json")
        assert cancel.returncode == 0, cancel.stderr
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    state = project.status(run_id)
    assert state.outcome == "cancellation" and state.nodes["c"].state.value == "cancellation"
    # a: one call that took a transport retry; b: one call; c: cancelled in flight, so no call
    assert node_usage(state.nodes["a"], PRICES).retries == 1
    assert [node_usage(state.nodes[n], PRICES).calls for n in "abc"] == [1, 1, 0]
    before = assert_ledger_matches(project, state, server, retries=1, failed=1)
    spent = {n: node_usage(state.nodes[n], PRICES) for n in "ab"}

    resumed = project.cli("resume", run_id, "--yes", env=ENV)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state = project.status(run_id)
    assert state.outcome == "success"
    after = assert_ledger_matches(project, state, server, retries=1, failed=1)
    assert after.calls == before.calls + 1  # only c asked again: a and b were kept, adding nothing
    assert {n: node_usage(state.nodes[n], PRICES) for n in "ab"} == spent
    assert state.nodes["c"].attempt == 2 and node_usage(state.nodes["c"], PRICES).calls == 1
    # each call's record: provider and model as settings name them, tokens, the tool calls it asked for
    record = next(r for r in model_calls(project, run_id) if r["node"] == "c")
    assert record["provider"] == "local" and record["model"] == "test-model" and record["attempt"] == 2
    assert record["tool_calls"] == 0 and record["seconds"] >= 0


# -- a script with parallel run_model steps ----------------------------------------------------------

SCRIPT = """\
from concurrent.futures import ThreadPoolExecutor

from rho_notebook.script import emit_output, run_model


def ask(n):
    return run_model(
        [{"role": "user", "content": f"question {n}"}], provider="local", model="test-model", step_id=f"ask-{n}"
    )


with ThreadPoolExecutor(max_workers=3) as pool:
    handles = list(pool.map(ask, [1, 2, 3, 4]))
if not all(handle.ok for handle in handles):
    raise SystemExit(1)
emit_output([handle.output for handle in handles])
"""


def test_a_script_with_parallel_run_model_steps_and_a_replayed_resume(project: Project, serve: Any) -> None:
    answers = Answers(fail_once="question 3")
    server = serve(answers)
    configure(project, server)
    project.write("asks.py", SCRIPT)
    ran = project.cli("run", "asks.py", "--yes", "--output", "jsonl", env=ENV)
    assert ran.returncode != 0, ran.stdout + ran.stderr
    run_id = next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"]
    state = project.status(run_id)
    before = assert_ledger_matches(project, state, server, retries=0, failed=1)
    assert before.calls == 3
    assert {k: node_usage(state.nodes[k], PRICES).calls for k in ("ask-1", "ask-2", "ask-3", "ask-4")} == {
        "ask-1": 1,
        "ask-2": 1,
        "ask-3": 0,
        "ask-4": 1,
    }

    resumed = project.cli("resume", run_id, "--yes", env=ENV)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state = project.status(run_id)
    after = assert_ledger_matches(project, state, server, retries=0, failed=1)
    assert after.calls == 4 and len(server.requests) == 5  # the replayed steps asked nothing
    assert {r["node"] for r in model_calls(project, run_id)} == {"ask-1", "ask-2", "ask-3", "ask-4"}


# -- a flow with forked branches ---------------------------------------------------------------------


def test_a_flow_with_forked_branches_rolls_up_by_module_path_and_branch(project: Project, serve: Any) -> None:
    answers = Answers(fail_once="You are the editor")
    server = serve(answers)
    configure(project, server)
    project.write("team.py", TEAM)
    ran = project.cli(
        "run", "team.py", "--flow", "Team", "--input", 'prompt="Buy?"', "--yes", "--output", "jsonl", env=ENV
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr  # the editor's provider failed once
    run_id = next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"]
    state = project.status(run_id)
    assert assert_ledger_matches(project, state, server, retries=0, failed=1).calls == 4

    resumed = project.cli("resume", run_id, "--yes", env=ENV)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state = project.status(run_id)
    assert assert_ledger_matches(project, state, server, retries=0, failed=1).calls == 5  # branches replayed
    keys = {r["node"]: r.get("key") for r in model_calls(project, run_id)}
    assert keys == {
        "team.research.writer/f1#1": "team.research.writer/f1",
        "team.research.writer/f1#2": "team.research.writer/f1",
        "team.research.writer/f2#1": "team.research.writer/f2",
        "team.research.writer/f2#2": "team.research.writer/f2",
        "team.editor#1": "team.editor",
    }
    by_key = state.nodes["team.research.writer/f2#2"].attempts[0].usage["by_key"]  # type: ignore[index]
    assert list(by_key) == ["team.research.writer/f2"] and by_key["team.research.writer/f2"]["calls"] == 1


# -- an item graph with model steps ----------------------------------------------------------------------

ITEMS = """\
name: asking
inputs:
  text: {type: string}
steps:
  - id: classify
    kind: agent
    params:
      agent: tester
      prompt: "=Classify: {{ $json.text }} as a verdict"
      answer: {verdict: {type: enum, choices: [ok, bad]}}
  - id: sum
    kind: model
    params: {provider: local, model: test-model, prompt: "=Summarise {{ $json.text }}", into: summary}
  - id: again
    kind: model
    params: {provider: local, model: test-model, prompt: "=Shorten {{ $json.summary }}", into: short}
  - id: split
    kind: set
    params: {fields: {parts: [x, y, z]}}
  - id: each
    kind: aggregate
    params:
      over: parts
      max_items: 5
      into: answers
      step: {kind: model, params: {provider: local, model: test-model, prompt: "=Answer {{ $json }}"}}
  - {id: out, kind: output}
edges:
  - {from: classify, to: sum}
  - {from: sum, to: again}
  - {from: again, to: split}
  - {from: split, to: each}
  - {from: each, to: out}
"""


def test_an_item_graph_with_model_steps(project: Project, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    server = serve(Answers())
    configure(project, server)
    project.write("g.graph.yaml", textwrap.dedent(ITEMS))
    plan = project.plan("g.graph.yaml", {"text": "printer on fire"})
    done = asyncio.run(project.service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True))))
    assert done.outcome == "success", {n: r.state.value for n, r in done.nodes.items()}
    state = project.status(done.run_id)
    assert assert_ledger_matches(project, state, server, retries=0).calls == 6
    counted = [node_usage(state.nodes[n], PRICES).calls for n in ("classify", "sum", "again", "each", "out")]
    assert counted == [1, 1, 1, 3, 0]
    by_key = state.nodes["each"].attempts[0].usage["by_key"]  # type: ignore[index]  # instances roll up by key
    assert {key: tally["calls"] for key, tally in by_key.items()} == {"each[0]": 1, "each[1]": 1, "each[2]": 1}


def test_usage_json_and_completion_json_keep_their_shape_when_no_details_are_reported(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records written per attempt gain cached/reasoning counts only when the provider reports them."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ScriptedServer([OPENAI.answer("plain", tokens=(3, 2))]) as server:
        configure(project, server)
        project.write(
            "g.graph.yaml",
            textwrap.dedent(
                """\
                name: one
                steps:
                  - id: sum
                    kind: model
                    params: {provider: local, model: test-model, prompt: "hi", into: s}
                """
            ),
        )
        plan = project.plan("g.graph.yaml")
        done = asyncio.run(project.service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True))))
    folder = project.home / "workflows" / "runs" / done.run_id / "nodes" / "sum" / "attempts" / "1"
    assert json.loads((folder / "completion.json").read_text())["usage"] == {"input_tokens": 3, "output_tokens": 2}
    (record,) = model_calls(project, done.run_id)
    assert "cached_tokens" not in record and "reasoning_tokens" not in record
    assert run_usage(project.status(done.run_id), PRICES).cached_tokens == 0
