"""``failure (handled)`` / ``denial (handled)`` (issue 33 point 1), folded from a script run's
journal: a step that failed or was denied while the script went on (a later step call in the same
execution, or the run succeeded) is handled; in a run that failed, none is (resume runs each
again). Shown by the one rule (:func:`rho_notebook.service.wire.shown_state`) in node views, the
status JSON and text, and the live tracker."""

from __future__ import annotations

import json
from typing import Any

from rho_notebook.model.run_fold import replay
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.service.wire import allowed_failures_of, shown_state, status_json
from rho_notebook.views.state import node_views
from rho_notebook.views.text import node_status_line
from rho_notebook.views.tracker import RunTracker

AT = "2026-01-01T00:00:00Z"
STEP = {"kind": "command", "digest": "sha256:d", "facts": {}, "after": [], "recovery": None}


def fresh(*graph_nodes: str) -> RunState:
    return RunState(
        run_id="01RUN",
        plan_id="01PLAN",
        graph_digest="sha256:none",
        workflow="wf",
        nodes={name: NodeRecord() for name in graph_nodes},
    )


class Journal:
    """Records with increasing seq, as a script driver journals them."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, kind: str, **fields: Any) -> dict[str, Any]:
        record = {"seq": len(self.records) + 1, "kind": kind, "at": AT, **fields}
        self.records.append(record)
        return record

    def started(self, *, resumed: bool = False) -> None:
        self("run_started", pid=1, resumed=resumed)

    def step(self, key: str, state: str, attempt: int = 1) -> None:
        self("node_launched", node=key, attempt=attempt, step=STEP)
        self("node_finished", node=key, attempt=attempt, state=state, message=f"{key} {state}")


def shown(journal: Journal, state: RunState | None = None) -> dict[str, str]:
    folded = replay(state or fresh(), journal.records)
    return {name: shown_state(record) for name, record in folded.nodes.items()}


def test_a_failure_the_script_went_on_from_is_handled_at_the_next_call() -> None:
    j = Journal()
    j.started()
    j.step("a", "failure")
    assert shown(j) == {"a": "failure"}  # nothing after it yet: the script may fail of it
    j("node_launched", node="b", attempt=1, step=STEP)
    assert shown(j) == {"a": "failure_handled", "b": "running"}
    j("node_finished", node="b", attempt=1, state="success", message="")
    j("run_completed", outcome="success")
    assert shown(j) == {"a": "failure_handled", "b": "success"}


def test_the_last_failure_is_handled_when_the_run_succeeds_and_a_failure_when_it_fails() -> None:
    for outcome, expected in (("success", "failure_handled"), ("failure", "failure")):
        j = Journal()
        j.started()
        j.step("a", "success")
        j.step("b", "failure")
        j("run_completed", outcome=outcome)
        assert shown(j) == {"a": "success", "b": expected}, outcome


def test_in_a_run_that_failed_no_failure_is_handled_even_one_the_script_went_on_from() -> None:
    j = Journal()
    j.started()
    j.step("a", "failure")
    j.step("b", "success")
    assert shown(j)["a"] == "failure_handled"
    j("run_completed", outcome="failure")
    assert shown(j) == {"a": "failure", "b": "success"}  # any failure may be why; resume runs it again


def test_a_denied_step_is_denial_handled_and_a_cancelled_one_stays_cancelled() -> None:
    j = Journal()
    j.started()
    j.step("a", "denial")
    j.step("b", "cancellation")
    j.step("c", "success")
    j("run_completed", outcome="success")
    assert shown(j) == {"a": "denial_handled", "b": "cancellation", "c": "success"}


def test_a_halt_or_divergence_is_a_call_after_the_failure() -> None:
    for kind, extra in (("step_halted", {"why": "started and never settled"}), ("step_diverged", {})):
        j = Journal()
        j.started()
        j.step("a", "failure")
        j(kind, node="b", **extra)
        assert shown(j)["a"] == "failure_handled", kind


def test_a_skipped_failure_is_answered_again_and_handled_only_when_the_script_goes_on() -> None:
    j = Journal()
    j.started()
    j.step("check", "failure")
    j("run_completed", outcome="failure")
    j.started(resumed=True)
    j("step_replayed", node="check", attempt=1, digest="sha256:d", decision="skip")
    assert shown(j) == {"check": "failure"}
    j("run_completed", outcome="success")
    assert shown(j) == {"check": "failure_handled"}


def test_a_new_execution_does_not_go_on_from_the_last_ones_failures() -> None:
    j = Journal()
    j.started()
    j.step("a", "failure")  # the owner died here: no run_completed
    j.started(resumed=True)
    j("node_launched", node="b", attempt=1, step=STEP)
    assert shown(j)["a"] == "failure"


def test_graph_nodes_are_never_handled_and_a_successful_scripts_failures_are_not_allowed() -> None:
    j = Journal()
    j.started()
    j("node_launched", node="g", attempt=1)
    j("node_finished", node="g", attempt=1, state="failure", message="")
    j("run_completed", outcome="success")
    state = replay(fresh("g"), j.records)
    assert shown_state(state.nodes["g"]) == "failure"
    assert allowed_failures_of(state) == frozenset({"g"})  # a graph run that succeeded: allowed

    s = Journal()
    s.started()
    s.step("a", "failure")
    s("run_completed", outcome="success")
    script = replay(fresh(), s.records)
    assert allowed_failures_of(script) == frozenset()  # a script's step is handled, not allowed
    assert status_json(script)["nodes"]["a"]["shown"] == "failure_handled"
    assert node_views(script)["a"]["shown"] == "failure_handled"
    assert "failure (handled)" in node_status_line("a", script.nodes["a"])


def test_a_snapshot_then_the_tail_folds_as_the_whole_journal() -> None:
    j = Journal()
    j.started()
    j.step("a", "failure")
    j.step("b", "denial")
    j("node_launched", node="c", attempt=1, step=STEP)
    j("node_finished", node="c", attempt=1, state="failure", message="")
    j("run_completed", outcome="success")
    full = replay(fresh(), j.records)
    for cut in range(len(j.records) + 1):
        snapshot = RunState.from_json(json.loads(json.dumps(replay(fresh(), j.records[:cut]).to_json())))
        tail = [r for r in j.records if r["seq"] > snapshot.last_seq]
        assert replay(snapshot, tail) == full, cut


def test_the_live_tracker_shows_the_failure_handled_when_the_script_goes_on() -> None:
    j = Journal()
    j.started()
    j.step("a", "failure")
    tracker = RunTracker(fresh())
    for record in j.records:
        tracker.feed(record)
    assert tracker.nodes["a"]["shown"] == "failure"
    tracker.take()
    tracker.feed(j("node_launched", node="b", attempt=1, step=STEP))
    changed, _ = tracker.take()
    assert changed["a"]["shown"] == "failure_handled"  # the view of a step the event does not name

    last = Journal()
    last.started()
    last.step("a", "failure")
    tracker = RunTracker(fresh())
    for record in last.records:
        tracker.feed(record)
    tracker.take()
    tracker.feed(last("run_completed", outcome="success"))
    changed, _ = tracker.take()
    assert changed["a"]["shown"] == "failure_handled"
