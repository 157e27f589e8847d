"""What one agent attempt did, as it happens: conversation, turns, usage, retries, and failures.

A :class:`Session` is filled in by the running runtime (the rho loop or the claude-cli runner) so
that, whatever way the attempt ends (answer, failure, timeout, cancellation), the executor can
store a transcript (``transcript.json``), a usage record (``usage.json``) and an event summary
from it. Every record passes through the session's :class:`~rho_notebook.agents.redact.Redactor`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from rho_notebook.agents.provider import Message, RetryRecord, Usage
from rho_notebook.agents.redact import Redactor
from rho_notebook.errors import AgentFailure

__all__ = ["Session", "TRANSCRIPT_FORMAT", "USAGE_FORMAT"]

TRANSCRIPT_FORMAT = "rho-notebook/agent-transcript/v1"
USAGE_FORMAT = "rho-notebook/agent-usage/v1"


@dataclass
class Session:
    """The running record of one attempt."""

    runtime: Literal["rho", "claude-cli"]
    redactor: Redactor
    agent: str
    provider: str | None = None
    provider_type: str | None = None
    base_url: str | None = None
    model: str | None = None
    model_alias: str | None = None
    """The ``@alias`` the agent named, when ``model`` came from settings' ``model_aliases``."""
    credential: str | None = None
    """How the credential was referenced (never its value)."""
    system: str = ""
    tools: tuple[str, ...] = ()
    unavailable_tools: tuple[str, ...] = ()
    """Capabilities of the definition this host does not supply (omitted, not offered)."""
    messages: list[Message] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    retries: list[RetryRecord] = field(default_factory=list)
    tool_calls: int = 0
    tool_errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    """Runtime-specific transcript content (claude-cli: argv, output)."""
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    _t0: float = field(default_factory=time.monotonic, init=False, repr=False)

    def elapsed_ms(self) -> float:
        return round((time.monotonic() - self._t0) * 1000, 3)

    def transcript(self) -> dict[str, Any]:
        """The redacted conversation for ``transcript.json``."""
        record: dict[str, Any] = {
            "format": TRANSCRIPT_FORMAT,
            "runtime": self.runtime,
            "agent": self.agent,
            "provider": self.provider,
            "model": self.model,
            "model_alias": self.model_alias,
            "system": self.system,
            "tools": list(self.tools),
            "messages": [m.model_dump(mode="json", exclude_defaults=True) for m in self.messages],
            "turns": self.turns,
            **self.extra,
        }
        redacted: dict[str, Any] = self.redactor.value(record)
        return redacted

    def usage_record(self, *, outcome: str, failure: AgentFailure | None) -> dict[str, Any]:
        """The redacted ``usage.json``: tokens (cached and reasoning ones where the provider reported
        them), model, provider, timings, retries, outcome."""
        record = {
            "format": USAGE_FORMAT,
            "runtime": self.runtime,
            "agent": self.agent,
            "provider": self.provider,
            "provider_type": self.provider_type,
            "base_url": self.base_url,
            "model": self.model,
            "model_alias": self.model_alias,
            "credential": self.credential,
            "started_at": self.started_at,
            "ended_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "duration_ms": self.elapsed_ms(),
            "turns": len(self.turns),
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            **self.usage.reported_fields(),
            "retries": [r.model_dump() for r in self.retries],
            "tools": list(self.tools),
            "unavailable_tools": list(self.unavailable_tools),
            "outcome": outcome,
            "failure": None
            if failure is None
            else {"kind": failure.kind, "status": failure.status, "message": failure.message},
        }
        redacted: dict[str, Any] = self.redactor.value(record)
        return redacted

    def summary(self, failure: AgentFailure | None) -> dict[str, Any]:
        """The attempt summary carried by the ``node_finished`` event (as its ``exit``)."""
        return {
            "kind": "agent",
            "runtime": self.runtime,
            "provider": self.provider,
            "model": self.model,
            "turns": len(self.turns),
            "tool_calls": self.tool_calls,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "retries": len(self.retries),
            "duration_ms": self.elapsed_ms(),
            "failure": None if failure is None else failure.kind,
        }
