"""OpenRath workflow modules run end to end (issue 33, points 7-9): the real CLI plans and runs
them offline against a local OpenAI-compatible server on 127.0.0.1, every call a journaled step.

The review, parallel and selector modules are docs/porting.md's ports of the seed's examples,
read from their files under docs/examples/porting/ (one copy: the page shows those files byte for
byte, tests/unit/test_porting_docs.py), run as the page's console lines run them (``--flow
ReviewWorkflow``: the class, built with no arguments, so on its default provider ``main``, which
the settings here point at the test server). What the ports adapt, and why, is on that page and in
docs/flows.md ("Differences from OpenRath"). The placement module below is the seed's "Module
Tree And Provider Placement" lines in a class, with the provider a settings name.
"""

from __future__ import annotations

import json
import shutil

import pytest

from rho_notebook.flow.presets import SELECT_PROMPT
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, write_settings_for
from tests.cli.flowhelp import ENV, Serve, kinds, result, run_flow, serve, setup, system_of
from tests.cli.runhelp import status
from tests.conftest import REPO, Project

__all__ = ["serve"]

PORTS = REPO / "docs" / "examples" / "porting"
QUOTES = {"ACME": {"bid": 101.5, "ask": 102.0}}


def port(project: Project, server: ScriptedServer, name: str) -> None:
    """Copy the docs' port ``name`` (and the ports' ``tools/``) into the workspace, with settings
    whose provider ``main`` (the ports' default) is ``server``, and the ``quotes.json`` the
    parallel port's tool reads."""
    shutil.copy(PORTS / name, project.root / name)
    shutil.copytree(PORTS / "tools", project.root / "tools")
    main = {"type": "openai", "base_url": OPENAI.base(server.url), "api_key_env": KEY_ENV}
    write_settings_for(project.home, server, providers={"main": main}, default_provider="main")
    project.write("quotes.json", json.dumps(QUOTES))


PLACEMENT_SEED = '''\
"""Seed, "Module Tree And Provider Placement": ``agent_param.to(provider=...)`` in __init__."""
from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Placed(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.writer = AgentParam(Session.from_agent_prompt("Write the result."))
        self.writer.to(provider="PROVIDER")  # reads config now
        self.writer.to(model="new-model")  # overlays the current Provider

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.writer.agent_session, agent_provider=self.writer.provider)
'''


def answer(request: Recorded) -> Reply:
    """The router picks candidate 1; an agent offered tools calls the first once (``{"ticker":
    "ACME"}``); every other call answers ``[its system prompt] last message``."""
    system = system_of(request)
    if system == SELECT_PROMPT:
        return OPENAI.answer("1")
    offered = OPENAI.tool_names(request)
    if offered and not any(m["role"] == "tool" for m in request.body["messages"]):
        return OPENAI.tools(("c1", offered[0], {"ticker": "ACME"}))
    return OPENAI.answer(f"[{system}] {request.body['messages'][-1]['content']}")


def test_the_review_port_runs_with_agent_sessions(project: Project, serve: Serve) -> None:
    """Point 7: ``Session.from_agent_prompt``, ``agent_session`` and
    ``run_session_loop(..., agent_provider=...)`` in a journaled run."""
    server = serve(answer)
    port(project, server, "openrath_review.py")

    code, run_id, shown = run_flow(project, "openrath_review.py", "ReviewWorkflow", "Explain durable runs")
    assert code == 0, shown
    writer, reviewer = server.requests
    assert writer.body["messages"] == [
        {"role": "system", "content": "Write a first draft."},
        {"role": "user", "content": "Explain durable runs"},
    ]
    assert system_of(reviewer) == "Review the draft and tighten it."
    output = result(project, run_id)["output"]
    assert output["text"] == "[Review the draft and tighten it.] [Write a first draft.] Explain durable runs"
    launched = kinds(project, run_id, "node_launched")
    assert [r["node"] for r in launched] == ["review_workflow.writer#1", "review_workflow.reviewer#1"]
    assert launched[1]["step"]["after"] == ["review_workflow.writer#1"]
    assert status(project, run_id)["outcome"] == "success"


