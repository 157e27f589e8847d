"""Following a run from outside its owner: what the terminal, the kernel and the server see.

A run's owner is a process of its own (:mod:`rho_notebook.runtime.detached`); whoever started the
run, or attaches to it later, follows it with :class:`RunFollower`:

- every journal record after ``after_seq``, in order, as the owner appends it (read from the
  journal file: a complete line at a time, never a line still being written);
- live ``output_chunk`` records (no ``seq``, never journaled) when a running attempt's ``stdout``
  or ``stderr`` grows, so a widget refreshes its output pane as it did with an in-process owner;
- a tick after every poll (``on_tick(state)``), for displays that redraw elapsed time;
- the end: once the owner no longer holds the run, everything it wrote is delivered and the
  durable state is returned (``needs_recovery`` when the owner died mid-run, as ``status`` says).

A follower that can answer a person's requests (a terminal prompt, a notebook widget) passes
``answers=True``: it holds its share of the run's :class:`~rho_notebook.store.run_locks.FollowLock`
while it follows, and the owner waits for a person as long as a node allows. Stopping a follower
(``stop()``, a cancelled task, a dead process) never touches the run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from rho_notebook.model.events import EventKind
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.status import load_state
from rho_notebook.store.journal_reader import JournalTail
from rho_notebook.store.layout import STDERR_FILE, STDOUT_FILE, StoreLayout
from rho_notebook.store.run_locks import FollowLock, OwnerLock
from rho_notebook.store.runs import RunFolder, RunStore

__all__ = ["RunFollower", "POLL_SECONDS"]

POLL_SECONDS = 0.02
"""How often a follower reads the journal's new bytes and the running attempts' output sizes."""

EventSink = Callable[[dict[str, Any]], None]


class RunFollower:
    """Follows one run until its owner stops (see the module's docstring)."""

    def __init__(
        self,
        layout: StoreLayout,
        run_id: str,
        *,
        after_seq: int = 0,
        answers: bool = False,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.layout = layout
        self.run_id = run_id
        self.after_seq = after_seq
        self.answers = answers
        self.poll_seconds = poll_seconds
        self.folder: RunFolder = RunStore(layout).folder(run_id)
        self._sizes: dict[tuple[str, int, str], int] = {}

    async def follow(
        self,
        on_event: EventSink,
        *,
        on_tick: Callable[[RunState], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> RunState:
        """Deliver the run's records to ``on_event`` until its owner stops (then the durable
        state) or ``stop()`` says so (then the state so far). Cancelling the await stops following."""
        presence = FollowLock(self.folder.path) if self.answers else None
        if presence is not None:
            await asyncio.to_thread(presence.hold)
        try:
            return await self._follow(on_event, on_tick=on_tick, stop=stop)
        finally:
            if presence is not None:
                presence.release()

    async def _follow(
        self, on_event: EventSink, *, on_tick: Callable[[RunState], None] | None, stop: Callable[[], bool] | None
    ) -> RunState:
        mirror = load_state(self.layout, self.run_id)
        tail = JournalTail.open(self.folder.events)
        try:
            while True:
                owned = OwnerLock.is_held(self.folder.lock)  # before reading: an owner writes, then unlocks
                self._deliver(tail, mirror, on_event)
                if on_tick is not None:
                    on_tick(mirror)
                if not owned:
                    return load_state(self.layout, self.run_id)
                if stop is not None and stop():
                    return mirror
                await asyncio.sleep(self.poll_seconds)
        finally:
            tail.close()

    def _deliver(self, tail: JournalTail, mirror: RunState, on_event: EventSink) -> None:
        """One poll: the new records (folded into ``mirror``) and the output that grew."""
        for record in tail.drain():
            if record["kind"] == EventKind.NODE_FINISHED.value:  # its last output came first
                for chunk in self._grown(record["node"], int(record.get("attempt") or 0)):
                    on_event(chunk)
            if record["seq"] > mirror.last_seq:
                apply(mirror, record)
            if record["seq"] > self.after_seq:
                on_event(record)
        for name, node in mirror.nodes.items():
            if node.state is NodeState.RUNNING:
                for chunk in self._grown(name, node.attempt):
                    on_event(chunk)

    def _grown(self, name: str, attempt: int) -> list[dict[str, Any]]:
        """An ``output_chunk`` record per stream of this attempt that grew since the last look."""
        if attempt < 1:
            return []
        chunks: list[dict[str, Any]] = []
        attempt_dir = self.folder.attempt_dir(name, attempt)
        for stream in (STDOUT_FILE, STDERR_FILE):
            try:
                size = os.stat(attempt_dir / stream).st_size
            except OSError:
                continue
            key = (name, attempt, stream)
            grown = size - self._sizes.get(key, 0)
            if grown > 0:
                self._sizes[key] = size
                chunks.append(
                    {
                        "kind": EventKind.OUTPUT_CHUNK.value,
                        "run_id": self.run_id,
                        "node": name,
                        "attempt": attempt,
                        "stream": stream,
                        "bytes": grown,
                    }
                )
        return chunks
