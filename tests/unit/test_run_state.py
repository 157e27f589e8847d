"""The durable run state: the pure journal reducer (apply/replay) and the state.json snapshot."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.graph import (
    AgentNode,
    CommandNode,
    FrozenExecutable,
    FrozenFile,
    Graph,
    SchedulerLimits,
)
from rho_notebook.model.reference import Template
from rho_notebook.model.run_fold import apply, replay
from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState

S = NodeState
EXE = FrozenExecutable(file=FrozenFile(path="/bin/true", in_workspace=False, sha256="sha256:00"))
RUN = "0190a7f6-0000-7000-8000-000000000001"


def _cmd(name: str, *needs: str) -> CommandNode:
    return CommandNode(
        name=name,
        needs=tuple(sorted(needs)),
        timeout_seconds=60,
        max_output_bytes=1000,
        argv=("true",),
        cwd="//",
        executable=EXE,
    )


def _agent(name: str, *needs: str) -> AgentNode:
    return AgentNode(
        name=name,
        needs=tuple(sorted(needs)),
        timeout_seconds=60,
        max_output_bytes=1000,
        agent="reviewer",
        prompt=Template(parts=("x",)),
        access="read_only",
    )


GRAPH = Graph(
    name="review",
    inputs=(),
    nodes=tuple(
        sorted(
            [
                _agent("inspect"),
                _cmd("check", "inspect"),
                _cmd("lint", "inspect"),
                _cmd("fix", "check"),
                _cmd("deploy", "fix", "lint"),
            ],
            key=lambda n: n.name,
        )
    ),
    agents=(AgentDefinition(id="reviewer", description="reviews"),),
    scheduler=SchedulerLimits(),
)


def fresh() -> RunState:
    return RunState.fresh(run_id=RUN, plan_id="plan-1", graph=GRAPH, graph_digest="sha256:abc")


class Journal:
    """Builds journal records the way the journal writer stores them (seq, run_id, at, kind)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, kind: str, node: str | None = None, **data: Any) -> dict[str, Any]:
        seq = len(self.records) + 1
        record: dict[str, Any] = {
            "seq": seq,
            "run_id": RUN,
            "at": f"2025-01-01T00:00:{seq:02d}.000+00:00",
            "kind": kind,
        }
        if node is not None:
            record["node"] = node
        record.update(data)
        self.records.append(record)
        return record


def successful_failing_run() -> list[dict[str, Any]]:
    j = Journal()
    j("run_created", plan_id="plan-1", graph_digest="sha256:abc", mode="default")
    j("run_started", pid=100, resumed=False)
    j("node_ready", "inspect")
    j("node_launched", "inspect", attempt=1)
    j("node_finished", "inspect", attempt=1, state="success", exit=None, message="")
    j("node_ready", "check")
    j("node_ready", "lint")
    j("node_launched", "check", attempt=1)
    j("process_started", "check", attempt=1, pid=4242)
    j("output_chunk", "check", attempt=1, stream="stdout", bytes=10)
    j(
        "node_finished",
        "check",
        attempt=1,
        state="failure",
        exit={"kind": "exit", "code": 2, "signal": None},
        message="exit code 2",
    )
    j("node_blocked", "fix", reason="need 'check' ended in failure")
    j("node_launched", "lint", attempt=1)
    j("process_started", "lint", attempt=1, pid=4343)
    j("node_finished", "lint", attempt=1, state="success", exit={"kind": "exit", "code": 0, "signal": None}, message="")
    j("node_blocked", "deploy", reason="need 'fix' ended in blocked")
    j("run_completed", outcome="failure")
    j("owner_exited", pid=100)
    return j.records


# --------------------------------------------------------------------------- fresh state


