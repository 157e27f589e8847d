"""``rho-notebook fork RUN --at NODE``: a new run from a completed one, from NODE on (docs/fork.md).

The fork's derived plan (RUN's graph, or ``--from-plan``'s, with a frozen fork record) is planned
and stored first (:meth:`~rho_notebook.service.Service.fork`), its digest shown; then it runs as
``run PLAN`` runs it (:func:`~rho_notebook.cli.run_verbs.start_plan`: consent to the digest,
``--yes`` without a terminal, ``--max-tokens/--max-cost/--max-wall`` journaled before the owner
starts, the owner followed to the end). Every refusal (RUN not completed, a
node to be taken that did not succeed or changed, an edited value that does not fit NODE's output
schema) is made before anything is stored or started, naming the node (and the field).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rho_notebook.cli._args import EXIT_USAGE
from rho_notebook.errors import ArgumentError
from rho_notebook.service.flags import (
    APPROVAL_TIMEOUT,
    BUDGET_FLAGS,
    DETACH,
    MODE,
    NO_REUSE,
    RUN_OUTPUT,
    WAIT,
    YES,
    add_flags,
    json_value,
)

__all__ = ["declare_fork", "run_fork"]


def declare_fork(verbs: Any) -> None:
    """The ``fork`` verb's arguments (registered in :mod:`rho_notebook.cli.main`)."""
    fork = verbs.add_parser(
        "fork",
        help="fork a completed run at a node: take everything not downstream of it, edit or re-run it, run what follows",
        description=(
            "Make a new run from a completed run RUN: every node that is not NODE and not downstream of it is taken "
            "from RUN (never launched), NODE takes an edited value (--value, checked against its output schema) or "
            "re-runs, and everything downstream runs anew. The fork's derived plan is stored and its digest "
            "confirmed like any run's (docs/fork.md)."
        ),
    )
    fork.add_argument("run", metavar="RUN", help="a completed run (ID or unique prefix)")
    fork.add_argument("--at", required=True, metavar="NODE", help="the node to fork at")
    edit = fork.add_mutually_exclusive_group()
    edit.add_argument("--value", metavar="JSON", help="NODE's edited output, as JSON (it is then not launched)")
    edit.add_argument("--value-file", metavar="FILE", help="NODE's edited output, from a JSON file")
    fork.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="an input given a new value (repeatable): RUN's .star entry is planned again with it, and the nodes "
        "whose definition changes run anew with what follows them",
    )
    fork.add_argument(
        "--from-plan",
        metavar="PLAN",
        help="run NODE and what follows from this newer plan (e.g. an edited prompt); a node to be taken must be "
        "defined there as in RUN",
    )
    add_flags(fork, (YES, RUN_OUTPUT, MODE, APPROVAL_TIMEOUT, WAIT, DETACH, NO_REUSE, *BUDGET_FLAGS), front="cli")
    fork.set_defaults(handler="fork_verbs:run_fork")


def _edited(args: argparse.Namespace) -> tuple[bool, Any]:
    """(whether NODE takes an edited value, the value) from ``--value`` or ``--value-file``.

    Raises
    ------
    ArgumentError
        The text is not JSON (:func:`~rho_notebook.service.flags.json_value`, naming the flag).
    ValueError
        The file cannot be read (the message names the flag and the file).
    """
    if args.value is not None:
        text, where = args.value, "--value"
    elif args.value_file is not None:
        where = f"--value-file {args.value_file}"
        try:
            text = Path(args.value_file).read_text(encoding="utf-8")
        except OSError as err:  # the flag and the file named, not a bare [Errno 2]
            msg = f"{where}: cannot read it ({err.strerror or err}); give a file that holds NODE's value as JSON"
            raise ValueError(msg) from None
    else:
        return False, None
    return True, json_value(text, where=where)


def run_fork(args: argparse.Namespace) -> int:
    from rho_notebook.cli.run_verbs import start_plan
    from rho_notebook.service import Service, load_limits, parse_input_args
    from rho_notebook.service.sync import run_sync

    try:
        edited, value = _edited(args)
        inputs = parse_input_args(args.input, limits=load_limits())
    except (ArgumentError, OSError, ValueError) as err:
        print(f"rho-notebook fork: {err}", file=sys.stderr)
        return EXIT_USAGE
    service = Service.default()
    forked = run_sync(
        service.fork(args.run, at=args.at, value=value, edited=edited, inputs=inputs or None, from_plan=args.from_plan)
    )
    shown = sys.stdout if args.output == "text" else sys.stderr
    for line in forked.lines():
        print(line, file=shown)
    args.run_id, args.executor = None, None
    return start_plan(service, forked.plan, args, what=f"run the fork of run {forked.source_run[:13]} at {forked.node}")
