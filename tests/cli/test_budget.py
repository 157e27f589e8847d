"""Budgets as durable guards (issue 34, point 2), through real ``rho-notebook`` processes against a
local OpenAI-compatible server on 127.0.0.1 that counts the requests it is sent.

Every call of the server answers with 11 input and 7 output tokens (18), and the provider settings
cap each request's output at 10 tokens: the third call of a run whose token budget is 40 could
take it to 36 + 10 = 46, so the run halts before that call: the server sees two requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rho_notebook.errors import NotFound
from rho_notebook.service.starting import raise_budgets
from tests.agents.fakeserver import OPENAI, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.runhelp import status
from tests.conftest import REPO, Project

ENV = {KEY_ENV: SECRET}

CHAIN = """
LIMITS = {"timeout_seconds": 120, "max_output_bytes": 10000}

def build(inputs):
    a = agent(name = "a", agent = "explorer", prompt = template(["first"]), access = "read_only", **LIMITS)
    b = agent(name = "b", agent = "explorer", prompt = template(["second"]), access = "read_only", needs = ["a"], **LIMITS)
    c = agent(name = "c", agent = "explorer", prompt = template(["third"]), access = "read_only", needs = ["b"], **LIMITS)
    return workflow(name = "chain", nodes = [a, b, c])

WORKFLOW = define(inputs = {}, build = build)
"""


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer([OPENAI.answer("done")], repeat_last=True) as started:
        yield started


def configure(project: Project, server: ScriptedServer, **extra: Any) -> None:
    """settings.json pointing at ``server``, each request's output capped at 10 tokens."""
    write_settings_for(project.home, server, **extra)
    path = project.home / "settings.json"
    settings = json.loads(path.read_text())
    settings["providers"]["local"]["max_tokens"] = 10
    path.write_text(json.dumps(settings))