def test_fresh_state_has_one_pending_record_per_node() -> None:
    state = fresh()
    assert state.workflow == "review"
    assert sorted(state.nodes) == ["check", "deploy", "fix", "inspect", "lint"]
    assert all(
        r.state is S.PENDING and r.attempts == [] and r.attempt == 0 and r.exit_code() is None
        for r in state.nodes.values()
    )
    assert state.lifecycle is Lifecycle.PLANNED
    assert state.outcome is None and state.owner_pid is None and state.last_seq == 0
    assert state.cancel_pending == [] and state.cancel_acknowledged == [] and state.cancelled is False


def test_run_created_alone_leaves_run_planned() -> None:
    j = Journal()
    state = replay(fresh(), [j("run_created", plan_id="plan-1", graph_digest="sha256:abc", mode="default")])
    assert state.lifecycle is Lifecycle.PLANNED
    assert state.last_seq == 1 and state.updated_at == j.records[0]["at"]


# --------------------------------------------------------------------------- a realistic journal


def test_replay_of_a_finished_run() -> None:
    records = successful_failing_run()
    state = replay(fresh(), records)
    assert state.lifecycle is Lifecycle.COMPLETED
    assert state.outcome == "failure"
    assert state.owner_pid is None  # owner_exited
    assert state.last_seq == len(records)
    assert state.updated_at == records[-1]["at"]
    assert {n: r.state for n, r in state.nodes.items()} == {
        "inspect": S.SUCCESS,
        "check": S.FAILURE,
        "lint": S.SUCCESS,
        "fix": S.BLOCKED,
        "deploy": S.BLOCKED,
    }
    assert state.nodes["fix"].reason == "need 'check' ended in failure"
    assert state.nodes["check"].reason == "exit code 2"
    assert state.nodes["check"].exit_code() == 2
    assert state.nodes["lint"].exit_code() == 0
    assert state.nodes["inspect"].exit_code() is None  # agents have no exit code
    assert state.nodes["fix"].exit_code() is None and state.nodes["fix"].attempt == 0
    check = state.nodes["check"].current
    assert check is not None
    assert (check.number, check.pid, check.state, check.started_at, check.ended_at) == (
        1,
        4242,
        "failure",
        records[7]["at"],
        records[10]["at"],
    )
    assert check.exit == {"kind": "exit", "code": 2, "signal": None}
    assert check.message == "exit code 2" and not check.uncertain and not check.abandoned
    assert state.uncertain_nodes() == []


def test_lifecycle_and_owner_while_running() -> None:
    records = successful_failing_run()
    state = replay(fresh(), records[:9])  # up to process_started of check
    assert state.lifecycle is Lifecycle.RUNNING
    assert state.owner_pid == 100
    assert state.outcome is None
    assert state.nodes["check"].state is S.RUNNING
    assert state.nodes["lint"].state is S.READY
    assert state.nodes["check"].current is not None and state.nodes["check"].current.pid == 4242
    assert state.nodes["check"].current.ended_at is None and state.nodes["check"].current.state is None
    assert state.nodes["check"].exit_code() is None


def test_node_skipped_records_reason() -> None:
    j = Journal()
    state = replay(
        fresh(), [j("run_started", pid=1, resumed=False), j("node_skipped", "fix", reason="condition is false")]
    )
    assert state.nodes["fix"].state is S.SKIPPED and state.nodes["fix"].reason == "condition is false"


def test_node_ready_and_launch_clear_reason() -> None:
    j = Journal()
    state = replay(
        fresh(),
        [
            j("node_reset", "check", reason="run cancelled before launch"),
            j("node_ready", "check"),
        ],
    )
    assert state.nodes["check"].state is S.READY and state.nodes["check"].reason == ""
    apply(state, j("node_reset", "check", reason="again"))
    apply(state, j("node_launched", "check", attempt=1))
    assert state.nodes["check"].state is S.RUNNING and state.nodes["check"].reason == ""


