"""Failpoints: named places where the owner process kills itself, for the crash tests.

When the owner process starts with ``RHO_NOTEBOOK_FAILPOINT=name:N`` in its environment, it
SIGKILLs itself the N-th time it reaches the named point (one of :data:`FAILPOINTS`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

__all__ = ["FAILPOINTS", "failpoint", "rearm"]

FAILPOINTS = (
    "before_launch_sync",
    "after_launch_sync",
    "after_process_started",
    "after_finished_append",
    "after_decisions_append",
    "before_snapshot",
    "after_snapshot",
    "before_completed",
    "after_completed",
    "after_cancel_requested",
    "script_step_launched",
    "script_step_finished",
)
_failpoint_counts: dict[str, int] = {}

_ARMED = os.environ.get("RHO_NOTEBOOK_FAILPOINT", "").partition(":")
"""(point, ":", count) read once at import: failpoints are armed in the environment a test
starts the owner process with (a lookup per call cost five environment reads per node)."""


def rearm() -> None:
    """Read the armed failpoint from the environment again: for an owner forked from a process
    that imported this module with another environment (the owners' fork server)."""
    global _ARMED
    _ARMED = os.environ.get("RHO_NOTEBOOK_FAILPOINT", "").partition(":")
    _failpoint_counts.clear()


def failpoint(name: str, *, first: Callable[[], object] | None = None) -> None:
    """Kill this process when ``name`` is the armed point and it was reached its N-th time,
    after calling ``first`` (what the point is defined to follow, when the process does it a
    little later otherwise: writing the journal lines it holds)."""
    point, _, count = _ARMED
    if point != name:
        return
    _failpoint_counts[name] = _failpoint_counts.get(name, 0) + 1
    if _failpoint_counts[name] >= int(count or 1):
        if first is not None:
            first()
        os.kill(os.getpid(), signal.SIGKILL)
