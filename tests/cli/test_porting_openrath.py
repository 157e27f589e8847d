"""OpenRath workflow modules, written as the seed's workflow page writes them, run end to end
(issue 33, points 7-9): the real CLI plans and runs them offline against a local OpenAI-compatible
server on 127.0.0.1, every call a journaled step.

The module texts are the seed's own examples (/work/shared/seeds/openrath-workflow.md; each
constant names its section). Adapted, and why (docs/flows.md, "Differences from OpenRath"):

* imports: ``rath.flow`` / ``rath.session`` / ``rath`` become ``rho_notebook.flow`` /
  ``rho_notebook``;
* the provider is the *name* ``"local"`` of the provider in settings (pointing at the test server),
  where OpenRath passes ``Provider(api_key=..., model=...)``: credentials stay in settings;
* a run instantiates ``--flow NAME`` with no arguments, so each module ends with an instance built
  the way the seed builds it (``review = ReviewWorkflow("local")``);
* a method the seed shows alone (``forward`` of the parallel example, the selector lines) sits in
  a ``Workflow`` subclass that registers the agents it names.
"""

from __future__ import annotations

import pytest

from rho_notebook.flow.presets import SELECT_PROMPT
from tests.agents.fakeserver import OPENAI, Recorded, Reply
from tests.cli.flowhelp import ENV, Serve, kinds, result, run_flow, serve, setup, system_of
from tests.cli.runhelp import status
from tests.conftest import Project

__all__ = ["serve"]

REVIEW_SEED = '''\
"""Seed, "Single-Agent To Multi-Agent"."""
from rho_notebook.flow import AgentParam, Workflow
from rho_notebook.flow import Session, run_session_loop


class ReviewWorkflow(Workflow):
    def __init__(self, provider: str):
        super().__init__()
        self.writer = AgentParam(
            Session.from_agent_prompt("Write a first draft."),
            provider,
        )
        self.reviewer = AgentParam(
            Session.from_agent_prompt("Review the draft and tighten it."),
            provider,
        )

    def forward(self, session: Session) -> Session:
        draft = run_session_loop(
            session,
            self.writer.agent_session,
            agent_provider=self.writer.provider,
        )
        return run_session_loop(
            draft,
            self.reviewer.agent_session,
            agent_provider=self.reviewer.provider,
        )


review = ReviewWorkflow("local")
'''

SUPPORT_SEED = '''\
"""Seed, "Dynamic Workflow Routing": the selector lines in a workflow's __init__ and forward."""
from rho_notebook import flow
from rho_notebook.flow import Session, Workflow


class Support(Workflow):
    def __init__(self, provider: str) -> None:
        super().__init__()
        self.selector = flow.Selector(provider)
        self.triage = flow.Agent(
            "Triage the request.",
            provider,
            description="Classify a new support request",
        )
        self.resolve = flow.Agent(
            "Resolve the technical problem.",
            provider,
            description="Installation, configuration, or runtime errors",
        )

    def forward(self, session: Session) -> Session:
        selector, triage, resolve = self.selector, self.triage, self.resolve
        chosen = selector.forward(session, triage, resolve)
        if not isinstance(chosen, flow.EmptyWorkflow):
            session = chosen(session)
        return session


support = Support("local")
'''

TRADING_SEED = '''\
"""Seed, "Session-Level Parallelism": its forward verbatim in a class registering its agents."""
from concurrent.futures import ThreadPoolExecutor

from rho_notebook.flow import AgentParam, Session, Tool, Workflow, run_session_loop

market_tool = Tool("market", "Today's market data", argv=("echo", "market:"))


class Trading(Workflow):
    def __init__(self, provider: str) -> None:
        super().__init__()
        self.analyst = AgentParam(Session.from_agent_prompt("Analyst: read the market."), provider)
        self.researcher_bear = AgentParam(Session.from_agent_prompt("Bear: argue the downside."), provider)
        self.researcher_bull = AgentParam(Session.from_agent_prompt("Bull: argue the upside."), provider)
        self.trader = AgentParam(Session.from_agent_prompt("Trader: decide."), provider)

    def forward(self, session: Session) -> Session:
        analysed = run_session_loop(
            session,
            self.analyst.agent_session,
            agent_provider=self.analyst.provider,
            tools=[market_tool],
        )

        bear_input = analysed.fork()
        bull_input = analysed.fork()

        with ThreadPoolExecutor(max_workers=2) as pool:
            bear_future = pool.submit(
                run_session_loop,
                bear_input,
                self.researcher_bear.agent_session,
                agent_provider=self.researcher_bear.provider,
                tools=None,
            )
            bull_future = pool.submit(
                run_session_loop,
                bull_input,
                self.researcher_bull.agent_session,
                agent_provider=self.researcher_bull.provider,
                tools=None,
            )
            bear_session = bear_future.result()
            bull_session = bull_future.result()

        def last_assistant_text(s: Session) -> str:
            return s.text() or ""

        trader_input = Session.from_user_message(
            "Combine the two research branches.\\n\\n"
            f"Bear branch:\\n{last_assistant_text(bear_session)}\\n\\n"
            f"Bull branch:\\n{last_assistant_text(bull_session)}"
        ).to("local")

        return run_session_loop(
            trader_input,
            self.trader.agent_session,
            agent_provider=self.trader.provider,
            tools=None,
        )


trading = Trading("local")
'''

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
    """The router picks candidate 1; every other agent answers ``[its system prompt] last message``."""
    system = system_of(request)
    if system == SELECT_PROMPT:
        return OPENAI.answer("1")
    return OPENAI.answer(f"[{system}] {request.body['messages'][-1]['content']}")


