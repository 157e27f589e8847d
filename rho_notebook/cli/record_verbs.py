"""The ``record`` verb: a finished run -> a recording and a pytest file that replays it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rho_notebook.service import Service
from rho_notebook.service.sync import run_sync

__all__ = ["register"]

_DESCRIPTION = """\
Write DIR/recording.json (the run's steps with their recorded answers: agent answers, command
outputs, states and values), DIR/sources/ (a copy of the script and its modules, or the plan's
Starlark sources) and DIR/test_<workflow>.py, a pytest file that re-executes the workflow's current
source against the recording and asserts the same step keys, states and outputs. A step whose
inputs changed fails that test, named with both digests.

Command steps are replayed from the recording by default; with --live-commands the test runs them
for real (and says so)."""


def register(verbs: Any) -> None:
    record = verbs.add_parser(
        "record",
        help="turn a finished run into a regression test (recording + pytest file)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    record.add_argument("run", metavar="RUN_ID", help="a finished run (ID or unique prefix)")
    record.add_argument("dir", metavar="DIR", type=Path, help="folder to write (created; files in it are replaced)")
    record.add_argument("--live-commands", action="store_true", help="the generated test runs command steps for real")
    record.add_argument("--output", choices=("text", "json"), default="text")
    record.set_defaults(handler=run_record)


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
