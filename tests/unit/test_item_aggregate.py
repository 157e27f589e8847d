"""The pure parts of item-graph ``aggregate`` and ``transform`` steps (docs/graphs.md): the
document rules of an aggregate's inner step, the fold of its instance records into the run's
state (and out of its snapshot), what a resumed attempt takes from the journal, and what a
``transform`` passes on."""

from __future__ import annotations

from rho_notebook.exec.passes import passed_item
from rho_notebook.model.itemrun import InstanceLog, instance_key
from rho_notebook.model.mapping import RunContext
from rho_notebook.model.run_fold import replay
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.planning.itemgraph import lint_graph

AGGREGATE = """\
name: sizes
steps:
  - {id: start, kind: set, params: {fields: {files: [a, b]}}}
  - id: count
    kind: aggregate
    params:
      over: files
      max_items: 2
      into: sizes
      step: {kind: command, params: {argv: [wc, -c, "={{ $json }}"]}}
edges:
  - {from: start, to: count}
"""


def rules(text: str) -> list[tuple[str, str, int, int]]:
    _, found = lint_graph(text, display="sizes.graph.yaml")
    return [(f.rule, f.message, f.line, f.column) for f in found]


def test_a_valid_aggregate_passes() -> None:
    assert rules(AGGREGATE) == []


def test_the_inner_steps_mappings_follow_its_kind() -> None:
    unmarked = rules(AGGREGATE.replace('"={{ $json }}"', '"{{ $json }}"'))
    assert [(r, line, col) for r, _, line, col in unmarked] == [("graph.mapping_without_equals", 10, 53)]
    program = rules(AGGREGATE.replace("argv: [wc,", 'argv: ["={{ $json }}",'))
    assert [r for r, *_ in program] == ["graph.mapping_field"]


def test_an_inner_into_is_refused_as_a_param() -> None:
    found = rules(AGGREGATE.replace("]}}", "], into: n}}"))
    assert len(found) == 1
    rule, message, line, _ = found[0]
    assert (rule, line) == ("graph.param", 10)
    assert "an aggregate's inner command step has no into: the aggregate's into holds every result" in message


def test_an_interpreter_reading_an_element_as_code_is_refused() -> None:
    found = rules(AGGREGATE.replace("argv: [wc, -c,", "argv: [sh, -c,"))
    assert [(r, line) for r, _, line, _ in found] == [("argv.code", 10)]


def test_instances_fold_into_their_node_and_leave_the_snapshot_without_values() -> None:
    state = RunState(run_id="r", plan_id="p", graph_digest="d", workflow="w", nodes={"count": NodeRecord()})
    at = "2026-01-01T00:00:00.000+00:00"
    base = {"run_id": "r", "at": at, "node": "count"}
    replay(
        state,
        [
            {**base, "seq": 1, "kind": "node_launched", "attempt": 1},
            {**base, "seq": 2, "kind": "instance_launched", "attempt": 1, "instance": 0},
            {
                **base,
                "seq": 3,
                "kind": "instance_finished",
                "attempt": 1,
                "instance": 0,
                "state": "success",
                "message": "",
                "value": 7,
            },
            {**base, "seq": 4, "kind": "instance_launched", "attempt": 1, "instance": 1},
        ],
    )
    record = state.nodes["count"]
    assert {i: r["state"] for i, r in record.instances.items()} == {0: "success", 1: "running"}
    snapshot = record.to_json()["instances"]
    assert snapshot == {
        "0": {"state": "success", "attempt": 1, "message": ""},
        "1": {"state": "running", "attempt": 1, "message": ""},
    }
    assert NodeRecord.from_json(record.to_json()).instances[1]["state"] == "running"
    log = InstanceLog.of(record.instances, lambda *records: None, lambda: None)
    assert dict(log.done) == {0: 7}  # a resumed attempt takes instance 0 and runs instance 1 again
    assert instance_key("count@2", 1) == "count@2[1]"


def test_a_node_without_instances_keeps_its_snapshot_shape() -> None:
    assert "instances" not in NodeRecord().to_json()


def test_transform_replaces_the_item_and_set_keeps_it() -> None:
    run = RunContext(run_id="r")
    item = {"a": 1, "b": {"c": 2}}
    fields = {"fields": {"c": "={{ $json.b.c }}", "label": "=n {{ $json.a }}"}}
    assert passed_item("transform", fields, item, run) == {"c": 2, "label": "n 1"}
    assert passed_item("set", fields, item, run) == {"a": 1, "b": {"c": 2}, "c": 2, "label": "n 1"}
