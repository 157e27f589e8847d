"""OpenRath's API shapes, written as the seed's workflow page writes them (issue 33, points 7-9).

The review, parallel, selector and preset-agent workflows are docs/porting.md's ports of the seed's
examples, imported from their files under docs/examples/porting/ (one copy: the page shows those
files byte for byte, tests/unit/test_porting_docs.py); the others are the seed's own example code
(/work/shared/seeds/openrath-workflow.md; the section is named in each test). What is adapted,
everywhere, and why (docs/flows.md, "Differences from OpenRath"):

* imports: ``rath.flow`` / ``rath.session`` / ``rath`` become ``rho_notebook.flow`` /
  ``rho_notebook``;
* a provider is the *name* of a provider in settings (``"local"``), where OpenRath passes a
  ``Provider(api_key=..., model=...)`` object: credentials stay in settings, never in flow code;
* the model is the in-memory backend of ``use_backend`` (a deterministic function recording each
  call), the boundary the flow layer has for hosted models; the runs against a real local server
  are in tests/cli/test_porting_openrath.py.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rho_notebook import flow
from rho_notebook.flow import (
    AgentParam,
    CompiledWorkflow,
    FlowError,
    ModelCall,
    Session,
    Workflow,
    compile_manifest,
    run_session_loop,
    use_backend,
    use_providers,
)
from rho_notebook.flow.presets import SELECT_PROMPT

PORTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "porting"


def port(name: str) -> ModuleType:
    """The docs' port ``docs/examples/porting/NAME.py``, imported from its file."""
    spec = importlib.util.spec_from_file_location(f"porting_{name}", PORTS / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ReviewWorkflow: Any = port("openrath_review").ReviewWorkflow
"""Seed, "Single-Agent To Multi-Agent" (the provider a settings name, ``main`` by default)."""
TradingWorkflow: Any = port("openrath_parallel").TradingWorkflow
"""Seed, "Session-Level Parallelism": its ``forward`` verbatim, in a class that registers the
agents it names (the seed shows the method alone), with a real command tool."""
SupportWorkflow: Any = port("openrath_selector").SupportWorkflow
"""Seed, "Dynamic Workflow Routing": its selector lines in a workflow's ``__init__`` and ``forward``."""


@dataclass
class Model:
    """The in-memory backend: records every call; the answer names the call and its system prompt."""

    answers: dict[str, str] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, call: ModelCall) -> str:
        with self.lock:
            self.calls.append(call)
        system = call.messages[0]["content"] if call.messages[0]["role"] == "system" else ""
        return self.answers.get(call.key, f"[{system}] {call.messages[-1]['content']}")

    @property
    def keys(self) -> list[str]:
        return [call.key for call in self.calls]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[Model]:
    monkeypatch.delenv("RHO_SCRIPT_CHANNEL", raising=False)
    monkeypatch.delenv("RHO_SCRIPT_TOKEN", raising=False)
    made = Model()
    previous = use_backend(made)
    try:
        yield made
    finally:
        use_backend(previous)


@pytest.fixture
def providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """This process's provider table, as a host that read settings installs it."""
    monkeypatch.delenv("RHO_FLOW_PROVIDERS", raising=False)
    table = {"local": "openai", "main": "anthropic"}
    previous = use_providers(table)
    try:
        yield table
    finally:
        use_providers(previous)


# -- point 7: the seed's shapes ----------------------------------------------------------------------


def test_agent_param_registers_from_an_agent_session_and_a_positional_provider() -> None:
    """Seed, "AgentParam Auto-Registration" (provider adapted to a settings name)."""

    class PlanningWorkflow(Workflow):
        def __init__(self):
            super().__init__()
            self.planner = AgentParam(
                Session.from_agent_prompt("Plan the work."),
                "local",
            )

    workflow = PlanningWorkflow()
    assert [name for name, _ in workflow.named_agents()] == ["planner"]
    assert "(planner): AgentParam(system='Plan the work.', provider='local')" in repr(workflow)
    planner = workflow.planner
    assert (planner.system, planner.provider) == ("Plan the work.", "local")
    assert [(m.role, m.content) for m in planner.agent_session.messages] == [("system", "Plan the work.")]
    assert planner.agent_session is planner.agent_session  # one agent session per AgentParam
    assert planner.agent_session.owner is planner
    del workflow.planner
    assert workflow.named_agents() == ()


