"""Which cell a widget's messages belong to: the parent header, captured once, used from any thread.

JupyterLab finishes a cell when the kernel's ``status: idle`` whose parent is that cell's execute
request arrives, and it files ``display_data``/``stream`` output under the cell named by the
parent. ipykernel stamps a message with the *current* parent (``kernel.get_parent()``), which on
a thread of ours (the runner thread, the widget pump) is whatever cell ran last. So:

- a widget captures the parent of the cell that created it (:func:`current_parent`, on the main
  thread) and every message it sends from another thread carries that parent
  (:func:`send_comm_msg`, :func:`owner_parent`); nothing here ever calls ``set_parent``, so no
  thread of ours changes the kernel's current parent;
- :func:`guard_kernel_parent` works around ipykernel 7's concurrent comm dispatch: a comm message
  that arrives while a cell awaits (``await run``) is handled at once, and ipykernel then
  *restores* the parent it read when the message arrived. When the awaiting cell finished and the
  next queued cell already set its own parent in between, that restore puts the previous cell's
  parent back, and the next cell's outputs and its final ``status: idle`` carry the previous
  cell's msg_id: JupyterLab leaves that cell at ``[*]`` (issue 13, Run All of notebook 03, whose
  widgets send ``hello`` while cells await). The guard turns such a stale restore into a refresh
  of the parent that is really current.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["current_parent", "guard_kernel_parent", "owner_parent", "send_comm_msg"]

_SEEN = 512
"""How many recent shell msg_ids the guard remembers (a restore names one of the last few)."""


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _kernel() -> Any:
    return getattr(_shell(), "kernel", None)


def current_parent() -> dict[str, Any]:
    """The parent request of the cell running now (call it on the kernel's main thread when a
    widget is created); ``{}`` outside a kernel."""
    kernel = _kernel()
    get_parent = getattr(kernel, "get_parent", None)
    if get_parent is None:
        return {}
    parent = get_parent("shell")
    return dict(parent) if isinstance(parent, dict) else {}


def send_comm_msg(comm: Any, data: dict[str, Any], *, parent: dict[str, Any], buffers: Any = None) -> bool:
    """Publish ``comm_msg`` ``data`` on ``comm`` with ``parent`` as its parent request (what
    ipykernel's ``Comm.send`` does, without reading the current parent); False when there is no
    ipykernel comm to publish on (the caller then sends the ordinary way)."""
    kernel = getattr(comm, "kernel", None) or _kernel()
    session = getattr(kernel, "session", None)
    socket = getattr(kernel, "iopub_socket", None)
    comm_id = getattr(comm, "comm_id", None)
    if session is None or socket is None or not comm_id or getattr(comm, "_closed", False) or not parent:
        return False
    from ipykernel.jsonutil import json_clean

    content = json_clean({"data": data, "comm_id": comm_id})  # type: ignore[no-untyped-call]
    session.send(socket, "comm_msg", content, metadata={}, parent=parent, ident=comm.topic, buffers=buffers)
    return True


@contextlib.contextmanager
def owner_parent(parent: dict[str, Any]) -> Iterator[None]:
    """Within the block, display and stream output *of this thread* carries ``parent`` (the
    shell's per-thread parent; the kernel's current parent is not touched)."""
    shell = _shell()
    set_thread = getattr(shell, "set_thread_parent", None)
    reset_thread = getattr(shell, "reset_thread_parent", None)
    if not parent or set_thread is None or reset_thread is None:
        yield
        return
    tokens = set_thread(parent)
    try:
        yield
    finally:
        reset_thread(tokens)


_guard_lock = threading.Lock()


def guard_kernel_parent(kernel: Any = None) -> bool:
    """Install (once per kernel) the guard against ipykernel's stale parent restore described in
    the module docstring; returns whether a guard is in place.

    The kernel's ``set_parent`` is wrapped on the instance: setting the parent of a request
    dispatched before (only ipykernel's restore after a concurrent comm does that) while another
    request is current re-sets the current one instead, which refreshes exactly what the restore
    meant to refresh (the shell's streams and display publisher) without going back in time.
    """
    kernel = kernel if kernel is not None else _kernel()
    original = getattr(kernel, "set_parent", None)
    get_parent = getattr(kernel, "get_parent", None)
    if original is None or get_parent is None:
        return False
    with _guard_lock:
        if getattr(original, "rho_parent_guard", False):  # set_parent is ours already
            return True
        order: collections.deque[str] = collections.deque()
        seen: set[str] = set()

        def set_parent(ident: Any, parent: Any, channel: str = "shell") -> None:
            if channel != "shell" or not isinstance(parent, dict):
                original(ident, parent, channel)
                return
            msg_id = (parent.get("header") or {}).get("msg_id")
            current = get_parent("shell") or {}
            current_id = (current.get("header") or {}).get("msg_id")
            if msg_id and msg_id in seen and current_id and current_id != msg_id:
                idents = getattr(kernel, "_parent_ident", None)
                current_ident = idents["shell"] if idents is not None else ident
                original(current_ident, current, channel)  # a stale restore: keep the current request
                return
            if msg_id and msg_id not in seen:
                seen.add(msg_id)
                order.append(msg_id)
                if len(order) > _SEEN:
                    seen.discard(order.popleft())
            original(ident, parent, channel)

        set_parent.rho_parent_guard = True  # type: ignore[attr-defined]
        kernel.set_parent = set_parent
    return True
