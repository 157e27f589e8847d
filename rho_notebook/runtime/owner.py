"""Owning a run: create it from a plan, then execute or resume it as its owner.

Ownership: the process executing a run holds the exclusive owner lock (mutation.lock) for the
whole execution. A run whose journal is damaged (:func:`rho_notebook.runtime.status.journal_state`)
is never owned: nothing can say which of its nodes finished, so it is refused before anything is
written. Status never takes it (:mod:`rho_notebook.runtime.status`). Resume replays the
journal; attempts of a dead owner are settled by :mod:`rho_notebook.runtime.recovery` before the
driver starts, and cancel requests by :mod:`rho_notebook.runtime.cancel`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rho_notebook.errors import PlanError, RunRefused
from rho_notebook.exec.base import Executor
from rho_notebook.model.events import EventKind, event, now_iso
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState, apply
from rho_notebook.model.state import Lifecycle
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.policy.hooks import load_hooks
from rho_notebook.policy.permission import PermissionMode
from rho_notebook.policy.plan_approval import PlanApprovals
from rho_notebook.policy.trust import TrustStore
from rho_notebook.runtime.checkout import CheckoutLock
from rho_notebook.runtime.driver import EventSink, RunDriver
from rho_notebook.runtime.recovery import recovery_events
from rho_notebook.runtime.status import journal_state
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.files import read_nofollow
from rho_notebook.store.ids import new_id
from rho_notebook.store.journal import CHAINED, JournalWriter
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import OwnerLock, RunManifest, RunStore

__all__ = [
    "create_run",
    "execute_run",
    "default_executors",
]


def default_executors(*, trusted: bool = False) -> dict[str, Executor]:
    """One executor per node kind; ``trusted`` lets agents read the project's settings."""
    from rho_notebook.exec.agent import AgentExecutor
    from rho_notebook.exec.approval import ApprovalExecutor
    from rho_notebook.exec.command import CommandExecutor

    executor = CommandExecutor()
    return {
        "command": executor,
        "shell": executor,
        "approval": ApprovalExecutor(),
        "agent": AgentExecutor(trusted=trusted),
    }


def _check_plan(layout: StoreLayout, plan: Plan) -> None:
    """The stored sources still match their digests and the workspace is still where it was."""
    folder = layout.plan_dir(plan.plan_id) / "sources"
    for source in plan.manifest.sources:
        path = folder / f"{source.sha256.removeprefix('sha256:')}.star"
        try:
            data = read_nofollow(path)
        except FileNotFoundError:
            msg = f"plan {plan.plan_id}: the stored source of {source.label} is missing; create a new plan"
            raise PlanError(msg) from None
        if "sha256:" + hashlib.sha256(data).hexdigest() != source.sha256:
            msg = f"plan {plan.plan_id}: the stored source of {source.label} no longer matches its digest; create a new plan"
            raise PlanError(msg)
    root = Path(plan.manifest.workspace_root)
    if not root.is_dir():
        msg = f"plan {plan.plan_id}: its workspace {root} no longer exists"
        raise PlanError(msg)
    key = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()
    if key != plan.manifest.workspace_key:
        msg = f"plan {plan.plan_id}: the workspace {root} now resolves elsewhere (key {key[:12]} != {plan.manifest.workspace_key[:12]})"
        raise PlanError(msg)


def create_run(layout: StoreLayout, plan: Plan, *, mode: str = "auto", origin: str = "cli") -> str:
    """Check the plan (and its plan approval when required) and copy its frozen graph into a new
    run; returns the run ID."""
    _check_plan(layout, plan)
    approval = PlanApprovals(layout).check(plan.graph_digest)
    run_id = new_id()
    manifest = RunManifest(
        run_id=run_id,
        plan_id=plan.plan_id,
        graph_digest=plan.graph_digest,
        workflow=plan.graph.name,
        created_at=now_iso(),
        workspace_root=plan.manifest.workspace_root,
        workspace_key=plan.manifest.workspace_key,
        identities=plan.manifest.identities,
        mode=mode,
        origin=origin,
        journal_format=CHAINED,
    )
    folder = RunStore(layout).create(manifest, plan.graph)
    journal = JournalWriter.open(folder.events, mark=folder.mark)
    try:
        records = [
            event(EventKind.RUN_CREATED, run_id, plan_id=plan.plan_id, graph_digest=plan.graph_digest, mode=mode)
        ]
        if approval is not None:
            records.append(
                event(
                    EventKind.PLAN_APPROVAL,
                    run_id,
                    graph_digest=approval.graph_digest,
                    by=approval.by,
                    approved_at=approval.at,
                )
            )
        journal.append(records)
        journal.sync()
    finally:
        journal.close()
    return run_id