def test_an_agent_session_with_conversation_in_it_is_refused() -> None:
    with pytest.raises(ValueError, match=r"only the agent's prompt as system messages"):
        AgentParam(Session.from_user_message("hello"), "local")


class OurReview(Workflow):
    """The same flow in our own names (kept): ``run_session_loop(session, param)``."""

    def __init__(self, provider: str):
        super().__init__()
        self.writer = AgentParam(system="Write a first draft.", provider=provider)
        self.reviewer = AgentParam(system="Review the draft and tighten it.", provider=provider)

    def forward(self, session: Session) -> Session:
        return run_session_loop(run_session_loop(session, self.writer), self.reviewer)


def test_the_seed_review_workflow_runs_with_agent_sessions_and_agent_provider(model: Model) -> None:
    user_session = Session.from_user_message("Explain durable runs")
    out = ReviewWorkflow("local")(user_session)

    assert model.keys == ["review_workflow.writer#1", "review_workflow.reviewer#1"]
    writer, reviewer = model.calls
    assert writer.messages == (
        {"role": "system", "content": "Write a first draft."},
        {"role": "user", "content": "Explain durable runs"},
    )
    assert reviewer.messages[0] == {"role": "system", "content": "Review the draft and tighten it."}
    assert reviewer.messages[-1] == {"role": "assistant", "content": "[Write a first draft.] Explain durable runs"}
    assert (writer.provider, reviewer.provider) == ("local", "local")
    assert out.text() == "[Review the draft and tighten it.] [Write a first draft.] Explain durable runs"
    assert out.steps == ("review_workflow.reviewer#1",)

    # The seed's form and ours make the very same calls (same keys, messages, placement: same digests).
    seed_calls = list(model.calls)
    model.calls.clear()
    OurReview("local")(user_session)
    assert [c.key.replace("our_review", "review_workflow") for c in model.calls] == [c.key for c in seed_calls]
    assert [(c.messages, c.provider, c.model, c.tools) for c in model.calls] == [
        (c.messages, c.provider, c.model, c.tools) for c in seed_calls
    ]


def test_agent_provider_places_one_call_and_a_bare_agent_session_is_an_unnamed_agent(
    model: Model, providers: dict[str, str]
) -> None:
    class Placed(Workflow):
        def __init__(self) -> None:
            super().__init__()
            self.writer = AgentParam(Session.from_agent_prompt("Write."), "local")

        def forward(self, session: Session) -> Session:
            once = run_session_loop(session, self.writer.agent_session, agent_provider="main")
            loose = Session.from_agent_prompt("Loose agent.")
            return run_session_loop(once, loose)

    Placed()(Session.from_user_message("go"))
    assert [(c.key, c.provider) for c in model.calls] == [("placed.writer#1", "main"), ("placed._unnamed#1", None)]

    class Typo(Placed):
        def forward(self, session: Session) -> Session:
            return run_session_loop(session, self.writer.agent_session, agent_provider="mian")

    with pytest.raises(FlowError, match=r"typo.writer: agent_provider: provider 'mian' is not defined.*local, main"):
        Typo()(Session.from_user_message("go"))


def test_the_seed_preset_agent_takes_system_prompt_and_provider(model: Model) -> None:
    """Seed, "Single-Agent To Multi-Agent", the preset ``flow.Agent`` (docs' openrath_agent.py)."""
    agent = port("openrath_agent").agent

    user_session = Session.from_user_message("What is a session?")
    out = agent(user_session)
    assert out.text() == "[Answer clearly.] What is a session?"
    assert [(c.key, c.provider) for c in model.calls] == [("agent.agent#1", "main")]
    with pytest.raises(FlowError, match="system='...' or system_prompt='...'"):
        flow.Agent(system="a", system_prompt="b")


