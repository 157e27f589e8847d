"""Redaction: secret values never reach an artifact, a transcript, an event or an error message.

Credentials are configured by reference (an environment variable name). At run time the value is
read once, handed to the provider's HTTP headers, and registered here; every text rho_notebook
records about an agent attempt passes through :meth:`Redactor.text` or :meth:`Redactor.value`
first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "Redactor"]

REDACTED = "[REDACTED]"
"""What a secret value is replaced with."""

MIN_SECRET_CHARS = 6
"""Shorter values are not treated as secrets (replacing every ``x`` would garble records)."""


class Redactor:
    """Replaces every registered secret value in text and JSON-like data."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Register one more secret value (ignored when None or too short to be a secret)."""
        if secret is None or len(secret) < MIN_SECRET_CHARS or secret in self._secrets:
            return
        self._secrets.append(secret)
        self._secrets.sort(key=len, reverse=True)

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by :data:`REDACTED`."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def value(self, data: Any) -> Any:
        """A copy of JSON-like ``data`` with every string (keys included) redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {self.text(str(k)): self.value(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [self.value(item) for item in data]
        return data
