"""One completion outside any run: what a flow's in-memory backend calls (docs/flows.md).

The request is the one a script's ``run_model`` step sends (leading ``system`` messages form the
system prompt; the rest are user, assistant and tool messages; tools are ``{"name",
"description", "parameters"}``), answered through the same client
(the model operation, :mod:`rho_notebook.exec.model`) with the same provider and model
selection from settings, but nothing is journaled: a crash loses it, as it would in OpenRath.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.settings import AgentSettings, load_settings
from rho_notebook.errors import SettingsError, StoreError
from rho_notebook.exec.model import ask, model_call
from rho_notebook.policy.trust import TrustStore
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.layout import StoreLayout

__all__ = ["CompletionJson", "complete", "complete_in", "provider_kinds_in"]


class CompletionJson(TypedDict):
    """The answer of :func:`complete`: the text, the tool calls, who answered."""

    text: str
    tool_calls: list[dict[str, Any]]
    provider: str
    model: str


async def complete_in(
    layout: StoreLayout,
    messages: Sequence[Mapping[str, Any]],
    *,
    workspace: Workspace | None,
    provider: str | None = None,
    model: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> CompletionJson:
    """:func:`complete` with the user's settings of ``layout`` and, when it is trusted, the
    settings of ``workspace`` (None: the one around the current directory)."""
    settings = await asyncio.to_thread(_settings_in, layout, workspace)
    return await complete(settings, messages, provider=provider, model=model, tools=tools)


def provider_kinds_in(layout: StoreLayout, workspace: Workspace) -> dict[str, str] | None:
    """The providers :func:`complete_in` can call in ``workspace`` (``{name: type}``), read now;
    None when the settings cannot be read (the call itself then says why)."""
    try:
        return _settings_in(layout, workspace).provider_kinds()
    except (SettingsError, StoreError):
        return None


def _settings_in(layout: StoreLayout, workspace: Workspace | None) -> AgentSettings:
    """The user's settings of ``layout`` merged with ``workspace``'s when it is trusted (None: the
    workspace around the current directory)."""
    ws = workspace if workspace is not None else find_workspace()
    return load_settings(layout.home, ws.root, trusted=TrustStore(layout).is_trusted(ws))


async def complete(
    settings: AgentSettings,
    messages: Sequence[Mapping[str, Any]],
    *,
    provider: str | None = None,
    model: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> CompletionJson:
    """One model response to ``messages`` from ``provider``/``model`` (None: the defaults of
    ``settings``, as ``run_model``), with the credentials of this process's environment.

    Raises
    ------
    StepInvalid
        The messages or tools are malformed.
    SettingsError
        An unknown provider or alias, or nothing to default to.
    AgentFailure, ProviderError
        The credential is not set, or the request failed.
    """
    call = model_call(
        settings,
        messages=list(messages),
        provider=provider,
        model=model,
        tools=None if tools is None else list(tools),
    )
    redactor = Redactor()
    completion = await ask(call, environ=os.environ, redactor=redactor)
    return {
        "text": redactor.text(completion.message.content),
        "tool_calls": [
            {"id": made.id, "name": made.name, "arguments": made.arguments} for made in completion.message.tool_calls
        ],
        "provider": call.selection.provider,
        "model": call.selection.model,
    }
