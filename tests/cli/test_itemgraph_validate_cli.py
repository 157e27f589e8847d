"""``rho-notebook validate FILE.graph.yaml`` through the real CLI: an item-graph document is
validated (nothing runs: item graphs are validation only in this version)."""

from __future__ import annotations

import json

from tests.conftest import Project
from tests.unit.test_itemgraph_validate import TRIAGE


def test_validate_accepts_the_triage_graph_and_refuses_a_mapping_without_equals(project: Project) -> None:
    project.write("graphs/triage.graph.yaml", TRIAGE)
    result = project.cli("validate", "graphs/triage.graph.yaml")
    assert result.returncode == 0, result
    assert "valid: the item graph graphs/triage.graph.yaml passes validate" in result.stdout
    assert "nothing was stored" in result.stdout and "runs it" in result.stdout

    project.write("graphs/bad.graph.yaml", TRIAGE.replace('"=ticket {{', '"ticket {{'))
    result = project.cli("validate", "graphs/bad.graph.yaml", "--output", "json")
    assert result.returncode == 1, result
    data = json.loads(result.stdout)
    assert data["valid"] is False
    (found,) = data["diagnostics"]
    assert (found["rule"], found["step"], found["field"], found["line"], found["column"]) == (
        "graph.mapping_without_equals",
        "start",
        "params.fields.label",
        5,
        82,
    )

    result = project.cli("validate", "graphs/bad.graph.yaml")
    assert result.returncode == 1
    assert "graphs/bad.graph.yaml:5:82: error[graph.mapping_without_equals]: step 'start'" in result.stderr


def test_validate_checks_inputs_against_the_graphs_declaration(project: Project) -> None:
    project.write("triage.graph.yaml", TRIAGE)
    assert project.cli("validate", "triage.graph.yaml", "--input", "score=70").returncode == 0
    result = project.cli("validate", "triage.graph.yaml", "--input", 'score="high"')
    assert result.returncode == 1
    assert "input 'score' must be an integer" in result.stderr
