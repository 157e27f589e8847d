"""The application service: the one API every front end (CLI, magics, widgets, server) calls.

Core operations are async; planning work happens in the supervised worker process and is awaited.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rho_notebook.errors import RhoError, SourceError
from rho_notebook.policy.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    check_decider,
    list_requests,
    read_decision,
    read_request,
    who_am_i,
    write_decision,
)
from rho_notebook.policy.trust import TrustStore
from rho_notebook.run.control import poke_owner
from rho_notebook.run.events import now_iso
from rho_notebook.store.ids import match_id
from rho_notebook.run.driver import EventSink
from rho_notebook.run.owner import CancelResult, create_run, execute_run, load_state, request_cancel
from rho_notebook.run.state import RunState
from rho_notebook.store.runs import RunStore
from rho_notebook.plan.plan import Plan, PlanManifest, PlanRequest, build_plan
from rho_notebook.source.labels import FileSourceReader, SourceText, label_for_path
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore

__all__ = ["Service", "entry_source"]


def entry_source(path: Path, workspace: Workspace) -> SourceText:
    """Read an entry module from disk under the label rules (``.star``, under the root, no symlinks)."""
    label = label_for_path(path, workspace.root)
    if not label.endswith(".star"):
        msg = f"{path}: a workflow entry must be a .star file"
        raise SourceError(msg, rule="load.label", file=str(path))
    return FileSourceReader(workspace.root).read(label)


@dataclass
class Service:
    layout: StoreLayout

    @classmethod
    def default(cls) -> Service:
        return cls(layout=StoreLayout.default())

    @property
    def plans(self) -> PlanStore:
        return PlanStore(self.layout)

    def request_for(
        self,
        path: Path,
        *,
        inputs: Mapping[str, Any],
        workspace: Workspace | None = None,
        search_path: str | None = None,
    ) -> PlanRequest:
        import os

        workspace = workspace or find_workspace()
        entry = entry_source(path, workspace)
        return PlanRequest(
            entry=entry,
            workspace=workspace,
            user_home=self.layout.home,
            inputs=dict(inputs),
            workflow_dir=(workspace.root / entry.label[2:]).parent,
            search_path=search_path if search_path is not None else os.environ.get("PATH", os.defpath),
            workspace_trusted=TrustStore(self.layout).is_trusted(workspace),
        )

    async def validate(self, request: PlanRequest) -> Plan:
        """Everything plan does except storing: the returned plan has a provisional ID."""
        return await build_plan(request, plan_id="unsaved")

    async def plan(self, request: PlanRequest) -> Plan:
        plan = await build_plan(request, plan_id=new_id())
        self.plans.save(plan)
        return plan

    def list_plans(self) -> list[PlanManifest]:
        return self.plans.list()

    # -- runs ---------------------------------------------------------------------------------------

    @property
    def runs(self) -> RunStore:
        return RunStore(self.layout)

    def load_plan(self, prefix: str) -> Plan:
        return self.plans.load(prefix)

    def create_run(self, plan: Plan, *, mode: str = "auto", origin: str = "cli") -> str:
        return create_run(self.layout, plan, mode=mode, origin=origin)

    async def execute(
        self,
        run_id: str,
        *,
        resume: bool = False,
        recover_uncertain: bool = False,
        on_event: EventSink | None = None,
        responder: Callable[[ApprovalRequest], None] | None = None,
        approval_timeout: float = 0.0,
    ) -> RunState:
        return await execute_run(
            self.layout,
            run_id,
            resume=resume,
            recover_uncertain=recover_uncertain,
            on_event=on_event,
            responder=responder,
            approval_timeout=approval_timeout,
        )

    # -- decisions ------------------------------------------------------------------------------------

    def pending_approvals(self, prefix: str) -> list[ApprovalRequest]:
        """Approval requests of a run that have no decision yet."""
        run_id = self.resolve_run(prefix)
        folder = self.runs.folder(run_id).requests
        return [r for r in list_requests(folder) if read_decision(folder, r.request_id) is None]

    def approval_request(self, run_prefix: str, request_prefix: str) -> ApprovalRequest:
        run_id = self.resolve_run(run_prefix)
        folder = self.runs.folder(run_id).requests
        ids = [r.request_id for r in list_requests(folder)]
        return read_request(folder, match_id(request_prefix, ids, what="approval request"))

    def decide(self, request: ApprovalRequest, *, approve: bool, comment: str | None, via: str) -> ApprovalDecision:
        """Record a person's decision (first decision wins) and wake the owner."""
        state = load_state(self.layout, request.run_id)
        check_decider(run_id=request.run_id, owner_pid=state.owner_pid)
        decision = ApprovalDecision(
            request_id=request.request_id,
            decision="approve" if approve else "deny",
            by=who_am_i(),
            comment=comment,
            at=now_iso(),
            via=via,
            facts_sha256=request.facts_sha256,
        )
        standing = write_decision(self.runs.folder(request.run_id).requests, decision)
        poke_owner(request.run_id, request.request_id, timeout=0.0)
        return standing

    def resolve_run(self, prefix: str) -> str:
        return self.runs.resolve(prefix)

    def status(self, prefix: str) -> RunState:
        return load_state(self.layout, self.resolve_run(prefix))

    def cancel(self, prefix: str, *, wait_seconds: float = 2.0) -> CancelResult:
        return request_cancel(self.layout, self.resolve_run(prefix), wait_seconds=wait_seconds)

    def list_runs(self) -> list[RunState]:
        found = []
        for run_id in self.runs.ids():
            try:
                found.append(load_state(self.layout, run_id))
            except (RhoError, OSError):
                continue
        return found
