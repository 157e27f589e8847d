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


def test_validate_refuses_what_plan_refuses_in_the_steps_at_the_step(project: Project) -> None:
    """An unknown agent, a program not on PATH, a read-only step with a writing agent: ``plan``
    refuses them, so ``validate`` does too (docs/planning.md: both resolve agents and freeze
    executables), at the step's parameters, each once, with its own rule and no nested prefix."""
    low = "{id: low, kind: set, params: {fields: {level: low}}}"
    assert low in TRIAGE
    cases = {
        "{id: low, kind: agent, params: {agent: nosuch, prompt: '=hi'}}": (
            "error[agent.unknown]: step 'low': unknown agent 'nosuch'; available agents:"
        ),
        "{id: low, kind: command, params: {argv: [no-such-program-x], into: x}}": (
            "error[resolve]: step 'low': executable 'no-such-program-x' was not found on PATH"
        ),
        "{id: low, kind: agent, params: {agent: worker, prompt: '=hi'}}": (
            "error[agent.access]: step 'low' asks for access: read_only but agent 'worker' is not read-only"
        ),
    }
    for step, said in cases.items():
        project.write("g.graph.yaml", TRIAGE.replace(low, step))
        line = next(n for n, text in enumerate(TRIAGE.splitlines(), start=1) if low in text)
        planned = project.cli("plan", "g.graph.yaml", "--input", "score=1")
        checked = project.cli("validate", "g.graph.yaml")
        assert (planned.returncode, checked.returncode) == (1, 1), (planned, checked)
        for result in (planned, checked):
            assert f"g.graph.yaml:{line}:" in result.stderr and said in result.stderr, result.stderr
            assert "error[resolve]: step 'low': error[" not in result.stderr
            assert "node 'low'" not in result.stderr
        assert "invalid: g.graph.yaml (1 error)" in checked.stdout
    shown = json.loads(project.cli("validate", "g.graph.yaml", "--output", "json").stdout)
    assert [(d["rule"], d["line"]) for d in shown["diagnostics"]] == [("agent.access", line)]


def test_a_code_step_that_cannot_parse_is_refused_before_the_run(project: Project) -> None:
    """Before, validate and plan took a code step whose source does not parse and the run failed
    at that step; now both refuse it at the step's ``source``, naming the line inside the source,
    for a code step and an aggregate's inner one, and a good source still runs."""
    low = "{id: low, kind: set, params: {fields: {level: low}}}"
    line = next(n for n, text in enumerate(TRIAGE.splitlines(), start=1) if low in text)
    broken = '{id: low, kind: code, params: {source: "def run(item)\\n  return item"}}'
    project.write("g.graph.yaml", TRIAGE.replace(low, broken))
    for verb in ("validate", "plan"):
        result = project.cli(verb, "g.graph.yaml", "--input", "score=1")
        assert result.returncode == 1, result
        assert f"g.graph.yaml:{line}:" in result.stderr, result.stderr
        assert "error[code.error]: code step 'low': line 1:14: Parse error" in result.stderr, result.stderr
    inner = (
        "{id: low, kind: aggregate, params: {over: xs, max_items: 3, into: ys, "
        "step: {kind: code, params: {source: 'def run(item) return item'}}}}"
    )
    project.write("g.graph.yaml", TRIAGE.replace(low, inner))
    result = project.cli("validate", "g.graph.yaml")
    assert result.returncode == 1, result
    assert f"g.graph.yaml:{line}:111: error[code.error]: code step 'low': line 1:15: Parse error" in result.stderr
    good = '{id: low, kind: code, params: {source: "def run(item):\\n  return dict(item, level = \\"low\\")"}}'
    project.write("g.graph.yaml", TRIAGE.replace(low, good))
    ran = project.cli("run", "g.graph.yaml", "--input", "score=1", "--yes")
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_what_validate_resolves_in_the_steps_names_the_step_and_field_in_json(project: Project) -> None:
    """The findings of resolving the steps (an unknown agent, a program not on PATH, a mapping as
    code) and of parsing a code step carried no ``step``/``field`` in JSON, unlike every other
    finding of the document; now they name both, at the place their line and column point."""
    low = "{id: low, kind: set, params: {fields: {level: low}}}"
    cases = {
        "{id: low, kind: agent, params: {agent: nosuch, prompt: '=hi'}}": ("agent.unknown", "params"),
        "{id: low, kind: command, params: {argv: [no-such-program-x], into: x}}": ("resolve", "params"),
        "{id: low, kind: command, params: {argv: [sh, -c, '={{ $json.c }}'], into: x}}": (
            "argv.code",
            "params.argv[2]",
        ),
        '{id: low, kind: code, params: {source: "def run(item)\\n  return item"}}': ("code.error", "params.source"),
        (
            "{id: low, kind: aggregate, params: {over: xs, max_items: 3, into: ys, "
            "step: {kind: code, params: {source: 'def run(item) return item'}}}}"
        ): ("code.error", "params.step.params.source"),
    }
    for step, (rule, field) in cases.items():
        project.write("g.graph.yaml", TRIAGE.replace(low, step))
        result = project.cli("validate", "g.graph.yaml", "--output", "json")
        assert result.returncode == 1, result
        (found,) = json.loads(result.stdout)["diagnostics"]
        assert (found["rule"], found["step"], found["field"]) == (rule, "low", field), found
