"""The pure scheduler: decision rules, propagation, references, launch selection, determinism.

Graphs are built directly from the pydantic models. Every test states the rule it checks; the
property tests at the end compare ``Scheduler.decide`` with a small reference implementation of
the documented rules (contract: "State and outcome", "Deterministic scheduling", "Workspace
access", "Templates and conditions").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.condition import UNAVAILABLE, AllOf, AnyOf, Condition, Equals, IsOneOf, Not
from rho_notebook.model.graph import (
    AgentNode,
    ApprovalNode,
    CommandNode,
    FrozenExecutable,
    FrozenFile,
    Graph,
    PythonNode,
    SchedulerLimits,
    ShellNode,
)
from rho_notebook.model.reference import ExitCodeRef, OutputRef, StatusRef, Template
from rho_notebook.model.state import TERMINAL_STATES, NodeState
from rho_notebook.runtime.scheduler import Decision, OpenNeeds, Scheduler

S = NodeState
PENDING, READY, RUNNING = S.PENDING, S.READY, S.RUNNING
SUCCESS, FAILURE, DENIAL, CANCELLATION, SKIPPED, BLOCKED = (
    S.SUCCESS,
    S.FAILURE,
    S.DENIAL,
    S.CANCELLATION,
    S.SKIPPED,
    S.BLOCKED,
)
NON_TERMINAL = (PENDING, READY, RUNNING)
BAD_NEED_STATES = (FAILURE, DENIAL, CANCELLATION, BLOCKED)

EXE = FrozenExecutable(file=FrozenFile(path="/bin/true", in_workspace=False, sha256="sha256:00"))
AGENT_ID = "helper"


# --------------------------------------------------------------------------- graph builders


def _common(name: str, needs: Iterable[str], when: Condition | None) -> dict[str, Any]:
    return {
        "name": name,
        "needs": tuple(sorted(set(needs))),
        "when": when,
        "timeout_seconds": 60,
        "max_output_bytes": 1000,
    }


def cmd(name: str, *needs: str, when: Condition | None = None) -> CommandNode:
    return CommandNode(**_common(name, needs, when), argv=("true",), cwd="//", executable=EXE)


def sh(name: str, *needs: str, when: Condition | None = None) -> ShellNode:
    return ShellNode(**_common(name, needs, when), executable=EXE, arguments=("-c",), command="true", cwd="//")


def ro(name: str, *needs: str, when: Condition | None = None) -> AgentNode:
    """A read-only agent node (shares the checkout)."""
    return AgentNode(**_common(name, needs, when), agent=AGENT_ID, prompt=Template(parts=("x",)), access="read_only")


def mut(name: str, *needs: str, when: Condition | None = None) -> AgentNode:
    """A mutating agent node (holds the checkout alone)."""
    return AgentNode(**_common(name, needs, when), agent=AGENT_ID, prompt=Template(parts=("x",)), access="mutating")


def py_ro(name: str, *needs: str) -> PythonNode:
    """A read-only Python node (shares the checkout, takes a command slot)."""
    return PythonNode(
        **_common(name, needs, None), module="//m.py", function="f", cwd="//", access="read_only", modules=("//m.py",)
    )


def appr(name: str, *needs: str, when: Condition | None = None) -> ApprovalNode:
    return ApprovalNode(**_common(name, needs, when), prompt=Template(parts=("approve?",)))


def graph(*nodes: Any, **limits: int) -> Graph:
    return Graph(
        name="wf",
        inputs=(),
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        agents=(AgentDefinition(id=AGENT_ID, description="test agent"),),
        scheduler=SchedulerLimits(**limits),
    )


def decide(
    g: Graph,
    states: Mapping[str, NodeState] | None = None,
    *,
    exit_codes: Mapping[str, int | None] | None = None,
    outputs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Decision:
    """decide() with every unspecified node pending, no exit codes and no outputs by default."""
    full = {node.name: PENDING for node in g.nodes}
    full.update(states or {})
    values = dict(outputs or {})
    return Scheduler(g).decide(
        full,
        exit_codes=dict(exit_codes or {}),
        outputs=lambda name: values.get(name, UNAVAILABLE),
        **kwargs,
    )


def verdicts(decision: Decision) -> dict[str, NodeState]:
    return {name: state for name, state, _ in decision.decided}


def status_is(node: str, *values: str) -> IsOneOf:
    return IsOneOf(left=StatusRef(node=node), values=tuple(values))


def exit_is(node: str, code: Any) -> Equals:
    return Equals(left=ExitCodeRef(node=node), right=code)


def out_is(node: str, path: tuple[str | int, ...], value: Any) -> Equals:
    return Equals(left=OutputRef(node=node, path=path), right=value)


TRUE_C = status_is("a", "success")  # with a == success
FALSE_C = status_is("a", "failure")  # with a == success


# --------------------------------------------------------------------------- decisions without `when`


def test_root_node_without_needs_is_ready_with_empty_reason() -> None:
    d = decide(graph(cmd("a")))
    assert d.decided == [("a", READY, "")]


def test_all_needs_successful_makes_node_ready() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    d = decide(g, {"a": SUCCESS, "b": SUCCESS}, launching=False)
    assert d.decided == [("c", READY, "")]
    assert d.launches == []


@pytest.mark.parametrize("bad", BAD_NEED_STATES, ids=lambda s: s.value)
def test_failed_denied_cancelled_or_blocked_need_blocks(bad: NodeState) -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    d = decide(g, {"a": SUCCESS, "b": bad})
    assert verdicts(d) == {"c": BLOCKED}
    (_, _, reason) = d.decided[0]
    assert "'b'" in reason and bad.value in reason


def test_skipped_need_skips_node() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    d = decide(g, {"a": SUCCESS, "b": SKIPPED})
    assert verdicts(d) == {"c": SKIPPED}
    assert "'b'" in d.decided[0][2] and "skipped" in d.decided[0][2]


def test_all_needs_skipped_skips_node() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    assert verdicts(decide(g, {"a": SKIPPED, "b": SKIPPED})) == {"c": SKIPPED}


@pytest.mark.parametrize("bad", BAD_NEED_STATES, ids=lambda s: s.value)
@pytest.mark.parametrize("skipped_first", [True, False])
def test_blocked_beats_skipped_regardless_of_need_order(bad: NodeState, skipped_first: bool) -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    states = {"a": SKIPPED, "b": bad} if skipped_first else {"a": bad, "b": SKIPPED}
    assert verdicts(decide(g, states)) == {"c": BLOCKED}


def test_blocked_reason_names_first_bad_need_in_id_order() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    d = decide(g, {"a": DENIAL, "b": FAILURE})
    assert d.decided[0][:2] == ("c", BLOCKED)
    assert "'a'" in d.decided[0][2] and "denial" in d.decided[0][2]


@pytest.mark.parametrize("waiting", NON_TERMINAL, ids=lambda s: s.value)
@pytest.mark.parametrize("other", [SUCCESS, FAILURE, SKIPPED, BLOCKED], ids=lambda s: s.value)
def test_node_with_a_non_terminal_need_stays_pending(waiting: NodeState, other: NodeState) -> None:
    """Even a failed sibling need does not decide the node early: every need must be terminal."""
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    d = decide(g, {"a": other, "b": waiting})
    assert "c" not in verdicts(d)


@pytest.mark.parametrize(
    "state", [READY, RUNNING, *sorted(TERMINAL_STATES, key=lambda s: s.value)], ids=lambda s: s.value
)
def test_only_pending_nodes_are_decided(state: NodeState) -> None:
    g = graph(cmd("a"), cmd("b", "a"))
    d = decide(g, {"a": SUCCESS, "b": state}, launching=False)
    assert d.decided == []


# --------------------------------------------------------------------------- decisions with `when`


def test_when_true_makes_node_ready() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=TRUE_C))
    assert decide(g, {"a": SUCCESS}).decided == [("b", READY, "")]


def test_when_false_skips_node() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=FALSE_C))
    d = decide(g, {"a": SUCCESS})
    assert verdicts(d) == {"b": SKIPPED}
    assert d.decided[0][2]  # a reason is recorded


def test_when_unavailable_blocks_node() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=out_is("a", ("x",), 1)))
    d = decide(g, {"a": SUCCESS})  # a has no validated output
    assert verdicts(d) == {"b": BLOCKED}
    assert d.decided[0][2]


@pytest.mark.parametrize("bad", BAD_NEED_STATES + (SKIPPED,), ids=lambda s: s.value)
def test_when_decides_alone_even_if_a_need_did_not_succeed(bad: NodeState) -> None:
    """A node with `when` is decided by its condition alone, so a cleanup step can run after failure."""
    g = graph(cmd("a"), cmd("b", "a", when=status_is("a", bad.value)))
    assert verdicts(decide(g, {"a": bad})) == {"b": READY}


def test_when_false_skips_even_if_every_need_succeeded() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b", when=status_is("a", "failure")))
    assert verdicts(decide(g, {"a": SUCCESS, "b": SUCCESS})) == {"c": SKIPPED}


def test_when_can_ignore_a_failed_need_it_does_not_reference() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b", when=exit_is("b", 0)))
    assert verdicts(decide(g, {"a": FAILURE, "b": SUCCESS}, exit_codes={"b": 0})) == {"c": READY}


@pytest.mark.parametrize("waiting", NON_TERMINAL, ids=lambda s: s.value)
def test_when_is_not_evaluated_while_a_need_is_non_terminal(waiting: NodeState) -> None:
    # the condition only reads `a`, which is decided, but `b` is still outstanding
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b", when=status_is("a", "success")))
    assert "c" not in verdicts(decide(g, {"a": SUCCESS, "b": waiting}))


def test_when_reading_a_transitive_ancestor() -> None:
    g = graph(cmd("a"), cmd("b", "a"), cmd("c", "b", when=exit_is("a", 7)))
    assert verdicts(decide(g, {"a": FAILURE, "b": BLOCKED}, exit_codes={"a": 7})) == {"c": READY}


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        (AllOf(items=(TRUE_C, TRUE_C)), READY),
        (AllOf(items=(TRUE_C, FALSE_C)), SKIPPED),
        (AllOf(items=(out_is("a", ("x",), 1), FALSE_C)), SKIPPED),  # false wins over unavailable
        (AllOf(items=(out_is("a", ("x",), 1), TRUE_C)), BLOCKED),
        (AnyOf(items=(FALSE_C, TRUE_C)), READY),
        (AnyOf(items=(out_is("a", ("x",), 1), TRUE_C)), READY),  # true wins over unavailable
        (AnyOf(items=(out_is("a", ("x",), 1), FALSE_C)), BLOCKED),
        (AnyOf(items=(FALSE_C, FALSE_C)), SKIPPED),
        (Not(item=FALSE_C), READY),
        (Not(item=TRUE_C), SKIPPED),
        (Not(item=out_is("a", ("x",), 1)), BLOCKED),
    ],
)
def test_combinators_map_to_decisions(cond: Condition, expected: NodeState) -> None:
    g = graph(cmd("a"), cmd("b", "a", when=cond))
    assert verdicts(decide(g, {"a": SUCCESS})) == {"b": expected}


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES, key=lambda s: s.value), ids=lambda s: s.value)
def test_status_reference_sees_every_terminal_state(state: NodeState) -> None:
    g = graph(cmd("a"), cmd("b", "a", when=Equals(left=StatusRef(node="a"), right=state.value)))
    assert verdicts(decide(g, {"a": state})) == {"b": READY}
    others = [s.value for s in TERMINAL_STATES if s is not state]
    g2 = graph(cmd("a"), cmd("b", "a", when=status_is("a", *others)))
    assert verdicts(decide(g2, {"a": state})) == {"b": SKIPPED}


def test_status_of_allow_failure_node_is_still_failure() -> None:
    a = cmd("a").model_copy(update={"allow_failure": True})
    g = graph(a, cmd("b", "a", when=status_is("a", "failure")), cmd("c", "a"))
    assert verdicts(decide(g, {"a": FAILURE})) == {"b": READY, "c": BLOCKED}


@pytest.mark.parametrize(
    ("code", "right", "expected"),
    [
        (0, 0, READY),
        (1, 0, SKIPPED),
        (2, 2, READY),
        (-9, -9, READY),
        (1, True, SKIPPED),  # True is not the integer 1
        (0, False, SKIPPED),  # False is not the integer 0
        (0, "0", SKIPPED),
        (None, 0, BLOCKED),  # no integer exit (signal, timeout, agent): unavailable
    ],
)
def test_exit_code_reference(code: int | None, right: Any, expected: NodeState) -> None:
    g = graph(cmd("a"), cmd("b", "a", when=exit_is("a", right)))
    assert verdicts(decide(g, {"a": SUCCESS if code == 0 else FAILURE}, exit_codes={"a": code})) == {"b": expected}


def test_exit_code_missing_from_mapping_is_unavailable() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=exit_is("a", 0)))
    assert verdicts(decide(g, {"a": SUCCESS}, exit_codes={})) == {"b": BLOCKED}


def test_exit_code_of_failed_node_is_available() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=AnyOf(items=(exit_is("a", 1), exit_is("a", 2)))))
    assert verdicts(decide(g, {"a": FAILURE}, exit_codes={"a": 2})) == {"b": READY}


def test_exit_code_is_one_of() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=IsOneOf(left=ExitCodeRef(node="a"), values=(0, 1))))
    assert verdicts(decide(g, {"a": FAILURE}, exit_codes={"a": 1})) == {"b": READY}
    assert verdicts(decide(g, {"a": FAILURE}, exit_codes={"a": 3})) == {"b": SKIPPED}


OUTPUT = {
    "decision": "approve",
    "count": 2,
    "passed": True,
    "note": None,
    "items": [{"name": "first", "tags": ["x"]}, {"name": "second", "tags": []}],
}


@pytest.mark.parametrize(
    ("path", "right", "expected"),
    [
        (("decision",), "approve", READY),
        (("decision",), "revise", SKIPPED),
        (("count",), 2, READY),
        (("count",), True, SKIPPED),
        (("passed",), True, READY),
        (("passed",), 1, SKIPPED),
        (("note",), None, READY),  # an optional field that is null is a value, not unavailable
        (("note",), "x", SKIPPED),
        (("items", 0, "name"), "first", READY),
        (("items", 1, "name"), "first", SKIPPED),
        (("items", 0, "tags", 0), "x", READY),
        (("items", 1, "tags", 0), "x", BLOCKED),  # index past the end of a list
        (("items", 2), None, BLOCKED),
        (("missing",), None, BLOCKED),  # missing field: unavailable, not null
        (("note", "deeper"), None, BLOCKED),  # cannot step into null
        (("decision", 0), "a", BLOCKED),  # cannot index a string
        (("items", "name"), "first", BLOCKED),  # field name on a list
        (("count", "x"), 2, BLOCKED),
    ],
)
def test_output_reference_paths(path: tuple[str | int, ...], right: Any, expected: NodeState) -> None:
    g = graph(ro("a"), cmd("b", "a", when=out_is("a", path, right)))
    assert verdicts(decide(g, {"a": SUCCESS}, outputs={"a": OUTPUT})) == {"b": expected}


def test_output_reference_integer_step_into_record_is_unavailable() -> None:
    g = graph(ro("a"), cmd("b", "a", when=out_is("a", (0,), 1)))
    assert verdicts(decide(g, {"a": SUCCESS}, outputs={"a": {"0": 1}})) == {"b": BLOCKED}


def test_output_reference_with_empty_path_is_the_whole_value() -> None:
    g = graph(ro("a"), cmd("b", "a", when=out_is("a", (), "approve")))
    assert verdicts(decide(g, {"a": SUCCESS}, outputs={"a": "approve"})) == {"b": READY}
    assert verdicts(decide(g, {"a": SUCCESS}, outputs={"a": "revise"})) == {"b": SKIPPED}


def test_output_of_successful_node_without_validated_output_is_unavailable() -> None:
    g = graph(ro("a"), cmd("b", "a", when=out_is("a", (), None)))
    assert verdicts(decide(g, {"a": SUCCESS}, outputs={})) == {"b": BLOCKED}


@pytest.mark.parametrize("state", [FAILURE, DENIAL, CANCELLATION, SKIPPED, BLOCKED], ids=lambda s: s.value)
def test_output_of_node_that_did_not_succeed_is_unavailable(state: NodeState) -> None:
    """Even if some value is lying around, only a successful node's validated output is readable."""
    g = graph(ro("a"), cmd("b", "a", when=out_is("a", ("decision",), "approve")))
    assert verdicts(decide(g, {"a": state}, outputs={"a": OUTPUT})) == {"b": BLOCKED}


