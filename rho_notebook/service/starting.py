"""Starting and resuming runs: consent to the graph digest, create, execute as the owner on the
awaiting loop, or hand the run to an owner process of its own (detached).

Consent is checked here and nowhere else (:class:`~rho_notebook.service.requests.Consent`): a run
is created only for the digest a person (or the front end on their behalf) confirmed, and
resumed only when the consent covers the run's frozen graph.

A front end that starts a run's owner and then follows it as someone who can answer (the CLI on a
terminal) says so from *before* the start (:class:`Presence`): the owner may ask a person as soon
as it holds the run, before the follower has attached, and would otherwise find nobody there and
fail a supervised launch closed after ``--approval-timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from rho_notebook.errors import PlanError, RunRefused
from rho_notebook.model.plan import Plan
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.policy.plan_approval import PlanApprovals
from rho_notebook.runtime.detached import OwnerOptions, start_owner
from rho_notebook.runtime.owner import create_run
from rho_notebook.service.requests import ResumeRun, StartRun
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import FollowLock
from rho_notebook.store.runs import RunStore

__all__ = ["Responder", "Presence", "create_run_of", "check_resume", "resume_detached"]

Responder = Callable[[ApprovalRequest], None]
"""Called (on the owner's loop) when a run asks a person; it must return at once."""


async def create_run_of(layout: StoreLayout, plan: Plan, request: StartRun) -> str:
    """Check consent for a stored plan's digest and create (not start) a run of it: its ID."""
    if plan.plan_id == "unsaved":
        msg = "this plan came from validate() and was not stored; create a stored plan with plan(...)"
        raise PlanError(msg)
    approval = None
    if request.consent.plan_approved:
        approval = await asyncio.to_thread(PlanApprovals(layout).get, plan.graph_digest)
    request.consent.check(
        plan.graph_digest,
        what=f"run plan {plan.plan_id[:13]}",
        approved_digest=None if approval is None else approval.graph_digest,
    )
    store = RunStore(layout)
    seed_from = None if request.seed_from is None else await asyncio.to_thread(store.resolve, request.seed_from)
    return await asyncio.to_thread(
        create_run,
        layout,
        plan,
        mode=request.mode,
        origin=request.origin,
        via=request.via,
        client=request.client,
        reuse=request.reuse,
        seed_from=seed_from,
        seed_nodes=request.seed_nodes,
        executor=request.executor,
        run_id=request.run_id,
    )


async def check_resume(layout: StoreLayout, request: ResumeRun) -> str:
    """Check consent for resuming the run's frozen graph; returns the full run ID."""
    store = RunStore(layout)
    run_id = await asyncio.to_thread(store.resolve, request.run)
    manifest = await asyncio.to_thread(store.manifest, run_id)
    request.consent.check(manifest.graph_digest, what=f"resume run {run_id[:13]}")
    return run_id


async def resume_detached(layout: StoreLayout, request: ResumeRun) -> int:
    """Check consent and resume the run in an owner process of its own: the owner's pid."""
    run_id = await check_resume(layout, request)
    if request.recover_uncertain:
        msg = (
            f"recovering uncertain attempts of run {run_id[:13]} takes a person who inspected them: "
            f"`rho-notebook resume {run_id[:13]} --recover-uncertain`"
        )
        raise RunRefused(msg)
    decisions = dict(request.decisions)
    options = OwnerOptions(resume=True, decisions=decisions)
    return await asyncio.to_thread(start_owner, layout, run_id, options)


class Presence:
    """A person can answer run ``run_id``'s requests here, said from before its owner starts until
    the follower holds its own share of the follow lock (:meth:`release` then; a ``with`` block
    releases at its end in any case).

    Its share is taken in this process before the owner is started. An owner forked from this
    process inherits the descriptor, which shares the lock (``flock`` locks belong to the open
    file description): :meth:`release` unlocks that description, so the forked owner's copy stops
    holding it too, and from then on only real followers count."""

    def __init__(self, layout: StoreLayout, run_id: str) -> None:
        self._lock = FollowLock(RunStore(layout).folder(run_id).path)

    def __enter__(self) -> Presence:
        self._lock.hold()
        return self

    def release(self) -> None:
        """Stop saying it (the follower's own share says it now); idempotent."""
        self._lock.release()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()
