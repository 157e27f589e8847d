"""The frozen workflow graph: inputs, node kinds, resolved executables and agents, limits.

Everything in :class:`Graph` is covered by the graph digest (see ``docs/digest.md``). Facts that
differ between two checkouts of the same project (absolute workspace paths, inode numbers,
modification times) live in the plan manifest instead, never here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.budget_spec import BudgetSpec
from rho_notebook.model.condition import Condition
from rho_notebook.model.fork import ForkRecord
from rho_notebook.model.reference import OutputRef, Template
from rho_notebook.model.schema import Scalar, Schema

__all__ = [
    "GRAPH_FORMAT",
    "InputDecl",
    "FrozenFile",
    "FrozenExecutable",
    "AgentNode",
    "CommandNode",
    "ShellNode",
    "ApprovalNode",
    "PythonArg",
    "PythonModule",
    "PythonNode",
    "PythonRuntime",
    "ItemNode",
    "ItemRoute",
    "ItemSettings",
    "Node",
    "ScriptSpec",
    "Placement",
    "placement_of",
    "resources_of",
    "ArgvPart",
    "EnvironmentPolicy",
    "SchedulerLimits",
    "Graph",
    "NAME_PATTERN",
]

GRAPH_FORMAT: Literal["rho-notebook/graph/v1"] = "rho-notebook/graph/v1"
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"


class InputDecl(FrozenModel):
    """One declared input and the value this plan was made with."""

    name: str
    type: Literal["string", "integer", "bool", "enum", "path"]
    """``path`` (script inputs): a canonical absolute path inside the workspace."""
    choices: tuple[Scalar, ...] = ()
    """Allowed values of an enum input, in declaration order."""
    required: bool
    default: Scalar = None
    value: Scalar
    """The validated value used for this plan (the supplied one, or the default)."""


class FrozenFile(FrozenModel):
    """A file whose content the plan pins: an executable or a script interpreter."""

    path: str
    """Canonical absolute path outside the workspace, or ``//``-relative path inside it."""
    in_workspace: bool
    sha256: str


class FrozenExecutable(FrozenModel):
    """The resolved first argv value, with the interpreter chain of a ``#!`` script."""

    file: FrozenFile
    interpreters: tuple[FrozenFile, ...] = ()
    """Interpreter files in launch order: for ``#!/usr/bin/env python3``, env then python3."""
    interpreter_args: tuple[str, ...] = ()
    """Arguments from the ``#!`` line after the interpreter (the name given to env included)."""


class _NodeBase(FrozenModel):
    name: str
    needs: tuple[str, ...] = ()
    """Sorted, de-duplicated names of nodes that must be terminal first."""
    when: Condition | None = None
    allow_failure: bool = False
    timeout_seconds: int
    max_output_bytes: int
    output: Schema | None = None


def _is_false(value: object) -> bool:
    return value is False


def _is_empty(value: object) -> bool:
    return value is None or value == ()


# Fields added after graphs were first stored are left out of the canonical encoding at their
# default (``exclude_if``), so every plan stored before them keeps its digest.

Placement = Literal["local", "any"]
"""Where a node's attempts may run: ``local`` with the run owner, ``any`` on a worker of a
distributed executor when the run has one (docs/distributed.md). Agent and approval nodes are
always local."""


def _is_any(value: object) -> bool:
    return value == "any"


def _is_exclusive(value: object) -> bool:
    return value == "exclusive"


class _RemotableNode(_NodeBase):
    """A node whose attempts may travel to a worker: command, shell and Python nodes."""

    placement: Placement = Field(default="any", exclude_if=_is_any)
    resources: tuple[tuple[str, int], ...] = Field(default=(), exclude_if=_is_empty)
    """Abstract worker resources one attempt holds, e.g. ``(("GPU", 1),)``; sorted by name,
    each amount positive. A distributed executor places the attempt on a worker that has them."""