# --------------------------------------------------------------------------- propagation


def test_block_chain_propagates_to_fixpoint_in_one_pass() -> None:
    g = graph(cmd("a"), cmd("b", "a"), cmd("c", "b"), cmd("d", "c"))
    d = decide(g, {"a": FAILURE})
    assert d.decided == [
        ("b", BLOCKED, d.decided[0][2]),
        ("c", BLOCKED, d.decided[1][2]),
        ("d", BLOCKED, d.decided[2][2]),
    ]
    assert "'a'" in d.decided[0][2] and "'b'" in d.decided[1][2] and "'c'" in d.decided[2][2]


def test_propagation_reaches_children_with_smaller_ids() -> None:
    """Children named before their parent are revisited after the parent is decided."""
    g = graph(cmd("z"), cmd("y", "z"), cmd("x", "y"), cmd("w", "x"))
    d = decide(g, {"z": FAILURE})
    assert [(n, s) for n, s, _ in d.decided] == [("y", BLOCKED), ("x", BLOCKED), ("w", BLOCKED)]


def test_skip_chain_propagates_in_one_pass() -> None:
    g = graph(cmd("a"), cmd("b", "a", when=FALSE_C), cmd("c", "b"), cmd("d", "c"))
    d = decide(g, {"a": SUCCESS})
    assert [(n, s) for n, s, _ in d.decided] == [("b", SKIPPED), ("c", SKIPPED), ("d", SKIPPED)]


