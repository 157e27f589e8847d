"""The command line of every verb: its arguments, its help, and the handler that runs it.

A handler is named ``"module:function"`` (a module of :mod:`rho_notebook.cli`) and imported by
:func:`rho_notebook.cli.main.main` only when its verb runs, so ``rho-notebook --help`` and
``rho-notebook status RUN`` do not import the planner, the run's owner, the agents or the MCP
server (issue 31; ``tests/unit/test_cli_imports.py``). Keep this module light: the standard
library, :mod:`rho_notebook.service.flags` (the run and resume flags the magics share),
:mod:`rho_notebook.cli._args` and :mod:`rho_notebook.model.state`'s enums, nothing that builds a
model or reads the store.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rho_notebook.cli._args import count, days, positive_int
from rho_notebook.model.state import Lifecycle
from rho_notebook.service.flags import RESUME_FLAGS, RUN_FLAGS, add_flags, add_output, seconds

__all__ = ["declare"]

_INPUT_HELP = "an input value, e.g. --input 'target=\"src\"'"

_DIFF = """\
Compare two frozen graphs: nodes added (+), removed (-) and changed (~, with the fields that
changed, named as in Starlark: argv, module, module source, function, args, output, needs, when,
agent, prompt, cwd, ...), then which nodes of NEW a run started now would reuse and launch.

OLD and NEW are each a plan ID, a graph digest (sha256:..., the newest plan with that digest) or a
run ID (the graph that run executes), or a unique prefix of an ID."""

_RECORD = """\
Write DIR/recording.json (the run's steps with their recorded answers: agent answers, command
outputs, states and values), DIR/sources/ (a copy of the script and its modules, or the plan's
Starlark sources) and DIR/test_<workflow>.py, a pytest file that re-executes the workflow's current
source against the recording and asserts the same step keys, states and outputs. A step whose
inputs changed fails that test, named with both digests.