class AgentNode(_NodeBase):
    kind: Literal["agent"] = "agent"
    agent: str
    """ID of the resolved agent in ``Graph.agents``."""
    prompt: Template
    access: Literal["read_only", "mutating"] = "mutating"
    reuse: bool = Field(default=False, exclude_if=_is_false)
    """Read-only nodes only: a stored success with the same reuse key is taken instead of a launch."""
    budget: BudgetSpec | None = Field(default=None, exclude_if=_is_empty)
    """This node's own spending limits (``budget = {...}``), beside the run's."""


ArgvPart = Union[str, Template]


class CommandNode(_RemotableNode):
    kind: Literal["command"] = "command"
    argv: tuple[ArgvPart, ...]
    """argv[0] is the literal name as written; later parts may be templates with references."""
    cwd: str
    """Working directory, ``//``-relative to the workspace."""
    executable: FrozenExecutable


class ShellNode(_RemotableNode):
    kind: Literal["shell"] = "shell"
    executable: FrozenExecutable
    arguments: tuple[str, ...]
    command: str
    cwd: str


class ApprovalNode(_NodeBase):
    kind: Literal["approval"] = "approval"
    prompt: Template


class PythonArg(FrozenModel):
    """One keyword argument of a Python node's function: a literal JSON value or an output reference."""

    name: str
    value: Any = None
    """The literal (JSON-shaped, no floats) when ``ref`` is None."""
    ref: OutputRef | None = Field(default=None, exclude_if=_is_empty)


class PythonModule(FrozenModel):
    """A Python module frozen into the plan: a ``%%py`` cell or a project file, by label."""

    label: str
    """``//nodes/stats.py``."""
    name: str
    """The dotted import name under the workspace root: ``nodes.stats``."""
    sha256: str
    text: str


class PythonRuntime(FrozenModel):
    """The interpreter every Python node of the graph runs in, and what its environment holds."""

    interpreter: FrozenExecutable
    version: str
    """``platform.python_version()`` of the interpreter, e.g. ``3.11.9``."""
    sys_path: tuple[str, ...] = ()
    """The interpreter's own ``sys.path`` when started by its path with ``-I``. The node's process
    is launched through a verified handle (``/proc/self/fd/N``), from which a venv's interpreter
    cannot find its ``pyvenv.cfg``, so the harness sets this path itself."""
    site_dirs: tuple[str, ...] = ()
    """The site directories in ``sys_path`` (their ``.pth`` files are processed by the harness)."""
    distributions: tuple[tuple[str, str], ...] = ()
    """(name, version) of every distribution installed in that environment, sorted."""
    harness_sha256: str
    """Digest of ``rho_notebook/source/_py_harness.py`` at plan time; a different harness fails closed."""


class PythonNode(_RemotableNode):
    kind: Literal["python"] = "python"
    module: str
    """Label of the module that defines ``function`` (one of ``Graph.python_modules``)."""
    function: str
    args: tuple[PythonArg, ...] = ()
    """Sorted by name."""
    cwd: str
    """Working directory, ``//``-relative to the workspace."""
    access: Literal["read_only", "mutating"] = "mutating"
    """For Python nodes read-only is the author's declaration; it is not verified."""
    modules: tuple[str, ...]
    """Labels of the frozen modules this node may import (its module and what it imports by label)."""
    reuse: bool = Field(default=False, exclude_if=_is_false)
    reuse_inputs: tuple[FrozenFile, ...] = Field(default=(), exclude_if=_is_empty)
    """Workspace files whose content joins the reuse key (digests re-read at launch)."""

    def references(self) -> tuple[OutputRef, ...]:
        return tuple(arg.ref for arg in self.args if arg.ref is not None)


class ItemRoute(FrozenModel):
    """One out-edge of an item-graph step, as frozen: the node it leads to and its condition."""

    to: str
    """The target node (``step`` or ``step@N`` for a round of a loop)."""
    when: dict[str, Any] | None = None
    """The edge's ``when`` (``{field, op, value}``, see ``model/itemgraph.Condition``); None: always."""


