"""The decision verbs: approve, approve-plan, trust, untrust."""

from __future__ import annotations

import argparse
import json

from rho_notebook.service import (
    ApprovalDecision,
    ApprovalRequest,
    Service,
    describe_request,
    load_limits,
    parse_input_args,
)
from rho_notebook.service.sync import run_sync

__all__ = ["run_approve", "run_answer", "run_approve_plan", "run_trust", "run_untrust"]


def run_approve(args: argparse.Namespace) -> int:
    service = Service.default()
    if args.request is None:
        pending = run_sync(service.pending_approvals(args.run))
        if not pending:
            print("no pending approval requests")
        for request in pending:
            print(describe_request(request))
            print()
        return 0

    async def decide() -> ApprovalDecision:
        request = await service.approval_request(args.run, args.request)
        print(describe_request(request))  # what is decided, before deciding it
        return await service.decide(request, approve=not args.deny, comment=args.comment, via="cli")

    decision = run_sync(decide())  # AlreadyDecided (exit 3) when another decision stands
    print(f"{'denied' if args.deny else 'approved'} by {decision.by} at {decision.at}")
    return 0


def run_answer(args: argparse.Namespace) -> int:
    service = Service.default()
    values = parse_input_args(args.fields, limits=load_limits(), flag="answer RUN STEP")

    async def answer() -> tuple[ApprovalRequest, ApprovalDecision]:
        request = await service.form_request(args.run, args.step)
        print(describe_request(request))
        return request, await service.answer(request, values, comment=args.comment, via="cli")

    request, decision = run_sync(answer())  # AlreadyDecided (exit 3) when another answer stands
    print(
        f"answered step {request.facts.get('step', request.node)} by {decision.by} at {decision.at}: {json.dumps(decision.answer)}"
    )
    return 0


def run_approve_plan(args: argparse.Namespace) -> int:
    record, new, plan_id = run_sync(Service.default().approve_plan(args.target))
    print(f"approving graph digest {record.graph_digest}" + (f" (plan {plan_id})" if plan_id else ""))
    if new:
        print(f"approved by {record.by} at {record.at}")
    else:
        print(
            f"already approved by {record.by} at {record.at} (the original record stands; approvals are never revoked)"
        )
    return 0


def run_trust(args: argparse.Namespace) -> int:
    workspace, record = run_sync(Service.default().trust(args.path))
    print(f"trusted {workspace.root} (key {workspace.key[:12]}) by {record['by']} at {record['at']}")
    print("its .rho/settings.json and project hooks now apply to new plans and runs")
    return 0


def run_untrust(args: argparse.Namespace) -> int:
    workspace, removed = run_sync(Service.default().untrust(args.path))
    print(f"{'untrusted' if removed else 'was not trusted:'} {workspace.root}")
    return 0
