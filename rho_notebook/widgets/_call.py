"""The service's verbs from a widget's threads, and the static views widgets add to their bundle.

The service's verbs are ``async``. A widget is driven from threads that are not running the
kernel's loop for it (button callbacks on the kernel's main thread, flushes on the pump thread),
so it awaits a verb on the process-wide background runner's loop, exactly as the notebook API
does: never on the kernel's own event loop, never through ``asyncio.run`` on a thread whose loop
is running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from rho_notebook.service import default_runner

__all__ = ["call", "with_static_views"]

T = TypeVar("T")


def call(verb: Coroutine[Any, Any, T]) -> T:
    """Wait for ``verb`` (a service call such as ``service.status(run_id)``) and return its result.

    From the runner thread itself (a run listener), which cannot wait on its own loop, the verb
    runs on a short-lived loop in a helper thread.
    """
    runner = default_runner()
    if not runner.in_runner_thread():
        return runner.call(verb)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rho-widget-call") as pool:
        return pool.submit(asyncio.run, verb).result()


def with_static_views(bundle: Any, static: Callable[[], Mapping[str, str]]) -> Any:
    """An ipywidgets mime bundle (``data`` or ``(data, metadata)``) with the widget's static
    views added (``text/html``, ``image/svg+xml``, ``text/plain``: what a saved notebook or
    nbconvert HTML shows without a kernel); None (nothing to display) stays None."""
    if bundle is None:
        return None
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
    return {**data, **static()}, metadata
