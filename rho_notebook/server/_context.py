"""What the handlers share: the service, the runs this server started, and the run-list row cache.

A run started or resumed through the API runs in an owner process of its own
(:mod:`rho_notebook.runtime.detached`, from its fork server: the server has threads), and the server follows it
on the process-wide :class:`~rho_notebook.service.BackgroundRunner` thread (its own asyncio loop),
so the server's event loop never waits on a run. The run does not depend on the server: stopping
the server (Ctrl-C, SIGTERM, *Shut Down*) stops only its following (:meth:`ServerContext.live_runs`
names the runs that go on); a person still answers their approvals and cancels them from anywhere
(a new server's sidebar, a notebook, ``rho-notebook approve``/``cancel``).

:meth:`ServerContext.start` blocks (it waits until the owner holds the run); handlers call it in a
worker thread. Everything else goes through the service's verbs.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from rho_notebook.service import BackgroundRunner, RowCache, RunHandle, Service

__all__ = ["ServerContext", "CONTEXT_KEY"]

CONTEXT_KEY = "rho_notebook_context"
"""The tornado settings key under which handlers find the :class:`ServerContext`."""


@dataclass
class ServerContext:
    service: Service
    runner: BackgroundRunner
    log: logging.Logger
    started: dict[str, RunHandle] = field(default_factory=dict)
    """Runs this server started or resumed and follows (run ID -> handle)."""
    rows: RowCache = field(default_factory=RowCache)
    """Rows of finished runs, so polling the run list stays cheap with many of them."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- runs -----------------------------------------------------------------------------------------

    def start(self, run_id: str, *, resume: bool = False, recover_uncertain: bool = False) -> RunHandle:
        """Start (or resume) ``run_id`` in an owner process of its own and follow it; returns once
        the owner holds the run. A supervised launch waits for a person as long as its node
        allows, whether or not this server still runs.

        Raises
        ------
        RunRefused, NeedsRecovery
            When the owner refuses (owned elsewhere, completed with success, needs recovery).
        """
        handle = self.runner.start_run(self.service, run_id, resume=resume, recover_uncertain=recover_uncertain)
        with self._lock:
            for done in [key for key, known in self.started.items() if known.done()]:
                del self.started[done]
            self.started[run_id] = handle
        return handle

    def live_runs(self) -> list[str]:
        """The runs this server started that are still going on: they outlive the server."""
        with self._lock:
            return [run_id for run_id, handle in self.started.items() if not handle.done()]
