"""Forks of item-graph runs at a step (issue 35, point 2; docs/fork.md): the edited value is the
step's output item, and a ``branch`` given an edited item chooses its out-edge on it.

Every step that acts is a real command step appending a line to its own side-effect file, so a
step launched again shows in its counter; the source run is made by the real CLI, the fork by the
fork's real pieces (derived plan, consent for its digest, values copied, the run's owner).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import ForkRefused
from rho_notebook.exec.item import edited_item_problem
from rho_notebook.model.fork import UNSET
from rho_notebook.runtime.owner import execute_run
from rho_notebook.service import Consent, StartRun
from rho_notebook.service.background import default_runner
from rho_notebook.service.fork import create_fork_run, derive_fork_plan
from rho_notebook.store.journal import read_journal
from rho_notebook.store.layout import StoreLayout
from tests.cli.runhelp import status
from tests.conftest import Project

REVIEW = """\
name: review
inputs:
  score: {type: integer}
steps:
  - id: start
    kind: set
    params: {fields: {score: "={{ $json.score }}"}}
  - id: measure
    kind: command
    params: {argv: [sh, -c, "echo ran >> effects/measure.log; echo 3"], into: words}
  - {id: route, kind: branch}
  - id: high
    kind: command
    params: {argv: [sh, -c, "echo ran >> effects/high.log; echo '\\"high\\"'"], into: level}
  - id: low
    kind: command
    params: {argv: [sh, -c, "echo ran >> effects/low.log; echo '\\"low\\"'"], into: level}
  - {id: done, kind: output}
edges:
  - {from: start, to: measure}
  - {from: measure, to: route}
  - {from: route, to: high, when: {field: score, op: gte, value: 50}}
  - {from: route, to: low}
  - {from: high, to: done}
  - {from: low, to: done}
"""


def counter(project: Project, name: str) -> int:
    path = project.root / "effects" / f"{name}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def source_run(project: Project, score: int) -> str:
    project.write("review.graph.yaml", REVIEW)
    (project.root / "effects").mkdir(exist_ok=True)
    ran = project.cli("run", "review.graph.yaml", "--input", f"score={score}", "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return str(json.loads(ran.stdout.splitlines()[0])["run_id"])


def fork(project: Project, run_id: str, at: str, value: Any = UNSET) -> str:
    """Fork ``run_id`` at ``at`` and run the fork to its end; the fork's run ID."""
    layout = StoreLayout(home=project.home)
    forked = derive_fork_plan(layout, run_id, at=at, value=value, via="cli")
    request = StartRun(plan=forked.plan.plan_id, consent=Consent(digest=forked.plan.graph_digest))
    fork_id = default_runner().call(create_fork_run(layout, forked, request))
    asyncio.run(execute_run(layout, fork_id, resume=False))
    return fork_id


def result_item(project: Project, run_id: str) -> dict[str, Any]:
    shown = project.cli("result", run_id, "--output", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


def test_a_branch_step_given_an_edited_item_takes_the_other_branch(project: Project) -> None:
    source = source_run(project, 70)
    nodes = status(project, source)["nodes"]
    assert (nodes["high"]["state"], nodes["low"]["state"]) == ("success", "skipped")
    assert (counter(project, "measure"), counter(project, "high"), counter(project, "low")) == (1, 1, 0)

    forked = fork(project, source, "route", {"score": 10, "words": 3})

    state = status(project, forked)
    assert state["outcome"] == "success", state
    nodes = state["nodes"]
    assert (nodes["high"]["state"], nodes["low"]["state"]) == ("skipped", "success")
    # measure was taken, route took the edit (neither launched), only the other branch ran
    assert (counter(project, "measure"), counter(project, "high"), counter(project, "low")) == (1, 1, 1)
    launched = [r["node"] for r in journal(project, forked) if r["kind"] == "process_started"]
    assert launched == ["low"]
    assert "route" not in launched
    shown = json.dumps(result_item(project, forked))
    assert '"level": "low"' in shown and '"score": 10' in shown
    # the source run is unchanged
    assert status(project, source)["nodes"]["low"]["state"] == "skipped"


def test_a_branch_forked_without_a_value_chooses_as_before(project: Project) -> None:
    source = source_run(project, 70)
    forked = fork(project, source, "route")
    nodes = status(project, forked)["nodes"]
    assert (nodes["high"]["state"], nodes["low"]["state"]) == ("success", "skipped")
    assert (counter(project, "measure"), counter(project, "high"), counter(project, "low")) == (1, 2, 0)


def test_an_edited_item_that_does_not_fit_the_step_is_refused_before_the_run(project: Project) -> None:
    source = source_run(project, 70)
    runs_before = sorted(p.name for p in (project.home / "workflows" / "runs").iterdir())
    layout = StoreLayout(home=project.home)
    with pytest.raises(ForkRefused) as missing:
        derive_fork_plan(layout, source, at="measure", value={"score": 10})
    assert missing.value.node == "measure" and missing.value.fields == ("words",)
    assert "'words'" in missing.value.message
    with pytest.raises(ForkRefused) as not_item:
        derive_fork_plan(layout, source, at="route", value=[1, 2])
    assert "JSON object" in not_item.value.message and not_item.value.node == "route"
    assert sorted(p.name for p in (project.home / "workflows" / "runs").iterdir()) == runs_before
    assert counter(project, "measure") == 1


def test_edited_items_are_checked_as_the_steps_own_results(project: Project) -> None:
    project.write("review.graph.yaml", REVIEW)
    graph = project.plan("review.graph.yaml", {"score": 1}).graph
    assert edited_item_problem(graph, "route", {"score": 1}) is None
    assert edited_item_problem(graph, "measure", {"score": 1, "words": 2}) is None
    problem = edited_item_problem(graph, "high", {"score": 1})
    assert problem is not None and problem[1] == "level"
    big = {"text": "x" * (graph.items.item_bytes if graph.items else 0)}
    problem = edited_item_problem(graph, "route", big)
    assert problem is not None and "item cap" in problem[0]
    assert Path(project.root / "review.graph.yaml").exists()


def test_the_fork_verb_takes_the_other_branch(project: Project) -> None:
    source = source_run(project, 70)

    forked = project.cli(
        "fork", source, "--at", "route", "--value", '{"score": 5, "words": 3}', "--yes", "--output", "jsonl"
    )

    assert forked.returncode == 0, forked.stdout + forked.stderr
    fork_id = str(json.loads(next(line for line in forked.stdout.splitlines() if line.startswith("{")))["run_id"])
    nodes = status(project, fork_id)["nodes"]
    assert (nodes["route"]["state"], nodes["high"]["state"], nodes["low"]["state"]) == ("success", "skipped", "success")
    assert (counter(project, "measure"), counter(project, "high"), counter(project, "low")) == (1, 1, 1)
