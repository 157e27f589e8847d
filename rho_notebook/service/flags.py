"""The flags of ``run`` and ``resume``, and the ``--decide`` parser, written once for both front
ends that take them: the CLI (``rho-notebook run|resume``) and the magics (``%workflow run|resume``).

A :class:`Flag` holds a flag's spelling, type, choices and default once; its help text is given per
front end where the two say something different (the notebook asks with a plan card rather than a
prompt, prints progress only with ``--wait``). A flag only one front end has (``--detach`` and
``--run-id`` on the command line, where a run is otherwise followed to its end; ``--workflow`` and
``--output-notebook`` with a notebook file) names that front end. The parity test
(``tests/kernel/test_magics.py``) checks that every CLI flag is a magic flag.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from rho_notebook.errors import ArgumentError
from rho_notebook.model.budget import NAMES, Limits, limit_problem, parse_budget
from rho_notebook.model.spelling import meant

__all__ = [
    "Front",
    "Decision",
    "DECISIONS",
    "Flag",
    "VerbParser",
    "options_of",
    "MODES",
    "RUN_FLAGS",
    "RESUME_FLAGS",
    "BUDGET_FLAGS",
    "TRY_FLAGS",
    "add_flags",
    "add_output",
    "parse_decisions",
    "parse_budgets",
    "json_value",
    "seconds",
    "check_keywords",
    "given_run_id",
]

Front = Literal["cli", "notebook"]
Decision = Literal["rerun", "skip"]
"""A halted script step decided (``--decide STEP=rerun|skip``, ``rho.resume(decisions=...)``)."""
DECISIONS: tuple[Decision, ...] = get_args(Decision)
"""The words of :data:`Decision`, in the order messages list them."""

MODES = ("auto", "plan", "supervised")
"""The permission modes a run may be started in (docs/approvals.md)."""


_SECONDS = "give a finite number, 0 or more"
_AT_LEAST_ONE = "give a whole number, 1 or more"


def seconds(text: str) -> float:
    """A finite number of seconds, 0 or more (``--approval-timeout``, ``cancel --wait``); argparse
    turns the :class:`argparse.ArgumentTypeError` into a usage error naming the flag."""
    try:
        value = float(text)
    except ValueError:
        msg = f"{text!r} is not a number"
        raise argparse.ArgumentTypeError(msg) from None
    if not math.isfinite(value) or value < 0:
        msg = f"{text!r}: {_SECONDS}"
        raise argparse.ArgumentTypeError(msg)
    return value


def check_keywords(
    *,
    durations: Mapping[str, Any] | None = None,
    at_least_one: Mapping[str, Any] | None = None,
    choices: Mapping[str, tuple[Any, Sequence[str]]] | None = None,
    mappings: Mapping[str, Any] | None = None,
) -> None:
    """The Python API's keywords held to the rules of the flags they match (None: not given):
    ``durations`` as :func:`seconds`, ``at_least_one`` as :func:`positive_int`, ``choices`` (name ->
    (value, the choices)) as a flag's choices, ``mappings`` as ``--input``'s pairs (a dict).

    Raises ArgumentError: ``name=value: what to give``, the first keyword that breaks its rule."""
    for name, value in (durations or {}).items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if value is not None and not (number and math.isfinite(value) and value >= 0):
            raise ArgumentError(f"{name}={value!r}: {_SECONDS}")
    for name, value in (at_least_one or {}).items():
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not (whole and value >= 1):
            raise ArgumentError(f"{name}={value!r}: {_AT_LEAST_ONE}")
    for name, (value, allowed) in (choices or {}).items():
        if value not in allowed:
            raise ArgumentError(f"{name}={value!r}: one of {', '.join(map(repr, allowed))}")
    for name, value in (mappings or {}).items():
        if value is not None and not isinstance(value, Mapping):
            raise ArgumentError(f"{name}={value!r}: give a dict of {name} by name")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        msg = f"{text!r} is not a whole number"
        raise argparse.ArgumentTypeError(msg) from None


def positive_int(text: str) -> int:
    """A whole number, 1 or more (``runs --limit``)."""
    value = _integer(text)
    if value < 1:
        msg = f"{text!r}: {_AT_LEAST_ONE}"
        raise argparse.ArgumentTypeError(msg)
    return value


def count(text: str) -> int:
    """A whole number, 0 or more (``events --after-seq``)."""
    value = _integer(text)
    if value < 0:
        msg = f"{text!r}: give a whole number, 0 or more"
        raise argparse.ArgumentTypeError(msg)
    return value


def given_run_id(text: str) -> str:
    """``run --run-id``: a canonical UUIDv7 (:func:`~rho_notebook.runtime.owner.check_run_id`);
    argparse turns anything else into a usage error naming the flag (exit 2)."""
    from rho_notebook.errors import BadArgument
    from rho_notebook.runtime.owner import check_run_id  # only when the flag is given: a heavy import

    try:
        return check_run_id(text)
    except BadArgument as err:
        raise argparse.ArgumentTypeError(err.message) from None


class VerbParser(argparse.ArgumentParser):
    """An argument parser that keeps, in public attributes, its verbs' parsers and the option
    strings of its flags, so that :func:`options_of` (completion, the CLI/magic parity test) reads
    them without reaching into argparse's private state. Both front ends' parsers are one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.option_names: list[str] = []
        """Every option string added (``--yes``, ``-h``), in order."""
        self.verbs: dict[str, argparse.ArgumentParser] = {}
        """Verb -> its parser (filled by the subparsers action :meth:`add_subparsers` returns)."""
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.option_names.extend(action.option_strings)
        return action

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.verbs = action.choices
        return action


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$", re.S)


