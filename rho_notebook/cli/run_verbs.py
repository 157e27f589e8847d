"""The run verbs: ``run`` (a plan, a workflow entry, a notebook, a script, a flow or an item graph)
and ``resume``.

Every verb is a call of :class:`rho_notebook.service.Service`, awaited through the CLI's one sync
bridge (:func:`rho_notebook.service.sync.run_sync`); the rules (consent to a digest, the launch
gate, recovery) are the service's. What stays here is the terminal: prompts, exit codes. A prompt
never runs inside an event loop (Ctrl-C at a prompt must interrupt at once), so a verb that asks
first reads what it shows, asks, then acts. Once the run is created (or its resume is consented
to), its owner runs in a process of its own and the CLI follows it (:mod:`.follow_verbs`: what
Ctrl-C, a closed pipe, ``--detach`` and ``--wait`` do). The flags are the ones the magics take
(:mod:`rho_notebook.service.flags`). Reading and deleting runs: :mod:`.read_verbs`,
:mod:`.delete_verbs`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rho_notebook.cli._args import EXIT_USAGE, is_file
from rho_notebook.cli.follow_verbs import start_and_follow
from rho_notebook.errors import ArgumentError, ConfirmationRequired, InvalidWorkflow, RunRefused
from rho_notebook.model.budget import Limits
from rho_notebook.model.graph import Graph
from rho_notebook.model.itemgraph import GRAPH_SUFFIXES, is_graph_file
from rho_notebook.model.plan import Plan
from rho_notebook.service import (
    Consent,
    OwnerOptions,
    ResumeRun,
    Service,
    StartRun,
    load_limits,
    parse_input_args,
)
from rho_notebook.service.flags import parse_budgets, parse_decisions
from rho_notebook.service.sync import run_sync

__all__ = ["EXIT_REFUSED", "consent", "start_plan", "run_run", "run_resume"]

EXIT_REFUSED = 3


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


def _start(
    service: Service,
    args: argparse.Namespace,
    run_id: str,
    *,
    graph: Graph,
    options: OwnerOptions,
) -> int:
    """Start the run's owner and follow it (:func:`~rho_notebook.cli.follow_verbs.start_and_follow`);
    a refusal (owned elsewhere, needs recovery, already completed) exits 3 with its reason."""
    try:
        return start_and_follow(service, args, run_id, graph=graph, options=options)
    except RunRefused as err:  # NeedsRecovery too: both exit 3 (refused)
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code


def _exclusive(args: argparse.Namespace) -> int | None:
    """``--detach`` and ``--wait`` exclude each other: a usage error (exit 2), else None."""
    if getattr(args, "detach", False) and getattr(args, "wait", False):
        print("rho-notebook: --detach returns at once and --wait blocks to the end: give one of them", file=sys.stderr)
        return EXIT_USAGE
    return None


def start_plan(service: Service, plan: Plan, args: argparse.Namespace, *, what: str) -> int:
    """Ask for consent to ``plan``'s digest, then create and run it (``run PLAN`` and
    ``run NOTEBOOK.ipynb``). A person's ``approve-plan`` record of this exact digest is the
    confirmation: then it starts without ``--yes`` or a prompt, and says why. Budgets
    (``--max-tokens``...) are checked first and journaled before the owner starts."""
    from rho_notebook.service.starting import check_priced, record_budgets

    budgets = _budgets(args)
    if isinstance(budgets, int):
        return budgets
    try:
        workspace = Path(plan.manifest.workspace_root)
        run_sync(check_priced(service.layout, plan.graph, budgets, workspace=workspace))
    except RunRefused as err:
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
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
        run_id=getattr(args, "run_id", None),
    )
    try:
        run_id = run_sync(service.create_run_of(plan, request))
    except ConfirmationRequired as err:
        return _refused(args, err, digest=plan.graph_digest, what=what)
    except RunRefused as err:  # a --run-id that is taken
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    if budgets:
        run_sync(record_budgets(service.layout, run_id, budgets, source="run"))
    options = OwnerOptions(approval_timeout=args.approval_timeout)
    return _start(service, args, run_id, graph=plan.graph, options=options)


def _budgets(args: argparse.Namespace) -> dict[str, Limits] | int:
    """The budgets ``--max-tokens/--max-cost/--max-wall`` (and ``resume --raise-budget``) set, or
    the usage error's exit code (2) after saying why."""
    try:
        return parse_budgets(
            max_tokens=getattr(args, "max_tokens", None),
            max_cost=getattr(args, "max_cost", None),
            max_wall=getattr(args, "max_wall", None),
            raises=getattr(args, "raise_budget", None) or (),
        )
    except ArgumentError as err:
        print(f"rho-notebook: {err}", file=sys.stderr)
        return EXIT_USAGE


_RUN_SUFFIXES = (".star", ".ipynb", ".py", *GRAPH_SUFFIXES)
"""Files ``run`` takes (an existing file is dispatched by suffix; anything else is a plan ID prefix)."""


