"""Script runs as every view shows them: steps are nodes in arrival order with edges from the
handles passed into later steps, a replayed step is marked, a run stopped at a step (lifecycle
``needs_decision``) names the step and the exact resume command, and the script's emitted output
is in ``status`` and ``result``.

The run states are built by folding journal events by hand (node_launched with ``step``,
step_replayed, node_finished, run_halted, script_output), as the script driver journals them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import NotFound
from rho_notebook.model.graph import Graph, ScriptSpec
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.service.wire import result_json, status_json
from rho_notebook.store.runs import RunFolder
from rho_notebook.views.dag import RunTracker, dag_view, node_detail, node_views, run_view_of
from rho_notebook.views.layout import layout_steps
from rho_notebook.views.runs import run_show_text
from rho_notebook.views.text import decision_lines, node_status_line

RUN = "01J9ZSCRIPTRUN0000000000000"
AT = "2026-12-03T10:00:00.000+00:00"
GRAPH = Graph(name="review", inputs=(), nodes=(), script=ScriptSpec(module="//review.py"))


def _step(kind: str, after: list[str] | None = None, *, recovery: str | None = None) -> dict[str, Any]:
    return {
        "kind": kind,
        "digest": f"sha256:{kind}",
        "facts": {"argv": ["true"]},
        "after": after or [],
        "recovery": recovery,
    }


def _launched(seq: int, node: str, step: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    return {"seq": seq, "kind": "node_launched", "at": AT, "node": node, "attempt": attempt, "step": step}


def _finished(seq: int, node: str, state: str = "success", attempt: int = 1) -> dict[str, Any]:
    exit_record = {"kind": "exit", "code": 0 if state == "success" else 1}
    return {
        "seq": seq,
        "kind": "node_finished",
        "at": AT,
        "node": node,
        "attempt": attempt,
        "state": state,
        "exit": exit_record,
    }


# zeta arrives first, then the two reviewers fed by its handle, then combine: names sort otherwise
EVENTS: list[dict[str, Any]] = [
    {"seq": 1, "kind": "run_started", "at": AT, "pid": 1},
    _launched(2, "zeta", _step("command")),
    _finished(3, "zeta"),
    _launched(4, "review-b", _step("agent", ["zeta"])),
    _launched(5, "review-a", _step("agent", ["zeta"])),
    _finished(6, "review-a"),
    _finished(7, "review-b"),
    _launched(8, "combine", _step("model", ["review-a", "review-b", "later"])),
    _finished(9, "combine"),
    {"seq": 10, "kind": "script_output", "at": AT, "value": {"findings": 3}},
    {"seq": 11, "kind": "run_completed", "at": AT, "outcome": "success"},
]

# the same run resumed: zeta is answered from the journal, review-a never settles (the owner was
# killed while it ran) and the next execution halts on it
RESUMED: list[dict[str, Any]] = [
    {"seq": 12, "kind": "run_started", "at": AT, "pid": 2, "resumed": True},
    {"seq": 13, "kind": "step_replayed", "at": AT, "node": "zeta", "attempt": 1, "digest": "sha256:command"},
    _launched(14, "review-a", _step("agent", ["zeta"]), attempt=2),
    {"seq": 15, "kind": "run_started", "at": AT, "pid": 3, "resumed": True},
    {"seq": 16, "kind": "step_replayed", "at": AT, "node": "zeta", "attempt": 1, "digest": "sha256:command"},
    {"seq": 17, "kind": "step_halted", "at": AT, "node": "review-a", "why": "started and never settled"},
    {"seq": 18, "kind": "run_halted", "at": AT, "steps": [{"step": "review-a", "why": "started and never settled"}]},
]


def _state(events: list[dict[str, Any]]) -> RunState:
    state = RunState(run_id=RUN, plan_id="plan", graph_digest="sha256:00", workflow="review", nodes={})
    for event in events:
        apply(state, event)
    return state


def test_steps_are_nodes_in_arrival_order_with_their_kind() -> None:
    views = node_views(_state(EVENTS), GRAPH)
    assert list(views) == ["zeta", "review-b", "review-a", "combine"]
    assert [views[name]["step_kind"] for name in views] == ["command", "agent", "agent", "model"]
    assert all(view["state"] == "success" and view["replayed"] == 0 for view in views.values())
    assert "halted" not in views["review-a"]


def test_the_layout_has_the_steps_in_arrival_order_and_edges_from_their_handles() -> None:
    view = dag_view(GRAPH, _state(EVENTS))
    wire = view.to_wire()["layout"]
    assert [node["name"] for node in wire["nodes"]] == ["zeta", "review-b", "review-a", "combine"]
    assert [node["kind"] for node in wire["nodes"]] == ["command", "agent", "agent", "model"]
    edges = sorted((edge["source"], edge["target"]) for edge in wire["edges"])
    # "later" never arrived before combine: no edge to a step that is not there
    assert edges == [("review-a", "combine"), ("review-b", "combine"), ("zeta", "review-a"), ("zeta", "review-b")]
    assert [node["layer"] for node in wire["nodes"]] == [0, 1, 1, 2]
    assert view.script and view.run is not None and view.run["script"] is True
    assert view.run["output"] == {"findings": 3}


def test_a_script_plan_has_an_empty_layout_and_a_kept_layout_follows_the_steps() -> None:
    assert dag_view(GRAPH).layout.nodes == ()
    first = layout_steps(_state(EVENTS[:3]), digest="sha256:00")
    assert [node.name for node in first.nodes] == ["zeta"]
    grown = layout_steps(_state(EVENTS[:4]), digest="sha256:00")
    assert [node.name for node in grown.nodes] == ["zeta", "review-b"]
    assert layout_steps(_state(EVENTS[:4]), digest="sha256:00") is grown


def test_the_tracker_adds_a_step_that_arrives_and_says_the_layout_grew() -> None:
    tracker = RunTracker(_state(EVENTS[:3]), graph=GRAPH)
    assert list(tracker.nodes) == ["zeta"]
    assert tracker.take_layout() is None
    assert tracker.feed(EVENTS[3])
    nodes, _ = tracker.take()
    assert list(nodes) == ["review-b"] and nodes["review-b"]["state"] == "running"
    assert tracker.run["script"] is True
    layout = tracker.take_layout()
    assert layout is not None and [node.name for node in layout.nodes] == ["zeta", "review-b"]
    assert layout.edges[0].source == "zeta" and layout.edges[0].target == "review-b"
    assert tracker.take_layout() is None  # taken: no new step since
    tracker.feed(EVENTS[4])
    tracker.feed(EVENTS[5])
    layout = tracker.take_layout()
    assert layout is not None and [node.name for node in layout.nodes] == ["zeta", "review-b", "review-a"]
    tracker.feed(EVENTS[6])  # a step that finishes is no new node
    assert tracker.take_layout() is None
    nodes, _ = tracker.take()
    assert nodes["review-b"]["state"] == "success"


def test_the_first_step_makes_the_run_view_a_script_run() -> None:
    tracker = RunTracker(_state(EVENTS[:1]), graph=GRAPH)
    assert tracker.nodes == {} and "script" not in tracker.run
    assert tracker.feed(EVENTS[1])
    nodes, run = tracker.take()
    assert list(nodes) == ["zeta"]
    assert run is not None and run["script"] is True
    layout = tracker.take_layout()
    assert layout is not None and [node.name for node in layout.nodes] == ["zeta"]


def test_a_replayed_step_is_marked_and_a_halted_step_needs_a_decision() -> None:
    tracker = RunTracker(_state(EVENTS), graph=GRAPH)
    tracker.take()
    for event in RESUMED:
        tracker.feed(event)
    nodes, run = tracker.take()
    assert nodes["zeta"]["replayed"] == 2 and nodes["zeta"]["state"] == "success"
    assert nodes["review-a"]["halted"] == "started and never settled"
    assert "halted" not in tracker.nodes["review-b"]
    assert run is not None and run["lifecycle"] == "needs_decision"
    assert run["halted"] == [{"step": "review-a", "why": "started and never settled"}]
    assert run["can_resume"] and not run["can_cancel"]
    assert tracker.take_layout() is None  # no step is new
    # resumed with a decision: the mark goes
    tracker.feed({"seq": 19, "kind": "run_started", "at": AT, "pid": 4, "resumed": True})
    nodes, run = tracker.take()
    assert "halted" not in nodes["review-a"]
    assert run is not None and run["lifecycle"] == "running" and "halted" not in run


def test_status_names_the_halted_step_and_the_exact_resume_command() -> None:
    state = _state(EVENTS + RESUMED)
    lines = decision_lines(state)
    assert lines[1] == "  review-a: started and never settled"
    assert lines[-1] == f"  rho-notebook resume {RUN} --decide review-a=rerun|skip"
    data = status_json(state)
    assert data["lifecycle"] == "needs_decision"
    assert data["halted"] == [{"step": "review-a", "why": "started and never settled"}]
    assert list(data["nodes"]) == ["zeta", "review-b", "review-a", "combine"]
    assert data["nodes"]["zeta"]["replayed"] == 2
    assert data["nodes"]["combine"]["step"] == {
        "kind": "model",
        "digest": "sha256:model",
        "facts": {"argv": ["true"]},
        "after": ["review-a", "review-b", "later"],
        "recovery": None,
    }
    assert data["output"] == {"findings": 3}
    line = node_status_line("zeta", state.nodes["zeta"])
    assert "command step" in line and "replayed 2x" in line
    assert decision_lines(_state(EVENTS)) == []


def test_status_and_result_json_carry_the_emitted_output(tmp_path: Path) -> None:
    state = _state(EVENTS)
    folder = RunFolder(path=tmp_path)
    attempt = folder.attempt_dir("combine", 1)
    attempt.mkdir(parents=True)
    (attempt / "value.json").write_text(json.dumps({"output": "two findings", "value": None}))
    result = result_json(folder, state)
    assert result["output"] == {"findings": 3}
    assert "halted" not in result
    assert list(result["nodes"]) == ["zeta", "review-b", "review-a", "combine"]
    assert result["nodes"]["combine"]["output"] == {"output": "two findings", "value": None}
    assert result["nodes"]["combine"]["step"]["kind"] == "model"
    assert status_json(state)["output"] == {"findings": 3}
    text = run_show_text(state, result)
    assert 'output of the script: {"findings": 3}' in text
    assert text.index("zeta") < text.index("review-b") < text.index("combine")
    halted = _state(EVENTS + RESUMED)
    assert result_json(folder, halted)["halted"] == [{"step": "review-a", "why": "started and never settled"}]
    assert f"rho-notebook resume {RUN} --decide review-a=rerun|skip" in run_show_text(
        halted, result_json(folder, halted)
    )


def test_a_graph_run_without_script_output_has_no_output_field(tmp_path: Path) -> None:
    state = RunState(run_id=RUN, plan_id="plan", graph_digest="sha256:00", workflow="wf", nodes={})
    assert "output" not in status_json(state)
    assert "output" not in result_json(RunFolder(path=tmp_path), state)
    view = run_view_of(state)
    assert "script" not in view and "output" not in view and "halted" not in view


def test_the_step_pane_shows_its_facts_digest_and_value(tmp_path: Path) -> None:
    state = _state(EVENTS + RESUMED)
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    (attempt / "stdout").write_text("checked\n")
    (attempt / "value.json").write_text(json.dumps({"output": "checked\n", "value": {"ok": True}}))
    detail = node_detail(GRAPH, "zeta", state.nodes["zeta"], attempt_dir=attempt)
    assert detail["kind"] == "command"
    assert detail["definition"]["digest"] == "sha256:command"
    assert detail["definition"]["argv"] == '["true"]'
    assert detail["replayed"] == 2
    assert detail["has_value"] and detail["value"] == {"output": "checked\n", "value": {"ok": True}}
    stdout = detail["stdout"]
    assert stdout is not None and stdout["text"] == "checked\n"
    halted = node_detail(GRAPH, "review-a", state.nodes["review-a"], halted="started and never settled")
    assert halted["halted"] == "started and never settled" and not halted["live"]
    assert halted["definition"]["after"] == ["zeta"]
    with pytest.raises(NotFound, match="no step named 'nobody'"):
        node_detail(GRAPH, "nobody")


def test_the_needs_decision_palette_is_one_in_the_static_and_the_live_view() -> None:
    from rho_notebook.views.svg import DECISION_STYLE, STATE_STYLE

    js = Path(__file__).resolve().parents[2] / "js" / "src"
    model = (js / "model.ts").read_text()
    _, stroke, icon = DECISION_STYLE
    # the live view's colours follow the JupyterLab theme: dagview.css's custom properties, whose
    # fallback (no theme: the widget outside JupyterLab) is the static picture's colour
    live = '["var(--rho-state-decision-bg)", "var(--rho-state-decision)", '
    assert f'DECISION_STYLE: [string, string, string] = {live}"{icon}"]' in model
    assert re.search(rf"--rho-state-decision:\s*var\(--jp-[\w-]+,\s*{stroke}\)", (js / "dagview.css").read_text())
    assert all(stroke != used for _, used, _ in STATE_STYLE.values())  # distinct from every state
