"""The ``record`` verb: a finished run -> a recording and a pytest file that replays it."""

from __future__ import annotations

import argparse
import json

from rho_notebook.service import Service
from rho_notebook.service.sync import run_sync

__all__ = ["run_record"]


def run_record(args: argparse.Namespace) -> int:
    recorded = run_sync(Service.default().record(args.run, args.dir, live_commands=args.live_commands))
    if args.output == "json":
        data = {
            "run_id": recorded.run_id,
            "folder": str(recorded.folder),
            "recording": str(recorded.recording),
            "test": str(recorded.test),
            "sources": [str(path) for path in recorded.sources],
            "steps": recorded.steps,
            "live_commands": recorded.live_commands,
        }
        print(json.dumps(data, indent=2))
        return 0
    print(f"recorded    run {recorded.run_id}: {recorded.steps} steps")
    print(f"recording   {recorded.recording}")
    print(f"test        {recorded.test}")
    print(f"commands    {'run for real' if recorded.live_commands else 'replayed from the recording'}")
    print(f"\nrun it with: python -m pytest {recorded.test}")
    return 0
