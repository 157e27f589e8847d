"""Budgets written in the source (issue 34, point 2): ``define(..., budget = {...})``, a script's
``BUDGET = {...}``; covered by the graph digest when present, absent from it otherwise (every
existing plan keeps its digest); their problems are diagnostics. Real Starlark and real plans."""

from __future__ import annotations

import pytest

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.model.budget_spec import BudgetSpec
from rho_notebook.model.canonical import graph_bytes, graph_digest
from tests.conftest import Project
from tests.unit.test_dask_syntax import DIGEST_BEFORE_ISSUE_20, fixed_graph
from tests.unit.test_flow_plan import FLOW, plan_flow

NODE = 'command(name = "a", argv = ["true"], cwd = ".", timeout_seconds = 10, max_output_bytes = 100)'


def entry(define_extra: str = "") -> str:
    return (
        f"def build(inputs):\n    return workflow(name = 'w', nodes = [{NODE}])\n\n"
        f"WORKFLOW = define(inputs = {{}}, build = build{define_extra})\n"
    )


def test_a_graph_without_a_budget_keeps_the_digest_it_had_before_budgets() -> None:
    graph = fixed_graph()
    assert graph.budget is None and all(getattr(n, "budget", None) is None for n in graph.nodes)
    assert graph_digest(graph) == DIGEST_BEFORE_ISSUE_20
    assert b"budget" not in graph_bytes(graph)


def test_a_budget_is_covered_by_the_digest() -> None:
    graph = fixed_graph()
    budgeted = graph.model_copy(update={"budget": BudgetSpec(tokens=1000)})
    other = graph.model_copy(update={"budget": BudgetSpec(tokens=2000)})
    assert len({graph_digest(graph), graph_digest(budgeted), graph_digest(other)}) == 3


def test_define_budget_is_frozen_into_the_plan(project: Project) -> None:
    project.write("plain.star", entry())
    project.write("budgeted.star", entry(', budget = {"tokens": 500, "cost": "0.25", "wall": 60}'))
    plain = project.plan("plain.star", store=False)
    budgeted = project.plan("budgeted.star", store=False)
    assert plain.graph.budget is None and b"budget" not in graph_bytes(plain.graph)
    assert budgeted.graph.budget == BudgetSpec(tokens=500, cost_microusd=250_000, wall_seconds=60)
    assert plain.graph_digest != budgeted.graph_digest
    limits = budgeted.graph.budget.limits()
    assert (limits.max_tokens, limits.max_cost_usd, limits.max_wall_seconds) == (500, 0.25, 60.0)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        ('{"apples": 3}', "budget key 'apples' is not a limit"),
        ('{"tokens": 0}', "give a number above 0"),
        ('{"cost": "cheap"}', "give a number above 0"),
        ('"lots"', "a budget is a dict"),
    ],
)
def test_a_bad_define_budget_is_a_diagnostic(project: Project, budget: str, expected: str) -> None:
    project.write("wf.star", entry(f", budget = {budget}"))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star", store=False)
    (found,) = caught.value.diagnostics()
    assert found.rule == "define.budget" and expected in found.message, found.render()


SCRIPT = 'from rho_notebook.script import emit_output\n\nBUDGET = {"tokens": 900, "wall": 30}\n\nemit_output(1)\n'


def test_a_script_and_a_flow_declare_budget_like_inputs(project: Project) -> None:
    project.write("s.py", SCRIPT)
    assert project.plan("s.py", store=False).graph.budget == BudgetSpec(tokens=900, wall_seconds=30)
    project.write("plain.py", SCRIPT.replace('BUDGET = {"tokens": 900, "wall": 30}\n', ""))
    assert project.plan("plain.py", store=False).graph.budget is None
    project.home.mkdir(parents=True, mode=0o700)
    (project.home / "settings.json").write_text('{"providers": {"p": {"type": "openai"}}, "default_provider": "p"}')
    project.write("echo.py", 'BUDGET = {"cost": 0.25}\n' + FLOW)
    plan = plan_flow(project, "echo.py", "Echo", {"prompt": "hello"})
    assert plan.graph.budget == BudgetSpec(cost_microusd=250_000)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [("BUDGET = {'tokens': -1}", "give a number above 0"), ("BUDGET = dict(tokens=5)", "literal dict")],
)
def test_a_bad_script_budget_is_a_diagnostic(project: Project, budget: str, expected: str) -> None:
    project.write("s.py", SCRIPT.replace('BUDGET = {"tokens": 900, "wall": 30}', budget))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("s.py", store=False)
    (found,) = caught.value.diagnostics()
    assert found.rule == "script.budget" and expected in found.message and found.line == 3, found.render()
