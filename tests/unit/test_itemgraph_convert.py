"""``convert`` (rho_notebook/planning/convert.py): an item graph of agent, command, branch and
output steps becomes a Starlark workflow that the real planner accepts, with the nodes, needs and
conditions the graph means; everything without a faithful equivalent is refused, naming the step,
edge or input with its line:column."""

from __future__ import annotations

from typing import Any

import pytest

from rho_notebook.errors import InvalidWorkflow, NotConvertible
from rho_notebook.model.plan import Plan
from rho_notebook.planning.convert import AGENT_TIMEOUT_SECONDS, convert_graph
from tests.conftest import Project

FILE = "triage.graph.yaml"

TRIAGE = """\
name: triage
inputs:
  ticket: {type: string}
  urgent: {type: bool, default: false}
  score: {type: integer, default: 3}
steps:
  - id: classify
    kind: agent
    params:
      agent: explorer
      prompt: "=Classify ticket {{ $json.ticket }} (urgent: {{ $json.urgent }}, {{ $json.nothing }}score {{ $json.score }})"
      answer:
        level: {type: enum, choices: [high, low, spam]}
        summary: {type: string}
  - {id: route, kind: branch}
  - id: escalate
    kind: command
    params:
      argv: [echo, "=escalate {{ $json.summary }}", "={{ $json.ticket }}", "=n={{ $json.score }}", plain]
      into: escalated
      timeout_seconds: 30
      max_output_bytes: 4000
  - id: file
    kind: command
    params: {argv: [echo, "={{ $json.level }}"], into: filed}
  - id: note
    kind: agent
    params: {agent: explorer, prompt: "=Note {{ $json.summary }}"}
  - {id: done, kind: output}
edges:
  - {from: classify, to: route}
  - {from: route, to: escalate, when: {field: level, op: eq, value: high}}
  - {from: route, to: file, when: {field: level, op: ne, value: spam}}
  - {from: route, to: done}
  - {from: escalate, to: note}
  - {from: file, to: note}
"""

LEVEL = {"kind": "output", "node": "classify", "path": ["level"]}
HIGH = {"kind": "equals", "left": LEVEL, "right": "high"}
FILE_TAKEN = {
    "kind": "all",
    "items": [{"kind": "not", "item": HIGH}, {"kind": "is_one_of", "left": LEVEL, "values": ["high", "low"]}],
}


def plan_of(project: Project, text: str, inputs: dict[str, Any]) -> Plan:
    project.write("converted.star", convert_graph(text, display=FILE))
    return project.plan("converted.star", inputs, store=False)


def conditions(plan: Plan) -> dict[str, Any]:
    return {n.name: (n.when.model_dump(mode="json") if n.when else None) for n in plan.graph.nodes}


def refusal(text: str) -> tuple[str, str, int, int]:
    with pytest.raises(NotConvertible) as caught:
        convert_graph(text, display=FILE)
    (found,) = caught.value.diagnostics()
    assert found.file == FILE
    assert found.line is not None and found.column is not None
    return found.rule, found.message, found.line, found.column


def test_the_triage_graph_converts_to_a_workflow_the_planner_accepts(project: Project) -> None:
    text = convert_graph(TRIAGE, display=FILE)
    assert text.endswith(")\n")
    assert text == convert_graph(TRIAGE, display=FILE)
    assert "WORKFLOW = define(" in text and 'name = "triage"' in text

    plan = plan_of(project, TRIAGE, {"ticket": "T-1"})
    nodes = {n.name: n for n in plan.graph.nodes}
    assert list(nodes) == ["classify", "escalate", "file", "note"]  # branch and output become no node
    assert {name: n.needs for name, n in nodes.items()} == {
        "classify": (),
        "escalate": ("classify",),
        "file": ("classify",),
        "note": ("escalate", "file"),
    }
    assert conditions(plan) == {
        "classify": None,
        "escalate": HIGH,
        "file": FILE_TAKEN,  # a branch takes its first passing edge: not the earlier one
        "note": {"kind": "any", "items": [HIGH, FILE_TAKEN]},
    }
    classify = nodes["classify"].model_dump(mode="json")
    assert classify["access"] == "read_only"
    assert classify["timeout_seconds"] == AGENT_TIMEOUT_SECONDS
    assert classify["output"]["kind"] == "record"
    # inputs are plan content: spliced as the graph splices them (bool as true; a missing field as empty text)
    assert classify["prompt"] == {"kind": "template", "parts": ["Classify ticket T-1 (urgent: false, score 3)"]}
    assert nodes["note"].model_dump(mode="json")["output"] is None
    argv = nodes["escalate"].model_dump(mode="json")["argv"]
    assert argv[1:] == [
        {"kind": "template", "parts": ["escalate ", {"kind": "output", "node": "classify", "path": ["summary"]}]},
        "T-1",
        "n=3",
        "plain",
    ]
    assert nodes["escalate"].timeout_seconds == 30


