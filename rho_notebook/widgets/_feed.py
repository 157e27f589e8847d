"""Following a run: the one :class:`RunFeed` of a run in this process, shared by its views.

A feed listens to one *source*: the live ``RunHandle`` of the run when this process has one,
else a :class:`JournalWatch` polling the journal (a run owned elsewhere, finished, or not started
yet). ``rho.resume``, ``rho.attach`` and a view's Resume hand the feed their new handle
(:func:`follow_handle`). A feed whose run has stopped checks the journal's size now and then
(:data:`IDLE_CHECK` seconds) while views listen, so a resume from a terminal or the lab sidebar
is followed too.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from rho_notebook.errors import RhoError
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Service, StateMirror, StoreLayout
from rho_notebook.service.wire import LIVE_LIFECYCLES
from rho_notebook.widgets._call import call
from rho_notebook.widgets._throttle import pump

__all__ = ["RunHandleLike", "StoreRunHandle", "JournalWatch", "RunFeed", "join_feed", "leave_feed", "follow_handle"]

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]
_LIVE = tuple(lifecycle.value for lifecycle in LIVE_LIFECYCLES)
_WATCHED = (*_LIVE, "planned")
_PLANNED_PATIENCE = 30.0
"""Seconds a watch keeps polling a created run that no owner has started."""
IDLE_CHECK = 1.0
"""Seconds between looks at a stopped run's journal while views of it listen (one ``stat``)."""


@runtime_checkable
class RunHandleLike(Protocol):
    """What :func:`rho_notebook.widgets.run_view` needs of a run handle.

    ``rho_notebook.service.RunHandle`` satisfies it; so does :class:`JournalWatch`. Optional
    attributes used when present: ``service`` (a :class:`Service`) or ``layout`` (a
    :class:`StoreLayout`) naming the store the run lives in (default ``Service.default()``).
    """

    @property
    def run_id(self) -> str: ...

    def add_listener(self, callback: Listener) -> object:
        """Call ``callback(event)`` for every journal event (any thread); what it returns is unused."""

    def state(self) -> RunState:
        """A thread-safe copy of the run's current state."""

    def done(self) -> bool: ...

    def cancel(self) -> Any: ...


class StoreRunHandle(StateMirror):
    """A run handle that acts through a :class:`Service`: ``cancel`` writes the durable request
    (the CLI's mechanism), whichever process owns the run."""

    def __init__(self, service: Service, run_id: str, state: RunState) -> None:
        super().__init__(state)
        self.service = service
        self.run_id = run_id

    def cancel(self) -> Any:
        return call(self.service.cancel(self.run_id))


class JournalWatch(StoreRunHandle):
    """A read-only run handle that polls the journal (never takes ownership of the run), for runs
    this kernel does not follow with a ``RunHandle``. Polls stop once the run is no longer live
    or nobody listens."""

    def __init__(self, service: Service, run_id: str, *, interval: float = 0.25) -> None:
        full = call(service.resolve_run(run_id))
        super().__init__(service, full, call(service.status(full)))
        self.interval = interval
        self._polling = False
        self._unowned_polls = 0

    def add_listener(self, callback: Listener) -> None:
        with self._lock:
            self._listeners.append(callback)
            start = not self._polling and self._state.lifecycle.value in _WATCHED
            self._polling = self._polling or start
        if start:
            pump().call_later(self.interval, self._poll)

    def done(self) -> bool:
        with self._lock:
            return self._state.lifecycle.value not in _LIVE

    def _poll(self) -> None:
        with self._lock:
            after = self._state.last_seq
        owned = self.service.is_owned(self.run_id)  # before reading: an owner writes, then unlocks
        events = call(self.service.journal(self.run_id, after_seq=after)).events
        with self._lock:
            for event in events:
                apply(self._state, event)
            if not owned and self._state.lifecycle.value in _LIVE:
                # the owner is gone without completing: report what status would say
                lost = {"kind": "needs_recovery", "nodes": self._state.uncertain_nodes()}
                apply(self._state, lost)
                events.append(lost)
            running = [(n, r.attempt) for n, r in self._state.nodes.items() if r.state.value == "running"]
            listeners = list(self._listeners)
            if self._state.lifecycle.value == "planned" and not owned:
                self._unowned_polls += 1
            live = self._state.lifecycle.value in _WATCHED and self._unowned_polls * self.interval < _PLANNED_PATIENCE
            live = live and bool(listeners)  # nobody listens any more (a live handle took over)
            self._polling = live
        for event in events:
            for listener in listeners:
                listener(event)
        for name, attempt in running:
            for listener in listeners:
                listener({"kind": "output_chunk", "node": name, "attempt": attempt})
        if live:
            pump().call_later(self.interval, self._poll)


