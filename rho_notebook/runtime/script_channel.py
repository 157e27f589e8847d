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

__all__ = ["MAX_REQUEST_BYTES", "ChannelHandler", "ScriptChannel"]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""Largest request line (a step's prompt or an emitted value travels in one)."""

_MAX_ADDRESS = 100
"""Longest socket path bound directly (sun_path holds 108 bytes with its terminator)."""

ChannelHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers one authenticated request (the token is checked and removed)."""


class ScriptChannel:
    """The owner's end of a script process's channel; :meth:`start` before launching the script."""

    def __init__(self, run_folder: Path, handler: ChannelHandler) -> None:
        self.folder = run_folder / "script"
        self.socket_path = self.folder / "channel.sock"
        self.token = secrets.token_hex(32)
        self.address = str(self.socket_path)
        """What the script process connects to (``RHO_SCRIPT_CHANNEL``)."""
        self._handler = handler
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
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
            self._server = await asyncio.start_unix_server(self._serve, path=bind, limit=MAX_REQUEST_BYTES + 1)
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                answer, keep = await self._answer(reader)
                if answer is None:
                    break  # the client closed the connection between requests
                writer.write(json.dumps(answer, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n")
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, OSError):
            pass  # the script went away (stopped, cancelled): nobody is left to answer
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[dict[str, Any] | None, bool]:
        """(answer, keep the connection open); (None, False) at a clean end of the connection."""
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            return {"ok": False, "error": "invalid", "message": f"request longer than {MAX_REQUEST_BYTES} bytes"}, False
        except asyncio.IncompleteReadError as err:
            if not err.partial:
                return None, False
            return {"ok": False, "error": "invalid", "message": "request not terminated by a newline"}, False
        try:
            request = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            return {"ok": False, "error": "invalid", "message": f"request is not one JSON object ({err})"}, False
        if not isinstance(request, dict):
            return {"ok": False, "error": "invalid", "message": "request is not one JSON object"}, False
        token = request.pop("token", None)
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token.encode()):
            return {"ok": False, "error": "refused", "message": "wrong channel token"}, False
        try:
            return await self._handler(request), True
        except Exception as err:  # a driver bug must answer the script, not hang it
            return {"ok": False, "error": "internal", "message": f"{type(err).__name__}: {err}"}, True
