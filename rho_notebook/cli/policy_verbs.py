"""The decision verbs: approve, approve-plan, trust, untrust."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rho_notebook.errors import NotFound
from rho_notebook.policy.approvals import describe_request, who_am_i
from rho_notebook.policy.plan_approval import PlanApprovals
from rho_notebook.policy.trust import TrustStore
from rho_notebook.service import Service
from rho_notebook.source.workspace import find_workspace

__all__ = ["register"]


def register(verbs: Any) -> None:
    approve = verbs.add_parser("approve", help="decide a pending approval of a run (an approval node or a supervised launch)")
    approve.add_argument("run", help="run ID or unique prefix")
    approve.add_argument("request", nargs="?", help="request ID or unique prefix; omit to list pending requests")
    approve.add_argument("--deny", action="store_true", help="deny instead of approving")
    approve.add_argument("--comment", help="recorded with the decision")
    approve.set_defaults(handler=run_approve)

    plan = verbs.add_parser("approve-plan", help="approve a graph digest for runs when plan approval is enforced")
    plan.add_argument("target", help="plan ID / prefix, or a graph digest (sha256:...)")
    plan.set_defaults(handler=run_approve_plan)

    trust = verbs.add_parser("trust", help="trust a workspace: its project settings and hooks apply")
    trust.add_argument("path", nargs="?", type=Path, default=None, help="a folder in the workspace (default: current directory)")
    trust.set_defaults(handler=run_trust)

    untrust = verbs.add_parser("untrust", help="stop trusting a workspace")
    untrust.add_argument("path", nargs="?", type=Path, default=None)
    untrust.set_defaults(handler=run_untrust)


def run_approve(args: argparse.Namespace) -> int:
    service = Service.default()
    if args.request is None:
        pending = service.pending_approvals(args.run)
        if not pending:
            print("no pending approval requests")
        for request in pending:
            print(describe_request(request))
            print()
        return 0
    request = service.approval_request(args.run, args.request)
    print(describe_request(request))
    decision = service.decide(request, approve=not args.deny, comment=args.comment, via="cli")
    if decision.via != "cli" or decision.decision != ("deny" if args.deny else "approve") or decision.comment != args.comment:
        print(f"already decided: {decision.decision} by {decision.by} at {decision.at} via {decision.via}; your decision was not recorded", file=sys.stderr)
        return 3
    print(f"{'denied' if args.deny else 'approved'} by {decision.by} at {decision.at}")
    return 0


def run_approve_plan(args: argparse.Namespace) -> int:
    service = Service.default()
    target: str = args.target
    plan_id = None
    if target.startswith("sha256:"):
        digest = target
    else:
        try:
            plan = service.load_plan(target)
        except NotFound:
            raise NotFound(f"{target!r} is neither a plan ID prefix nor a graph digest (sha256:...)") from None
        digest, plan_id = plan.graph_digest, plan.plan_id
    print(f"approving graph digest {digest}" + (f" (plan {plan_id})" if plan_id else ""))
    record, new = PlanApprovals(service.layout).approve(digest, by=who_am_i(), plan_id=plan_id)
    if new:
        print(f"approved by {record.by} at {record.at}")
    else:
        print(f"already approved by {record.by} at {record.at} (the original record stands; approvals are never revoked)")
    return 0


def run_trust(args: argparse.Namespace) -> int:
    workspace = find_workspace(args.path)
    record = TrustStore(Service.default().layout).trust(workspace, by=who_am_i())
    print(f"trusted {workspace.root} (key {workspace.key[:12]}) by {record['by']} at {record['at']}")
    print("its .rho/settings.json and project hooks now apply to new plans and runs")
    return 0


def run_untrust(args: argparse.Namespace) -> int:
    workspace = find_workspace(args.path)
    removed = TrustStore(Service.default().layout).untrust(workspace)
    print(f"{'untrusted' if removed else 'was not trusted:'} {workspace.root}")
    return 0