def test_the_seed_parallel_branches_run_with_session_to_local(model: Model) -> None:
    out = TradingWorkflow("local")(Session.from_user_message("Should we buy?"))
    keys = ["analyst#1", "researcher_bear/f1#1", "researcher_bull/f2#1", "trader#1"]
    assert sorted(model.keys) == [f"trading_workflow.{key}" for key in keys]
    analyst = next(c for c in model.calls if c.key == "trading_workflow.analyst#1")
    assert analyst.tools is not None and [t["name"] for t in analyst.tools] == ["market_quotes"]
    trader = model.calls[-1]
    assert trader.key == "trading_workflow.trader#1" and trader.provider == "local"
    assert "Bear branch:\n[Argue the bear case.] [Analyse the market.] Should we buy?" in trader.messages[-1]["content"]
    assert out.text() is not None and out.text().startswith("[Decide the trade.] Combine the two research branches.")


def test_session_to_local_is_a_new_session_and_other_targets_or_a_spec_are_refused() -> None:
    """Seed, "Session-Level Parallelism": ``.to("local")`` works; the per-branch ``spec=`` folder
    is a documented difference and says what to write instead."""
    session = Session.from_user_message("hi")
    moved = session.to("local")
    assert moved.messages == session.messages and moved.parents == (session.id,)
    with pytest.raises(FlowError, match=r"Tool\(\.\.\., cwd='//FOLDER'\)"):
        auth_input = session.fork().to("local", spec=".workspace/auth-branch")  # noqa: F841
    with pytest.raises(FlowError, match="the only backend here is 'local'"):
        session.to("opensandbox")


# -- point 8: Selector(provider) ------------------------------------------------------------------------


def test_the_seed_selector_takes_the_provider_positionally(model: Model) -> None:
    """Seed, "Dynamic Workflow Routing" (docs' openrath_selector.py), the provider a settings name."""
    session = Session.from_user_message("The installer fails with error 3")
    model.answers["support_workflow.selector.router#1"] = "1"

    session = SupportWorkflow("local")(session)

    assert model.keys == ["support_workflow.selector.router#1", "support_workflow.resolve.agent#1"]
    router = model.calls[0]
    assert router.messages[0] == {"role": "system", "content": SELECT_PROMPT}  # not "local"
    assert router.provider == "local" and router.tools is None
    assert "0. Classify a new support request\n1. Installation, configuration, or runtime errors" in str(
        router.messages[-1]["content"]
    )
    assert session.text() == "[Resolve the technical problem.] The installer fails with error 3"


def test_ambiguous_positional_selector_use_is_refused_saying_what_to_write(providers: dict[str, str]) -> None:
    with pytest.raises(FlowError, match=r"one positional argument, the provider.*Selector\('PROVIDER', system="):
        flow.Selector("Route the request to billing or support.", "local")
    with pytest.raises(FlowError, match=r"a provider name has no spaces; pass a routing prompt as Selector\(system="):
        flow.Selector("Route the request to billing or support.")
    with pytest.raises(FlowError, match=r"Selector\(provider\): provider 'mian' is not defined.*local, main"):
        flow.Selector("mian")
    kept = flow.Selector(system="Route it.", provider="local")  # our keywords still work
    assert (kept.router.system, kept.router.provider) == ("Route it.", "local")
    assert flow.Selector("main", system_prompt="Pick one.").router.system == "Pick one."


# -- point 9: .to(provider="name") resolves now ---------------------------------------------------------


def test_the_seed_provider_placement_resolves_names_when_to_is_called(providers: dict[str, str]) -> None:
    """Seed, "Module Tree And Provider Placement": the chain of ``.to`` calls (provider objects
    adapted to settings names)."""
    agent_param = AgentParam(Session.from_agent_prompt("Write the result."), "local")
    workflow = ReviewWorkflow("local")

    agent_param.to(provider="main")  # reads config now
    agent_param.to(model="new-model")  # overlays the current Provider
    assert (agent_param.provider, agent_param.model) == ("main", "new-model")

    workflow.to("main")
    # Rebind a nested tree explicitly.
    for module in workflow.modules():
        module.to("local")
    assert {p.provider for _, p in workflow.named_agents()} == {"local"}

    with pytest.raises(
        FlowError,
        match=r"\.to\(provider='nowhere'\): provider 'nowhere' is not defined in settings \(providers: local, main\)",
    ):
        agent_param.to(provider="nowhere")
    assert agent_param.provider == "main"  # unchanged by the refused placement
    with pytest.raises(FlowError, match="ReviewWorkflow.to"):
        ReviewWorkflow("local").to(provider="nowhere")
    with pytest.raises(TypeError, match="a provider is the name of a provider in settings"):
        agent_param.to(object())  # type: ignore[arg-type]