def with_suggestion(message: str) -> str:
    """argparse's ``invalid choice: 'stauts' (choose from ...)`` with the choice it most likely
    misspells (``; did you mean 'status'?``); any other message as it is. Both front ends' usage
    errors pass through it."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return message
    close = meant(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
    return f"{message}; did you mean {close!r}?" if close else message


def add_output(parser: argparse.ArgumentParser, *, help_text: str | None = None) -> None:
    """``--output text|json`` (default text) of a verb that answers once: the one declaration the
    CLI's verbs and the magics' share (``run``'s own ``--output`` is :data:`RUN_OUTPUT`)."""
    parser.add_argument("--output", choices=("text", "json"), default="text", help=help_text)


def options_of(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """verb -> its ``--`` option strings, sorted (for completion and for the CLI parity test)."""
    verbs: dict[str, argparse.ArgumentParser] = getattr(parser, "verbs", {})
    return {
        verb: sorted(name for name in getattr(sub, "option_names", ()) if name.startswith("--"))
        for verb, sub in verbs.items()
    }


@dataclass(frozen=True)
class Flag:
    """One option of a verb, as :meth:`argparse.ArgumentParser.add_argument` takes it."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    """Everything but the help: ``action``, ``type``, ``choices``, ``default``, ``metavar``."""
    cli: str | None = None
    """The help text of ``rho-notebook VERB --help`` (None: the flag is listed without one)."""
    notebook: str | None = None
    """The help text of ``%workflow VERB --help``."""
    fronts: frozenset[Front] = frozenset({"cli", "notebook"})
    """The front ends that take the flag."""

    def add(self, parser: argparse.ArgumentParser, *, front: Front) -> None:
        if front in self.fronts:
            parser.add_argument(self.name, **self.options, help=self.cli if front == "cli" else self.notebook)


def add_flags(parser: argparse.ArgumentParser, flags: Sequence[Flag], *, front: Front) -> None:
    """Add ``flags`` (those ``front`` takes) to a verb's parser, in order."""
    for flag in flags:
        flag.add(parser, front=front)


_STORE_TRUE: Mapping[str, Any] = {"action": "store_true"}

YES = Flag(
    "--yes",
    _STORE_TRUE,
    cli="confirm the digest without asking (required without a terminal)",
    notebook="confirm the digest (otherwise a plan card asks)",
)
PROGRESS_OUTPUT = Flag(
    "--output",
    {"choices": ("text", "jsonl"), "default": "text"},
    notebook="with --wait: how progress is printed",
    fronts=frozenset({"notebook"}),
)
RUN_OUTPUT = Flag(
    "--output",
    {"choices": ("text", "jsonl", "json"), "default": "text"},
    cli="text: progress lines and a summary; jsonl: each journal record as it is appended; json: one "
    "object at the end (with --detach: {run_id, state} at once)",
    fronts=frozenset({"cli"}),
)
MODE = Flag(
    "--mode",
    {"choices": MODES, "default": "auto"},
    cli="permission mode for command launches (default auto; recorded in the run)",
)
APPROVAL_TIMEOUT = Flag(
    "--approval-timeout",
    {"type": seconds, "default": 0.0, "metavar": "SECONDS"},
    cli="with no terminal to ask, how long a supervised launch waits for `rho-notebook approve` before failing "
    "closed (default 0)",
)
WAIT = Flag(
    "--wait",
    _STORE_TRUE,
    cli="no progress lines: block until the run stops, exit by its outcome (Ctrl-C stops waiting; the run goes on)",
    notebook="block the cell and print progress until the run stops",
)
DETACH = Flag(
    "--detach",
    _STORE_TRUE,
    cli="start the run's owner, print the run ID and exit 0 at once (follow later: events --follow, wait)",
    fronts=frozenset({"cli"}),
)
RUN_ID = Flag(
    "--run-id",
    {"type": given_run_id, "default": None, "metavar": "UUIDv7"},
    cli="the new run's ID, announced before it exists: a canonical UUIDv7 no run has (else exit 2, taken: 3)",
    fronts=frozenset({"cli"}),
)
NO_REUSE = Flag(
    "--no-reuse",
    _STORE_TRUE,
    cli="launch every node, even a `reuse = True` node whose stored success has the same reuse key",
    notebook="launch every node, even unchanged `reuse = True` nodes",
)
FLOW = Flag(
    "--flow",
    {"metavar": "NAME"},
    cli="with FLOW.py: run the module's Workflow NAME as a flow run (docs/flows.md)",
    notebook="with a FLOW.py file: its Workflow NAME as a flow run (docs/flows.md); a %%%%flow cell needs none",
)
EXECUTOR = Flag(
    "--executor",
    {"default": None, "metavar": "local|dask[=ADDRESS]"},
    cli="where command, shell and python nodes run: local (default), or on a Dask cluster "
    "(dask: $RHO_NOTEBOOK_DASK_SCHEDULER, settings dask_scheduler, else a LocalCluster for the run; "
    "docs/distributed.md)",
    notebook="where command, shell and python nodes run (docs/distributed.md)",
)
NOTEBOOK_WORKFLOW = Flag(
    "--workflow",
    {"metavar": "NAME"},
    cli="with NOTEBOOK.ipynb: which %%%%workflow NAME cell (optional when it has one)",
    fronts=frozenset({"cli"}),
)
OUTPUT_NOTEBOOK = Flag(
    "--output-notebook",
    {"default": None, "metavar": "OUT.ipynb"},
    cli="with NOTEBOOK.ipynb: follow the run to its end, then write a copy of the notebook whose workflow cells "
    "carry the run's final DAG and result (not with --detach; docs/notebook.md)",
    fronts=frozenset({"cli"}),
)
INPUT = Flag(
    "--input",
    {"action": "append", "default": [], "metavar": "KEY=JSON"},
    cli="with a FILE.star, SCRIPT.py, FILE.graph.yaml or NOTEBOOK.ipynb: an input value (for a notebook, "
    "overrides the cell's --input and its parameters cell)",
    notebook="with a workflow name: an input value for planning",
)
_RECOVER_HELP = "after inspection: stop leftover processes and rerun attempts without a journaled result"
RECOVER_UNCERTAIN = Flag("--recover-uncertain", _STORE_TRUE, cli=_RECOVER_HELP, notebook=_RECOVER_HELP)
DECIDE = Flag(
    "--decide",
    {"action": "append", "default": [], "metavar": "STEP=rerun|skip"},
    cli="script runs: decide a halted step (rerun: one new attempt; skip: accept its stored result); repeatable",
    notebook="script runs: resolve a halted step (repeatable); authorises exactly one attempt",
)


def _limit(name: str, text: str) -> float:
    """``--max-cost`` / ``--max-wall``: a limit as :func:`limit_problem` checks every budget's."""
    try:
        value = float(text)
    except ValueError:
        msg = f"{text!r} is not a number"
        raise argparse.ArgumentTypeError(msg) from None
    problem = limit_problem(name, value)
    if problem is not None:
        msg = f"{text!r}: {problem}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _dollars(text: str) -> float:
    return _limit("max_cost_usd", text)


def _wall(text: str) -> float:
    return _limit("max_wall_seconds", text)


def _tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        msg = f"{text!r} is not a whole number of tokens"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 1:
        msg = f"{text!r}: give a whole number, 1 or more"
        raise argparse.ArgumentTypeError(msg)
    return value


_BUDGET_DOC = " (journaled: a crash never resets it; docs/usage.md#budgets)"
MAX_TOKENS = Flag(
    "--max-tokens",
    {"type": _tokens, "default": None, "metavar": "N"},
    cli="halt the run (needs_decision) before a model call could take its input+output tokens past N" + _BUDGET_DOC,
    notebook="halt before a model call could take the run's tokens past N",
)
MAX_COST = Flag(
    "--max-cost",
    {"type": _dollars, "default": None, "metavar": "USD"},
    cli="halt before a model call could take the run's cost past USD (every model needs a price in settings "
    "`prices`, else exit 3)" + _BUDGET_DOC,
    notebook="halt before a model call could take the run's cost past USD (every model needs a price)",
)
MAX_WALL = Flag(
    "--max-wall",
    {"type": _wall, "default": None, "metavar": "SECONDS"},
    cli="halt before a model call once the run has executed SECONDS (over all its executions)" + _BUDGET_DOC,
    notebook="halt before a model call once the run has executed SECONDS",
)
RAISE_BUDGET = Flag(
    "--raise-budget",
    {"action": "append", "default": [], "metavar": "[NODE:]tokens=N|cost=USD|wall=S"},
    cli="set a limit of a run halted by its budget (NODE: that node's budget) and go on; repeatable",
    notebook="set a limit of a run halted by its budget and go on; repeatable",
)
BUDGET_FLAGS = (MAX_TOKENS, MAX_COST, MAX_WALL)
"""A run's budget at start: ``run``, ``fork`` (and ``resume``, where it is a raise)."""

RUN_FLAGS: tuple[Flag, ...] = (
    YES,
    PROGRESS_OUTPUT,
    RUN_OUTPUT,
    MODE,
    APPROVAL_TIMEOUT,
    WAIT,
    DETACH,
    RUN_ID,
    NO_REUSE,
    FLOW,
    EXECUTOR,
    NOTEBOOK_WORKFLOW,
    OUTPUT_NOTEBOOK,
    INPUT,
    *BUDGET_FLAGS,
)
"""``run PLAN|FILE.star|SCRIPT.py|FILE.graph.yaml|NOTEBOOK.ipynb`` and ``%workflow run PLAN|NAME``
(after the positional)."""

RESUME_FLAGS: tuple[Flag, ...] = (
    replace(YES, cli=None, notebook=None),
    RECOVER_UNCERTAIN,
    DECIDE,
    PROGRESS_OUTPUT,
    RUN_OUTPUT,
    replace(APPROVAL_TIMEOUT, cli=None),
    replace(
        EXECUTOR,
        cli="where this resume runs command, shell and python nodes (default: where the run ran; docs/distributed.md)",
    ),
    WAIT,
    DETACH,
    *BUDGET_FLAGS,
    RAISE_BUDGET,
)
"""``resume RUN`` and ``%workflow resume RUN``."""

TRY_FLAGS: tuple[Flag, ...] = (
    replace(YES, notebook="confirm the derived plan's digest (otherwise a plan card asks)"),
    MODE,
    PROGRESS_OUTPUT,
    APPROVAL_TIMEOUT,
    WAIT,
)
"""``%workflow try NODE`` (the notebook's verb: run one node from an earlier run's values)."""


def json_value(text: str | bytes, *, where: str) -> Any:
    """JSON text a person or a client gave, parsed as JSON is written: ``fork --value`` (the
    CLI's and the magic's), ``--value-file``'s contents, a REST request body. ``NaN`` and
    ``Infinity``, which Python's ``json`` takes, are refused here, as no JSON value, rather than
    later by what meets them (a fork refused them as a value that is not JSON data).

    Raises
    ------
    ArgumentError
        ``{where} is not JSON: ...`` (the parser's reason), or ``{where} nests too deeply to parse``.
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, _no_constant's
        msg = f"{where} is not JSON: {err}"
        raise ArgumentError(msg) from None
    except RecursionError:
        msg = f"{where} nests too deeply to parse; send a flatter value"
        raise ArgumentError(msg) from None


def _no_constant(name: str) -> Any:
    msg = f"{name} is no JSON value (JSON has no NaN or Infinity)"
    raise ValueError(msg)


def parse_decisions(given: Sequence[str]) -> dict[str, Decision]:
    """``--decide STEP=rerun|skip`` values as {STEP: decision}: one decision per halted step.

    Raises
    ------
    ArgumentError
        A value is not ``STEP=rerun`` or ``STEP=skip``, or names a step twice (a usage error: the
        CLI exits 2, a magic raises ``UsageError``).
    """
    decisions: dict[str, Decision] = {}
    for item in given:
        step, sep, decision = item.partition("=")
        if not sep or not step or decision not in DECISIONS:
            msg = f"--decide {item!r}: write --decide STEP=rerun or --decide STEP=skip"
            raise ArgumentError(msg)
        if step in decisions:
            msg = f"--decide names step {step!r} twice; give one decision per halted step"
            raise ArgumentError(msg)
        decisions[step] = DECISIONS[DECISIONS.index(decision)]  # the Literal itself, for the type
    return decisions


def parse_budgets(
    *,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    max_wall: float | None = None,
    raises: Sequence[str] = (),
) -> dict[str, Limits]:
    """Scope (``""``: the run, else a node) -> the limits ``--max-tokens/--max-cost/--max-wall`` and
    ``--raise-budget [NODE:]tokens=N|cost=USD|wall=S`` set (scopes without any are left out).

    Raises
    ------
    ArgumentError
        A ``--raise-budget`` value of another shape, or a limit that is not a number above 0.
    """
    given: dict[str, dict[str, Any]] = {"": {}}
    for name, value in (("max_tokens", max_tokens), ("max_cost_usd", max_cost), ("max_wall_seconds", max_wall)):
        if value is not None:
            given[""][name] = value
    for item in raises:
        head, sep, number = item.partition("=")
        scope, _, unit = head.rpartition(":")
        if not sep or unit not in NAMES:
            msg = f"--raise-budget {item!r}: write tokens=N, cost=USD or wall=SECONDS (NODE:tokens=N for a node's)"
            raise ArgumentError(msg)
        try:
            parsed = parse_budget({unit: _number(number)}, where=f"--raise-budget {item}")
        except ValueError as err:
            raise ArgumentError(str(err)) from None
        given.setdefault(scope, {}).update(parsed.fields())
    return {scope: Limits(**fields) for scope, fields in given.items() if fields}


def _number(text: str) -> float | int | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text
