"""A warm process keeps its last evaluations (issue 31): ``validate`` then ``plan`` of unchanged
sources evaluates once. A kept evaluation is never stale: a changed entry, a changed or removed
loaded module, or other inputs are evaluated again, and the plan is what a fresh evaluation gives.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rho_notebook.errors import SourceError
from rho_notebook.service.planning import use_warm_planner
from rho_notebook.source.evaluate import forget_evaluations
from rho_notebook.source.warm import warm_pool
from tests.conftest import Project

LIB = 'PREFIX = "{prefix}"\n'
ENTRY = """
load("//lib.star", "PREFIX")

def build(inputs):
    return workflow(name = "kept", nodes = [
        command(name = PREFIX + str(i), argv = ["true"], timeout_seconds = 5, max_output_bytes = 10)
        for i in range(inputs["count"])
    ])

WORKFLOW = define(inputs = {"count": input.integer(default = 2)}, build = build)
"""


@pytest.fixture
def warm() -> Iterator[None]:
    use_warm_planner()
    try:
        yield
    finally:
        use_warm_planner(False)
        forget_evaluations()


def _idle_pids() -> list[int]:
    pool = warm_pool()
    if pool is None:
        raise AssertionError("the warm switch is off")
    return pool.idle_pids()


def _kill(pid: int) -> None:
    """Kill the idle warm worker and wait until it has exited (a zombie counts as exited)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
        assert time.monotonic() < deadline, f"worker {pid} still runs"
        time.sleep(0.01)


def _names(project: Project, inputs: dict[str, int] | None = None, *, store: bool = False) -> list[str]:
    return [node.name for node in project.plan("wf.star", inputs, store=store).graph.nodes]


def test_plan_after_validate_of_unchanged_sources_does_not_evaluate_again(project: Project, warm: None) -> None:
    project.write("lib.star", LIB.format(prefix="a"))
    project.write("wf.star", ENTRY)
    validated = project.plan("wf.star", store=False)
    [pid] = _idle_pids()
    _kill(pid)  # an evaluation would need a worker: the pool would replace the dead one
    planned = project.plan("wf.star")
    assert _idle_pids() == [pid]  # no worker was asked
    assert planned.manifest.graph_digest == validated.manifest.graph_digest
    assert [s.label for s in planned.manifest.sources] == [s.label for s in validated.manifest.sources]


def test_a_changed_loaded_module_is_evaluated_again(project: Project, warm: None) -> None:
    project.write("lib.star", LIB.format(prefix="a"))
    project.write("wf.star", ENTRY)
    assert _names(project) == ["a0", "a1"]
    project.write("lib.star", LIB.format(prefix="b"))
    assert _names(project) == ["b0", "b1"]
    project.write("lib.star", LIB.format(prefix="a"))
    assert _names(project) == ["a0", "a1"]


def test_other_inputs_are_evaluated_again(project: Project, warm: None) -> None:
    project.write("lib.star", LIB.format(prefix="a"))
    project.write("wf.star", ENTRY)
    assert _names(project, {"count": 1}) == ["a0"]
    assert _names(project, {"count": 3}) == ["a0", "a1", "a2"]
    assert _names(project) == ["a0", "a1"]
    assert _names(project, {"count": 1}) == ["a0"]


def test_a_removed_loaded_module_is_the_usual_error(project: Project, warm: None) -> None:
    project.write("lib.star", LIB.format(prefix="a"))
    project.write("wf.star", ENTRY)
    assert _names(project) == ["a0", "a1"]
    (project.root / "lib.star").unlink()
    with pytest.raises(SourceError) as caught:
        project.plan("wf.star", store=False)
    assert caught.value.diagnostics()[0].file == "wf.star"


def test_a_kept_evaluation_plans_what_a_fresh_evaluation_plans(project: Project, warm: None) -> None:
    project.write("lib.star", LIB.format(prefix="a"))
    project.write("wf.star", ENTRY)
    project.plan("wf.star", store=False)
    kept = project.plan("wf.star", store=False)  # from the kept evaluation
    use_warm_planner(False)
    fresh = project.plan("wf.star", store=False)  # a fresh worker, as the CLI plans
    assert kept.manifest.graph_digest == fresh.manifest.graph_digest
    assert kept.graph == fresh.graph
    assert kept.manifest.inputs == fresh.manifest.inputs


RICH = """
def build(inputs):
    return workflow(name = "rich", concurrency = {"total": 2, "command": 1}, nodes = [
        command(name = "a", argv = ["true", "x"], timeout_seconds = 5, max_output_bytes = 10,
                resources = {"z": 1, "a": 2},
                output = schema.stdout_json(schema.record({"b": schema.string(), "a": schema.integer()}))),
        command(name = "b", argv = ["echo", output("a", ["b"])], needs = ["a"], timeout_seconds = 5,
                max_output_bytes = 10, when = condition.all([
                    condition.equals(status("a"), "success"),
                    condition.is_one_of(output("a", ["a"]), [1, 2]),
                ])),
        shell(name = "c", executable = "sh", command = "echo hi", needs = ["b"], timeout_seconds = 5,
              max_output_bytes = 10),
    ])

WORKFLOW = define(inputs = {}, build = build)
"""


def test_planning_leaves_a_kept_evaluation_as_it_was(project: Project, warm: None) -> None:
    """Conditions, schemas, templates and resources: planned three times from one kept evaluation,
    the plans equal a fresh evaluation's (nothing planning does changes what is kept)."""
    project.write("wf.star", RICH)
    plans = [project.plan("wf.star", store=False) for _ in range(3)]
    use_warm_planner(False)
    fresh = project.plan("wf.star", store=False)
    for plan in plans:
        assert plan.graph == fresh.graph
        assert plan.manifest.graph_digest == fresh.manifest.graph_digest
