"""A person's decisions on a run: approval requests, human steps' forms, and plan approval.

Every decision is recorded with who, when and via which front end; the first decision on a request
wins (the one that stands is returned), the run's owner (or one of its children) may never decide,
and the owner is woken at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rho_notebook.errors import ApprovalRefused, NotFound
from rho_notebook.model.events import now_iso
from rho_notebook.model.run_state import RunState
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.policy.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    already_decided,
    check_decider,
    list_requests,
    read_decision,
    read_request,
    record_decision,
    who_am_i,
)
from rho_notebook.policy.plan_approval import PlanApproval, PlanApprovals
from rho_notebook.runtime.status import load_state
from rho_notebook.runtime.wakeup import poke_owner
from rho_notebook.store.ids import match_id
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.runs import RunStore

__all__ = [
    "pending_approvals",
    "approval_request",
    "decision_on",
    "decide",
    "form_request",
    "answer",
    "approve_plan",
]


def _requests_folder(layout: StoreLayout, run: str) -> Path:
    store = RunStore(layout)
    return store.folder(store.resolve(run)).requests


def pending_approvals(layout: StoreLayout, run: str) -> list[ApprovalRequest]:
    """Approval requests of a run that have no decision yet and whose attempt still waits for one
    (not those of an attempt that ended meanwhile: cancelled, timed out)."""
    folder = _requests_folder(layout, run)
    requests = [r for r in list_requests(folder) if read_decision(folder, r.request_id) is None]
    if not requests:
        return []
    state = load_state(layout, requests[0].run_id)
    return [r for r in requests if _closed(state, r) is None]


def _closed(state: RunState, request: ApprovalRequest) -> str | None:
    """Why nobody will read a decision on ``request`` any more: the attempt that asked ended
    without one (None while it has not: a request written an instant before the journal says
    so, or one a dead owner left, which its next owner asks again, is still open)."""
    record = state.nodes.get(request.node)
    ended = next((a for a in record.attempts if a.number == request.attempt), None) if record else None
    if ended is None or ended.state is None:
        return None
    why = f"attempt {request.attempt} of {request.node} ended ({ended.state}) without a decision"
    again = state.waiting_requests().get(request.node)
    return f"{why}; it waits again as request {again}" if again else why


def approval_request(layout: StoreLayout, run: str, request: str) -> ApprovalRequest:
    """One approval request of a run by ID or unique prefix."""
    folder = _requests_folder(layout, run)
    ids = [r.request_id for r in list_requests(folder)]
    return read_request(folder, match_id(request, ids, what="approval request", lister=f"approve {run}"))


def decision_on(layout: StoreLayout, request: ApprovalRequest) -> ApprovalDecision | None:
    """The decision that stands on a request, if any."""
    return read_decision(RunStore(layout).folder(request.run_id).requests, request.request_id)


def _step_name(request: ApprovalRequest) -> Any:
    return request.facts.get("step", request.node)


def _record(
    layout: StoreLayout,
    request: ApprovalRequest,
    *,
    approve: bool,
    comment: str | None,
    via: str,
    answer: dict[str, Any] | None = None,
) -> ApprovalDecision:
    """Record the caller's decision (refused for the run's owner and its children), wake the
    owner, and return the decision that stands."""
    state = load_state(layout, request.run_id)
    check_decider(run_id=request.run_id, owner_pid=state.owner_pid)
    closed = _closed(state, request)
    if (
        closed is not None
        and read_decision(RunStore(layout).folder(request.run_id).requests, request.request_id) is None
    ):
        msg = f"request {request.request_id} of run {request.run_id} no longer waits for a decision: {closed}"
        raise ApprovalRefused(msg)
    decision = ApprovalDecision(
        request_id=request.request_id,
        decision="approve" if approve else "deny",
        by=who_am_i(),
        comment=comment,
        at=now_iso(),
        via=via,
        facts_sha256=request.facts_sha256,
        **({} if answer is None else {"answer": answer}),
    )
    standing = record_decision(RunStore(layout).folder(request.run_id).requests, request, decision)
    poke_owner(request.run_id, request.request_id, timeout=0.0)
    return standing


def decide(
    layout: StoreLayout, request: ApprovalRequest, *, approve: bool, comment: str | None, via: str
) -> ApprovalDecision:
    """Record a person's decision (the first decision wins; the one that stands is returned)
    and wake the owner.

    Raises ApprovalRefused: The caller is the run's owner process or one of its children (a node cannot
    approve itself), or the request is a human step's form (answer it with :meth:`answer`); AlreadyDecided:
    Another decision stands (an identical one too): this one was not recorded.
    """
    if request.kind == "form" and approve:
        msg = (
            f"step {_step_name(request)!r} asks a person to fill a form; answer it with "
            f"rho-notebook answer {request.run_id} {_step_name(request)} FIELD=VALUE... "
            "(approve --deny declines it)"
        )
        raise ApprovalRefused(msg)
    return _record(layout, request, approve=approve, comment=comment, via=via)


def form_request(layout: StoreLayout, run: str, step: str) -> ApprovalRequest:
    """The pending form request of a human step (``step`` or one round, ``step@N``) of a run.

    Raises NotFound: The run has no pending form request for that step (the message lists those it has);
    AlreadyDecided: The step's form was answered or declined already (the message says by whom and when).
    """
    pending = [r for r in pending_approvals(layout, run) if r.kind == "form"]
    found = [r for r in pending if step in (r.node, r.facts.get("step"))]
    if found:
        return max(found, key=lambda r: r.requested_at)
    folder = _requests_folder(layout, run)
    answered = [
        (r, d)
        for r in list_requests(folder)
        if r.kind == "form" and step in (r.node, r.facts.get("step"))
        if (d := read_decision(folder, r.request_id)) is not None
    ]
    if answered:  # too late: say who answered, and when
        raise already_decided(*max(answered, key=lambda pair: pair[0].requested_at))
    waiting = ", ".join(sorted(r.node for r in pending)) or "none"
    msg = f"run {run}: no human step {step!r} is waiting for an answer (steps waiting: {waiting})"
    raise NotFound(msg)


def answer(
    layout: StoreLayout, request: ApprovalRequest, values: Mapping[str, Any], *, comment: str | None, via: str
) -> ApprovalDecision:
    """Answer a human step's form (:meth:`form_request`): ``values`` are checked against the
    form's fields (types, choices, required; defaults filled in), recorded like an approval
    with who, when and via (the first answer wins; the one that stands is returned), and the
    owner is woken.

    Raises InputError: A value is missing, unknown or of the wrong type (the message names the field);
    ApprovalRefused: The caller is the run's owner or one of its children; AlreadyDecided: Another answer
    (or a decline) stands: this one was not recorded.
    """
    form = request.facts.get("form") or {}
    checked = check_inputs(form, values, file=f"step {_step_name(request)}", noun="field")
    return _record(layout, request, approve=True, comment=comment, via=via, answer=checked)


def approve_plan(layout: StoreLayout, target: str) -> tuple[PlanApproval, bool, str | None]:
    """Approve a graph digest or a plan's digest: (the record that stands, whether new, the plan ID)."""
    plan_id = None
    if target.startswith("sha256:"):
        digest = target
    else:
        try:
            plan = PlanStore(layout).load(target)
        except NotFound:
            msg = f"{target!r} is neither a plan ID prefix nor a graph digest (sha256:...)"
            raise NotFound(msg) from None
        digest, plan_id = plan.graph_digest, plan.plan_id
    record, new = PlanApprovals(layout).approve(digest, by=who_am_i(), plan_id=plan_id)
    return record, new, plan_id
