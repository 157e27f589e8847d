"""Argument parsing for the magics: the cell-magic headers and the ``%workflow VERB`` line.

The verbs take the CLI's flags (``rho-notebook VERB --help``), plus a few notebook-only ones
(``--input`` when ``run`` plans a notebook workflow, ``--wait``). Parsing never exits the
process: errors raise :class:`ArgumentError` (the magics turn it into ``UsageError``) and
``--help`` raises :class:`HelpShown` after printing.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, NoReturn

from rho_notebook.errors import ArgumentError, HelpShown
from rho_notebook.model.state import Lifecycle
from rho_notebook.service.flags import (
    BUDGET_FLAGS,
    FLOW,
    RESUME_FLAGS,
    RUN_FLAGS,
    TRY_FLAGS,
    VerbParser,
    add_flags,
    add_output,
    options_of,
    positive_int,
    seconds,
    with_suggestion,
)

__all__ = [
    "VERBS",
    "split",
    "verb_parser",
    "workflow_header",
    "star_header",
    "py_header",
    "script_header",
    "flow_header",
    "graph_header",
    "agent_header",
    "parse_verb",
    "options_of",
]

VERBS = (
    "validate",
    "plan",
    "run",
    "status",
    "cancel",
    "resume",
    "runs",
    "plans",
    "diff",
    "try",
    "fork",
    "result",
    "logs",
    "approve",
    "answer",
    "export",
    "show",
    "hub",
)
"""Every ``%workflow`` verb, in the order the help lists them."""


class _Parser(VerbParser):
    def error(self, message: str) -> NoReturn:
        usage = self.format_usage().removeprefix("usage: ").strip()
        raise ArgumentError(f"{self.prog}: {with_suggestion(message)}\nusage: {usage}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            raise ArgumentError(message.strip())
        raise HelpShown()


def split(line: str) -> list[str]:
    """Split a magic line like a shell would (quotes protect JSON inputs)."""
    try:
        return shlex.split(line, posix=True)
    except ValueError as err:
        raise ArgumentError(f"cannot split {line!r}: {err} (close the quote)") from None


def _input(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--input", action="append", default=[], metavar="KEY=JSON", help=help)


def _flow(parser: argparse.ArgumentParser) -> None:
    FLOW.add(parser, front="notebook")


def _build() -> argparse.ArgumentParser:
    root = _Parser(
        prog="%workflow",
        description="Plan, run and watch workflows from a notebook (the rho-notebook verbs).",
        add_help=True,
    )
    verbs = root.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)
    _planning_verbs(verbs)
    _run_verbs(verbs)
    _reading_verbs(verbs)
    _decision_verbs(verbs)
    _notebook_verbs(verbs)
    return root


def _planning_verbs(verbs: Any) -> None:
    for verb, help in (
        ("validate", "evaluate a workflow once and check the whole graph; stores nothing"),
        ("plan", "validate, resolve, freeze and store a plan"),
    ):
        p = verbs.add_parser(verb, help=help)
        p.add_argument("target", help="a %%%%workflow name of this notebook, or an entry .star file")
        _input(p, "an input value (overrides the cell's --input)")
        add_output(p)
        _flow(p)


def _run_verbs(verbs: Any) -> None:
    p = verbs.add_parser("run", help="confirm a plan's digest and start it in the background")
    p.add_argument("target", help="plan ID (or unique prefix), or a %%%%workflow name (planned first)")
    add_flags(p, RUN_FLAGS, front="notebook")

    p = verbs.add_parser("resume", help="resume a cancelled or interrupted run in the background")
    p.add_argument("run", help="run ID or unique prefix")
    add_flags(p, RESUME_FLAGS, front="notebook")


def _reading_verbs(verbs: Any) -> None:
    p = verbs.add_parser("status", help="one durable snapshot of a run")
    p.add_argument("run")
    add_output(p)

    p = verbs.add_parser("cancel", help="durably request cancellation and wait for the acknowledgement")
    p.add_argument("run")
    p.add_argument(
        "--wait",
        type=seconds,
        default=2.0,
        metavar="SECONDS",
        help="how long to wait for the acknowledgement (default 2)",
    )
    add_output(p)

    p = verbs.add_parser("runs", help="list runs, newest last")
    p.add_argument("--state", choices=[lifecycle.value for lifecycle in Lifecycle], help="only runs in this lifecycle")
    p.add_argument("--limit", type=positive_int, default=50, help="the newest N runs (default 50)")
    add_output(p)

    p = verbs.add_parser("plans", help="list saved plans")
    add_output(p)

    p = verbs.add_parser("result", help="per node: state, attempts, exit, validated output, artifacts")
    p.add_argument("run")
    add_output(p)

    p = verbs.add_parser("logs", help="a node's stdout and stderr (latest attempt)")
    p.add_argument("run")
    p.add_argument("node")
    p.add_argument("--stream", choices=("stdout", "stderr", "both"), default="both")
    p.add_argument("--follow", action="store_true", help="keep printing while the node runs (blocks the cell)")


def _decision_verbs(verbs: Any) -> None:
    p = verbs.add_parser("approve", help="decide a pending approval of a run; without REQUEST, list them")
    p.add_argument("run")
    p.add_argument("request", nargs="?")
    p.add_argument("--deny", action="store_true")
    p.add_argument("--comment")

    p = verbs.add_parser("answer", help="answer a human step of an item-graph run that waits for a person")
    p.add_argument("run")
    p.add_argument("step", help="the human step's id (or one loop round, STEP@N)")
    p.add_argument("fields", nargs="*", metavar="FIELD=VALUE", help="one per form field; VALUE is JSON, as --input")
    p.add_argument("--comment")


def _notebook_verbs(verbs: Any) -> None:
    p = verbs.add_parser(
        "export",
        help="write a workflow folder from a notebook (or from this session's cells)",
        usage="%(prog)s [-h] [--workflow NAME] [NOTEBOOK.ipynb] DIR",  # not argparse's "X [X ...]"
    )
    p.add_argument("paths", nargs="+", metavar="[NOTEBOOK.ipynb] DIR")
    p.add_argument("--workflow", metavar="NAME")

    p = verbs.add_parser("diff", help="what changed between two plans, runs or graph digests")
    p.add_argument("old", metavar="OLD", help="plan ID, graph digest (sha256:...) or run ID")
    p.add_argument("new", metavar="NEW", help="plan ID, graph digest (sha256:...) or run ID")
    add_output(p)

    p = verbs.add_parser(
        "try", help="run one node of a workflow's current plan, its upstream values taken from an earlier run"
    )
    p.add_argument("node", metavar="NODE", help="the node to run")
    p.add_argument(
        "--from", dest="from_run", metavar="RUN_ID", help="the run to take upstream values from (default: the latest)"
    )
    p.add_argument("--workflow", metavar="NAME", help="the %%%%workflow whose plan holds NODE (default: the only one)")
    add_flags(p, TRY_FLAGS, front="notebook")

    p = verbs.add_parser("fork", help="fork a completed run at a node: edit its value or re-run it, run what follows")
    p.add_argument("run", metavar="RUN", help="a completed run (ID or unique prefix)")
    p.add_argument("--at", required=True, metavar="NODE", help="the node to fork at (docs/fork.md)")
    p.add_argument("--value", metavar="JSON", help="NODE's edited output (checked against its output schema)")
    p.add_argument("--from-plan", metavar="PLAN", help="run NODE and what follows from this newer plan")
    _input(p, "an input given a new value: the nodes whose definition changes run anew")
    add_flags(p, (*TRY_FLAGS, *BUDGET_FLAGS), front="notebook")

    p = verbs.add_parser(
        "show", help="redraw an earlier run's DAG and outputs from the store, with a picker of its workflow's runs"
    )
    p.add_argument(
        "run", nargs="?", help="run ID or unique prefix (default: the newest run of this notebook's workflow)"
    )
    p.add_argument("--workflow", metavar="NAME", help="without RUN: the newest run of this workflow")
    p.add_argument("--node", metavar="NODE", help="open this node's output pane")

    verbs.add_parser("hub", help="the workflows, plans and runs of this notebook")


_PARSER: argparse.ArgumentParser | None = None


def verb_parser() -> argparse.ArgumentParser:
    """The ``%workflow`` parser (built on first use)."""
    global _PARSER
    if _PARSER is None:
        _PARSER = _build()
    return _PARSER


def parse_verb(line: str) -> argparse.Namespace:
    args = verb_parser().parse_args(split(line))
    return args


def workflow_header(line: str) -> tuple[str | None, list[str]]:
    """``%%workflow [NAME] [--input KEY=JSON]...`` -> (NAME or None, raw inputs)."""
    parser = _Parser(prog="%%workflow", description="The cell is a workflow entry module (Starlark).")
    parser.add_argument("name", nargs="?", help="must equal the workflow(name = ...) the cell builds")
    _input(parser, "an input value, e.g. --input 'target=\"src\"'")
    args = parser.parse_args(split(line))
    name: str | None = args.name
    inputs: list[str] = args.input
    return name, inputs


def star_header(line: str) -> str:
    """``%%star LABEL`` -> LABEL."""
    parser = _Parser(prog="%%star", description="The cell is a Starlark module that workflows can load().")
    parser.add_argument("label", help="root label such as //lib/common.star")
    args = parser.parse_args(split(line))
    label: str = args.label
    return label


def py_header(line: str) -> str:
    """``%%py LABEL`` -> LABEL."""
    parser = _Parser(
        prog="%%py",
        description="The cell is a Python module that python() nodes run; it also runs in the kernel.",
    )
    parser.add_argument("label", help="root label ending in .py, such as //nodes/stats.py")
    args = parser.parse_args(split(line))
    label: str = args.label
    return label


def script_header(line: str) -> tuple[str, list[str]]:
    """``%%script NAME [--input KEY=JSON]...`` -> (NAME, raw inputs)."""
    parser = _Parser(
        prog="%%script",
        description="The cell is a Python script workflow (NAME.py); it is stored, never run in the kernel: "
        "%workflow run NAME runs it in its own interpreter process.",
    )
    parser.add_argument("name", help="the script's name: a-z, 0-9 and _, e.g. review")
    _input(parser, "an input value, e.g. --input 'target=\"src\"'")
    args = parser.parse_args(split(line))
    name: str = args.name
    inputs: list[str] = args.input
    return name, inputs


def flow_header(line: str) -> tuple[str, list[str], bool]:
    """``%%flow NAME [--input KEY=JSON]... [--compile]`` -> (NAME, raw inputs, compile only)."""
    parser = _Parser(
        prog="%%flow",
        description="The cell is a flow module (NAME.py) defining the Workflow NAME (docs/flows.md); running the "
        "cell plans it and starts a flow run in the background, in its own interpreter process.",
    )
    parser.add_argument("name", help="the flow's name and the module's: a-z, 0-9 and _, e.g. review")
    _input(parser, "an input value, e.g. --input 'prompt=\"Review the draft\"'")
    parser.add_argument(
        "--compile", action="store_true", help="show the module tree (agents, selectors) without running the flow"
    )
    args = parser.parse_args(split(line))
    name: str = args.name
    inputs: list[str] = args.input
    return name, inputs, bool(args.compile)


def graph_header(line: str) -> str:
    """``%%graph NAME`` -> NAME."""
    parser = _Parser(
        prog="%%graph",
        description="The cell is an item-graph document (NAME.graph.yaml, YAML or JSON; docs/graphs.md); running "
        "the cell stores and validates it; %workflow run NAME --input k=v runs it.",
    )
    parser.add_argument("name", help="the graph's name, equal to the document's name: a-z, 0-9, _ and -")
    args = parser.parse_args(split(line))
    name: str = args.name
    return name


def agent_header(line: str) -> str:
    """``%%agent ID`` -> ID."""
    parser = _Parser(prog="%%agent", description="The cell is an agent definition file (as agents/<ID>.md).")
    parser.add_argument("id", help="agent id, e.g. reviewer")
    args = parser.parse_args(split(line))
    agent_id: str = args.id
    return agent_id
