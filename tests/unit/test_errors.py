"""errors.py: what a not-found error tells each front end, and that errors survive a process hop."""

from __future__ import annotations

import pickle

import pytest

from rho_notebook.errors import Diagnostic, NotFound, NothingToResume
from rho_notebook.store.ids import match_id


def test_a_not_found_id_names_the_verb_that_lists_them_in_each_front_end() -> None:
    with pytest.raises(NotFound) as caught:
        match_id("ffff", ["0190aaaa", "0190bbbb"], what="run")
    err = caught.value
    assert err.message == "no run matches 'ffff'; list them with `rho-notebook runs`"
    assert err.listed_with("%workflow {}") == "no run matches 'ffff'; list them with %workflow runs"
    both = NotFound("'x' is neither a plan nor a run", listers=("plans", "runs"))
    assert both.message.endswith("list them with `rho-notebook plans` and `rho-notebook runs`")
    assert NotFound("run r has no node 'n'").listed_with("%workflow {}") == "run r has no node 'n'"


def test_a_not_found_error_keeps_its_listing_across_a_pickle() -> None:
    """Errors cross process boundaries (the planning worker, Dask workers) by pickle."""
    copy = pickle.loads(pickle.dumps(NotFound("no plan matches 'p'", listers=("plans",))))
    assert isinstance(copy, NotFound)
    assert copy.message == "no plan matches 'p'; list them with `rho-notebook plans`"
    assert copy.listed_with("%workflow {}") == "no plan matches 'p'; list them with %workflow plans"


def test_a_nested_diagnostic_inlines_as_one_phrase_never_as_a_finding_of_its_own() -> None:
    """One rule for a diagnostic said inside another message (a script step's refusal, a flow's
    ``flow.agent``, an item-graph step's finding): ``[rule] where: message``, never ``error[...]``."""
    located = Diagnostic(rule="agent.runtime", message="runtime: 'nope' is not allowed", file="a/b.md", line=4)
    bare = Diagnostic(rule="agent.unknown", message="unknown agent 'x'")
    assert located.inline() == "[agent.runtime] a/b.md:4:1: runtime: 'nope' is not allowed"
    assert bare.inline() == "[agent.unknown] unknown agent 'x'"
    assert located.inline(rule=False) == "a/b.md:4:1: runtime: 'nope' is not allowed"
    assert located.inline(rule=False, within="a/b.md") == "runtime: 'nope' is not allowed"
    assert Diagnostic.inline_all([bare, located]) == f"{bare.inline()}; {located.inline()}"
    assert "error[" not in Diagnostic.inline_all([bare, located])
    assert pickle.loads(pickle.dumps(located)) == located


def test_a_refused_resume_keeps_the_node_a_fork_would_run_across_a_pickle() -> None:
    """The CLI's words come with the error; a front end without a fork verb words its own (MCP)."""
    refused = NothingToResume(
        "run r has nothing to resume", run_id="r" * 20, plan_id="p", graph_digest="d", fork_at="n"
    )
    copy = pickle.loads(pickle.dumps(refused))
    assert isinstance(copy, NothingToResume) and copy.rule == "refused" and copy.exit_code == 3
    assert (
        copy.message
        == f"run r has nothing to resume; to run n again, fork the run at it: `rho-notebook fork {'r' * 13} --at n`"
    )
    assert (
        copy.again_with("run {node} of {plan_id} ({digest}) again")
        == "run r has nothing to resume; run n of p (d) again"
    )
    done = NothingToResume("run r already completed", run_id="r", plan_id="p", graph_digest="d", fork_at=None)
    assert done.message == done.again_with("unused") == "run r already completed"