@pytest.mark.parametrize(
    ("exit", "code"),
    [
        ({"kind": "exit", "code": 0}, 0),
        ({"kind": "exit", "code": 137}, 137),
        ({"kind": "signal", "code": None, "signal": 9}, None),
        ({"kind": "timeout"}, None),
        ({"kind": "cancelled"}, None),
        ({"kind": "abnormal"}, None),
        ({"kind": "exit", "code": "0"}, None),
        (None, None),
    ],
)
def test_exit_code_only_for_integer_process_exits(exit: dict[str, Any] | None, code: int | None) -> None:
    j = Journal()
    state = replay(
        fresh(),
        [
            j("node_launched", "check", attempt=1),
            j("node_finished", "check", attempt=1, state="failure", exit=exit, message=""),
        ],
    )
    assert state.nodes["check"].exit_code() == code


def test_finish_for_unknown_attempt_still_sets_node_state() -> None:
    j = Journal()
    state = replay(
        fresh(),
        [
            j("node_launched", "check", attempt=1),
            j("node_finished", "check", attempt=9, state="denial", exit=None, message="denied"),
        ],
    )
    assert state.nodes["check"].state is S.DENIAL
    assert state.nodes["check"].current is not None and state.nodes["check"].current.state is None


@pytest.mark.parametrize("value", [member.value for member in S])
def test_a_finished_node_takes_the_journaled_state_member(value: str) -> None:
    j = Journal()
    state = replay(
        fresh(), [j("node_launched", "check", attempt=1), j("node_finished", "check", attempt=1, state=value)]
    )
    assert state.nodes["check"].state is S(value)


def test_a_finished_node_with_a_state_no_member_has_is_refused() -> None:
    j = Journal()
    state = replay(fresh(), [j("node_launched", "check", attempt=1)])
    with pytest.raises(ValueError, match="'done' is not a valid NodeState"):
        apply(state, j("node_finished", "check", attempt=1, state="done"))


def test_events_for_unknown_nodes_are_ignored() -> None:
    j = Journal()
    before = fresh()
    state = replay(
        fresh(),
        [
            j("node_ready", "ghost"),
            j("node_launched", "ghost", attempt=1),
            j("process_started", "ghost", attempt=1, pid=5),
            j("node_finished", "ghost", attempt=1, state="success", exit=None, message=""),
            j("node_reset", "ghost", reason="x"),
            j("attempt_uncertain", "ghost", attempt=1),
            j("recovery_confirmed", nodes=["ghost"]),
        ],
    )
    assert {n: r.to_json() for n, r in state.nodes.items()} == {n: r.to_json() for n, r in before.nodes.items()}
    assert state.last_seq == 7


def test_unknown_event_kinds_only_move_seq_and_time() -> None:
    j = Journal()
    state = replay(fresh(), [j("journal_repaired", bytes=12), j("orphan_stopped", pid=9), j("something_new", x=1)])
    assert state.lifecycle is Lifecycle.PLANNED and state.last_seq == 3 and state.updated_at == j.records[-1]["at"]


def test_last_seq_never_moves_backwards() -> None:
    state = fresh()
    apply(state, {"seq": 7, "kind": "owner_exited", "at": "t7"})
    apply(state, {"seq": 3, "kind": "owner_exited", "at": "t3"})
    assert state.last_seq == 7


# --------------------------------------------------------------------------- cancellation and resume


