"""The run verbs: ``run`` (a plan, a notebook, a script, a flow or an item graph) and ``resume``.

Every verb is a call of :class:`rho_notebook.service.Service`, awaited through the CLI's one sync
bridge (:func:`rho_notebook.service.sync.run_sync`); the rules (consent to a digest, the launch
gate, recovery) are the service's. What stays here is the terminal: prompts, progress, exit codes.
A prompt never runs inside an event loop (Ctrl-C at a prompt must interrupt at once), so a verb
that asks first reads what it shows, asks, then acts. The flags are the ones the magics take
(:mod:`rho_notebook.service.flags`). Reading and deleting runs: :mod:`.read_verbs`,
:mod:`.delete_verbs`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from rho_notebook.cli._args import is_file
from rho_notebook.cli._terminal import Printer, allowed_failures, print_summary, terminal_responder
from rho_notebook.errors import ArgumentError, ConfirmationRequired, RunRefused
from rho_notebook.model.graph import Graph
from rho_notebook.model.itemgraph import GRAPH_SUFFIXES, is_graph_file
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import Consent, ResumeRun, Service, StartRun, load_limits, parse_input_args
from rho_notebook.service.flags import RESUME_FLAGS, RUN_FLAGS, add_flags, parse_decisions
from rho_notebook.service.sync import run_sync

__all__ = ["register", "EXIT_REFUSED", "consent", "start_plan"]

EXIT_REFUSED = 3
EXIT_USAGE = 2


def register(verbs: Any) -> None:
    run = verbs.add_parser("run", help="confirm a plan's digest and run it (plan ID or unique prefix)")
    run.add_argument(
        "plan",
        help="plan ID or unique prefix, a NOTEBOOK.ipynb (exported, planned and run) or a SCRIPT.py (planned and run)",
    )
    add_flags(run, RUN_FLAGS, front="cli")
    run.set_defaults(handler=run_run)

    resume = verbs.add_parser("resume", help="resume a cancelled or interrupted run from its frozen graph")
    resume.add_argument("run", help="run ID or unique prefix")
    add_flags(resume, RESUME_FLAGS, front="cli")
    resume.set_defaults(handler=run_resume)


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
    responder = terminal_responder(service) if sys.stdin.isatty() else None
    printer = Printer(args.output, allowed=allowed_failures(graph))
    try:
        state = run_sync(start(on_event=printer, responder=responder, approval_timeout=args.approval_timeout))
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
        print_summary(service, state.run_id, graph)
    return _exit_for(state)


def start_plan(service: Service, plan: Plan, args: argparse.Namespace, *, what: str) -> int:
    """Ask for consent to ``plan``'s digest, then create and run it (``run PLAN`` and
    ``run NOTEBOOK.ipynb``). A person's ``approve-plan`` record of this exact digest is the
    confirmation: then it starts without ``--yes`` or a prompt, and says why."""
    approval = None if args.yes else run_sync(service.plan_approval(plan.graph_digest))
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
    plan = run_sync(service.plan(service.request_for(Path(args.plan), inputs=inputs, flow=flow)))
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
    plan = run_sync(service.load_plan(args.plan))
    if args.output == "text":
        print(f"plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    return start_plan(service, plan, args, what=f"run plan {plan.plan_id[:13]}")


def run_resume(args: argparse.Namespace) -> int:
    service = Service.default()
    manifest = run_sync(service.manifest(args.run))
    run_id = manifest.run_id
    graph = run_sync(service.run_graph(run_id))
    what = f"resume run {run_id[:13]}"
    given = consent(args, digest=manifest.graph_digest, what=what)
    try:
        decisions = parse_decisions(args.decide)
    except ArgumentError as err:
        print(f"rho-notebook: {err}", file=sys.stderr)
        return EXIT_USAGE
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
