"""What the handlers share: the service, the runs this server owns, and the run-list row cache.

Runs started or resumed through the API execute in this server process, as their owner, on the
process-wide :class:`~rho_notebook.service.BackgroundRunner` thread (its own asyncio loop), so the
server's event loop never waits on a run. They live as long as the server: when it stops,
:meth:`ServerContext.stop_owned_runs` cancels them through the durable cancel path and waits a
bounded time, so they end as ``cancellation`` and can be resumed later from anywhere.

:meth:`ServerContext.start` and :meth:`ServerContext.stop_owned_runs` block (they wait for an
owner); handlers call them in a worker thread. Everything else goes through the service's verbs.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from rho_notebook.errors import RhoError
from rho_notebook.service import BackgroundRunner, RowCache, RunHandle, Service

__all__ = ["ServerContext", "CONTEXT_KEY"]

CONTEXT_KEY = "rho_notebook_context"
"""The tornado settings key under which handlers find the :class:`ServerContext`."""


@dataclass
class ServerContext:
    service: Service
    runner: BackgroundRunner
    log: logging.Logger
    owned: dict[str, RunHandle] = field(default_factory=dict)
    """Runs this server started or resumed (run ID -> handle)."""
    rows: RowCache = field(default_factory=RowCache)
    """Rows of finished runs, so polling the run list stays cheap with many of them."""
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
                self.log.warning(
                    "rho_notebook: run %s did not stop within %.0f s; resume it later", handle.run_id, timeout
                )
                continue
            except Exception as err:  # the run's own error, already journaled
                self.log.info("rho_notebook: run %s stopped: %s", handle.run_id, err)
            stopped.append(handle.run_id)
        return stopped
