"""Budgets of single steps (issue 34, point 2): a script's ``run_model(..., budget={...})``, an item
graph's model step with ``budget:``, and the budgets ``status`` shows while they are set; through
real ``rho-notebook`` processes against a local OpenAI-compatible server on 127.0.0.1.

As in tests/cli/test_budget.py, every call answers with 11 input and 7 output tokens (18) and each
request's output is capped at 10 tokens by the provider settings.
"""

from __future__ import annotations

from typing import Any

import pytest

from rho_notebook.model.budget_spec import BudgetSpec
from rho_notebook.model.canonical import graph_bytes
from tests.agents.fakeserver import ScriptedServer
from tests.cli.runhelp import status
from tests.cli.test_budget import ENV, ITEMS, _journal, _only_run, configure, run_json, server
from tests.conftest import Project

__all__ = ["server"]  # the fixture, shared with tests/cli/test_budget.py

STEPS = """\
from rho_notebook.script import emit_output, run_model


def ask(n, **extra):
    return run_model([{"role": "user", "content": f"question {n}"}], provider="local", model="test-model", step_id=f"ask-{n}", **extra)


first = ask(1)
second = ask(2, budget={"tokens": 30})
third = ask(3)
emit_output({"ok": [first.ok, second.ok, third.ok]})
"""
"""ask-2's budget (30 tokens) lets its first call go (0 + 10 <= 30) and would refuse a second;
with ``{"tokens": 5}`` its first call could output 10: refused before it is sent."""


def _step_budgets(project: Project, run_id: str) -> list[tuple[str, str | None, Any]]:
    return [
        (r["source"], r.get("node"), r.get("max_tokens"))
        for r in _journal(project, run_id)
        if r["kind"] == "budget_set"
    ]


def test_a_step_budget_that_one_call_could_pass_halts_before_it_and_a_step_raise_finishes(
    project: Project, server: ScriptedServer
) -> None:
    configure(project, server)
    project.write("steps.py", STEPS.replace('{"tokens": 30}', '{"tokens": 5}'))
    result, _ = run_json(project, "run", "steps.py", "--yes")
    assert result.returncode == 1, result.stderr
    run_id = _only_run(project)
    assert len(server.requests) == 1  # ask-1 only: ask-2's call was never sent
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision", state
    (halt,) = state["halted"]
    assert halt["step"] == "ask-2" and "budget ask-2:tokens" in halt["why"] and "(5)" in halt["why"], halt
    assert "--raise-budget ask-2:tokens=N" in halt["why"]
    assert _step_budgets(project, run_id) == [("step", "ask-2", 5)]
    text = project.cli("status", run_id, env=ENV).stdout
    assert "--raise-budget ask-2:tokens=N" in text and "--decide STEP=skip" in text, text
    assert "budget     ask-2: tokens 0 of 5 (set by step)" in text, text
    assert state["budgets"] == [
        {"node": "ask-2", "source": "step", "max_tokens": 5, "spent_tokens": 0, "spent_cost_usd": 0.0}
    ]

    done, _ = run_json(project, "resume", run_id, "--yes", "--raise-budget", "ask-2:tokens=100")
    assert done.returncode == 0, done.stderr
    final = status(project, run_id)
    assert final["outcome"] == "success" and final["output"] == {"ok": [True, True, True]}, final
    assert len(server.requests) == 3  # ask-1 replayed; ask-2 and ask-3 once each
    # the raise stands over the source's 5 (not journaled again on resume)
    assert _step_budgets(project, run_id) == [("step", "ask-2", 5), ("raise", "ask-2", 100)]


def test_a_step_halted_by_its_budget_can_be_skipped(project: Project, server: ScriptedServer) -> None:
    configure(project, server)
    project.write("steps.py", STEPS.replace('{"tokens": 30}', '{"tokens": 5}'))
    run_json(project, "run", "steps.py", "--yes")
    run_id = _only_run(project)
    skipped, _ = run_json(project, "resume", run_id, "--yes", "--decide", "ask-2=skip")
    assert skipped.returncode == 0, skipped.stderr
    final = status(project, run_id)
    assert final["outcome"] == "success" and final["output"] == {"ok": [True, False, True]}, final
    assert len(server.requests) == 2  # ask-1 replayed, ask-2 skipped, ask-3 sent


def test_a_step_budget_within_its_calls_leaves_the_run_alone(project: Project, server: ScriptedServer) -> None:
    configure(project, server)
    project.write("steps.py", STEPS)
    result, _ = run_json(project, "run", "steps.py", "--yes")
    assert result.returncode == 0, result.stderr
    run_id = _only_run(project)
    assert status(project, run_id)["output"] == {"ok": [True, True, True]}
    assert len(server.requests) == 3
    assert _step_budgets(project, run_id) == [("step", "ask-2", 30)]


BAD = """\
from rho_notebook.script import emit_output, run_model

try:
    run_model([{"role": "user", "content": "q"}], provider="local", model="test-model", step_id="ask", budget={"apples": 3})
except ValueError as err:
    emit_output({"refused": str(err)})
"""


def test_a_bad_step_budget_is_refused_naming_the_step(project: Project, server: ScriptedServer) -> None:
    configure(project, server)
    project.write("bad.py", BAD)
    result, _ = run_json(project, "run", "bad.py", "--yes")
    assert result.returncode == 0, result.stderr
    refused = status(project, _only_run(project))["output"]["refused"]
    assert "'ask'" in refused and "apples" in refused and "tokens, cost or wall" in refused, refused
    assert len(server.requests) == 0