def test_exclusive_branch_outcomes_meeting_again_need_no_condition(project: Project) -> None:
    graph = """\
name: merge
steps:
  - id: ask
    kind: agent
    params: {agent: explorer, prompt: hi, answer: {ok: {type: bool}, n: {type: integer}}}
  - {id: route, kind: branch}
  - {id: yes, kind: command, params: {argv: ["true"], into: a}}
  - {id: no, kind: command, params: {argv: ["true"], into: b}}
  - {id: after, kind: command, params: {argv: [echo, "=n={{ $json.n }}"], into: c}}
edges:
  - {from: ask, to: route}
  - {from: route, to: yes, when: {field: ok, op: eq, value: true}}
  - {from: route, to: no}
  - {from: route, to: after}
  - {from: yes, to: after}
  - {from: no, to: after}
"""
    plan = plan_of(project, graph.replace("  - {from: route, to: after}\n", ""), {})
    ok = {"kind": "output", "node": "ask", "path": ["ok"]}
    assert conditions(plan) == {
        "ask": None,
        "yes": {"kind": "equals", "left": ok, "right": True},
        "no": {"kind": "not", "item": {"kind": "equals", "left": ok, "right": True}},
        "after": None,  # one of yes/no always runs: the branch cannot stall
    }
    assert {n.name: n.needs for n in plan.graph.nodes}["after"] == ("no", "yes")


def test_non_branch_fan_out_with_conditions_and_enum_order_ops(project: Project) -> None:
    graph = """\
name: fan
steps:
  - id: ask
    kind: agent
    params: {agent: explorer, prompt: hi, answer: {size: {type: enum, choices: [1, 5, 9]}, tag: {type: string}}}
  - {id: big, kind: command, params: {argv: ["true"], into: a}}
  - {id: tagged, kind: command, params: {argv: ["true"], into: b}}
  - {id: always, kind: command, params: {argv: ["true"], into: c}}
edges:
  - {from: ask, to: big, when: {field: size, op: gte, value: 5}}
  - {from: ask, to: tagged, when: {field: tag, op: in, value: [x, y]}}
  - {from: ask, to: always}
"""
    size = {"kind": "output", "node": "ask", "path": ["size"]}
    tag = {"kind": "output", "node": "ask", "path": ["tag"]}
    assert conditions(plan_of(project, graph, {})) == {
        "ask": None,
        "big": {"kind": "is_one_of", "left": size, "values": [5, 9]},
        "tagged": {"kind": "is_one_of", "left": tag, "values": ["x", "y"]},
        "always": None,
    }


ONE = """\
name: one
inputs:
  n: {type: integer}
steps:
  - {id: first, kind: agent, params: {agent: explorer, prompt: hi, answer: {n: {type: integer}, s: {type: string}}}}
  - {id: next, kind: agent, params: {agent: explorer, prompt: "PROMPT"}}
"""


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("model", "{provider: p, model: m, prompt: hi, into: x}"),
        ("code", '{source: "def run(item):\\n  return item"}'),
        ("set", "{fields: {a: 1}}"),
        ("join", "{}"),
        ("human", "{question: Ok, fields: {ok: {type: bool}}}"),
    ],
)
def test_every_other_step_kind_is_refused_naming_the_step(kind: str, params: str) -> None:
    text = f"name: g\nsteps:\n  - {{id: fine, kind: output}}\n  - {{id: odd, kind: {kind}, params: {params}}}\n"
    if kind == "join":
        text = text.replace(", params: {}", "")
    rule, message, line, column = refusal(text)
    assert (rule, line, column) == ("convert.step_kind", 4, 21)
    assert message.startswith(f"step 'odd' is a {kind} step; convert handles only agent, command, branch and output")


def test_a_loop_is_refused_naming_the_edge() -> None:
    text = ONE.replace('"PROMPT"', "hi") + (
        "edges:\n  - {from: first, to: next}\n  - {from: next, to: first, loop: {max_rounds: 2}}\n"
    )
    rule, message, line, column = refusal(text)
    assert (rule, line, column) == ("convert.loop", 9, 35)
    assert "edge 2 (next -> first) is a loop edge" in message


