"""Model aliases: ``model_aliases`` in settings (shape, cross-references, user/project merge), how
``model: "@name"`` resolves at run time (select_model), the plan-time ``agent.model`` diagnostic,
and aliased models reaching a real local provider server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.definition import parse_agent_definition
from rho_notebook.agents.resolve import check_agent_provider, select_model
from rho_notebook.agents.settings import (
    AgentSettings,
    AuthProfile,
    ModelAlias,
    ProviderSettings,
    load_settings,
    parse_settings,
)
from rho_notebook.errors import AgentFailure, InvalidWorkflow, SettingsError
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.state import NodeState
from tests.agents.fakeserver import OPENAI, ScriptedServer
from tests.agents.helpers import DECISION, KEY_ENV, SECRET, Runner, definition, settings_for
from tests.agents.test_end_to_end import ENV, attempt_dir, run_cli
from tests.conftest import Project

Serve = Callable[..., ScriptedServer]
SOURCE = "/home/u/settings.json"


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# -- settings: shape ---------------------------------------------------------------------------


def test_aliases_parse_with_and_without_provider(tmp_path: Path) -> None:
    write(
        tmp_path / "settings.json",
        {
            "providers": {"local": {"type": "openai"}, "openai": {"type": "openai", "api_key_env": "OPENAI_API_KEY"}},
            "model_aliases": {"fast": {"provider": "local", "model": "qwen3:8b"}, "smart": {"model": "gpt-5"}},
            "default_provider": "openai",
            "default_model": "@smart",
        },
    )
    settings = load_settings(tmp_path)
    assert settings.model_aliases == {
        "fast": ModelAlias(provider="local", model="qwen3:8b"),
        "smart": ModelAlias(model="gpt-5", provider=None),
    }
    assert settings.default_model == "@smart"  # an alias is a valid default_model


def test_no_aliases_is_an_empty_mapping() -> None:
    assert parse_settings({"providers": {"local": {"type": "openai"}}}, source=SOURCE).model_aliases == {}


@pytest.mark.parametrize(
    ("aliases", "expected"),
    [
        (
            {"fast": {"model": "m", "temperature": 0.2}},
            "model_aliases.fast.temperature: unknown key; expected one of: model, provider",
        ),
        (
            {"fast": {"model": "m", "api_key_env": "K"}},
            "model_aliases.fast.api_key_env: unknown key; expected one of: model, provider",
        ),
        (
            {"fast": {"provider": "local"}},
            "model_aliases.fast.model: required; the name of the model this alias stands for",
        ),
        ({"fast": {"model": ""}}, "model_aliases.fast.model: must be a non-empty model name without whitespace"),
        (
            {"fast": {"model": "two words"}},
            "model_aliases.fast.model: must be a non-empty model name without whitespace",
        ),
        ({"fast": {"model": 8}}, "model_aliases.fast.model: must be a non-empty model name without whitespace"),
        (
            {"fast": {"model": "@smart"}, "smart": {"model": "gpt-5"}},
            "model_aliases.fast.model: names another alias; aliases do not chain",
        ),
        (
            {"fast": {"model": "m", "provider": ""}},
            "model_aliases.fast.provider: must be a non-empty provider name without whitespace",
        ),
        (
            {"fast": {"model": "m", "provider": ["local"]}},
            "model_aliases.fast.provider: must be a non-empty provider name without whitespace",
        ),
        ({"fast": "qwen3:8b"}, "model_aliases.fast: must be an object"),
        ({"a b": {"model": "m"}}, "model_aliases: the name 'a b' must be non-empty and contain no whitespace"),
        ({"@fast": {"model": "m"}}, "model_aliases: the name '@fast' starts with @; write the alias name without it"),
        (["fast"], "model_aliases: must be an object mapping names to settings"),
    ],
)
def test_invalid_aliases_are_rejected_naming_the_key(aliases: Any, expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"model_aliases": aliases}, source=SOURCE)
    assert caught.value.message.startswith(f"{SOURCE}: invalid agent settings:")
    assert expected in caught.value.message


def test_every_problem_of_an_alias_is_reported_together() -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"model_aliases": {"fast": {"model": "@x", "extra": 1}}}, source=SOURCE)
    message = caught.value.message
    assert (
        "model_aliases.fast.extra: unknown key" in message
        and "model_aliases.fast.model: names another alias" in message
    )


def test_an_alias_provider_must_be_a_defined_provider(tmp_path: Path) -> None:
    write(
        tmp_path / "settings.json",
        {"providers": {"local": {"type": "openai"}}, "model_aliases": {"fast": {"provider": "nowhere", "model": "m"}}},
    )
    with pytest.raises(SettingsError) as caught:
        load_settings(tmp_path)
    assert "model_aliases.fast.provider: 'nowhere' is not a provider (providers defined: local)" in caught.value.message
    assert str(tmp_path / "settings.json") in caught.value.message


def test_an_alias_provider_is_checked_after_merging(tmp_path: Path) -> None:
    """A user alias may name a provider that only trusted project settings define."""
    home, workspace = tmp_path / "home", tmp_path / "ws"
    write(home / "settings.json", {"model_aliases": {"team": {"provider": "gateway", "model": "big"}}})
    write(workspace / ".rho" / "settings.json", {"providers": {"gateway": {"type": "openai"}}})
    assert load_settings(home, workspace, trusted=True).model_aliases["team"].provider == "gateway"
    with pytest.raises(
        SettingsError, match=r"model_aliases\.team\.provider: 'gateway' is not a provider \(providers defined: none\)"
    ):
        load_settings(home, workspace, trusted=False)


# -- settings: user and project layers ---------------------------------------------------------


def test_project_aliases_apply_only_when_trusted_and_win_per_name(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    write(
        home / "settings.json",
        {
            "providers": {"local": {"type": "openai"}, "cloud": {"type": "openai"}},
            "model_aliases": {"fast": {"provider": "local", "model": "user-fast"}, "smart": {"model": "user-smart"}},
        },
    )
    write(
        workspace / ".rho" / "settings.json",
        {"model_aliases": {"fast": {"model": "project-fast"}, "deep": {"provider": "cloud", "model": "project-deep"}}},
    )
    untrusted = load_settings(home, workspace)
    assert untrusted.model_aliases == {
        "fast": ModelAlias(provider="local", model="user-fast"),
        "smart": ModelAlias(model="user-smart"),
    }
    trusted = load_settings(home, workspace, trusted=True)
    assert trusted.model_aliases == {
        "fast": ModelAlias(model="project-fast"),  # replaced whole: the user's provider does not carry over
        "smart": ModelAlias(model="user-smart"),
        "deep": ModelAlias(provider="cloud", model="project-deep"),
    }


def test_untrusted_project_aliases_are_not_even_validated(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    write(home / "settings.json", {"model_aliases": {"fast": {"model": "m"}}})
    write(workspace / ".rho" / "settings.json", {"model_aliases": {"fast": {"model": "@chain"}}})
    assert load_settings(home, workspace).model_aliases == {"fast": ModelAlias(model="m")}
    with pytest.raises(SettingsError, match="aliases do not chain"):
        load_settings(home, workspace, trusted=True)


# -- run time: select_model ------------------------------------------------------------------


SETTINGS = AgentSettings(
    providers={
        "local": ProviderSettings(type="openai", base_url="http://127.0.0.1:1/v1"),
        "hosted": ProviderSettings(type="anthropic", api_key_env="HOSTED_KEY"),
    },
    auth_profiles={"team": AuthProfile(api_key_env="TEAM_KEY", provider="hosted")},
    model_aliases={
        "fast": ModelAlias(provider="local", model="qwen3:8b"),
        "big": ModelAlias(provider="hosted", model="claude-big"),
        "smart": ModelAlias(model="gpt-5"),
    },
    default_provider="local",
    default_model="small",
    sources=("/home/u/settings.json", "/ws/.rho/settings.json"),
)
WHERE = "read from /home/u/settings.json, /ws/.rho/settings.json"


def pinned(model: str, **fields: Any) -> AgentDefinition:
    return definition(model_policy="select", model=model, **fields)


@pytest.mark.parametrize("policy", ["select", "prefer", "require"])
def test_alias_provider_is_used_when_the_file_names_none(policy: str) -> None:
    chosen = select_model(definition(model_policy=policy, model="@big"), SETTINGS)  # default_provider is local
    assert (chosen.provider, chosen.model, chosen.alias) == ("hosted", "claude-big", "@big")
    assert chosen.settings.type == "anthropic" and chosen.credential == "environment variable HOSTED_KEY"


def test_alias_without_provider_runs_on_the_default_provider() -> None:
    chosen = select_model(pinned("@smart"), SETTINGS)
    assert (chosen.provider, chosen.model, chosen.alias) == ("local", "gpt-5", "@smart")


def test_the_file_provider_wins_over_the_default_for_an_alias_without_provider() -> None:
    chosen = select_model(pinned("@smart", provider="hosted"), SETTINGS)
    assert (chosen.provider, chosen.model, chosen.alias) == ("hosted", "gpt-5", "@smart")


def test_the_file_may_repeat_the_alias_provider() -> None:
    chosen = select_model(pinned("@big", provider="hosted"), SETTINGS)
    assert (chosen.provider, chosen.model) == ("hosted", "claude-big")


def test_a_plain_model_records_no_alias() -> None:
    chosen = select_model(pinned("fast"), SETTINGS)  # a model literally named like an alias, without @
    assert (chosen.provider, chosen.model, chosen.alias) == ("local", "fast", None)


def test_auth_profile_is_checked_against_the_alias_provider() -> None:
    chosen = select_model(pinned("@big", auth="team"), SETTINGS)
    assert chosen.credential == "environment variable TEAM_KEY (auth profile 'team')"
    with pytest.raises(AgentFailure) as caught:
        select_model(pinned("@fast", auth="team"), SETTINGS)
    assert caught.value.kind == "config"
    assert (
        "auth profile 'team' is only valid for provider 'hosted', but agent 'tester' uses provider 'local'"
        in caught.value.message
    )


def test_inherit_resolves_an_aliased_default_model() -> None:
    on_alias_provider = select_model(definition(), SETTINGS.model_copy(update={"default_model": "@big"}))
    assert (on_alias_provider.provider, on_alias_provider.model, on_alias_provider.alias) == (
        "hosted",
        "claude-big",
        "@big",
    )
    on_default = select_model(definition(), SETTINGS.model_copy(update={"default_model": "@smart"}))
    assert (on_default.provider, on_default.model, on_default.alias) == ("local", "gpt-5", "@smart")
    no_default_provider = SETTINGS.model_copy(update={"default_model": "@fast", "default_provider": None})
    assert select_model(definition(), no_default_provider).provider == "local"  # the alias supplies it


def test_inherit_keeps_its_plain_default_model() -> None:
    chosen = select_model(definition(), SETTINGS)
    assert (chosen.provider, chosen.model, chosen.alias) == ("local", "small", None)


@pytest.mark.parametrize(
    ("agent", "settings", "expected"),
    [
        (
            pinned("@fsat"),
            SETTINGS,
            f"agent 'tester' uses model alias '@fsat', which settings do not define (aliases defined: @big, @fast, "
            f"@smart; {WHERE}); add 'fsat' under \"model_aliases\" in settings.json or name the model itself",
        ),
        (
            pinned("@fast"),
            SETTINGS.model_copy(update={"model_aliases": {}, "sources": ()}),
            "uses model alias '@fast', which settings do not define (aliases defined: none; read from no settings file",
        ),
        (
            definition(),
            SETTINGS.model_copy(update={"default_model": "@gone"}),
            f"agent 'tester' inherits model alias '@gone' from the settings' default_model, which settings do not "
            f"define (aliases defined: @big, @fast, @smart; {WHERE}); add 'gone' under \"model_aliases\" or change default_model",
        ),
        (
            pinned("@fast", provider="hosted"),
            SETTINGS,
            f"agent 'tester' pins provider 'hosted', but its model alias '@fast' names provider 'local' ({WHERE}); "
            "remove provider from the agent file or use an alias for the same provider",
        ),
        (
            pinned("@smart"),
            SETTINGS.model_copy(update={"default_provider": None}),
            "agent 'tester' pins model '@smart' (alias for 'gpt-5', which names no provider) without a provider, "
            "and settings set no default_provider",
        ),
        (
            definition(),
            SETTINGS.model_copy(update={"default_model": "@smart", "default_provider": None}),
            "agent 'tester' inherits its model (model-policy: inherit), but settings set no default_provider",
        ),
        (
            pinned("@lost"),
            SETTINGS.model_copy(update={"model_aliases": {"lost": ModelAlias(provider="gone", model="m")}}),
            "provider 'gone' (from model alias '@lost') is not defined in settings (providers: hosted, local",
        ),
    ],
    ids=[
        "unknown",
        "no-aliases",
        "inherit-unknown",
        "provider-conflict",
        "no-provider",
        "inherit-no-provider",
        "alias-provider-gone",
    ],
)
def test_alias_failures(agent: AgentDefinition, settings: AgentSettings, expected: str) -> None:
    with pytest.raises(AgentFailure) as caught:
        select_model(agent, settings)
    assert caught.value.kind == "config"
    assert expected in caught.value.message


# -- plan time: check_agent_provider ----------------------------------------------------------


def agent_file(tmp_path: Path, *lines: str) -> tuple[AgentDefinition, Path]:
    """Write ``aliased.md`` with the given frontmatter lines after id and description, and parse it."""
    text = "\n".join(["---", "id: aliased", "description: Uses a model alias", *lines, "---", "Be brief.", ""])
    path = tmp_path / "agents" / "aliased.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return parse_agent_definition(text, file=str(path), default_id="aliased", origin="workflow"), path


def plan_check(
    agent: AgentDefinition, path: Path, home: Path, workspace: Path | None = None, *, trusted: bool = False
) -> None:
    check_agent_provider(agent, user_home=home, workspace=workspace, trusted=trusted, file=path)


def test_unknown_alias_is_a_diagnostic_on_the_model_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings_file = write(
        home / "settings.json", {"providers": {"local": {"type": "openai"}}, "model_aliases": {"fast": {"model": "m"}}}
    )
    agent, path = agent_file(tmp_path, "reasoning: low", 'model: "@fsat"')
    with pytest.raises(InvalidWorkflow) as caught:
        plan_check(agent, path, home)
    (found,) = caught.value.diagnostics()
    assert (found.rule, found.file, found.line, found.column) == ("agent.model", str(path), 5, 1)
    assert found.message == (
        f"agent 'aliased' uses model alias '@fsat', which settings do not define (aliases defined: @fast; read from "
        f"{settings_file}); add 'fsat' under \"model_aliases\" in settings.json or name the model itself"
    )


def test_known_alias_passes_the_plan_check(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(
        home / "settings.json",
        {"providers": {"local": {"type": "openai"}}, "model_aliases": {"fast": {"provider": "local", "model": "m"}}},
    )
    agent, path = agent_file(tmp_path, 'model: "@fast"', "provider: local")
    plan_check(agent, path, home)  # no InvalidWorkflow


def test_a_trusted_project_alias_is_seen_at_plan_time_only_when_trusted(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    write(workspace / ".rho" / "settings.json", {"model_aliases": {"fast": {"model": "m"}}})
    agent, path = agent_file(tmp_path, 'model: "@fast"')
    plan_check(agent, path, home, workspace, trusted=True)
    with pytest.raises(InvalidWorkflow) as caught:
        plan_check(agent, path, home, workspace, trusted=False)
    (found,) = caught.value.diagnostics()
    assert found.rule == "agent.model" and "(aliases defined: none; read from no settings file" in found.message


def test_an_alias_makes_planning_read_settings(tmp_path: Path) -> None:
    """Without provider, auth or alias planning never reads settings; with an alias it must."""
    home = tmp_path / "home"
    write(home / "settings.json", {"model_aliases": {"fast": {"model": "@chain"}}})
    plain, plain_path = agent_file(tmp_path, "model: qwen3:8b")
    plan_check(plain, plain_path, home)
    aliased, aliased_path = agent_file(tmp_path, 'model: "@fast"')
    with pytest.raises(InvalidWorkflow) as caught:
        plan_check(aliased, aliased_path, home)
    (found,) = caught.value.diagnostics()
    assert found.rule == "settings" and "model_aliases.fast.model: names another alias" in found.message


def test_provider_conflict_is_reported_at_plan_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(
        home / "settings.json",
        {
            "providers": {"local": {"type": "openai"}, "hosted": {"type": "openai"}},
            "model_aliases": {"fast": {"provider": "local", "model": "m"}},
        },
    )
    agent, path = agent_file(tmp_path, 'model: "@fast"', "provider: hosted")
    with pytest.raises(InvalidWorkflow) as caught:
        plan_check(agent, path, home)
    (found,) = caught.value.diagnostics()
    assert (found.rule, found.line) == ("agent.model", 4)
    assert "pins provider 'hosted', but its model alias '@fast' names provider 'local'" in found.message


def test_plan_time_auth_check_uses_the_alias_provider(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(
        home / "settings.json",
        {
            "providers": {"local": {"type": "openai"}, "hosted": {"type": "openai"}},
            "auth_profiles": {"team": {"api_key_env": "TEAM_KEY", "provider": "hosted"}},
            "model_aliases": {"fast": {"provider": "local", "model": "m"}, "big": {"provider": "hosted", "model": "b"}},
        },
    )
    ok, ok_path = agent_file(tmp_path, 'model: "@big"', "auth: team")
    plan_check(ok, ok_path, home)
    bad, bad_path = agent_file(tmp_path, 'model: "@fast"', "auth: team")
    with pytest.raises(InvalidWorkflow) as caught:
        plan_check(bad, bad_path, home)
    (found,) = caught.value.diagnostics()
    assert (found.rule, found.line) == ("agent.auth", 5)
    assert (
        "auth profile 'team' is only valid for provider 'hosted', but agent 'aliased' uses provider 'local'"
        in found.message
    )


# -- attempts against a real local server ----------------------------------------------------


def test_an_aliased_agent_sends_the_aliased_model(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer('{"decision": "approve", "summary": "fine"}')])
    base = settings_for(server)  # provider "local" at the server, default_model "test-model"
    settings = base.model_copy(
        update={
            "providers": {
                **base.providers,
                "unreachable": ProviderSettings(type="openai", base_url="http://127.0.0.1:9/v1"),
            },
            "default_provider": "unreachable",  # would fail the attempt if the alias's provider were ignored
            "model_aliases": {"fast": ModelAlias(provider="local", model="aliased-model")},
        }
    )
    attempt = runner.run(agent=pinned("@fast"), settings=settings, output=DECISION)
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    assert [r.body["model"] for r in server.requests] == ["aliased-model"]
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert (attempt.usage["provider"], attempt.usage["model"], attempt.usage["model_alias"]) == (
        "local",
        "aliased-model",
        "@fast",
    )
    transcript = attempt.artifact("transcript.json")
    assert (transcript["model"], transcript["model_alias"]) == ("aliased-model", "@fast")


def test_an_unknown_alias_fails_the_attempt_before_any_request(runner: Runner, serve: Serve) -> None:
    server = serve([])
    attempt = runner.run(agent=pinned("@fast"), settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "config"
    assert (
        "agent config: agent 'tester' uses model alias '@fast', which settings do not define" in attempt.result.message
    )
    assert server.requests == []


ALIASED_AGENT = """---
description: Reviews with whatever @fast means
model: "@fast"
tools: [read_file, list_dir]
---
Be brief.
"""

ALIASED_FLOW = """
def build(inputs):
    decision = schema.record({"decision": schema.enum_(["approve", "revise"]), "summary": schema.string()})
    review = agent(name = "review", agent = "aliased", prompt = "Review.", access = "read_only",
                   output = decision, timeout_seconds = 60, max_output_bytes = 4000)
    return workflow(name = "aliased", nodes = [review])

