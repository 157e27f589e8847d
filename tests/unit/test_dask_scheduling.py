"""The checkout rule with a remote executor (runtime/scheduler.py): in a workflow whose
``checkout = "shared"``, nodes that may run remotely take no checkout slot when the run has a
remote executor; everything else keeps the local rules. Pure: the scheduler on hand-built graphs."""

from __future__ import annotations

from typing import Any

import pytest

from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import (
    AgentNode,
    CommandNode,
    FrozenExecutable,
    FrozenFile,
    Graph,
    PythonNode,
    SchedulerLimits,
)
from rho_notebook.model.reference import Template
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.scheduler import Scheduler

BUDGET: dict[str, Any] = {"timeout_seconds": 60, "max_output_bytes": 100}
EXE = FrozenExecutable(file=FrozenFile(path="/usr/bin/true", in_workspace=False, sha256="sha256:" + "ab" * 32))


def command(name: str, **extra: Any) -> CommandNode:
    return CommandNode(name=name, argv=("true",), cwd="//", executable=EXE, **BUDGET, **extra)


def graph(*nodes: Any, checkout: str = "exclusive", command_limit: int = 8) -> Graph:
    limits = SchedulerLimits(total=8, agent=8, command=command_limit, checkout_readers=4)
    return Graph(
        name="g", inputs=(), nodes=tuple(sorted(nodes, key=lambda n: n.name)), scheduler=limits, checkout=checkout
    )


def launches(g: Graph, *, remote: bool, running: tuple[str, ...] = ()) -> list[str]:
    states = {n.name: NodeState.RUNNING if n.name in running else NodeState.READY for n in g.nodes}
    decision = Scheduler(g, remote=remote).decide(
        states, exit_codes={}, outputs=lambda _: UNAVAILABLE, running=list(running)
    )
    return decision.launches


def test_shared_checkout_with_a_remote_executor_runs_mutating_nodes_together() -> None:
    g = graph(command("a"), command("b"), command("c"), checkout="shared")
    assert launches(g, remote=True) == ["a", "b", "c"]


@pytest.mark.parametrize(("checkout", "remote"), [("shared", False), ("exclusive", True), ("exclusive", False)])
def test_otherwise_a_mutating_node_holds_the_checkout_alone(checkout: str, remote: bool) -> None:
    g = graph(command("a"), command("b"), checkout=checkout)
    assert launches(g, remote=remote) == ["a"]
    assert launches(g, remote=remote, running=("a",)) == []


def test_a_local_node_keeps_the_checkout_rules_in_a_shared_workflow() -> None:
    g = graph(command("a", placement="local"), command("b", placement="local"), command("c"), checkout="shared")
    # b waits for a's checkout, and the walk stops there (node-ID order, as without a remote executor)
    assert launches(g, remote=True) == ["a"]
    assert launches(g, remote=True, running=("a",)) == []


def test_remote_nodes_in_a_shared_workflow_run_beside_a_local_writer() -> None:
    g = graph(command("a"), command("b", placement="local"), command("c"), checkout="shared")
    assert launches(g, remote=True) == ["a", "b", "c"]
    assert launches(g, remote=True, running=("b",)) == ["a", "c"]


def test_agents_and_read_only_nodes_still_share_with_remote_nodes_and_limits_hold() -> None:
    agent = AgentNode(name="a", agent="reviewer", prompt=Template(parts=("hi",)), access="read_only", **BUDGET)
    reader = PythonNode(
        name="p", module="//m.py", function="f", cwd="//", access="read_only", modules=("//m.py",), **BUDGET
    )
    g = graph(agent, reader, command("x"), command("y"), command("z"), checkout="shared", command_limit=3)
    assert launches(g, remote=True) == ["a", "p", "x", "y"]  # the command limit (3) counts p, x, y
