"""Rate limiting for widget updates: a leading-edge throttle and the shared timer thread.

A :class:`Throttle` turns any number of ``poke()`` calls (from any thread) into at most one call of
its flush function per ``interval`` seconds: the first poke after a quiet period flushes at once,
later pokes are coalesced into one flush when the interval has passed. The clock and the timer
are injected, so tests drive it with a fake clock and no threads.

:class:`Pump` is the one daemon thread that runs scheduled calls for every widget of the process
(started on first use, never at import). It stops when the interpreter starts to exit, before
anything else is torn down: queued calls are dropped and a call under way may finish (up to
:data:`STOP_PATIENCE` seconds). A later call, e.g. a feed's look at a journal, would need the
thread pools that ``concurrent.futures`` shuts down at exit, fail, and be logged as a widget error
(after a test run, or a script that showed a run view).
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Timer", "Throttle", "Pump", "pump", "DEFAULT_INTERVAL", "STOP_PATIENCE"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 0.1
"""Seconds between two front-end messages of one widget: at most ~10 messages a second."""
STOP_PATIENCE = 1.0
"""Seconds interpreter exit waits for a pump call under way to finish."""


class Timer(Protocol):
    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` once, at or soon after monotonic time ``when`` (thread-safe)."""


class Throttle:
    """Coalesce pokes into flushes spaced at least ``interval`` apart: from the end of one flush
    (when its message has gone) to the start of the next, so the front end never sees two
    messages closer than ``interval``, however long building one takes."""

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
            if self._closed:
                self._scheduled = False
                return
            due = self._last + self.interval
            early = self._clock() < due  # scheduled while the flush before was still sending
            if not early:
                self._scheduled = False
                self._last = self._clock()
                self.flushes += 1
        if early:
            (self._timer if self._timer is not None else pump()).call_at(due, self._run)
            return
        try:
            self._flush()
        finally:
            with self._lock:
                self._last = self._clock()  # the next message at least interval after this one went


class Pump:
    """One daemon thread running timed callbacks in due order (a heap and a condition), until
    :meth:`stop` (called when the interpreter starts to exit)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        with self._cond:
            if self._stopped:  # the interpreter is exiting: nothing runs any more
                return
            heapq.heappush(self._heap, (when, next(self._counter), callback))
            if self._thread is None:
                self._start()
            self._cond.notify()

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.call_at(time.monotonic() + delay, callback)

    def stop(self, *, patience: float = STOP_PATIENCE) -> None:
        """Drop every queued call, refuse new ones, and end the thread; wait up to ``patience``
        seconds for a call under way to return."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(patience)

    def _start(self) -> None:
        """Start the thread, and stop it when the interpreter starts to exit (under the lock)."""
        try:
            _at_exit(self.stop)
        except RuntimeError:  # first used while the interpreter exits: never start
            self._stopped = True
            self._heap.clear()
            return
        self._thread = threading.Thread(target=self._main, name="rho-widget-pump", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, _, callback = heapq.heappop(self._heap)
            try:
                callback()
            except Exception:  # a widget bug must not stop updates of every other widget
                log.exception("rho_notebook widget update failed")


def _at_exit(hook: Callable[[], None]) -> None:
    """Call ``hook`` when the interpreter starts to exit, before the thread pools of
    ``concurrent.futures`` end (a call under way still finds them working), the non-daemon threads
    are joined and ``atexit`` handlers run.

    The hook goes where ``concurrent.futures`` puts its own: ``threading``'s exit hooks, called in
    reverse order of registration; importing ``concurrent.futures.thread`` first registers its
    hook before ours. Raises ``RuntimeError`` once the interpreter has started to exit.
    """
    import concurrent.futures.thread  # noqa: F401 - its exit hook must be registered before ours

    register: Callable[[Callable[[], None]], object] = getattr(threading, "_register_atexit", atexit.register)
    register(hook)


_pump: Pump | None = None
_pump_lock = threading.Lock()


def pump() -> Pump:
    """The process-wide pump (created on first use)."""
    global _pump
    with _pump_lock:
        if _pump is None:
            _pump = Pump()
        return _pump
