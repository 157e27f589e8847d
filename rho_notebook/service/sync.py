"""The one bridge from synchronous front-end code (the CLI) to the async service: :func:`run_sync`.

The service's verbs are ``async``; a CLI verb awaits several of them in a row (``run`` plans,
asks for consent, runs, then reads the result). Each call used to be an ``asyncio.run``: a new
event loop per verb call, torn down after it. Here one loop serves the process: an
:class:`asyncio.Runner` kept for the main thread, reused by every call and closed at exit.

Each call stays whole, as ``asyncio.run`` made it: Ctrl-C cancels the awaited coroutine (the
runner installs the same SIGINT handler for the length of the call, so a cancelled ``run`` tears
down as before and then raises :class:`KeyboardInterrupt`), and tasks the call left running are
cancelled when it returns, so nothing of one verb call runs during the next.

A thread other than the main one (the CLI's approval prompt, which decides while the main loop is
busy with the run) gets a loop of its own for that one call. Inside a running event loop (a
kernel) this bridge refuses: there, :func:`rho_notebook.service.wait_for` runs the coroutine on the
background runner's loop instead, never on the kernel's.

A CLI verb that starts a run's owner by forking itself (:meth:`Service.start_owner` with
``fork=True``) must have no other thread at that moment: :func:`release_threads` ends the main
runner, whose default executor keeps the worker threads of earlier ``asyncio.to_thread`` calls
alive; the next :func:`run_sync` starts a fresh runner.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import warnings
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync", "release_threads"]

T = TypeVar("T")

_runner: asyncio.Runner | None = None
"""The main thread's runner (created on first use, closed at interpreter exit)."""


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code and return its result (or raise its error).

    Raises
    ------
    RuntimeError
        Called from a thread whose event loop is running (await the verb there instead).
    KeyboardInterrupt
        Ctrl-C during the call, after ``coro`` was cancelled and finished (as ``asyncio.run``).
    """
    if _loop_running():
        coro.close()
        msg = "run_sync cannot wait inside a running event loop: await the service verb, or use service.wait_for"
        raise RuntimeError(msg)
    if threading.current_thread() is not threading.main_thread():
        with asyncio.Runner() as runner:
            return runner.run(coro)
    runner = _main_runner()
    try:
        return runner.run(coro)
    finally:
        _cancel_leftovers(runner.get_loop())


def release_threads() -> None:
    """End the main thread's runner and join its worker threads (its default executor's), so that
    this process has no thread but the main one until the next :func:`run_sync` (which starts a
    new runner). Call it from the main thread, outside any event loop, before forking."""
    _close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _main_runner() -> asyncio.Runner:
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
        atexit.unregister(_close_at_exit)  # once, however often release_threads ended a runner
        atexit.register(_close_at_exit)
    return _runner


def _close() -> None:
    """At exit: cancel what is left, finish async generators and the default executor, close."""
    global _runner
    runner, _runner = _runner, None
    if runner is not None:
        runner.close()


def _close_at_exit() -> None:
    """:func:`_close` as the interpreter exits. A Ctrl-C meanwhile (a shell sends it to the whole
    pipeline, e.g. while the close waits for a worker thread) ends the close quietly, without a
    traceback or a warning about the interrupted shutdown: the process is ending anyway."""
    try:
        _close()
    except KeyboardInterrupt:
        warnings.filterwarnings("ignore", message=_UNAWAITED_SHUTDOWN, category=RuntimeWarning)


_UNAWAITED_SHUTDOWN = "coroutine 'BaseEventLoop.shutdown_default_executor' was never awaited"


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks a call left running and let them finish, as ``asyncio.run`` does at its end."""
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    if not left:
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    for task in left:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception in a task left by a verb call",
                    "exception": task.exception(),
                    "task": task,
                }
            )
