"""Rate limiting for widget updates: a leading-edge throttle and the shared timer thread.

A :class:`Throttle` turns any number of ``poke()`` calls (from any thread) into at most one call of
its flush function per ``interval`` seconds: the first poke after a quiet period flushes at once,
later pokes are coalesced into one flush when the interval has passed. The clock and the timer
are injected, so tests drive it with a fake clock and no threads.

:class:`Pump` is the one daemon thread that runs scheduled calls for every widget of the process
(started on first use, never at import).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Timer", "Throttle", "Pump", "pump", "DEFAULT_INTERVAL"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 0.1
"""Seconds between two front-end messages of one widget: at most ~10 messages a second."""


class Timer(Protocol):
    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` once, at or soon after monotonic time ``when`` (thread-safe)."""


class Throttle:
    """Coalesce pokes into flushes spaced at least ``interval`` apart."""

    def __init__(
        self,
        flush: Callable[[], None],
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        timer: Timer | None = None,
    ) -> None:
        self._flush = flush
        self.interval = interval
        self._clock = clock
        self._timer = timer
        self._lock = threading.Lock()
        self._scheduled = False
        self._closed = False
        self._last = float("-inf")
        self.flushes = 0

    def poke(self) -> None:
        """Ask for a flush; cheap and safe from any thread."""
        with self._lock:
            if self._scheduled or self._closed:
                return
            self._scheduled = True
            due = max(self._clock(), self._last + self.interval)
        timer = self._timer if self._timer is not None else pump()
        timer.call_at(due, self._run)

    def close(self) -> None:
        """No flush after this (a scheduled one becomes a no-op)."""
        with self._lock:
            self._closed = True

    def _run(self) -> None:
        with self._lock:
            self._scheduled = False
            if self._closed:
                return
            self._last = self._clock()
            self.flushes += 1
        self._flush()


class Pump:
    """One daemon thread running timed callbacks in due order (a heap and a condition)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._counter), callback))
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name="rho-widget-pump", daemon=True)
                self._thread.start()
            self._cond.notify()

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.call_at(time.monotonic() + delay, callback)

    def _main(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                _, _, callback = heapq.heappop(self._heap)
            try:
                callback()
            except Exception:  # a widget bug must not stop updates of every other widget
                log.exception("rho_notebook widget update failed")


_pump: Pump | None = None
_pump_lock = threading.Lock()


def pump() -> Pump:
    """The process-wide pump (created on first use)."""
    global _pump
    with _pump_lock:
        if _pump is None:
            _pump = Pump()
        return _pump
