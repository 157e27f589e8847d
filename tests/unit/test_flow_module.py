"""The workflow module tree of ``rho_notebook.flow``: registration by attribute assignment (and its
undoing by ``del`` and reassignment), ``named_agents``/``named_children``/``modules`` order, the
``repr`` tree, ``to()`` on direct agents only, and the manifest ``compile()`` gives."""

from __future__ import annotations

import hashlib
import json

import pytest

from rho_notebook.flow import (
    Agent,
    AgentParam,
    Compressor,
    EmptyWorkflow,
    Selector,
    Session,
    Workflow,
    compile_manifest,
)


class Research(Workflow):
    def __init__(self) -> None:
        super().__init__(description="Digs up facts")
        self.analyst = AgentParam(system="Analyse the request.", provider="local", model="small")
        self.bear = AgentParam(system="Argue the bear case.")

    def forward(self, session: Session) -> Session:
        return session


class Quality(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.checker = AgentParam("reviewer")


class Team(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.research = Research()
        self.writer = AgentParam(system="Write the result.", provider="local")
        self.qa = Quality()
        self.editor = AgentParam(system="Edit.")


def test_assignment_registers_agents_and_children() -> None:
    team = Team()
    assert [name for name, _ in team.named_agents()] == ["editor", "writer"]  # sorted by name
    assert [name for name, _ in team.named_children()] == ["research", "qa"]  # in assignment order
    assert dict(team.named_agents())["writer"] is team.writer
    assert dict(team.named_children())["qa"] is team.qa


def test_del_and_reassignment_are_tracked() -> None:
    team = Team()
    del team.editor
    assert [name for name, _ in team.named_agents()] == ["writer"]
    assert not hasattr(team, "editor")
    team.writer = "not an agent any more"  # type: ignore[assignment]
    assert team.named_agents() == ()
    team.qa = AgentParam(system="A child became an agent.")  # type: ignore[assignment]
    assert [name for name, _ in team.named_children()] == ["research"]
    assert [name for name, _ in team.named_agents()] == ["qa"]
    del team.research
    team.research = Research()
    assert [name for name, _ in team.named_children()] == ["research"]
    team.extra = Quality()
    assert [name for name, _ in team.named_children()] == ["research", "extra"]


def test_registration_works_without_super_init() -> None:
    class Bare(Workflow):
        def __init__(self) -> None:
            self.solo = AgentParam(system="Alone.")

    assert [name for name, _ in Bare().named_agents()] == ["solo"]


def test_modules_are_depth_first_pre_order_and_listed_once() -> None:
    team = Team()
    team.qa.deep = Research()
    team.again = team.research  # the same module twice: listed at its first place only
    named = team.named_modules()
    assert [path for path, _ in named] == ["", "research", "qa", "qa.deep"]
    assert team.modules() == [module for _, module in named]
    assert team.modules()[0] is team


def test_repr_is_an_indented_tree() -> None:
    assert repr(Team()) == (
        "Team(\n"
        "  (editor): AgentParam(system='Edit.')\n"
        "  (writer): AgentParam(system='Write the result.', provider='local')\n"
        "  (research): Research(\n"
        "    (analyst): AgentParam(system='Analyse the request.', provider='local', model='small')\n"
        "    (bear): AgentParam(system='Argue the bear case.')\n"
        "  )\n"
        "  (qa): Quality(\n"
        "    (checker): AgentParam(agent='reviewer')\n"
        "  )\n"
        ")"
    )
    assert repr(EmptyWorkflow()) == "EmptyWorkflow()"


def test_to_places_direct_agents_only() -> None:
    team = Team()
    assert team.to("remote") is team
    assert team.writer.provider == "remote" and team.editor.provider == "remote"
    assert team.research.analyst.provider == "local" and team.research.bear.provider is None
    team.to(model="big")
    assert (team.writer.provider, team.writer.model) == ("remote", "big")
    assert team.research.analyst.model == "small"
    for module in team.modules():
        module.to("everywhere")
    placed = {path: p.provider for path, m in team.named_modules() for name, p in m.named_agents()}
    assert set(placed.values()) == {"everywhere", None}  # the catalog agent keeps its definition's placement
    assert team.qa.checker.provider is None


def test_a_catalog_agent_is_placed_by_its_definition() -> None:
    with pytest.raises(ValueError, match="catalog agent 'reviewer' runs on the provider and model its definition"):
        AgentParam("reviewer", provider="local")
    with pytest.raises(ValueError, match="place it there"):
        AgentParam("reviewer").to(model="m")


def test_agent_param_takes_exactly_one_definition() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        AgentParam()
    with pytest.raises(ValueError, match="exactly one"):
        AgentParam("reviewer", system="also a prompt")
    with pytest.raises(TypeError, match="provider"):
        AgentParam(system="x", provider="")
    chained = AgentParam(system="x").to("local").to(model="m")
    assert (chained.provider, chained.model) == ("local", "m")


def test_forward_must_be_defined() -> None:
    with pytest.raises(NotImplementedError, match="Quality defines no forward"):
        Quality()(Session.from_user_message("hi"))


def test_compile_lists_agents_with_provider_snapshot_and_definition_digest() -> None:
    manifest = Team().compile()
    assert manifest["format"] == "rho-flow-manifest/1" and manifest["root"] == "team"
    assert [m["path"] for m in manifest["modules"]] == ["team", "team.research", "team.qa"]
    assert manifest["modules"][1] == {
        "path": "team.research",
        "class": "Research",
        "description": "Digs up facts",
        "agents": ["analyst", "bear"],
        "children": [],
    }
    by_path = {a["path"]: a for a in manifest["agents"]}
    assert list(by_path) == [
        "team.editor",
        "team.writer",
        "team.research.analyst",
        "team.research.bear",
        "team.qa.checker",
    ]
    analyst = by_path["team.research.analyst"]
    definition = json.dumps({"agent": None, "system": "Analyse the request."}, sort_keys=True, separators=(",", ":"))
    assert analyst == {
        "path": "team.research.analyst",
        "module": "team.research",
        "attribute": "analyst",
        "agent": None,
        "system": "Analyse the request.",
        "provider": {"name": "local", "model": "small", "credential_ref": "settings:providers.local"},
        "definition_digest": "sha256:" + hashlib.sha256(definition.encode()).hexdigest(),
    }
    assert by_path["team.research.bear"]["provider"] == {
        "name": None,
        "model": None,
        "credential_ref": "settings:default_provider",
    }
    checker = by_path["team.qa.checker"]
    assert (checker["agent"], checker["system"]) == ("reviewer", None)
    assert checker["provider"] == {"name": None, "model": None, "credential_ref": None}
    assert manifest["dynamic"] == []
    json.dumps(manifest, allow_nan=False)  # pure JSON data


def test_the_digest_follows_the_definition_not_the_placement() -> None:
    first, second = AgentParam(system="Write."), AgentParam(system="Write.", provider="other", model="m")
    assert first.digest() == second.digest()
    assert AgentParam(system="Write!").digest() != first.digest()
    assert AgentParam("writer").digest() != first.digest()


class Support(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.triage = Agent("Triage the request.", "local", description="Classify a new support request")
        self.resolve = Agent("Resolve the problem.", description="Installation, configuration or runtime errors")
        self.route = Selector(provider="local", candidates=(self.triage, self.resolve))
        self.shorten = Compressor()


def test_compile_names_every_selector_with_its_candidates_descriptions() -> None:
    manifest = compile_manifest(Support(), name="HelpDesk")
    assert manifest["root"] == "help_desk"
    assert manifest["dynamic"] == [
        {
            "path": "help_desk.route",
            "kind": "selector",
            "reason": "a Selector chooses its next workflow at run time from the model's answer",
            "candidates": [
                {"path": "help_desk.triage", "class": "Agent", "description": "Classify a new support request"},
                {
                    "path": "help_desk.resolve",
                    "class": "Agent",
                    "description": "Installation, configuration or runtime errors",
                },
            ],
        }
    ]
    paths = [a["path"] for a in manifest["agents"]]
    assert paths == [
        "help_desk.triage.agent",
        "help_desk.resolve.agent",
        "help_desk.route.router",
        "help_desk.shorten.agent",
    ]
