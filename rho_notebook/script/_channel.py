"""The private channel to the runner: JSON lines, one request then its answer, on a kept connection.

The runner that launched this script serves a Unix socket at ``$RHO_SCRIPT_CHANNEL`` and gives
the script a fresh ``$RHO_SCRIPT_TOKEN``; every request carries that token (the runner refuses
any other). A request is one UTF-8 JSON object and a newline; the answer is one JSON object and a
newline. Each thread keeps its own connection for all its requests (a step that runs for an hour
simply holds its thread's connection that long; threads never share one), so a call costs one
round trip, not a connection. A process forked from the script opens its own.

A kept connection can turn out closed when it is used again (the runner closes a connection after
refusing a request, and an older runner after every answer). When that shows before any byte of
the answer arrived (the send fails, or the connection ends at once), the runner never took the
request (it answers every request it reads before closing), so it is sent once more on a new
connection; any other failure is a :class:`ChannelError`.

Replays without a round trip: before its first step call a process asks the runner once for its
*replay offers* (``{"op": "offers"}``): for each step key whose stored success the runner checked
at the start of this execution (the journaled request prepares to the journaled digest), the
request's fingerprint (:func:`request_fingerprint`) and the answer a replay would get. A step call
whose key has an offer with the same fingerprint takes that answer here and tells the runner with a
``{"op": "replayed"}`` line that is never answered (the runner journals ``step_replayed``); any
other call is sent as a request, and the runner decides it (replay, execute, halt or divergence).
An offer is used once, by the process that fetched it.

Answers with ``"ok": false`` become exceptions here: ``decision_required`` ->
:class:`DecisionRequired`, ``divergence`` -> :class:`ReplayDivergenceError`, ``cancelled`` ->
:class:`RunCancelled`, ``invalid`` -> :class:`ValueError` with the runner's message; anything
else (a refused token, a malformed answer, a closed socket) -> :class:`ChannelError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from typing import Any, BinaryIO

from rho_notebook.script._errors import DecisionRequired, ReplayDivergenceError, RunCancelled

__all__ = ["CHANNEL_VARIABLE", "TOKEN_VARIABLE", "ChannelError", "request", "request_fingerprint", "step_request"]

CHANNEL_VARIABLE = "RHO_SCRIPT_CHANNEL"
"""Path of the runner's Unix socket, set by the runner in the script's environment."""
TOKEN_VARIABLE = "RHO_SCRIPT_TOKEN"
"""The secret every request carries, new for each execution of the script."""


class ChannelError(RuntimeError):
    """The runner cannot be reached, refused the request, or answered something unreadable."""


def _endpoint() -> tuple[str, str]:
    path = os.environ.get(CHANNEL_VARIABLE, "")
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not path or not token:
        missing = CHANNEL_VARIABLE if not path else TOKEN_VARIABLE
        msg = (
            "rho_notebook.script steps run through the rho-notebook runner, and this script was not "
            f"started by it (${missing} is not set); run it with `rho-notebook run SCRIPT.py` "
            "(or `%workflow run NAME` for a %%script cell)"
        )
        raise ChannelError(msg)
    return path, token


class _Connection:
    """One thread's connection to the runner (closed when the thread's storage goes)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.used = False
        """Whether a request was answered on it (then a close seen at once may be a stale one)."""
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stream: BinaryIO | None = None
        try:
            self.sock.connect(path)
        except OSError as err:
            self.sock.close()
            msg = f"cannot reach the rho-notebook runner at {path} ({err.strerror or err}); has the run stopped?"
            raise ChannelError(msg) from err
        self.stream = self.sock.makefile("rb")

    def exchange(self, line: bytes) -> bytes:
        """The answer line (empty when the connection ended before any of it came); OSError from the send."""
        if self.stream is None:
            return b""
        self.sock.sendall(line)
        try:
            answer = self.stream.readline()
        except ConnectionResetError:
            return b""
        self.used = True
        return answer

    def send(self, line: bytes) -> None:
        """Send a line that is never answered (OSError when the connection is gone)."""
        if self.stream is None:
            raise OSError("connection closed")
        self.sock.sendall(line)

    def close(self) -> None:
        """Close this process's descriptor (in a forked child, the parent's connection stays open)."""
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        self.sock.close()

    def __del__(self) -> None:
        self.close()


_local = threading.local()


def _connection(path: str) -> _Connection:
    """This thread's connection to ``path``, opened when it has none (or one inherited across a fork)."""
    kept: _Connection | None = getattr(_local, "connection", None)
    if kept is not None and kept.path == path and kept.pid == os.getpid():
        return kept
    _drop()
    fresh = _Connection(path)
    _local.connection = fresh
    return fresh