def cancelled_then_resumed() -> list[dict[str, Any]]:
    j = Journal()
    j("run_created", plan_id="plan-1", graph_digest="sha256:abc", mode="default")
    j("run_started", pid=100, resumed=False)
    j("node_ready", "inspect")
    j("node_launched", "inspect", attempt=1)
    j("node_finished", "inspect", attempt=1, state="success", exit=None, message="")
    j("node_ready", "check")
    j("node_ready", "lint")
    j("node_launched", "check", attempt=1)
    j("process_started", "check", attempt=1, pid=4242)
    j("cancel_requested", request_id="req-1")  # 10
    j("node_finished", "check", attempt=1, state="cancellation", exit={"kind": "cancelled"}, message="cancelled")
    j("node_reset", "lint", reason="run cancelled before launch")
    j("run_completed", outcome="cancellation")  # 13
    j("cancel_acknowledged", request_id="req-1")  # 14
    j("owner_exited", pid=100)  # 15
    # resume
    j("node_reset", "check", reason="new attempt after cancellation")  # 16
    j("run_started", pid=200, resumed=True)  # 17
    j("node_ready", "check")
    j("node_ready", "lint")
    j("node_launched", "check", attempt=2)  # 20
    j("process_started", "check", attempt=2, pid=5000)
    j("node_finished", "check", attempt=2, state="success", exit={"kind": "exit", "code": 0}, message="")
    j("node_launched", "lint", attempt=1)
    j("node_finished", "lint", attempt=1, state="success", exit={"kind": "exit", "code": 0}, message="")
    j("node_ready", "fix")
    j("node_launched", "fix", attempt=1)
    j("node_finished", "fix", attempt=1, state="success", exit={"kind": "exit", "code": 0}, message="")
    j("node_ready", "deploy")
    j("node_launched", "deploy", attempt=1)
    j("node_finished", "deploy", attempt=1, state="success", exit={"kind": "exit", "code": 0}, message="")
    j("run_completed", outcome="success")
    j("owner_exited", pid=200)
    return j.records


def test_cancel_request_moves_running_run_to_cancelling() -> None:
    records = cancelled_then_resumed()
    state = replay(fresh(), records[:10])
    assert state.lifecycle is Lifecycle.CANCELLING
    assert state.cancel_pending == ["req-1"] and state.cancel_acknowledged == []
    assert state.cancelled is True
    assert state.nodes["check"].state is S.RUNNING  # not marked cancelled before the owner stops it


def test_cancellation_completes_and_is_acknowledged() -> None:
    records = cancelled_then_resumed()
    state = replay(fresh(), records[:13])
    assert state.lifecycle is Lifecycle.COMPLETED and state.outcome == "cancellation"
    assert state.cancel_pending == ["req-1"]  # the acknowledgement is written after completion
    assert state.nodes["check"].state is S.CANCELLATION
    assert state.nodes["check"].current is not None and state.nodes["check"].current.exit == {"kind": "cancelled"}
    assert state.nodes["lint"].state is S.PENDING and state.nodes["lint"].reason == "run cancelled before launch"
    apply(state, records[13])
    assert state.cancel_pending == [] and state.cancel_acknowledged == ["req-1"]
    apply(state, records[14])
    assert state.owner_pid is None


def test_resume_starts_a_new_attempt_and_clears_cancel_and_outcome() -> None:
    records = cancelled_then_resumed()
    state = replay(fresh(), records[:17])
    assert state.lifecycle is Lifecycle.RUNNING
    assert state.outcome is None
    assert state.cancelled is False
    assert state.owner_pid == 200
    assert state.cancel_acknowledged == ["req-1"]
    assert state.nodes["check"].state is S.PENDING
    assert state.nodes["check"].reason == "new attempt after cancellation"
    assert state.nodes["check"].attempt == 1  # reset keeps the attempt history
    apply(state, records[17])
    apply(state, records[18])
    apply(state, records[19])
    check = state.nodes["check"]
    assert check.state is S.RUNNING
    assert [a.number for a in check.attempts] == [1, 2]
    assert check.attempt == 2
    assert check.exit_code() is None  # the current attempt has not exited yet
    assert check.attempts[0].state == "cancellation"


def test_full_cancel_resume_journal() -> None:
    records = cancelled_then_resumed()
    state = replay(fresh(), records)
    assert state.lifecycle is Lifecycle.COMPLETED and state.outcome == "success"
    assert all(r.state is S.SUCCESS for r in state.nodes.values())
    assert {n: r.attempt for n, r in state.nodes.items()} == {
        "inspect": 1,
        "check": 2,
        "lint": 1,
        "fix": 1,
        "deploy": 1,
    }
    assert state.nodes["check"].exit_code() == 0
    assert state.nodes["check"].attempts[1].pid == 5000
    assert state.nodes["check"].attempts[0].pid == 4242
    assert state.cancelled is False and state.cancel_pending == [] and state.cancel_acknowledged == ["req-1"]


