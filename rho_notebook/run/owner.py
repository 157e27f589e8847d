"""Opening runs: create from a plan, execute or resume as owner, read status, request cancel.

Ownership: the process executing a run holds the exclusive owner lock (mutation.lock) for the
whole execution. Status never takes it. Resume replays the journal: an attempt that was launched
but has no journaled result is *uncertain* — its process may still be running or may have
finished — and the run needs recovery until the person passes ``--recover-uncertain``; then any
process tree still carrying the run's RHO_RUN_ID is stopped and the node gets a new attempt.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rho_notebook.errors import PlanError, RhoError
from rho_notebook.exec.base import Executor
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.plan.plan import Plan
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.policy.hooks import load_hooks
from rho_notebook.policy.permission import PermissionMode
from rho_notebook.policy.plan_approval import PlanApprovals
from rho_notebook.policy.trust import TrustStore
from rho_notebook.source.workspace import Workspace
from rho_notebook.run.checkout import CheckoutLock
from rho_notebook.run.control import poke_owner, read_ack, write_cancel_request
from rho_notebook.run.driver import EventSink, RunDriver
from rho_notebook.run.events import EventKind, event, now_iso
from rho_notebook.run.scheduler import Scheduler
from rho_notebook.run.state import RunState, apply, replay
from rho_notebook.store.files import read_nofollow
from rho_notebook.store.ids import new_id
from rho_notebook.store.journal import JournalWriter, read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import OwnerLock, RunManifest, RunStore

__all__ = [
    "RunRefused",
    "NeedsRecovery",
    "create_run",
    "execute_run",
    "load_state",
    "request_cancel",
    "CancelResult",
    "default_executors",
]


class RunRefused(RhoError):
    """The run cannot start or resume as asked (owned elsewhere, completed, plan changed)."""

    rule = "refused"


class NeedsRecovery(RunRefused):
    """Uncertain attempts exist; resume needs --recover-uncertain after inspection."""

    rule = "needs_recovery"


def default_executors(*, trusted: bool = False) -> dict[str, Executor]:
    """One executor per node kind; ``trusted`` lets agents read the project's settings."""
    from rho_notebook.exec.agent import AgentExecutor
    from rho_notebook.exec.approval import ApprovalExecutor
    from rho_notebook.exec.command import CommandExecutor

    executor = CommandExecutor()
    return {"command": executor, "shell": executor, "approval": ApprovalExecutor(), "agent": AgentExecutor(trusted=trusted)}


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
    )
    folder = RunStore(layout).create(manifest, plan.graph)
    journal = JournalWriter.open(folder.events)
    try:
        records = [event(EventKind.RUN_CREATED, run_id, plan_id=plan.plan_id, graph_digest=plan.graph_digest, mode=mode)]
        if approval is not None:
            records.append(event(EventKind.PLAN_APPROVAL, run_id, graph_digest=approval.graph_digest, by=approval.by, approved_at=approval.at))
        journal.append(records)
        journal.sync()
    finally:
        journal.close()
    return run_id


def load_state(layout: StoreLayout, run_id: str) -> RunState:
    """The current durable state: the journal folded from the start (status never takes ownership).

    A run whose lifecycle says an owner is active but whose owner lock is free is reported as
    needs_recovery (the owner exited uncleanly), without writing anything.
    """
    store = RunStore(layout)
    manifest = store.manifest(run_id)
    graph = store.graph(run_id, expected_digest=manifest.graph_digest)
    state = RunState.fresh(run_id=run_id, plan_id=manifest.plan_id, graph=graph, graph_digest=manifest.graph_digest)
    read = read_journal(store.folder(run_id).events)
    replay(state, read.events)
    if state.lifecycle in (Lifecycle.RUNNING, Lifecycle.CANCELLING, Lifecycle.WAITING):
        if not OwnerLock.is_held(store.folder(run_id).lock):
            state.lifecycle = Lifecycle.NEEDS_RECOVERY
    return state


def _run_processes(run_id: str) -> list[int]:
    """Processes (other than us) whose environment proves they belong to ``run_id``."""
    marker = f"RHO_RUN_ID={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _stop_orphans(run_id: str) -> list[int]:
    pids = _run_processes(run_id)
    for pid in pids:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and _run_processes(run_id):
        time.sleep(0.01)
    return pids


def _descendants_of_reset(graph_children: Mapping[str, list[str]], roots: list[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        for child in graph_children.get(name, []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


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
        journal = JournalWriter.open(folder.events)
        state = RunState.fresh(run_id=run_id, plan_id=manifest.plan_id, graph=graph, graph_digest=manifest.graph_digest)
        replay(state, read_journal(folder.events).events)
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
        waiting = state.waiting_requests()
        uncertain = [name for name, rec in sorted(state.nodes.items()) if rec.state is NodeState.RUNNING and name not in waiting]
        for name in uncertain:
            rec = state.nodes[name]
            if rec.current is not None and not rec.current.uncertain:
                records.append(event(EventKind.ATTEMPT_UNCERTAIN, run_id, node=name, attempt=rec.attempt))
        if uncertain and not recover_uncertain:
            records.append(event(EventKind.NEEDS_RECOVERY, run_id, nodes=uncertain))
            journal.append(records)
            journal.sync()
            msg = (
                f"run {run_id} needs recovery: attempts of {', '.join(uncertain)} have no journaled result "
                "(the owner exited uncleanly). Inspect `rho-notebook status` and the node artifacts, make sure no "
                "earlier process remains, then resume with --recover-uncertain"
            )
            raise NeedsRecovery(msg)
        if uncertain:
            for pid in _stop_orphans(run_id):
                records.append(event(EventKind.ORPHAN_STOPPED, run_id, pid=pid))
            records.append(event(EventKind.RECOVERY_CONFIRMED, run_id, nodes=uncertain))
        # cancel requests made while no owner was alive are applied by the driver as it starts
        if resume:
            cancelled = [name for name, rec in sorted(state.nodes.items()) if rec.state is NodeState.CANCELLATION]
            reset = set(cancelled) | set(uncertain)
            downstream = _descendants_of_reset(Scheduler(graph).children, sorted(reset))
            for name in sorted(cancelled):
                records.append(event(EventKind.NODE_RESET, run_id, node=name, reason="new attempt after cancellation"))
            for name in sorted(downstream):
                if state.nodes[name].state in (NodeState.SKIPPED, NodeState.BLOCKED, NodeState.READY):
                    records.append(event(EventKind.NODE_RESET, run_id, node=name, reason="re-decided after resume"))
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
        return {"run_id": self.run_id, "request_id": self.request_id, "cancellation_state": self.cancellation_state, "lifecycle": self.lifecycle}


def request_cancel(layout: StoreLayout, run_id: str, *, wait_seconds: float = 2.0) -> CancelResult:
    """Record a durable cancel request, notify the owner, wait up to ``wait_seconds`` for its ack."""
    state = load_state(layout, run_id)
    if state.lifecycle is Lifecycle.COMPLETED:
        return CancelResult(run_id, None, "already_completed", state.lifecycle.value)
    folder = RunStore(layout).folder(run_id)
    request_id, recorded = write_cancel_request(folder.requests, by=f"pid {os.getpid()}")
    acked = poke_owner(run_id, request_id, timeout=wait_seconds)
    if not acked and read_ack(folder.requests, request_id) is not None:
        acked = True
    lifecycle = load_state(layout, run_id).lifecycle.value
    return CancelResult(run_id, request_id, "acknowledged" if acked else "pending", lifecycle, recorded)

