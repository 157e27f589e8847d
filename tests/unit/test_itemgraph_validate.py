"""Validation of item-graph documents (rho_notebook/planning/itemgraph.py): every rule refuses a
document that breaks it, naming the step, the field and line:column, and passes one that keeps it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rho_notebook.errors import InputError, InvalidWorkflow, SourceError
from rho_notebook.model.itemgraph import is_graph_file
from rho_notebook.planning.itemgraph import GraphFinding, lint_graph, lint_graph_file, load_graph
from rho_notebook.source.limits import Budget, load_limits

TRIAGE = """\
name: triage
inputs:
  score: {type: integer}
steps:
  - {id: start, kind: set, params: {fields: {score: "={{ $json.score }}", label: "=ticket {{ $json.score }}"}}}
  - {id: route, kind: branch}
  - {id: high, kind: set, params: {fields: {level: high}}}
  - {id: low, kind: set, params: {fields: {level: low}}}
  - {id: done, kind: output}
edges:
  - {from: start, to: route}
  - {from: route, to: high, when: {field: score, op: gte, value: 50}}
  - {from: route, to: low}
  - {from: high, to: done}
  - {from: low, to: done}
"""

FILE = "triage.graph.yaml"


def findings(text: str) -> list[GraphFinding]:
    graph, found = lint_graph(text, display=FILE)
    assert (graph is None) == bool(found)
    return found


def only(text: str, rule: str) -> GraphFinding:
    found = findings(text)
    assert [f.rule for f in found] == [rule], [f.render() for f in found]
    return found[0]


def test_the_issue_triage_example_validates() -> None:
    graph = load_graph(TRIAGE, display=FILE)
    assert [s.id for s in graph.steps] == ["start", "route", "high", "low", "done"]
    assert graph.starts() == ("start",)
    assert [e.to for e in graph.out_edges("route")] == ["high", "low"]


def test_the_same_document_as_json_validates() -> None:
    assert findings(json.dumps(yaml.safe_load(TRIAGE), indent=1)) == []


def test_a_mapping_without_the_leading_equals_is_refused_naming_step_start_and_field_label() -> None:
    text = TRIAGE.replace('"=ticket {{ $json.score }}"', '"ticket {{ $json.score }}"')
    found = only(text, "graph.mapping_without_equals")
    assert (found.step, found.field, found.line, found.column) == ("start", "params.fields.label", 5, 82)
    assert found.render() == (
        "triage.graph.yaml:5:82: error[graph.mapping_without_equals]: step 'start', field 'params.fields.label': "
        "'ticket {{ $json.score }}' holds {{ $... }} but does not start with '=', so it would be sent as literal "
        "text; write it as a mapping: '=ticket {{ $json.score }}'"
    )
    with pytest.raises(InvalidWorkflow) as caught:
        load_graph(text, display=FILE)
    (diagnostic,) = caught.value.diagnostics()
    assert (diagnostic.rule, diagnostic.line, diagnostic.column) == ("graph.mapping_without_equals", 5, 82)
    assert "step 'start', field 'params.fields.label'" in diagnostic.message


def test_a_mapping_in_a_field_that_takes_none() -> None:
    text = TRIAGE.replace(
        "{id: done, kind: output}", '{id: done, kind: model, params: {agent: "={{ $json.a }}", prompt: hi, into: r}}'
    )
    found = only(text, "graph.mapping_field")
    assert (found.step, found.field, found.line) == ("done", "params.agent", 9)
    assert "takes no mappings" in found.message
    literal = TRIAGE.replace(
        "{id: done, kind: output}", "{id: done, kind: model, params: {agent: triager, prompt: hi, into: r}}"
    )
    assert findings(literal) == []


def test_a_commands_program_is_literal_but_its_arguments_may_be_mappings() -> None:
    program = '{id: done, kind: command, params: {argv: ["={{ $json.tool }}"], into: out}}'
    found = only(TRIAGE.replace("{id: done, kind: output}", program), "graph.mapping_field")
    assert (found.step, found.field) == ("done", "params.argv[0]")
    argument = '{id: done, kind: command, params: {argv: [tool, "={{ $json.score }}"], into: out}}'
    assert findings(TRIAGE.replace("{id: done, kind: output}", argument)) == []


def test_braces_without_equals_in_a_field_that_takes_no_mappings() -> None:
    text = TRIAGE.replace("value: 50", 'value: "{{ $json.limit }}"')
    found = only(text, "graph.mapping_without_equals")
    assert (found.step, found.field, found.line) == ("route", "when.value", 12)
    assert "this field takes no mappings" in found.message


def test_a_mapping_that_does_not_parse() -> None:
    text = TRIAGE.replace("level: low", 'level: "=level {{ $json.level"')
    found = only(text, "graph.mapping_syntax")
    assert (found.step, found.field, found.line, found.column) == ("low", "params.fields.level", 8, 51)
    assert "has no closing '}}'" in found.message


def test_code_source_is_not_read_as_mappings() -> None:
    code = '{id: done, kind: code, params: {source: "def run(item):\\n    return {\\"t\\": \\"{{ $json.x }}\\"}\\n"}}'
    assert findings(TRIAGE.replace("{id: done, kind: output}", code)) == []


def test_an_unknown_step_kind() -> None:
    found = only(TRIAGE.replace("kind: output", "kind: outptu"), "graph.kind")
    assert (found.step, found.field, found.line, found.column) == ("done", "kind", 9, 22)
    assert found.message == (
        "step 'done': unknown step kind 'outptu'; the kinds are agent, model, command, code, set, transform, branch, "
        "join, human, aggregate, output"
    )


def test_an_unknown_kind_is_its_only_finding() -> None:
    """A step whose kind does not exist has no params to check yet: its mappings are not
    reported as mappings in a field that takes none."""
    found = only(TRIAGE.replace("{id: start, kind: set,", "{id: start, kind: sett,"), "graph.kind")
    assert found.step == "start" and "unknown step kind 'sett'" in found.message


def test_a_misspelled_field_is_named_with_the_one_meant() -> None:
    found = only(TRIAGE.replace("{from: route, to: low}", "{from: route, too: low}"), "graph.field")
    assert found.message == "edge 3 (route -> None), field 'too': unknown field; did you mean 'to'?"
    assert (found.field, found.line) == ("too", 13)
    found = only(TRIAGE.replace("{id: route, kind: branch}", "{id: route, kind: branch, parms: {}}"), "graph.field")
    assert found.message == "step 'route', field 'parms': unknown field; did you mean 'params'?"
    found = only(TRIAGE.replace("steps:", "stepz: []\nsteps:"), "graph.field")
    assert found.message == "field 'stepz': unknown field; did you mean 'steps'?"
    found = only(TRIAGE.replace("{id: route, kind: branch}", "{id: route, kind: branch, colour: red}"), "graph.field")
    assert found.message == "step 'route', field 'colour': unknown field"
    found = only(TRIAGE.replace("{fields: {level: low}}", "{fieldz: {level: low}}"), "graph.param")
    assert (
        found.message
        == "step 'low': unknown param 'fieldz' for a set step (did you mean 'fields'?); its params are fields"
    )


def test_the_only_unknown_field_beside_the_only_missing_one_stands_for_it() -> None:
    """Not close in spelling, but the one mistake: one finding naming what was meant, not a
    second one saying the meant field is missing."""
    found = only(TRIAGE.replace("{fields: {level: low}}", "{values: {level: low}}"), "graph.param")
    assert (
        found.message
        == "step 'low': unknown param 'values' for a set step (did you mean 'fields'?); its params are fields"
    )
    found = only(TRIAGE.replace("{from: route, to: low}", "{from: route, target: low}"), "graph.field")
    assert found.message == "edge 3 (route -> None), field 'target': unknown field; did you mean 'to'?"
    # two unknown fields beside one missing: which one was meant cannot be told
    text = TRIAGE.replace("{from: route, to: low}", "{from: route, target: low, colour: red}")
    found_all = findings(text)
    assert any(f.message.endswith("field 'to': Field required") for f in found_all), [f.message for f in found_all]


def test_a_step_naming_its_neighbours_is_pointed_at_the_edges_list() -> None:
    """``to: [route]`` on a step (as other systems write it): the finding says edges are listed
    apart, with the edge this one would be."""
    found = only(TRIAGE.replace("{id: low, kind: set,", "{id: low, to: [done], kind: set,"), "graph.field")
    assert found.message == (
        "step 'low', field 'to': unknown field; a step does not name its neighbours: list edges under the "
        "document's `edges:`, e.g. - {from: low, to: done}"
    )
    found = only(TRIAGE.replace("{id: done, kind: output}", "{id: done, kind: output, needs: low}"), "graph.field")
    assert found.message.endswith("e.g. - {from: low, to: done}")


def test_a_step_without_a_kind() -> None:
    found = only(TRIAGE.replace("{id: done, kind: output}", "{id: done}"), "graph.kind")
    assert found.step == "done" and "no kind" in found.message


def test_an_unknown_param() -> None:
    text = TRIAGE.replace("{fields: {level: low}}", "{fields: {level: low}, keep: true}")
    found = only(text, "graph.param")
    assert (found.step, found.field, found.line, found.column) == ("low", "params.keep", 8, 57)
    assert found.message == "step 'low': unknown param 'keep' for a set step; its params are fields"
    found = only(
        TRIAGE.replace("{id: route, kind: branch}", "{id: route, kind: branch, params: {x: 1}}"), "graph.param"
    )
    assert found.message == "step 'route': unknown param 'x' for a branch step; it takes no params"


def test_other_shape_problems_name_the_step_and_field() -> None:
    found = only(
        TRIAGE.replace("{id: done, kind: output}", "{id: done, kind: model, params: {prompt: hi, into: r}}"),
        "graph.field",
    )
    assert found.step == "done" and found.field == "params"
    assert "names provider and model (from settings), or an agent" in found.message
    found = only(TRIAGE.replace("{id: route,", "{id: Route,"), "graph.field")
    assert (found.step, found.field, found.line) == ("Route", "id", 6)
    found = only(TRIAGE.replace("op: gte", "op: between"), "graph.field")
    assert (found.step, found.field, found.line) == ("route", "when.op", 12)
    found = only(TRIAGE.replace("score: {type: integer}", "score: {type: integer, default: high}"), "graph.field")
    assert (found.field, found.line) == ("inputs.score", 3)
    assert "the default 'high' must be of type integer" in found.message


def test_a_loop_edge_without_max_rounds() -> None:
    loop = TRIAGE + "  - {from: done, to: start, loop: {}}\n"
    found = only(loop, "graph.loop_rounds")
    assert (found.step, found.field, found.line, found.column) == ("done", "loop.max_rounds", 16, 35)
    assert found.message == (
        "edge 6 (done -> start): a loop edge needs max_rounds, the total number of rounds, e.g. loop: {max_rounds: 3}"
    )
    assert findings(TRIAGE + "  - {from: done, to: start, loop: {max_rounds: 3}}\n") == []


def test_a_cycle_not_made_through_a_loop_edge() -> None:
    found = only(TRIAGE + "  - {from: done, to: start}\n", "graph.cycle")
    assert (found.step, found.field, found.line, found.column) == ("done", "loop", 16, 5)
    assert found.message == (
        "edge 6 (done -> start) closes the cycle start -> route -> high -> done -> start; a cycle is allowed only "
        "through a loop edge: add loop: {max_rounds: N} to the edge that goes back"
    )


def test_a_loop_edge_that_closes_no_cycle() -> None:
    found = only(TRIAGE + "  - {from: start, to: done, loop: {max_rounds: 2}}\n", "graph.loop_back")
    assert (found.step, found.field, found.line) == ("start", "loop", 16)


def test_an_edge_to_an_unknown_step() -> None:
    found = only(TRIAGE + "  - {from: done, to: nope}\n", "graph.edge_step")
    assert (found.step, found.field, found.line, found.column) == ("done", "to", 16, 22)
    assert found.message == (
        "edge 6 (done -> nope): to names 'nope', which is not a step; the steps are start, route, high, low, done"
    )


def test_duplicate_step_ids() -> None:
    text = TRIAGE.replace(
        "{id: low, kind: set, params: {fields: {level: low}}}", "{id: high, kind: set, params: {fields: {level: low}}}"
    )
    text = text.replace("  - {from: route, to: low}\n", "").replace("  - {from: low, to: done}\n", "")
    found = only(text, "graph.duplicate_id")
    assert (found.step, found.field, found.line, found.column) == ("high", "id", 8, 10)
    assert found.message == "step 'high': the id is used by step 3 too; step ids must be unique"


def test_several_in_edges_that_can_deliver_in_one_run() -> None:
    fan_out = TRIAGE.replace("{id: route, kind: branch}", "{id: route, kind: set, params: {fields: {a: 1}}}")
    found = only(fan_out, "graph.in_edges")
    assert (found.step, found.line, found.column) == ("done", 15, 21)
    assert found.message.startswith(
        "step 'done' has in-edges from 'high' (edge 4) and 'low' (edge 5) that can both deliver in one run"
    )
    assert findings(fan_out.replace("{id: done, kind: output}", "{id: done, kind: join}")) == []


def test_exclusive_outcomes_of_nested_branches_may_share_a_target() -> None:
    text = """\
