"""The run verbs: run, resume, status, cancel, runs, result, events, logs, delete, prune."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rho_notebook.errors import NotFound, RhoError
from rho_notebook.model.state import Lifecycle
from rho_notebook.run.events import describe_event
from rho_notebook.run.owner import NeedsRecovery, RunRefused
from rho_notebook.run.state import RunState
from rho_notebook.service import Service
from rho_notebook.store.journal import follow_journal, read_journal
from rho_notebook.store.runs import OwnerLock
from rho_notebook.views import result_json, status_json

__all__ = ["register", "EXIT_REFUSED"]

EXIT_REFUSED = 3
_LIVE = (Lifecycle.RUNNING, Lifecycle.CANCELLING, Lifecycle.WAITING)


def register(verbs: Any) -> None:
    run = verbs.add_parser("run", help="confirm a plan's digest and run it (plan ID or unique prefix)")
    run.add_argument("plan", help="plan ID or unique prefix")
    run.add_argument("--yes", action="store_true", help="confirm the digest without asking (required without a terminal)")
    run.add_argument("--output", choices=("text", "jsonl"), default="text")
    run.add_argument("--mode", choices=("auto", "plan", "supervised"), default="auto", help="permission mode for command launches (default auto; recorded in the run)")
    run.add_argument("--approval-timeout", type=float, default=0.0, metavar="SECONDS", help="with no terminal to ask, how long a supervised launch waits for `rho-notebook approve` before failing closed (default 0)")
    run.set_defaults(handler=run_run)

    resume = verbs.add_parser("resume", help="resume a cancelled or interrupted run from its frozen graph")
    resume.add_argument("run", help="run ID or unique prefix")
    resume.add_argument("--yes", action="store_true")
    resume.add_argument("--recover-uncertain", action="store_true", help="after inspection: stop leftover processes and rerun attempts without a journaled result")
    resume.add_argument("--output", choices=("text", "jsonl"), default="text")
    resume.add_argument("--approval-timeout", type=float, default=0.0, metavar="SECONDS")
    resume.set_defaults(handler=run_resume)

    status = verbs.add_parser("status", help="one durable snapshot of a run (never takes ownership)")
    status.add_argument("run")
    status.add_argument("--output", choices=("text", "json"), default="text")
    status.set_defaults(handler=run_status)

    cancel = verbs.add_parser("cancel", help="durably request cancellation and wait for the owner's acknowledgement")
    cancel.add_argument("run")
    cancel.add_argument("--wait", type=float, default=2.0, metavar="SECONDS", help="how long to wait for the acknowledgement (default 2)")
    cancel.set_defaults(handler=run_cancel)

    runs = verbs.add_parser("runs", help="list runs, newest last")
    runs.add_argument("--state", choices=[lc.value for lc in Lifecycle], help="only runs in this lifecycle")
    runs.add_argument("--limit", type=int, default=50)
    runs.add_argument("--output", choices=("text", "json"), default="text")
    runs.set_defaults(handler=run_runs)

    result = verbs.add_parser("result", help="per node: state, attempts, exit, validated output, artifact paths")
    result.add_argument("run")
    result.add_argument("--output", choices=("text", "json"), default="text")
    result.set_defaults(handler=run_result)

    events = verbs.add_parser("events", help="the run's journal, one JSON event per line")
    events.add_argument("run")
    events.add_argument("--follow", action="store_true", help="keep printing new events until the run completes")
    events.add_argument("--after-seq", type=int, default=0, metavar="N")
    events.set_defaults(handler=run_events)

    logs = verbs.add_parser("logs", help="a node's stdout and stderr (latest attempt)")
    logs.add_argument("run")
    logs.add_argument("node")
    logs.add_argument("--stream", choices=("stdout", "stderr", "both"), default="both")
    logs.add_argument("--follow", action="store_true", help="keep printing while the node runs")
    logs.set_defaults(handler=run_logs)

    delete = verbs.add_parser("delete", help="delete a finished run or a saved plan")
    delete.add_argument("id", help="run or plan ID (or unique prefix)")
    delete.add_argument("--yes", action="store_true")
    delete.set_defaults(handler=run_delete)

    prune = verbs.add_parser("prune", help="delete finished runs older than DAYS")
    prune.add_argument("--older-than", type=float, required=True, metavar="DAYS")
    prune.add_argument("--yes", action="store_true")
    prune.set_defaults(handler=run_prune)


# -- output ----------------------------------------------------------------------------------------


_TEXT_KINDS = {"node_launched", "node_finished", "node_skipped", "node_blocked", "run_completed", "cancel_requested", "cancel_acknowledged", "needs_recovery", "run_started", "approval_requested", "approval_decided", "hook_ran", "hook_ignored"}


class _Printer:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.start = time.monotonic()

    def __call__(self, record: dict[str, Any]) -> None:
        if record["kind"] == "output_chunk":
            return
        if self.mode == "jsonl":
            print(json.dumps(record, separators=(",", ":")), flush=True)
            return
        if record["kind"] not in _TEXT_KINDS:
            return
        elapsed = time.monotonic() - self.start
        node = record.get("node", "")
        detail = describe_event(record)
        print(f"[{elapsed:7.2f}s] {node:<24} {detail}", flush=True)


def _confirm(args: argparse.Namespace, *, digest: str, what: str) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print(f"refusing to {what} without confirmation: no terminal to ask; pass --yes to confirm digest {digest}", file=sys.stderr)
        return False
    answer = input(f"{what} with graph digest {digest}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _exit_for(state: RunState) -> int:
    return 0 if state.outcome == "success" else 1


def _terminal_responder(service: Service) -> Any:
    """Ask on the controlling terminal (in a daemon thread, so a decision made elsewhere wins)."""
    import threading

    from rho_notebook.policy.approvals import describe_request

    asked: set[str] = set()

    def respond(request: Any) -> None:
        if request.request_id in asked:
            return
        asked.add(request.request_id)

        def prompt() -> None:
            print("\n" + describe_request(request), file=sys.stderr, flush=True)
            try:
                answer = input("approve? [y/N, or type a comment after y/n:] ").strip()
            except EOFError:
                return
            approve = answer[:1].lower() == "y"
            comment = answer[1:].strip(" :") or None
            service.decide(request, approve=approve, comment=comment, via="terminal")

        threading.Thread(target=prompt, daemon=True, name=f"approve-{request.request_id[:8]}").start()

    return respond


def _execute(service: Service, run_id: str, args: argparse.Namespace, *, resume: bool) -> int:
    printer = _Printer(args.output)
    responder = _terminal_responder(service) if sys.stdin.isatty() else None
    try:
        state = asyncio.run(
            service.execute(
                run_id,
                resume=resume,
                recover_uncertain=getattr(args, "recover_uncertain", False),
                on_event=printer,
                responder=responder,
                approval_timeout=getattr(args, "approval_timeout", 0.0),
            )
        )
    except NeedsRecovery as err:
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return EXIT_REFUSED
    except RunRefused as err:
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return EXIT_REFUSED
    if args.output == "text":
        print(f"run {run_id}  outcome {state.outcome}")
    return _exit_for(state)


def run_run(args: argparse.Namespace) -> int:
    from rho_notebook.cli.notebook_verbs import notebook_run

    handled = notebook_run(args)  # `run NOTEBOOK.ipynb`
    if handled is not None:
        return handled
    service = Service.default()
    plan = service.load_plan(args.plan)
    if args.output == "text":
        print(f"plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    if not _confirm(args, digest=plan.graph_digest, what=f"run plan {plan.plan_id[:13]}"):
        return EXIT_REFUSED
    run_id = service.create_run(plan, mode=args.mode)
    return _execute(service, run_id, args, resume=False)


def run_resume(args: argparse.Namespace) -> int:
    service = Service.default()
    run_id = service.resolve_run(args.run)
    manifest = service.runs.manifest(run_id)
    if not _confirm(args, digest=manifest.graph_digest, what=f"resume run {run_id[:13]}"):
        return EXIT_REFUSED
    return _execute(service, run_id, args, resume=True)


def run_status(args: argparse.Namespace) -> int:
    state = Service.default().status(args.run)
    data = status_json(state)
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    print(f"run        {state.run_id}")
    print(f"workflow   {state.workflow}   plan {state.plan_id}")
    print(f"digest     {state.graph_digest}")
    print(f"lifecycle  {state.lifecycle.value}" + (f"   outcome {state.outcome}" if state.outcome else ""))
    for name, node in data["nodes"].items():
        extra = f"  exit {node['exit_code']}" if node["exit_code"] is not None else ""
        note = "  UNCERTAIN" if node["uncertain"] else ""
        reason = f"  ({node['reason']})" if node["reason"] else ""
        print(f"  {name:<24} {node['state']:<13} attempt {node['attempt']}{extra}{note}{reason}")
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    result = Service.default().cancel(args.run, wait_seconds=args.wait)
    print(json.dumps(result.to_json()))
    return 0


def run_runs(args: argparse.Namespace) -> int:
    states = Service.default().list_runs()
    if args.state:
        states = [s for s in states if s.lifecycle.value == args.state]
    states = states[-args.limit :] if args.limit > 0 else states
    if args.output == "json":
        print(json.dumps([{"run_id": s.run_id, "plan_id": s.plan_id, "workflow": s.workflow, "lifecycle": s.lifecycle.value, "outcome": s.outcome, "updated_at": s.updated_at} for s in states], indent=2))
        return 0
    if not states:
        print("no runs")
    for s in states:
        print(f"{s.run_id}  {s.workflow:<20} {s.lifecycle.value:<15} {s.outcome or '':<13} {s.updated_at}")
    return 0


def run_result(args: argparse.Namespace) -> int:
    service = Service.default()
    state = service.status(args.run)
    data = result_json(service.runs.folder(state.run_id), state)
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    print(f"run {state.run_id}  {state.lifecycle.value}  outcome {state.outcome}")
    for name, node in data["nodes"].items():
        print(f"  {name:<24} {node['state']:<13} attempts {len(node['attempts'])}")
        if "output" in node:
            print(f"      output: {json.dumps(node['output'])}")
        for artifact, path in node.get("artifacts", {}).items():
            print(f"      {artifact:<7} {path}")
    return 0


def run_events(args: argparse.Namespace) -> int:
    service = Service.default()
    run_id = service.resolve_run(args.run)
    folder = service.runs.folder(run_id)
    if not args.follow:
        read = read_journal(folder.events, after_seq=args.after_seq)
        for record in read.events:
            print(json.dumps(record, separators=(",", ":")))
        if read.torn:
            print("rho-notebook: the journal's last line is torn (an owner was interrupted mid-write); it was skipped", file=sys.stderr)
        return 0

    def finished() -> bool:
        return not OwnerLock.is_held(folder.lock) and service.status(run_id).lifecycle not in _LIVE

    async def follow() -> None:
        async for record in follow_journal(folder.events, after_seq=args.after_seq, stop=finished):
            print(json.dumps(record, separators=(",", ":")), flush=True)

    asyncio.run(follow())
    return 0


def run_logs(args: argparse.Namespace) -> int:
    service = Service.default()
    run_id = service.resolve_run(args.run)
    state = service.status(run_id)
    if args.node not in state.nodes:
        raise NotFound(f"run {run_id} has no node {args.node!r}; its nodes: {', '.join(sorted(state.nodes))}")
    folder = service.runs.folder(run_id)
    streams = ("stdout", "stderr") if args.stream == "both" else (args.stream,)
    offsets = {s: 0 for s in streams}
    while True:
        record = service.status(run_id).nodes[args.node]
        attempt_dir = folder.attempt_dir(args.node, max(record.attempt, 1))
        for stream in streams:
            path = attempt_dir / stream
            try:
                with open(path, "rb") as handle:
                    handle.seek(offsets[stream])
                    data = handle.read()
            except FileNotFoundError:
                continue
            offsets[stream] += len(data)
            target = sys.stdout if stream == "stdout" else sys.stderr
            target.write(data.decode("utf-8", "replace"))
            target.flush()
        if not args.follow or record.state.value not in ("running", "ready", "pending"):
            return 0
        if service.status(run_id).lifecycle not in _LIVE:
            return 0
        time.sleep(0.1)


def run_delete(args: argparse.Namespace) -> int:
    service = Service.default()
    try:
        run_id = service.resolve_run(args.id)
    except NotFound:
        plan_id = service.plans.resolve(args.id)
        if not args.yes and not _ask(f"delete plan {plan_id}?"):
            return EXIT_REFUSED
        service.plans.delete(plan_id)
        print(f"deleted plan {plan_id}")
        return 0
    folder = service.runs.folder(run_id)
    if OwnerLock.is_held(folder.lock):
        print(f"rho-notebook: run {run_id} is live (an owner holds it); cancel it first", file=sys.stderr)
        return EXIT_REFUSED
    if not args.yes and not _ask(f"delete run {run_id} and its artifacts?"):
        return EXIT_REFUSED
    service.runs.delete(run_id)
    print(f"deleted run {run_id}")
    return 0


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        print(f"refusing: {question} needs --yes without a terminal", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def run_prune(args: argparse.Namespace) -> int:
    service = Service.default()
    cutoff = datetime.now(timezone.utc) - timedelta(days=args.older_than)
    doomed = []
    for state in service.list_runs():
        if state.lifecycle is not Lifecycle.COMPLETED or not state.updated_at:
            continue
        if datetime.fromisoformat(state.updated_at) < cutoff:
            doomed.append(state.run_id)
    if not doomed:
        print("nothing to prune")
        return 0
    if not args.yes and not _ask(f"delete {len(doomed)} completed runs older than {args.older_than} days?"):
        return EXIT_REFUSED
    for run_id in doomed:
        service.runs.delete(run_id)
        print(f"deleted run {run_id}")
    return 0
