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
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from rho_notebook.errors import ArgumentError, NotFound, PlanError, RunRefused
from rho_notebook.model.budget import NAMES, Limits, limit_problem
from rho_notebook.model.graph import Graph
from rho_notebook.model.node_names import no_node
from rho_notebook.model.plan import Plan
from rho_notebook.model.state import Lifecycle
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.policy.plan_approval import PlanApprovals
from rho_notebook.policy.trust import TrustStore
from rho_notebook.runtime.budget import budget_records, journal_budgets, unpriced_models
from rho_notebook.runtime.detached import OwnerOptions, start_owner
from rho_notebook.runtime.executor_choice import resolve_executor
from rho_notebook.runtime.owner import create_run
from rho_notebook.runtime.recovery import resume_refusal
from rho_notebook.runtime.replay import fork_copies
from rho_notebook.runtime.script_fork import copy_script_values
from rho_notebook.runtime.status import load_state
from rho_notebook.service.flags import parse_budgets
from rho_notebook.service.maintenance import owner_lets_go
from rho_notebook.service.requests import ResumeRun, StartRun
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import FollowLock, OwnerLock
from rho_notebook.store.runs import RunStore

__all__ = [
    "Responder",
    "Presence",
    "create_run_of",
    "check_resume",
    "check_resume_consent",
    "check_resumable",
    "resume_detached",
    "check_priced",
    "record_budgets",
    "budget_keywords",
    "start_budgets",
    "check_scopes",
    "raise_budgets",
    "resume_budgets",
]

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
    run_id = await asyncio.to_thread(
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
    if plan.graph.fork is not None:  # a fork owns its copies from the start: deleting RUN never breaks it
        await asyncio.to_thread(_copy_fork_values, layout, run_id, plan.graph)
    return run_id


def _copy_fork_values(layout: StoreLayout, run_id: str, graph: Graph) -> None:
    """Copy the values a fork takes from its source run into the new run (docs/fork.md)."""
    assert graph.fork is not None
    if graph.script is None:
        fork_copies(layout, run_id, graph.fork)
    else:
        copy_script_values(layout, run_id, graph.fork)


async def check_resume(layout: StoreLayout, request: ResumeRun) -> str:
    """Check consent for resuming the run's frozen graph, then that resuming it would start
    something; returns the full run ID.

    Raises
    ------
    ConfirmationRequired
        The consent does not cover the run's graph digest.
    RunRefused
        The run completed and a resume would start nothing (:func:`check_resumable`), or a live
        owner executes it (an owner that has just stopped is waited for:
        :func:`~rho_notebook.service.maintenance.owner_lets_go`).
    """
    run_id = await _consented(layout, request)
    await check_resumable(layout, run_id, executor=request.executor)
    await _not_owned(layout, run_id, request)
    return run_id


async def check_resume_consent(layout: StoreLayout, request: ResumeRun) -> str:
    """:func:`check_resume` for a front end that asked :func:`check_resumable` itself before it
    asked a person to confirm (the CLI): consent, then no live owner; returns the full run ID."""
    run_id = await _consented(layout, request)
    await _not_owned(layout, run_id, request)
    return run_id


async def _consented(layout: StoreLayout, request: ResumeRun) -> str:
    store = RunStore(layout)
    run_id = await asyncio.to_thread(store.resolve, request.run)
    manifest = await asyncio.to_thread(store.manifest, run_id)
    request.consent.check(manifest.graph_digest, what=f"resume run {run_id[:13]}")
    return run_id


async def _not_owned(layout: StoreLayout, run_id: str, request: ResumeRun) -> None:
    if not await asyncio.to_thread(owner_lets_go, layout, run_id):  # before an owner is started for nothing
        msg = f"run {run_id} is owned by another live process and goes on by itself; nothing to resume"
        raise RunRefused(f"{msg}: {request.follow_hint}" if request.follow_hint else msg)


async def check_resumable(layout: StoreLayout, run_id: str, *, executor: str | None) -> None:
    """Refuse to resume run ``run_id`` (a full ID) with ``executor`` (a resume's ``--executor``)
    before anything is journaled for the resume (a budget raise) or an owner is started (the CLI
    asks it before it asks a person to confirm the digest): first an executor the owner would
    refuse, then a resume that would start nothing, as the owner says both.

    Raises
    ------
    ExecutorInvalid, DaskNotInstalled
        ``executor`` is not one to run with (exit 2, as when the owner says it).
    RunRefused
        :func:`~rho_notebook.runtime.recovery.resume_refusal` (a ``NothingToResume``).
    """
    if executor is not None:  # (dask: imports distributed, off the loop)
        await asyncio.to_thread(resolve_executor, executor, home=layout.home, environ=os.environ)
    state = await asyncio.to_thread(load_state, layout, run_id)
    if state.lifecycle is not Lifecycle.COMPLETED:  # only a completed run's graph is read
        return
    store = RunStore(layout)
    # the owner would take its lock first: a lock that is no regular file is damage, said before this
    await asyncio.to_thread(OwnerLock.holder, store.folder(run_id).lock)
    manifest = await asyncio.to_thread(store.manifest, run_id)
    graph = await asyncio.to_thread(store.graph, run_id, expected_digest=manifest.graph_digest)
    refusal = resume_refusal(state, script=graph.script is not None)
    if refusal is not None:
        raise refusal


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


async def check_priced(layout: StoreLayout, graph: Graph, budgets: Mapping[str, Limits], *, workspace: Path) -> None:
    """A cost budget needs a price for every model the run may call.

    Raises
    ------
    RunRefused
        ``budgets`` limit a cost and an agent's ``provider/model`` has no price in settings ``prices``
        (exit 3, before anything is created or journaled).
    """
    if all(limits.max_cost_usd is None for limits in budgets.values()):
        return
    trusted = await asyncio.to_thread(TrustStore(layout).is_trusted, Workspace(workspace))
    missing = await asyncio.to_thread(unpriced_models, graph, layout.home, workspace, trusted=trusted)
    if missing:
        whose = " and ".join(
            f"node {scope}'s" if scope else "the run's"
            for scope, limits in sorted(budgets.items())
            if limits.max_cost_usd is not None
        )
        msg = (
            f"{whose} cost budget needs a price for every model the run may call, and {', '.join(missing)} has "
            "none: add settings `prices` "
            f'{{"{missing[0]}": {{"input_per_mtok": ..., "output_per_mtok": ...}}}} (docs/usage.md#budgets), '
            "or limit tokens instead (--max-tokens N, --raise-budget tokens=N)"
        )
        raise RunRefused(msg)


async def start_budgets(
    layout: StoreLayout,
    plan: Plan,
    *,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    max_wall: float | None = None,
) -> dict[str, Limits]:
    """The run budgets ``rho.run(max_tokens=, max_cost=, max_wall=)`` asks for, checked (journal
    them with :func:`record_budgets` once the run exists).

    Raises
    ------
    ArgumentError
        A limit that is not a number above 0.
    RunRefused
        ``max_cost`` while a model of the plan has no price (:func:`check_priced`).
    """
    budgets = budget_keywords(max_tokens=max_tokens, max_cost=max_cost, max_wall=max_wall)
    await check_priced(layout, plan.graph, budgets, workspace=Path(plan.manifest.workspace_root))
    return budgets


def budget_keywords(
    *, max_tokens: int | None = None, max_cost: float | None = None, max_wall: float | None = None
) -> dict[str, Limits]:
    """The run budget the API's ``max_tokens=, max_cost=, max_wall=`` keywords ask for, held to the
    rules of ``--max-tokens/--max-cost/--max-wall`` (no price check: :func:`start_budgets` adds it).

    Raises
    ------
    ArgumentError
        A limit that is not a number above 0 (``max_tokens=0: ...``).
    """
    for name, value in (("max_tokens", max_tokens), ("max_cost", max_cost), ("max_wall", max_wall)):
        problem = None if value is None else limit_problem(NAMES[name.removeprefix("max_")], value)
        if problem is not None:
            msg = f"{name}={value!r}: {problem}"
            raise ArgumentError(msg)
    return parse_budgets(max_tokens=max_tokens, max_cost=max_cost, max_wall=max_wall)


def check_scopes(graph: Graph, budgets: Mapping[str, Limits], *, run_id: str) -> None:
    """A node's budget (``--raise-budget NODE:tokens=N``) must name a node of the run's graph: a
    misspelled one would be journaled for good and bound nothing. A script run's steps are not
    known before they run, so its scopes are taken as given.

    Raises
    ------
    NotFound
        A scope that is no node of ``graph`` (the message lists its nodes).
    """
    if graph.script is not None:
        return
    names = [node.name for node in graph.nodes]
    for scope in sorted(budgets):
        if scope and scope not in names:
            msg = no_node(f"run {run_id[:13]}", scope, names) + " (--raise-budget NODE:tokens=N gives a node's budget)"
            raise NotFound(msg)


async def raise_budgets(layout: StoreLayout, run_id: str, raises: Mapping[str, float]) -> None:
    """``rho.resume(run, raise_budget={"tokens": 1000, "NODE:cost": 0.5})``: check and journal the
    new limits (source ``raise``) before the resume's owner starts; nothing when ``raises`` is empty.

    Raises
    ------
    ArgumentError
        A key that is no ``[NODE:]tokens|cost|wall`` or a value that is not a number above 0.
    RunRefused
        A cost limit while a model of the run has no price, or the run is owned by a live process.
    """
    if not raises:
        return
    await resume_budgets(layout, run_id, parse_budgets(raises=[f"{key}={value}" for key, value in raises.items()]))


async def resume_budgets(layout: StoreLayout, run_id: str, budgets: Mapping[str, Limits]) -> None:
    """The limits a resume sets (``resume --max-tokens``, ``--raise-budget``, ``rho.resume(raise_budget=)``,
    from every front end alike): checked, then journaled with source ``raise`` before the resume's
    owner starts (a limit set after the run started is a raise, whatever its flag; docs/usage.md).

    Raises
    ------
    NotFound
        A node's budget for a node the run's graph does not have (:func:`check_scopes`).
    RunRefused
        A cost limit while a model of the run has no price (:func:`check_priced`).
    """
    if not budgets:
        return
    store = RunStore(layout)
    manifest = await asyncio.to_thread(store.manifest, run_id)
    graph = await asyncio.to_thread(store.graph, run_id, expected_digest=manifest.graph_digest)
    check_scopes(graph, budgets, run_id=run_id)
    await check_priced(layout, graph, budgets, workspace=Path(manifest.workspace_root))
    await record_budgets(layout, run_id, budgets, source="raise")


async def record_budgets(layout: StoreLayout, run_id: str, budgets: Mapping[str, Limits], *, source: str) -> None:
    """Journal ``budgets`` (scope -> limits; ``""`` the run) in run ``run_id`` durably, before an
    owner starts it (``run --max-tokens``: source ``run``; any limit a resume sets: ``raise``,
    :func:`resume_budgets`)."""
    records = [
        record
        for scope, limits in sorted(budgets.items())
        for record in budget_records(run_id, limits, source=source, node=scope or None)
    ]
    await asyncio.to_thread(journal_budgets, layout, run_id, records)


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
