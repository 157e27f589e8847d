"""Durable requests to a run's owner (cancel), and the owner's wake-up socket.

A request is a file ``requests/cancel-<REQUEST_ID>.json`` written atomically in the run's private
folder: that file *is* the durable intent. The requester then pokes the owner through an abstract
Unix socket named after the run (no filesystem path, so no path-length limit); the poke carries
no authority — the owner only re-reads its requests folder — so anyone able to connect learns
nothing and can grant nothing. The owner answers ``ack <REQUEST_ID>`` on the same connection once
the request is acknowledged, and also writes ``cancel-<REQUEST_ID>.ack.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rho_notebook.store.files import atomic_write_json
from rho_notebook.store.ids import new_id

__all__ = [
    "socket_name",
    "write_cancel_request",
    "pending_cancel_requests",
    "write_ack",
    "read_ack",
    "OwnerControl",
    "poke_owner",
]


def socket_name(run_id: str) -> str:
    return f"\0rho-notebook/run/{run_id}"


def write_cancel_request(requests_dir: Path, *, by: str) -> tuple[str, float]:
    """Record a cancel request durably; returns (request_id, monotonic time it became durable)."""
    request_id = new_id()
    atomic_write_json(requests_dir / f"cancel-{request_id}.json", {"request_id": request_id, "by": by, "at": time.time()})
    return request_id, time.monotonic()


def pending_cancel_requests(requests_dir: Path, known: set[str]) -> list[str]:
    """Cancel request IDs in the folder that are not in ``known``, oldest first."""
    try:
        names = os.listdir(requests_dir)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if name.startswith("cancel-") and name.endswith(".json") and not name.endswith(".ack.json"):
            request_id = name[len("cancel-") : -len(".json")]
            if request_id not in known:
                found.append(request_id)
    return sorted(found)


def write_ack(requests_dir: Path, request_id: str, data: dict[str, Any]) -> None:
    atomic_write_json(requests_dir / f"cancel-{request_id}.ack.json", {"request_id": request_id, **data})


def read_ack(requests_dir: Path, request_id: str) -> dict[str, Any] | None:
    try:
        with open(requests_dir / f"cancel-{request_id}.ack.json", "rb") as handle:
            data: dict[str, Any] = json.loads(handle.read())
            return data
    except (FileNotFoundError, json.JSONDecodeError):
        return None


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