def test_skip_then_block_then_condition_on_status_in_one_pass() -> None:
    g = graph(
        cmd("a"),
        cmd("b", "a", when=FALSE_C),  # skipped
        cmd("c", "b", when=out_is("b", ("x",), 1)),  # output of skipped node: blocked
        cmd("d", "c", when=status_is("c", "blocked")),  # cleanup after block: ready
        cmd("e", "c"),  # blocked need: blocked
        cmd("f", "b", "e"),  # skipped + blocked: blocked
        cmd("g", "d"),  # d is only ready, not terminal
    )
    d = decide(g, {"a": SUCCESS}, launching=False)
    assert verdicts(d) == {"b": SKIPPED, "c": BLOCKED, "d": READY, "e": BLOCKED, "f": BLOCKED}


def test_diamond_decides_each_node_once() -> None:
    g = graph(cmd("a"), cmd("b", "a"), cmd("c", "a"), cmd("d", "b", "c"), cmd("e", "d"))
    d = decide(g, {"a": CANCELLATION})
    names = [n for n, _, _ in d.decided]
    assert sorted(names) == ["b", "c", "d", "e"] and len(set(names)) == len(names)
    assert set(verdicts(d).values()) == {BLOCKED}
    assert names.index("d") > max(names.index("b"), names.index("c"))


