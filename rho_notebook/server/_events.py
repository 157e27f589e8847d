"""``GET /rho/api/runs/<run>/events``: the run's journal as Server-Sent Events, resumable from a seq.

Each journal record is one SSE message whose ``id:`` is its ``seq`` and whose ``data:`` is the
record as one line of JSON. A client resumes with the standard ``Last-Event-ID`` header (what
``EventSource`` sends when it reconnects) or ``?after_seq=N`` (the header wins): it then gets
exactly the records with ``seq > N``, in order, none twice, none left out, because the stream is
the service's ``events(follow=True)`` over the durable journal itself, not a memory of what some
owner emitted. Comment lines keep idle connections open.

The stream follows the run while it is live (or created but not started yet) and ends when no
owner holds it any more: after its ``run_completed`` (or a ``needs_recovery``), everything up to
that point is sent, then one ``event: end`` message carrying ``{"run_id", "last_seq",
"lifecycle", "outcome"}`` (no ``id:``, so ``Last-Event-ID`` stays the last record's seq). A client
closes its ``EventSource`` on ``end``; if the run is resumed later it reconnects from that seq.
A damaged journal ends the stream with ``event: error`` and ``{"message", "rule"}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from rho_notebook.errors import RhoError
from rho_notebook.model.state import Lifecycle
from rho_notebook.server._base import ApiError, RhoHandler
from rho_notebook.service import Service

__all__ = ["EventsHandler", "KEEPALIVE_SECONDS", "RETRY_MS", "sse_message"]

KEEPALIVE_SECONDS = 15.0
"""A comment line goes out after this long without a record."""

RETRY_MS = 2000
"""The reconnection delay the stream asks EventSource clients to use."""


def sse_message(record: dict[str, Any]) -> str:
    """One journal record as an SSE message (``id:`` = seq, one ``data:`` line of JSON)."""
    return f"id: {record['seq']}\ndata: {json.dumps(record, separators=(',', ':'), ensure_ascii=False)}\n\n"


class _EndOfRun:
    """The ``stop`` condition of the follower: the connection closed, or the run was started and
    no owner holds it any more (completed, cancelled, refused, or its owner died)."""

    def __init__(self, service: Service, run_id: str, *, started: bool) -> None:
        self.service = service
        self.run_id = run_id
        self.started = started
        self.closed = False

    def see(self, record: dict[str, Any]) -> None:
        if record.get("kind") == "run_started":
            self.started = True

    def __call__(self) -> bool:
        return self.closed or (self.started and not self.service.is_owned(self.run_id))


class EventsHandler(RhoHandler):
    _track_activity = False  # a watching browser tab is not server activity
    _end: _EndOfRun | None = None

    def _after_seq(self) -> int:
        header = self.request.headers.get("Last-Event-ID")
        if header is not None and header.strip():
            try:
                value = int(header.strip())
            except ValueError:
                raise ApiError(
                    400, f"Last-Event-ID {header!r} is not a journal seq (an integer)", rule="bad_request"
                ) from None
            if value < 0:
                raise ApiError(400, "Last-Event-ID must not be negative", rule="bad_request")
            return value
        return self.int_argument("after_seq", default=0, low=0)

    def on_connection_close(self) -> None:
        if self._end is not None:
            self._end.closed = True

    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        after = self._after_seq()
        service = self.ctx.service
        opened = await service.status(run)
        run_id = opened.run_id
        end = self._end = _EndOfRun(service, run_id, started=opened.lifecycle is not Lifecycle.PLANNED)
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache, no-store")
        self.set_header("X-Accel-Buffering", "no")
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for record in service.events(run_id, after_seq=after, follow=True, stop=end):
                    end.see(record)
                    queue.put_nowait(record)
            finally:
                queue.put_nowait(None)

        try:
            self.write(f"retry: {RETRY_MS}\n: run {run_id} after seq {after}\n\n")
            await self.flush()
            task = asyncio.create_task(pump())
            try:
                await self._stream(queue)
            finally:
                end.closed = True
                await asyncio.gather(task, return_exceptions=True)
            error = task.exception()
            if isinstance(error, RhoError):
                self.write(f"event: error\ndata: {json.dumps({'message': error.message, 'rule': error.rule})}\n\n")
            elif error is not None:
                raise error
            else:
                state = await service.status(run_id)
                final = {
                    "run_id": run_id,
                    "last_seq": state.last_seq,
                    "lifecycle": state.lifecycle.value,
                    "outcome": state.outcome,
                }
                self.write(f"event: end\ndata: {json.dumps(final)}\n\n")
            await self.flush()
        except StreamClosedError:
            return
        self.finish(set_content_type="text/event-stream; charset=utf-8")

    async def _stream(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        while True:
            try:
                record = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE_SECONDS)
            except TimeoutError:
                self.write(": keepalive\n\n")
                await self.flush()
                continue
            if record is None:
                return
            self.write(sse_message(record))
            if queue.empty():
                await self.flush()