ItemStepKind = Literal[
    "agent", "model", "command", "code", "set", "transform", "branch", "join", "human", "aggregate", "output"
]


class ItemNode(_NodeBase):
    """One step of an item graph (docs/graphs.md), or one round of a looped step. It receives the
    item from the in-edges that delivered and its value is the item it passes on."""

    kind: Literal["item"] = "item"
    step: str
    """The step's id in the document (``answer RUN STEP`` and the views name it)."""
    round: int | None = None
    """The loop round (1-based) of a per-round instance ``step@N``; None outside loops."""
    step_kind: ItemStepKind
    params: dict[str, Any] = {}
    """The step's parameters as written (mappings resolved per attempt)."""
    sources: tuple[str, ...] = ()
    """The nodes of the in-edges, in document edge order (a join merges in this order)."""
    routes: tuple[ItemRoute, ...] = ()
    """The out-edges in document order (a branch takes the first whose condition holds)."""
    executable: FrozenExecutable | None = None
    """``command`` steps: argv[0] resolved and pinned when planned."""
    cwd: str = "//"
    agent: str | None = None
    """``agent`` steps and ``model`` steps that name an agent: its id in ``Graph.agents``."""
    access: Literal["read_only", "mutating"] = "read_only"
    budget: BudgetSpec | None = Field(default=None, exclude_if=_is_empty)
    """``agent`` and ``model`` steps: the step's own ``budget:`` (docs/graphs.md), beside the run's."""

    @property
    def pure(self) -> bool:
        """Whether an attempt has no effect outside the run: the owner computes it (``set``,
        ``branch``, ``join``, ``output``), a sandboxed Starlark worker does (``code``) or a person
        is asked (``human``). Such an attempt is safe to start again after a crash, so its launch
        need not be durable first and recovery resets it without ``--recover-uncertain``."""
        return self.acting_kind not in ("agent", "model", "command")

    @property
    def acting_kind(self) -> str:
        """The kind whose launches an attempt makes: an ``aggregate`` step's inner kind (it runs
        that step once per element), else ``step_kind``."""
        if self.step_kind == "aggregate":
            return str(self.params["step"]["kind"])
        return self.step_kind

    @property
    def acting_params(self) -> dict[str, Any]:
        """The params of the kind :attr:`acting_kind` names (an aggregate's inner step's)."""
        if self.step_kind == "aggregate":
            return dict(self.params["step"]["params"])
        return self.params

    @property
    def slot(self) -> Literal["agent", "command", "none"]:
        """Which scheduler limit an attempt counts against: agents, commands, or none (steps the
        owner computes itself, and human steps, which wait without cost)."""
        if self.acting_kind in ("agent", "model"):
            return "agent"
        if self.acting_kind == "command":
            return "command"
        return "none"


class ItemSettings(FrozenModel):
    """What an item-graph run needs beyond its nodes."""

    item_bytes: int
    """The cap on the carried item (canonical JSON bytes); a step whose item is over it fails."""


Node = Annotated[
    AgentNode | CommandNode | ShellNode | ApprovalNode | PythonNode | ItemNode, Field(discriminator="kind")
]


def placement_of(node: Node) -> Placement:
    """Where ``node``'s attempts may run; agent and approval nodes are always ``local``."""
    if isinstance(node, _RemotableNode):
        return node.placement
    return "local"


def resources_of(node: Node) -> dict[str, int]:
    """The worker resources one attempt of ``node`` asks for (empty: any worker)."""
    if isinstance(node, _RemotableNode):
        return dict(node.resources)
    return {}


