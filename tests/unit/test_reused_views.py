"""Reused attempts and carried approvals as the views show them: the node view and the pane carry
the source run, ``status`` (text and JSON) names it, and a node launched in the run has none.

The run states are built by folding journal events by hand (node_reused then node_finished), as
the driver journals them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.service.wire import status_json
from rho_notebook.views.dag import RunTracker, load_detail, node_views
from rho_notebook.views.text import node_status_line, provenance_text

SOURCE_RUN = "01J9ZSOURCE0000000000000000"
AT = "2026-12-03T10:00:00.000+00:00"


def _state() -> RunState:
    return RunState(
        run_id="01J9ZTHISRUN000000000000000",
        plan_id="plan",
        graph_digest="sha256:00",
        workflow="wf",
        nodes={"stats": NodeRecord(), "fresh": NodeRecord(), "gate": NodeRecord()},
    )


EVENTS: list[dict[str, Any]] = [
    {"seq": 1, "kind": "run_started", "at": AT, "pid": 1},
    {
        "seq": 2,
        "kind": "node_reused",
        "at": AT,
        "node": "stats",
        "attempt": 1,
        "source_run": SOURCE_RUN,
        "source_node": "stats",
        "source_attempt": 2,
        "reuse_key": "sha256:ab",
    },
    {"seq": 3, "kind": "node_finished", "at": AT, "node": "stats", "attempt": 1, "state": "success", "exit": None},
    {"seq": 4, "kind": "node_launched", "at": AT, "node": "fresh", "attempt": 1},
    {
        "seq": 5,
        "kind": "node_finished",
        "at": AT,
        "node": "fresh",
        "attempt": 1,
        "state": "success",
        "exit": {"kind": "exit", "code": 0},
    },
    {"seq": 6, "kind": "node_launched", "at": AT, "node": "gate", "attempt": 1},
    {
        "seq": 7,
        "kind": "approval_carried",
        "at": AT,
        "node": "gate",
        "attempt": 1,
        "facts_sha256": "sha256:cd",
        "from_run": SOURCE_RUN,
        "by": "ada",
        "decided_at": AT,
    },
]


def _folded() -> RunState:
    state = _state()
    for event in EVENTS:
        apply(state, event)
    return state


def test_a_reused_node_view_names_its_source_and_a_launched_one_does_not() -> None:
    views = node_views(_folded())
    assert views["stats"]["state"] == "success"
    assert views["stats"]["reused_from"] == {"run_id": SOURCE_RUN, "node": "stats", "attempt": 2}
    assert "reused_from" not in views["fresh"]
    assert "reused_from" not in views["gate"]


def test_the_live_tracker_marks_a_node_reused_as_the_event_arrives() -> None:
    tracker = RunTracker(_state())
    for event in EVENTS[:2]:
        tracker.feed(event)
    nodes, _ = tracker.take()
    assert nodes["stats"]["state"] == "running"
    assert nodes["stats"]["reused_from"]["run_id"] == SOURCE_RUN
    tracker.feed(EVENTS[2])
    nodes, _ = tracker.take()
    assert nodes["stats"]["state"] == "success" and nodes["stats"]["reused_from"]["attempt"] == 2


def test_status_text_and_json_name_the_source_run() -> None:
    state = _folded()
    line = node_status_line("stats", state.nodes["stats"])
    assert line.split()[:4] == ["stats", "success", "attempt", "1"]
    assert f"reused from run {SOURCE_RUN} (node stats, attempt 2)" in line
    assert "reused" not in node_status_line("fresh", state.nodes["fresh"])
    assert node_status_line("fresh", state.nodes["fresh"]).rstrip().endswith("exit 0")
    assert provenance_text(state.nodes["gate"]) == f"approval carried from run {SOURCE_RUN} by ada"
    data = json.loads(json.dumps(status_json(state)))
    assert data["nodes"]["stats"]["reused_from"] == {"run_id": SOURCE_RUN, "node": "stats", "attempt": 2}
    assert "reused_from" not in data["nodes"]["fresh"]

    # when the runner's message already names the source run, the line says it once
    finished = {**EVENTS[2], "seq": 8, "message": f"reused from run {SOURCE_RUN} (node stats, attempt 2)"}
    apply(state, finished)
    assert node_status_line("stats", state.nodes["stats"]).count(SOURCE_RUN) == 1


def test_the_pane_of_a_reused_node_reads_the_source_attempt_and_shows_a_carried_approval(tmp_path: Path) -> None:
    from rho_notebook.model.graph import CommandNode

    state = _folded()
    own = tmp_path / "this" / "attempts" / "1"
    own.mkdir(parents=True)
    source = tmp_path / "source" / "attempts" / "2"
    source.mkdir(parents=True)
    (source / "value.json").write_text('{"mean": 2.5}')
    (source / "stdout").write_text('{"mean": 2.5}\n')
    node = CommandNode.model_validate(_command_fields("stats"))
    detail = load_detail(node=node, record=state.nodes["stats"], attempt_dir=own, source_dir=source)
    assert detail["reused_from"] == {"run_id": SOURCE_RUN, "node": "stats", "attempt": 2}
    assert detail["has_value"] and detail["value"] == {"mean": 2.5}
    stdout = detail["stdout"]
    assert stdout is not None and stdout["text"] == '{"mean": 2.5}\n'
    (own / "value.json").write_text('{"mean": 3}')  # the attempt's own copy wins
    detail = load_detail(node=node, record=state.nodes["stats"], attempt_dir=own, source_dir=source)
    assert detail["value"] == {"mean": 3}
    gate = load_detail(
        node=CommandNode.model_validate(_command_fields("gate")), record=state.nodes["gate"], attempt_dir=None
    )
    approval = gate["approval"]
    assert approval is not None and approval["via"] == "carried" and approval["by"] == "ada"
    assert gate["reused_from"] is None


def _command_fields(name: str) -> dict[str, Any]:
    return {
        "kind": "command",
        "name": name,
        "argv": ["true"],
        "cwd": "//",
        "timeout_seconds": 60,
        "max_output_bytes": 1 << 20,
        "executable": {"file": {"path": "/bin/true", "in_workspace": False, "sha256": "sha256:" + "0" * 64}},
    }


def test_the_pane_shows_a_python_node_definition_with_reuse() -> None:
    from rho_notebook.model.graph import PythonNode
    from rho_notebook.views.dag import definition_of

    node = PythonNode.model_validate(
        {
            "name": "stats",
            "module": "//nodes/stats.py",
            "function": "stats",
            "args": [
                {"name": "rows", "value": None, "ref": {"node": "load", "path": ["rows"]}},
                {"name": "scale", "value": 2, "ref": None},
            ],
            "cwd": "//",
            "access": "read_only",
            "modules": ["//nodes/stats.py"],
            "reuse": True,
            "needs": ["load"],
            "timeout_seconds": 60,
            "max_output_bytes": 4096,
        }
    )
    found = definition_of(node)
    assert found["module"] == "//nodes/stats.py" and found["function"] == "stats"
    assert found["args"] == ['rows={output("load", ["rows"])}', "scale=2"]
    assert found["access"] == "read_only" and found["reuse"] is True and found["reuse_inputs"] == []