def _drop() -> None:
    kept: _Connection | None = getattr(_local, "connection", None)
    _local.connection = None
    if kept is not None:
        kept.close()


def _exchange(path: str, line: bytes) -> bytes:
    connection = _connection(path)
    reused = connection.used
    try:
        raw = connection.exchange(line)
    except OSError:  # the send failed: nothing of this request was taken
        raw = b""
    if not raw and reused:
        _drop()  # closed by the runner after an earlier answer: send it on a new connection
        connection = _connection(path)
        try:
            raw = connection.exchange(line)
        except OSError:
            raw = b""
    if not raw.endswith(b"\n"):
        _drop()
    return raw


def _raise_for(answer: dict[str, Any], op: str) -> None:
    error = answer.get("error")
    if error == "decision_required":
        raise DecisionRequired(str(answer.get("step", "?")), str(answer.get("why", "no reason given")))
    if error == "divergence":
        raise ReplayDivergenceError(
            str(answer.get("step", "?")), str(answer.get("stored_digest", "?")), str(answer.get("digest", "?"))
        )
    if error == "cancelled":
        raise RunCancelled()
    message = str(answer.get("message") or error or "no reason given")
    if error == "invalid":
        raise ValueError(message)
    msg = f"the rho-notebook runner refused the {op!r} request: {message}"
    raise ChannelError(msg)


def request(op: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Send ``{"token", "op", **fields}`` and return the runner's ``"ok": true`` answer.

    Raises
    ------
    ChannelError
        Outside a run (no channel in the environment), the runner unreachable or refusing, or an
        answer that is not one JSON object.
    DecisionRequired, ReplayDivergenceError, RunCancelled, ValueError
        The runner's ``"ok": false`` answers (see the module docstring).
    """
    path, token = _endpoint()
    line = json.dumps({"token": token, "op": op, **fields}, allow_nan=False, separators=(",", ":")) + "\n"
    raw = _exchange(path, line.encode("utf-8"))
    if not raw.endswith(b"\n"):
        msg = f"the rho-notebook runner closed the channel without answering the {op!r} request; has the run stopped?"
        raise ChannelError(msg)
    try:
        answer = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        msg = f"the rho-notebook runner's answer to the {op!r} request is not JSON ({err})"
        raise ChannelError(msg) from err
    if not isinstance(answer, dict):
        msg = f"the rho-notebook runner's answer to the {op!r} request is not a JSON object"
        raise ChannelError(msg)
    if answer.get("ok") is not True:
        _raise_for(answer, op)
    return answer


def request_fingerprint(fields: dict[str, Any]) -> str:
    """The sha256 (hex) of a step request's ``kind``, ``args``, ``after`` and ``recovery`` as
    canonical JSON: the runner computes the same from what it journaled when the step ran."""
    text = json.dumps(
        {name: fields.get(name) for name in ("kind", "args", "after", "recovery")},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Offers:
    """This process's replay offers: fetched once, each used once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._offers: dict[str, tuple[str, dict[str, Any]]] = {}

    def take(self, key: str) -> tuple[str, dict[str, Any]] | None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._offers = _fetch_offers()
            return self._offers.pop(key, None)


def _fetch_offers() -> dict[str, tuple[str, dict[str, Any]]]:
    try:
        offers = request("offers", {}).get("offers")
    except (
        ValueError,
        ChannelError,
    ):  # a runner that makes no offers (a broken channel shows on the step's own request)
        return {}
    if not isinstance(offers, dict):
        return {}
    usable: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, offer in offers.items():
        if (
            isinstance(offer, dict)
            and isinstance(offer.get("fingerprint"), str)
            and isinstance(offer.get("answer"), dict)
        ):
            usable[key] = (offer["fingerprint"], offer["answer"])
    return usable


_OFFERS = _Offers()


def step_request(fields: dict[str, Any]) -> dict[str, Any]:
    """``request("step", fields)``, or the runner's replay offer for the key when the request is the
    one the offer was made for (see the module docstring)."""
    offer = _OFFERS.take(str(fields.get("key")))
    if offer is not None:
        fingerprint, answer = offer
        if fingerprint == request_fingerprint(fields):
            _notify("replayed", {"key": fields["key"], "fingerprint": fingerprint})
            return answer
    return request("step", fields)


def _notify(op: str, fields: dict[str, Any]) -> None:
    """Send a line the runner does not answer; losing it loses nothing (a replay runs nothing, and
    the next execution replays the call again)."""
    path, token = _endpoint()
    line = json.dumps({"token": token, "op": op, **fields}, allow_nan=False, separators=(",", ":")) + "\n"
    try:
        _connection(path).send(line.encode("utf-8"))
    except (OSError, ChannelError):
        _drop()