def test_resume_without_resumed_flag_keeps_cancelled_marker() -> None:
    j = Journal()
    state = replay(fresh(), [j("run_started", pid=1, resumed=False), j("cancel_requested", request_id="r")])
    apply(state, j("run_started", pid=2))
    assert state.cancelled is True
    apply(state, j("run_started", pid=3, resumed=True))
    assert state.cancelled is False


@pytest.mark.parametrize(
    ("lifecycle", "after"),
    [
        (Lifecycle.PLANNED, Lifecycle.PLANNED),
        (Lifecycle.RUNNING, Lifecycle.CANCELLING),
        (Lifecycle.WAITING, Lifecycle.CANCELLING),
        (Lifecycle.CANCELLING, Lifecycle.CANCELLING),
        (Lifecycle.COMPLETED, Lifecycle.COMPLETED),
        (Lifecycle.NEEDS_RECOVERY, Lifecycle.NEEDS_RECOVERY),
    ],
)
def test_cancel_request_lifecycle_transition(lifecycle: Lifecycle, after: Lifecycle) -> None:
    state = fresh()
    state.lifecycle = lifecycle
    apply(state, {"seq": 1, "kind": "cancel_requested", "request_id": "r", "at": "t"})
    assert state.lifecycle is after
    assert state.cancel_pending == ["r"]


def test_same_cancel_request_is_recorded_once() -> None:
    j = Journal()
    state = replay(
        fresh(),
        [
            j("run_started", pid=1, resumed=False),
            j("cancel_requested", request_id="r1"),
            j("cancel_requested", request_id="r1"),
            j("cancel_requested", request_id="r2"),
        ],
    )
    assert state.cancel_pending == ["r1", "r2"]


def test_ack_of_unknown_request_is_recorded_without_touching_pending() -> None:
    j = Journal()
    state = replay(fresh(), [j("cancel_requested", request_id="r1"), j("cancel_acknowledged", request_id="other")])
    assert state.cancel_pending == ["r1"] and state.cancel_acknowledged == ["other"]


# --------------------------------------------------------------------------- uncertain attempts and recovery


def crashed_run() -> Journal:
    j = Journal()
    j("run_created", plan_id="plan-1", graph_digest="sha256:abc", mode="default")
    j("run_started", pid=100, resumed=False)
    j("node_ready", "inspect")
    j("node_launched", "inspect", attempt=1)
    j("node_finished", "inspect", attempt=1, state="success", exit=None, message="")
    j("node_ready", "check")
    j("node_ready", "lint")
    j("node_launched", "check", attempt=1)
    j("process_started", "check", attempt=1, pid=4242)
    j("node_launched", "lint", attempt=1)
    # the owner died here; the next owner finds check and lint running without a result
    return j


def test_uncertain_attempts_and_needs_recovery() -> None:
    j = crashed_run()
    j("attempt_uncertain", "check", attempt=1)
    j("attempt_uncertain", "lint", attempt=1)
    j("needs_recovery", nodes=["check", "lint"])
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.NEEDS_RECOVERY
    assert state.uncertain_nodes() == ["check", "lint"]
    assert state.nodes["check"].state is S.RUNNING  # no result is inferred
    assert state.nodes["check"].current is not None and state.nodes["check"].current.uncertain
    assert state.nodes["inspect"].current is not None and not state.nodes["inspect"].current.uncertain


def test_attempt_uncertain_only_marks_the_named_attempt() -> None:
    j = Journal()
    state = replay(
        fresh(),
        [
            j("node_launched", "check", attempt=1),
            j("node_finished", "check", attempt=1, state="cancellation", exit={"kind": "cancelled"}, message=""),
            j("node_reset", "check", reason="new attempt after cancellation"),
            j("node_launched", "check", attempt=2),
            j("attempt_uncertain", "check", attempt=1),
        ],
    )
    assert [a.uncertain for a in state.nodes["check"].attempts] == [True, False]
    assert state.uncertain_nodes() == []  # only the current attempt counts


