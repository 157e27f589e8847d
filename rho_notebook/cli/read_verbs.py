"""The verbs that read the store: status, cancel, runs, result, events, logs and plans.

Each is one call of :class:`rho_notebook.service.Service` through the CLI's sync bridge
(:func:`rho_notebook.service.sync.run_sync`); what stays here is the printing. ``status`` and
``runs`` read through :mod:`rho_notebook.service.glance` instead, synchronously: they start with
no event loop and no pydantic model (issue 31; ``Service.status`` and ``run_rows`` answer through
the same functions).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from rho_notebook.errors import RhoError
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import Service, glance
from rho_notebook.service.listing import RunsQuery
from rho_notebook.service.wire import status_json
from rho_notebook.views.run_notes import cancel_text, status_lines
from rho_notebook.views.text import (
    run_output_line,
    silent_node_line,
    usage_text,
)

__all__ = ["run_status", "run_cancel", "run_runs", "run_result", "run_events", "run_logs", "run_plans"]

if TYPE_CHECKING:
    from rho_notebook.service import Stream

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """:func:`rho_notebook.service.sync.run_sync`, imported when a verb first needs the event loop."""
    from rho_notebook.service.sync import run_sync as bridge

    return bridge(coro)


def run_status(args: argparse.Namespace) -> int:
    service = Service.default()
    layout = service.layout
    state = glance.status(layout, args.run)
    if args.output == "json":
        print(json.dumps(status_json(state, layout=layout), indent=2))
        return 0
    for line in status_lines(layout, state):
        print(line)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    result = run_sync(Service.default().cancel(args.run, wait_seconds=args.wait))
    if args.output == "json":
        print(json.dumps(result.to_json()))
        return 0
    print(cancel_text(result.run_id, result.cancellation_state, result.lifecycle, waited=args.wait))
    return 0


_ROW = "{:<36}  {:<20} {:<15} {:<13} {:<8} {}"
"""A line of ``runs``: run ID, workflow, lifecycle, outcome, owner pid, last update."""


def run_runs(args: argparse.Namespace) -> int:
    query = RunsQuery(state=Lifecycle(args.state) if args.state else None, limit=args.limit)
    rows = glance.run_rows(Service.default().layout, query)
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no runs")
        return 0
    print(_ROW.format("RUN", "WORKFLOW", "LIFECYCLE", "OUTCOME", "OWNER", "UPDATED"))
    for row in rows:
        owner = str(row["owner_pid"] or "?") if "owner_pid" in row else "-"
        line = _ROW.format(
            row["run_id"], row["workflow"], row["lifecycle"], row["outcome"] or "", owner, row["updated_at"] or ""
        )
        print(line.rstrip())
        if "next" in row:  # waits for a person: the command that moves it on
            print(f"{'':38}needs a person: {row['next']}")
        if "lineage" in row:  # a fork: where it came from, a fork of a fork back to the first run
            chain = " <- ".join(f"{link['run'][:13]} at {link['node']}" for link in row["lineage"])
            print(f"{'':38}forked from {chain}")
    return 0


def run_result(args: argparse.Namespace) -> int:
    data = run_sync(Service.default().result(args.run))
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    print(f"run {data['run_id']}  {data['lifecycle']}  outcome {data['outcome']}")
    if "usage" in data:
        print(f"usage {usage_text(data['usage'])}")
    for name, node in data["nodes"].items():
        spent = f"  [{usage_text(node['usage'])}]" if node.get("usage", {}).get("calls") else ""
        print(f"  {name:<24} {node['state']:<13} attempts {len(node['attempts'])}{spent}")
        if "output" in node:
            print(f"      output: {json.dumps(node['output'])}")
        for artifact, path in node.get("artifacts", {}).items():
            print(f"      {artifact:<7} {path}")
    emitted = run_output_line(data, limit=None)
    if emitted is not None:
        print(emitted)
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

    async def show() -> bool:
        shown = False
        async for stream, text in service.logs(args.run, args.node, streams=streams, follow=args.follow):
            target = sys.stdout if stream == "stdout" else sys.stderr
            target.write(text)
            target.flush()
            shown = True
        return shown

    if not run_sync(show()):  # say why there is nothing, on stderr: stdout stays the node's output
        _say_nothing(service, args)
    return 0


def _say_nothing(service: Service, args: argparse.Namespace) -> None:
    """One line on stderr for ``logs`` that printed nothing: whether the node ran, and its state
    (nothing when the run cannot be read now: logs already answered)."""
    try:
        record = glance.status(service.layout, args.run).nodes[args.node]
    except (RhoError, OSError, KeyError):
        return
    print(f"rho-notebook: {silent_node_line(args.node, record, stream=args.stream)}", file=sys.stderr)


def run_plans(args: argparse.Namespace) -> int:
    from rho_notebook.service.wire import plan_json  # a plan's model: only this verb

    manifests = run_sync(Service.default().plans())
    if args.output == "json":
        print(json.dumps([plan_json(m) for m in manifests], indent=2))
        return 0
    if not manifests:
        print("no saved plans")
        return 0
    print(f"{'PLAN':<36}  {'WORKFLOW':<24} {'DIGEST':<19}  CREATED")
    for m in manifests:
        print(f"{m.plan_id}  {m.workflow:<24} {m.graph_digest[:19]}  {m.created_at}")
    return 0