def test_propagation_stops_at_ready_nodes() -> None:
    g = graph(cmd("a"), cmd("b", "a"), cmd("c", "b"))
    d = decide(g, {"a": SUCCESS}, launching=False)
    assert d.decided == [("b", READY, "")]


def test_independent_nodes_are_decided_in_node_id_order() -> None:
    g = graph(cmd("d"), cmd("b"), ro("c"), appr("a"), sh("e"))
    d = decide(g, launching=False)
    assert [n for n, _, _ in d.decided] == ["a", "b", "c", "d", "e"]


def test_decision_does_not_mutate_input_states() -> None:
    g = graph(cmd("a"), cmd("b", "a"))
    states = {"a": FAILURE, "b": PENDING}
    decide(g, states)
    Scheduler(g).decide(states, exit_codes={}, outputs=lambda n: UNAVAILABLE)
    assert states == {"a": FAILURE, "b": PENDING}


def test_whole_graph_decided_when_every_root_is_already_terminal() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a"), cmd("d", "b", when=exit_is("b", 0)), cmd("e", "c", "d"))
    d = decide(g, {"a": SKIPPED, "b": SUCCESS}, exit_codes={"b": 1})
    assert verdicts(d) == {"c": SKIPPED, "d": SKIPPED, "e": SKIPPED}


# --------------------------------------------------------------------------- launch selection


def test_launches_ready_nodes_in_node_id_order() -> None:
    g = graph(ro("c"), ro("a"), ro("b"))
    assert decide(g, {"a": READY, "b": READY, "c": READY}).launches == ["a", "b", "c"]


def test_nodes_decided_ready_in_the_same_pass_are_launched() -> None:
    g = graph(cmd("a"), ro("b", "a"), ro("c", "a"))
    d = decide(g, {"a": SUCCESS})
    assert verdicts(d) == {"b": READY, "c": READY}
    assert d.launches == ["b", "c"]


def test_only_ready_nodes_are_launched() -> None:
    g = graph(ro("a"), ro("b"), ro("c"), ro("d"))
    d = decide(g, {"a": RUNNING, "b": SUCCESS, "c": READY, "d": SKIPPED})
    assert d.launches == ["c"]


def test_launching_false_decides_but_launches_nothing() -> None:
    g = graph(ro("a"), ro("b"), appr("c"), ro("d", "a"))
    d = decide(g, {"a": SUCCESS, "b": READY}, launching=False)
    assert verdicts(d) == {"c": READY, "d": READY}
    assert d.launches == []


def test_total_capacity_stops_the_walk() -> None:
    g = graph(ro("a"), ro("b"), ro("c"), total=2)
    assert decide(g, {n: READY for n in "abc"}).launches == ["a", "b"]


def test_total_capacity_counts_running_nodes() -> None:
    g = graph(ro("r"), ro("a"), ro("b"), total=2)
    assert decide(g, {"r": RUNNING, "a": READY, "b": READY}).launches == ["a"]
    assert decide(g, {"r": RUNNING, "a": RUNNING, "b": READY}).launches == []


def test_total_capacity_stop_also_ends_the_walk_for_later_approvals() -> None:
    g = graph(appr("a"), ro("b"), appr("c"), ro("r"), total=1)
    d = decide(g, {"a": READY, "b": READY, "r": RUNNING})
    assert d.launches == ["a"]


def test_mutating_command_needs_exclusive_checkout() -> None:
    g = graph(cmd("a"), cmd("b"), command=2)
    assert decide(g, {"a": READY, "b": READY}).launches == ["a"]


@pytest.mark.parametrize("writer", [cmd, sh, mut], ids=["command", "shell", "mutating-agent"])
def test_every_mutating_kind_holds_the_checkout_alone(writer: Any) -> None:
    g = graph(writer("a"), ro("b"), ro("c"))
    assert decide(g, {"a": READY, "b": READY, "c": READY}).launches == ["a"]
    assert decide(g, {"a": RUNNING, "b": READY, "c": READY}).launches == []