WORKFLOW = define(inputs = {}, build = build)
"""


def aliased_project(project: Project, server: ScriptedServer, aliases: dict[str, Any]) -> None:
    project.write(".rho/workflows/aliased/agents/aliased.md", ALIASED_AGENT)
    project.write(".rho/workflows/aliased/flow.star", ALIASED_FLOW)
    project.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    settings = {
        "providers": {
            "local": {"type": "openai", "base_url": OPENAI.base(server.url), "api_key_env": KEY_ENV},
            "unreachable": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"},
        },
        "model_aliases": aliases,
        "default_provider": "unreachable",
        "default_model": "unused-default",
    }
    (project.home / "settings.json").write_text(json.dumps(settings))


def test_cli_run_resolves_an_alias_from_settings_json(project: Project, serve: Serve) -> None:
    server = serve([OPENAI.answer('{"decision": "approve", "summary": "aliased"}')])
    aliased_project(project, server, {"fast": {"provider": "local", "model": "aliased-model"}})
    code, events, state = run_cli(project, ".rho/workflows/aliased/flow.star")
    assert code == 0, events
    assert state["nodes"]["review"]["state"] == "success"
    assert [r.body["model"] for r in server.requests] == ["aliased-model"]
    usage = json.loads((attempt_dir(project, state["run_id"], "review") / "usage.json").read_text())
    assert (usage["provider"], usage["model"], usage["model_alias"]) == ("local", "aliased-model", "@fast")


def test_cli_plan_reports_an_unknown_alias_at_the_model_line(project: Project, serve: Serve) -> None:
    aliased_project(project, serve([]), {"quick": {"provider": "local", "model": "aliased-model"}})
    result = project.cli("plan", ".rho/workflows/aliased/flow.star", env=ENV)
    assert result.returncode != 0
    path = project.root / ".rho/workflows/aliased/agents/aliased.md"
    assert (
        f"{path}:3:1: error[agent.model]: agent 'aliased' uses model alias '@fast', which settings do not define "
        f"(aliases defined: @quick; read from {project.home / 'settings.json'})"
    ) in result.stderr
    assert project.stored_plans() == []
