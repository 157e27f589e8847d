"""The warm planning worker of a long-lived process (a kernel, the jupyter server, the MCP server).

Starting a worker (an isolated interpreter that imports starlark-pyo3) costs tens of milliseconds
on every plan; a process that plans again and again keeps one instead. :func:`use_warm_workers`
turns that on for the whole process; the CLI never does, so each of its plans starts a fresh worker
and no daemon outlives it.

The kept worker is reset between requests, not trusted to be clean: the worker gives each request
fresh Starlark globals, modules and budget counts and re-arms its CPU limit
(:mod:`rho_notebook.source._starlark.serve`). The pool replaces it whenever a request did not end
cleanly: a budget ran out (the worker then exits by itself), it crashed or was killed, the
conversation broke off (a protocol error, the wall budget, a cancelled call), or it has served
:attr:`WorkerPool.max_uses` requests. A worker serves one call at a time: a call that finds none
idle starts its own, and at most one idle worker is kept.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading

from rho_notebook.source.workers import Worker, close_pipes, start_worker

__all__ = ["WorkerPool", "use_warm_workers", "warm_pool"]


class WorkerPool:
    """Idle warm workers of this process, handed to one call at a time."""

    def __init__(self, *, max_uses: int = 200) -> None:
        self.max_uses = max_uses
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def acquire(self, worker_limits: dict[str, int]) -> Worker:
        """An idle worker started for these limits that still runs, else a newly started one."""
        key = tuple(sorted(worker_limits.items()))
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the idle workers are the parent's
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                worker = self._idle.pop()
                if worker.limits == key and worker.process.poll() is None:
                    return worker
                _discard(worker)
        return start_worker(worker_limits, warm=True)

    def release(self, worker: Worker) -> bool:
        """Keep ``worker`` for the next call if it is fit to serve one; False when it must be
        stopped instead (the caller stops it)."""
        worker.uses += 1
        fit = (
            worker.warm
            and worker.channel.at_rest
            and not worker.channel.overran
            and worker.uses < self.max_uses
            and worker.process.poll() is None
        )
        with self._lock:
            if fit and not self._idle and self._pid == os.getpid():
                self._idle.append(worker)
                return True
        return False

    def idle_pids(self) -> list[int]:
        """The process IDs of the idle workers (what a test or a status view may ask)."""
        with self._lock:
            return [worker.process.pid for worker in self._idle]

    def close(self) -> None:
        """Stop every idle worker (closing its channel ends it; a kill makes sure)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            _discard(worker)


def _discard(worker: Worker) -> None:
    """End an idle worker now (it is waiting for a frame, so no request is lost)."""
    close_pipes(worker)
    with contextlib.suppress(ProcessLookupError):
        worker.process.kill()
    with contextlib.suppress(OSError, ValueError):
        worker.process.wait(timeout=5)


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def use_warm_workers(enabled: bool = True) -> None:
    """Keep a warm planning worker in this process from now on (``enabled=False``: stop it and
    start a fresh worker per request again, as the CLI does)."""
    global _pool
    with _pool_lock:
        if enabled and _pool is None:
            _pool = WorkerPool()
            atexit.register(_pool.close)
        elif not enabled and _pool is not None:
            _pool.close()
            atexit.unregister(_pool.close)
            _pool = None


def warm_pool() -> WorkerPool | None:
    """This process's pool of warm workers, or None when each request starts a fresh worker."""
    return _pool
