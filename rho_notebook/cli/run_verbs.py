"""The run verbs: run, resume, status, cancel, runs, result, events, logs, delete, prune.

Every verb is a call of :class:`rho_notebook.service.Service`, awaited with ``asyncio.run``; the
rules (consent to a digest, listing, refusing to delete a live run, reading logs) are the
service's. What stays here is the terminal: prompts, printing, exit codes. A prompt never runs
inside an event loop (Ctrl-C at a prompt must interrupt at once), so a verb that asks first reads
what it shows, asks, then acts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

from rho_notebook.cli._args import count, days, is_file, positive_int, seconds
from rho_notebook.errors import AlreadyDecided, ConfirmationRequired, NotFound, RhoError, RunRefused
from rho_notebook.model.events import TERMINAL_PROGRESS_KINDS, describe_event
from rho_notebook.model.graph import Graph
from rho_notebook.model.itemgraph import GRAPH_SUFFIXES, is_graph_file
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import (
    ApprovalRequest,
    Consent,
    Responder,
    ResumeRun,
    RunsQuery,
    Service,
    StartRun,
    Stream,
    describe_request,
    load_limits,
    parse_input_args,
)
from rho_notebook.service.wire import status_json
from rho_notebook.views.text import decision_lines, node_status_line, output_text

__all__ = ["register", "EXIT_REFUSED", "consent", "start_plan"]

EXIT_REFUSED = 3
EXIT_USAGE = 2

_EXECUTOR_OPTION: dict[str, Any] = {
    "default": None,
    "metavar": "local|dask[=ADDRESS]",
    "help": "where command, shell and python nodes run: local (default), or on a Dask cluster "
    "(dask: $RHO_NOTEBOOK_DASK_SCHEDULER, settings dask_scheduler, else a LocalCluster for the run; "
    "docs/distributed.md)",
}


def register(verbs: Any) -> None:
    run = verbs.add_parser("run", help="confirm a plan's digest and run it (plan ID or unique prefix)")
    run.add_argument("plan", help="plan ID or unique prefix")
    run.add_argument(
        "--yes", action="store_true", help="confirm the digest without asking (required without a terminal)"
    )
    run.add_argument("--output", choices=("text", "jsonl"), default="text")
    run.add_argument(
        "--mode",
        choices=("auto", "plan", "supervised"),
        default="auto",
        help="permission mode for command launches (default auto; recorded in the run)",
    )
    run.add_argument(
        "--approval-timeout",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="with no terminal to ask, how long a supervised launch waits for `rho-notebook approve` before failing closed (default 0)",
    )
    run.add_argument(
        "--no-reuse",
        action="store_true",
        help="launch every node, even a `reuse = True` node whose stored success has the same reuse key",
    )
    run.add_argument(
        "--flow", metavar="NAME", help="with FLOW.py: run the module's Workflow NAME as a flow run (docs/flows.md)"
    )
    run.add_argument("--executor", **_EXECUTOR_OPTION)
    run.set_defaults(handler=run_run)

    resume = verbs.add_parser("resume", help="resume a cancelled or interrupted run from its frozen graph")
    resume.add_argument("run", help="run ID or unique prefix")
    resume.add_argument("--yes", action="store_true")
    resume.add_argument(
        "--recover-uncertain",
        action="store_true",
        help="after inspection: stop leftover processes and rerun attempts without a journaled result",
    )
    resume.add_argument(
        "--decide",
        action="append",
        default=[],
        metavar="STEP=rerun|skip",
        help="script runs: decide a halted step (rerun: one new attempt; skip: accept its stored result); repeatable",
    )
    resume.add_argument("--output", choices=("text", "jsonl"), default="text")
    resume.add_argument("--approval-timeout", type=seconds, default=0.0, metavar="SECONDS")
    resume.add_argument(
        "--executor",
        default=None,
        metavar="local|dask[=ADDRESS]",
        help="where this resume runs command, shell and python nodes (default: where the run ran; docs/distributed.md)",
    )
    resume.set_defaults(handler=run_resume)

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

    delete = verbs.add_parser("delete", help="delete a finished run or a saved plan")
    delete.add_argument("id", help="run or plan ID (or unique prefix)")
    delete.add_argument("--yes", action="store_true")
    delete.set_defaults(handler=run_delete)

    prune = verbs.add_parser("prune", help="delete finished runs older than DAYS")
    prune.add_argument(
        "--older-than", type=days, required=True, metavar="DAYS", help="a finite number of days, 0 or more"
    )
    prune.add_argument("--yes", action="store_true")
    prune.add_argument(
        "--include-damaged",
        action="store_true",
        help="also delete damaged runs older than DAYS (their journal contradicts what was fsynced)",
    )
    prune.set_defaults(handler=run_prune)


# -- output ----------------------------------------------------------------------------------------


class _Printer:
    """Live progress; a failure of a node with ``allow_failure = True`` is shown as allowed (the
    journal records the state, the graph says the failure does not fail the run)."""

    def __init__(self, mode: str, *, allowed: frozenset[str] = frozenset()) -> None:
        self.mode = mode
        self.allowed = allowed
        self.start = time.monotonic()

    def __call__(self, record: dict[str, Any]) -> None:
        if record["kind"] == "output_chunk":
            return
        if self.mode == "jsonl":
            print(json.dumps(record, separators=(",", ":")), flush=True)
            return
        if record["kind"] not in TERMINAL_PROGRESS_KINDS:
            return
        elapsed = time.monotonic() - self.start
        node = record.get("node", "")
        detail = describe_event(record)
        if record["kind"] == "node_finished" and record.get("state") == "failure" and node in self.allowed:
            detail = "failure (allowed)" + detail.removeprefix("failure")
        print(f"[{elapsed:7.2f}s] {node:<24} {detail}", flush=True)


_OUTPUT_WIDTH = 100
"""Characters of a node's output value shown in the end-of-run summary (``result`` shows it all)."""


