"""Runaway Starlark stops inside the worker's budgets, with the budget named; the caller lives on."""

from __future__ import annotations

import os
import resource
import time

import pytest

from rho_notebook.errors import LimitError
from rho_notebook.source.limits import load_limits
from tests.conftest import Project, star
from tests.unit.budget_sources import ENDLESS, GREEDY, HUGE_STRING


def _assert_budget(err: LimitError, budgets: set[str]) -> None:
    assert err.budget in budgets
    rendered = str(err)
    assert f"'{err.budget}'" in rendered and "accepted limit" in rendered and "measured" in rendered
    if err.budget == "evaluator_address_space":
        # the worker reports the address space in use when an allocation failed
        assert err.measured > err.limit // 2
    elif err.budget != "evaluator_wall_ms":
        assert err.measured > err.limit


def test_endless_loop_stops_on_work_budget(project: Project) -> None:
    project.write("wf.star", ENDLESS)
    started = time.monotonic()
    with pytest.raises(LimitError) as caught:
        project.plan("wf.star")
    elapsed = time.monotonic() - started
    _assert_budget(caught.value, {"evaluator_ticks", "evaluator_wall_ms"})
    assert elapsed < load_limits().limit("evaluator_wall_ms") / 1000 + 5
    assert project.stored_plans() == []


@pytest.mark.parametrize("source", [GREEDY, HUGE_STRING], ids=["growing-list", "huge-string"])
def test_unbounded_allocation_stops_on_heap_budget(project: Project, source: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    project.write("wf.star", source)
    with pytest.raises(LimitError) as caught:
        project.plan("wf.star")
    _assert_budget(caught.value, {"evaluator_address_space", "evaluator_ticks", "evaluator_wall_ms", "string_bytes"})
    # the caller's own memory did not take the hit: the allocation happened in the worker
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200 * 1024
    assert project.stored_plans() == []


def test_caller_keeps_working_after_a_runaway(project: Project) -> None:
    project.write("bad.star", ENDLESS)
    with pytest.raises(LimitError):
        project.plan("bad.star")
    project.write("good.star", star('return workflow(name = "ok", nodes = [])'))
    assert project.plan("good.star").manifest.workflow == "ok"
    assert os.getpid() > 0


def test_limit_error_names_budget_for_graph_counts(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            'return workflow(name = "a", nodes = [command(name = "n" + str(i), argv = ["true"], needs = [], timeout_seconds = 1, max_output_bytes = 1) for i in range(2001)])'
        ),
    )
    with pytest.raises(Exception, match=r"planning budget 'node_count' exceeded: accepted limit 2000, measured 2001"):
        project.plan("wf.star")


def test_receipt_has_every_budget_the_planner_uses() -> None:
    limits = load_limits()
    for name in (
        "source_bytes",
        "module_count",
        "module_depth",
        "evaluator_ticks",
        "evaluator_wall_ms",
        "evaluator_address_space",
        "node_count",
        "edge_count",
        "condition_depth",
        "schema_depth",
        "graph_bytes",
        "template_bytes",
        "argv_bytes",
        "timeout_seconds",
        "max_output_bytes",
        "input_bytes",
    ):
        assert limits.limit(name) > 0
