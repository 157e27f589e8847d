"""The private channel between a script process and its run's owner (the script tier).

The owner serves a Unix socket at ``<run folder>/script/channel.sock`` (folder 0700, socket 0600)
for the lifetime of one execution. The script process finds it in ``RHO_SCRIPT_CHANNEL`` and
proves itself with ``RHO_SCRIPT_TOKEN`` (32 random bytes, hex, new per execution): a request with
another token is refused before anything else is read from it.

Protocol: JSON lines. The client writes one JSON object on one line (at most
``MAX_REQUEST_BYTES``) and the server answers one JSON object on one line; a connection carries
any number of such exchanges, one after another, each answered before the next is read (the
script's shim keeps one connection per thread, so a replayed step costs one round trip, not a
connection). The token is checked on every request; a refused token, a line that is too long,
unterminated or not one JSON object is answered and the connection is then closed (what follows
on it cannot be trusted to be in step). The server never closes a connection between a complete
request and its answer, except when the channel itself closes at the end of the execution, so a
client whose reused connection turns out closed before it got any answer may send again on a new
one. Connections are served concurrently (a script's thread pool may have many step calls in
flight); what a request means is the driver's business (:mod:`rho_notebook.runtime.script_driver`).

The server is a plain :class:`asyncio.BufferedProtocol` (the loop reads into one buffer per
connection, not into a fresh 256 KiB one per read): a request its handler answers at once (a
replayed step: the handler returns a dict) is answered inside ``buffer_updated``, with no task and
no extra turn of the loop; one that needs waiting (the handler returns an awaitable) runs as a task, and the
connection serves nothing more until its answer is written, so answers keep the order of requests.
Meanwhile it goes on reading (the shim sends nothing before its answer anyway; pausing and resuming
the socket per step was two ``epoll_ctl`` calls and ~0.1 ms of a script step, bench/
script_overhead.py) until it holds :data:`MAX_HELD_BYTES` unserved bytes: a client that keeps
sending is then not read until its answer is written.

A run folder can sit deeper than a socket address allows (108 bytes on Linux). The socket is then
bound and reached through the owner's descriptor of the ``script`` folder
(``/proc/<owner pid>/fd/<n>/channel.sock``): same file, shorter address.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rho_notebook.store.files import ensure_private_dir

__all__ = ["MAX_HELD_BYTES", "MAX_REQUEST_BYTES", "Answer", "ChannelHandler", "ScriptChannel", "encode_answer"]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""Largest request line (a step's prompt or an emitted value travels in one)."""

_MAX_ADDRESS = 100
"""Longest socket path bound directly (sun_path holds 108 bytes with its terminator)."""

Answer = dict[str, Any] | bytes
"""An answer: a JSON object, or one already encoded as its line (:func:`encode_answer`)."""

ChannelHandler = Callable[[dict[str, Any]], Answer | Awaitable[Answer] | None]
"""Answers one authenticated request (the token is checked and removed): the answer itself when it
is known at once, else an awaitable of it; None for a notice, a line the client does not wait on
(nothing is written back)."""

MAX_HELD_BYTES = MAX_REQUEST_BYTES
"""Unserved bytes a connection holds while one of its requests is answered before it stops reading."""
_READ_BYTES = 64 * 1024
"""Size of a connection's read buffer (a longer request arrives in several reads)."""

_DRAIN_SECONDS = 1.0
"""How long :meth:`ScriptChannel.close` waits for connections to end (the script's last notices are
read before the channel closes; a child process of the script may hold a connection longer)."""