def test_without_a_provider_table_a_name_is_kept_for_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RHO_FLOW_PROVIDERS", raising=False)
    previous = use_providers(None)
    try:
        assert AgentParam(system="x").to(provider="anything").provider == "anything"
        monkeypatch.setenv("RHO_FLOW_PROVIDERS", json.dumps({"local": "openai"}))
        with pytest.raises(FlowError, match=r"provider 'anything' is not defined in settings \(providers: local\)"):
            AgentParam(system="x").to(provider="anything")
    finally:
        use_providers(previous)


def test_a_provider_table_read_at_each_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose settings may change installs a function; it is called at each check, and
    None from it (settings unreadable) leaves a name unchecked."""
    monkeypatch.delenv("RHO_FLOW_PROVIDERS", raising=False)
    current: dict[str, str] | None = {"local": "openai"}
    calls = []

    def table() -> dict[str, str] | None:
        calls.append(1)
        return current

    previous = use_providers(table)
    try:
        with pytest.raises(FlowError, match=r"provider 'main' is not defined in settings \(providers: local\)"):
            AgentParam(system="x").to(provider="main")
        current = {"local": "openai", "main": "anthropic"}
        assert AgentParam(system="x").to(provider="main").provider == "main"
        current = None
        assert AgentParam(system="x").to(provider="anything").provider == "anything"
        assert len(calls) == 3
        current = {"local": 1}  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="mapping of provider name to kind"):
            AgentParam(system="x").to(provider="local")
        assert use_providers(previous) is table
    finally:
        use_providers(previous)


# -- point 7: compile() -------------------------------------------------------------------------------


def test_the_seed_static_compilation_gives_a_compiled_workflow(model: Model, providers: dict[str, str]) -> None:
    """Seed, "Static Compilation", verbatim, on the review workflow and a selector."""
    workflow = ReviewWorkflow("local")
    workflow.writer.to(provider="main", model="big")

    compiled = workflow.compile()
    manifest = compiled.manifest

    models = manifest.provider_models()
    kinds = manifest.provider_kinds()
    problems = compiled.validate()

    assert models == {"review_workflow.reviewer": None, "review_workflow.writer": "big"}
    assert kinds == {"review_workflow.reviewer": "openai", "review_workflow.writer": "anthropic"}
    assert problems == []
    assert [a.agent_session_id for a in manifest.agents] == [
        workflow.reviewer.agent_session.id,
        workflow.writer.agent_session.id,
    ]
    assert not any(a.has_memory for a in manifest.agents)

    # Still the manifest's JSON data for existing callers: key access, equality, JSON encoding.
    assert isinstance(compiled, CompiledWorkflow) and isinstance(compiled, dict)
    assert compiled == compile_manifest(workflow)
    assert [a["path"] for a in compiled["agents"]] == ["review_workflow.reviewer", "review_workflow.writer"]
    assert json.loads(json.dumps(compiled)) == compile_manifest(workflow)

    # As a context manager, and calling it runs the current workflow.
    with workflow.compile() as running:
        out = running(Session.from_user_message("go"))
    assert out.text() is not None and model.keys == ["review_workflow.writer#1", "review_workflow.reviewer#1"]

    support = flow.Selector("local", candidates=(flow.Agent("A.", description="a"),))
    assert [(d.path, d.kind) for d in support.compile().manifest.dynamic] == [("selector", "selector")]


def test_validate_reports_unknown_providers_and_kinds(providers: dict[str, str]) -> None:
    workflow = ReviewWorkflow("local")
    workflow.reviewer.provider = "elsewhere"  # placed around .to(), as a stale tree might be
    providers_now = {"local": "grpc"}
    use_providers(providers_now)
    assert workflow.compile().validate() == [
        "review_workflow.reviewer: provider 'elsewhere' is not defined in settings (providers: local)",
        "review_workflow.writer: provider kind 'grpc' is not known (known kinds: openai, anthropic)",
    ]
    use_providers(None)
    (only,) = workflow.compile().validate()
    assert "no provider table in this process" in only and "rho-notebook validate" in only