def run_json(project: Project, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = project.cli(*args, "--output", "json", env=ENV, timeout=120)
    assert result.stdout.strip(), result.stderr
    return result, json.loads(result.stdout.strip().splitlines()[-1])


def halted_chain(project: Project, server: ScriptedServer) -> str:
    """Run CHAIN with ``--max-tokens 40`` until it halts before c's call: its run ID."""
    project.write("wf.star", CHAIN)
    configure(project, server)
    result, _ = run_json(project, "run", "wf.star", "--yes", "--max-tokens", "40")
    assert result.returncode == 1, result.stderr
    runs = project.cli("runs", "--output", "json", env=ENV)
    return str(json.loads(runs.stdout)[0]["run_id"])


def assert_halted_by_tokens(state: dict[str, Any]) -> None:
    assert state["lifecycle"] == "needs_decision", state
    assert state["outcome"] is None
    assert [n for n, v in state["nodes"].items() if v["state"] == "success"] == ["a", "b"]
    assert state["nodes"]["c"]["state"] == "pending"
    (halt,) = state["halted"]
    assert halt["step"] == "c"
    assert "budget tokens" in halt["why"] and "(40)" in halt["why"] and "36 tokens spent" in halt["why"]
    assert "--raise-budget tokens=N" in halt["why"]


def test_a_call_that_could_pass_the_budget_halts_the_run_before_it_and_a_raise_finishes(
    project: Project, server: ScriptedServer
) -> None:
    run_id = halted_chain(project, server)
    assert len(server.requests) == 2  # the third call was never sent
    state = status(project, run_id)
    assert_halted_by_tokens(state)
    text = project.cli("status", run_id, env=ENV)
    assert "needs_decision" in text.stdout and "budget tokens" in text.stdout, text.stdout

    # a resume without a raise halts again at once, without a request
    again, state = run_json(project, "resume", run_id, "--yes")
    assert again.returncode == 1
    assert len(server.requests) == 2
    assert_halted_by_tokens(status(project, run_id))

    done, state = run_json(project, "resume", run_id, "--yes", "--raise-budget", "tokens=1000")
    assert done.returncode == 0, done.stderr
    final = status(project, run_id)
    assert final["outcome"] == "success"
    assert len(server.requests) == 3  # c's one call; a and b were not run again
    budgets = [r for r in _journal(project, run_id) if r["kind"] == "budget_set"]
    assert [(r["source"], r.get("max_tokens")) for r in budgets] == [("run", 40), ("raise", 1000)]


def test_every_way_on_a_budget_halt_names_raise_budget_never_decide(project: Project, server: ScriptedServer) -> None:
    """``runs`` and the end of ``run`` said ``resume RUN --decide c=rerun|skip`` (refused: a graph run
    takes no --decide) or a bare ``resume RUN`` (which halts again); both now name the raise."""
    project.write("wf.star", CHAIN)
    configure(project, server)
    ran = project.cli("run", "wf.star", "--yes", "--max-tokens", "40", env=ENV, timeout=120)
    assert ran.returncode == 1, ran.stderr
    run_id = json.loads(project.cli("runs", "--output", "json", env=ENV).stdout)[0]["run_id"]
    assert f"needs a decision: rho-notebook resume {run_id[:13]} --raise-budget tokens=N\n" in ran.stdout, ran.stdout
    (row,) = json.loads(project.cli("runs", "--output", "json", env=ENV).stdout)
    assert row["next"] == f"rho-notebook resume {run_id} --raise-budget tokens=N"
    listed = project.cli("runs", env=ENV).stdout
    assert f"needs a person: rho-notebook resume {run_id} --raise-budget tokens=N" in listed, listed
    assert "--decide" not in listed
    from rho_notebook.views.state import run_view_of  # the DAG view's (widget and sidebar) says the same

    view = run_view_of(asyncio.run(project.service.status(run_id)))
    assert view["next"] == f"rho-notebook resume {run_id} --raise-budget tokens=N"


def test_a_raise_for_a_node_the_run_does_not_have_is_refused_by_name(project: Project, server: ScriptedServer) -> None:
    """``resume RUN --raise-budget cc:tokens=5`` (a typo of c) was journaled for good, shown by
    ``status`` as ``budget cc: tokens 0 of 5``, and bound nothing; it is refused naming the nodes,
    from the CLI and from ``rho.resume(raise_budget=...)`` alike, and nothing is journaled."""
    run_id = halted_chain(project, server)
    before = len(_journal(project, run_id))
    typo = project.cli("resume", run_id, "--yes", "--raise-budget", "cc:tokens=5", env=ENV)
    assert typo.returncode != 0
    assert f"run {run_id[:13]} has no node 'cc'; its nodes: a, b, c" in typo.stderr, typo.stderr
    assert "Traceback" not in typo.stderr
    with pytest.raises(NotFound, match="has no node 'cc'"):
        asyncio.run(raise_budgets(project.service.layout, run_id, {"cc:tokens": 5}))
    assert len(_journal(project, run_id)) == before
    assert len(server.requests) == 2


SLOW = """
    slow = python(
        name = "slow",
        module = "//nodes/wait.py",
        function = "wait",
        args = {},
        output = schema.record({"ok": schema.integer()}),
        access = "read_only",
        **LIMITS
    )
"""

WAIT = """
import os, time


def wait():
    while not os.path.exists("release"):
        time.sleep(0.05)
    return {"ok": 1}
"""


def test_the_budget_and_the_spend_survive_kill_9_of_the_owner_in_the_halted_state(
    project: Project, server: ScriptedServer
) -> None:
    # c halts while `slow` still runs: the owner lets it finish, and is killed before it does
    project.write(
        "wf.star",
        CHAIN.replace("    return workflow(", SLOW + "    return workflow(").replace("[a, b, c]", "[a, b, c, slow]"),
    )
    project.write("nodes/wait.py", WAIT)
    configure(project, server)
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), **ENV}
    started = subprocess.run(
        [sys.executable, "-m", "rho_notebook", "run", "wf.star", "--yes", "--max-tokens", "40", "--detach"],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    run_id = _only_run(project)
    _wait_for(project, run_id, lambda r: r["kind"] == "node_reset" and r.get("node") == "c")
    assert _owner_alive(project, run_id)  # halted, still waiting for `slow`
    os.kill(_owner_pid(project, run_id), signal.SIGKILL)
    calls = [r for r in _journal(project, run_id) if r["kind"] == "model_called"]
    assert [r["node"] for r in calls] == ["a", "b"]

    (project.root / "release").write_text("")  # `slow` may end now (its new attempt at once)
    refused = project.cli("resume", run_id, "--yes", env=ENV)
    assert refused.returncode == 3  # `slow` was running when the owner died: it needs recovery
    again, _ = run_json(project, "resume", run_id, "--yes", "--recover-uncertain")
    assert again.returncode == 1, again.stderr
    assert len(server.requests) == 2  # the budget and the spend were folded again: no third request
    state = status(project, run_id)
    assert_halted_by_tokens({**state, "nodes": {k: v for k, v in state["nodes"].items() if k != "slow"}})
    assert state["nodes"]["slow"]["state"] == "success"

    done, _ = run_json(project, "resume", run_id, "--yes", "--raise-budget", "tokens=100")
    assert done.returncode == 0, done.stderr
    assert status(project, run_id)["outcome"] == "success"
    assert len(server.requests) == 3


def test_max_cost_with_a_model_that_has_no_price_is_refused_at_start(project: Project, server: ScriptedServer) -> None:
    project.write("wf.star", CHAIN)
    configure(project, server)
    result = project.cli("run", "wf.star", "--yes", "--max-cost", "0.5", env=ENV)
    assert result.returncode == 3, result.stderr
    assert "local/test-model" in result.stderr and "prices" in result.stderr
    assert json.loads(project.cli("runs", "--output", "json", env=ENV).stdout) == []  # nothing was created
    assert server.requests == []


def test_a_cost_raise_without_a_price_names_the_budget_not_another_flag(
    project: Project, server: ScriptedServer
) -> None:
    """``resume RUN --raise-budget c:cost=2`` with an unpriced model was refused as if the person had
    typed ``--max-cost``; the refusal names the budget it is about, and nothing is journaled."""
    run_id = halted_chain(project, server)
    before = len(_journal(project, run_id))
    refused = project.cli("resume", run_id, "--yes", "--raise-budget", "c:cost=2", env=ENV)
    assert refused.returncode == 3, refused.stderr
    assert "node c's cost budget needs a price for every model the run may call" in refused.stderr, refused.stderr
    assert "local/test-model" in refused.stderr and "--max-cost" not in refused.stderr
    assert len(_journal(project, run_id)) == before


def test_a_priced_cost_budget_halts_like_a_token_budget(project: Project, server: ScriptedServer) -> None:
    project.write("wf.star", CHAIN)
    # $1 per million input and output tokens: 18 tokens a call is $0.000018, a call may add $0.00001
    prices = {"local/test-model": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}
    configure(project, server, prices=prices)
    result, _ = run_json(project, "run", "wf.star", "--yes", "--max-cost", "0.00004")
    assert result.returncode == 1, result.stderr
    run_id = str(json.loads(project.cli("runs", "--output", "json", env=ENV).stdout)[0]["run_id"])
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision"
    assert "budget cost" in state["halted"][0]["why"]
    assert len(server.requests) == 2


def test_budget_flags_are_usage_errors_when_malformed(project: Project, server: ScriptedServer) -> None:
    run_id = halted_chain(project, server)
    bad = project.cli("resume", run_id, "--yes", "--raise-budget", "apples=3", env=ENV)
    assert bad.returncode == 2 and "--raise-budget 'apples=3'" in bad.stderr
    negative = project.cli("run", "wf.star", "--yes", "--max-tokens", "0", env=ENV)
    assert negative.returncode == 2 and "--max-tokens" in negative.stderr


def _journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    path = project.home / "workflows" / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _only_run(project: Project) -> str:
    return str(json.loads(project.cli("runs", "--output", "json", env=ENV).stdout)[0]["run_id"])


def _owner_pid(project: Project, run_id: str) -> int:
    started = [r for r in _journal(project, run_id) if r["kind"] == "run_started"]
    return int(started[-1]["pid"])


def _owner_alive(project: Project, run_id: str) -> bool:
    try:
        os.kill(_owner_pid(project, run_id), 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(project: Project, run_id: str, wanted: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(wanted(r) for r in _journal(project, run_id)):
            return
        time.sleep(0.05)
    pytest.fail(f"run {run_id}: not journaled in time: {[r['kind'] for r in _journal(project, run_id)]}")


# -- a script run: BUDGET = {...} read like INPUTS, and --decide STEP=skip ----------------------------

ASKS = """\
from rho_notebook.script import emit_output, run_model

BUDGET = {"tokens": 40}


def ask(n):
    return run_model([{"role": "user", "content": f"question {n}"}], provider="local", model="test-model", step_id=f"ask-{n}")


answers = [ask(n) for n in (1, 2, 3)]
emit_output({"ok": [a.ok for a in answers]})
"""


def test_a_script_budget_halts_before_the_third_call_and_decide_skip_goes_on(
    project: Project, server: ScriptedServer
) -> None:
    configure(project, server)
    project.write("asks.py", ASKS)
    result, _ = run_json(project, "run", "asks.py", "--yes")
    assert result.returncode == 1, result.stderr
    run_id = _only_run(project)
    assert len(server.requests) == 2
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision", state
    (halt,) = state["halted"]
    assert halt["step"] == "ask-3" and "budget tokens" in halt["why"] and "(40)" in halt["why"]
    budgets = [r for r in _journal(project, run_id) if r["kind"] == "budget_set"]
    assert [(r["source"], r["max_tokens"]) for r in budgets] == [("workflow", 40)]

    skipped, _ = run_json(project, "resume", run_id, "--yes", "--decide", "ask-3=skip")
    assert skipped.returncode == 0, skipped.stderr
    final = status(project, run_id)
    assert final["outcome"] == "success" and final["output"] == {"ok": [True, True, False]}, final
    assert len(server.requests) == 2  # ask-1 and ask-2 replayed, ask-3 skipped: no request


def test_a_script_budget_raised_on_resume_runs_the_halted_step(project: Project, server: ScriptedServer) -> None:
    configure(project, server)
    project.write("asks.py", ASKS)
    run_json(project, "run", "asks.py", "--yes")
    run_id = _only_run(project)
    raised, _ = run_json(project, "resume", run_id, "--yes", "--raise-budget", "tokens=100")
    assert raised.returncode == 0, raised.stderr
    final = status(project, run_id)
    assert final["output"] == {"ok": [True, True, True]}, final
    assert len(server.requests) == 3


def test_a_node_budget_halts_that_node_and_a_node_raise_finishes(project: Project, server: ScriptedServer) -> None:
    project.write("wf.star", CHAIN.replace('template(["third"])', 'template(["third"]), budget = {"tokens": 5}'))
    configure(project, server)
    result, _ = run_json(project, "run", "wf.star", "--yes")
    assert result.returncode == 1, result.stderr
    run_id = _only_run(project)
    assert len(server.requests) == 2  # c's first call could output 10 tokens: more than its 5
    state = status(project, run_id)
    (halt,) = state["halted"]
    assert halt["step"] == "c" and "budget c:tokens" in halt["why"] and "--raise-budget c:tokens=N" in halt["why"]
    budgets = [r for r in _journal(project, run_id) if r["kind"] == "budget_set"]
    assert [(r["source"], r.get("node"), r["max_tokens"]) for r in budgets] == [("workflow", "c", 5)]
    done, _ = run_json(project, "resume", run_id, "--yes", "--raise-budget", "c:tokens=100")
    assert done.returncode == 0, done.stderr
    assert status(project, run_id)["outcome"] == "success" and len(server.requests) == 3


# -- an item graph's model steps: the executor turns errors into failures, the budget still halts -----

ITEMS = """\
name: models
inputs:
  text: {type: string}
steps:
  - id: one
    kind: model
    params: {provider: local, model: test-model, prompt: "=Summarise {{ $json.text }}", into: a}
  - id: two
    kind: model
    params: {provider: local, model: test-model, prompt: "=Shorten {{ $json.a }}", into: b}
  - id: three
    kind: model
    params: {provider: local, model: test-model, prompt: "=Title {{ $json.b }}", into: c}
  - {id: out, kind: output}
edges:
  - {from: one, to: two}
  - {from: two, to: three}
  - {from: three, to: out}
"""


def test_an_item_graph_model_step_halts_rather_than_fails(project: Project, server: ScriptedServer) -> None:
    configure(project, server)
    project.write("g.graph.yaml", ITEMS)
    result, _ = run_json(
        project, "run", "g.graph.yaml", "--yes", "--input", 'text="printer on fire"', "--max-tokens", "40"
    )
    assert result.returncode == 1, result.stderr
    run_id = _only_run(project)
    assert len(server.requests) == 2
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision" and state["halted"][0]["step"] == "three", state
    assert state["nodes"]["three"]["state"] == "pending"
    done, _ = run_json(project, "resume", run_id, "--yes", "--raise-budget", "tokens=1000")
    assert done.returncode == 0, done.stderr
    assert status(project, run_id)["outcome"] == "success" and len(server.requests) == 3


API_RUN = """\
import sys

from rho_notebook.notebook import api as rho

handle = rho.run(sys.argv[1], yes=True, max_tokens=40)
print(handle.run_id, flush=True)
"""


RESUME_RAISED = """\
import sys

from rho_notebook.notebook import api as rho

rho.resume(sys.argv[1], yes=True, raise_budget={"tokens": 1000})
"""


def test_rho_run_and_resume_take_the_budget_from_python(project: Project, server: ScriptedServer) -> None:
    project.write("wf.star", CHAIN)
    project.write("start.py", API_RUN)
    configure(project, server)
    plan = json.loads(project.cli("plan", "wf.star", "--output", "json", env=ENV).stdout)["plan_id"]
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), **ENV}
    started = subprocess.run(
        [sys.executable, "start.py", plan], cwd=project.root, env=env, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.split()[-1]
    _wait_for(project, run_id, lambda r: r["kind"] == "run_halted")
    assert_halted_by_tokens(status(project, run_id))
    assert len(server.requests) == 2
    refused = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from rho_notebook.notebook import api as rho; rho.run({plan!r}, yes=True, max_tokens=0)",
        ],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "max_tokens=0" in refused.stderr
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME_RAISED, run_id],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    _wait_for(project, run_id, lambda r: r["kind"] == "run_completed")
    assert status(project, run_id)["outcome"] == "success" and len(server.requests) == 3
    raised = [r for r in _journal(project, run_id) if r["kind"] == "budget_set"][-1]
    assert (raised["source"], raised["max_tokens"]) == ("raise", 1000)
