"""Validate measures what plan would build before building it (issue 28, finding 5): loop
expansion, edge counts and the encoded size are checked against the planning budgets first, with
the same findings in validate and plan, and a refused document is never composed or expanded."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.planning import item_plan, itemgraph
from rho_notebook.planning.item_size import frozen_size, loop_bodies
from rho_notebook.planning.itemgraph import lint_graph, load_graph
from tests.conftest import Project
from tests.unit.test_item_graph_runs import LOOP

FILE = "g.graph.yaml"


def looped(steps: int, rounds: int) -> str:
    lines = ["name: many", "steps:"]
    lines += [f"  - {{id: s{i}, kind: set, params: {{fields: {{x: {i}}}}}}}" for i in range(steps)]
    lines.append("edges:")
    lines += [f"  - {{from: s{i}, to: s{i + 1}}}" for i in range(steps - 1)]
    lines.append(f"  - {{from: s{steps - 1}, to: s0, loop: {{max_rounds: {rounds}}}}}")
    return "\n".join(lines) + "\n"


def many_edges(count: int) -> str:
    lines = ["name: wide", "steps:", "  - {id: a, kind: set, params: {fields: {x: 1}}}", "  - {id: b, kind: output}"]
    lines.append("edges:")
    lines += ["  - {from: a, to: b}"] * count
    return "\n".join(lines) + "\n"


def rules(text: str) -> list[tuple[str, str]]:
    _, found = lint_graph(text, display=FILE)
    return [(f.rule, f.message) for f in found]


def test_a_looped_graph_over_the_node_budget_is_refused_by_validate_before_it_is_expanded(
    monkeypatch: pytest.MonkeyPatch, project: Project
) -> None:
    found = rules(looped(200, 1000))
    assert found == [
        (
            "limit.node_count",
            "planning budget 'node_count' exceeded: accepted limit 2000, measured 200000 after its loops are "
            "expanded into rounds",
        ),
        (
            "limit.edge_count",
            "planning budget 'edge_count' exceeded: accepted limit 20000, measured 199999 after its loops are "
            "expanded into rounds",
        ),
    ]

    def expand(*args: Any, **kw: Any) -> Any:
        raise AssertionError("plan expanded a graph that its budgets refuse")

    monkeypatch.setattr(item_plan, "_freeze", expand)
    project.write(FILE, looped(200, 1000))
    with pytest.raises(InvalidWorkflow) as refused:
        project.plan(FILE)
    assert [(d.rule, d.message) for d in refused.value.diagnostics()] == found  # the same findings


def test_too_many_edges_are_counted_without_building_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the document was composed although its edge count is over budget")

    monkeypatch.setattr(itemgraph, "_read", build)
    _, found = lint_graph(many_edges(20_001), display=FILE)
    assert [(f.rule, f.message, f.line) for f in found] == [
        ("limit.edge_count", "planning budget 'edge_count' exceeded: accepted limit 20000, measured 20001", 6)
    ]


def test_an_encoding_over_the_graph_budget_is_refused_from_a_lower_bound() -> None:
    big = "x" * 80_000
    text = looped(2, 500).replace("fields: {x: 0}", f"fields: {{x: {big}}}")
    found = rules(text)
    assert [rule for rule, _ in found] == ["limit.graph_bytes"]
    assert "measured at least 40" in found[0][1] and "after its loops are expanded" in found[0][1]


def test_loops_that_share_a_step_are_refused_by_validate_too() -> None:
    text = textwrap.dedent("""\
        name: twice
        steps:
          - {id: a, kind: set, params: {fields: {n: 1}}}
          - {id: b, kind: branch}
        edges:
          - {from: a, to: b}
          - {from: b, to: a, loop: {max_rounds: 2}, when: {field: n, op: lt, value: 0}}
          - {from: b, to: b, loop: {max_rounds: 2}, when: {field: n, op: lt, value: 0}}
        """)
    assert rules(text) == [("graph.loop", "step 'b' is in two loops; loops may not share steps")]


def test_the_measured_size_is_what_planning_builds(project: Project) -> None:
    graph = load_graph(LOOP, display=FILE)
    size = frozen_size(graph, loop_bodies(graph))
    project.write(FILE, LOOP)
    plan = project.plan(FILE, {"limit": 0})
    assert size.nodes == len(plan.graph.nodes)
    assert size.edges == sum(len(node.sources) for node in plan.graph.nodes)  # type: ignore[attr-defined]


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x80", "\x9f"])
def test_a_control_character_is_a_located_finding_not_a_reader_error(char: str) -> None:
    _, found = lint_graph(f"name: ok\nsteps: [a{char}]\n", display=FILE)
    assert [(f.rule, f.line, f.column) for f in found] == [("graph.yaml", 2, 10)]
    assert f"U+{ord(char):04X}" in found[0].message
