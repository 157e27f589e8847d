"""Workflow cells: what ``%%workflow``, ``%%star``, ``%%py`` and ``%%agent`` cells hold, and the
source a set of them plans as. Pure data (no IPython); the kernel session and the exporter share it.

Module text. A ``%%workflow`` or ``%%star`` cell becomes a Starlark module whose first line is the
magic line turned into a comment (``# %%workflow quickstart``) followed by the cell body, so that
line N of the module is line N of the cell: diagnostics, the stored plan source and the exported
file all number lines as the notebook does. A ``%%py`` cell's module is its body exactly as
written (no comment line is added, so the frozen module is the text a person wrote and would
save as a file); line N of the module is line N + 1 of the cell, so diagnostics (and, in the
kernel, tracebacks) are shifted down by one line to point at the cell. A ``%%script NAME`` cell's
module is likewise its body exactly as written (the script file ``NAME.py``), shifted by one
line. An ``%%agent`` cell's body is the agent file itself
(it must start with its ``---`` frontmatter), so its diagnostics are shifted down by one line to
point at the cell.

Labels. A ``%%star LABEL`` module is an overlay at LABEL (relative to the workspace root, like
every module label); it shadows a file with the same label. A ``%%py LABEL`` module (LABEL ends
in ``.py`` and every part of it is a Python identifier, so that it imports as a dotted name:
``//nodes/stats.py`` -> ``nodes.stats``) is an overlay in the same way, next to the ``%%star``
modules. The entry module of a ``%%workflow NAME`` cell is labelled
``//<notebook folder>/<NAME>.star``, its workflow folder is the notebook's folder, and the
``%%agent`` cells are the highest-precedence agent catalog root. A ``%%script NAME`` cell is
labelled ``//<notebook folder>/<NAME>.py`` (so NAME is a Python identifier in lower case: the
script is a module like any other) and shares the namespace of workflow names: a later
``%%script NAME`` replaces an earlier ``%%workflow NAME`` and the other way round, and
``%workflow run NAME`` plans whichever the notebook holds. A script cell is never executed in the
kernel (scripts run in their own interpreter process, docs/scripts.md).

A ``%%flow NAME`` cell is a script cell whose module defines the ``Workflow`` NAME (docs/flows.md):
it is held, labelled and exported as ``%%script NAME`` is, and plans as a flow run of NAME.

A ``%%graph NAME`` cell is an item-graph document (docs/graphs.md), its body exactly as written
(the file ``NAME.graph.yaml``), labelled ``//<notebook folder>/<NAME>.graph.yaml`` and shifted by one
line as a script is. It shares the namespace of workflow names too. It is validated
when the cell runs (:func:`check_graph_cell`) and plans and runs as the document it holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rho_notebook.agents.definition import is_agent_id, parse_agent_definition
from rho_notebook.errors import ArgumentError, Diagnostic, InvalidWorkflow, NameMismatch
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.itemgraph import ItemGraph
from rho_notebook.model.spelling import meant
from rho_notebook.planning.inputs import parse_input_args
from rho_notebook.planning.itemgraph import lint_graph
from rho_notebook.service.cell_args import (
    agent_header,
    flow_header,
    graph_header,
    py_header,
    script_header,
    star_header,
    workflow_header,
)
from rho_notebook.source.labels import SourceText, check_label
from rho_notebook.source.limits import load_limits
from rho_notebook.source.pymodules import check_module_label, module_name

__all__ = [
    "CellKind",
    "Cell",
    "WorkflowCell",
    "ModuleCell",
    "PythonCell",
    "ScriptCell",
    "FlowCell",
    "GraphCell",
    "AgentCell",
    "CellSet",
    "NotebookSource",
    "normalize_body",
    "split_cell",
    "parse_cell",
    "agent_definition",
    "check_graph_cell",
    "inputs_text",
    "renumber",
    "NAME_RE",
    "SCRIPT_NAME_RE",
]

CellKind = Literal["workflow", "star", "py", "agent", "script", "flow", "graph"]
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
SCRIPT_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
"""A ``%%script NAME``: a workflow name that is also a Python module name (no ``-``)."""
_MAGIC = re.compile(r"^%%(workflow|star|py|agent|script|flow|graph)(?:\s+(.*))?$")


def normalize_body(body: str) -> str:
    """One canonical text per cell body: ``\\n`` line ends, no trailing blank lines, final newline."""
    text = body.replace("\r\n", "\n").replace("\r", "\n")
    text = text.rstrip("\n")
    return text + "\n" if text else ""


def split_cell(source: str) -> tuple[CellKind, str, str] | None:
    """(kind, magic arguments, body) of a workflow cell's full source; None for other cells.

    Leading blank lines are ignored, as IPython ignores them before a cell magic.
    """
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return None
    match = _MAGIC.match(lines[0].rstrip())
    if match is None:
        return None
    kind: CellKind = match.group(1)  # type: ignore[assignment]
    return kind, (match.group(2) or "").strip(), "\n".join(lines[1:])


def _header(kind: str, args: str) -> str:
    return f"%%{kind} {args}".rstrip()


@dataclass(frozen=True)
class WorkflowCell:
    """A ``%%workflow [NAME] [--input KEY=JSON]...`` cell."""

    name: str | None
    """NAME from the magic line (None when omitted; the graph's name is used once validated)."""
    args: str
    """The magic's arguments as written."""
    body: str
    inputs: dict[str, Any]
    """Parsed ``--input`` values: the defaults whenever this workflow is validated or planned."""
    display: str
    """How diagnostics name this cell (``cell In[3]``, ``01_quickstart.ipynb cell 4``)."""

    @property
    def text(self) -> str:
        return f"# {_header('workflow', self.args)}\n{self.body}"

    def named(self, name: str) -> WorkflowCell:
        return WorkflowCell(name=name, args=self.args, body=self.body, inputs=self.inputs, display=self.display)


@dataclass(frozen=True)
class _OverlayCell:
    """A cell whose module planning reads before the workspace's file of the same label."""

    label: str
    body: str
    display: str

    @property
    def text(self) -> str:
        return self.body

    def source(self) -> SourceText:
        return SourceText(label=self.label, text=self.text, display=self.display)


@dataclass(frozen=True)
class ModuleCell(_OverlayCell):
    """A ``%%star LABEL`` cell: a module that workflows load by LABEL."""

    @property
    def text(self) -> str:
        return f"# {_header('star', self.label)}\n{self.body}"


@dataclass(frozen=True)
class PythonCell(_OverlayCell):
    """A ``%%py LABEL`` cell: a Python module that ``python(module = LABEL, ...)`` nodes run."""

    @property
    def text(self) -> str:
        """The module: the body as written (line N of the module is line N + 1 of the cell)."""
        return self.body

    @property
    def module_name(self) -> str:
        """The dotted import name (``//nodes/stats.py`` -> ``nodes.stats``, ``//pkg/__init__.py`` -> ``pkg``)."""
        return module_name(self.label)


@dataclass(frozen=True)
class ScriptCell:
    """A ``%%script NAME [--input KEY=JSON]...`` cell: a Python script run (docs/scripts.md)."""

    name: str
    args: str
    """The magic's arguments as written."""
    body: str
    inputs: dict[str, Any]
    """Parsed ``--input`` values: the defaults whenever this script is planned."""
    display: str

    @property
    def text(self) -> str:
        """The script: the body as written (line N of the script is line N + 1 of the cell)."""
        return self.body

    @property
    def flow(self) -> str | None:
        """The ``Workflow`` a flow run runs; None for a plain script."""
        return None


@dataclass(frozen=True)
class FlowCell(ScriptCell):
    """A ``%%flow NAME [--input KEY=JSON]... [--compile]`` cell: a script module (``NAME.py``) whose
    ``Workflow`` NAME a flow run runs (docs/flows.md)."""

    compile_only: bool = False
    """``--compile``: the cell shows the module tree and starts no run."""

    @property
    def flow(self) -> str:
        return self.name


@dataclass(frozen=True)
class GraphCell(ScriptCell):
    """A ``%%graph NAME`` cell: an item-graph document (``NAME.graph.yaml``, docs/graphs.md), its
    body as written. It has no ``--input`` (``inputs`` stays empty): the document declares its inputs."""

    @property
    def file_name(self) -> str:
        """The document's file name: ``NAME.graph.yaml``."""
        return f"{self.name}.graph.yaml"


@dataclass(frozen=True)
class AgentCell:
    """A ``%%agent ID`` cell: an agent definition file (``agents/<ID>.md``)."""

    agent_id: str
    body: str
    display: str

    @property
    def text(self) -> str:
        return self.body


Cell = WorkflowCell | ModuleCell | PythonCell | ScriptCell | AgentCell


def _checked_inputs(raw_inputs: list[str]) -> dict[str, Any]:
    try:
        return parse_input_args(raw_inputs, limits=load_limits())
    except InvalidWorkflow as err:
        raise ArgumentError("\n".join(d.message for d in err.diagnostics())) from None


def _workflow_cell(kind: CellKind, args: str, body: str, display: str) -> Cell:
    name, raw_inputs = workflow_header(args)
    if name is not None and not NAME_RE.match(name):
        raise ArgumentError(
            f"%%workflow {name!r}: a workflow name starts with a-z and uses only a-z, 0-9, _ and - (at most 63 bytes)"
        )
    return WorkflowCell(name=name, args=args, body=body, inputs=_checked_inputs(raw_inputs), display=display)


def _graph_cell(kind: CellKind, args: str, body: str, display: str) -> Cell:
    name = graph_header(args)
    if not NAME_RE.match(name):
        raise ArgumentError(
            f"%%graph {name!r}: a graph name starts with a-z and uses only a-z, 0-9, _ and - (at most 63 bytes)"
        )
    return GraphCell(name=name, args=args, body=body, inputs={}, display=display)


def _script_cell(kind: CellKind, args: str, body: str, display: str) -> Cell:
    compile_only = False
    if kind == "script":
        name, raw_inputs = script_header(args)
    else:
        name, raw_inputs, compile_only = flow_header(args)
    if not SCRIPT_NAME_RE.match(name):
        raise ArgumentError(
            f"%%{kind} {name!r}: a {kind} name starts with a-z and uses only a-z, 0-9 and _ (at most 63 bytes), "
            f"since the {kind} is the module NAME.py"
        )
    inputs = _checked_inputs(raw_inputs)
    if kind == "flow":
        return FlowCell(name=name, args=args, body=body, inputs=inputs, display=display, compile_only=compile_only)
    return ScriptCell(name=name, args=args, body=body, inputs=inputs, display=display)


def _star_cell(kind: CellKind, args: str, body: str, display: str) -> Cell:
    label = star_header(args)
    problem = check_label(label)
    if problem is not None:
        raise ArgumentError(f"%%star: {problem}")
    return ModuleCell(label=label, body=body, display=display)


def _py_cell(kind: CellKind, args: str, body: str, display: str) -> Cell:
    label = py_header(args)
    problem = check_module_label(label)
    if problem is not None:
        raise ArgumentError(f"%%py: {problem}")
    return PythonCell(label=label, body=body, display=display)


def _agent_cell(kind: CellKind, args: str, body: str, display: str) -> Cell:
    agent_id = agent_header(args)
    if not is_agent_id(agent_id):
        raise ArgumentError(
            f"%%agent {agent_id!r}: agent ids are 1-64 lowercase ASCII letters and digits joined by single hyphens"
        )
    return AgentCell(agent_id=agent_id, body=body, display=display)


_CELL_PARSERS: dict[str, Callable[[CellKind, str, str, str], Cell]] = {
    "workflow": _workflow_cell,
    "graph": _graph_cell,
    "script": _script_cell,
    "flow": _script_cell,
    "star": _star_cell,
    "py": _py_cell,
    "agent": _agent_cell,
}


def parse_cell(kind: CellKind, args: str, body: str, *, display: str) -> Cell:
    """Check a cell's magic arguments and build the cell.

    Raises
    ------
    ArgumentError
        The magic line is malformed (bad NAME, label or ID, unparsable ``--input``).
    """
    return _CELL_PARSERS.get(kind, _agent_cell)(kind, args, normalize_body(body), display)


def check_graph_cell(cell: GraphCell) -> ItemGraph:
    """Validate a ``%%graph`` cell's document (planning/itemgraph.py): the document, once every rule
    passes and its ``name`` equals the cell's NAME.

    Raises
    ------
    InvalidWorkflow
        The document breaks a rule; each diagnostic names the step and field and counts the cell's
        lines (the first body line is line 2 of the cell).
    NameMismatch
        The document's ``name`` is not the cell's NAME.
    """
    graph, found = lint_graph(cell.text, display=cell.display)
    if graph is None:
        raise InvalidWorkflow(renumber([f.diagnostic() for f in found], {cell.display: (cell.display, 1)}))
    if graph.name != cell.name:
        msg = (
            f"%%graph {cell.name}: the document's name is {graph.name!r}; NAME must equal it. "
            f"Write %%graph {graph.name}, or set name: {cell.name} in the document"
        )
        raise NameMismatch(msg)
    return graph


def agent_definition(cell: AgentCell) -> AgentDefinition:
    """Parse an ``%%agent`` cell's definition (so that mistakes can point at the cell at once).

    The returned definition's ``id`` is the frontmatter's ``id:`` when it has one, else the cell's
    ID; the caller decides what a mismatch means.

    Raises
    ------
    InvalidWorkflow
        The definition is invalid; the diagnostics name the cell and count its lines.
    """
    digest = hashlib.sha256(cell.text.encode("utf-8", "surrogatepass")).hexdigest()
    try:
        return parse_agent_definition(
            cell.text, file=cell.display, default_id=cell.agent_id, origin="notebook", content_sha256=digest
        )
    except InvalidWorkflow as err:
        raise InvalidWorkflow(renumber(err.diagnostics(), {cell.display: (cell.display, 1)})) from None


@dataclass
class CellSet:
    """The workflow cells of a notebook or kernel session; a later cell replaces an earlier one
    with the same workflow name (``%%workflow`` or ``%%script``), module label or agent ID (as
    running the notebook top to bottom)."""

    workflows: dict[str, WorkflowCell] = field(default_factory=dict)
    modules: dict[str, ModuleCell] = field(default_factory=dict)
    python: dict[str, PythonCell] = field(default_factory=dict)
    """``%%py`` modules by label."""
    scripts: dict[str, ScriptCell] = field(default_factory=dict)
    """``%%script`` and ``%%flow`` cells by name."""
    graphs: dict[str, GraphCell] = field(default_factory=dict)
    """``%%graph`` cells by name."""
    agents: dict[str, AgentCell] = field(default_factory=dict)
    unnamed: list[WorkflowCell] = field(default_factory=list)
    """``%%workflow`` cells without NAME (a notebook file cannot say their name without evaluating them)."""

    def add(self, cell: Cell) -> None:
        if isinstance(cell, WorkflowCell):
            if cell.name is None:
                self.unnamed.append(cell)
            else:
                self.workflows[cell.name] = cell
                self.scripts.pop(cell.name, None)
                self.graphs.pop(cell.name, None)
        elif isinstance(cell, GraphCell):
            self.graphs[cell.name] = cell
            self.workflows.pop(cell.name, None)
            self.scripts.pop(cell.name, None)
        elif isinstance(cell, ScriptCell):
            self.scripts[cell.name] = cell
            self.workflows.pop(cell.name, None)
            self.graphs.pop(cell.name, None)
        elif isinstance(cell, ModuleCell):
            self.modules[cell.label] = cell
        elif isinstance(cell, PythonCell):
            self.python[cell.label] = cell
        else:
            self.agents[cell.agent_id] = cell

    def locations(self) -> dict[str, tuple[str, int]]:
        """Diagnostic file label -> (cell display, lines to add so that it counts cell lines)."""
        found = {cell.display: (cell.display, 1) for cell in self.agents.values()}
        for module in self.python.values():
            found[module.display] = (module.display, 1)
            found[module.label] = (module.display, 1)
        return found

    def overlays(self) -> dict[str, SourceText]:
        """Every ``%%star`` and ``%%py`` module by label (what planning reads before the workspace)."""
        found = {label: module.source() for label, module in self.modules.items()}
        found.update((label, module.source()) for label, module in self.python.items())
        return dict(sorted(found.items()))

    def names(self) -> list[str]:
        """Every named workflow: ``%%workflow NAME``, ``%%script NAME``, ``%%flow NAME`` and ``%%graph NAME``
        cells, sorted."""
        return sorted([*self.workflows, *self.scripts, *self.graphs])

    def names_text(self, name: str, *, none: str = "none") -> str:
        """``its workflows: a, b`` for a message saying there is no workflow ``name``, with the one
        ``name`` most likely misspells (``; did you mean 'triage'?``)."""
        names = self.names()
        close = meant(name, names)
        return f"its workflows: {', '.join(names) or none}" + (f"; did you mean {close!r}?" if close else "")

    def source(
        self,
        cell: WorkflowCell | ScriptCell,
        *,
        entry_label: str,
        workflow_dir: Path | None,
        python_interpreter: Path | None = None,
    ) -> NotebookSource:
        """The source that plans ``cell`` with every module and agent of this set as overlays.

        A script's entry label ends in ``.py`` (``//<folder>/<NAME>.py``); its diagnostics are
        shifted by one line to count the cell's lines, as a ``%%py`` cell's.
        """
        locations = self.locations()
        if isinstance(cell, ScriptCell):
            locations[cell.display] = (cell.display, 1)
            locations[entry_label] = (cell.display, 1)
        return NotebookSource(
            entry=SourceText(label=entry_label, text=cell.text, display=cell.display),
            modules=self.overlays(),
            agents={agent_id: (agent.display, agent.text) for agent_id, agent in sorted(self.agents.items())},
            inputs=dict(cell.inputs),
            workflow_dir=workflow_dir,
            locations=locations,
            python_interpreter=python_interpreter,
            flow=cell.flow if isinstance(cell, ScriptCell) else None,
        )


@dataclass(frozen=True)
class NotebookSource:
    """An entry module held in memory plus overlays: what a notebook workflow plans as.

    The Python API accepts it wherever it accepts a path (``rho.validate(source)``).
    """

    entry: SourceText
    modules: Mapping[str, SourceText] = field(default_factory=dict)
    """label -> module (overlays the workspace file with that label): ``%%star`` and ``%%py`` cells."""
    agents: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """agent id -> (display label, definition text); the highest-precedence catalog root."""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    """Default input values (a cell's ``--input``); explicit inputs override them key by key."""
    workflow_dir: Path | None = None
    locations: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """Diagnostic file label -> (cell display, line shift), so diagnostics point at cell lines."""
    python_interpreter: Path | None = None
    """The interpreter Python nodes are frozen with (None: the planning process's ``sys.executable``,
    which in a kernel is the kernel's own)."""
    flow: str | None = None
    """A ``%%flow NAME`` cell: the entry plans as a flow run of the ``Workflow`` NAME (docs/flows.md)."""

    def renumber(self, found: Iterable[Diagnostic]) -> list[Diagnostic]:
        """Diagnostics that name the notebook cells they point at, with the cells' line numbers."""
        return renumber(found, self.locations)


def renumber(found: Iterable[Diagnostic], locations: Mapping[str, tuple[str, int]]) -> list[Diagnostic]:
    """Rewrite diagnostics whose file is in ``locations`` (file -> (cell display, line shift))."""
    result = []
    for diagnostic in found:
        where = locations.get(diagnostic.file or "")
        if where is not None:
            display, shift = where
            line = diagnostic.line + shift if diagnostic.line is not None else None
            message = (
                diagnostic.message.replace(diagnostic.file or "", display) if diagnostic.file else diagnostic.message
            )
            diagnostic = replace(diagnostic, message=message, file=display, line=line)
        result.append(diagnostic)
    return result


def inputs_text(inputs: Mapping[str, Any]) -> str:
    """``key=JSON key=JSON`` in key order (how inputs are shown in summaries)."""
    return " ".join(f"{key}={json.dumps(value)}" for key, value in sorted(inputs.items()))
