"""The code operation: ``run(item)`` of an item graph's ``code`` step, in a supervised Starlark worker.

The worker (:func:`~rho_notebook.source.code_step.run_code_step`) is sandboxed and bounded by the
code-step limits; cancelling the attempt stops it. The value is the item ``run`` returned.

Starting a worker (an interpreter that imports starlark-pyo3) costs tens of milliseconds, far more
than the step itself, so the process that runs the steps (the run's owner) keeps warm workers
(:func:`code_workers`): the first code step starts one, later steps reuse it. Each step still gets
fresh Starlark globals and the same budgets, and a worker whose step ran out of a budget, crashed
or was cancelled is killed and replaced (:class:`~rho_notebook.source.warm.WorkerPool`).

The pool belongs to the event loop that runs the steps and ends with it: the owner runs its run in
one loop, and an in-process run (``asyncio.run`` of a sync facade) leaves no worker behind. When
the loop shuts down its async generators (``asyncio.run`` does), the pool's idle workers are
stopped; at interpreter exit the rest are. A worker does not outlive its owner: an idle one waits
for its next request on a pipe, which the owner's death closes (end of file ends the worker); one
whose step is under way when the owner dies ends that step within its budgets, then finds the
channel closed and exits.
"""

from __future__ import annotations

import asyncio
import atexit
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rho_notebook.source.warm import WorkerPool

__all__ = ["CODE_IDLE_WORKERS", "CodeOperation", "code_workers", "run_code"]

CODE_IDLE_WORKERS = 2
"""Idle warm workers a loop keeps for code steps (code steps of parallel branches run side by side;
each beyond these starts a worker of its own, stopped when its step ends)."""


@dataclass(frozen=True, kw_only=True)
class CodeOperation:
    """One call of a code step's ``run(item)``."""

    step: str
    """The step's name (named in the worker's errors)."""
    source: str
    """The step's Starlark source; it defines ``run(item)``."""


async def run_code(op: CodeOperation, item: dict[str, Any], *, cancel: asyncio.Event) -> dict[str, Any] | None:
    """``run(item)``, or None when ``cancel`` is set first (the worker is then stopped); raises the
    worker's :class:`~rho_notebook.errors.RhoError` when the code fails or exceeds a limit."""
    from rho_notebook.source.code_step import run_code_step

    pool = await code_workers()
    task = asyncio.ensure_future(run_code_step(op.source, item, step=op.step, pool=pool))
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not task.done():
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return None
    return task.result()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[WorkerPool, AsyncIterator[None]]] = (
    weakref.WeakKeyDictionary()
)


async def code_workers() -> WorkerPool:
    """The running loop's pool of warm code-step workers (created empty on first use)."""
    from rho_notebook.source.warm import WorkerPool

    loop = asyncio.get_running_loop()
    found = _pools.get(loop)
    if found is None:
        pool = WorkerPool(max_idle=CODE_IDLE_WORKERS)
        watch = _close_when_loop_ends(pool)
        _pools[loop] = (pool, watch)
        await anext(watch)  # its first step registers it with the loop, which closes it at shutdown
        return pool
    return found[0]


async def _close_when_loop_ends(pool: WorkerPool) -> AsyncIterator[None]:
    """Suspended until the loop shuts down its async generators (``aclose``), then stops ``pool``'s
    idle workers: the loop offers no other hook at its end."""
    try:
        yield
    finally:
        pool.close()


@atexit.register
def _close_all() -> None:
    """Stop every loop's idle workers (a loop closed without shutting down its async generators)."""
    for pool, _ in list(_pools.values()):
        pool.close()