@pytest.mark.parametrize("writer", [cmd, sh, mut], ids=["command", "shell", "mutating-agent"])
def test_checkout_stop_reader_then_writer_then_reader(writer: Any) -> None:
    """ready [a-reader, b-writer, c-reader]: only a launches; c must not overtake the waiting writer."""
    g = graph(ro("a"), writer("b"), ro("c"))
    assert decide(g, {n: READY for n in "abc"}).launches == ["a"]


@pytest.mark.parametrize("writer", [cmd, sh, mut], ids=["command", "shell", "mutating-agent"])
def test_writer_waits_for_running_reader_and_later_readers_wait_too(writer: Any) -> None:
    g = graph(writer("b"), ro("c"), ro("r"))
    assert decide(g, {"b": READY, "c": READY, "r": RUNNING}).launches == []


def test_readers_share_the_checkout_up_to_checkout_readers() -> None:
    g = graph(ro("a"), ro("b"), ro("c"), ro("d"), checkout_readers=2, total=10, agent=10)
    assert decide(g, {n: READY for n in "abcd"}).launches == ["a", "b"]
    assert decide(g, {"a": RUNNING, "b": READY, "c": READY, "d": READY}).launches == ["b"]
    assert decide(g, {"a": RUNNING, "b": RUNNING, "c": READY, "d": READY}).launches == []


def test_running_read_only_python_nodes_count_as_checkout_readers() -> None:
    """Read-only Python nodes share the checkout like read-only agents: checkout_readers bounds
    them across passes too, not only within one (they take command slots, not agent slots)."""
    g = graph(*(py_ro(n) for n in "abcd"), checkout_readers=2, total=10, command=10)
    assert decide(g, {n: READY for n in "abcd"}).launches == ["a", "b"]
    assert decide(g, {"a": RUNNING, "b": READY, "c": READY, "d": READY}).launches == ["b"]
    assert decide(g, {"a": RUNNING, "b": RUNNING, "c": READY, "d": READY}).launches == []
    assert decide(g, {"a": RUNNING, "b": RUNNING, "c": READY, "d": READY}, ready=["c", "d"]).launches == []


def test_reader_waits_for_running_writer() -> None:
    g = graph(cmd("w"), ro("a"), ro("b"))
    assert decide(g, {"w": RUNNING, "a": READY, "b": READY}).launches == []


def test_agent_limit_skips_and_a_later_command_still_launches() -> None:
    g = graph(ro("a"), mut("b"), cmd("c"), agent=0)
    assert decide(g, {n: READY for n in "abc"}).launches == ["c"]


def test_command_limit_skips_and_a_later_agent_still_launches() -> None:
    g = graph(cmd("a"), sh("b"), ro("c"), ro("d"), command=0)
    assert decide(g, {n: READY for n in "abcd"}).launches == ["c", "d"]


def test_agent_limit_counts_running_agents() -> None:
    g = graph(ro("r"), ro("a"), ro("b"), agent=2, total=10, checkout_readers=10)
    assert decide(g, {"r": RUNNING, "a": READY, "b": READY}).launches == ["a"]


def test_kind_limited_node_is_skipped_not_a_stop() -> None:
    """a is skipped for its kind; the walk continues to b and then to the approval c."""
    g = graph(ro("a"), ro("b"), appr("c"), ro("r"), agent=2, total=10, checkout_readers=10)
    # agent limit: r running + b = 2. a comes first and launches; b is then at the limit.
    d = decide(g, {"a": READY, "b": READY, "c": READY, "r": RUNNING})
    assert d.launches == ["a", "c"]


def test_kind_skip_does_not_consume_capacity() -> None:
    g = graph(mut("a"), cmd("b"), agent=0, total=1)
    assert decide(g, {"a": READY, "b": READY}).launches == ["b"]


def test_shell_counts_as_command_kind() -> None:
    g = graph(sh("a"), cmd("b"), ro("c"), command=0)
    assert decide(g, {"a": READY, "b": READY, "c": READY}).launches == ["c"]


def test_approval_nodes_need_no_capacity_or_checkout() -> None:
    g = graph(appr("a"), appr("b"), cmd("w"), ro("z"), total=1, agent=1, command=1, checkout_readers=1)
    d = decide(g, {"a": READY, "b": READY, "w": RUNNING, "z": READY})
    assert d.launches == ["a", "b"]


def test_running_approvals_do_not_count_against_limits() -> None:
    g = graph(appr("p"), appr("q"), cmd("a"), total=1, command=1)
    assert decide(g, {"p": RUNNING, "q": RUNNING, "a": READY}).launches == ["a"]


def test_approval_before_a_stop_is_launched() -> None:
    g = graph(appr("a"), cmd("b"), ro("c"), cmd("r"))
    assert decide(g, {"a": READY, "b": READY, "c": READY, "r": RUNNING}).launches == ["a"]


def test_mutating_agent_counts_as_agent_kind() -> None:
    g = graph(mut("a"), agent=0)
    assert decide(g, {"a": READY}).launches == []


# --------------------------------------------------------------------------- determinism and narrowing


def test_same_inputs_give_same_decision() -> None:
    g = graph(cmd("a"), ro("b", "a"), ro("c", "a"), mut("d", "b"), appr("e", "c"), cmd("f", "a", when=exit_is("a", 0)))
    states = {"a": SUCCESS}
    first = decide(g, states, exit_codes={"a": 0})
    for _ in range(5):
        assert decide(g, states, exit_codes={"a": 0}) == first
    assert first.launches == ["b", "c"]


def test_decision_independent_of_state_mapping_order() -> None:
    g = graph(cmd("a"), ro("b", "a"), ro("c", "a"), ro("d"), cmd("e", "d"))
    forward = {"a": SUCCESS, "b": PENDING, "c": PENDING, "d": READY, "e": PENDING}
    backward = dict(reversed(list(forward.items())))
    sched = Scheduler(g)
    kw: dict[str, Any] = {"exit_codes": {}, "outputs": lambda n: UNAVAILABLE}
    assert sched.decide(forward, **kw) == sched.decide(backward, **kw)


