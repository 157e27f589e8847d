"""The decision verbs: approve, approve-plan, trust, untrust."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rho_notebook.service import (
    ApprovalDecision,
    ApprovalRequest,
    Service,
    describe_request,
    load_limits,
    parse_input_args,
)
from rho_notebook.service.sync import run_sync

__all__ = ["register"]


def register(verbs: Any) -> None:
    approve = verbs.add_parser(
        "approve", help="decide a pending approval of a run (an approval node or a supervised launch)"
    )
    approve.add_argument("run", help="run ID or unique prefix")
    approve.add_argument("request", nargs="?", help="request ID or unique prefix; omit to list pending requests")
    approve.add_argument("--deny", action="store_true", help="deny instead of approving")
    approve.add_argument("--comment", help="recorded with the decision")
    approve.set_defaults(handler=run_approve)

    answer = verbs.add_parser(
        "answer", help="answer a human step of an item-graph run that waits for a person (docs/graphs.md)"
    )
    answer.add_argument("run", help="run ID or unique prefix")
    answer.add_argument("step", help="the human step's id (or one loop round, STEP@N)")
    answer.add_argument(
        "fields", nargs="*", metavar="FIELD=VALUE", help="one per form field; VALUE is parsed as JSON like --input"
    )
    answer.add_argument("--comment", help="recorded with the answer")
    answer.set_defaults(handler=run_answer)

    plan = verbs.add_parser("approve-plan", help="approve a graph digest for runs when plan approval is enforced")
    plan.add_argument("target", help="plan ID / prefix, or a graph digest (sha256:...)")
    plan.set_defaults(handler=run_approve_plan)

    trust = verbs.add_parser("trust", help="trust a workspace: its project settings and hooks apply")
    trust.add_argument(
        "path", nargs="?", type=Path, default=None, help="a folder in the workspace (default: current directory)"
    )
    trust.set_defaults(handler=run_trust)

    untrust = verbs.add_parser("untrust", help="stop trusting a workspace")
    untrust.add_argument("path", nargs="?", type=Path, default=None)
    untrust.set_defaults(handler=run_untrust)


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
    values = parse_input_args(args.fields, limits=load_limits())

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