async def execute_run(
    layout: StoreLayout,
    run_id: str,
    *,
    resume: bool,
    recover_uncertain: bool = False,
    executors: Mapping[str, Executor] | None = None,
    on_event: EventSink | None = None,
    responder: Callable[[ApprovalRequest], None] | None = None,
    approval_timeout: float = 0.0,
) -> RunState:
    """Own and execute (or resume) a run until it completes or is cancelled."""
    store = RunStore(layout)
    folder = store.folder(run_id)
    manifest = store.manifest(run_id)
    graph = store.graph(run_id, expected_digest=manifest.graph_digest)
    lock = OwnerLock(folder.lock)
    if not lock.try_acquire():
        msg = f"run {run_id} is owned by another live process; watch it with `rho-notebook status {run_id[:13]}`"
        raise RunRefused(msg)
    journal: JournalWriter | None = None
    try:
        # checked before the writer opens (it would create a deleted journal and cut a torn tail)
        state = journal_state(layout, run_id)
        if state.damage is not None:
            msg = (
                f"run {run_id} is damaged and cannot be resumed or owned: {state.damage}. Its finished work "
                f"cannot be told from unfinished work, so nothing is rerun. Inspect it with `rho-notebook status`, "
                f"`events` and `logs`, then restore the run folder from a backup or `rho-notebook delete {run_id[:13]}`"
            )
            raise RunRefused(msg)
        journal = JournalWriter.open(folder.events, mark=folder.mark if manifest.chained else None)
        # the values later nodes read; a damaged one stops us before anything is journaled
        outputs = folder.output_values(state.succeeded_attempts())
        records: list[dict[str, Any]] = []
        if journal.repaired_bytes:
            records.append(event(EventKind.JOURNAL_REPAIRED, run_id, bytes=journal.repaired_bytes))
        started = state.lifecycle is not Lifecycle.PLANNED
        if started and not resume:
            msg = f"run {run_id} has already started; use `rho-notebook resume {run_id[:13]}`"
            raise RunRefused(msg)
        if resume and state.lifecycle is Lifecycle.COMPLETED and state.outcome == "success":
            msg = f"run {run_id} already completed with outcome success; nothing to resume"
            raise RunRefused(msg)
        records = recovery_events(
            state, journal, graph=graph, pending=records, resume=resume, recover_uncertain=recover_uncertain
        )
        for record in journal.append(records):
            apply(state, record)
            if on_event is not None:
                on_event(record)
        journal.sync()
        # current trust only narrows: an untrusted workspace's project settings and hooks are ignored
        trusted = TrustStore(layout).is_trusted(Workspace(Path(manifest.workspace_root)))
        driver = RunDriver(
            run_id=run_id,
            graph=graph,
            folder=folder,
            state=state,
            journal=journal,
            executors=executors if executors is not None else default_executors(trusted=trusted),
            workspace=Path(manifest.workspace_root),
            identities=manifest.identities,
            layout=layout,
            on_event=on_event,
            mode=PermissionMode(manifest.mode),
            checkout=CheckoutLock.for_layout(layout, manifest.workspace_key),
            hooks=load_hooks(layout.home, Path(manifest.workspace_root), trusted=trusted),
            responder=responder,
            approval_timeout=approval_timeout,
        )
        driver.outputs.update(outputs)
        return await driver.execute(resumed=resume)
    finally:
        if journal is not None:
            journal.close()
        lock.release()
