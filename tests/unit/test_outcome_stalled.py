"""The ``stalled`` outcome (an item graph whose item went nowhere): its place in the outcome
precedence, its exit code, and every place that shows an outcome (wire shapes, the DAG view's run
badge, text views, the badge colours of the widget and the lab sidebar).

The run states are folded from journal events with the real reducer, as the driver journals them.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from rho_notebook.cli.follow_verbs import exit_for
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState, Outcome, workflow_outcome
from rho_notebook.service.wire import OutcomeName, ResultJson, outcome_name, run_row_json, status_json
from rho_notebook.views.dag import run_view_of
from rho_notebook.views.runs import run_choice_label, run_show_text
from tests.unit.node_workspace import JS, REPO

PRECEDENCE = (
    Outcome.CANCELLATION,
    Outcome.DENIAL,
    Outcome.FAILURE,
    Outcome.STALLED,
    Outcome.BLOCKED,
    Outcome.SUCCESS,
)
"""Strongest first: docs/running.md, docs/graphs.md."""

NODE_STATE = {
    Outcome.CANCELLATION: NodeState.CANCELLATION,
    Outcome.DENIAL: NodeState.DENIAL,
    Outcome.FAILURE: NodeState.FAILURE,
    Outcome.BLOCKED: NodeState.BLOCKED,
    Outcome.SUCCESS: NodeState.SUCCESS,
}
"""The node state that brings each outcome but ``stalled`` (which the run, not a node, brings)."""

AT = "2026-12-03T10:00:00.000+00:00"


def _inputs(*outcomes: Outcome) -> tuple[list[tuple[NodeState, bool]], bool]:
    """(state, allow_failure) of one node per outcome, and the stalled flag."""
    states = [(NODE_STATE[o], False) for o in outcomes if o is not Outcome.STALLED]
    return states, Outcome.STALLED in outcomes


# -- precedence --------------------------------------------------------------------------------------


def test_stalled_is_an_outcome_value() -> None:
    assert Outcome.STALLED.value == "stalled"
    assert Outcome("stalled") is Outcome.STALLED


@pytest.mark.parametrize(
    ("stronger", "weaker"),
    list(itertools.combinations(PRECEDENCE, 2)),
    ids=lambda o: o.value,
)
def test_each_pair_of_outcomes_the_stronger_wins(stronger: Outcome, weaker: Outcome) -> None:
    states, stalled = _inputs(stronger, weaker)
    assert workflow_outcome(states, stalled=stalled) is stronger
    assert workflow_outcome(list(reversed(states)), stalled=stalled) is stronger


@pytest.mark.parametrize("outcome", PRECEDENCE, ids=lambda o: o.value)
def test_each_outcome_alone(outcome: Outcome) -> None:
    states, stalled = _inputs(outcome)
    assert workflow_outcome(states, stalled=stalled) is outcome


def test_a_stalled_run_with_only_successful_or_skipped_nodes_is_stalled() -> None:
    states = [(NodeState.SUCCESS, False), (NodeState.SKIPPED, False)]
    assert workflow_outcome(states, stalled=True) is Outcome.STALLED
    assert workflow_outcome(states) is Outcome.SUCCESS
    assert workflow_outcome([], stalled=True) is Outcome.STALLED


def test_failures_allowed_to_fail_do_not_hide_a_stall_but_any_cancellation_does() -> None:
    allowed = [(NodeState.SUCCESS, False), (NodeState.FAILURE, True), (NodeState.DENIAL, True)]
    assert workflow_outcome(allowed, stalled=True) is Outcome.STALLED
    assert workflow_outcome(allowed) is Outcome.SUCCESS
    cancelled = [(NodeState.SUCCESS, False), (NodeState.CANCELLATION, True)]
    assert workflow_outcome(cancelled, stalled=True) is Outcome.CANCELLATION


def test_without_stalled_the_rule_is_unchanged() -> None:
    for stronger, weaker in itertools.combinations([o for o in PRECEDENCE if o is not Outcome.STALLED], 2):
        states, _ = _inputs(stronger, weaker)
        assert workflow_outcome(states) is stronger


# -- a completed stalled run, as the journal leaves it -------------------------------------------------


def _completed(outcome: str) -> RunState:
    state = RunState(
        run_id="01J9ZSTALLED000000000000000",
        plan_id="plan",
        graph_digest="sha256:00",
        workflow="triage",
        nodes={"start": NodeRecord(), "route": NodeRecord(), "high": NodeRecord()},
    )
    events: list[dict[str, Any]] = [
        {"kind": "run_started", "pid": 1},
        {"kind": "node_launched", "node": "start", "attempt": 1},
        {"kind": "node_finished", "node": "start", "attempt": 1, "state": "success", "exit": None},
        {"kind": "node_launched", "node": "route", "attempt": 1},
        {"kind": "node_finished", "node": "route", "attempt": 1, "state": "success", "exit": None},
        {"kind": "node_skipped", "node": "high", "reason": "the condition of edge route -> high did not hold"},
        {"kind": "run_completed", "outcome": outcome},
        {"kind": "owner_exited", "pid": 1},
    ]
    for seq, event in enumerate(events, start=1):
        apply(state, {"seq": seq, "at": AT, "run_id": state.run_id, **event})
    return state


def _result(state: RunState) -> ResultJson:
    return {"run_id": state.run_id, "lifecycle": state.lifecycle.value, "outcome": outcome_name(state), "nodes": {}}


@pytest.mark.parametrize("outcome", PRECEDENCE, ids=lambda o: o.value)
def test_run_and_resume_exit_0_only_on_success_and_1_when_stalled(outcome: Outcome) -> None:
    state = _completed(outcome.value)
    assert state.lifecycle is Lifecycle.COMPLETED
    assert exit_for(state) == (0 if outcome is Outcome.SUCCESS else 1)


def test_the_wire_shapes_name_every_outcome_and_carry_stalled() -> None:
    assert set(get_args(OutcomeName)) == {o.value for o in Outcome}
    state = _completed("stalled")
    assert status_json(state)["outcome"] == "stalled"
    assert run_row_json(state)["outcome"] == "stalled"
    view = run_view_of(state)
    assert (view["lifecycle"], view["outcome"]) == ("completed", "stalled")
    generated = (JS / "src" / "wire.gen.ts").read_text(encoding="utf-8")
    union = " | ".join(f'"{name}"' for name in get_args(OutcomeName))
    assert generated.count(f"outcome: ({union}) | null;") == 3
    assert f"outcome?: ({union}) | null;" in generated


def test_text_views_show_a_stalled_run() -> None:
    state = _completed("stalled")
    shown = run_show_text(state, _result(state))
    assert shown.splitlines()[0].startswith(f"run {state.run_id} of workflow triage · completed · outcome stalled ")
    row = run_row_json(state)
    assert run_choice_label(row).endswith("completed · stalled")
    assert "outcome='stalled'" in repr(state)


@pytest.mark.parametrize(
    ("stylesheet", "selector"),
    [
        (JS / "src" / "dagview.css", ".rho-dag .rho-outcome-{}"),
        (REPO / "rho_notebook" / "widgets" / "static" / "dag.css", ".rho-dag .rho-outcome-{}"),
        (REPO / "labextension" / "style" / "index.css", ".rho-sb-oc-{}"),
    ],
    ids=["widget-source", "widget-bundle", "lab-sidebar"],
)
def test_every_outcome_has_a_badge_colour(stylesheet: Path, selector: str) -> None:
    """The run badge's class is ``...-{outcome}``: each outcome needs a rule giving it a colour."""
    css = stylesheet.read_text(encoding="utf-8")
    rules = re.findall(r"^([^{\n]+)\{([^}]*)\}", css, flags=re.MULTILINE)
    for name in get_args(OutcomeName):
        wanted = selector.format(name)
        coloured = [body for head, body in rules if wanted in [s.strip() for s in head.split(",")]]
        assert coloured, f"{stylesheet.name}: no rule for {wanted}"
        assert any("color:" in body for body in coloured), f"{stylesheet.name}: {wanted} sets no colour"
