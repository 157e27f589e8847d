"""Running the ``code`` step of an item graph: a deterministic Starlark function of the item.

The step's source defines ``def run(item): ... return NEW_ITEM``. Each attempt runs it in a
planning worker (:mod:`rho_notebook.source._worker`): a fresh one, or a warm worker of the given
pool (a run's owner keeps one, :mod:`rho_notebook.exec.code`), which gives every request fresh
Starlark globals and is replaced after a budget overrun, a crash or a cancelled call. The budgets
are the planning sandbox's, the same for a fresh and a warm worker: no
network, no clock, no ``load()`` of modules, the wall, tick, memory and value budgets of
:func:`~rho_notebook.source.limits.load_limits`. The item is set as the global ``item`` and also
passed to ``run(item)``; the dict it returns (string keys; dicts, lists, strings, integers,
booleans and None inside; no floats, no functions) replaces the item. Every failure is a
:class:`~rho_notebook.errors.CodeStepError` naming the step and, for Starlark errors, the
line:column inside the step's source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rho_notebook.errors import CodeStepError, WorkerStopped
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.warm import WorkerPool, talk_in_worker, warm_pool
from rho_notebook.source.workers import PipeChannel

__all__ = ["check_code_steps", "run_code_step"]


async def run_code_step(
    source: str,
    item: dict[str, Any],
    *,
    step: str,
    limits: Limits | None = None,
    pool: WorkerPool | None = None,
) -> dict[str, Any]:
    """Run a code step's ``run(item)`` in a sandboxed worker and return the new item.

    Parameters
    ----------
    source
        The step's Starlark source; it must define ``run(item)``.
    item
        The carried item (a JSON object).
    step
        The step's id, named in every error.
    limits
        The planning budgets; :func:`load_limits` when not given.
    pool
        Warm workers to take the worker from (and give it back to when the step ended cleanly);
        None starts a fresh worker for this step alone.

    Raises
    ------
    CodeStepError
        ``code.error`` (a Starlark error, or ``run`` missing or not a function), ``code.load``
        (a ``load`` statement), ``code.result`` (the result is not a JSON object) or
        ``limit.<budget>`` (a planning budget ran out and the step was stopped).
    asyncio.CancelledError
        When the awaiting task is cancelled; the worker is killed and reaped first.
    """
    return await _talk(source, item, step=step, limits=limits, pool=pool, check=False)


async def check_code_steps(sources: Sequence[tuple[str, str]], *, limits: Limits | None = None) -> list[CodeStepError]:
    """Parse each code step's source (``(step, source)``), evaluating nothing: planning's check, so
    that a source that cannot run is refused before the run, not at its step. One worker parses
    them all in turn (this process's warm worker when it keeps one, else one started for the
    check and stopped after it), never a worker per step.

    Returns the errors, in the order of ``sources``: ``code.error`` (a source does not parse) or
    ``limit.<budget>`` (a source larger than ``source_bytes``), at the line and column inside it."""
    if not sources:
        return []
    shared = warm_pool()
    pool = shared if shared is not None else WorkerPool(max_uses=len(sources) + 1)
    found: list[CodeStepError] = []
    try:
        for step, source in sources:
            try:
                await _talk(source, {}, step=step, limits=limits, pool=pool, check=True)
            except CodeStepError as err:
                found.append(err)
    finally:
        if shared is None:
            pool.close()
    return found


async def _talk(
    source: str,
    item: dict[str, Any],
    *,
    step: str,
    limits: Limits | None,
    pool: WorkerPool | None,
    check: bool,
) -> dict[str, Any]:
    limits = limits or load_limits()
    worker_limits = limits.worker_limits()
    request = {"op": "code", "text": source, "item": item, "limits": worker_limits} | ({"check": True} if check else {})

    async def talk(chan: PipeChannel) -> dict[str, Any]:
        await chan.send(request)
        reply = await chan.receive()
        if reply["op"] == "code_result":
            result: dict[str, Any] = reply["item"]
            return result
        if reply["op"] == "error":
            raise _error(reply["diagnostic"], step=step, limits=limits)
        msg = f"the worker sent an unexpected frame {reply['op']!r}"
        raise CodeStepError(msg, step=step)

    try:
        return await talk_in_worker(talk, worker_limits=worker_limits, pool=pool)
    except WorkerStopped as stopped:
        raise _error(stopped.diagnostic, step=step, limits=limits) from None


def _error(found: dict[str, Any], *, step: str, limits: Limits) -> CodeStepError:
    """A worker diagnostic as the step's error."""
    rule: str = found["rule"]
    line, column = found.get("line"), found.get("column")
    if "budget" in found:
        budget = found["budget"]
        unit = limits.budgets[budget].unit
        detail = f" ({found['message']})" if found.get("message") else ""
        message = (
            f"planning budget '{budget}' exceeded: limit {found['limit']} {unit}, measured {found['measured']} "
            f"{unit}{detail}; the step was stopped"
        )
        return CodeStepError(message, step=step, rule=rule, line=line, column=column)
    if not rule.startswith("code."):
        rule = "code.error"  # the worker crashed
    return CodeStepError(found["message"], step=step, rule=rule, line=line, column=column)
