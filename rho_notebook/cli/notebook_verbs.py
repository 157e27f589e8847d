"""The notebook verbs: ``export NOTEBOOK.ipynb DIR``, and ``run NOTEBOOK.ipynb`` (the notebook form
of ``run``: an argument that is an existing ``.ipynb`` file).

``run NOTEBOOK.ipynb [--workflow NAME] [--input KEY=JSON]... [--yes] [--output text|jsonl]``
exports the notebook's workflow to a temporary folder inside the notebook's own folder (so it is
inside the workspace and its labels resolve), plans that folder exactly as ``plan`` would (its
``%%star`` and ``%%py`` modules at their labels, its ``agents/``), removes the folder (the plan stores the
sources), shows the digest, asks for confirmation (``--yes`` without a terminal) and runs the plan
headless with live progress, like ``run PLAN_ID``. The cell's ``--input`` values are the
defaults, the notebook's ``parameters`` cell overrides them (:mod:`rho_notebook.service.parameters`)
and ``--input`` on the command line overrides both. The entry is labelled by the notebook's folder,
as the kernel labels it, so an unchanged notebook plans to its stored plan every time.

``--output-notebook OUT.ipynb`` follows the run to its end (so never with ``--detach``) and then
writes the executed copy (:mod:`rho_notebook.service.output_notebook`); the final DAG picture is
drawn here, since the picture lives in ``views``, above the service.

Python nodes (``%%py`` cells) are frozen with the interpreter the notebook's kernel would use
(:func:`rho_notebook.service.kernel_python.notebook_interpreter`: the kernelspec's interpreter when
it is a Python kernel installed here, else this command's own), and one line says which and why,
so the digest is the one the same cells plan to in that kernel.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rho_notebook.cli._args import EXIT_USAGE, is_file
from rho_notebook.errors import NotFound
from rho_notebook.model.plan import Plan
from rho_notebook.service import Service, load_limits, parse_input_args
from rho_notebook.service.kernel_python import notebook_interpreter
from rho_notebook.service.sync import run_sync

if TYPE_CHECKING:
    from rho_notebook.service.output_notebook import OutputTarget

__all__ = ["notebook_run", "output_notebook_refused", "run_export", "run_notebook"]


_GOING = frozenset({"planned", "running", "waiting", "cancelling"})
"""Lifecycles of a run that has not ended (the following stopped on Ctrl-C): nothing to copy yet."""


def run_export(args: argparse.Namespace) -> int:
    result = run_sync(Service.default().export(args.notebook, args.dir, workflow=args.workflow))
    print(result)
    root = result.modules_outside_root()
    if root is not None:
        print(
            f"note: %%star and %%py modules were written at their labels under {result.out_dir}; labels resolve against the "
            f"workspace root ({root}), so plan the folder as its own workspace or export into the workspace root",
            file=sys.stderr,
        )
    print(f"plan it with: {result.plan_command()}")
    return 0


def output_notebook_refused(args: argparse.Namespace) -> int | None:
    """``--output-notebook`` needs a notebook to copy and a run followed to its end: a usage error
    (exit 2) with another target or with ``--detach``; else None."""
    if getattr(args, "output_notebook", None) is None:
        return None
    if not str(getattr(args, "plan", "")).endswith(".ipynb"):
        print(
            f"rho-notebook: --output-notebook applies to `run NOTEBOOK.ipynb` (a copy of that notebook), not to {args.plan}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if getattr(args, "detach", False):
        print(
            "rho-notebook: --output-notebook follows the run to its end to write the copy, and --detach returns at "
            "once: give one of them",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return None


def notebook_run(args: argparse.Namespace) -> int | None:
    """Handle ``run`` when its argument is a notebook; None when it is a plan ID (run_run goes on)."""
    target = str(getattr(args, "plan", ""))
    refused = output_notebook_refused(args)
    if refused is not None:
        return refused
    if target.endswith(".ipynb"):
        if not is_file(target):
            print(f"rho-notebook: {target}: no such notebook", file=sys.stderr)
            return EXIT_USAGE
        return run_notebook(args)
    if getattr(args, "workflow", None) or getattr(args, "input", None):
        print(
            "rho-notebook: --workflow and --input apply to `run NOTEBOOK.ipynb`; a plan is frozen with its inputs",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return None


def run_notebook(args: argparse.Namespace) -> int:
    from rho_notebook.cli.run_verbs import start_plan

    service = Service.default()
    copy = _output_target(args)
    inputs = parse_input_args(args.input, limits=load_limits())
    interpreter = notebook_interpreter(Path(args.plan))
    plan = run_sync(
        service.plan_notebook(
            Path(args.plan),
            workflow=args.workflow,
            inputs=inputs,
            where=args.plan,
            python_interpreter=interpreter.path,
        )
    )
    if args.output == "text":
        print(f"notebook {args.plan}  workflow {plan.graph.name}  (exported to a temporary folder, planned, removed)")
    if plan.graph.python is not None:  # the workflow has Python nodes: say what they run with
        print(interpreter, file=sys.stdout if args.output == "text" else sys.stderr)
    if args.output == "text":
        print(f"plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
    code = start_plan(service, plan, args, what=f"run plan {plan.plan_id[:13]} of {args.plan}")
    if copy is not None:
        _write_copy(service, args, copy, plan=plan)
    return code


def _output_target(args: argparse.Namespace) -> OutputTarget | None:
    """``--output-notebook OUT``: checked before anything is planned, and the run's ID chosen
    (``--run-id``'s, else a new one) so the copy is written from that run."""
    if args.output_notebook is None:
        return None
    from rho_notebook.service.output_notebook import check_output_notebook, new_run_id

    copy = check_output_notebook(Path(args.plan), Path(args.output_notebook), workflow=args.workflow)
    if args.run_id is None:
        args.run_id = new_run_id()
    return copy


def _write_copy(service: Service, args: argparse.Namespace, copy: OutputTarget, *, plan: Plan) -> None:
    """Write the copy from the run once it ended. A run that never started (refused) or goes on (the
    following was stopped by a signal) leaves nothing to copy: a note says so, and the exit code
    that says why stands."""
    from rho_notebook.service.output_notebook import RunOutputs, write_output_notebook
    from rho_notebook.views.picture import picture_metadata, run_bundle

    stream = sys.stdout if args.output == "text" else sys.stderr
    try:
        state = run_sync(service.status(args.run_id))
    except NotFound:
        print(f"rho-notebook: no run started, so {copy.target} was not written", file=sys.stderr)
        return
    if state.lifecycle.value in _GOING:
        print(
            f"rho-notebook: run {args.run_id} goes on ({state.lifecycle.value}), so {copy.target} was not written; "
            "a copy is written only after a run followed to its end (`rho-notebook wait` follows this one)",
            file=sys.stderr,
        )
        return
    graph = run_sync(service.run_graph(args.run_id))
    bundle = run_bundle(graph, state)
    outputs = RunOutputs(
        run_id=args.run_id,
        plan_id=plan.plan_id,
        graph_digest=plan.graph_digest,
        picture=bundle,
        picture_metadata=picture_metadata(bundle),
        result=run_sync(service.run_result(args.run_id)),
    )
    written = write_output_notebook(copy, outputs)
    print(f"wrote {written}  ({copy.cell} carries run {args.run_id[:13]}'s final DAG and result)", file=stream)
