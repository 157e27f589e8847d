"""Waiting for a person's decision on an approval request, as the run's owner.

The request is already durable in the run's ``requests`` folder; a decision arrives there as a
file, written by whoever decides (CLI, widget, REST) through :mod:`rho_notebook.policy.approvals`.
The owner re-reads the folder when woken (a poke on :mod:`rho_notebook.runtime.wakeup` sets the
wake event) and at least every 0.25 s. A decision made on other facts than the request's counts
as a denial. Journaling the decision is the driver's job, not this module's.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest, read_decision

__all__ = ["wait_for_decision"]


async def wait_for_decision(
    requests_dir: Path,
    request: ApprovalRequest,
    *,
    timeout: float,
    cancel: asyncio.Event,
    wake: asyncio.Event,
) -> ApprovalDecision | None | str:
    """The decision on ``request``, None once ``timeout`` seconds pass, or "cancelled".

    Parameters
    ----------
    requests_dir
        The run's ``requests`` folder.
    request
        The durable request being decided.
    timeout
        Seconds to wait for a decision.
    cancel
        Set when the attempt is cancelled: the wait ends with "cancelled".
    wake
        Set when the owner is poked: the folder is read again at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        decision = read_decision(requests_dir, request.request_id)
        if decision is not None:
            if decision.facts_sha256 != request.facts_sha256:
                decision = decision.model_copy(
                    update={
                        "decision": "deny",
                        "comment": f"rejected: decided on different facts ({decision.facts_sha256})",
                    }
                )
            return decision
        if cancel.is_set():
            return "cancelled"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), timeout=min(remaining, 0.25))
        except TimeoutError:
            pass
