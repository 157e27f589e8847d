"""The verbs that delete: ``delete`` (a finished run or a saved plan) and ``prune`` (finished runs
older than some days). The service refuses to delete a live run; what stays here is asking first:
a prompt never runs inside an event loop, so the question is read, asked, then acted on.
"""

from __future__ import annotations

import argparse
import sys

from rho_notebook.errors import NotFound, RunRefused
from rho_notebook.service import Service
from rho_notebook.service.sync import run_sync

__all__ = ["EXIT_REFUSED", "run_delete", "run_prune"]

EXIT_REFUSED = 3


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        print(f"refusing: {question} needs --yes without a terminal", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


async def _delete_question(service: Service, target: str) -> tuple[str, str | None]:
    """What ``delete TARGET`` would delete: (its full ID, the question to ask; None for a live
    run, which the service refuses without asking)."""
    try:
        run_id = await service.resolve_run(target)
    except NotFound:
        plan = await service.load_plan(target)
        return plan.plan_id, f"delete plan {plan.plan_id}?"
    if service.is_owned(run_id):
        return run_id, None
    return run_id, f"delete run {run_id} and its artifacts?"


def run_delete(args: argparse.Namespace) -> int:
    service = Service.default()
    target: str = args.id
    if not args.yes:
        target, question = run_sync(_delete_question(service, target))
        if question is not None and not _ask(question):
            return EXIT_REFUSED
    try:
        deleted = run_sync(service.delete(target))
    except RunRefused as err:  # the run is live
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    print(f"deleted {deleted['kind']} {deleted['id']}")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    service = Service.default()
    doomed = run_sync(service.prunable(older_than_days=args.older_than, include_damaged=args.include_damaged))
    if not doomed:
        print("nothing to prune")
        return 0
    which = "completed or damaged" if args.include_damaged else "completed"
    if not args.yes and not _ask(f"delete {len(doomed)} {which} runs older than {args.older_than} days?"):
        return EXIT_REFUSED
    try:
        deleted = run_sync(service.prune(doomed))
    except RunRefused as err:  # one became live since
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    for item in deleted:
        print(f"deleted run {item['id']}")
    return 0
