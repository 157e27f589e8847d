"""The code operation: ``run(item)`` of an item graph's ``code`` step, in a supervised Starlark worker.

The worker (:func:`~rho_notebook.source.code_step.run_code_step`) is sandboxed and bounded by the
code-step limits; cancelling the attempt stops it. The value is the item ``run`` returned.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

__all__ = ["CodeOperation", "run_code"]


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

    task = asyncio.ensure_future(run_code_step(op.source, item, step=op.step))
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
