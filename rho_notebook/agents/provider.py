"""The provider interface: one async completion call, and the provider-neutral types it speaks.

A provider turns a :class:`CompletionRequest` (system prompt, conversation, offered tools) into
one :class:`Completion` (the assistant message, possibly with tool calls, and token usage).
Implementations: :mod:`rho_notebook.agents.openai` and :mod:`rho_notebook.agents.anthropic`.

Cancellation is task cancellation: cancelling the task awaiting :meth:`Provider.complete` must
abort the in-flight HTTP request (httpx closes the connection) and any Retry-After wait.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from rho_notebook.model.base import FrozenModel

__all__ = [
    "Completion",
    "CompletionRequest",
    "Message",
    "Provider",
    "RetryRecord",
    "ToolCall",
    "ToolSpec",
    "Usage",
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
    input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def reported(cls, input_tokens: Any, output_tokens: Any) -> Usage:
        """The counts as a provider's response gave them; a count that is not an integer is 0."""
        return cls(input_tokens=_count(input_tokens), output_tokens=_count(output_tokens))

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
