"""One completion outside any run: what a flow's in-memory backend calls (docs/flows.md).

The request is the one a script's ``run_model`` step sends (leading ``system`` messages form the
system prompt; the rest are user, assistant and tool messages; tools are ``{"name",
"description", "parameters"}``), answered through the same client
(:func:`~rho_notebook.agents.completion.complete_once`) with the same provider and model
selection from settings, but nothing is journaled: a crash loses it, as it would in OpenRath.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pydantic import ValidationError

from rho_notebook.agents.completion import complete_once, select_provider
from rho_notebook.agents.provider import CompletionRequest, Message, ToolSpec
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.settings import load_settings
from rho_notebook.errors import StepInvalid

__all__ = ["CompletionJson", "complete"]


class CompletionJson(TypedDict):
    """The answer of :func:`complete`: the text, the tool calls, who answered."""

    text: str
    tool_calls: list[dict[str, Any]]
    provider: str
    model: str


def _conversation(messages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[Message, ...]]:
    system: list[str] = []
    conversation: list[Message] = []
    for index, item in enumerate(messages):
        if item.get("role") == "system":
            if conversation or not isinstance(item.get("content"), str):
                msg = f"messages[{index}]: system messages come first and hold only content text"
                raise StepInvalid(msg)
            system.append(item["content"])
            continue
        try:
            conversation.append(Message.model_validate(dict(item)))
        except ValidationError as err:
            problem = err.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            msg = f"messages[{index}].{where}: {problem['msg']} (roles: system, user, assistant, tool)"
            raise StepInvalid(msg) from None
    if not conversation:
        msg = "messages hold no user message after the system prompt"
        raise StepInvalid(msg)
    return "\n\n".join(system), tuple(conversation)


async def complete(
    messages: Sequence[Mapping[str, Any]],
    *,
    home: Path,
    workspace: Path | None,
    trusted: bool,
    provider: str | None = None,
    model: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> CompletionJson:
    """One model response to ``messages`` from ``provider``/``model`` (None: the settings'
    defaults, as ``run_model``), with settings read from ``home`` (and ``workspace`` when trusted).

    Raises
    ------
    StepInvalid
        The messages or tools are malformed.
    SettingsError
        An unknown provider or alias, or nothing to default to.
    AgentFailure, ProviderError
        The credential is not set, or the request failed.
    """
    system, conversation = _conversation(messages)
    try:
        specs = tuple(ToolSpec.model_validate(dict(tool)) for tool in tools or ())
    except ValidationError as err:
        msg = f"tools: {err.errors()[0]['msg']}; each tool is {{'name', 'description', 'parameters'}}"
        raise StepInvalid(msg) from None
    settings = load_settings(home, workspace, trusted=trusted)
    selection = select_provider(settings, provider=provider, model=model)
    request = CompletionRequest(model=selection.model, system=system, messages=conversation, tools=specs)
    redactor = Redactor()
    completion = await complete_once(
        selection, request, environ=os.environ if environ is None else environ, redactor=redactor
    )
    return {
        "text": redactor.text(completion.message.content),
        "tool_calls": [
            {"id": call.id, "name": call.name, "arguments": call.arguments} for call in completion.message.tool_calls
        ],
        "provider": selection.provider,
        "model": selection.model,
    }
