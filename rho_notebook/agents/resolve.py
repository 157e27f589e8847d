"""Which provider, model and credential an agent uses, checked at plan time and resolved at run time.

Model policy (runtime rho):

- ``inherit``: the settings' ``default_provider`` and ``default_model``.
- ``select`` / ``prefer`` / ``require``: the definition's ``model``, on its ``provider`` or else on
  the settings' ``default_provider``. rho_notebook has one host model, so the three pin alike.

A model written ``@name`` (in the agent file or as the settings' ``default_model``) is the settings'
``model_aliases.name``: its ``model`` replaces the alias, and the provider is the agent file's
``provider``, else the alias's ``provider``, else ``default_provider``. An agent file that pins a
provider other than the one its alias names is a configuration error.

The credential is referenced, never stored: the definition's ``auth`` profile when set, else the
provider's ``api_key_env``, else the provider's ``auth_profile``; none at all is allowed (local
servers). A provider, profile or model alias named in an agent FILE must exist when planning
(:func:`check_agent_provider`); one that comes only from settings is checked at run time
(:func:`select_model`), and the node fails with a clear message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rho_notebook.agents.provider import Provider
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.settings import AgentSettings, ModelAlias, ProviderSettings, load_settings
from rho_notebook.errors import AgentFailure, Diagnostic, InvalidWorkflow, SettingsError, StoreError
from rho_notebook.model.agent import AgentDefinition

if TYPE_CHECKING:
    import httpx

__all__ = ["Selection", "check_agent_provider", "open_provider", "read_credential", "select_model"]


@dataclass(frozen=True)
class Selection:
    """The resolved provider, model and credential reference of one attempt."""

    provider: str
    settings: ProviderSettings
    model: str
    credential_env: str | None
    """Environment variable holding the key; None when the provider needs none."""
    credential: str | None
    """How the credential is referenced, for records and messages (never the value)."""
    alias: str | None = None
    """The model alias as written (``@fast``) when ``model`` came from settings' ``model_aliases``."""


def check_agent_provider(
    definition: AgentDefinition,
    settings: AgentSettings | None = None,
    *,
    user_home: Path | None = None,
    workspace: Path | None = None,
    trusted: bool = False,
    file: Path | None = None,
) -> None:
    """Plan-time check: a provider, auth profile or model alias an agent file names must exist in settings.

    Settings are read (from ``user_home`` and, when ``trusted``, ``workspace``) only when the
    definition names a provider, auth profile or ``@alias`` model and ``settings`` is not given.
    An alias must also agree with the file's ``provider`` when both name one.

    Raises
    ------
    InvalidWorkflow
        ``agent.provider`` / ``agent.auth`` / ``agent.model`` at the definition file's line, or
        ``settings`` when the settings cannot be read.
    """
    if definition.runtime != "rho":
        return
    alias_name = _alias_name(definition.model) if definition.model_policy != "inherit" else None
    if definition.provider is None and definition.auth is None and alias_name is None:
        return
    shown = str(file) if file is not None else f"<{definition.origin} agent {definition.id}>"
    if settings is None:
        settings = _plan_settings(user_home=user_home, workspace=workspace, trusted=trusted, shown=shown)
    alias = settings.model_aliases.get(alias_name) if alias_name is not None else None
    model_problem = None
    if alias_name is not None:
        model_problem = (
            _unknown_alias(definition, f"@{alias_name}", settings)
            if alias is None
            else _alias_conflict(definition, alias, settings)
        )
    problems = (
        ("provider", _unknown_provider(definition, settings)),
        ("model", model_problem),
        ("auth", _auth_problem(_with_alias_provider(definition, alias), settings)),
    )
    found = [
        Diagnostic(rule=f"agent.{key}", message=problem, file=shown, line=_key_line(file, key), column=1)
        for key, problem in problems
        if problem is not None
    ]
    if found:
        raise InvalidWorkflow(found)


def _with_alias_provider(definition: AgentDefinition, alias: ModelAlias | None) -> AgentDefinition:
    """``definition`` with its model alias's provider when the file names none (for the auth check)."""
    if definition.auth is None or definition.provider is not None or alias is None or alias.provider is None:
        return definition
    return definition.model_copy(update={"provider": alias.provider})