@pytest.mark.parametrize(
    ("prompt", "wanted"),
    [
        ("={{ $runId }}", "reads {{ $runId }}; a Starlark workflow has no run ID or run fields"),
        ("=by {{ $run.initiator }}", "reads {{ $run.initiator }}"),
        ("={{ $json }}", "only a top-level field of the item converts"),
        ("={{ $json.n.x }}", "'n' is a scalar (integer) without fields"),
        ("={{ $json.n }}", "keeps its type (integer); the Starlark field is text"),
        ("={{ $json.gone }}", "which no step before it sets (it would be null)"),
    ],
)
def test_a_mapping_without_a_faithful_equivalent_is_refused_naming_step_and_field(prompt: str, wanted: str) -> None:
    rule, message, line, column = refusal(
        ONE.replace('"PROMPT"', f'"{prompt}"') + "edges:\n  - {from: first, to: next}\n"
    )
    assert (rule, line, column) == ("convert.mapping", 6, 63)
    assert message.startswith("step 'next', field 'params.prompt'")
    assert wanted in message


def test_fields_a_graph_knows_but_starlark_cannot_read_are_refused() -> None:
    untyped = """\
name: g
steps:
  - {id: loose, kind: agent, params: {agent: explorer, prompt: hi}}
  - {id: run, kind: command, params: {argv: [echo, "={{ $json.x }}"], into: out}}
  - {id: use, kind: command, params: {argv: [echo, "=got {{ $json.out }}"], into: out2}}
edges:
  - {from: loose, to: run}
  - {from: run, to: use}
"""
    rule, message, line, column = refusal(untyped)
    assert (rule, line, column) == ("convert.mapping", 4, 52)
    assert "agent step 'loose' before it declares no answer fields" in message
    rule, message, _, _ = refusal(untyped.replace("prompt: hi}", "prompt: hi, answer: {x: {type: string}}}"))
    assert "step 'use', field 'params.argv[1]' reads 'out', the stdout of command step 'run'" in message
    optional = untyped.replace("prompt: hi}", "prompt: hi, answer: {x: {type: string, required: false}}}")
    assert "an optional answer field of 'loose'" in refusal(optional)[1]


def test_a_field_set_differently_on_each_branch_is_refused() -> None:
    text = """\
name: g
steps:
  - {id: ask, kind: agent, params: {agent: explorer, prompt: hi, answer: {ok: {type: bool}, v: {type: string}}}}
  - {id: route, kind: branch}
  - {id: redo, kind: agent, params: {agent: explorer, prompt: hi, answer: {v: {type: string}}}}
  - {id: keep, kind: command, params: {argv: ["true"], into: k}}
  - {id: use, kind: command, params: {argv: [echo, "={{ $json.v }}"], into: u}}
edges:
  - {from: ask, to: route}
  - {from: route, to: redo, when: {field: ok, op: eq, value: false}}
  - {from: route, to: keep}
  - {from: redo, to: use}
  - {from: keep, to: use}
"""
    rule, message, line, column = refusal(text)
    assert (rule, line) == ("convert.mapping", 7)
    assert "reads 'v', which comes from different steps depending on the branch taken" in message


CONDITIONED = """\
name: g
inputs:
  n: {type: integer}
steps:
  - {id: ask, kind: agent, params: {agent: explorer, prompt: hi, answer: {n: {type: integer}, c: {type: enum, choices: [a]}}}}
  - {id: run, kind: command, params: {argv: ["true"], into: out}}
  - {id: route, kind: branch}
  - {id: then, kind: command, params: {argv: ["true"], into: t}}
  - {id: else, kind: command, params: {argv: ["true"], into: e}}
edges:
  - {from: ask, to: run}
  - {from: run, to: route}
  - {from: route, to: then, when: WHEN}
  - {from: route, to: else}
"""


@pytest.mark.parametrize(
    ("when", "wanted"),
    [
        ("{field: n, op: gt, value: 5}", "op 'gt' on 'n' (integer) has no Starlark condition"),
        ("{field: n, op: lte, value: 1}", "op 'lte' on 'n' (integer) has no Starlark condition"),
        ("{field: n, op: in, value: []}", "the condition never holds ('n' is in no member of an empty list)"),
        ("{field: n, op: eq, value: x}", "'n' is a integer, so it never equals 'x'"),
        ("{field: c, op: eq, value: b}", "the condition never holds for 'c'"),
        ("{field: out.ok, op: eq, value: true}", "reads 'out.ok', but 'out' is a scalar"),
        ("{field: out, op: eq, value: 1}", "the stdout of command step 'run'"),
        ("{field: gone, op: eq, value: 1}", "the condition reads 'gone', which no step before it sets"),
    ],
)
def test_an_inexpressible_condition_is_refused_naming_the_edge(when: str, wanted: str) -> None:
    rule, message, line, _ = refusal(CONDITIONED.replace("WHEN", when))
    assert (rule, line) == ("convert.condition", 13)
    assert message.startswith("edge 3 (route -> then)")
    assert wanted in message


