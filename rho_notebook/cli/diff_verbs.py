"""The ``diff`` verb: what changed between two plans (or runs, or graph digests)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rho_notebook.service import Service
from rho_notebook.service.sync import run_sync
from rho_notebook.service.wire import diff_json

__all__ = ["register"]

_DESCRIPTION = """\
Compare two frozen graphs: nodes added (+), removed (-) and changed (~, with the fields that
changed, named as in Starlark: argv, module, module source, function, args, output, needs, when,
agent, prompt, cwd, ...), then which nodes of NEW a run started now would reuse and launch.

OLD and NEW are each a plan ID, a graph digest (sha256:..., the newest plan with that digest) or a
run ID (the graph that run executes), or a unique prefix of an ID."""


def register(verbs: Any) -> None:
    diff = verbs.add_parser(
        "diff",
        help="what changed between two plans, runs or graph digests",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("old", metavar="OLD", help="plan ID, graph digest (sha256:...) or run ID")
    diff.add_argument("new", metavar="NEW", help="plan ID, graph digest (sha256:...) or run ID")
    diff.add_argument("--output", choices=("text", "json"), default="text")
    diff.set_defaults(handler=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    result = run_sync(Service.default().diff(args.old, args.new))
    if args.output == "json":
        print(json.dumps(diff_json(result), indent=2))
    else:
        print("\n".join(result.lines()))
    return 0