def test_a_step_cost_budget_with_an_unpriced_model_is_refused_naming_it(
    project: Project, server: ScriptedServer
) -> None:
    configure(project, server)
    project.write("bad.py", BAD.replace('{"apples": 3}', '{"cost": 0.1}'))
    result, _ = run_json(project, "run", "bad.py", "--yes")
    assert result.returncode == 0, result.stderr
    refused = status(project, _only_run(project))["output"]["refused"]
    assert "'ask'" in refused and "local/test-model" in refused and "prices" in refused, refused
    assert len(server.requests) == 0


PRICES = {"local/test-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
"""33 input and 21 output tokens over three calls cost $0.000075; one call $0.000025."""


def test_status_shows_the_run_budget_and_its_spend_while_one_is_set(project: Project, server: ScriptedServer) -> None:
    configure(project, server, prices=PRICES)
    project.write("steps.py", STEPS)
    result, _ = run_json(project, "run", "steps.py", "--yes", "--max-tokens", "1000", "--max-cost", "0.5")
    assert result.returncode == 0, result.stderr
    run_id = _only_run(project)
    run, step = status(project, run_id)["budgets"]
    assert run == {
        "node": None,
        "source": "run",
        "max_tokens": 1000,
        "max_cost_usd": 0.5,
        "spent_tokens": 54,
        "spent_cost_usd": pytest.approx(0.000075),
    }
    assert step == {
        "node": "ask-2",
        "source": "step",
        "max_tokens": 30,
        "spent_tokens": 18,
        "spent_cost_usd": pytest.approx(0.000025),
    }
    text = project.cli("status", run_id, env=ENV).stdout
    assert "budget     run: tokens 54 of 1000, cost $0.000075 of $0.5 (set by run)" in text, text
    assert "budget     ask-2: tokens 18 of 30 (set by step)" in text, text


def test_status_of_a_run_without_a_budget_has_no_budgets(project: Project, server: ScriptedServer) -> None:
    configure(project, server)
    project.write("steps.py", STEPS.replace(', budget={"tokens": 30}', ""))
    run_json(project, "run", "steps.py", "--yes")
    run_id = _only_run(project)
    assert "budgets" not in status(project, run_id)
    assert "budget " not in project.cli("status", run_id, env=ENV).stdout


# -- an item graph's model step with ``budget:`` -------------------------------------------------------


def _budgeted(budget: str) -> str:
    return ITEMS.replace(
        """    params: {provider: local, model: test-model, prompt: "=Title {{ $json.b }}", into: c}""",
        f"""    params: {{provider: local, model: test-model, prompt: "=Title {{{{ $json.b }}}}", into: c}}
    budget: {budget}""",
    )


def test_an_item_graph_step_budget_halts_that_step_and_a_step_raise_finishes(
    project: Project, server: ScriptedServer
) -> None:
    configure(project, server)
    project.write("g.graph.yaml", _budgeted("{tokens: 5}"))
    result, _ = run_json(project, "run", "g.graph.yaml", "--yes", "--input", 'text="printer on fire"')
    assert result.returncode == 1, result.stderr
    run_id = _only_run(project)
    assert len(server.requests) == 2  # three's call could output 10 tokens: more than its 5
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision" and state["nodes"]["three"]["state"] == "pending", state
    (halt,) = state["halted"]
    assert halt["step"] == "three" and "budget three:tokens" in halt["why"], halt
    assert "--raise-budget three:tokens=N" in halt["why"]
    assert _step_budgets(project, run_id) == [("workflow", "three", 5)]
    done, _ = run_json(project, "resume", run_id, "--yes", "--raise-budget", "three:tokens=100")
    assert done.returncode == 0, done.stderr
    assert status(project, run_id)["outcome"] == "success" and len(server.requests) == 3


def test_an_item_graph_step_budget_is_in_the_digest_only_when_given(project: Project) -> None:
    project.write("plain.graph.yaml", ITEMS)
    project.write("budgeted.graph.yaml", _budgeted('{tokens: 500, cost: "0.25"}'))
    plain = project.plan("plain.graph.yaml", {"text": "x"}, store=False)
    budgeted = project.plan("budgeted.graph.yaml", {"text": "x"}, store=False)
    assert b"budget" not in graph_bytes(plain.graph)
    node = next(n for n in budgeted.graph.nodes if n.name == "three")
    assert node.budget == BudgetSpec(tokens=500, cost_microusd=250_000)
    assert plain.graph_digest != budgeted.graph_digest


@pytest.mark.parametrize(
    ("budget", "expected"),
    [("{apples: 3}", "apples"), ("{tokens: 0}", "tokens"), ("lots", "budget"), ('{cost: "cheap"}', "US dollars")],
)
def test_a_bad_item_graph_step_budget_is_a_diagnostic(project: Project, budget: str, expected: str) -> None:
    project.write("g.graph.yaml", _budgeted(budget))
    result = project.cli("validate", "g.graph.yaml")
    assert result.returncode != 0
    assert "g.graph.yaml:" in result.stderr + result.stdout and expected in result.stderr + result.stdout, (
        result.stdout + result.stderr
    )


def test_max_cost_on_an_item_graph_whose_model_step_has_no_price_is_refused_at_start(
    project: Project, server: ScriptedServer
) -> None:
    """Item-graph model steps name their model in the step, not in an agent: the start-up check
    looks there too, so the run is refused before anything is created or asked."""
    configure(project, server)
    project.write("g.graph.yaml", ITEMS)
    result = project.cli("run", "g.graph.yaml", "--yes", "--input", 'text="x"', "--max-cost", "0.5", env=ENV)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "local/test-model" in result.stderr
    assert project.cli("runs", "--output", "json", env=ENV).stdout.strip() == "[]"  # nothing was created
    assert server.requests == []
