"""The base handler of every route: authentication, JSON bodies and JSON errors with a rule.

Request bodies are small JSON objects (a digest, a decision, a comment), so a body is capped at
:data:`MAX_BODY_BYTES` (1 MiB): a larger ``Content-Length`` is answered 413 before a byte of the
body is read, and a body without one (chunked) stops being kept past the cap and is answered 413
too. A body that is not a JSON object, or nests too deeply to parse, is answered 400.

Every error answer is ``{"message": ..., "rule": ...}`` (plus jupyter-server's ``reason``), whether
it comes from our own checks, from the service (a :class:`~rho_notebook.errors.RhoError` carries
its rule and its ``http_status``) or from jupyter-server itself (403 for a missing token or ``_xsrf``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from http.client import responses
from typing import Any, TypeVar

from jupyter_server.base.handlers import APIHandler
from tornado import web

from rho_notebook.errors import ArgumentError, RhoError
from rho_notebook.server._context import CONTEXT_KEY, ServerContext
from rho_notebook.service.flags import json_value

__all__ = ["ApiError", "RhoHandler", "MAX_BODY_BYTES"]

MAX_BODY_BYTES = 1 << 20
"""The largest request body the API accepts (1 MiB); larger ones are answered 413."""

T = TypeVar("T")

_HTTP_RULES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
}


class ApiError(web.HTTPError):
    """An error answer of ours: HTTP status, message and the rule that was broken."""

    def __init__(self, status: int, message: str, *, rule: str) -> None:
        super().__init__(status, "%s", message)
        self.rule = rule
        self.message = message


@web.stream_request_body
class RhoHandler(APIHandler):
    """Base of the /rho/api/ handlers. Subclasses decorate every method with
    ``@web.authenticated`` and ``@authorized``; tornado checks ``_xsrf`` on POST and DELETE for
    cookie-authenticated requests (jupyter-server skips it only for token-authenticated ones).

    The body is streamed (:meth:`data_received`) so that its size is checked before it is read:
    :meth:`prepare` refuses a ``Content-Length`` above :data:`MAX_BODY_BYTES`."""

    auth_resource = "rho"
    """The resource name jupyter-server's Authorizer is asked about."""

    _body: bytearray
    _body_too_large: bool

    async def prepare(self) -> None:  # type: ignore[override]  # as APIHandler.prepare (no _redirect_to_login)
        self._body = bytearray()
        self._body_too_large = False
        await super().prepare()
        declared = self.request.headers.get("Content-Length")
        if declared is not None and declared.strip().isdigit() and int(declared) > MAX_BODY_BYTES:
            raise _too_large(int(declared))

    def data_received(self, chunk: bytes) -> None:
        if self._body_too_large:
            return
        if len(self._body) + len(chunk) > MAX_BODY_BYTES:
            self._body_too_large = True
            self._body.clear()
            return
        self._body.extend(chunk)

    @property
    def ctx(self) -> ServerContext:
        context: ServerContext = self.settings[CONTEXT_KEY]
        return context

    async def offload(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run blocking work (waiting for an owner to start, reading a file) in a worker thread,
        never on the server's event loop. The service's verbs are ``async``: await them."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def send_json(self, value: Any, *, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(value))

    def json_body(self) -> dict[str, Any]:
        """The request body as a JSON object ({} when empty).

        Raises
        ------
        ApiError
            413 when the body was larger than :data:`MAX_BODY_BYTES`; 400 when it is not valid
            JSON, nests too deeply to parse, or is not an object.
        """
        if self._body_too_large:
            raise _too_large(None)
        raw = bytes(self._body)
        if not raw.strip():
            return {}
        try:
            value = json_value(raw, where="the request body")
        except ArgumentError as err:  # not JSON (NaN and Infinity are not), or nested too deeply
            raise ApiError(400, str(err), rule="bad_request") from None
        if not isinstance(value, dict):
            raise ApiError(400, "the request body must be a JSON object", rule="bad_request")
        return value

    def int_argument(self, name: str, *, default: int, low: int, high: int | None = None) -> int:
        text = self.get_query_argument(name, None)
        if text is None or text == "":
            return default
        try:
            value = int(text)
        except ValueError:
            raise ApiError(400, f"query argument {name}={text!r} is not an integer", rule="bad_request") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ApiError(400, f"query argument {name}={value} must be {bound}", rule="bad_request")
        return value

    # -- errors -------------------------------------------------------------------------------------

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, RhoError) and value.http_status < 500:
            self.log.info("rho_notebook: %s %s: %s", self.request.method, self.request.path, value.message)
            return
        super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        message = responses.get(status_code, "Unknown HTTP Error")
        rule = _HTTP_RULES.get(status_code, "error")
        reason: str | None = None
        exc_info = kwargs.get("exc_info")
        if exc_info:
            err = exc_info[1]
            if isinstance(err, ApiError):
                message, rule = err.message, err.rule
            elif isinstance(err, RhoError):
                status_code = err.http_status
                message, rule = err.message, err.rule
                self.set_status(status_code)
            elif isinstance(err, web.HTTPError):
                message = err.log_message % err.args if err.log_message and err.args else (err.log_message or message)
                reason = err.reason
            else:
                message, rule = "internal error in rho_notebook (see the server log)", "internal"
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "rule": rule, "reason": reason}))


def _too_large(declared: int | None) -> ApiError:
    size = f" ({declared} bytes)" if declared is not None else ""
    msg = f"the request body{size} is larger than the {MAX_BODY_BYTES} bytes the API accepts"
    return ApiError(413, msg, rule="body_too_large")