class ScriptSpec(FrozenModel):
    """A Python script run (the script tier): the script is a module frozen in
    ``Graph.python_modules`` and runs in ``Graph.python``'s interpreter; its steps become nodes
    while it runs (docs/scripts.md)."""

    module: str
    """Label of the script, e.g. ``//scripts/review.py``."""
    cwd: str = "//"
    """Working directory of the script process, ``//``-relative."""
    timeout_seconds: int = 86_400
    """Wall-time limit of the script process (steps have their own)."""
    max_output_bytes: int = 1_048_576
    """Retained stdout/stderr of the script process, per stream."""
    flow: str | None = Field(default=None, exclude_if=_is_empty)
    """A flow run (docs/flows.md): the name of the ``Workflow`` the script module defines, run on
    the initial session; None for a plain script run."""


class EnvironmentPolicy(FrozenModel):
    """Which variables of the launching process a command node receives (never source-controlled)."""

    names: tuple[str, ...] = ("HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER")
    prefixes: tuple[str, ...] = ("LC_",)
    added: tuple[str, ...] = ("RHO_NODE", "RHO_RUN_ID")
    """Variables the runner sets itself for every command node."""


class SchedulerLimits(FrozenModel):
    total: int = 4
    agent: int = 4
    command: int = 2
    checkout_readers: int = 4
    """How many read-only nodes may share the checkout at once (mutating nodes hold it alone)."""


class Graph(FrozenModel):
    """The normalised, frozen workflow graph. Its canonical encoding is the graph digest's input."""

    format: Literal["rho-notebook/graph/v1"] = GRAPH_FORMAT
    name: str
    inputs: tuple[InputDecl, ...]
    nodes: tuple[Node, ...]
    """Sorted by name."""
    agents: tuple[AgentDefinition, ...] = ()
    """Resolved definitions of every agent a node names, sorted by id."""
    environment: EnvironmentPolicy = EnvironmentPolicy()
    scheduler: SchedulerLimits = SchedulerLimits()
    python: PythonRuntime | None = Field(default=None, exclude_if=_is_empty)
    """The interpreter of the Python nodes; None when the graph has none."""
    python_modules: tuple[PythonModule, ...] = Field(default=(), exclude_if=_is_empty)
    """Every Python module a node may import, sorted by label."""
    script: ScriptSpec | None = Field(default=None, exclude_if=_is_empty)
    """Set for a script run: ``nodes`` is empty and the steps appear as nodes while it runs."""
    items: ItemSettings | None = Field(default=None, exclude_if=_is_empty)
    """Set for an item-graph run (docs/graphs.md): every node is an :class:`ItemNode`."""
    checkout: Literal["exclusive", "shared"] = Field(default="exclusive", exclude_if=_is_exclusive)
    """``shared``: the workflow declares that its nodes do not share one local checkout (each
    worker of a distributed executor has its own copy), so mutating nodes take no cross-host
    checkout lock and may run remotely. ``exclusive`` (default): the checkout lock rules hold."""
    fork: ForkRecord | None = Field(default=None, exclude_if=_is_empty)
    """Set for a fork's derived plan (docs/fork.md): what it takes from its source run."""
    budget: BudgetSpec | None = Field(default=None, exclude_if=_is_empty)
    """The run's spending limits in the source (``define(budget=)``, ``BUDGET``; docs/usage.md)."""

    def python_module(self, label: str) -> PythonModule:
        for module in self.python_modules:
            if module.label == label:
                return module
        msg = f"no Python module {label!r} frozen in workflow {self.name!r}"
        raise KeyError(msg)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        msg = f"no node named {name!r} in workflow {self.name!r}"
        raise KeyError(msg)

    def agent(self, agent_id: str) -> AgentDefinition:
        for agent in self.agents:
            if agent.id == agent_id:
                return agent
        msg = f"no agent {agent_id!r} frozen in workflow {self.name!r}"
        raise KeyError(msg)

    def input_values(self) -> dict[str, Scalar]:
        return {decl.name: decl.value for decl in self.inputs}

    def edge_count(self) -> int:
        return sum(len(node.needs) for node in self.nodes)