name: nested
steps:
  - {id: first, kind: branch}
  - {id: a, kind: branch}
  - {id: b, kind: set, params: {fields: {x: b}}}
  - {id: c, kind: set, params: {fields: {x: c}}}
  - {id: d, kind: set, params: {fields: {x: d}}}
  - {id: done, kind: output}
edges:
  - {from: first, to: a, when: {field: go, op: exists}}
  - {from: first, to: b}
  - {from: a, to: c, when: {field: n, op: in, value: [1, 2]}}
  - {from: a, to: d}
  - {from: b, to: done}
  - {from: c, to: done}
  - {from: d, to: done}
"""
    assert findings(text) == []
    # when the inner step fans out instead of branching, c and d both deliver to done
    fan_out = text.replace("{id: a, kind: branch}", "{id: a, kind: set, params: {fields: {y: 1}}}")
    found = only(fan_out, "graph.in_edges")
    assert found.step == "done" and "from 'c' (edge 6) and 'd' (edge 7)" in found.message


def test_a_loop_edge_does_not_count_as_a_second_in_edge() -> None:
    text = TRIAGE + "  - {from: done, to: route, loop: {max_rounds: 2}}\n"
    assert findings(text) == []


def test_yaml_syntax_and_strict_scalars() -> None:
    found = only("name: [", "graph.yaml")
    assert (found.line, found.column) == (1, 8)
    floats = findings(TRIAGE.replace("value: 50", "value: 50.5"))
    assert "graph.float" in [f.rule for f in floats]
    flt = next(f for f in floats if f.rule == "graph.float")
    assert (flt.step, flt.field, flt.line, flt.column) == ("route", "when.value", 12, 66)
    # yes/no/on stay strings, dates stay strings: a literal is what it looks like
    graph = load_graph(TRIAGE.replace("level: high", "level: yes, on: 2024-01-01"), display=FILE)
    fields = graph.step("high").params.fields  # type: ignore[union-attr]
    assert fields == {"level": "yes", "on": "2024-01-01"}


def test_aliases_and_duplicate_keys_are_refused() -> None:
    found = only("name: &n triage\nother: *n\n", "graph.yaml_alias")
    assert found.line == 2
    text = TRIAGE.replace("{fields: {level: low}}", "{fields: {level: low, level: lower}}")
    found = only(text, "graph.duplicate_key")
    assert (found.step, found.field, found.line) == ("low", "params.fields.level", 8)


def test_the_document_must_be_a_mapping() -> None:
    assert only("- 1\n", "graph.yaml").message == "the document must be a mapping with name, inputs, steps and edges"
    assert only("", "graph.yaml").message.startswith("the document is empty")


def test_the_named_planning_limits() -> None:
    limits = load_limits()
    small = limits.model_copy(
        update={"budgets": {**limits.budgets, "node_count": Budget(limit=3, measured=0, case="test", unit="nodes")}}
    )
    _, found = lint_graph(TRIAGE, display=FILE, limits=small)
    assert [f.rule for f in found] == ["limit.node_count"]
    assert found[0].message == "planning budget 'node_count' exceeded: accepted limit 3, measured 5"
    assert limits.limit("item_bytes") == 1024 * 1024


def test_findings_carry_step_and_field_in_json() -> None:
    found = only(TRIAGE.replace("kind: output", "kind: outptu"), "graph.kind")
    assert found.to_json() == {
        "rule": "graph.kind",
        "severity": "error",
        "message": found.message,
        "file": FILE,
        "line": 9,
        "column": 22,
        "step": "done",
        "field": "kind",
    }


def test_graph_file_names() -> None:
    assert is_graph_file("triage.graph.yaml") and is_graph_file("x.graph.json")
    assert not is_graph_file("triage.yaml")


def test_lint_graph_file_reads_the_file_and_checks_inputs(tmp_path: Path) -> None:
    path = tmp_path / FILE
    path.write_text(TRIAGE, encoding="utf-8")
    assert lint_graph_file(path, display=FILE) == []
    assert lint_graph_file(path, display=FILE, inputs={"score": 70}) == []
    with pytest.raises(InputError, match="input 'score' must be an integer"):
        lint_graph_file(path, display=FILE, inputs={"score": "70"})
    path.write_bytes(b"name: \xff\n")
    assert [f.rule for f in lint_graph_file(path, display=FILE)] == ["graph.yaml"]
    with pytest.raises(SourceError, match="cannot read missing.graph.yaml"):
        lint_graph_file(tmp_path / "missing.graph.yaml", display="missing.graph.yaml")


def test_integers_outside_int64_nesting_and_non_text_keys() -> None:
    found = only(TRIAGE.replace("level: low", "level: 99999999999999999999"), "graph.integer")
    assert (found.step, found.field, found.line) == ("low", "params.fields.level", 8)
    assert findings(TRIAGE.replace("level: low", "level: 9223372036854775807")) == []
    deep = TRIAGE.replace("level: low", "level: " + "[" * 70 + "]" * 70)
    assert only(deep, "limit.value_depth").message == "the document nests deeper than 64 levels"
    assert only("name: " + "[" * 5000 + "]" * 5000, "limit.value_depth").message.startswith("the document nests")
    found = only(TRIAGE.replace("level: low", "1: low"), "graph.field")
    assert (found.step, found.message) == ("low", "step 'low', field 'params.fields[1]': keys are text; quote the key")


def test_an_empty_list_or_map_says_what_it_needs_not_pydantic_s_words() -> None:
    empty = findings("name: t\nsteps: []\nedges: []\n")
    assert [(f.rule, f.message) for f in empty] == [
        ("graph.field", "field 'steps': a graph needs at least one step (it has 0)")
    ]
    text = "name: t\nsteps:\n  - {id: a, kind: set, params: {fields: {}}}\nedges: []\n"
    assert only(text, "graph.field").message == "step 'a', field 'params.fields': give at least 1 entry (it has 0)"
