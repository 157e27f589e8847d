"""OpenAI-compatible chat completions with tool calling, over httpx.

Works with the OpenAI API and with servers that speak its wire format (Ollama, vLLM, llama.cpp)
through ``base_url``. ``POST {base_url}/chat/completions`` with ``messages`` (system first), and
``tools`` as ``{"type": "function", "function": {name, description, parameters}}``. Tool calls come
back in ``choices[0].message.tool_calls`` with JSON-text arguments; results go back as ``tool``
messages. ``reasoning`` is sent as ``reasoning_effort`` (``off`` as ``none``, ``max`` as ``xhigh``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from rho_notebook.agents._http import Endpoint, post_json
from rho_notebook.agents.provider import Completion, CompletionRequest, Message, ToolCall, Usage
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.settings import ProviderSettings
from rho_notebook.errors import ProviderError

__all__ = ["OpenAIProvider"]

_EFFORT = {"off": "none", "max": "xhigh"}


class OpenAIProvider:
    """A provider of type ``openai``."""

    def __init__(
        self,
        name: str,
        settings: ProviderSettings,
        *,
        client: httpx.AsyncClient,
        api_key: str | None,
        credential: str | None,
        redactor: Redactor,
    ) -> None:
        headers: dict[str, str] = {}
        if api_key is not None:
            headers["authorization"] = f"Bearer {api_key}"
        self._name = name
        self._settings = settings
        self._client = client
        self._redactor = redactor
        self._endpoint = Endpoint.for_provider(
            name, settings, path="/chat/completions", headers=headers, credential=credential
        )

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: CompletionRequest) -> Completion:
        body: dict[str, Any] = {"model": request.model, "messages": _wire_messages(request)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.reasoning is not None:
            body["reasoning_effort"] = _EFFORT.get(request.reasoning, request.reasoning)
        if self._settings.max_tokens is not None:
            body["max_tokens"] = self._settings.max_tokens
        data, retries = await post_json(self._client, self._endpoint, body, redactor=self._redactor)
        try:
            return _completion(data, retries=retries)
        except (KeyError, IndexError, TypeError, ValueError) as err:
            msg = f"provider {self._name!r}: malformed chat completion ({type(err).__name__}: {err})"
            raise ProviderError(msg, kind="malformed", status=200, retries=retries) from None


def _wire_messages(request: CompletionRequest) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": request.system}]
    for message in request.messages:
        if message.role == "user":
            wire.append({"role": "user", "content": message.content})
        elif message.role == "tool":
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
        else:
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": call.raw_arguments
                            if call.raw_arguments is not None
                            else json.dumps(call.arguments or {}),
                        },
                    }
                    for call in message.tool_calls
                ]
            wire.append(entry)
    return wire


def _completion(data: dict[str, Any], *, retries: tuple[Any, ...]) -> Completion:
    choices = data["choices"]
    if not isinstance(choices, list) or not choices:
        msg = "no choices in the response"
        raise ValueError(msg)
    choice = choices[0]
    message = choice["message"]
    if not isinstance(message, dict):
        msg = "choices[0].message is not an object"
        raise TypeError(msg)
    calls = tuple(_tool_call(raw, index) for index, raw in enumerate(message.get("tool_calls") or ()))
    finish = choice.get("finish_reason")
    return Completion(
        message=Message(role="assistant", content=_text(message.get("content")), tool_calls=calls),
        usage=_usage(data.get("usage")),
        stop_reason=finish if isinstance(finish, str) else None,
        truncated=finish == "length",
        retries=retries,
        model=data.get("model") if isinstance(data.get("model"), str) else None,
    )


def _usage(raw: Any) -> Usage:
    """``usage``: prompt and completion tokens, with ``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens`` where the server reports them (both are
    already counted in the prompt and completion totals)."""
    usage = raw if isinstance(raw, dict) else {}
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    return Usage.reported(
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        cached_tokens=prompt.get("cached_tokens") if isinstance(prompt, dict) else None,
        reasoning_tokens=completion.get("reasoning_tokens") if isinstance(completion, dict) else None,
    )


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    msg = f"message content is a {type(content).__name__}, not text"
    raise TypeError(msg)


def _tool_call(raw: Any, index: int) -> ToolCall:
    function = raw["function"]
    name = function["name"]
    if not isinstance(name, str) or not name:
        msg = f"tool_calls[{index}] has no function name"
        raise ValueError(msg)
    text = function.get("arguments")
    arguments: dict[str, Any] | None
    if isinstance(text, dict):  # some compatible servers send an object
        arguments, text = text, json.dumps(text)
    else:
        text = text if isinstance(text, str) else ""
        try:
            decoded = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            decoded = None
        arguments = decoded if isinstance(decoded, dict) else None
    call_id = raw.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else f"call_{uuid.uuid4().hex[:12]}",
        name=name,
        arguments=arguments,
        raw_arguments=text,
    )
