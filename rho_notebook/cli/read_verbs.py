"""The verbs that read a run: status, cancel, runs, result, events, logs.

Each is one call of :class:`rho_notebook.service.Service` through the CLI's sync bridge
(:func:`rho_notebook.service.sync.run_sync`); what stays here is the printing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rho_notebook.cli._args import count, positive_int
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import RunsQuery, Service, Stream
from rho_notebook.service.flags import seconds
from rho_notebook.service.sync import run_sync
from rho_notebook.service.wire import status_json
from rho_notebook.views.text import decision_lines, node_status_line, output_text

__all__ = ["register"]


def register(verbs: Any) -> None:
    status = verbs.add_parser("status", help="one durable snapshot of a run (never takes ownership)")
    status.add_argument("run")
    status.add_argument("--output", choices=("text", "json"), default="text")
    status.set_defaults(handler=run_status)

    cancel = verbs.add_parser("cancel", help="durably request cancellation and wait for the owner's acknowledgement")
    cancel.add_argument("run")
    cancel.add_argument(
        "--wait",
        type=seconds,
        default=2.0,
        metavar="SECONDS",
        help="how long to wait for the acknowledgement (default 2)",
    )
    cancel.set_defaults(handler=run_cancel)

    runs = verbs.add_parser("runs", help="list runs, newest last")
    runs.add_argument("--state", choices=[lc.value for lc in Lifecycle], help="only runs in this lifecycle")
    runs.add_argument("--limit", type=positive_int, default=50, help="the newest N runs (default 50)")
    runs.add_argument("--output", choices=("text", "json"), default="text")
    runs.set_defaults(handler=run_runs)

    result = verbs.add_parser("result", help="per node: state, attempts, exit, validated output, artifact paths")
    result.add_argument("run")
    result.add_argument("--output", choices=("text", "json"), default="text")
    result.set_defaults(handler=run_result)

    events = verbs.add_parser("events", help="the run's journal, one JSON event per line")
    events.add_argument("run")
    events.add_argument("--follow", action="store_true", help="keep printing new events until the run completes")
    events.add_argument("--after-seq", type=count, default=0, metavar="N")
    events.set_defaults(handler=run_events)

    logs = verbs.add_parser("logs", help="a node's stdout and stderr (latest attempt)")
    logs.add_argument("run")
    logs.add_argument("node")
    logs.add_argument("--stream", choices=("stdout", "stderr", "both"), default="both")
    logs.add_argument("--follow", action="store_true", help="keep printing while the node runs")
    logs.set_defaults(handler=run_logs)


def run_status(args: argparse.Namespace) -> int:
    state = run_sync(Service.default().status(args.run))
    data = status_json(state)
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    print(f"run        {state.run_id}")
    print(f"workflow   {state.workflow}   plan {state.plan_id}")
    print(f"digest     {state.graph_digest}")
    print(f"lifecycle  {state.lifecycle.value}" + (f"   outcome {state.outcome}" if state.outcome else ""))
    if state.damage is not None:
        print(f"damage     {state.damage}")
        print("           (nodes below are the journal's readable part; resume is refused: docs/running.md)")
    for name in data["nodes"]:
        print(node_status_line(name, state.nodes[name]))
    if "output" in data:
        print(f"output     {output_text(data['output'])}")
    for line in decision_lines(state):
        print(line)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    result = run_sync(Service.default().cancel(args.run, wait_seconds=args.wait))
    print(json.dumps(result.to_json()))
    return 0


def run_runs(args: argparse.Namespace) -> int:
    query = RunsQuery(state=Lifecycle(args.state) if args.state else None, limit=args.limit)
    rows = run_sync(Service.default().run_rows(query))
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no runs")
    for row in rows:
        print(
            f"{row['run_id']}  {row['workflow']:<20} {row['lifecycle']:<15} {row['outcome'] or '':<13} {row['updated_at']}"
        )
    return 0


def run_result(args: argparse.Namespace) -> int:
    data = run_sync(Service.default().result(args.run))
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    print(f"run {data['run_id']}  {data['lifecycle']}  outcome {data['outcome']}")
    for name, node in data["nodes"].items():
        print(f"  {name:<24} {node['state']:<13} attempts {len(node['attempts'])}")
        if "output" in node:
            print(f"      output: {json.dumps(node['output'])}")
        for artifact, path in node.get("artifacts", {}).items():
            print(f"      {artifact:<7} {path}")
    if "output" in data:
        print(f"output of the script: {output_text(data['output'], limit=None)}")
    for halted in data.get("halted", []):
        print(f"needs a decision: {halted['step']}: {halted['why']}")
    return 0


def run_events(args: argparse.Namespace) -> int:
    service = Service.default()

    async def follow() -> None:
        async for record in service.events(args.run, after_seq=args.after_seq, follow=True):
            print(json.dumps(record, separators=(",", ":")), flush=True)

    if args.follow:
        run_sync(follow())
        return 0
    # One read that also says whether the last line is torn (``events`` without --follow).
    read = run_sync(service.journal(args.run, after_seq=args.after_seq))
    for record in read.events:
        print(json.dumps(record, separators=(",", ":")))
    if read.torn:
        print(
            "rho-notebook: the journal's last line is torn (an owner was interrupted mid-write); it was skipped",
            file=sys.stderr,
        )
    if read.damage is not None:
        print(
            f"rho-notebook: the journal is damaged; the events above are its readable part: {read.damage}",
            file=sys.stderr,
        )
        return 1
    return 0


def run_logs(args: argparse.Namespace) -> int:
    service = Service.default()
    streams: tuple[Stream, ...] = ("stdout", "stderr") if args.stream == "both" else (args.stream,)

    async def show() -> None:
        async for stream, text in service.logs(args.run, args.node, streams=streams, follow=args.follow):
            target = sys.stdout if stream == "stdout" else sys.stderr
            target.write(text)
            target.flush()

    run_sync(show())
    return 0