def test_the_selector_port_takes_its_provider_positionally_in_a_run(project: Project, serve: Serve) -> None:
    """Point 8: ``flow.Selector(provider)`` routes with the routing prompt on that provider (it
    used to make the provider's name the system prompt, silently)."""
    server = serve(answer)
    port(project, server, "openrath_selector.py")

    code, run_id, shown = run_flow(
        project, "openrath_selector.py", "SupportWorkflow", "The installer fails with error 3"
    )
    assert code == 0, shown
    router, resolved = server.requests
    assert system_of(router) == SELECT_PROMPT
    assert "1. Installation, configuration, or runtime errors" in router.body["messages"][-1]["content"]
    assert system_of(resolved) == "Resolve the technical problem."
    assert result(project, run_id)["output"]["text"] == (
        "[Resolve the technical problem.] The installer fails with error 3"
    )
    assert sorted(status(project, run_id)["nodes"]) == [
        "support_workflow.resolve.agent#1",
        "support_workflow.selector.router#1",
    ]

    checked = project.cli("validate", "openrath_selector.py", "--flow", "SupportWorkflow", env=ENV)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "selector (dynamic)" in checked.stdout


def test_an_ambiguous_positional_selector_fails_validate_saying_what_to_write(project: Project, serve: Serve) -> None:
    """Point 8: the old ``Selector(prompt, provider)`` order is refused where it is written."""
    server = serve(answer)
    setup(project, server)
    text = (PORTS / "openrath_selector.py").read_text()
    assert text.count("flow.Selector(provider)") == 1
    project.write("old.py", text.replace("flow.Selector(provider)", 'flow.Selector("Route it.", provider)'))

    checked = project.cli("validate", "old.py", "--flow", "SupportWorkflow", env=ENV)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    text = checked.stdout + checked.stderr
    assert "flow.compile" in text and "Selector takes one positional argument, the provider" in text
    assert server.requests == []


def test_the_parallel_port_runs_forked_branches_a_tool_and_session_to(project: Project, serve: Serve) -> None:
    """Point 7: ``Session.to("local")``, agent sessions in a thread pool of forked branches, and
    the analyst's ``market_quotes`` tool run as a verified command step."""
    server = serve(answer)
    port(project, server, "openrath_parallel.py")

    code, run_id, shown = run_flow(project, "openrath_parallel.py", "TradingWorkflow", "Should we buy ACME?")
    assert code == 0, shown
    assert sorted(status(project, run_id)["nodes"]) == [
        "trading_workflow.analyst#1",
        "trading_workflow.analyst#2",
        "trading_workflow.analyst#3",
        "trading_workflow.researcher_bear/f1#1",
        "trading_workflow.researcher_bull/f2#1",
        "trading_workflow.trader#1",
    ]
    assert OPENAI.tool_names(server.requests[0]) == ["market_quotes"]
    called = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(called) == 1 and json.loads(called[0]["content"]) == QUOTES["ACME"], called
    text = result(project, run_id)["output"]["text"]
    assert text.startswith("[Decide the trade.] Combine the two research branches.")
    assert "Bear branch:\n[Argue the bear case.] [Analyse the market.] " in text
    assert "Bull branch:\n[Argue the bull case.] [Analyse the market.] " in text


@pytest.mark.parametrize(("provider", "ok"), [("local", True), ("main", False)])
def test_to_provider_resolves_where_it_is_written(project: Project, serve: Serve, provider: str, ok: bool) -> None:
    """Point 9: ``agent_param.to(provider="name")`` in the module's ``__init__`` is checked against
    settings when it runs (compile, at plan time): an unknown name fails at that call, naming the
    known providers, before any model call."""
    server = serve(answer)
    setup(project, server)
    project.write("placed.py", PLACEMENT_SEED.replace("PROVIDER", provider))

    checked = project.cli("validate", "placed.py", "--flow", "Placed", env=ENV)
    text = checked.stdout + checked.stderr
    if ok:
        assert checked.returncode == 0, text
        code, run_id, shown = run_flow(project, "placed.py", "Placed", "go")
        assert code == 0, shown
        assert server.requests[0].body["model"] == "new-model"
        return
    assert checked.returncode == 1, text
    assert "flow.compile" in text
    assert "provider 'main' is not defined in settings (providers: local)" in text
    assert "flow.provider" not in text  # it failed at the .to call, not later in the manifest check
    assert server.requests == []
