"""Which provider, model and credential an agent uses, checked at plan time and resolved at run time.

Model policy (runtime rho):

- ``inherit``: the settings' ``default_provider`` and ``default_model``.
- ``select`` / ``prefer`` / ``require``: the definition's ``model``, on its ``provider`` or else on
  the settings' ``default_provider``. rho_notebook has one host model, so the three pin alike.

The credential is referenced, never stored: the definition's ``auth`` profile when set, else the
provider's ``api_key_env``, else the provider's ``auth_profile``; none at all is allowed (local
servers). A provider or profile named in an agent FILE must exist when planning
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
from rho_notebook.agents.session import AgentFailure
from rho_notebook.agents.settings import AgentSettings, ProviderSettings, SettingsError, load_settings
from rho_notebook.errors import Diagnostic, InvalidWorkflow, StoreError
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


def check_agent_provider(
    definition: AgentDefinition,
    settings: AgentSettings | None = None,
    *,
    user_home: Path | None = None,
    workspace: Path | None = None,
    trusted: bool = False,
    file: Path | None = None,
) -> None:
    """Plan-time check: a provider or auth profile an agent file names must exist in settings.

    Settings are read (from ``user_home`` and, when ``trusted``, ``workspace``) only when the
    definition names a provider or auth profile and ``settings`` is not given.

    Raises
    ------
    InvalidWorkflow
        ``agent.provider`` / ``agent.auth`` at the definition file's line, or ``settings`` when
        the settings cannot be read.
    """
    if definition.runtime != "rho" or (definition.provider is None and definition.auth is None):
        return
    shown = str(file) if file is not None else f"<{definition.origin} agent {definition.id}>"
    if settings is None:
        if user_home is None:
            msg = "check_agent_provider needs settings or user_home"
            raise ValueError(msg)
        try:
            settings = load_settings(user_home, workspace, trusted=trusted)
        except (SettingsError, StoreError) as err:
            raise InvalidWorkflow([Diagnostic(rule="settings", message=err.message, file=shown)]) from None
    found: list[Diagnostic] = []
    if definition.provider is not None and definition.provider not in settings.providers:
        found.append(
            Diagnostic(
                rule="agent.provider",
                message=(
                    f"agent {definition.id!r} names provider {definition.provider!r}, which settings do not "
                    f"define (providers: {_names(settings.providers)}; read from {settings.where()}); add it "
                    "under \"providers\" in settings.json or change the agent's provider"
                ),
                file=shown,
                line=_key_line(file, "provider"),
                column=1,
            )
        )
    if definition.auth is not None:
        problem = _auth_problem(definition, settings)
        if problem is not None:
            found.append(Diagnostic(rule="agent.auth", message=problem, file=shown, line=_key_line(file, "auth"), column=1))
    if found:
        raise InvalidWorkflow(found)


def select_model(definition: AgentDefinition, settings: AgentSettings) -> Selection:
    """Resolve provider, model and credential reference for a runtime-rho attempt.

    Raises
    ------
    AgentFailure
        ``config``: no default provider or model, an unknown provider, a model alias, an unknown
        auth profile.
    """
    where = settings.where()
    if definition.model_policy == "inherit":
        if settings.default_provider is None or settings.default_model is None:
            missing = "default_provider" if settings.default_provider is None else "default_model"
            msg = (
                f"agent {definition.id!r} inherits its model (model-policy: inherit), but settings set no "
                f"{missing} ({where}); add \"default_provider\" and \"default_model\" to settings.json"
            )
            raise AgentFailure(msg, kind="config")
        provider_name, model = settings.default_provider, settings.default_model
        origin = "the settings' default_provider"
    else:
        if definition.model is None:
            msg = f"agent {definition.id!r} has model-policy {definition.model_policy} but no model"
            raise AgentFailure(msg, kind="config")
        model = definition.model
        if definition.provider is not None:
            provider_name, origin = definition.provider, "the agent file"
        elif settings.default_provider is not None:
            provider_name, origin = settings.default_provider, "the settings' default_provider"
        else:
            msg = (
                f"agent {definition.id!r} pins model {model!r} without a provider, and settings set no "
                f"default_provider ({where}); add provider to the agent or default_provider to settings.json"
            )
            raise AgentFailure(msg, kind="config")
    if model.startswith("@"):
        msg = (
            f"agent {definition.id!r} uses model alias {model!r}; rho_notebook settings define no model "
            "aliases yet, so name the model itself"
        )
        raise AgentFailure(msg, kind="config")
    provider = settings.providers.get(provider_name)
    if provider is None:
        msg = (
            f"provider {provider_name!r} (from {origin}) is not defined in settings "
            f"(providers: {_names(settings.providers)}; read from {where}); add it under \"providers\""
        )
        raise AgentFailure(msg, kind="config")
    env, credential = _credential(definition, provider_name, provider, settings)
    return Selection(provider=provider_name, settings=provider, model=model, credential_env=env, credential=credential)


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
            selection.provider, selection.settings, client=client, api_key=api_key, credential=selection.credential, redactor=redactor
        )
    from rho_notebook.agents.openai import OpenAIProvider

    return OpenAIProvider(
        selection.provider, selection.settings, client=client, api_key=api_key, credential=selection.credential, redactor=redactor
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
