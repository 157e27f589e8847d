"""What the handlers share: the service, the runs this server owns, and two small caches.

Runs started or resumed through the API execute in this server process, as their owner, on the
process-wide :class:`~rho_notebook.run.background.BackgroundRunner` thread (its own asyncio loop),
so the server's event loop never waits on a run. They live as long as the server: when it stops,
:meth:`ServerContext.stop_owned_runs` cancels them through the durable cancel path and waits a
bounded time, so they end as ``cancellation`` and can be resumed later from anywhere.

All methods here block (file I/O, waiting for an owner); handlers call them in a worker thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.errors import RhoError
from rho_notebook.model.state import Lifecycle
from rho_notebook.run.background import BackgroundRunner, RunHandle
from rho_notebook.run.state import RunState
from rho_notebook.service import Service
from rho_notebook.store.runs import RunManifest
from rho_notebook.views import LIVE_LIFECYCLES, run_row_json
from rho_notebook.widgets.layout import WireLayout, layout_graph

__all__ = ["ServerContext", "CONTEXT_KEY"]

CONTEXT_KEY = "rho_notebook_context"
"""The tornado settings key under which handlers find the :class:`ServerContext`."""

_LAYOUTS = 32
"""How many graph layouts (by graph digest) stay cached."""


@dataclass
class ServerContext:
    service: Service
    runner: BackgroundRunner
    log: logging.Logger
    owned: dict[str, RunHandle] = field(default_factory=dict)
    """Runs this server started or resumed (run ID -> handle)."""
    _rows: dict[str, tuple[tuple[int, int], dict[str, Any]]] = field(default_factory=dict)
    _layouts: OrderedDict[str, WireLayout] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- runs -----------------------------------------------------------------------------------------

    def start(self, run_id: str, *, resume: bool = False, recover_uncertain: bool = False) -> RunHandle:
        """Execute (or resume) ``run_id`` as its owner on the runner thread; returns once it started.

        Raises
        ------
        RunRefused, NeedsRecovery
            When the owner refuses (owned elsewhere, completed with success, needs recovery).
        """
        handle = self.runner.start_run(self.service, run_id, resume=resume, recover_uncertain=recover_uncertain)
        with self._lock:
            for done in [key for key, known in self.owned.items() if known.done()]:
                del self.owned[done]
            self.owned[run_id] = handle
        return handle

    def stop_owned_runs(self, *, timeout: float) -> list[str]:
        """Cancel the live runs this server owns and wait up to ``timeout`` seconds for them."""
        with self._lock:
            live = [handle for handle in self.owned.values() if not handle.done()]
        for handle in live:
            try:
                handle.cancel(wait_seconds=0.0)
            except (RhoError, OSError) as err:
                self.log.warning("rho_notebook: cannot cancel run %s on shutdown: %s", handle.run_id, err)
        deadline = time.monotonic() + timeout
        stopped = []
        for handle in live:
            try:
                handle.wait(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                self.log.warning("rho_notebook: run %s did not stop within %.0f s; resume it later", handle.run_id, timeout)
                continue
            except Exception as err:  # the run's own error, already journaled
                self.log.info("rho_notebook: run %s stopped: %s", handle.run_id, err)
            stopped.append(handle.run_id)
        return stopped

    # -- reading, with caches -------------------------------------------------------------------------

    def run_rows(self, *, lifecycle: Lifecycle | None = None, limit: int = 0) -> list[dict[str, Any]]:
        """Rows of the run list, oldest first (run IDs are time-ordered).

        A run whose journal has not changed (same size and mtime) and that is not live is served
        from a cache, so polling the list stays cheap with many finished runs.
        """
        rows = []
        ids = self.service.runs.ids()
        with self._lock:
            for gone in set(self._rows) - set(ids):
                del self._rows[gone]
        for run_id in ids:
            row = self._row(run_id)
            if row is None:
                continue
            if lifecycle is not None and row["lifecycle"] != lifecycle.value:
                continue
            rows.append(row)
        return rows[-limit:] if limit > 0 else rows

    def _row(self, run_id: str) -> dict[str, Any] | None:
        try:
            folder = self.service.runs.folder(run_id)
            info = os.stat(folder.events, follow_symlinks=False)
        except (RhoError, OSError):
            return None
        key = (info.st_size, info.st_mtime_ns)
        with self._lock:
            cached = self._rows.get(run_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            state: RunState = self.service.status(run_id)
            manifest: RunManifest | None = self.service.runs.manifest(run_id)
        except (RhoError, OSError):
            return None
        row = run_row_json(state, manifest)
        if state.lifecycle not in LIVE_LIFECYCLES and state.lifecycle is not Lifecycle.PLANNED:
            with self._lock:
                self._rows[run_id] = (key, row)
        return row

    def layout(self, digest: str, graph: Any) -> WireLayout:
        """The DAG layout of a frozen graph (cached by its graph digest)."""
        with self._lock:
            found = self._layouts.get(digest)
            if found is not None:
                self._layouts.move_to_end(digest)
                return found
        wire = layout_graph(graph).to_wire()
        with self._lock:
            self._layouts[digest] = wire
            while len(self._layouts) > _LAYOUTS:
                self._layouts.popitem(last=False)
        return wire
