"""The provider interface: one async completion call, and the provider-neutral types it speaks.

A provider turns a :class:`CompletionRequest` (system prompt, conversation, offered tools) into
one :class:`Completion` (the assistant message, possibly with tool calls, and token usage).
Implementations: :mod:`rho_notebook.agents.openai` and :mod:`rho_notebook.agents.anthropic`.

Cancellation is task cancellation: cancelling the task awaiting :meth:`Provider.complete` must
abort the in-flight HTTP request (httpx closes the connection) and any Retry-After wait.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from rho_notebook.agents.settings import ProviderSettings
from rho_notebook.model.base import FrozenModel

__all__ = [
    "CallMeter",
    "Completion",
    "CompletionRequest",
    "Message",
    "Provider",
    "RetryRecord",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call_record",
    "output_limit",
]


class ToolSpec(FrozenModel):
    """A tool offered to the model: its name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolCall(FrozenModel):
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] | None = None
    """The decoded arguments; None when the model sent something that is not a JSON object."""
    raw_arguments: str | None = None
    """The arguments exactly as sent, when the wire format carries them as text (openai)."""


class Message(FrozenModel):
    """One conversation message (the system prompt travels separately)."""

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """Assistant only: the tool calls of this turn."""
    tool_call_id: str | None = None
    """Tool only: which call this is the result of."""
    tool_name: str | None = None
    is_error: bool = False
    """Tool only: the call was refused or failed."""
    provider_blocks: tuple[dict[str, Any], ...] = ()
    """Assistant only: provider content to echo back verbatim (Anthropic thinking blocks)."""


class Usage(FrozenModel):
    """Tokens of one response (or a sum of responses). ``cached_tokens`` (input tokens served from
    the provider's prompt cache, part of ``input_tokens``) and ``reasoning_tokens`` (part of
    ``output_tokens``) are None when the provider did not report them, and are then left out of
    stored records, which stay as they were before the ledger."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None

    @classmethod
    def reported(
        cls, input_tokens: Any, output_tokens: Any, *, cached_tokens: Any = None, reasoning_tokens: Any = None
    ) -> Usage:
        """The counts as a provider's response gave them; a count that is not an integer is 0
        (cached and reasoning counts: None, not reported)."""
        return cls(
            input_tokens=_count(input_tokens),
            output_tokens=_count(output_tokens),
            cached_tokens=_reported(cached_tokens),
            reasoning_tokens=_reported(reasoning_tokens),
        )

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=_plus(self.cached_tokens, other.cached_tokens),
            reasoning_tokens=_plus(self.reasoning_tokens, other.reasoning_tokens),
        )

    def reported_fields(self) -> dict[str, int]:
        """The counts for a record: input and output always, cached and reasoning when reported."""
        found = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        if self.cached_tokens is not None:
            found["cached_tokens"] = self.cached_tokens
        if self.reasoning_tokens is not None:
            found["reasoning_tokens"] = self.reasoning_tokens
        return found


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _reported(value: Any) -> int | None:
    """An optional count: None when the provider did not send an integer."""
    return _count(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


class RetryRecord(FrozenModel):
    """One transport retry: the status that caused it and how long we waited."""

    status: int
    retry_after: str | None
    """The Retry-After (or retry-after-ms) header as received; None when absent."""
    waited_seconds: float


class CompletionRequest(FrozenModel):
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    reasoning: Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None


class Completion(FrozenModel):
    message: Message
    usage: Usage
    stop_reason: str | None = None
    """As the provider reported it (openai ``finish_reason``, anthropic ``stop_reason``)."""
    truncated: bool = False
    """The response stopped at the output token limit."""
    retries: tuple[RetryRecord, ...] = ()
    model: str | None = None
    """The model the provider says answered."""


class Provider(Protocol):
    """One configured model provider (see the module docstring for cancellation)."""

    @property
    def name(self) -> str:
        """The provider's name in settings."""
        ...

    async def complete(self, request: CompletionRequest) -> Completion:
        """One model response to ``request``.

        Raises
        ------
        ProviderError
            Transport failure, HTTP error (after bounded 429/503 retries), malformed response
            or request timeout.
        """
        ...


class CallMeter(Protocol):
    """Where the agent loop reports each model call to the run (the ledger and its budgets).

    The same shape as :class:`rho_notebook.exec.base.ModelCalls` (the exec layer's name for it;
    this layer cannot import that one). ``before_call`` may raise
    :class:`~rho_notebook.errors.BudgetExceeded`: the call is then not made."""

    async def before_call(self, *, max_output_tokens: int | None, key: str | None = None) -> None: ...

    async def after_call(self, call: Mapping[str, Any]) -> None: ...


def output_limit(settings: ProviderSettings, reasoning: str | None) -> int | None:
    """The most output tokens one request to this provider may produce (what a budget reserves
    before the call): ``max_tokens`` when the settings set one; anthropic always sets one (its
    default, plus the thinking budget of ``reasoning``); None for openai without ``max_tokens``."""
    if settings.type != "anthropic":
        return settings.max_tokens
    from rho_notebook.agents.anthropic import DEFAULT_MAX_TOKENS, THINKING_BUDGETS  # loads httpx: at call time

    return (settings.max_tokens or DEFAULT_MAX_TOKENS) + THINKING_BUDGETS.get(reasoning or "off", 0)


def call_record(
    provider: str, model: str, completion: Completion, *, began: float, key: str | None = None
) -> dict[str, Any]:
    """The ``model_called`` fields of one completed call that started at ``began`` (monotonic):
    the model asked for (prices are keyed by it, not by the name the server answers with)."""
    record: dict[str, Any] = {
        "provider": provider,
        "model": model,
        **completion.usage.reported_fields(),
        "retries": len(completion.retries),
        "tool_calls": len(completion.message.tool_calls),
        "seconds": round(time.monotonic() - began, 6),
    }
    if key:
        record["key"] = key
    return record
