"""One wording for "no such node" (rho_notebook.model.node_names), in every verb that looks one up."""

from __future__ import annotations

import pytest

from rho_notebook.errors import NotFound
from rho_notebook.model.node_names import no_node
from rho_notebook.service.diff import derive_try_plan
from tests.conftest import Project


def test_the_nodes_are_listed_sorted_and_none_is_said_not_listed() -> None:
    assert no_node("run r", "x", {"b", "a"}) == "run r has no node 'x'; its nodes: a, b"
    assert no_node("run r", "secnd", {"second", "first"}) == (
        "run r has no node 'secnd' (did you mean 'second'?); its nodes: first, second"
    )
    assert no_node("run r", "cc", {"a", "b", "c"}) == "run r has no node 'cc'; its nodes: a, b, c"  # not close enough
    assert no_node("plan p", "x", ()) == (
        "plan p has no node 'x'; it has no nodes (a script's steps become nodes as it runs)"
    )


def test_trying_a_node_of_a_script_plan_says_it_has_no_nodes(project: Project) -> None:
    """A script's plan has no nodes: `try NODE` of it said "its nodes: " and nothing after."""
    project.write("s.py", "from rho_notebook.script import run_command\n")
    plan = project.plan("s.py")
    with pytest.raises(NotFound) as caught:
        derive_try_plan(project.service.layout, plan, "call-1")
    assert caught.value.message.endswith(
        "has no node 'call-1'; it has no nodes (a script's steps become nodes as it runs)"
    )