def test_dirty_narrowing_matches_full_pass_after_a_finish() -> None:
    g = graph(cmd("a"), ro("b", "a"), ro("c", "a"), ro("d", "b", "c"), cmd("e"), ro("f", "e"))
    # consistent state: a just finished; e still running
    states = {"a": SUCCESS, "b": PENDING, "c": PENDING, "d": PENDING, "e": RUNNING, "f": PENDING}
    full = decide(g, states)
    narrow = decide(g, states, dirty={"b", "c"})
    assert narrow == full
    assert full.launches == []  # e (a writer) still holds the checkout


def test_dirty_narrowing_with_propagation_matches_full_pass() -> None:
    g = graph(cmd("z"), cmd("y", "z"), cmd("x", "y"), cmd("q"), cmd("p", "q"))
    states = {"z": FAILURE, "q": RUNNING}
    assert decide(g, states, dirty=["y"]) == decide(g, states)


def test_dirty_ignores_non_pending_and_duplicate_names() -> None:
    g = graph(cmd("a"), cmd("b", "a"))
    d = decide(g, {"a": FAILURE}, dirty=["a", "b", "b", "a"])
    assert d.decided == decide(g, {"a": FAILURE}).decided


def test_dirty_only_narrows_what_is_looked_at() -> None:
    g = graph(cmd("a"), cmd("b", "a"), cmd("c"))
    d = decide(g, {"a": FAILURE}, dirty=["b"], launching=False)
    assert verdicts(d) == {"b": BLOCKED}  # c is not looked at


def test_ready_narrowing_matches_full_pass_at_fixpoint() -> None:
    g = graph(ro("a"), appr("ab"), ro("b"), cmd("c"), ro("d"), checkout_readers=2)
    states = {"a": READY, "ab": READY, "b": READY, "c": READY, "d": READY}
    full = decide(g, states)
    assert decide(g, states, ready=set(states), dirty=set()) == full
    assert full.launches == ["a", "ab", "b"]


def test_ready_names_that_are_not_ready_are_ignored() -> None:
    g = graph(ro("a"), ro("b"), ro("c"))
    d = decide(g, {"a": RUNNING, "b": SUCCESS, "c": READY}, ready=["b", "a", "c"])
    assert d.launches == ["c"]


def test_ready_narrowing_includes_nodes_decided_ready_in_the_same_pass() -> None:
    g = graph(cmd("a"), ro("b", "a"))
    states = {"a": SUCCESS, "b": PENDING}
    full = decide(g, states)
    assert full.launches == ["b"]
    # consistent narrowing: b is the only dirty node and no node is READY in the input states
    assert decide(g, states, dirty={"b"}, ready=set()) == full


def test_duplicate_ready_names_launch_a_node_once() -> None:
    g = graph(ro("a"))
    assert decide(g, {"a": READY}, ready=["a", "a"]).launches == ["a"]


# --------------------------------------------------------------------------- reference implementation


_NA = object()


def ref_lookup(
    ref: Any, states: Mapping[str, NodeState], exit_codes: Mapping[str, int | None], outputs: Mapping[str, Any]
) -> Any:
    state = states[ref.node]
    if state not in TERMINAL_STATES:
        return _NA
    if isinstance(ref, StatusRef):
        return state.value
    if isinstance(ref, ExitCodeRef):
        code = exit_codes.get(ref.node)
        return _NA if code is None else code
    if state is not SUCCESS or ref.node not in outputs:
        return _NA
    value = outputs[ref.node]
    for step in ref.path:
        if type(step) is str and type(value) is dict and step in value:
            value = value[step]
        elif type(step) is int and type(value) is list and -len(value) <= step < len(value):
            value = value[step]
        else:
            return _NA
    return value


def ref_eval(cond: Condition, get: Any) -> bool | None:
    """Three-valued logic: True, False, None (unavailable)."""
    if isinstance(cond, Equals):
        v = get(cond.left)
        return None if v is _NA else (type(v) is type(cond.right) and v == cond.right)
    if isinstance(cond, IsOneOf):
        v = get(cond.left)
        return None if v is _NA else any(type(v) is type(x) and v == x for x in cond.values)
    if isinstance(cond, Not):
        inner = ref_eval(cond.item, get)
        return None if inner is None else (not inner)
    results = [ref_eval(c, get) for c in cond.items]
    if isinstance(cond, AllOf):
        return False if False in results else (None if None in results else True)
    return True if True in results else (None if None in results else False)


def ref_decide_states(
    g: Graph, states: Mapping[str, NodeState], exit_codes: Mapping[str, int | None], outputs: Mapping[str, Any]
) -> dict[str, NodeState]:
    """Sweep in node-ID order until nothing changes; returns the newly decided states."""
    current = dict(states)
    by_name = {n.name: n for n in g.nodes}
    changed = True
    while changed:
        changed = False
        for name in sorted(by_name):
            node = by_name[name]
            if current[name] is not PENDING:
                continue
            needs = [current[n] for n in node.needs]
            if not all(s in TERMINAL_STATES for s in needs):
                continue
            if node.when is not None:
                verdict = ref_eval(node.when, lambda r: ref_lookup(r, current, exit_codes, outputs))
                new = {True: READY, False: SKIPPED, None: BLOCKED}[verdict]
            elif any(s in BAD_NEED_STATES for s in needs):
                new = BLOCKED
            elif SKIPPED in needs:
                new = SKIPPED
            else:
                new = READY
            current[name] = new
            changed = True
    return {n: s for n, s in current.items() if s is not states[n]}


def kind_of(node: Any) -> str:
    if isinstance(node, ApprovalNode):
        return "approval"
    if isinstance(node, AgentNode):
        return "reader" if node.access == "read_only" else "agent-writer"
    return "command"