class ScriptChannel:
    """The owner's end of a script process's channel; :meth:`start` before launching the script."""

    def __init__(self, run_folder: Path, handler: ChannelHandler) -> None:
        self.folder = run_folder / "script"
        self.socket_path = self.folder / "channel.sock"
        self.token = secrets.token_hex(32)
        self._token = self.token.encode()
        self.address = str(self.socket_path)
        """What the script process connects to (``RHO_SCRIPT_CHANNEL``)."""
        self._handler = handler
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[_Connection] = set()
        """Open connections: closed with the channel (a script's child may still hold one)."""
        self._dir_fd: int | None = None

    def environment(self) -> dict[str, str]:
        """The variables the script process needs to reach this channel."""
        return {"RHO_SCRIPT_CHANNEL": self.address, "RHO_SCRIPT_TOKEN": self.token}

    async def start(self) -> None:
        ensure_private_dir(self.folder, below=self.folder.parent)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # left by an owner that died
        bind = self.address
        if len(os.fsencode(bind)) > _MAX_ADDRESS:
            self._dir_fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            bind = f"/proc/self/fd/{self._dir_fd}/channel.sock"
            self.address = f"/proc/{os.getpid()}/fd/{self._dir_fd}/channel.sock"
        old = os.umask(0o177)
        try:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_unix_server(lambda: _Connection(self), path=bind)
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)

    async def close(self) -> None:
        """Stop serving: read what the (ended) script process left on its connections, then close."""
        if self._server is not None:
            self._server.close()
            ending = [c.ended for c in self.connections]
            if ending:
                await asyncio.wait(ending, timeout=_DRAIN_SECONDS)
            for connection in list(self.connections):
                connection.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def answer(self, line: bytes) -> tuple[Answer | Awaitable[Answer] | None, bool]:
        """(the answer or an awaitable of it, keep the connection open) for one request line."""
        try:
            request = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            return {"ok": False, "error": "invalid", "message": f"request is not one JSON object ({err})"}, False
        if not isinstance(request, dict):
            return {"ok": False, "error": "invalid", "message": "request is not one JSON object"}, False
        token = request.pop("token", None)
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token):
            return {"ok": False, "error": "refused", "message": "wrong channel token"}, False
        try:
            return self._handler(request), True
        except Exception as err:  # a driver bug must answer the script, not hang it
            return _internal(err), True


def _internal(err: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": "internal", "message": f"{type(err).__name__}: {err}"}


def encode_answer(answer: dict[str, Any]) -> bytes:
    """``answer`` as its line on the channel (raises TypeError/ValueError for what JSON cannot hold)."""
    return json.dumps(answer, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"


class _Connection(asyncio.BufferedProtocol):
    """One script thread's connection: splits JSON lines and answers them in order."""

    def __init__(self, channel: ScriptChannel) -> None:
        self._channel = channel
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        """What was read and not yet served (complete lines and the start of the next)."""
        self._read = memoryview(bytearray(_READ_BYTES))
        """Where the loop reads into (:meth:`get_buffer`)."""
        self._waiting: asyncio.Future[Answer] | None = None
        """The task answering the current request; later lines wait for it."""
        self._eof = False
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done when the client closed its end (or the connection was lost)."""
        self._done = False
        """Refused, malformed or ended: nothing more is read or answered."""
        self._paused = False
        """Reading is paused: :data:`MAX_HELD_BYTES` arrived while a request was being answered."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._channel.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._channel.connections.discard(self)
        self._end()
        self._transport = None
        self._done = True

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read

    def buffer_updated(self, nbytes: int) -> None:
        if self._done:
            return
        self._buffer += self._read[:nbytes]
        if self._waiting is None:
            self._serve()
        elif len(self._buffer) > MAX_HELD_BYTES and self._transport is not None and not self._paused:
            self._transport.pause_reading()  # resumed once the awaited answer is written
            self._paused = True

    def eof_received(self) -> bool:
        self._eof = True
        self._serve()
        self._end()
        return True  # half-closed: the answers still owed are written, then the connection closes

    def _end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    def close(self) -> None:
        self._done = True
        if self._transport is not None:
            self._transport.close()

    def _serve(self) -> None:
        """Answer every complete line in the buffer, until one has to wait for its answer."""
        while not self._done and self._waiting is None:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > MAX_REQUEST_BYTES:
                    self._refuse(f"request longer than {MAX_REQUEST_BYTES} bytes")
                elif self._eof:
                    if self._buffer:
                        self._refuse("request not terminated by a newline")
                    else:
                        self.close()  # the client closed the connection between requests
                return
            if end > MAX_REQUEST_BYTES:
                self._refuse(f"request longer than {MAX_REQUEST_BYTES} bytes")
                return
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            answer, keep = self._channel.answer(line)
            if answer is None:
                continue  # a notice: nothing is written back
            if isinstance(answer, dict | bytes):
                self._write(answer, keep)
            else:
                self._waiting = asyncio.ensure_future(answer)
                self._waiting.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Future[Answer]) -> None:
        self._waiting = None
        if task.cancelled():
            answer: Answer = {"ok": False, "error": "cancelled"}
        elif task.exception() is not None:
            answer = _internal(task.exception() or RuntimeError())
        else:
            answer = task.result()
        self._write(answer, True)
        if self._paused:
            self._paused = False
            if self._transport is not None and not self._done:
                self._transport.resume_reading()
        self._serve()

    def _refuse(self, message: str) -> None:
        self._write({"ok": False, "error": "invalid", "message": message}, False)

    def _write(self, answer: Answer, keep: bool) -> None:
        if self._done or self._transport is None:
            return
        try:
            data = answer if isinstance(answer, bytes) else encode_answer(answer)
        except (TypeError, ValueError) as err:
            data = encode_answer(_internal(err))
        self._transport.write(data)
        if not keep:
            self.close()