def test_a_condition_on_an_input_is_refused() -> None:
    text = CONDITIONED.replace("WHEN", "{field: n, op: eq, value: 1}").replace(
        ", answer: {n: {type: integer},", ", answer: {"
    )
    rule, message, line, column = refusal(text)
    assert (rule, line, column) == ("convert.condition", 13, 43)
    assert "reads input 'n', which is fixed when the workflow is planned" in message


def test_a_step_that_can_stall_and_an_optional_input_without_default_are_refused() -> None:
    text = CONDITIONED.replace("WHEN", "{field: c, op: eq, value: a}").replace(
        "  - {from: route, to: else}\n", "  - {from: route, to: else, when: {field: c, op: ne, value: a}}\n"
    )
    rule, message, line, column = refusal(text)
    assert (rule, line, column) == ("convert.stall", 13, 35)
    assert "step 'route': every out-edge has a condition, so the run stalls" in message

    text = CONDITIONED.replace("WHEN", "{field: c, op: eq, value: a}").replace(
        "n: {type: integer}\nsteps", "n: {type: integer, required: false}\nsteps"
    )
    rule, message, line, column = refusal(text)
    assert (rule, line, column) == ("convert.input", 3, 6)
    assert "input 'n' is optional without a default" in message


def test_every_refusal_of_the_structure_is_reported_together() -> None:
    text = "name: g\nsteps:\n  - {id: a, kind: set, params: {fields: {x: 1}}}\n  - {id: b, kind: join}\n"
    with pytest.raises(NotConvertible) as caught:
        convert_graph(text, display=FILE)
    assert [(d.rule, d.line) for d in caught.value.diagnostics()] == [
        ("convert.step_kind", 3),
        ("convert.step_kind", 4),
    ]
    assert caught.value.exit_code == 2


def test_a_document_that_does_not_validate_is_invalid_not_refused() -> None:
    with pytest.raises(InvalidWorkflow) as caught:
        convert_graph("name: g\nsteps:\n  - {id: a, kind: output}\nedges:\n  - {from: a, to: b}\n", display=FILE)
    assert not isinstance(caught.value, NotConvertible)
    assert "graph.edge_step" in str(caught.value)


def test_nested_branches_and_an_edge_a_branch_never_takes(project: Project) -> None:
    graph = """\
name: nested
steps:
  - id: ask
    kind: agent
    params: {agent: explorer, prompt: hi, answer: {kind: {type: enum, choices: [bug, idea]}}}
  - {id: outer, kind: branch}
  - id: triage
    kind: agent
    params: {agent: explorer, prompt: "=Triage the {{ $json.kind }}", answer: {sev: {type: enum, choices: [one, two]}}}
  - {id: inner, kind: branch}
  - {id: page, kind: command, params: {argv: [echo, "=page {{ $json.sev }}"], into: paged}}
  - {id: never, kind: command, params: {argv: ["true"], into: x}}
  - {id: log, kind: command, params: {argv: ["true"], into: logged}}
edges:
  - {from: ask, to: outer}
  - {from: outer, to: triage, when: {field: kind, op: eq, value: bug}}
  - {from: outer, to: log}
  - {from: triage, to: inner}
  - {from: inner, to: page, when: {field: sev, op: in, value: [one, two]}}
  - {from: inner, to: never}
"""
    plan = plan_of(project, graph, {})
    bug = {"kind": "equals", "left": {"kind": "output", "node": "ask", "path": ["kind"]}, "right": "bug"}
    assert conditions(plan) == {
        "ask": None,
        "triage": bug,
        "page": bug,  # every severity passes: the inner branch always takes page, never 'never'
        "log": {"kind": "not", "item": bug},
    }
    assert {n.name: n.needs for n in plan.graph.nodes} == {
        "ask": (),
        "triage": ("ask",),
        "page": ("triage",),
        "log": ("ask",),
    }

    plan = plan_of(project, graph.replace("op: in, value: [one, two]", "op: eq, value: one"), {})
    one = {"kind": "equals", "left": {"kind": "output", "node": "triage", "path": ["sev"]}, "right": "one"}
    found = conditions(plan)
    assert found["page"] == {"kind": "all", "items": [bug, one]}  # the outer choice first: never unavailable
    assert found["never"] == {"kind": "all", "items": [bug, {"kind": "not", "item": one}]}