def ref_launches(g: Graph, current: Mapping[str, NodeState]) -> list[str]:
    lim = g.scheduler
    by_name = {n.name: n for n in g.nodes}
    running = [kind_of(by_name[n]) for n, s in current.items() if s is RUNNING]
    total = sum(k != "approval" for k in running)
    agents = sum(k in ("reader", "agent-writer") for k in running)
    commands = sum(k == "command" for k in running)
    readers = sum(k == "reader" for k in running)
    writers = sum(k in ("command", "agent-writer") for k in running)
    out: list[str] = []
    for name in sorted(n for n, s in current.items() if s is READY):
        k = kind_of(by_name[name])
        if k == "approval":
            out.append(name)
            continue
        if total >= lim.total:
            break
        if k == "reader":
            if writers > 0 or readers >= lim.checkout_readers:
                break
        elif writers > 0 or readers > 0:
            break
        if k == "command":
            if commands >= lim.command:
                continue
            commands += 1
            writers += 1
        else:
            if agents >= lim.agent:
                continue
            agents += 1
            if k == "reader":
                readers += 1
            else:
                writers += 1
        total += 1
        out.append(name)
    return out


# --------------------------------------------------------------------------- random graphs

NAME_POOL = [f"{c}{i}" for c in "abcdefghk" for i in range(3)]


def random_condition(rng: random.Random, ancestors: list[str], kinds: Mapping[str, str], depth: int = 0) -> Condition:
    if depth < 2 and rng.random() < 0.35:
        op = rng.choice(["all", "any", "not"])
        if op == "not":
            return Not(item=random_condition(rng, ancestors, kinds, depth + 1))
        items = tuple(random_condition(rng, ancestors, kinds, depth + 1) for _ in range(rng.randint(1, 3)))
        return AllOf(items=items) if op == "all" else AnyOf(items=items)
    node = rng.choice(ancestors)
    leaf = rng.randrange(7)
    states = [s.value for s in TERMINAL_STATES]
    if leaf == 0:
        return Equals(left=StatusRef(node=node), right=rng.choice(states))
    if leaf == 1:
        return IsOneOf(left=StatusRef(node=node), values=tuple(rng.sample(sorted(states), rng.randint(0, 3))))
    if leaf == 2:
        return Equals(left=ExitCodeRef(node=node), right=rng.choice([0, 1, 2, True, False]))
    if leaf == 3:
        return Equals(left=OutputRef(node=node, path=("v",)), right=rng.choice([0, 1, 2, True]))
    if leaf == 4:
        return Equals(left=OutputRef(node=node, path=("items", rng.choice([0, 1, -1, 5]))), right=rng.choice([0, 1]))
    if leaf == 5:
        return Equals(left=OutputRef(node=node, path=("opt",)), right=rng.choice([None, "s"]))
    return IsOneOf(left=OutputRef(node=node, path=(rng.choice(["flag", "missing"]),)), values=(True, 1))


def random_graph(rng: random.Random, *, min_limit: int = 0) -> Graph:
    n = rng.randint(1, 10)
    names = rng.sample(NAME_POOL, n)  # topological order, unrelated to ID order
    kinds: dict[str, str] = {}
    ancestors: dict[str, set[str]] = {}
    nodes = []
    for i, name in enumerate(names):
        earlier = names[:i]
        needs = [e for e in earlier if rng.random() < 0.35]
        anc = set(needs).union(*(ancestors[x] for x in needs)) if needs else set()
        ancestors[name] = anc
        when = random_condition(rng, sorted(anc), kinds) if anc and rng.random() < 0.4 else None
        maker = rng.choice([cmd, sh, ro, ro, mut, appr])
        nodes.append(maker(name, *needs, when=when))
        kinds[name] = maker.__name__
    return graph(
        *nodes,
        total=rng.randint(max(1, min_limit), 4),
        agent=rng.randint(min_limit, 3),
        command=rng.randint(min_limit, 2),
        checkout_readers=rng.randint(min_limit, 3),
    )


def topo(g: Graph) -> list[str]:
    done: list[str] = []
    left = {n.name: set(n.needs) for n in g.nodes}
    while left:
        free = sorted(n for n, needs in left.items() if not needs - set(done))
        done.extend(free)
        for n in free:
            del left[n]
    return done


def random_output(rng: random.Random) -> Any:
    if rng.random() < 0.2:
        return UNAVAILABLE
    value: dict[str, Any] = {
        "v": rng.choice([0, 1, 2, True]),
        "items": [rng.choice([0, 1, False]) for _ in range(rng.randint(0, 3))],
        "flag": rng.choice([True, False, 1]),
    }
    if rng.random() < 0.7:
        value["opt"] = rng.choice([None, "s"])
    return value


def random_run_state(
    rng: random.Random, g: Graph
) -> tuple[dict[str, NodeState], dict[str, int | None], dict[str, Any]]:
    """A plausible durable state: a node leaves pending only after every need is terminal."""
    by_name = {n.name: n for n in g.nodes}
    states: dict[str, NodeState] = {}
    exit_codes: dict[str, int | None] = {}
    outputs: dict[str, Any] = {}
    for name in topo(g):
        node = by_name[name]
        if not all(states[x] in TERMINAL_STATES for x in node.needs) or rng.random() < 0.3:
            states[name] = PENDING
            continue
        state = rng.choice([READY, RUNNING, SUCCESS, SUCCESS, FAILURE, DENIAL, CANCELLATION, SKIPPED, BLOCKED])
        states[name] = state
        if kind_of(node) == "command" and state in (SUCCESS, FAILURE):
            exit_codes[name] = 0 if state is SUCCESS else rng.choice([1, 2, None])
        else:
            exit_codes[name] = None
        if state is SUCCESS:
            value = random_output(rng)
            if value is not UNAVAILABLE:
                outputs[name] = value
    return states, exit_codes, outputs


def run_decide(
    g: Graph,
    states: Mapping[str, NodeState],
    exit_codes: Mapping[str, int | None],
    outputs: Mapping[str, Any],
    **kw: Any,
) -> Decision:
    return Scheduler(g).decide(states, exit_codes=exit_codes, outputs=lambda n: outputs.get(n, UNAVAILABLE), **kw)


