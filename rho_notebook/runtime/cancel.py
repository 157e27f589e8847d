"""Cancelling a run: the durable cancel request, its acknowledgement, and the requester's call.

A request is a file ``requests/cancel-<REQUEST_ID>.json`` written atomically in the run's private
folder: that file *is* the durable intent. The requester then wakes the owner
(:func:`rho_notebook.runtime.wakeup.poke_owner`); the poke carries no authority, the owner only
re-reads its requests folder. The owner acknowledges a request by answering the poke and by
writing ``cancel-<REQUEST_ID>.ack.json``, so a requester whose poke found nobody can still learn
the outcome later.

The requests folder is used only as the store checks it
(:func:`~rho_notebook.store.files.check_entry`): a symlink or a file in its place is refused
(:class:`~rho_notebook.errors.StoreError`), never written through. A damaged run has no owner
that could act on a request, so cancelling one is refused (exit 3) unless an owner holds it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import RunRefused
from rho_notebook.model.state import Lifecycle
from rho_notebook.runtime.status import load_state
from rho_notebook.runtime.wakeup import poke_owner
from rho_notebook.store.files import atomic_write_json, check_entry, ensure_private_dir, list_dir, read_nofollow
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import OwnerLock
from rho_notebook.store.runs import RunStore

__all__ = [
    "CancelResult",
    "request_cancel",
    "write_cancel_request",
    "pending_cancel_requests",
    "write_ack",
    "read_ack",
]


def _writable(requests_dir: Path) -> Path:
    """The run's requests folder, checked (no link, a directory) and created when it is missing."""
    if check_entry(requests_dir, below=requests_dir.parent, kind="dir") is None:
        ensure_private_dir(requests_dir, below=requests_dir.parent)
    return requests_dir


def write_cancel_request(requests_dir: Path, *, by: str) -> tuple[str, float]:
    """Record a cancel request durably; returns (request_id, monotonic time it became durable)."""
    request_id = new_id()
    atomic_write_json(
        _writable(requests_dir) / f"cancel-{request_id}.json", {"request_id": request_id, "by": by, "at": time.time()}
    )
    return request_id, time.monotonic()


def pending_cancel_requests(requests_dir: Path, known: set[str]) -> list[str]:
    """Cancel request IDs in the folder that are not in ``known``, oldest first."""
    found = []
    for name in list_dir(requests_dir, below=requests_dir.parent):
        if name.startswith("cancel-") and name.endswith(".json") and not name.endswith(".ack.json"):
            request_id = name[len("cancel-") : -len(".json")]
            if request_id not in known:
                found.append(request_id)
    return sorted(found)


def write_ack(requests_dir: Path, request_id: str, data: dict[str, Any]) -> None:
    atomic_write_json(_writable(requests_dir) / f"cancel-{request_id}.ack.json", {"request_id": request_id, **data})


def read_ack(requests_dir: Path, request_id: str) -> dict[str, Any] | None:
    path = requests_dir / f"cancel-{request_id}.ack.json"
    if check_entry(path, below=requests_dir.parent, kind="file") is None:
        return None
    try:
        data: dict[str, Any] = json.loads(read_nofollow(path))
        return data
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@dataclass(frozen=True)
class CancelResult:
    run_id: str
    request_id: str | None
    cancellation_state: str
    """acknowledged | pending | already_completed"""
    lifecycle: str
    recorded_at: float = 0.0
    """time.monotonic() when the request became durable (for measurements)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "request_id": self.request_id,
            "cancellation_state": self.cancellation_state,
            "lifecycle": self.lifecycle,
        }


def request_cancel(layout: StoreLayout, run_id: str, *, wait_seconds: float = 2.0) -> CancelResult:
    """Record a durable cancel request, notify the owner, wait up to ``wait_seconds`` for its ack."""
    state = load_state(layout, run_id)
    if state.lifecycle is Lifecycle.COMPLETED:
        return CancelResult(run_id, None, "already_completed", state.lifecycle.value)
    folder = RunStore(layout).folder(run_id)
    if state.lifecycle is Lifecycle.DAMAGED and not OwnerLock.is_held(folder.lock):
        msg = (
            f"run {run_id} is damaged ({state.damage}); no owner can run it, so there is nothing to cancel. "
            f"Inspect it with `rho-notebook status {run_id[:13]}`, or remove it with `rho-notebook delete {run_id[:13]}`"
        )
        raise RunRefused(msg)
    request_id, recorded = write_cancel_request(folder.requests, by=f"pid {os.getpid()}")
    acked = poke_owner(run_id, request_id, timeout=wait_seconds)
    if not acked and read_ack(folder.requests, request_id) is not None:
        acked = True
    lifecycle = load_state(layout, run_id).lifecycle.value
    return CancelResult(run_id, request_id, "acknowledged" if acked else "pending", lifecycle, recorded)
