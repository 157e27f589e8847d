"""Helpers shared by tests/widgets and bench/widget_updates.py (not part of the public API).

- :class:`RecordingComm` and :func:`recording_comms`: a comm that records every message a widget
  sends, installed through ``comm.create_comm`` (the hook the ``comm`` package provides for
  front ends), so a real anywidget instance can be driven and its traffic counted without a kernel.
- :class:`ThreadRunHandle`: a minimal run handle (``add_listener``, ``state``, ``done``, ``cancel``)
  that executes a real run as its owner (``Service.execute``) in its own thread and calls listeners
  on that thread, like ``RunHandle`` does on the runner thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Service
from rho_notebook.widgets._call import call
from rho_notebook.widgets._feed import StoreRunHandle

__all__ = ["RecordingComm", "recording_comms", "ThreadRunHandle"]


class RecordingComm:
    """Stands in for a kernel comm: records sends, lets a test play the front end."""

    kernel = True

    def __init__(self, **kwargs: Any) -> None:
        self.comm_id = kwargs.get("comm_id") or uuid.uuid4().hex
        self.open_data = kwargs.get("data")
        self.messages: list[dict[str, Any]] = []
        self.times: list[float] = []
        """time.monotonic() of each send."""
        self._lock = threading.Lock()
        self._callback: Callable[[dict[str, Any]], Any] | None = None

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        with self._lock:
            self.messages.append(data)
            self.times.append(time.monotonic())

    def on_msg(self, callback: Callable[[dict[str, Any]], Any] | None) -> None:
        self._callback = callback

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass

    def custom_timed(self) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return [(t, m["content"]) for t, m in zip(self.times, self.messages) if m.get("method") == "custom"]

    def custom(self) -> list[dict[str, Any]]:
        """Contents of the custom messages sent so far."""
        with self._lock:
            return [m["content"] for m in self.messages if m.get("method") == "custom"]

    def updates(self) -> list[dict[str, Any]]:
        """State updates (trait syncs) sent so far."""
        with self._lock:
            return [m["state"] for m in self.messages if m.get("method") == "update"]

    def from_front_end(self, content: dict[str, Any]) -> None:
        """Deliver a custom message as the front end would."""
        if self._callback is None:
            msg = "no widget listens on this comm"
            raise RuntimeError(msg)
        self._callback({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


@contextmanager
def recording_comms() -> Iterator[list[RecordingComm]]:
    """Patch ``comm.create_comm`` so every widget created inside gets a :class:`RecordingComm`."""
    import comm

    created: list[RecordingComm] = []
    original = comm.create_comm

    def create(**kwargs: Any) -> RecordingComm:
        found = RecordingComm(**kwargs)
        created.append(found)
        return found

    comm.create_comm = create  # type: ignore[assignment]
    try:
        yield created
    finally:
        comm.create_comm = original


class ThreadRunHandle(StoreRunHandle):
    """Executes one created run as its owner in a private thread (its own asyncio loop)."""

    def __init__(self, service: Service, run_id: str, *, resume: bool = False) -> None:
        super().__init__(service, run_id, call(service.status(run_id)))
        self.resume = resume
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.events = 0

    def start(self) -> ThreadRunHandle:
        self._thread = threading.Thread(target=self._main, name=f"run-{self.run_id[:8]}", daemon=True)
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            asyncio.run(self.service.execute(self.run_id, resume=self.resume, on_event=self._on_event))
        except BaseException as err:  # reported to the test through .error
            self.error = err
        finally:
            self._done.set()

    def _on_event(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events += 1
            if "seq" in event and int(event["seq"]) > self._state.last_seq:
                apply(self._state, event)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        with self._lock:
            self._listeners.append(callback)

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float = 60.0) -> RunState:
        if not self._done.wait(timeout):
            msg = f"run {self.run_id} did not finish within {timeout} s"
            raise TimeoutError(msg)
        if self.error is not None:
            raise self.error
        return self.state()
