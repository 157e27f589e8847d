"""The Python API: ``import rho_notebook as rho``.

A thin synchronous facade over :class:`~rho_notebook.service.Service`, safe to call in a running
Jupyter kernel: every verb is the service's coroutine awaited through ONE bridge, :func:`call`
(``default_runner().call(service.verb(...))``), on the background runner's own event loop, never
on the kernel's loop and never with ``asyncio.run``. A run executes in an owner process of its own
(never in the kernel, so a kernel restart or crash leaves it going) and is returned as a
:class:`RunHandle` that follows it on the runner thread; :func:`attach` gives a new kernel a live
handle of a run started earlier. The rules (consent to a digest, listing filters, log
reading, the result's JSON shape) live in the service; the ``%workflow`` magics are thin wrappers
of these functions. Nothing here imports IPython or ipywidgets.

=====================================  ==========================================================
``validate(source_or_path, ...)``      evaluate and check; returns an unsaved :class:`Plan`
``plan(source_or_path, ...)``          validate, freeze, store; returns the :class:`Plan`
``run(plan_or_id, yes=...)``           confirm the digest, start in the background: RunHandle
``fork(run_id, at=..., output=...)``   re-run what follows a node of a completed run: RunHandle
``resume(run_id, yes=...)``            resume in the background: RunHandle
``attach(run_id)``                     follow a run that already exists: RunHandle
``status(run_id)``                     durable :class:`RunState` snapshot
``result(run_id)``                     :class:`RunResult`: per node state, output, artifacts
``usage(run_id)``                      what its model calls spent: a table of typed rows
``runs()`` / ``plans()``               what the store holds
``cancel(run_id)``                     durable cancel request: :class:`CancelResult`
``logs(run_id, node)``                 a node's retained stdout / stderr
``approve(run_id, request)``           decide a pending approval
``export(notebook, out_dir)``          write a notebook's workflow folder
``show(run_id)``                       an earlier run's DAG from the store, with a run picker
=====================================  ==========================================================
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union, overload

from rho_notebook.errors import ConfirmationRequired, NotFound, RunRefused
from rho_notebook.model.plan import Plan
from rho_notebook.notebook._reads import logs, plans, result, runs, status, usage
from rho_notebook.service import (
    ApprovalDecision,
    ApprovalRequest,
    CancelResult,
    Consent,
    ExportResult,
    Mode,
    NotebookSource,
    PlanRequest,
    ResumeRun,
    RunHandle,
    RunResult,
    Service,
    StartRun,
    TryPlan,
    Workspace,
    default_runner,
    find_workspace,
    wait_for,
)
from rho_notebook.service.flags import DECISIONS, MODES, Decision, check_keywords
from rho_notebook.service.wire import LIVE_LIFECYCLES
from rho_notebook.views.runs import latest_run

__all__ = [
    "ConfirmationRequired",
    "NotebookSource",
    "RunHandle",
    "RunResult",
    "SourceLike",
    "validate",
    "plan",
    "run",
    "run_try",
    "fork",
    "resume",
    "attach",
    "live_handle",
    "runs",
    "plans",
    "status",
    "result",
    "usage",
    "cancel",
    "logs",
    "approve",
    "export",
    "show",
    "request_for",
    "consent",
    "call",
    "service",
]

T = TypeVar("T")

SourceLike = Union[str, "os.PathLike[str]", NotebookSource]
"""A path to an entry ``.star`` file, Starlark source text (a str with a newline), or a
:class:`~rho_notebook.service.cells.NotebookSource` (what notebook cells plan as)."""

CONSENT_HINT = "pass yes=True or confirm_digest={digest!r} (--yes in a magic)"
"""How the Python API (and the magics) ask for consent, named in a refusal."""


call = wait_for
"""The one bridge: await a service coroutine on the background runner's loop and return its result
(safe in a running kernel: the kernel's loop is never used, no ``asyncio.run``)."""


def service() -> Service:
    """The service over the default store (``$RHO_NOTEBOOK_HOME``, read at each call)."""
    return Service.default()


def consent(*, yes: bool, confirm_digest: str | None) -> Consent:
    """The consent ``yes=`` / ``confirm_digest=`` give, with the API's wording when refused."""
    return Consent(yes=yes, digest=confirm_digest, hint=CONSENT_HINT)


def _source(source_or_path: SourceLike) -> Path | str | NotebookSource:
    if isinstance(source_or_path, (str, NotebookSource)):
        return source_or_path
    return Path(os.fspath(source_or_path))


def request_for(
    source_or_path: SourceLike,
    *,
    inputs: Mapping[str, Any] | None = None,
    workspace: Workspace | None = None,
    service: Service | None = None,
) -> PlanRequest:
    """The planning request for a path, source text or notebook source (:meth:`Service.request_for`).

    The workspace (module root) defaults to the nearest ancestor of the current directory holding
    ``.rho/`` or ``.git`` (in a kernel: of the notebook's folder). Explicit ``inputs`` override a
    notebook source's default inputs key by key.
    """
    svc = service or Service.default()
    return svc.request_for(_source(source_or_path), inputs=inputs, workspace=workspace)


def _planned(
    source_or_path: SourceLike, *, inputs: Mapping[str, Any] | None, store: bool, flow: str | None = None
) -> Plan:
    check_keywords(mappings={"inputs": inputs})
    svc = service()
    source = _source(source_or_path)
    request = svc.request_for(source, inputs=inputs, flow=flow)
    if isinstance(source, NotebookSource):
        return call(svc.plan_source(source, request, store=store))
    return call(svc.plan(request) if store else svc.validate(request))


def validate(source_or_path: SourceLike, *, inputs: Mapping[str, Any] | None = None, flow: str | None = None) -> Plan:
    """Evaluate the workflow once in the planning worker and check the whole graph.

    Parameters
    ----------
    source_or_path
        An entry ``.star`` path, Starlark source text, or a notebook source.
    inputs
        Input values by name (Python values: str, int, bool, None, lists, dicts).
    flow
        With a flow module (``FLOW.py``): the ``Workflow`` it defines to plan as a flow run
        (docs/flows.md); a notebook source of a ``%%flow`` cell names its own.

    Returns
    -------
    Plan
        The frozen graph and manifest, with plan ID ``unsaved``; nothing is stored.

    Raises
    ------
    InvalidWorkflow
        With every diagnostic (file or cell, line, column, rule).
    """
    return _planned(source_or_path, inputs=inputs, store=False, flow=flow)


def plan(source_or_path: SourceLike, *, inputs: Mapping[str, Any] | None = None, flow: str | None = None) -> Plan:
    """Validate, resolve agents and executables, freeze, and store an immutable plan.

    Returns
    -------
    Plan
        The stored plan: ``plan.plan_id``, ``plan.graph_digest``, ``plan.manifest.authority``.

    Raises
    ------
    InvalidWorkflow
        As :func:`validate`.
    """
    return _planned(source_or_path, inputs=inputs, store=True, flow=flow)


def run(
    plan_or_id: Plan | str,
    *,
    yes: bool = False,
    confirm_digest: str | None = None,
    mode: Mode = "auto",
    approval_timeout: float | None = None,
    reuse: bool = True,
    executor: str | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    max_wall: float | None = None,
) -> RunHandle:
    """Confirm a plan's digest, create a run and execute it in the background.

    Parameters
    ----------
    plan_or_id
        A stored :class:`Plan`, or a plan ID or unique prefix.
    yes, confirm_digest
        Consent for this one run: ``yes=True``, or the exact ``sha256:...`` graph digest.
    mode
        Permission mode for command launches (recorded in the run).
    approval_timeout
        None (the default): a supervised launch waits for a person as long as its node allows,
        also while no kernel follows the run. Seconds: while no notebook (or terminal) that can
        answer follows the run, the launch waits that long, then fails closed.
    reuse
        False launches every node, even an unchanged ``reuse = True`` node (``--no-reuse``).
    executor
        Where command, shell and python nodes run: ``"local"`` (default), ``"dask"`` (the
        scheduler of ``$RHO_NOTEBOOK_DASK_SCHEDULER`` or settings ``dask_scheduler``, else a
        LocalCluster for the run) or ``"dask=tcp://host:8786"``; kept in the run (docs/distributed.md).
    max_tokens, max_cost, max_wall
        The run's budget (``--max-tokens`` / ``--max-cost`` USD / ``--max-wall`` seconds): the run
        halts ``needs_decision`` before a model call could pass it (docs/usage.md#budgets).

    Returns
    -------
    RunHandle
        Once the run's owner process holds the run; ``await`` it for the final state. The run
        does not depend on this kernel: an interrupted ``await``, a kernel restart or a crash stop
        only the following (:func:`attach` follows it again); :func:`cancel` stops it.

    Raises
    ------
    ConfirmationRequired, PlanError, RunRefused
    ExecutorInvalid, DaskNotInstalled
        ``executor`` is not one of the forms above, or ``distributed`` is not installed.
    """
    check_keywords(durations={"approval_timeout": approval_timeout}, choices={"mode": (mode, MODES)})
    svc = service()
    agreed = consent(yes=yes, confirm_digest=confirm_digest)

    async def create() -> str:
        chosen = plan_or_id if isinstance(plan_or_id, Plan) else await _load_plan(svc, str(plan_or_id))
        from rho_notebook.service.starting import record_budgets, start_budgets  # the runtime: on first use

        limits = await start_budgets(svc.layout, chosen, max_tokens=max_tokens, max_cost=max_cost, max_wall=max_wall)
        request = StartRun(
            plan=chosen.plan_id, consent=agreed, mode=mode, origin="notebook", reuse=reuse, executor=executor
        )
        created = await svc.create_run_of(chosen, request)
        await record_budgets(svc.layout, created, limits, source="run")
        return created

    run_id = call(create())
    return default_runner().start_run(svc, run_id, approval_timeout=approval_timeout)


async def _load_plan(svc: Service, plan_id: str) -> Plan:
    """The stored plan ``plan_id`` names; a file's path is refused with the call that plans it."""
    try:
        return await svc.load_plan(plan_id)
    except NotFound as err:
        if not await asyncio.to_thread(Path(plan_id).is_file):
            raise
        plan_it = f"plan it first: rho.run(rho.plan({plan_id!r}), yes=True)"
        raise NotFound(f"{err.problem}: {plan_id!r} is a file, not a plan; {plan_it}") from None


def run_try(
    tried: TryPlan,
    *,
    yes: bool = False,
    confirm_digest: str | None = None,
    mode: Mode = "auto",
    approval_timeout: float | None = None,
) -> RunHandle:
    """Confirm a ``try`` plan's digest and start it in the background, its upstream nodes'
    results taken from ``tried.source_run`` (``%workflow try``; see :meth:`Service.try_node`).
    The tried node itself always launches, even when it is ``reuse = True`` and unchanged."""
    check_keywords(durations={"approval_timeout": approval_timeout}, choices={"mode": (mode, MODES)})
    svc = service()
    agreed = consent(yes=yes, confirm_digest=confirm_digest)

    async def create() -> str:
        request = StartRun(
            plan=tried.plan.plan_id,
            consent=agreed,
            mode=mode,
            origin="notebook",
            reuse=False,
            seed_from=tried.source_run,
            seed_nodes=tried.seed_nodes,
        )
        return await svc.create_run_of(tried.plan, request)

    run_id = call(create())
    return default_runner().start_run(svc, run_id, approval_timeout=approval_timeout)


_NO_OUTPUT: Any = object()
"""``fork(..., output=...)`` not given: the fork node re-runs."""


def fork(
    run_id: str,
    *,
    at: str,
    output: Any = _NO_OUTPUT,
    inputs: Mapping[str, Any] | None = None,
    from_plan: str | None = None,
    yes: bool = False,
    confirm_digest: str | None = None,
    mode: Mode = "auto",
    approval_timeout: float | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    max_wall: float | None = None,
) -> RunHandle:
    """Fork the completed run ``run_id`` at node ``at`` (docs/fork.md) and start the fork in the
    background: every node not downstream of ``at`` is taken from the run (never launched),
    ``at`` takes ``output`` (checked against its output schema first) or re-runs (from
    ``from_plan``'s definition when given), and everything downstream runs anew. The fork's
    derived plan is consented to like any plan (``yes=True`` or ``confirm_digest``; the same fork
    asked again gives the same digest). ``max_tokens``, ``max_cost`` and ``max_wall`` are the
    fork's budget, as for :func:`run` (checked before the fork is planned).

    Raises
    ------
    ArgumentError
        A limit that is not a number above 0.
    ForkRefused
        The run is not completed, a node to be taken did not succeed (or changed in
        ``from_plan``), or ``output`` does not fit the node's schema (the message names the field).
    ConfirmationRequired
        No consent for the fork's digest (the message names it).
    """
    check_keywords(durations={"approval_timeout": approval_timeout}, choices={"mode": (mode, MODES)})
    from rho_notebook.service.starting import budget_keywords  # the runtime: on first use

    budget_keywords(max_tokens=max_tokens, max_cost=max_cost, max_wall=max_wall)  # before the fork's plan is stored
    edited = output is not _NO_OUTPUT
    value = output if edited else None
    chosen = service().fork(
        run_id, at=at, value=value, edited=edited, inputs=inputs, from_plan=from_plan, via="notebook"
    )
    forked = call(chosen)
    return run(
        forked.plan,
        yes=yes,
        confirm_digest=confirm_digest,
        mode=mode,
        approval_timeout=approval_timeout,
        max_tokens=max_tokens,
        max_cost=max_cost,
        max_wall=max_wall,
    )


def resume(
    run_id: str,
    *,
    recover_uncertain: bool = False,
    yes: bool = False,
    confirm_digest: str | None = None,
    approval_timeout: float | None = None,
    decisions: Mapping[str, Decision] | None = None,
    executor: str | None = None,
    raise_budget: Mapping[str, float] | None = None,
) -> RunHandle:
    """Resume a cancelled or interrupted run from its frozen graph, in the background.

    Parameters
    ----------
    run_id
        Run ID or unique prefix.
    recover_uncertain
        After inspection: stop leftover processes of the run and rerun attempts that have no
        journaled result (``--recover-uncertain``).
    yes, confirm_digest
        Consent for resuming this exact graph digest, as for :func:`run`.
    decisions
        A script run's halted steps decided: ``{"STEP": "rerun" | "skip"}`` (``--decide``); each
        authorises exactly one attempt (docs/scripts.md).
    executor
        As for :func:`run`, for this resume (None: where the run ran).
    raise_budget
        New limits of a run halted by its budget: ``{"tokens": 1000}``, ``{"cost": 0.5}``,
        ``{"NODE:tokens": 500}`` (``--raise-budget``; docs/usage.md#budgets), journaled first.

    Raises
    ------
    ConfirmationRequired, NeedsRecovery, RunRefused
    """
    svc = service()
    check_keywords(durations={"approval_timeout": approval_timeout}, mappings={"decisions": decisions})
    check_keywords(choices={f"decisions[{k!r}]": (v, DECISIONS) for k, v in (decisions or {}).items()})
    runner = default_runner()
    full = call(svc.resolve_run(run_id))
    live = runner.handle(full)
    if live is not None and not live.done():
        msg = f"run {full} is still running (this kernel follows it); await it, or cancel it before resuming"
        raise RunRefused(msg)
    request = ResumeRun(
        run=full,
        consent=consent(yes=yes, confirm_digest=confirm_digest),
        recover_uncertain=recover_uncertain,
        decisions=dict(decisions or {}),
        executor=executor,
    )
    full = call(svc.check_resume(request))
    if raise_budget:
        from rho_notebook.service.starting import raise_budgets  # the runtime: on first use

        call(raise_budgets(svc.layout, full, raise_budget))
    handle = runner.start_run(
        svc,
        full,
        resume=True,
        recover_uncertain=recover_uncertain,
        approval_timeout=approval_timeout,
        decisions=request.decisions,
        executor=request.executor,
    )
    return _views_follow(handle)


def _views_follow(handle: RunHandle) -> RunHandle:
    """The run views of ``handle``'s run already shown in this process follow it from now on (a
    view follows its run, not the call that made it). Widgets are never imported here: when their
    module is not loaded, no view exists to tell."""
    if "rho_notebook.widgets._run" in sys.modules:  # where run views are made
        from rho_notebook.widgets import follow_handle

        follow_handle(handle)
    return handle


def attach(run_id: str) -> RunHandle:
    """A live handle of a run that already exists (ID or unique prefix), following it to its end:
    after a kernel restart, in a reopened notebook, or for a run a terminal or the server started.

    Nothing is started or resumed: the run's own owner process goes on as it would without us.
    The handle's listeners, :meth:`~RunHandle.until`, ``await handle`` (the final state) and
    :meth:`~RunHandle.cancel` work as for a run this kernel started; on a run that has ended,
    ``await`` answers at once. This kernel's own handle of the run is returned while it is still
    following.

    Raises
    ------
    NotFound
        No such run (or the prefix is ambiguous).
    """
    svc = service()
    full = call(svc.resolve_run(run_id))
    return _views_follow(default_runner().attach(svc, full))


def live_handle(run_id: str, *, service: Service | None = None) -> RunHandle | None:
    """This kernel's handle of run ``run_id`` (a full ID), or a new :func:`attach`\\ ed one when
    the run is live (an owner is executing it); None for a run that is not live and that this
    kernel never followed (its view reads the store)."""
    svc = service or Service.default()
    runner = default_runner()
    known = runner.handle(run_id)
    if known is not None and not known.done():
        return known
    if call(svc.status(run_id)).lifecycle in LIVE_LIFECYCLES:
        return _views_follow(runner.attach(svc, run_id))
    return known


def show(run_id: str | None = None, *, workflow: str | None = None, node: str | None = None) -> Any:
    """An earlier run redrawn from the store: its live DAG and node outputs, under a picker of
    the runs of its workflow in its workspace (newest first) that switches between them. Nothing
    is executed; a run still going on is followed live, through the handle :func:`attach` gives
    (``await`` that handle, from :func:`attach`, for its end).

    Without ``run_id``: the newest run of ``workflow`` (None: of any workflow) created in this
    workspace. ``node`` opens that node's output pane. Returns the widget (a cell displays it);
    the text and HTML it carries list every node's state and validated output for viewers
    without widgets.

    Raises
    ------
    NotFound
        No such run, no run of the workflow in this workspace yet, or no such node.
    """
    from rho_notebook.widgets import run_picker  # widgets are imported only when shown

    svc = service()
    if run_id is None:
        key = find_workspace().key
        run_id = call(latest_run(svc, workflow=workflow, workspace_key=key))

    def handle_for(run: str) -> RunHandle | None:
        return live_handle(run, service=svc)

    return run_picker(run_id, service=svc, handle_for=handle_for, select=node)


def cancel(run_id: str, *, wait_seconds: float = 2.0) -> CancelResult:
    """Durably request cancellation and wait up to ``wait_seconds`` for the owner's acknowledgement.

    Works for a run owned by any process (a notebook, a terminal): the same path as
    ``rho-notebook cancel``.
    """
    check_keywords(durations={"wait_seconds": wait_seconds})
    return call(service().cancel(run_id, wait_seconds=wait_seconds))


@overload
def approve(
    run_id: str, request: None = None, *, deny: bool = False, comment: str | None = None
) -> list[ApprovalRequest]: ...
@overload
def approve(run_id: str, request: str, *, deny: bool = False, comment: str | None = None) -> ApprovalDecision: ...
def approve(
    run_id: str, request: str | None = None, *, deny: bool = False, comment: str | None = None
) -> list[ApprovalRequest] | ApprovalDecision:
    """Decide a pending approval (an approval node or a supervised launch) of a run.

    Without ``request``, returns the pending requests. With it, records the decision (the first
    decision wins) and returns the decision that stands.
    """
    svc = service()
    if request is None:
        return call(svc.pending_approvals(run_id))
    _, decision = call(svc.approve(run_id, request, approve=not deny, comment=comment, via="notebook"))
    return decision


def export(
    notebook_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], workflow: str | None = None
) -> ExportResult:
    """Write the workflow folder of a notebook: ``rho-notebook export NOTEBOOK.ipynb DIR``.

    Parameters
    ----------
    notebook_path
        The ``.ipynb`` file (its saved cells are exported, not a kernel's memory).
    out_dir
        Target folder (created if missing); see docs/notebook.md for the layout.
    workflow
        Which ``%%workflow NAME`` cell; optional when the notebook has one.
    """
    return call(service().export(Path(os.fspath(notebook_path)), Path(os.fspath(out_dir)), workflow=workflow))
