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
idle starts its own, and at most :attr:`WorkerPool.max_idle` idle workers are kept (one for
planning; a run's code steps may run side by side, :mod:`rho_notebook.exec.code`).

:func:`talk_in_worker` is one request's conversation with a pool's worker (or a fresh one), under
the wall budget (code steps, :func:`rho_notebook.source.code_step.run_code_step`; planning's
:func:`rho_notebook.source.evaluate.talk_to_worker` does the same with the process's warm pool).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rho_notebook.errors import WorkerStopped
from rho_notebook.source.workers import PipeChannel, Worker, close_pipes, start_worker, stop_worker, wall_diagnostic

__all__ = ["WorkerPool", "talk_in_worker", "use_warm_workers", "warm_pool"]

_STARTUP_ALLOWANCE_S = 5.0
"""Added to the wall budget of a request: a fresh worker's start (interpreter and starlark import)."""
_T = TypeVar("_T")


class WorkerPool:
    """Idle warm workers of this process, handed to one call at a time."""

    def __init__(self, *, max_uses: int = 200, max_idle: int = 1) -> None:
        self.max_uses = max_uses
        self.max_idle = max_idle
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False

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
            if fit and not self._closed and len(self._idle) < self.max_idle and self._pid == os.getpid():
                self._idle.append(worker)
                return True
        return False

    def idle_pids(self) -> list[int]:
        """The process IDs of the idle workers (what a test or a status view may ask)."""
        with self._lock:
            return [worker.process.pid for worker in self._idle]

    def close(self) -> None:
        """Stop every idle worker (closing its channel ends it; a kill makes sure). The pool stays
        usable: the next call starts a worker again."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            _discard(worker)

    def retire(self) -> None:
        """Stop every idle worker, and every worker given back from now on (the process switched
        its warm workers off while a call was being served)."""
        with self._lock:
            self._closed = True
        self.close()


async def talk_in_worker(
    talk: Callable[[PipeChannel], Awaitable[_T]],
    *,
    worker_limits: dict[str, int],
    pool: WorkerPool | None,
) -> _T:
    """Run ``talk`` with a worker of ``pool`` (a fresh process when None) under the wall budget and
    return what it returns.

    A fresh worker is killed and reaped however this ends; a pool's worker goes back to the pool
    only when its request ended cleanly (:meth:`WorkerPool.release`), else it is killed too: a
    budget overrun, a crash, the wall budget or a cancelled call (the task's cancellation reaches
    ``talk``, then the worker is killed and reaped before it propagates).

    Raises
    ------
    WorkerStopped
        When the wall budget (plus a start-up allowance) ran out or the worker died.
    """
    worker = start_worker(worker_limits, warm=False) if pool is None else pool.acquire(worker_limits)
    channel = worker.channel
    wall_s = worker_limits["evaluator_wall_ms"] / 1000
    try:
        channel.open_call()
        return await asyncio.wait_for(talk(channel), timeout=wall_s + _STARTUP_ALLOWANCE_S)
    except TimeoutError:
        raise WorkerStopped(wall_diagnostic(worker_limits, int((wall_s + _STARTUP_ALLOWANCE_S) * 1000))) from None
    finally:
        channel.close_call()
        if pool is None or not pool.release(worker):
            await stop_worker(worker)


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
            _pool.retire()
            atexit.unregister(_pool.close)
            _pool = None


def warm_pool() -> WorkerPool | None:
    """This process's pool of warm workers, or None when each request starts a fresh worker."""
    return _pool
