"""The ``diff`` verb: what changed between two plans (or runs, or graph digests)."""

from __future__ import annotations

import argparse
import json

from rho_notebook.service import Service
from rho_notebook.service.sync import run_sync
from rho_notebook.service.wire import diff_json

__all__ = ["run_diff"]


def run_diff(args: argparse.Namespace) -> int:
    result = run_sync(Service.default().diff(args.old, args.new))
    if args.output == "json":
        print(json.dumps(diff_json(result), indent=2))
    else:
        print("\n".join(result.lines()))
    return 0
