"""``validate FILE.graph.yaml``: the findings of an item-graph document (docs/graphs.md).

``plan``/``run`` freeze and run the document like any workflow; ``plan_verbs.run_validate``
dispatches here by the file name's suffix (:func:`~rho_notebook.model.itemgraph.is_graph_file`).
"""

from __future__ import annotations

import argparse
import json
import sys

from rho_notebook.service import Service, load_limits, parse_input_args
from rho_notebook.service.sync import run_sync

__all__ = ["convert_graph", "validate_graph"]


def validate_graph(args: argparse.Namespace) -> int:
    """Print every finding (``file:line:col: error[rule]: message``) and a verdict; with
    ``--input``, a valid document's declared inputs are checked too. Exit 1 when invalid."""
    service = Service.default()
    inputs = parse_input_args(args.input, limits=load_limits()) if args.input else None
    checked = run_sync(service.check_graph(args.file, inputs=inputs))
    if args.output == "json":
        print(json.dumps(checked.to_json(), indent=2))
        return 1 if checked.errors else 0
    for line in checked.lines:
        print(line, file=sys.stderr)
    if checked.errors:
        print(f"invalid: {args.file} ({checked.errors} error{'s' * (checked.errors != 1)}); nothing was stored")
        return 1
    print(
        f"valid: the item graph {args.file} passes validate (nothing was stored; rho-notebook run {args.file} runs it)"
    )
    return 0


def convert_graph(args: argparse.Namespace) -> int:
    """Print the equivalent Starlark workflow (docs/graphs.md, "Graduating to Starlark: convert").
    A document that does not validate exits 1; one without a faithful equivalent exits 2, each
    refusal naming the step, edge or input with its line:column (the entry point prints them)."""
    sys.stdout.write(run_sync(Service.default().convert_graph(args.file)))
    return 0
