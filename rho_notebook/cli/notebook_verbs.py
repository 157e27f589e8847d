"""The notebook verbs: ``export NOTEBOOK.ipynb DIR``, and ``run NOTEBOOK.ipynb`` (the notebook form
of ``run``: an argument that is an existing ``.ipynb`` file).

``run NOTEBOOK.ipynb [--workflow NAME] [--input KEY=JSON]... [--yes] [--output text|jsonl]``
exports the notebook's workflow to a temporary folder inside the notebook's own folder (so it is
inside the workspace and its labels resolve), plans that folder exactly as ``plan`` would (its
``%%star`` and ``%%py`` modules at their labels, its ``agents/``), removes the folder (the plan stores the
sources), shows the digest, asks for confirmation (``--yes`` without a terminal) and runs the plan
headless with live progress, like ``run PLAN_ID``. The cell's ``--input`` values are the
defaults; ``--input`` on the command line overrides them.

Python nodes (``%%py`` cells) are frozen with the interpreter the notebook's kernel would use
(:func:`rho_notebook.service.kernel_python.notebook_interpreter`: the kernelspec's interpreter when
it is a Python kernel installed here, else this command's own), and one line says which and why,
so the digest is the one the same cells plan to in that kernel.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rho_notebook.cli._args import is_file
from rho_notebook.service import Service, find_workspace, load_limits, parse_input_args
from rho_notebook.service.kernel_python import notebook_interpreter
from rho_notebook.service.sync import run_sync

__all__ = ["notebook_run", "run_export", "run_notebook"]

EXIT_USAGE = 2


def run_export(args: argparse.Namespace) -> int:
    result = run_sync(Service.default().export(args.notebook, args.dir, workflow=args.workflow))
    print(result)
    workspace = find_workspace(result.out_dir)
    if result.modules and workspace.root != result.out_dir:
        print(
            f"note: %%star and %%py modules were written at their labels under {result.out_dir}; labels resolve against the "
            f"workspace root ({workspace.root}), so plan the folder as its own workspace or export into the workspace root",
            file=sys.stderr,
        )
    print(f"plan it with: {result.plan_command()}")
    return 0


def notebook_run(args: argparse.Namespace) -> int | None:
    """Handle ``run`` when its argument is a notebook; None when it is a plan ID (run_run goes on)."""
    target = str(getattr(args, "plan", ""))
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
    return start_plan(service, plan, args, what=f"run plan {plan.plan_id[:13]} of {args.plan}")