def _allowed_failures(graph: Graph) -> frozenset[str]:
    return frozenset(node.name for node in graph.nodes if node.allow_failure)


def _summary(service: Service, run_id: str, graph: Graph) -> None:
    """After ``run ... outcome ...``: each node's state and its validated output, one line each,
    in graph order (``rho-notebook result RUN`` has the attempts and artifacts)."""
    data = asyncio.run(service.result(run_id))
    allowed = _allowed_failures(graph)
    names = [node.name for node in graph.nodes if node.name in data["nodes"]]
    width = max((len(name) for name in names), default=0)
    for name in names:
        node = data["nodes"][name]
        state = node["state"] + (" (allowed)" if node["state"] == "failure" and name in allowed else "")
        line = f"  {name:<{width}}  {state:<17}"
        if "output" in node:
            value = json.dumps(node["output"], ensure_ascii=False)
            line += " " + (value if len(value) <= _OUTPUT_WIDTH else value[: _OUTPUT_WIDTH - 1] + "…")
        print(line.rstrip())


# -- consent ---------------------------------------------------------------------------------------


def consent(args: argparse.Namespace, *, digest: str, what: str) -> Consent:
    """``--yes``, or the answer to ``[y/N]`` on a terminal; without either, no consent (the service
    refuses: :func:`_refused` says why). Call it outside any event loop."""
    if args.yes or not sys.stdin.isatty():
        return Consent(yes=args.yes)
    answer = input(f"{what} with graph digest {digest}? [y/N] ")
    return Consent(yes=answer.strip().lower() in ("y", "yes"))


def _refused(args: argparse.Namespace, err: ConfirmationRequired, *, digest: str, what: str) -> int:
    """The service refused for want of consent: with no terminal to ask, say how to give it (a
    person who answered no at the prompt needs no explanation)."""
    if not args.yes and not sys.stdin.isatty():
        print(
            f"refusing to {what} without confirmation: no terminal to ask; pass --yes to confirm digest {digest}",
            file=sys.stderr,
        )
    return err.exit_code


# -- running ---------------------------------------------------------------------------------------


def _exit_for(state: RunState) -> int:
    return 0 if state.outcome == "success" else 1


def _terminal_responder(service: Service) -> Responder:
    """Ask on the controlling terminal (in a daemon thread, so a decision made elsewhere wins)."""
    asked: set[str] = set()

    def respond(request: ApprovalRequest) -> None:
        if request.request_id in asked:
            return
        asked.add(request.request_id)

        def prompt() -> None:
            print("\n" + describe_request(request), file=sys.stderr, flush=True)
            if request.kind == "form":
                _fill_form(service, request)
                return
            try:
                answer = input("approve? [y/N, or type a comment after y/n:] ").strip()
            except EOFError:
                return
            approve = answer[:1].lower() == "y"
            comment = answer[1:].strip(" :") or None
            try:  # this thread's own loop: the owner's loop is busy running the run
                asyncio.run(service.decide(request, approve=approve, comment=comment, via="terminal"))
            except RhoError as err:  # decided elsewhere first, or refused: say so, the run goes on
                print(f"rho-notebook: {err.message}", file=sys.stderr, flush=True)

        threading.Thread(target=prompt, daemon=True, name=f"approve-{request.request_id[:8]}").start()

    return respond


