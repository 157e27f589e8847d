"""The launch gate's decisions without a run: its order, its wordings and failing closed
(tests/cli/test_policy_matrix.py runs every rule against every launch of every form)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rho_notebook.model.state import NodeState
from rho_notebook.policy.approvals import ApprovalDecision
from rho_notebook.policy.gate import Launch, LaunchGate
from rho_notebook.policy.permission import LaunchKind, PermissionMode

FACTS = {"argv": ["touch", "x"]}


class Person:
    """Answers every request with ``decision`` and remembers what it was asked."""

    def __init__(self, decision: str | None) -> None:
        self.decision = decision
        self.asked: list[tuple[str, float]] = []

    async def __call__(self, node: str, attempt: int, **kw: Any) -> ApprovalDecision | None:
        self.asked.append((node, kw["timeout"]))
        if self.decision is None:
            return None
        return ApprovalDecision(
            request_id="r", decision=self.decision, by="ann", at="now", via="cli", comment="no", facts_sha256="sha256:0"
        )


def gate(mode: PermissionMode, person: Person, *, carried: bool = False, responder: bool = True) -> LaunchGate:
    return LaunchGate(
        run_id="run",
        mode=mode,
        hooks={},
        workspace=Path("/"),
        emit=lambda *records: None,
        carry=lambda node, attempt, facts: carried,
        ask=person,
        attended=lambda: responder,
        approval_timeout=0.0,
    )


def admit(g: LaunchGate, launch: Launch, facts: dict[str, Any] | None = FACTS) -> tuple[str, str] | None:
    refusal = asyncio.run(g.admit(launch, facts, cancel=None))
    return None if refusal is None else (refusal.state.value, refusal.message)


COMMAND = Launch(kind=LaunchKind.COMMAND, node="n", attempt=1, approval_seconds=7)


def test_plan_mode_denies_before_anything_is_asked_and_needs_no_facts() -> None:
    person = Person("approve")
    g = gate(PermissionMode.PLAN, person)
    assert not g.needs_facts(COMMAND)
    assert admit(g, COMMAND, None) == ("denial", "denied by permission mode 'plan': nothing was started")
    assert person.asked == []


def test_model_calls_and_read_only_agents_start_in_every_mode() -> None:
    for mode in PermissionMode:
        g = gate(mode, Person("deny"))
        assert admit(g, Launch(kind=LaunchKind.MODEL, node="m", attempt=1)) is None
        assert admit(g, Launch(kind=LaunchKind.AGENT, node="a", attempt=1, read_only=True)) is None


def test_supervised_asks_with_the_launch_budget_and_a_denial_names_who() -> None:
    person = Person("deny")
    assert admit(gate(PermissionMode.SUPERVISED, person), COMMAND) == ("denial", "launch denied by ann: no")
    assert person.asked == [("n", 7)]
    assert admit(gate(PermissionMode.SUPERVISED, Person("approve")), COMMAND) is None


def test_a_carried_approval_is_not_asked_again() -> None:
    person = Person("deny")
    assert admit(gate(PermissionMode.SUPERVISED, person, carried=True), COMMAND) is None
    assert person.asked == []


def test_nobody_deciding_fails_closed() -> None:
    refused = admit(gate(PermissionMode.SUPERVISED, Person(None), responder=False), COMMAND)
    assert refused == (
        "denial",
        "supervised launch needs approval; no approval responder is available within 0 s, so it fails closed",
    )


def test_missing_facts_for_a_launch_that_asks_fail_closed() -> None:
    person = Person("approve")
    refused = admit(gate(PermissionMode.SUPERVISED, person), COMMAND, None)
    assert refused is not None and refused[0] == NodeState.DENIAL.value and "fails closed" in refused[1]
    assert person.asked == []


def test_hooks_see_the_kind_of_launch_as_their_tool() -> None:
    assert [k.tool for k in LaunchKind if k is not LaunchKind.NONE] == [
        "workflow_command",
        "workflow_python",
        "workflow_agent",
        "workflow_model",
        "workflow_script",
    ]


def test_an_edited_agent_has_other_launch_facts_so_no_approval_carries_to_it() -> None:
    from rho_notebook.model.agent import AgentDefinition, agent_launch_facts
    from rho_notebook.policy.approvals import facts_digest

    agent = AgentDefinition(id="fixer", description="fixes", tools=("read_file",), body="Be careful.")
    same = agent_launch_facts(agent, access="mutating", prompt="fix it")
    assert facts_digest(same) == facts_digest(agent_launch_facts(agent, access="mutating", prompt="fix it"))
    for edited in (
        agent.model_copy(update={"body": "Be quick."}),
        agent.model_copy(update={"model": "other"}),
        agent.model_copy(update={"tools": ("read_file", "write_file")}),
    ):
        assert facts_digest(agent_launch_facts(edited, access="mutating", prompt="fix it")) != facts_digest(same)
