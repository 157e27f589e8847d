"""``rho-notebook timeline RUN``: where a run's time went, as a text Gantt on the terminal.

The rows are folded from the run's journal by :func:`rho_notebook.views.timeline.timeline_of`, the
same fold the Timeline tab of the widget and the JupyterLab sidebar draws (docs/usage.md,
"Timeline"); ``--output json`` prints that fold as it is. The Gantt fits the terminal's width
(``--width`` overrides it), and falls back to ASCII when standard output cannot encode the blocks.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Any

from rho_notebook.service.flags import add_output

__all__ = ["declare_timeline", "run_timeline"]

_MIN_WIDTH = 40


def declare_timeline(verbs: Any) -> None:
    """The ``timeline`` verb's arguments (called by :func:`rho_notebook.cli.verbs.declare`)."""
    timeline = verbs.add_parser(
        "timeline",
        help="where a run's time went: one row per node or step, attempts, queued time, waits, critical path",
        description=(
            "Print a run's timeline as a text Gantt: one row per node (or script step), a bar per "
            "attempt from launch to finish, queued time before it, earlier attempts and waits for a "
            "person marked, the critical path starred (docs/usage.md, Timeline)."
        ),
    )
    timeline.add_argument("run", help="run ID or unique prefix")
    timeline.add_argument(
        "--width",
        type=_columns,
        default=0,
        metavar="COLUMNS",
        help=f"columns to draw in, {_MIN_WIDTH} or more (default: the terminal's width)",
    )
    add_output(timeline, help_text="text: the Gantt; json: the rows as the Timeline tab gets them")
    timeline.set_defaults(handler="timeline_verbs:run_timeline")


def _columns(text: str) -> int:
    """``--width``: a whole number of columns the Gantt fits in (0, -5 and 3 were taken silently,
    as the terminal's width or as 40)."""
    try:
        value = int(text)
    except ValueError:
        msg = f"{text!r} is not a whole number of columns"
        raise argparse.ArgumentTypeError(msg) from None
    if value < _MIN_WIDTH:
        msg = f"{text!r}: give {_MIN_WIDTH} columns or more (leave --width out to fit the terminal)"
        raise argparse.ArgumentTypeError(msg)
    return value


def run_timeline(args: argparse.Namespace) -> int:
    from rho_notebook.service import Service
    from rho_notebook.service.sync import run_sync
    from rho_notebook.views.timeline import read_timeline, timeline_text

    timeline = run_sync(read_timeline(Service.default(), args.run))
    if args.output == "json":
        print(json.dumps(timeline, indent=2))
        return 0
    width = args.width if args.width > 0 else shutil.get_terminal_size((100, 24)).columns
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "█░▒◇→…".encode(encoding)
        unicode = True
    except (UnicodeEncodeError, LookupError):
        unicode = False
    for line in timeline_text(timeline, width=max(_MIN_WIDTH, width), unicode=unicode):
        # a script step's key may hold what the terminal cannot show: replaced, never a traceback
        print(line if unicode else line.encode(encoding, "replace").decode(encoding))
    return 0
