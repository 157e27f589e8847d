"""The notebook session: the workflow cells one kernel holds and what was done with them.

Pure (no IPython): the magics feed cells in and display what comes out; the widgets' hub reads it.
Every cell run replaces the previous definition with the same workflow name, module label or
agent ID: the latest text of a cell is the truth, valid or not (an invalid definition is still
held so that ``%workflow validate NAME`` and planning show its diagnostics again).

Python nodes planned here are frozen with this process's interpreter (``sys.executable``): in a
kernel, the kernel's, the one that ran the ``%%py`` cells.

A ``%%script NAME`` cell is held as a script (``//<notebook folder>/<NAME>.py``) and validated, never
executed here: ``%workflow run NAME`` plans it and the run starts its own interpreter process. A
``%%flow NAME`` cell is held the same way (its module is never executed here either); the magic
plans it and starts the flow run.

A ``%%graph NAME`` cell is held as an item-graph document (``//<notebook folder>/<NAME>.graph.yaml``)
and validated; ``%workflow run NAME`` (or the hub's Start) plans and runs it (docs/graphs.md).

The workspace is found from the kernel's current directory (the notebook's folder in Jupyter):
the nearest ancestor holding ``.rho/`` or ``.git``.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rho_notebook.errors import Diagnostic, InvalidWorkflow, NameMismatch, NotFound
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.itemgraph import ItemGraph
from rho_notebook.model.plan import Plan
from rho_notebook.service import (
    BackgroundRunner,
    FlowCheck,
    RunHandle,
    Service,
    StoreLayout,
    Workspace,
    default_runner,
    find_workspace,
    wait_for,
)
from rho_notebook.service.cells import (
    AgentCell,
    CellSet,
    FlowCell,
    GraphCell,
    ModuleCell,
    NotebookSource,
    PythonCell,
    ScriptCell,
    WorkflowCell,
    agent_definition,
    check_graph_cell,
)

__all__ = ["NotebookSession", "CellResult", "AuthoringForm"]

_Module = TypeVar("_Module", ModuleCell, PythonCell)


@dataclass(frozen=True)
class CellResult:
    """What running a ``%%workflow`` or ``%%script`` cell produced."""

    cell: WorkflowCell | ScriptCell
    plan: Plan | None
    """The validation (plan ID ``unsaved``); None when the cell is invalid."""
    error: InvalidWorkflow | None = None


@dataclass(frozen=True)
class AuthoringForm:
    """One authoring cell of the notebook as the hub lists it."""

    name: str
    """The workflow name (``%%workflow``, ``%%script``, ``%%flow``, ``%%graph``), module label
    (``%%star``, ``%%py``) or agent ID (``%%agent``)."""
    kind: str
    """``workflow``, ``script``, ``flow``, ``graph``, ``star``, ``py`` or ``agent``."""
    cell: str
    """Where the cell is (its display, e.g. ``In[3]``)."""
    start: Callable[[], RunHandle] | None
    """Plans the cell and starts a run (pressing Start is the consent to that run); None for a
    cell that does not run alone (a module, an agent) or that did not validate."""
    note: str = ""
    """Why there is no Start: ``not validated``, ``loaded by workflows``, ..."""


def _kind(cell: WorkflowCell | ScriptCell) -> str:
    if isinstance(cell, FlowCell):
        return "flow"
    if isinstance(cell, GraphCell):
        return "graph"
    return "script" if isinstance(cell, ScriptCell) else "workflow"


class NotebookSession:
    """Workflow cells of one kernel, their last validations and plans, and its runs."""

    def __init__(self, *, runner: BackgroundRunner | None = None, cwd: Callable[[], Path] = Path.cwd) -> None:
        self.cells = CellSet()
        self.validated: dict[str, Plan] = {}
        """workflow name -> last successful validation."""
        self.planned: dict[str, Plan] = {}
        """workflow name -> last stored plan made from its cell in this session."""
        self.graphs: dict[str, ItemGraph] = {}
        """graph name -> the document of its ``%%graph`` cell, when it last validated."""
        self._runner = runner
        self._cwd = cwd

    # -- where ---------------------------------------------------------------------------------------

    @property
    def runner(self) -> BackgroundRunner:
        return self._runner if self._runner is not None else default_runner()

    def folder(self) -> Path:
        """The notebook's folder (the kernel's current directory)."""
        return self._cwd().resolve()

    def workspace(self) -> Workspace:
        return find_workspace(self.folder())

    def layout(self) -> StoreLayout:
        return StoreLayout.default()

    def entry_label(self, name: str, *, suffix: str = ".star") -> str:
        """``//<notebook folder relative to the workspace>/<name>.star`` (``.py`` for a script)."""
        root = self.workspace().root
        folder = self.folder()
        relative = folder.relative_to(root).as_posix() if folder.is_relative_to(root) else ""
        return "//" + (f"{relative}/" if relative and relative != "." else "") + f"{name}{suffix}"

    # -- cells -----------------------------------------------------------------------------------------

    def workflow_names(self) -> list[str]:
        """The names of the ``%%workflow NAME`` and ``%%script NAME`` cells."""
        return self.cells.names()

    def has(self, name: str) -> bool:
        """Whether ``name`` is a ``%%workflow``, ``%%script`` or ``%%graph`` cell of this session."""
        return name in self.cells.workflows or name in self.cells.scripts or name in self.cells.graphs

    def cell(self, name: str) -> WorkflowCell | ScriptCell:
        found = self.cells.workflows.get(name) or self.cells.scripts.get(name) or self.cells.graphs.get(name)
        if found is None:
            known = self.cells.names_text(name, none="none yet")
            msg = f"this notebook has no %%workflow or %%script {name} cell ({known}); run the cell first"
            raise NotFound(msg)
        return found

    def source(self, name: str) -> NotebookSource:
        """What ``name`` plans as: its cell, with every ``%%star``, ``%%py`` and ``%%agent`` cell as overlays."""
        return self._source_of(self.cell(name), name)

    def _source_of(self, cell: WorkflowCell | ScriptCell, name: str) -> NotebookSource:
        suffix = ".graph.yaml" if isinstance(cell, GraphCell) else ".py" if isinstance(cell, ScriptCell) else ".star"
        return self.cells.source(
            cell,
            entry_label=self.entry_label(name, suffix=suffix),
            workflow_dir=self.folder(),
            python_interpreter=self.python_interpreter(),
        )

    def python_interpreter(self) -> Path | None:
        """The interpreter Python nodes are frozen with: the kernel's own (never a PATH lookup);
        None when the process does not know it (planning then says so)."""
        return Path(sys.executable) if sys.executable else None

    def define_workflow(self, cell: WorkflowCell, *, validate: Callable[[NotebookSource], Plan]) -> CellResult:
        """Validate a ``%%workflow`` cell and hold it under its workflow name.

        Raises
        ------
        NameMismatch
            NAME was given and the cell builds another workflow (nothing is held then, and an
            earlier cell held under NAME is dropped: the cell is the truth).
        """
        provisional = cell.name or "workflow"
        try:
            plan = validate(self._source_of(cell, provisional))
        except InvalidWorkflow as err:
            if cell.name is not None:
                self.cells.add(cell)
                self.validated.pop(cell.name, None)
            return CellResult(cell=cell, plan=None, error=err)
        built = plan.graph.name
        if cell.name is not None and cell.name != built:
            self.cells.workflows.pop(cell.name, None)
            self.validated.pop(cell.name, None)
            msg = (
                f"%%workflow {cell.name}: the cell builds workflow(name = {built!r}); NAME must equal it. "
                f"Write %%workflow {built}, or change the name the cell passes to workflow()"
            )
            raise NameMismatch(msg)
        named = cell.named(built)
        self.cells.add(named)
        self.validated[built] = plan
        return CellResult(cell=named, plan=plan)

    def define_script(self, cell: ScriptCell, *, validate: Callable[[NotebookSource], Plan]) -> CellResult:
        """Hold a ``%%script NAME`` cell (valid or not: the cell is the truth) and validate it.

        Validating reads the script statically and freezes it with this kernel's interpreter; the
        script itself never runs here.
        """
        self.cells.add(cell)
        self.validated.pop(cell.name, None)
        try:
            plan = validate(self._source_of(cell, cell.name))
        except InvalidWorkflow as err:
            return CellResult(cell=cell, plan=None, error=err)
        self.validated[cell.name] = plan
        return CellResult(cell=cell, plan=plan)

    def check_flow(self, cell: FlowCell) -> FlowCheck:
        """Hold a ``%%flow NAME --compile`` cell and compile it: the manifest and the findings of its
        check (lines counted as the cell's); nothing is planned or run.

        Raises
        ------
        InvalidWorkflow
            The module does not lint, freeze or compile; the diagnostics point at the cell.
        """
        self.cells.add(cell)
        self.validated.pop(cell.name, None)
        source = self._source_of(cell, cell.name)
        service = self.service
        try:
            check = wait_for(service.validate_flow(service.request_for(source)))
        except InvalidWorkflow as err:
            raise InvalidWorkflow(source.renumber(err.diagnostics())) from None
        found = []
        for finding in check.findings:
            display, shift = source.locations.get(finding.file, (finding.file, 0))
            found.append(dataclasses.replace(finding, file=display, line=finding.line + shift))
        return dataclasses.replace(check, findings=tuple(found))

    def define_graph(self, cell: GraphCell) -> ItemGraph:
        """Hold a ``%%graph NAME`` cell (valid or not: the cell is the truth) and validate it.

        Raises
        ------
        InvalidWorkflow
            The document breaks a rule of docs/graphs.md; the diagnostics count the cell's lines.
        NameMismatch
            The document's ``name`` is not NAME (the cell is still held, as an invalid one).
        """
        self.cells.add(cell)
        self.graphs.pop(cell.name, None)
        self.validated.pop(cell.name, None)
        graph = check_graph_cell(cell)
        self.graphs[cell.name] = graph
        return graph

    def graph_cell(self, name: str) -> GraphCell | None:
        """The ``%%graph NAME`` cell this session holds, if any."""
        return self.cells.graphs.get(name)

    def define_module(self, cell: _Module) -> _Module:
        """Hold a ``%%star`` or ``%%py`` module (valid or not: a ``%%py`` cell is run in the kernel by
        the magic, a ``%%star`` module is checked when a workflow loads it)."""
        self.cells.add(cell)
        return cell

    define_python = define_module
    """Hold a ``%%py`` module (the same as :meth:`define_module`)."""

    def define_agent(self, cell: AgentCell) -> AgentDefinition:
        """Hold an ``%%agent`` cell and parse it now, so that mistakes point at the cell at once.

        Raises
        ------
        InvalidWorkflow
            The definition is invalid (lines count the cell's lines), or declares another ``id:``.
        """
        self.cells.add(cell)
        definition = agent_definition(cell)
        if definition.id != cell.agent_id:
            self.cells.agents.pop(cell.agent_id, None)
            msg = f"%%agent {cell.agent_id}: the definition declares id: {definition.id}; the ID on the magic line must equal it"
            raise InvalidWorkflow([Diagnostic(rule="agent.id", message=msg, file=cell.display, line=1, column=1)])
        return definition

    # -- runs ------------------------------------------------------------------------------------------

    def runs(self) -> list[RunHandle]:
        """Runs this kernel started, resumed or attached to, oldest first."""
        return self.runner.handles()

    # -- what the hub widget uses (rho_notebook.widgets._hub.HubSession) --------------------------------

    @property
    def service(self) -> Service:
        return Service(layout=self.layout())

    @property
    def workflows(self) -> list[tuple[str, Callable[[], RunHandle]]]:
        """``(name, start)`` for every workflow, script, flow or item graph whose cell validated;
        ``start()`` plans the cell and starts a background run. Pressing a hub's Start button is
        the consent for that one run of the plan it makes (as Start in Rho's /workflow hub)."""
        return [(form.name, form.start) for form in self.forms if form.start is not None]

    @property
    def forms(self) -> list[AuthoringForm]:
        """Every authoring cell of this session, each with its kind: the runnable ones (workflow,
        script, flow, graph) first, then modules and agents, each group by name."""
        runnable = []
        for name, cell in sorted(self._named_cells().items()):
            valid = name in self.validated or name in self.graphs
            start = functools.partial(self.start, name) if valid else None
            kind = _kind(cell)
            note = "" if valid else "not planned here: run the %%flow cell" if kind == "flow" else "not validated"
            runnable.append(AuthoringForm(name, kind, cell.display, start, note))
        loaded = "loaded by workflows"
        modules = [AuthoringForm(label, "star", m.display, None, loaded) for label, m in self.cells.modules.items()]
        modules += [AuthoringForm(label, "py", m.display, None, loaded) for label, m in self.cells.python.items()]
        agents = [
            AuthoringForm(i, "agent", a.display, None, "used by agent nodes") for i, a in self.cells.agents.items()
        ]
        return runnable + sorted(modules, key=lambda f: f.name) + sorted(agents, key=lambda f: f.name)

    def start(self, name: str) -> RunHandle:
        from rho_notebook.notebook import api

        plan = api.plan(self.source(name))
        self.planned[name] = plan
        return self.start_plan(plan)

    def start_plan(self, plan: Plan) -> RunHandle:
        """Start a stored plan whose digest the person confirmed on a plan card."""
        from rho_notebook.notebook import api

        return api.run(plan, confirm_digest=plan.graph_digest)

    def handle_for(self, run_id: str) -> RunHandle | None:
        """A live handle of ``run_id``: this kernel's, or one that attaches to the run while an
        owner executes it (started before a kernel restart, or elsewhere); None for a run that
        is not live and that this kernel never followed."""
        from rho_notebook.notebook import api

        return api.live_handle(run_id, service=self.service)

    def _named_cells(self) -> dict[str, WorkflowCell | ScriptCell]:
        found: dict[str, WorkflowCell | ScriptCell] = dict(self.cells.workflows)
        found.update(self.cells.scripts)
        found.update(self.cells.graphs)
        return found

    def describe(self) -> dict[str, Any]:
        """A JSON-able overview (what ``%workflow hub`` shows without widgets)."""
        return {
            "workspace": str(self.workspace().root),
            "workflows": {
                name: {
                    "cell": cell.display,
                    "valid": name in self.validated or name in self.graphs,
                    "inputs": cell.inputs,
                    "kind": _kind(cell),
                }
                for name, cell in sorted(self._named_cells().items())
            },
            "modules": dict(
                sorted(
                    [(label, m.display) for label, m in self.cells.modules.items()]
                    + [(label, m.display) for label, m in self.cells.python.items()]
                )
            ),
            "agents": {agent_id: agent.display for agent_id, agent in sorted(self.cells.agents.items())},
            "plans": {name: plan.plan_id for name, plan in sorted(self.planned.items())},
            "runs": [
                {
                    "run_id": h.run_id,
                    "workflow": h.workflow,
                    "lifecycle": h.state().lifecycle.value,
                    "outcome": h.state().outcome,
                }
                for h in self.runs()
            ],
        }