def test_the_seed_review_workflow_runs_with_agent_sessions(project: Project, serve: Serve) -> None:
    """Point 7: ``Session.from_agent_prompt``, ``agent_session`` and
    ``run_session_loop(..., agent_provider=...)`` in a journaled run."""
    server = serve(answer)
    setup(project, server)
    project.write("review_seed.py", REVIEW_SEED)

    code, run_id, shown = run_flow(project, "review_seed.py", "review", "Explain durable runs")
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
    assert [r["node"] for r in launched] == ["review.writer#1", "review.reviewer#1"]
    assert launched[1]["step"]["after"] == ["review.writer#1"]
    assert status(project, run_id)["outcome"] == "success"


def test_the_seed_selector_takes_its_provider_positionally_in_a_run(project: Project, serve: Serve) -> None:
    """Point 8: ``flow.Selector(provider)`` routes with the routing prompt on that provider (it
    used to make ``"local"`` the system prompt, silently)."""
    server = serve(answer)
    setup(project, server)
    project.write("support_seed.py", SUPPORT_SEED)

    code, run_id, shown = run_flow(project, "support_seed.py", "support", "The installer fails with error 3")
    assert code == 0, shown
    router, resolved = server.requests
    assert system_of(router) == SELECT_PROMPT
    assert "1. Installation, configuration, or runtime errors" in router.body["messages"][-1]["content"]
    assert system_of(resolved) == "Resolve the technical problem."
    assert result(project, run_id)["output"]["text"] == (
        "[Resolve the technical problem.] The installer fails with error 3"
    )
    assert sorted(status(project, run_id)["nodes"]) == ["support.resolve.agent#1", "support.selector.router#1"]

    checked = project.cli("validate", "support_seed.py", "--flow", "support", env=ENV)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "selector (dynamic)" in checked.stdout


def test_an_ambiguous_positional_selector_fails_validate_saying_what_to_write(project: Project, serve: Serve) -> None:
    """Point 8: the old ``Selector(prompt, provider)`` order is refused where it is written."""
    server = serve(answer)
    setup(project, server)
    project.write("old.py", SUPPORT_SEED.replace("flow.Selector(provider)", 'flow.Selector("Route it.", provider)'))

    checked = project.cli("validate", "old.py", "--flow", "support", env=ENV)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    text = checked.stdout + checked.stderr
    assert "flow.compile" in text and "Selector takes one positional argument, the provider" in text
    assert server.requests == []


def test_the_seed_parallel_branches_run_with_forks_and_session_to(project: Project, serve: Serve) -> None:
    """Point 7: ``Session.to("local")``, agent sessions in a thread pool of forked branches."""
    server = serve(answer)
    setup(project, server)
    project.write("trading_seed.py", TRADING_SEED)

    code, run_id, shown = run_flow(project, "trading_seed.py", "trading", "Should we buy?")
    assert code == 0, shown
    assert sorted(status(project, run_id)["nodes"]) == [
        "trading.analyst#1",
        "trading.researcher_bear/f1#1",
        "trading.researcher_bull/f2#1",
        "trading.trader#1",
    ]
    assert OPENAI.tool_names(server.requests[0]) == ["market"]
    text = result(project, run_id)["output"]["text"]
    assert text.startswith("[Trader: decide.] Combine the two research branches.")
    assert "Bear branch:\n[Bear: argue the downside.] [Analyst: read the market.] Should we buy?" in text


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
