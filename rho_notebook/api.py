"""The Python API: ``import rho_notebook as rho``.

Thin synchronous functions over :class:`~rho_notebook.service.Service` that are safe to call in a
running Jupyter kernel: planning is awaited on the background runner's own event loop (the
planning worker is a separate process), never on the kernel's loop and never with
``asyncio.run``; runs execute on the runner thread and are returned as :class:`RunHandle`\\ s at
once. The ``%workflow`` magics are thin wrappers of these functions. Nothing here imports
IPython or ipywidgets.

=====================================  ==========================================================
``validate(source_or_path, ...)``      evaluate and check; returns an unsaved :class:`Plan`
``plan(source_or_path, ...)``          validate, freeze, store; returns the :class:`Plan`
``run(plan_or_id, yes=...)``           confirm the digest, start in the background: RunHandle
``resume(run_id, yes=...)``            resume in the background: RunHandle
``status(run_id)``                     durable :class:`RunState` snapshot
``result(run_id)``                     :class:`RunResult`: per node state, output, artifacts
``runs()`` / ``plans()``               what the store holds
``cancel(run_id)``                     durable cancel request: :class:`CancelResult`
``logs(run_id, node)``                 a node's retained stdout / stderr
``approve(run_id, request)``           decide a pending approval
``export(notebook, out_dir)``          write a notebook's workflow folder
=====================================  ==========================================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Mapping, Union

from rho_notebook.errors import InvalidWorkflow, NotFound, PlanError, RhoError
from rho_notebook.model.state import Lifecycle
from rho_notebook.notebook.cells import NotebookSource
from rho_notebook.notebook.export import ExportResult, export_notebook
from rho_notebook.plan.plan import Plan, PlanManifest, PlanRequest
from rho_notebook.policy.trust import TrustStore
from rho_notebook.run.background import RunHandle, RunResult, default_runner, run_result
from rho_notebook.run.owner import CancelResult, RunRefused
from rho_notebook.run.state import RunState
from rho_notebook.service import Service
from rho_notebook.source.labels import SourceText
from rho_notebook.source.workspace import Workspace, find_workspace

__all__ = [
    "ConfirmationRequired",
    "SourceLike",
    "validate",
    "plan",
    "run",
    "resume",
    "runs",
    "plans",
    "status",
    "result",
    "cancel",
    "logs",
    "approve",
    "export",
    "request_for",
    "check_confirmation",
    "service",
]

SourceLike = Union[str, "os.PathLike[str]", NotebookSource]
"""A path to an entry ``.star`` file, Starlark source text (a str with a newline), or a
:class:`~rho_notebook.notebook.cells.NotebookSource` (what notebook cells plan as)."""


class ConfirmationRequired(RhoError):
    """A run or resume was asked for without confirming the exact graph digest."""

    rule = "confirmation_required"


def service() -> Service:
    """The service over the default store (``$RHO_NOTEBOOK_HOME``, read at each call)."""
    return Service.default()


def _search_path() -> str:
    return os.environ.get("PATH", os.defpath)


def request_for(
    source_or_path: SourceLike,
    *,
    inputs: Mapping[str, Any] | None = None,
    workspace: Workspace | None = None,
    service: Service | None = None,
) -> PlanRequest:
    """The planning request for a path, source text or notebook source.

    The workspace (module root) defaults to the nearest ancestor of the current directory holding
    ``.rho/`` or ``.git`` (in a kernel: of the notebook's folder). Explicit ``inputs`` override a
    notebook source's default inputs key by key.
    """
    svc = service or Service.default()
    ws = workspace or find_workspace()
    given = dict(inputs or {})
    if isinstance(source_or_path, NotebookSource):
        source = source_or_path
        return PlanRequest(
            entry=source.entry,
            workspace=ws,
            user_home=svc.layout.home,
            inputs={**source.inputs, **given},
            workflow_dir=source.workflow_dir,
            overlay_sources=dict(source.modules),
            overlay_agents=dict(source.agents),
            search_path=_search_path(),
            workspace_trusted=TrustStore(svc.layout).is_trusted(ws),
        )
    if isinstance(source_or_path, str) and "\n" in source_or_path:
        folder = Path.cwd().resolve()
        relative = folder.relative_to(ws.root).as_posix() if folder.is_relative_to(ws.root) else ""
        label = "//" + (f"{relative}/" if relative and relative != "." else "") + "source.star"
        entry = SourceText(label=label, text=source_or_path, display="<source>")
        return PlanRequest(
            entry=entry,
            workspace=ws,
            user_home=svc.layout.home,
            inputs=given,
            workflow_dir=folder,
            search_path=_search_path(),
            workspace_trusted=TrustStore(svc.layout).is_trusted(ws),
        )
    return svc.request_for(Path(os.fspath(source_or_path)), inputs=given, workspace=ws)


def _planned(source_or_path: SourceLike, *, inputs: Mapping[str, Any] | None, store: bool) -> Plan:
    svc = Service.default()
    request = request_for(source_or_path, inputs=inputs, service=svc)
    coro = svc.plan(request) if store else svc.validate(request)
    try:
        return default_runner().call(coro)
    except InvalidWorkflow as err:
        if isinstance(source_or_path, NotebookSource):
            raise InvalidWorkflow(source_or_path.renumber(err.diagnostics())) from None
        raise


def validate(source_or_path: SourceLike, *, inputs: Mapping[str, Any] | None = None) -> Plan:
    """Evaluate the workflow once in the planning worker and check the whole graph.

    Parameters
    ----------
    source_or_path
        An entry ``.star`` path, Starlark source text, or a notebook source.
    inputs
        Input values by name (Python values: str, int, bool, None, lists, dicts).

    Returns
    -------
    Plan
        The frozen graph and manifest, with plan ID ``unsaved``; nothing is stored.

    Raises
    ------
    InvalidWorkflow
        With every diagnostic (file or cell, line, column, rule).
    """
    return _planned(source_or_path, inputs=inputs, store=False)


def plan(source_or_path: SourceLike, *, inputs: Mapping[str, Any] | None = None) -> Plan:
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
    return _planned(source_or_path, inputs=inputs, store=True)


def check_confirmation(digest: str, *, yes: bool, confirm_digest: str | None, what: str) -> None:
    """Consent for one run applies to one exact graph digest.

    Raises
    ------
    ConfirmationRequired
        Neither ``yes`` nor a matching ``confirm_digest`` was given.
    """
    if confirm_digest is not None:
        given = confirm_digest.strip()
        if not given.startswith("sha256:"):
            given = "sha256:" + given
        if given != digest:
            msg = f"{what}: you confirmed digest {given}, but the graph digest is {digest}; nothing was started"
            raise ConfirmationRequired(msg)
        return
    if not yes:
        msg = f"{what} needs confirmation of graph digest {digest}: pass yes=True or confirm_digest={digest!r} (--yes in a magic)"
        raise ConfirmationRequired(msg)


def run(
    plan_or_id: Plan | str,
    *,
    yes: bool = False,
    confirm_digest: str | None = None,
    mode: Literal["auto", "plan", "supervised"] = "auto",
    approval_timeout: float = 0.0,
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
        Passed to the driver (a notebook run always has a responder; see docs/notebook.md).

    Returns
    -------
    RunHandle
        At once, once the owner has started; ``await`` it for the final state.

    Raises
    ------
    ConfirmationRequired, PlanError, RunRefused
    """
    svc = Service.default()
    chosen = plan_or_id if isinstance(plan_or_id, Plan) else svc.load_plan(str(plan_or_id))
    if chosen.plan_id == "unsaved":
        msg = "this plan came from validate() and was not stored; create a stored plan with rho.plan(...)"
        raise PlanError(msg)
    check_confirmation(chosen.graph_digest, yes=yes, confirm_digest=confirm_digest, what=f"run plan {chosen.plan_id[:13]}")
    run_id = svc.create_run(chosen, mode=mode, origin="notebook")
    return default_runner().start_run(svc, run_id, approval_timeout=approval_timeout)


def resume(
    run_id: str,
    *,
    recover_uncertain: bool = False,
    yes: bool = False,
    confirm_digest: str | None = None,
    approval_timeout: float = 0.0,
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

    Raises
    ------
    ConfirmationRequired, NeedsRecovery, RunRefused
    """
    svc = Service.default()
    full = svc.resolve_run(run_id)
    live = default_runner().handle(full)
    if live is not None and not live.done():
        msg = f"run {full} is still running in this process; await it, or cancel it before resuming"
        raise RunRefused(msg)
    manifest = svc.runs.manifest(full)
    check_confirmation(manifest.graph_digest, yes=yes, confirm_digest=confirm_digest, what=f"resume run {full[:13]}")
    return default_runner().start_run(svc, full, resume=True, recover_uncertain=recover_uncertain, approval_timeout=approval_timeout)


def status(run_id: str) -> RunState:
    """One durable snapshot of a run (never takes ownership): ``rho-notebook status``."""
    return Service.default().status(run_id)


def result(run_id: str) -> RunResult:
    """Per node: state, attempts, exit, validated output and artifact paths."""
    svc = Service.default()
    return run_result(svc.layout, svc.status(run_id))


def runs(*, state: str | None = None, limit: int | None = None) -> list[RunState]:
    """Runs in the store, oldest first; ``state`` filters by lifecycle, ``limit`` keeps the newest."""
    if state is not None and state not in {lc.value for lc in Lifecycle}:
        msg = f"unknown lifecycle {state!r}; one of {', '.join(lc.value for lc in Lifecycle)}"
        raise ValueError(msg)
    found = Service.default().list_runs()
    if state is not None:
        found = [s for s in found if s.lifecycle.value == state]
    return found[-limit:] if limit else found


def plans() -> list[PlanManifest]:
    """Saved plans, oldest first."""
    return Service.default().list_plans()


def cancel(run_id: str, *, wait_seconds: float = 2.0) -> CancelResult:
    """Durably request cancellation and wait up to ``wait_seconds`` for the owner's acknowledgement.

    Works for a run owned by any process (a notebook, a terminal): the same path as
    ``rho-notebook cancel``.
    """
    return Service.default().cancel(run_id, wait_seconds=wait_seconds)


def logs(run_id: str, node: str, *, stream: Literal["stdout", "stderr", "both"] = "both") -> dict[str, str]:
    """The retained stdout / stderr of a node's latest attempt (decoded as UTF-8, replacing errors)."""
    svc = Service.default()
    full = svc.resolve_run(run_id)
    state = svc.status(full)
    if node not in state.nodes:
        msg = f"run {full} has no node {node!r}; its nodes: {', '.join(sorted(state.nodes))}"
        raise NotFound(msg)
    folder = svc.runs.folder(full).attempt_dir(node, max(state.nodes[node].attempt, 1))
    found: dict[str, str] = {}
    for name in ("stdout", "stderr") if stream == "both" else (stream,):
        try:
            found[name] = (folder / name).read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            found[name] = ""
    return found


def approve(run_id: str, request: str | None = None, *, deny: bool = False, comment: str | None = None) -> Any:
    """Decide a pending approval (an approval node or a supervised launch) of a run.

    Without ``request``, returns the pending requests. With it, records the decision (the first
    decision wins) and returns the decision that stands.
    """
    svc = Service.default()
    if request is None:
        return svc.pending_approvals(run_id)
    found = svc.approval_request(run_id, request)
    return svc.decide(found, approve=not deny, comment=comment, via="notebook")


def export(notebook_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], workflow: str | None = None) -> ExportResult:
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
    return export_notebook(Path(os.fspath(notebook_path)), Path(os.fspath(out_dir)), workflow=workflow)