def _fill_form(service: Service, request: ApprovalRequest) -> None:
    """Ask for each field of a human step's form on the terminal until the answer fits it (an
    empty line leaves an optional field at its default); EOF leaves the step waiting."""
    while True:
        raw: list[str] = []
        for name, decl in (request.facts.get("form") or {}).items():
            try:
                typed = input(f"  {decl.get('label') or name} ({decl.get('type')}) = ").strip()
            except EOFError:
                return
            if typed:
                raw.append(f"{name}={typed}")
        try:
            values = parse_input_args(raw, limits=load_limits())
            asyncio.run(service.answer(request, values, via="terminal"))
            return
        except AlreadyDecided as err:  # answered elsewhere first: nothing to try again
            print(f"rho-notebook: {err.message}", file=sys.stderr, flush=True)
            return
        except RhoError as err:
            print(f"rho-notebook: {err.message}; try again", file=sys.stderr, flush=True)


def _execute(
    service: Service,
    args: argparse.Namespace,
    start: Callable[..., Coroutine[Any, Any, RunState]],
    *,
    digest: str,
    what: str,
    graph: Graph,
) -> int:
    """Start (or resume) a run of ``graph`` with ``start(on_event=..., responder=...,
    approval_timeout=...)``, print its progress until it ends, then (text) a result summary."""
    responder = _terminal_responder(service) if sys.stdin.isatty() else None
    printer = _Printer(args.output, allowed=_allowed_failures(graph))
    try:
        state = asyncio.run(start(on_event=printer, responder=responder, approval_timeout=args.approval_timeout))
    except ConfirmationRequired as err:
        return _refused(args, err, digest=digest, what=what)
    except RunRefused as err:  # NeedsRecovery too: both exit 3 (refused)
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    if args.output == "text":
        if state.lifecycle is Lifecycle.NEEDS_DECISION:
            steps = " ".join(f"--decide {h['step']}=rerun|skip" for h in state.halted)
            print(f"run {state.run_id}  needs a decision: rho-notebook resume {state.run_id[:13]} {steps}")
        else:
            print(f"run {state.run_id}  outcome {state.outcome}")
        _summary(service, state.run_id, graph)
    return _exit_for(state)


def start_plan(service: Service, plan: Plan, args: argparse.Namespace, *, what: str) -> int:
    """Ask for consent to ``plan``'s digest, then create and run it (``run PLAN`` and
    ``run NOTEBOOK.ipynb``). A person's ``approve-plan`` record of this exact digest is the
    confirmation: then it starts without ``--yes`` or a prompt, and says why."""
    approval = None if args.yes else asyncio.run(service.plan_approval(plan.graph_digest))
    if approval is not None:
        print(
            f"starting without --yes: graph digest {plan.graph_digest} was approved by {approval.by} "
            f"at {approval.at} (rho-notebook approve-plan)",
            file=sys.stdout if args.output == "text" else sys.stderr,
        )
        given = Consent(plan_approved=True)
    else:
        given = consent(args, digest=plan.graph_digest, what=what)
    request = StartRun(
        plan=plan.plan_id,
        consent=given,
        mode=args.mode,
        origin="cli",
        reuse=not args.no_reuse,
        executor=getattr(args, "executor", None),
    )

    async def start(**options: Any) -> RunState:
        run_id = await service.create_run_of(plan, request)
        return await service.execute(run_id, **options)

    return _execute(service, args, start, digest=plan.graph_digest, what=what, graph=plan.graph)


_RUN_SUFFIXES = (".ipynb", ".py", *GRAPH_SUFFIXES)
"""Files ``run`` takes (an existing file is dispatched by suffix; anything else is a plan ID prefix)."""