def test_recovery_confirmed_abandons_attempts_and_resets_nodes() -> None:
    j = crashed_run()
    j("attempt_uncertain", "check", attempt=1)
    j("attempt_uncertain", "lint", attempt=1)
    j("needs_recovery", nodes=["check", "lint"])
    j("owner_exited", pid=100)
    j("orphan_stopped", pid=4242)
    j("recovery_confirmed", nodes=["check", "lint"])
    state = replay(fresh(), j.records)
    assert state.uncertain_nodes() == []
    for name in ("check", "lint"):
        record = state.nodes[name]
        assert record.state is S.PENDING
        assert record.current is not None and record.current.uncertain and record.current.abandoned
    assert state.nodes["inspect"].state is S.SUCCESS
    assert state.lifecycle is Lifecycle.NEEDS_RECOVERY  # until an owner starts
    j("run_started", pid=300, resumed=True)
    j("node_ready", "check")
    j("node_launched", "check", attempt=2)
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.RUNNING
    assert state.nodes["check"].attempt == 2
    assert state.nodes["check"].current is not None and not state.nodes["check"].current.uncertain
    assert [a.abandoned for a in state.nodes["check"].attempts] == [True, False]


def test_recovery_confirmed_skips_nodes_without_attempts() -> None:
    j = Journal()
    state = replay(fresh(), [j("node_skipped", "fix", reason="x"), j("recovery_confirmed", nodes=["fix"])])
    assert state.nodes["fix"].state is S.SKIPPED


# --------------------------------------------------------------------------- snapshots


def test_to_json_shape() -> None:
    state = replay(fresh(), successful_failing_run())
    data = state.to_json()
    assert list(data["nodes"]) == sorted(data["nodes"])
    assert data["lifecycle"] == "completed" and data["outcome"] == "failure"
    check = data["nodes"]["check"]
    assert check["state"] == "failure" and check["attempt"] == 1 and check["exit_code"] == 2
    expected_attempt = {
        "number": 1,
        "started_at": "2025-01-01T00:00:08.000+00:00",
        "ended_at": "2025-01-01T00:00:11.000+00:00",
        "pid": 4242,
        "state": "failure",
        "exit": {"kind": "exit", "code": 2, "signal": None},
        "message": "exit code 2",
        "uncertain": False,
        "abandoned": False,
    }
    attempt = check["attempts"][0]
    assert {k: attempt[k] for k in expected_attempt} == expected_attempt
    assert data["nodes"]["fix"] == {
        "state": "blocked",
        "reason": "need 'check' ended in failure",
        "attempt": 0,
        "exit_code": None,
        "attempts": [],
    }
    json.dumps(data)  # plain JSON data


@pytest.mark.parametrize("length", [0, 1, 5, 10, 13, 14, 17, 20, 32])
def test_to_json_from_json_round_trip(length: int) -> None:
    state = replay(fresh(), cancelled_then_resumed()[:length])
    data = json.loads(json.dumps(state.to_json()))
    again = RunState.from_json(data)
    assert again == state
    assert again.to_json() == state.to_json()
    assert isinstance(again.lifecycle, Lifecycle)
    assert all(isinstance(r.state, NodeState) for r in again.nodes.values())


def test_round_trip_of_uncertain_and_abandoned_attempts() -> None:
    j = crashed_run()
    j("attempt_uncertain", "check", attempt=1)
    j("attempt_uncertain", "lint", attempt=1)
    j("recovery_confirmed", nodes=["lint"])
    state = replay(fresh(), j.records)
    again = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state
    assert again.uncertain_nodes() == ["check"]


