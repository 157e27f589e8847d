"""One JSON POST to a provider: bounded 429/503 retries honouring Retry-After, typed errors.

No other retry happens here (nor anywhere else): transport errors, timeouts and every other HTTP
status end the call with a :class:`~rho_notebook.agents.provider.ProviderError`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from rho_notebook.agents.provider import RetryRecord
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.settings import ProviderSettings
from rho_notebook.errors import ProviderError, ProviderErrorKind

__all__ = ["Endpoint", "post_json"]

_RETRY_STATUSES = (429, 503)
_DETAIL_CHARS = 300


@dataclass(frozen=True)
class Endpoint:
    """Where and how to POST, and what to say about it in messages."""

    provider: str
    url: str
    headers: Mapping[str, str]
    credential: str | None
    """How the credential is referenced (``environment variable OPENAI_API_KEY``); None = none."""
    max_retries: int
    max_retry_wait: float
    timeout: float

    @classmethod
    def for_provider(
        cls, name: str, settings: ProviderSettings, *, path: str, headers: Mapping[str, str], credential: str | None
    ) -> Endpoint:
        """The endpoint ``path`` of a configured provider, with its retry and timeout settings."""
        return cls(
            provider=name,
            url=f"{settings.url()}{path}",
            headers={"content-type": "application/json", **headers},
            credential=credential,
            max_retries=settings.max_retries,
            max_retry_wait=settings.max_retry_wait_seconds,
            timeout=settings.request_timeout_seconds,
        )


async def post_json(
    client: httpx.AsyncClient, endpoint: Endpoint, body: Mapping[str, Any], *, redactor: Redactor
) -> tuple[dict[str, Any], tuple[RetryRecord, ...]]:
    """POST ``body`` and return the decoded JSON object and the retries it took."""
    retries: list[RetryRecord] = []
    while True:
        try:
            response = await client.post(
                endpoint.url, json=dict(body), headers=dict(endpoint.headers), timeout=endpoint.timeout
            )
        except httpx.TimeoutException:
            msg = f"provider {endpoint.provider!r}: no response from {endpoint.url} within {endpoint.timeout:g} s"
            raise ProviderError(msg, kind="timeout", retries=tuple(retries)) from None
        except httpx.HTTPError as err:
            detail = redactor.text(f"{type(err).__name__}: {err}")
            msg = f"provider {endpoint.provider!r}: cannot reach {endpoint.url} ({detail})"
            raise ProviderError(msg, kind="transport", retries=tuple(retries)) from None
        status = response.status_code
        if status in _RETRY_STATUSES and len(retries) < endpoint.max_retries:
            header, wait = _retry_after(response, len(retries))
            if wait > endpoint.max_retry_wait:
                msg = (
                    f"provider {endpoint.provider!r} answered HTTP {status} and asked to retry after "
                    f"{wait:g} s, longer than max_retry_wait_seconds={endpoint.max_retry_wait:g}"
                )
                raise ProviderError(msg, kind=_kind(status), status=status, retries=tuple(retries))
            retries.append(RetryRecord(status=status, retry_after=header, waited_seconds=round(wait, 3)))
            await asyncio.sleep(wait)
            continue
        if status >= 400:
            raise _http_error(response, endpoint, redactor=redactor, retries=tuple(retries))
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            msg = f"provider {endpoint.provider!r}: the response is not JSON ({err})"
            raise ProviderError(msg, kind="malformed", status=status, retries=tuple(retries)) from None
        if not isinstance(data, dict):
            msg = f"provider {endpoint.provider!r}: the response is JSON but not an object"
            raise ProviderError(msg, kind="malformed", status=status, retries=tuple(retries))
        return data, tuple(retries)


def _retry_after(response: httpx.Response, previous: int) -> tuple[str | None, float]:
    """The raw header and the seconds to wait (exponential backoff when there is no header)."""
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            return f"{millis} ms", max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    header = response.headers.get("retry-after")
    if header is not None:
        try:
            return header, max(0.0, float(header))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            return header, max(0.0, when.timestamp() - time.time())
    return header, float(2**previous)


def _kind(status: int) -> ProviderErrorKind:
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    return "http"


def _http_error(
    response: httpx.Response, endpoint: Endpoint, *, redactor: Redactor, retries: tuple[RetryRecord, ...]
) -> ProviderError:
    status = response.status_code
    detail = redactor.text(_error_detail(response))
    said = f": {detail}" if detail else ""
    after = f" after {len(retries)} retries" if retries else ""
    kind = _kind(status)
    if kind == "auth":
        if endpoint.credential is None:
            how = "no credential is configured for it; set api_key_env (or auth_profile) in settings"
        else:
            how = f"check the key in {endpoint.credential}"
        msg = f"provider {endpoint.provider!r} rejected the request as unauthorised (HTTP {status}); {how}{said}"
    elif kind == "rate_limited":
        msg = f"provider {endpoint.provider!r} is rate limiting (HTTP 429{after}){said}"
    else:
        msg = f"provider {endpoint.provider!r} answered HTTP {status}{after} for {endpoint.url}{said}"
    return ProviderError(msg, kind=kind, status=status, retries=retries)


def _error_detail(response: httpx.Response) -> str:
    """The server's error message (OpenAI and Anthropic shapes), else the start of the body."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _short(error["message"])
        if isinstance(error, str):
            return _short(error)
        if isinstance(data.get("message"), str):
            return _short(data["message"])
    return _short(response.text)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"
