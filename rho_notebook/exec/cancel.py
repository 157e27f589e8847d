"""The cancellation signal the run driver hands each attempt."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["CancelSignal"]


class CancelSignal(asyncio.Event):
    """An :class:`asyncio.Event` that also calls listeners when it is set.

    Waiting for "the process exited, or the deadline passed, or cancel was set" then needs no task
    of its own: a listener resolves the same future the other two do. Everything an Event offers
    (``wait``, ``is_set``) keeps working for executors that prefer it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` when the signal is set (at once, from the setter's stack)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        """Forget ``listener``; a listener that was never added is ignored."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def listener_count(self) -> int:
        """How many listeners are registered (a finished wait leaves none behind)."""
        return len(self._listeners)

    def set(self) -> None:
        already = self.is_set()
        super().set()
        if not already:
            for listener in list(self._listeners):
                listener()