class RunFeed(StateMirror):
    """The one follower of a run in this process, shared by every view of it: it listens to one
    *source*, a live ``RunHandle`` or else a :class:`JournalWatch`. A new source replaces one that
    is done (its owner stopped) or only polls; the switch reads the journal after the last record
    delivered while the new source's records wait, so views get every record once, in order
    (under the lock: a view's listener only folds and pokes its throttle). Once the run has
    stopped nothing polls; while views listen, the journal's size is looked at every
    :data:`IDLE_CHECK` seconds, to follow a resume started elsewhere."""

    def __init__(self, service: Service, source: RunHandleLike) -> None:
        super().__init__(source.state())
        self.service = service
        self.run_id = source.run_id
        self.source = source
        self._switch = threading.Lock()
        self._waiting: list[dict[str, Any]] | None = []
        """Records from a new source while the feed catches up (None: not switching)."""
        self._idle = False
        """Whether :meth:`_idle_check` is scheduled (the run has stopped and views listen)."""
        self._idle_size: int | None = None
        """The journal's size at the last idle look (None: not looked at since the run stopped)."""
        source.add_listener(self._event)
        state = source.state()  # listen first, then take the state: no record falls in between
        with self._lock:
            self._state, waiting, self._waiting = state, self._waiting or [], None
            for record in waiting:
                self._deliver(record)

    def live(self) -> bool:
        """Whether the run is live (an owner executes it), as the records delivered say."""
        with self._lock:
            return self._state.lifecycle.value in _LIVE

    def cancel(self) -> Any:
        """Request cancellation through the source (the durable request, whoever owns the run)."""
        return self.source.cancel()

    def offer(self, handle: RunHandleLike) -> bool:
        """Follow ``handle`` from now on, unless the current source is live and as good (a live
        handle beats a journal watch); True when it switched."""
        with self._switch:
            current = self.source
            polls = isinstance(handle, JournalWatch) or not isinstance(current, JournalWatch)
            if current is handle or (not current.done() and polls):
                return False
            with self._lock:
                self.source, self._waiting = handle, []
                after = self._state.last_seq
            remove = getattr(current, "remove_listener", None)
            if callable(remove):
                remove(self._event)
            handle.add_listener(self._event)
            try:
                missed = call(self.service.journal(self.run_id, after_seq=after)).events
            finally:
                with self._lock:
                    waiting, self._waiting = self._waiting or [], None
                    for record in [*missed, *waiting]:
                        self._deliver(record)
            return True

    def join(self, listener: Listener) -> RunState:
        """Add a view's listener; the state its records follow (added and copied at once)."""
        with self._lock:
            self._listeners.append(listener)
            self._arm_idle()
            return copy.deepcopy(self._state)

    def leave(self, listener: Listener) -> bool:
        """Remove a view's listener; when none is left, stop following the source (True)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
            idle = not self._listeners
        remove = getattr(self.source, "remove_listener", None)
        if idle and callable(remove):
            remove(self._event)
        return idle

    def _event(self, record: dict[str, Any]) -> None:
        with self._lock:
            if self._waiting is not None:
                self._waiting.append(record)
            else:
                self._deliver(record)

    def _deliver(self, record: dict[str, Any]) -> None:
        """Fold one record and hand it to every view (under the lock; records seen are dropped)."""
        seq = record.get("seq")
        if isinstance(seq, int) and seq <= self._state.last_seq:
            return
        if record.get("kind") != "output_chunk":
            apply(self._state, record)
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:  # one broken view must not starve the others
                log.exception("a run view failed on %s", record.get("kind"))
        self._arm_idle()

    def _arm_idle(self) -> None:
        """Start looking at the journal of a run that has stopped while views listen (under the
        lock): a resume from elsewhere (a terminal, the lab sidebar) hands this process no handle."""
        if not self._idle and self._listeners and self._state.lifecycle.value not in _LIVE:
            self._idle, self._idle_size = True, None
            pump().call_later(IDLE_CHECK, self._idle_check)

    def _idle_check(self) -> None:
        """One look (on the pump thread): when the journal has records past the ones delivered and
        the source is done, follow the run through a :class:`JournalWatch` (a new owner runs it)."""
        with self._lock:
            self._idle = bool(self._listeners) and self._state.lifecycle.value not in _LIVE
            if not self._idle:
                return
            after, before = self._state.last_seq, self._idle_size
        try:
            size = os.stat(self.service.run_store.folder(self.run_id).events).st_size
            self._idle_size = size
            if (
                size != before
                and self.source.done()
                and call(self.service.journal(self.run_id, after_seq=after)).events
            ):
                self.offer(JournalWatch(self.service, self.run_id))
        except (RhoError, OSError) as err:  # a deleted run, an unreadable journal: look again later
            log.debug("idle look at run %s: %s", self.run_id, err)
        pump().call_later(IDLE_CHECK, self._idle_check)


_feeds: dict[tuple[str, str], RunFeed] = {}
_feeds_lock = threading.Lock()


def join_feed(service: Service, handle: RunHandleLike, listener: Listener) -> tuple[RunFeed, RunState]:
    """The feed of ``handle``'s run (made, or offered ``handle``), ``listener`` added to it, and
    the state the listener's records follow."""
    key = (str(service.layout.home), handle.run_id)
    with _feeds_lock:
        feed = _feeds.get(key)
        if feed is None:
            feed = _feeds[key] = RunFeed(service, handle)
        state = feed.join(listener)
    feed.offer(handle)
    return feed, state


def leave_feed(feed: RunFeed, listener: Listener) -> None:
    """A view closed: its listener goes; the feed stops and is forgotten once no view listens."""
    with _feeds_lock:
        if feed.leave(listener):
            key = (str(feed.service.layout.home), feed.run_id)
            if _feeds.get(key) is feed:
                del _feeds[key]


def follow_handle(handle: RunHandleLike) -> bool:
    """A new handle of a run (``rho.resume``, ``rho.attach``): the views of that run shown in this
    process follow it from now on. True when some view of the run exists."""
    layout = getattr(handle, "layout", None) or getattr(getattr(handle, "service", None), "layout", None)
    if not isinstance(layout, StoreLayout):
        return False
    with _feeds_lock:
        feed = _feeds.get((str(layout.home), handle.run_id))
    if feed is None:
        return False
    feed.offer(handle)
    return True
