"""The Anthropic Messages API with tool use, over httpx.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` headers, ``system``,
``messages`` and ``tools`` (``{name, description, input_schema}``). The assistant's ``tool_use``
blocks become tool calls; their results go back in one ``user`` message of ``tool_result`` blocks.
``reasoning`` turns on extended thinking with a token budget per level; thinking blocks are echoed
back verbatim on later turns, as the API requires during tool use.
"""

from __future__ import annotations

from typing import Any

import httpx

from rho_notebook.agents._http import Endpoint, post_json
from rho_notebook.agents.provider import Completion, CompletionRequest, Message, ToolCall, Usage
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.settings import ProviderSettings
from rho_notebook.errors import ProviderError

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "THINKING_BUDGETS", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
"""Output token limit per response when the provider settings set no max_tokens."""

THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16000,
    "xhigh": 24000,
    "max": 32000,
}
"""Extended-thinking budget per reasoning level (``off`` sends no thinking); added to max_tokens."""

_THINKING_TYPES = ("thinking", "redacted_thinking")


class AnthropicProvider:
    """A provider of type ``anthropic``."""

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
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key is not None:
            headers["x-api-key"] = api_key
        self._name = name
        self._settings = settings
        self._client = client
        self._redactor = redactor
        self._endpoint = Endpoint.for_provider(
            name, settings, path="/v1/messages", headers=headers, credential=credential
        )

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: CompletionRequest) -> Completion:
        max_tokens = self._settings.max_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {
            "model": request.model,
            "system": request.system,
            "messages": _wire_messages(request.messages),
            "max_tokens": max_tokens,
        }
        budget = THINKING_BUDGETS.get(request.reasoning or "off")
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max_tokens + budget
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        data, retries = await post_json(self._client, self._endpoint, body, redactor=self._redactor)
        try:
            return _completion(data, retries=retries)
        except (KeyError, IndexError, TypeError, ValueError) as err:
            msg = f"provider {self._name!r}: malformed Messages API response ({type(err).__name__}: {err})"
            raise ProviderError(msg, kind="malformed", status=200, retries=retries) from None


def _wire_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
            results.append(block)
            continue
        if results:
            wire.append({"role": "user", "content": results})
            results = []
        if message.role == "user":
            wire.append({"role": "user", "content": message.content})
            continue
        blocks: list[dict[str, Any]] = [dict(b) for b in message.provider_blocks]
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments or {}})
        wire.append({"role": "assistant", "content": blocks})
    if results:
        wire.append({"role": "user", "content": results})
    return wire


def _completion(data: dict[str, Any], *, retries: tuple[Any, ...]) -> Completion:
    content = data["content"]
    if not isinstance(content, list):
        msg = "content is not a list of blocks"
        raise TypeError(msg)
    texts: list[str] = []
    calls: list[ToolCall] = []
    kept: list[dict[str, Any]] = []
    for block in content:
        kind = block["type"]
        if kind == "text":
            texts.append(block["text"])
        elif kind == "tool_use":
            arguments = block.get("input")
            calls.append(
                ToolCall(
                    id=str(block["id"]),
                    name=str(block["name"]),
                    arguments=arguments if isinstance(arguments, dict) else None,
                )
            )
        elif kind in _THINKING_TYPES:
            kept.append(block)
    stop = data.get("stop_reason")
    return Completion(
        message=Message(role="assistant", content="".join(texts), tool_calls=tuple(calls), provider_blocks=tuple(kept)),
        usage=_usage(data.get("usage")),
        stop_reason=stop if isinstance(stop, str) else None,
        truncated=stop == "max_tokens",
        retries=retries,
        model=data.get("model") if isinstance(data.get("model"), str) else None,
    )


def _usage(raw: Any) -> Usage:
    """``usage``: Anthropic counts cache reads and cache writes apart from ``input_tokens``; the
    ledger's input is every prompt token (as OpenAI counts it), of which ``cache_read_input_tokens``
    are the cached ones. Without cache fields the counts are exactly as reported."""
    usage = raw if isinstance(raw, dict) else {}
    read = usage.get("cache_read_input_tokens")
    written = usage.get("cache_creation_input_tokens")
    extra = sum(n for n in (read, written) if isinstance(n, int) and not isinstance(n, bool) and n > 0)
    given = usage.get("input_tokens")
    input_tokens = given + extra if isinstance(given, int) and not isinstance(given, bool) else given
    return Usage.reported(input_tokens, usage.get("output_tokens"), cached_tokens=read)