Command steps are replayed from the recording by default; with --live-commands the test runs them
for real (and says so)."""


def declare(verbs: Any) -> None:
    """Add every verb to ``verbs`` (the parser's sub-parsers), in the order ``--help`` lists them."""
    _catalog(verbs)
    _planning(verbs)
    _diff(verbs)
    _running(verbs)
    _reading(verbs)
    _deleting(verbs)
    _export(verbs)
    _deciding(verbs)
    _record(verbs)
    _mcp(verbs)
    _convert(verbs)


def _catalog(verbs: Any) -> None:
    workspace = {
        "type": Path,
        "default": None,
        "metavar": "DIR",
        "help": "the workspace whose workflows are read (default: the one holding the current directory)",
    }
    listing = verbs.add_parser("list", help="the workspace's workflows (name, kind, file), as MCP's workflow_list")
    listing.add_argument("--workspace", "--dir", **workspace)
    add_output(listing)
    listing.set_defaults(handler="catalog_verbs:run_list")

    get = verbs.add_parser("get", help="one workflow of the workspace: its kind, file, inputs and source")
    get.add_argument("name", metavar="NAME", help="a workflow's name as `list` shows it, or its file")
    get.add_argument("--workspace", "--dir", **workspace)
    add_output(get)
    get.set_defaults(handler="catalog_verbs:run_get")

    agents = verbs.add_parser(
        "agents", help="the agents a workflow in a folder can name, as planning resolves them (docs/agents.md)"
    )
    agents.add_argument(
        "folder",
        metavar="DIR",
        type=Path,
        nargs="?",
        default=None,
        help="the folder of the workflow's entry file, whose agents/ comes first (default: the current directory)",
    )
    add_output(agents)
    agents.set_defaults(handler="catalog_verbs:run_agents")


_NOTEBOOK_WORKFLOW_HELP = (
    "with NOTEBOOK.ipynb: the %%%%workflow, %%%%script, %%%%flow or %%%%graph cell NAME to plan "
    "(needed when the notebook has several)"
)


def _planning(verbs: Any) -> None:
    validate = verbs.add_parser("validate", help="evaluate a workflow once and check the whole graph; stores nothing")
    validate.add_argument(
        "file",
        type=Path,
        help="entry .star file under the workspace, a SCRIPT.py (linted), a FILE.graph.yaml or a NOTEBOOK.ipynb",
    )
    validate.add_argument("--input", action="append", default=[], metavar="KEY=JSON", help=_INPUT_HELP)
    add_output(validate)
    validate.add_argument(
        "--flow", metavar="NAME", help="with FLOW.py: compile the Workflow NAME and check its manifest (docs/flows.md)"
    )
    validate.add_argument("--workflow", metavar="NAME", help=_NOTEBOOK_WORKFLOW_HELP)
    validate.set_defaults(handler="plan_verbs:run_validate")

    plan = verbs.add_parser("plan", help="validate, resolve agents and executables, freeze and store a plan")
    plan.add_argument(
        "file",
        type=Path,
        help="entry .star file under the workspace, a SCRIPT.py, a FILE.graph.yaml or a NOTEBOOK.ipynb",
    )
    plan.add_argument("--input", action="append", default=[], metavar="KEY=JSON", help=_INPUT_HELP)
    add_output(plan)
    plan.add_argument("--flow", metavar="NAME", help="with FLOW.py: plan the module's Workflow NAME as a flow run")
    plan.add_argument("--workflow", metavar="NAME", help=_NOTEBOOK_WORKFLOW_HELP)
    plan.set_defaults(handler="plan_verbs:run_plan")

    plans = verbs.add_parser("plans", help="list saved plans")
    add_output(plans)
    plans.set_defaults(handler="read_verbs:run_plans")


def _diff(verbs: Any) -> None:
    diff = verbs.add_parser(
        "diff",
        help="what changed between two plans, runs or graph digests",
        description=_DIFF,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("old", metavar="OLD", help="plan ID, graph digest (sha256:...) or run ID")
    diff.add_argument("new", metavar="NEW", help="plan ID, graph digest (sha256:...) or run ID")
    add_output(diff)
    diff.set_defaults(handler="diff_verbs:run_diff")


def _running(verbs: Any) -> None:
    run = verbs.add_parser(
        "run",
        help="confirm a plan's digest and run it, following its owner to the end (Ctrl-C detaches, never cancels)",
    )
    run.add_argument(
        "plan",
        help="plan ID or unique prefix, or a FILE.star, SCRIPT.py, FILE.graph.yaml or NOTEBOOK.ipynb (planned, "
        "its digest shown, and run)",
    )
    add_flags(run, RUN_FLAGS, front="cli")
    run.set_defaults(handler="run_verbs:run_run")

    resume = verbs.add_parser("resume", help="resume a cancelled or interrupted run from its frozen graph")
    resume.add_argument("run", help="run ID or unique prefix")
    add_flags(resume, RESUME_FLAGS, front="cli")
    resume.set_defaults(handler="run_verbs:run_resume")

    wait = verbs.add_parser("wait", help="block until a run stops (exit 0 success, 1 another outcome, 3 timeout)")
    wait.add_argument("run", help="run ID or unique prefix")
    wait.add_argument(
        "--timeout", type=seconds, default=None, metavar="SECONDS", help="give up after this long (exit 3)"
    )
    add_output(wait)
    wait.set_defaults(handler="follow_verbs:run_wait")


def _reading(verbs: Any) -> None:
    status = verbs.add_parser("status", help="one durable snapshot of a run (never takes ownership)")
    status.add_argument("run")
    add_output(status)
    status.set_defaults(handler="read_verbs:run_status")

    cancel = verbs.add_parser("cancel", help="durably request cancellation and wait for the owner's acknowledgement")
    cancel.add_argument("run")
    cancel.add_argument(
        "--wait",
        type=seconds,
        default=2.0,
        metavar="SECONDS",
        help="how long to wait for the acknowledgement (default 2)",
    )
    add_output(cancel, help_text="json: the request and its acknowledgement")
    cancel.set_defaults(handler="read_verbs:run_cancel")

    runs = verbs.add_parser("runs", help="list runs, newest last")
    runs.add_argument("--state", choices=[lc.value for lc in Lifecycle], help="only runs in this lifecycle")
    runs.add_argument("--limit", type=positive_int, default=50, help="the newest N runs (default 50)")
    add_output(runs)
    runs.set_defaults(handler="read_verbs:run_runs")

    result = verbs.add_parser("result", help="per node: state, attempts, exit, validated output, artifact paths")
    result.add_argument("run")
    add_output(result)
    result.set_defaults(handler="read_verbs:run_result")

    events = verbs.add_parser("events", help="the run's journal, one JSON event per line")
    events.add_argument("run")
    events.add_argument(
        "--follow",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep printing new events until the run completes; --no-follow (the default): print what the journal "
        "holds and exit",
    )
    events.add_argument("--after-seq", type=count, default=0, metavar="N")
    events.set_defaults(handler="read_verbs:run_events")

    logs = verbs.add_parser("logs", help="a node's stdout and stderr (latest attempt)")
    logs.add_argument("run")
    logs.add_argument("node")
    logs.add_argument("--stream", choices=("stdout", "stderr", "both"), default="both")
    logs.add_argument("--follow", action="store_true", help="keep printing while the node runs")
    logs.set_defaults(handler="read_verbs:run_logs")


def _deleting(verbs: Any) -> None:
    delete = verbs.add_parser("delete", help="delete a finished run or a saved plan")
    delete.add_argument("id", help="run or plan ID (or unique prefix)")
    delete.add_argument("--yes", action="store_true")
    delete.set_defaults(handler="delete_verbs:run_delete")

    prune = verbs.add_parser("prune", help="delete finished runs older than DAYS")
    prune.add_argument(
        "--older-than", type=days, required=True, metavar="DAYS", help="a finite number of days, 0 or more"
    )
    prune.add_argument("--yes", action="store_true")
    prune.add_argument(
        "--include-damaged",
        action="store_true",
        help="also delete damaged runs older than DAYS (their journal contradicts what was fsynced)",
    )
    prune.set_defaults(handler="delete_verbs:run_prune")


def _export(verbs: Any) -> None:
    export = verbs.add_parser(
        "export", help="write the workflow folder of a notebook (entry, %%%%star and %%%%py modules, agents/)"
    )
    export.add_argument("notebook", type=Path, metavar="NOTEBOOK.ipynb")
    export.add_argument(
        "dir", type=Path, metavar="DIR", help="target folder (created if missing); laid out as a module root"
    )
    export.add_argument(
        "--workflow", metavar="NAME", help="which %%%%workflow NAME cell (optional when the notebook has one)"
    )
    export.set_defaults(handler="notebook_verbs:run_export")


def _deciding(verbs: Any) -> None:
    approve = verbs.add_parser(
        "approve", help="decide a pending approval of a run (an approval node or a supervised launch)"
    )
    approve.add_argument("run", help="run ID or unique prefix")
    approve.add_argument("request", nargs="?", help="request ID or unique prefix; omit to list pending requests")
    approve.add_argument("--deny", action="store_true", help="deny instead of approving")
    approve.add_argument("--comment", help="recorded with the decision")
    approve.set_defaults(handler="policy_verbs:run_approve")

    answer = verbs.add_parser(
        "answer", help="answer a human step of an item-graph run that waits for a person (docs/graphs.md)"
    )
    answer.add_argument("run", help="run ID or unique prefix")
    answer.add_argument("step", help="the human step's id (or one loop round, STEP@N)")
    answer.add_argument(
        "fields", nargs="*", metavar="FIELD=VALUE", help="one per form field; VALUE is parsed as JSON like --input"
    )
    answer.add_argument("--comment", help="recorded with the answer")
    answer.set_defaults(handler="policy_verbs:run_answer")

    plan = verbs.add_parser("approve-plan", help="approve a graph digest for runs when plan approval is enforced")
    plan.add_argument("target", help="plan ID / prefix, or a graph digest (sha256:...)")
    plan.set_defaults(handler="policy_verbs:run_approve_plan")

    trust = verbs.add_parser("trust", help="trust a workspace: its project settings and hooks apply")
    trust.add_argument(
        "path", nargs="?", type=Path, default=None, help="a folder in the workspace (default: current directory)"
    )
    trust.set_defaults(handler="policy_verbs:run_trust")

    untrust = verbs.add_parser("untrust", help="stop trusting a workspace")
    untrust.add_argument("path", nargs="?", type=Path, default=None)
    untrust.set_defaults(handler="policy_verbs:run_untrust")


def _record(verbs: Any) -> None:
    record = verbs.add_parser(
        "record",
        help="turn a finished run into a regression test (recording + pytest file)",
        description=_RECORD,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    record.add_argument("run", metavar="RUN_ID", help="a finished run (ID or unique prefix)")
    record.add_argument("dir", metavar="DIR", type=Path, help="folder to write (created; files in it are replaced)")
    record.add_argument("--live-commands", action="store_true", help="the generated test runs command steps for real")
    add_output(record)
    record.set_defaults(handler="record_verbs:run_record")


def _mcp(verbs: Any) -> None:
    mcp = verbs.add_parser(
        "mcp", help="serve the workflow tools to an MCP host (Claude, Codex, Jupyter AI) over stdio (docs/mcp.md)"
    )
    mcp.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="the workspace whose workflows the tools see (default: the one holding the current directory)",
    )
    mcp.set_defaults(handler="mcp_verbs:run_mcp")


def _convert(verbs: Any) -> None:
    convert = verbs.add_parser(
        "convert",
        help="print the Starlark workflow equivalent to an item graph (agent, command, branch and output steps)",
    )
    convert.add_argument("file", type=Path, help="an item-graph document, FILE.graph.yaml")
    convert.set_defaults(handler="graph_verbs:convert_graph")