@pytest.mark.parametrize("seed", range(400))
def test_random_dag_matches_reference(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng)
    states, exit_codes, outputs = random_run_state(rng, g)
    d = run_decide(g, states, exit_codes, outputs)
    expected = ref_decide_states(g, states, exit_codes, outputs)
    names = [n for n, _, _ in d.decided]
    assert len(names) == len(set(names)), "each node is decided at most once per pass"
    assert all(states[n] is PENDING for n in names)
    assert verdicts(d) == expected
    for _name, state, reason in d.decided:
        assert (reason == "") == (state is READY)
    after = {**states, **expected}
    assert d.launches == ref_launches(g, after)
    # same inputs -> same decision; launching=False decides the same and launches nothing
    assert run_decide(g, states, exit_codes, outputs) == d
    quiet = run_decide(g, states, exit_codes, outputs, launching=False)
    assert quiet.decided == d.decided and quiet.launches == []


def check_limits(g: Graph, states: Mapping[str, NodeState]) -> None:
    lim = g.scheduler
    by_name = {n.name: n for n in g.nodes}
    running = [kind_of(by_name[n]) for n, s in states.items() if s is RUNNING]
    readers = running.count("reader")
    writers = running.count("command") + running.count("agent-writer")
    assert sum(k != "approval" for k in running) <= lim.total
    assert readers + running.count("agent-writer") <= lim.agent
    assert running.count("command") <= lim.command
    assert readers <= lim.checkout_readers
    assert writers <= 1 and not (writers and readers)


@pytest.mark.parametrize("seed", range(200))
def test_random_simulation_dirty_narrowing_limits_and_liveness(seed: int) -> None:
    """Drive a whole run: after each finish, a dirty-narrowed pass equals the full pass."""
    rng = random.Random(10_000 + seed)
    g = random_graph(rng, min_limit=1)
    sched = Scheduler(g)
    children = sched.children
    states = {n.name: PENDING for n in g.nodes}
    exit_codes: dict[str, int | None] = {}
    outputs: dict[str, Any] = {}
    dirty: set[str] | None = None
    for _ in range(10 * len(states) + 10):
        full = run_decide(g, states, exit_codes, outputs)
        if dirty is not None:
            assert run_decide(g, states, exit_codes, outputs, dirty=dirty) == full
            expected = ref_decide_states(g, states, exit_codes, outputs)
            assert verdicts(full) == expected
        for name, state, _ in full.decided:
            states[name] = state
        assert full.launches == ref_launches(g, states)
        for name in full.launches:
            states[name] = RUNNING
        check_limits(g, states)
        # a fixpoint: deciding again changes nothing
        again = run_decide(g, states, exit_codes, outputs, launching=False)
        assert again.decided == []
        running = sorted(n for n, s in states.items() if s is RUNNING)
        if not running:
            break
        done = rng.choice(running)
        result = rng.choice([SUCCESS, SUCCESS, SUCCESS, FAILURE, DENIAL, CANCELLATION])
        states[done] = result
        node = sched.nodes[done]
        if kind_of(node) == "command":
            exit_codes[done] = {SUCCESS: 0, FAILURE: rng.choice([1, 2])}.get(result)
        if result is SUCCESS:
            value = random_output(rng)
            if value is not UNAVAILABLE:
                outputs[done] = value
        dirty = set(children[done])
    assert all(s in TERMINAL_STATES for s in states.values()), states


# --------------------------------------------------------------------------- OpenNeeds


def test_open_needs_dirties_a_node_when_its_last_need_ends_once() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"), cmd("d", "c"))
    open_needs = OpenNeeds(Scheduler(g), {"a": PENDING, "b": PENDING, "c": PENDING, "d": PENDING})
    dirty: set[str] = set()
    open_needs.ended("a", dirty)
    open_needs.ended("a", dirty)  # reported twice: counted once
    assert dirty == set()
    open_needs.ended("b", dirty)
    assert dirty == {"c"}


def test_open_needs_counts_needs_already_terminal_when_it_starts() -> None:
    g = graph(cmd("a"), cmd("b"), cmd("c", "a", "b"))
    open_needs = OpenNeeds(Scheduler(g), {"a": SUCCESS, "b": RUNNING, "c": PENDING})
    dirty: set[str] = set()
    open_needs.ended("a", dirty)  # terminal already: nothing changes
    assert dirty == set()
    open_needs.ended("b", dirty)
    assert dirty == {"c"}


@pytest.mark.parametrize("seed", range(100))
def test_random_simulation_open_needs_narrowing_equals_the_full_pass(seed: int) -> None:
    """Drive a whole run as the driver does: ``dirty`` holds only the nodes whose last open need
    ended (finishes, and skips or blocks decided in a pass); the narrowed pass equals the full one."""
    rng = random.Random(20_000 + seed)
    g = random_graph(rng, min_limit=1)
    sched = Scheduler(g)
    states = {n.name: PENDING for n in g.nodes}
    exit_codes: dict[str, int | None] = {}
    outputs: dict[str, Any] = {}
    open_needs = OpenNeeds(sched, states)
    dirty: set[str] | None = None
    for _ in range(10 * len(states) + 10):
        full = run_decide(g, states, exit_codes, outputs)
        if dirty is not None:
            assert run_decide(g, states, exit_codes, outputs, dirty=dirty) == full
        dirty = set()
        for name, state, _ in full.decided:
            states[name] = state
            if state in TERMINAL_STATES:
                open_needs.ended(name, dirty)
        for name in full.launches:
            states[name] = RUNNING
        running = sorted(n for n, s in states.items() if s is RUNNING)
        if not running:
            break
        done = rng.choice(running)
        result = rng.choice([SUCCESS, SUCCESS, FAILURE, DENIAL, CANCELLATION])
        states[done] = result
        if result is SUCCESS:
            value = random_output(rng)
            if value is not UNAVAILABLE:
                outputs[done] = value
        open_needs.ended(done, dirty)
    assert all(s in TERMINAL_STATES for s in states.values()), states
