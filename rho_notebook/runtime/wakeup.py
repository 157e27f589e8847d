"""The owner's wake-up socket: how a requester tells a run's owner to re-read its requests folder.

Every request to an owner (a cancel, an approval decision) is first made durable as a file in the
run's private ``requests`` folder; the wake-up only shortens the owner's wait for it. The owner
listens on an abstract Unix socket named after the run (no filesystem path, so no path-length
limit). A poke carries no authority: the owner only re-reads its requests folder, so anyone able
to connect learns nothing and can grant nothing. The owner answers ``ack <REQUEST_ID>`` on the
same connection once it has acknowledged the request.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "socket_name",
    "OwnerControl",
    "poke_owner",
]


def socket_name(run_id: str) -> str:
    return f"\0rho-notebook/run/{run_id}"


@dataclass
class OwnerControl:
    """The owner's side: a listening socket that wakes the driver and answers acknowledgements."""

    run_id: str
    on_poke: Callable[[], None]
    server: asyncio.AbstractServer | None = None
    waiters: dict[str, list[asyncio.StreamWriter]] = field(default_factory=dict)

    async def start(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(socket_name(self.run_id))
        except OSError:
            sock.close()
            return  # another owner is alive; the owner lock decides who runs
        self.server = await asyncio.start_unix_server(self._client, sock=sock)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
        except (ConnectionError, asyncio.IncompleteReadError):
            writer.close()
            return
        request_id = line.decode("ascii", "replace").strip()
        if request_id:
            self.waiters.setdefault(request_id, []).append(writer)
        self.on_poke()

    def acknowledge(self, request_id: str) -> None:
        for writer in self.waiters.pop(request_id, []):
            try:
                writer.write(f"ack {request_id}\n".encode())
                writer.close()
            except (ConnectionError, RuntimeError):
                pass

    async def close(self) -> None:
        for request_id in list(self.waiters):
            for writer in self.waiters.pop(request_id):
                writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def poke_owner(run_id: str, request_id: str, *, timeout: float) -> bool:
    """Tell the owner about ``request_id`` and wait up to ``timeout`` for its acknowledgement.

    Returns True when the owner answered ``ack``; False when there is no owner or the bound expired.
    """
    deadline = time.monotonic() + timeout
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(max(0.001, timeout))
        sock.connect(socket_name(run_id))
    except OSError:
        return False
    try:
        sock.sendall(f"{request_id}\n".encode())
        buffer = b""
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            sock.settimeout(remaining)
            chunk = sock.recv(256)
            if not chunk:
                return False
            buffer += chunk
        return buffer.decode("ascii", "replace").strip() == f"ack {request_id}"
    except OSError:
        return False
    finally:
        sock.close()
