"""A warm process's ``plan`` after ``validate`` of the same sources (issue 31) takes the command
nodes and the canonical bytes the validation made, but only where freezing again gives the same
graph: every program is resolved and hashed again, and a changed one is frozen anew. The plan is
always the one a fresh (cold) planning gives, and kept nodes never skip a planning limit.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator

import pytest

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.model.graph import CommandNode
from rho_notebook.planning.plan import to_graph
from rho_notebook.service.planning import use_warm_planner
from rho_notebook.source.evaluate import forget_evaluations
from rho_notebook.source.limits import Limits, load_limits
from tests.conftest import Project

TOOL = "#!/bin/sh\necho {version}\n"
ENTRY = """
def build(inputs):
    return workflow(name = "reuse", nodes = [
        command(name = "t" + str(i), argv = ["./tool.sh", "run", str(i)], timeout_seconds = 5, max_output_bytes = 10)
        for i in range(3)
    ] + [command(name = "plain", argv = ["true"], timeout_seconds = 5, max_output_bytes = 10)])

WORKFLOW = define(build = build)
"""


@pytest.fixture
def warm() -> Iterator[None]:
    use_warm_planner()
    try:
        yield
    finally:
        use_warm_planner(False)
        forget_evaluations()


def _cold_digest(project: Project) -> str:
    """The digest a fresh planning (no warm worker, nothing kept) gives now."""
    use_warm_planner(False)
    forget_evaluations()
    try:
        return project.plan("wf.star", store=False).manifest.graph_digest
    finally:
        use_warm_planner()


def _tool_digest(project: Project) -> str:
    return "sha256:" + hashlib.sha256((project.root / "tool.sh").read_bytes()).hexdigest()


def test_plan_after_validate_takes_the_validated_nodes_and_digest(project: Project, warm: None) -> None:
    project.write("tool.sh", TOOL.format(version=1), mode=0o755)
    project.write("wf.star", ENTRY)
    validated = project.plan("wf.star", store=False)
    planned = project.plan("wf.star")
    assert all(a is b for a, b in zip(planned.graph.nodes, validated.graph.nodes, strict=True))
    assert planned.manifest.graph_digest == validated.manifest.graph_digest == _cold_digest(project)


def test_a_program_changed_between_validate_and_plan_is_frozen_anew(project: Project, warm: None) -> None:
    project.write("tool.sh", TOOL.format(version=1), mode=0o755)
    project.write("wf.star", ENTRY)
    validated = project.plan("wf.star", store=False)
    project.write("tool.sh", TOOL.format(version=2), mode=0o755)
    planned = project.plan("wf.star")
    tools = [node for node in planned.graph.nodes if node.name.startswith("t")]
    assert [node.executable.file.sha256 for node in tools if isinstance(node, CommandNode)] == [
        _tool_digest(project)
    ] * 3
    assert planned.graph.node("plain") is validated.graph.node("plain")  # its program did not change
    assert planned.manifest.graph_digest != validated.manifest.graph_digest
    assert planned.manifest.graph_digest == _cold_digest(project)


def _with_limit(limits: Limits, name: str, value: int) -> Limits:
    budgets = {
        key: budget.model_copy(update={"limit": value}) if key == name else budget
        for key, budget in limits.budgets.items()
    }
    return limits.model_copy(update={"budgets": budgets})


def test_kept_nodes_never_skip_a_planning_limit(project: Project, warm: None) -> None:
    project.write("tool.sh", TOOL.format(version=1), mode=0o755)
    project.write("wf.star", ENTRY)
    request = project.service.request_for(project.root / "wf.star", inputs={}, workspace=project.workspace)
    limits = load_limits()
    asyncio.run(to_graph(request, limits=limits))  # the nodes are kept with the evaluation
    with pytest.raises(InvalidWorkflow) as raised:
        asyncio.run(to_graph(request, limits=_with_limit(limits, "argv_items", 2)))
    found = raised.value.diagnostics()
    assert sorted(d.message.rsplit("'", 2)[1] for d in found if d.rule == "limit.argv_items") == ["t0", "t1", "t2"]
    assert asyncio.run(to_graph(request, limits=limits)).graph.edge_count() == 0  # and the default still plans