def _plan_settings(*, user_home: Path | None, workspace: Path | None, trusted: bool, shown: str) -> AgentSettings:
    """The settings a plan-time check reads, or InvalidWorkflow (rule ``settings``) when they cannot be read."""
    if user_home is None:
        msg = "check_agent_provider needs settings or user_home"
        raise ValueError(msg)
    try:
        return load_settings(user_home, workspace, trusted=trusted)
    except (SettingsError, StoreError) as err:
        raise InvalidWorkflow([Diagnostic(rule="settings", message=err.message, file=shown)]) from None


def _unknown_provider(definition: AgentDefinition, settings: AgentSettings) -> str | None:
    """The message when the agent file names a provider settings do not define."""
    if definition.provider is None or definition.provider in settings.providers:
        return None
    return (
        f"agent {definition.id!r} names provider {definition.provider!r}, which settings do not "
        f"define (providers: {_names(settings.providers)}; read from {settings.where()}); add it "
        'under "providers" in settings.json or change the agent\'s provider'
    )


def select_model(definition: AgentDefinition, settings: AgentSettings) -> Selection:
    """Resolve provider, model and credential reference for a runtime-rho attempt.

    Raises
    ------
    AgentFailure
        ``config``: no default provider or model, an unknown provider, an unknown model alias, an
        alias whose provider differs from the agent file's, an unknown auth profile.
    """
    where = settings.where()
    written, pinned = _written_model(definition, settings)
    model, alias_provider = _unaliased(definition, written, settings)
    alias_written = written if _alias_name(written) is not None else None
    if pinned is not None:
        provider_name, origin = pinned, "the agent file"
    elif alias_provider is not None:
        provider_name, origin = alias_provider, f"model alias {written!r}"
    elif settings.default_provider is not None:
        provider_name, origin = settings.default_provider, "the settings' default_provider"
    elif definition.model_policy == "inherit":
        raise AgentFailure(_inherit_missing(definition, "default_provider", where), kind="config")
    else:
        shown = (
            repr(written) if alias_written is None else f"{written!r} (alias for {model!r}, which names no provider)"
        )
        msg = (
            f"agent {definition.id!r} pins model {shown} without a provider, and settings set no "
            f"default_provider ({where}); add provider to the agent or default_provider to settings.json"
        )
        raise AgentFailure(msg, kind="config")
    provider = settings.providers.get(provider_name)
    if provider is None:
        msg = (
            f"provider {provider_name!r} (from {origin}) is not defined in settings "
            f'(providers: {_names(settings.providers)}; read from {where}); add it under "providers"'
        )
        raise AgentFailure(msg, kind="config")
    env, credential = _credential(definition, provider_name, provider, settings)
    return Selection(
        provider=provider_name,
        settings=provider,
        model=model,
        credential_env=env,
        credential=credential,
        alias=alias_written,
    )


def _written_model(definition: AgentDefinition, settings: AgentSettings) -> tuple[str, str | None]:
    """The model as written (a name or ``@alias``) and the provider the agent file pins, if any."""
    if definition.model_policy == "inherit":
        if settings.default_model is None:
            missing = "default_provider" if settings.default_provider is None else "default_model"
            raise AgentFailure(_inherit_missing(definition, missing, settings.where()), kind="config")
        return settings.default_model, None
    if definition.model is None:
        msg = f"agent {definition.id!r} has model-policy {definition.model_policy} but no model"
        raise AgentFailure(msg, kind="config")
    return definition.model, definition.provider


def _unaliased(definition: AgentDefinition, written: str, settings: AgentSettings) -> tuple[str, str | None]:
    """The model ``written`` names (an alias's model) and the provider its alias names, if any."""
    alias_name = _alias_name(written)
    if alias_name is None:
        return written, None
    alias = settings.model_aliases.get(alias_name)
    if alias is None:
        raise AgentFailure(_unknown_alias(definition, written, settings), kind="config")
    conflict = _alias_conflict(definition, alias, settings)
    if conflict is not None:
        raise AgentFailure(conflict, kind="config")
    return alias.model, alias.provider


def read_credential(selection: Selection, environ: Mapping[str, str]) -> str | None:
    """The key value from the environment (None when the provider takes no credential).

    Raises
    ------
    AgentFailure
        ``credential`` when the referenced variable is unset or empty.
    """
    if selection.credential_env is None:
        return None
    value = environ.get(selection.credential_env)
    if not value:
        msg = (
            f"provider {selection.provider!r} takes its key from {selection.credential}, which is not set "
            "(or empty) in the environment of this run; export it before running"
        )
        raise AgentFailure(msg, kind="credential")
    return value


