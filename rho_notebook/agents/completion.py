"""One completion over a message list, without the agent loop: the client of model steps.

:func:`select_provider` resolves a provider named in settings (or the settings' default) and a
model (a name, or an ``@alias`` of settings' ``model_aliases``) to a :class:`Selection`, with the
credential referenced exactly as agents reference it (the provider's ``api_key_env``, else its
``auth_profile``; none for local servers). :func:`complete_once` opens that provider and awaits one
:meth:`~rho_notebook.agents.provider.Provider.complete`; cancelling the awaiting task aborts the
request. The credential value is read from the given environment at call time and added to the
redactor, never returned or stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rho_notebook.agents.provider import Completion, CompletionRequest
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.resolve import Selection, open_provider, read_credential
from rho_notebook.agents.settings import AgentSettings
from rho_notebook.errors import SettingsError

if TYPE_CHECKING:
    import httpx

__all__ = ["complete_once", "select_provider"]


def select_provider(settings: AgentSettings, *, provider: str | None, model: str | None) -> Selection:
    """The provider, model and credential reference of one completion.

    ``provider`` None takes the model alias's provider, else ``default_provider``; ``model`` None
    takes ``default_model``.

    Raises
    ------
    SettingsError
        An unknown provider, alias or auth profile, or nothing to default to.
    """
    where = settings.where()
    written = model if model is not None else settings.default_model
    if written is None:
        msg = f"no model given and settings set no default_model ({where}); pass model="
        raise SettingsError(msg)
    chosen, alias_provider, alias = written, None, None
    if written.startswith("@"):
        found = settings.model_aliases.get(written[1:])
        if found is None:
            known = ", ".join(f"@{name}" for name in sorted(settings.model_aliases)) or "none"
            msg = f"model alias {written!r} is not defined in settings (model_aliases: {known}; read from {where})"
            raise SettingsError(msg)
        chosen, alias_provider, alias = found.model, found.provider, written
        if provider is not None and alias_provider is not None and provider != alias_provider:
            msg = f"model alias {written!r} runs on provider {alias_provider!r}, not {provider!r}; drop provider= or change it"
            raise SettingsError(msg)
    name = provider or alias_provider or settings.default_provider
    if name is None:
        msg = f"no provider given and settings set no default_provider ({where}); pass provider="
        raise SettingsError(msg)
    entry = settings.providers.get(name)
    if entry is None:
        known = ", ".join(sorted(settings.providers)) or "none"
        msg = f'provider {name!r} is not defined in settings (providers: {known}; read from {where}); add it under "providers"'
        raise SettingsError(msg)
    env, credential = None, None
    if entry.api_key_env is not None:
        env, credential = entry.api_key_env, f"environment variable {entry.api_key_env}"
    elif entry.auth_profile is not None:
        profile = settings.auth_profiles.get(entry.auth_profile)
        if profile is None:
            msg = f"provider {name!r} names auth profile {entry.auth_profile!r}, which settings do not define ({where})"
            raise SettingsError(msg)
        env = profile.api_key_env
        credential = f"environment variable {env} (auth profile {entry.auth_profile!r})"
    return Selection(
        provider=name, settings=entry, model=chosen, credential_env=env, credential=credential, alias=alias
    )


async def complete_once(
    selection: Selection,
    request: CompletionRequest,
    *,
    environ: Mapping[str, str],
    redactor: Redactor,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Completion:
    """One model response to ``request`` from ``selection``'s provider.

    Raises
    ------
    AgentFailure
        ``credential`` when the referenced key is not set in ``environ``.
    ProviderError
        Transport failure, HTTP error, malformed response or request timeout.
    """
    import httpx  # here, not at import: a run without model calls never loads it (nor rich)

    api_key = read_credential(selection, environ)
    redactor.add(api_key)
    async with httpx.AsyncClient(transport=transport) as client:
        provider = open_provider(selection, client=client, api_key=api_key, redactor=redactor)
        return await provider.complete(request)