def test_from_json_defaults_for_optional_keys() -> None:
    data = {
        "run_id": RUN,
        "plan_id": "p",
        "graph_digest": "d",
        "workflow": "w",
        "lifecycle": "planned",
        "nodes": {"a": {"state": "pending"}},
    }
    state = RunState.from_json(data)
    assert state.outcome is None and state.owner_pid is None and state.last_seq == 0 and state.updated_at == ""
    assert state.cancel_pending == [] and state.cancel_acknowledged == [] and state.cancelled is False
    assert state.nodes == {"a": NodeRecord()}


def test_attempt_and_node_record_round_trip() -> None:
    attempt = AttemptRecord(
        number=3,
        started_at="s",
        ended_at="e",
        pid=1,
        state="success",
        exit={"kind": "exit", "code": 0},
        message="m",
        uncertain=True,
        abandoned=True,
    )
    assert AttemptRecord.from_json(attempt.to_json()) == attempt
    record = NodeRecord(state=S.SUCCESS, reason="r", attempts=[attempt])
    assert NodeRecord.from_json(record.to_json()) == record
    assert record.to_json()["attempt"] == 3 and record.to_json()["exit_code"] == 0


def test_snapshot_then_tail_equals_full_replay() -> None:
    """state.json + the journal after its last_seq gives the same state as replaying everything."""
    records = cancelled_then_resumed()
    full = replay(fresh(), records)
    for cut in range(len(records) + 1):
        snapshot = RunState.from_json(json.loads(json.dumps(replay(fresh(), records[:cut]).to_json())))
        tail = [r for r in records if r["seq"] > snapshot.last_seq]
        assert replay(snapshot, tail) == full, cut


# --------------------------------------------------------------------------- determinism and idempotence


@pytest.mark.parametrize("journal", [successful_failing_run, cancelled_then_resumed, lambda: crashed_run().records])
def test_replay_is_deterministic(journal: Any) -> None:
    records = journal()
    first = replay(fresh(), records)
    second = replay(fresh(), copy.deepcopy(records))
    assert first == second
    assert json.dumps(first.to_json(), sort_keys=True) == json.dumps(second.to_json(), sort_keys=True)


def test_replay_does_not_mutate_events() -> None:
    records = cancelled_then_resumed()
    before = copy.deepcopy(records)
    replay(fresh(), records)
    assert records == before


def test_replay_returns_the_state_it_was_given() -> None:
    state = fresh()
    assert replay(state, successful_failing_run()) is state


def test_apply_one_by_one_equals_replay() -> None:
    records = successful_failing_run()
    state = fresh()
    for record in records:
        apply(state, record)
    assert state == replay(fresh(), records)


@pytest.mark.parametrize(
    "kind_data",
    [
        {"kind": "run_started", "pid": 1, "resumed": False},
        {"kind": "owner_exited", "pid": 1},
        {"kind": "node_ready", "node": "check"},
        {"kind": "node_skipped", "node": "check", "reason": "r"},
        {"kind": "node_blocked", "node": "check", "reason": "r"},
        {"kind": "node_reset", "node": "check", "reason": "r"},
        {"kind": "cancel_requested", "request_id": "r"},
        {"kind": "run_completed", "outcome": "success"},
        {"kind": "needs_recovery", "nodes": ["check"]},
    ],
    ids=lambda d: d["kind"],
)
def test_state_setting_events_are_idempotent(kind_data: dict[str, Any]) -> None:
    """Events that set a value (rather than append an attempt) give the same state applied twice."""
    record = {"seq": 5, "run_id": RUN, "at": "t", **kind_data}
    once = replay(fresh(), [record])
    twice = replay(fresh(), [record, dict(record)])
    assert once == twice


# --------------------------------------------------------------------------- approvals: running <-> waiting


def approval_run() -> Journal:
    j = Journal()
    j("run_started", pid=100, resumed=False)
    j("node_ready", "check")
    j("node_launched", "check", attempt=1)
    j("approval_requested", "check", attempt=1, request_id="ap-1", approval="launch", facts={}, facts_sha256="sha256:f")
    return j