def open_provider(
    selection: Selection, *, client: httpx.AsyncClient, api_key: str | None, redactor: Redactor
) -> Provider:
    """The provider implementation for ``selection``'s type."""
    if selection.settings.type == "anthropic":
        from rho_notebook.agents.anthropic import AnthropicProvider

        return AnthropicProvider(
            selection.provider,
            selection.settings,
            client=client,
            api_key=api_key,
            credential=selection.credential,
            redactor=redactor,
        )
    from rho_notebook.agents.openai import OpenAIProvider

    return OpenAIProvider(
        selection.provider,
        selection.settings,
        client=client,
        api_key=api_key,
        credential=selection.credential,
        redactor=redactor,
    )


def _credential(
    definition: AgentDefinition, name: str, provider: ProviderSettings, settings: AgentSettings
) -> tuple[str | None, str | None]:
    profile_name = definition.auth if definition.model_policy != "inherit" else None
    if profile_name is None and provider.api_key_env is not None:
        env = provider.api_key_env
        return env, f"environment variable {env}"
    profile_name = profile_name or provider.auth_profile
    if profile_name is None:
        return None, None
    problem = _auth_problem(definition.model_copy(update={"auth": profile_name, "provider": name}), settings)
    if problem is not None:
        raise AgentFailure(problem, kind="config")
    env = settings.auth_profiles[profile_name].api_key_env
    return env, f"environment variable {env} (auth profile {profile_name!r})"


def _auth_problem(definition: AgentDefinition, settings: AgentSettings) -> str | None:
    name = definition.auth
    if name is None:
        return None
    profile = settings.auth_profiles.get(name)
    if profile is None:
        return (
            f"agent {definition.id!r} names auth profile {name!r}, which settings do not define "
            f"(auth_profiles: {_names(settings.auth_profiles)}; read from {settings.where()}); add it under "
            '"auth_profiles" with an api_key_env, or remove auth'
        )
    if definition.provider is not None and profile.provider is not None and profile.provider != definition.provider:
        return (
            f"auth profile {name!r} is only valid for provider {profile.provider!r}, but agent "
            f"{definition.id!r} uses provider {definition.provider!r}"
        )
    return None


def _alias_name(model: str | None) -> str | None:
    """``fast`` for ``@fast``; None for a model name that is not an alias."""
    if model is None or not model.startswith("@"):
        return None
    return model[1:]


def _unknown_alias(definition: AgentDefinition, written: str, settings: AgentSettings) -> str:
    """The message for an ``@alias`` (from the agent file, or inherited from default_model) settings lack."""
    defined = ", ".join(f"@{name}" for name in sorted(settings.model_aliases)) or "none"
    name = written[1:]
    if definition.model_policy == "inherit":
        subject = f"agent {definition.id!r} inherits model alias {written!r} from the settings' default_model"
        fix = "or change default_model"
    else:
        subject = f"agent {definition.id!r} uses model alias {written!r}"
        fix = "in settings.json or name the model itself"
    return (
        f"{subject}, which settings do not define (aliases defined: {defined}; read from "
        f'{settings.where()}); add {name!r} under "model_aliases" {fix}'
    )


def _alias_conflict(definition: AgentDefinition, alias: ModelAlias, settings: AgentSettings) -> str | None:
    """The message when the agent file pins a provider other than the one its alias names."""
    pinned = definition.provider if definition.model_policy != "inherit" else None
    if pinned is None or alias.provider is None or alias.provider == pinned:
        return None
    return (
        f"agent {definition.id!r} pins provider {pinned!r}, but its model alias {definition.model!r} "
        f"names provider {alias.provider!r} (read from {settings.where()}); remove provider from the "
        "agent file or use an alias for the same provider"
    )


def _inherit_missing(definition: AgentDefinition, missing: str, where: str) -> str:
    return (
        f"agent {definition.id!r} inherits its model (model-policy: inherit), but settings set no "
        f'{missing} ({where}); add "default_provider" and "default_model" to settings.json'
    )


def _names(mapping: Mapping[str, object]) -> str:
    return ", ".join(sorted(mapping)) or "none"


def _key_line(file: Path | None, key: str) -> int | None:
    """The line of ``key:`` in the definition's frontmatter (for the diagnostic)."""
    if file is None:
        return None
    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    pattern = re.compile(rf"{re.escape(key)}\s*:")
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == "---":
            return None
        if pattern.match(line):
            return number
    return None