def _run_file(args: argparse.Namespace) -> int:
    """``run FILE.star``, ``run SCRIPT.py`` or ``run FILE.graph.yaml``: plan the file (stored once
    per graph), show its digest, then run it with consent to that digest, as ``run NOTEBOOK.ipynb``
    does."""
    if getattr(args, "workflow", None):
        print(f"rho-notebook: --workflow applies to `run NOTEBOOK.ipynb`, not to {args.plan}", file=sys.stderr)
        return EXIT_USAGE
    service = Service.default()
    inputs = parse_input_args(getattr(args, "input", None) or [], limits=load_limits())
    flow, warnings = getattr(args, "flow", None), 0
    script = str(args.plan).endswith(".py")
    from rho_notebook.cli.plan_verbs import print_script_invalid, print_script_warnings

    try:
        if script:  # what plan would warn of (a flow run as a script, ...)
            warnings = print_script_warnings(service, Path(args.plan), flow=flow)
        plan = run_sync(service.plan(service.request_for(Path(args.plan), inputs=inputs, flow=flow)))
    except InvalidWorkflow as err:
        if not script or args.output != "text":
            raise
        return print_script_invalid(err, Path(args.plan), flow=flow, warnings=warnings)
    kind = "script" if flow is None else f"flow {flow} of"
    if is_graph_file(str(args.plan)):
        kind = "item graph"
    elif str(args.plan).endswith(".star"):
        kind = "entry"
    if args.output == "text":
        print(f"{kind} {args.plan}  plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    return start_plan(service, plan, args, what=f"run {kind} {args.plan} (plan {plan.plan_id[:13]})")


def _file_form(args: argparse.Namespace, target: str) -> int | None:
    """``run FILE.star|SCRIPT.py|FILE.graph.yaml``: planned and run (:func:`_run_file`), or a usage
    error (exit 2); None when ``target`` is none of them (a notebook or a plan ID)."""
    if is_file(target) and not target.endswith(_RUN_SUFFIXES):
        print(
            f"rho-notebook: {target} is a file, and run takes a plan ID or a FILE.star, SCRIPT.py, "
            "FILE.graph.yaml or NOTEBOOK.ipynb",
            file=sys.stderr,
        )
        return EXIT_USAGE
    flow = getattr(args, "flow", None)
    forms = ((".star", "workflow entry"), (".py", "script"))
    for suffix, what in forms:
        if target.endswith(suffix):
            if flow and suffix != ".py":
                print(f"rho-notebook: --flow applies to `run FLOW.py`, not to a {what}", file=sys.stderr)
                return EXIT_USAGE
            if not is_file(target):
                print(f"rho-notebook: {target}: no such {what}", file=sys.stderr)
                return EXIT_USAGE
            return _run_file(args)
    if is_graph_file(target):
        if flow:
            print("rho-notebook: --flow applies to `run FLOW.py`, not to an item graph", file=sys.stderr)
            return EXIT_USAGE
        if not is_file(target):
            print(f"rho-notebook: {target}: no such item graph", file=sys.stderr)
            return EXIT_USAGE
        return _run_file(args)
    if flow:
        print("rho-notebook: --flow applies to `run FLOW.py`, a Python module defining the workflow", file=sys.stderr)
        return EXIT_USAGE
    return None


def _is_folder(target: str) -> bool:
    """Whether ``target`` names an existing folder and cannot be a plan ID prefix (hex and ``-``)."""
    try:
        return Path(target).is_dir() and re.fullmatch(r"[0-9a-f-]+", target) is None
    except (OSError, ValueError):
        return False


def _folder_note(target: str) -> str:
    """``run FOLDER`` (an exported notebook, say): the files in it that run takes."""
    files = sorted(str(path) for path in Path(target).iterdir() if path.name.endswith(_RUN_SUFFIXES) and path.is_file())
    shown = ", ".join(files[:5]) + (", ..." if len(files) > 5 else "")
    return f"{target} is a folder, and run takes a plan ID or a workflow file (.star, .py, .graph.yaml, .ipynb)" + (
        f": in it, {shown}" if files else ": it holds none"
    )


def run_run(args: argparse.Namespace) -> int:
    from rho_notebook.cli.notebook_verbs import notebook_run, output_notebook_refused

    refused = _exclusive(args)
    if refused is None:
        refused = output_notebook_refused(args)  # only with NOTEBOOK.ipynb, never with --detach
    if refused is not None:
        return refused
    target = str(args.plan)
    if _is_folder(target):
        print(f"rho-notebook: {_folder_note(target)}", file=sys.stderr)
        return EXIT_USAGE
    handled = _file_form(args, target)
    if handled is not None:
        return handled
    handled = notebook_run(args)  # `run NOTEBOOK.ipynb`
    if handled is not None:
        return handled
    service = Service.default()
    plan = run_sync(service.load_plan(args.plan))
    if args.output == "text":
        print(f"plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    return start_plan(service, plan, args, what=f"run plan {plan.plan_id[:13]}")


def run_resume(args: argparse.Namespace) -> int:
    refused = _exclusive(args)
    if refused is not None:
        return refused
    service = Service.default()
    manifest = run_sync(service.manifest(args.run))
    run_id = manifest.run_id
    graph = run_sync(service.run_graph(run_id))
    what = f"resume run {run_id[:13]}"
    from rho_notebook.service.starting import check_resumable, check_resume_consent, resume_budgets

    try:  # before a person is asked to confirm the digest of a resume that would start nothing
        run_sync(check_resumable(service.layout, run_id, executor=args.executor))
    except RunRefused as err:  # an executor the owner would refuse is said first (exit 2, by main)
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
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
        follow_hint=f"watch it with `rho-notebook status {run_id[:13]}`, wait for it with `rho-notebook wait {run_id[:13]}`",
    )
    budgets = _budgets(args)
    if isinstance(budgets, int):
        return budgets
    try:
        run_sync(check_resume_consent(service.layout, request))  # check_resumable was asked above
        run_sync(resume_budgets(service.layout, run_id, budgets))
    except ConfirmationRequired as err:
        return _refused(args, err, digest=manifest.graph_digest, what=what)
    except RunRefused as err:
        print(f"rho-notebook: {err.message}", file=sys.stderr)
        return err.exit_code
    options = OwnerOptions(
        resume=True,
        recover_uncertain=args.recover_uncertain,
        decisions=decisions,
        approval_timeout=args.approval_timeout,
        executor=args.executor,
    )
    return _start(service, args, run_id, graph=graph, options=options)