def test_waiting_while_every_running_attempt_waits_for_a_person() -> None:
    j = approval_run()
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.WAITING
    assert state.waiting_requests() == {"check": "ap-1"}
    assert state.nodes["check"].state is S.RUNNING


def test_launching_other_work_leaves_waiting() -> None:
    j = approval_run()
    j("node_ready", "lint")
    j("node_launched", "lint", attempt=1)
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.RUNNING
    assert state.waiting_requests() == {"check": "ap-1"}


def test_approval_decision_is_recorded_and_run_resumes() -> None:
    j = approval_run()
    j(
        "approval_decided",
        "check",
        attempt=1,
        request_id="ap-1",
        decision="approve",
        by="alice",
        comment="ok",
        decided_at="t",
        via="cli",
        facts_sha256="sha256:f",
    )
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.RUNNING
    assert state.waiting_requests() == {}
    current = state.nodes["check"].current
    assert current is not None and current.pending_approval is None
    assert current.approval == {
        "request_id": "ap-1",
        "decision": "approve",
        "by": "alice",
        "comment": "ok",
        "decided_at": "t",
        "via": "cli",
    }
    again = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state


def test_finishing_a_waiting_attempt_clears_the_request() -> None:
    j = approval_run()
    j("node_finished", "check", attempt=1, state="denial", exit=None, message="rejected")
    state = replay(fresh(), j.records)
    assert state.waiting_requests() == {}
    assert state.nodes["check"].current is not None and state.nodes["check"].current.pending_approval is None
    assert state.lifecycle is Lifecycle.RUNNING


def test_cancel_while_waiting_stays_cancelling() -> None:
    j = approval_run()
    j("cancel_requested", request_id="c-1")
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.CANCELLING
    apply(state, j("node_finished", "check", attempt=1, state="cancellation", exit=None, message=""))
    assert state.lifecycle is Lifecycle.CANCELLING


def test_waiting_snapshot_round_trip() -> None:
    state = replay(fresh(), approval_run().records)
    again = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state and again.lifecycle is Lifecycle.WAITING and again.waiting_requests() == {"check": "ap-1"}


def test_repr_is_one_short_line_whatever_the_graph_size() -> None:
    """asyncio.run reprs its main task's result (a RunState) when it restores SIGINT handling."""
    state = fresh()
    state.nodes["inspect"].state = S.SUCCESS
    shown = repr(state)
    assert shown == f"<RunState {RUN} planned nodes={{pending: 4, success: 1}}>"
    big = RunState.fresh(
        run_id=RUN, plan_id="plan-1", graph_digest="sha256:abc",
        graph=Graph(name="big", inputs=(), nodes=tuple(_cmd(f"n{i:04d}") for i in range(2000)), agents=(), scheduler=SchedulerLimits()),
    )  # fmt: skip
    assert repr(big) == f"<RunState {RUN} planned nodes={{pending: 2000}}>"


def test_a_resumed_owner_waiting_on_the_last_owners_request_is_waiting() -> None:
    """The owner died while a person was asked; the resumed owner waits on the same request, so
    status reads ``waiting`` from run_started on (issue 28: it read ``running``)."""
    j = Journal()
    j("run_created", plan_id="plan-1", graph_digest="sha256:abc", mode="supervised")
    j("run_started", pid=100, resumed=False)
    j("node_ready", "inspect")
    j("node_launched", "inspect", attempt=1)
    j("approval_requested", "inspect", attempt=1, request_id="req-1", approval="launch", facts={})
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.WAITING
    j("run_started", pid=200, resumed=True)
    state = replay(fresh(), j.records)
    assert state.lifecycle is Lifecycle.WAITING and state.owner_pid == 200
    j("approval_decided", "inspect", attempt=1, request_id="req-1", decision="approve", by="ann")
    assert replay(fresh(), j.records).lifecycle is Lifecycle.RUNNING