def _run_script(args: argparse.Namespace) -> int:
    """``run SCRIPT.py`` or ``run FILE.graph.yaml``: plan the file (stored once per graph), show
    its digest, then run it with consent to that digest, as ``run NOTEBOOK.ipynb`` does."""
    if getattr(args, "workflow", None):
        print(f"rho-notebook: --workflow applies to `run NOTEBOOK.ipynb`, not to {args.plan}", file=sys.stderr)
        return EXIT_USAGE
    service = Service.default()
    inputs = parse_input_args(getattr(args, "input", None) or [], limits=load_limits())
    flow = getattr(args, "flow", None)
    plan = asyncio.run(service.plan(service.request_for(Path(args.plan), inputs=inputs, flow=flow)))
    kind = "script" if flow is None else f"flow {flow} of"
    if is_graph_file(str(args.plan)):
        kind = "item graph"
    if args.output == "text":
        print(f"{kind} {args.plan}  plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    return start_plan(service, plan, args, what=f"run {kind} {args.plan} (plan {plan.plan_id[:13]})")


def run_run(args: argparse.Namespace) -> int:
    from rho_notebook.cli.notebook_verbs import notebook_run

    target = str(args.plan)
    if is_file(target) and not target.endswith(_RUN_SUFFIXES):
        print(
            f"rho-notebook: {target} is a file, and run takes a plan ID, a NOTEBOOK.ipynb or a SCRIPT.py; "
            f"plan a .star entry first (rho-notebook plan {target}) and run the plan ID it prints",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if target.endswith(".py"):  # `run SCRIPT.py`
        if not is_file(target):
            print(f"rho-notebook: {target}: no such script", file=sys.stderr)
            return EXIT_USAGE
        return _run_script(args)
    if is_graph_file(target):  # `run FILE.graph.yaml`
        if getattr(args, "flow", None):
            print("rho-notebook: --flow applies to `run FLOW.py`, not to an item graph", file=sys.stderr)
            return EXIT_USAGE
        if not is_file(target):
            print(f"rho-notebook: {target}: no such item graph", file=sys.stderr)
            return EXIT_USAGE
        return _run_script(args)
    if getattr(args, "flow", None):
        print("rho-notebook: --flow applies to `run FLOW.py`, a Python module defining the workflow", file=sys.stderr)
        return EXIT_USAGE
    handled = notebook_run(args)  # `run NOTEBOOK.ipynb`
    if handled is not None:
        return handled
    service = Service.default()
    plan = asyncio.run(service.load_plan(args.plan))
    if args.output == "text":
        print(f"plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    return start_plan(service, plan, args, what=f"run plan {plan.plan_id[:13]}")


def _decisions(given: list[str]) -> dict[str, Literal["rerun", "skip"]]:
    """``--decide STEP=rerun|skip`` arguments as a map (one decision per step)."""
    decisions: dict[str, Literal["rerun", "skip"]] = {}
    for item in given:
        step, sep, decision = item.partition("=")
        if not sep or not step or decision not in ("rerun", "skip"):
            msg = f"--decide {item!r}: write STEP=rerun or STEP=skip"
            raise ValueError(msg)
        if step in decisions:
            msg = f"--decide names step {step!r} twice; give one decision per step"
            raise ValueError(msg)
        decisions[step] = "rerun" if decision == "rerun" else "skip"
    return decisions


def run_resume(args: argparse.Namespace) -> int:
    service = Service.default()
    manifest = asyncio.run(service.manifest(args.run))
    run_id = manifest.run_id
    graph = asyncio.run(service.run_graph(run_id))
    what = f"resume run {run_id[:13]}"
    given = consent(args, digest=manifest.graph_digest, what=what)
    try:
        decisions = _decisions(args.decide)
    except ValueError as err:
        print(f"rho-notebook: {err}", file=sys.stderr)
        return 2
    request = ResumeRun(
        run=run_id,
        consent=given,
        recover_uncertain=args.recover_uncertain,
        decisions=decisions,
        executor=args.executor,
    )

    async def start(**options: Any) -> RunState:
        return await service.resume(request, **options)

    return _execute(service, args, start, digest=manifest.graph_digest, what=what, graph=graph)


# -- reading runs ----------------------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    state = asyncio.run(Service.default().status(args.run))
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
    result = asyncio.run(Service.default().cancel(args.run, wait_seconds=args.wait))
    print(json.dumps(result.to_json()))
    return 0


def run_runs(args: argparse.Namespace) -> int:
    query = RunsQuery(state=Lifecycle(args.state) if args.state else None, limit=args.limit)
    rows = asyncio.run(Service.default().run_rows(query))
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
    data = asyncio.run(Service.default().result(args.run))
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
        asyncio.run(follow())
        return 0
    # One read that also says whether the last line is torn (``events`` without --follow).
    read = asyncio.run(service.journal(args.run, after_seq=args.after_seq))
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

    asyncio.run(show())
    return 0


# -- housekeeping ----------------------------------------------------------------------------------


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
        target, question = asyncio.run(_delete_question(service, target))
        if question is not None and not _ask(question):
            return EXIT_REFUSED
    try:
        deleted = asyncio.run(service.delete(target))
    except RunRefused as err:  # the run is live
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    print(f"deleted {deleted['kind']} {deleted['id']}")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    service = Service.default()
    doomed = asyncio.run(service.prunable(older_than_days=args.older_than, include_damaged=args.include_damaged))
    if not doomed:
        print("nothing to prune")
        return 0
    which = "completed or damaged" if args.include_damaged else "completed"
    if not args.yes and not _ask(f"delete {len(doomed)} {which} runs older than {args.older_than} days?"):
        return EXIT_REFUSED
    try:
        deleted = asyncio.run(service.prune(doomed))
    except RunRefused as err:  # one became live since
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    for item in deleted:
        print(f"deleted run {item['id']}")
    return 0
