"""The planning verbs: lint, check, convert, validate and plan a workflow of any form.

``validate`` and ``plan`` hand the request to the form registry
(:func:`rho_notebook.planning.forms.plan_request`), which knows every authoring form; ``plan``
stores the plan once per graph. A saved notebook plans exactly as its exported folder would
(:func:`plan_notebook`). The blocking parts (reading files, storing) run in worker threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rho_notebook.errors import InvalidWorkflow, SourceError
from rho_notebook.model.plan import Plan
from rho_notebook.planning.convert import convert_graph as convert_graph_text
from rho_notebook.planning.forms import plan_request
from rho_notebook.planning.item_plan import check_graph_steps
from rho_notebook.planning.itemgraph import GraphFinding, lint_graph_file, read_graph_file
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.script import Finding, lint_script, script_entry
from rho_notebook.service.cells import NotebookSource
from rho_notebook.service.checks import Checked
from rho_notebook.service.export import choose_workflow, export_cells, exported_source, read_cells
from rho_notebook.service.parameters import read_parameters
from rho_notebook.service.paths import check_path
from rho_notebook.service.sources import module_workspace, request_for
from rho_notebook.source.limits import load_limits
from rho_notebook.source.warm import use_warm_workers
from rho_notebook.source.workspace import find_workspace
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore

__all__ = [
    "script_findings",
    "graph_findings",
    "check_script",
    "check_graph",
    "convert_graph",
    "validate",
    "plan",
    "plan_notebook",
    "plan_source",
    "use_warm_planner",
]


def use_warm_planner(enabled: bool = True) -> None:
    """Keep one warm planning worker in this process for every later validate and plan.

    For the long-lived processes that plan again and again (the kernel extension, the jupyter
    server extension, the MCP server): each plan then skips starting a worker. The worker gets
    fresh Starlark state and the same budgets for every request and is replaced when one ran out
    of a budget, crashed or broke off (:mod:`rho_notebook.source.warm`). The CLI does not call
    this: each of its plans starts a fresh worker. ``enabled=False`` stops the kept worker.
    """
    use_warm_workers(enabled)


async def validate(request: PlanRequest) -> Plan:
    """Everything ``plan`` does except storing: the returned plan has the ID ``unsaved``."""
    return await plan_request(request, plan_id="unsaved")


async def plan(layout: StoreLayout, request: PlanRequest) -> Plan:
    """Plan and store once per graph (:meth:`PlanStore.save_once`)."""
    found = await plan_request(request, plan_id=new_id())
    return await asyncio.to_thread(PlanStore(layout).save_once, found)


async def plan_source(layout: StoreLayout, source: NotebookSource, request: PlanRequest, *, store: bool = True) -> Plan:
    """Plan (or validate) notebook cells; diagnostics are renumbered to the cells' lines."""
    try:
        return await (plan(layout, request) if store else validate(request))
    except InvalidWorkflow as err:
        raise InvalidWorkflow(source.renumber(err.diagnostics())) from None


async def plan_notebook(
    layout: StoreLayout,
    notebook: Path,
    *,
    workflow: str | None,
    inputs: Mapping[str, Any] | None,
    where: str | None,
    python_interpreter: Path | None,
    store: bool = True,
) -> Plan:
    """Plan (``store``; else validate) a saved notebook's workflow exactly as its exported folder
    would plan.

    The folder is exported to a temporary directory beside the notebook (so it lies inside the
    workspace and its labels resolve), planned, and removed; the plan keeps the sources.
    Diagnostics name the notebook's cells. The cell's ``--input`` values are defaults that the
    notebook's ``parameters`` cell overrides, and ``inputs`` override both
    (:mod:`~rho_notebook.service.parameters`). ``where`` names the notebook in errors (default: its resolved path;
    the CLI passes the path as typed). Python nodes are frozen with ``python_interpreter``
    (None: this process's; the CLI passes the notebook kernel's, see ``kernel_python``).
    """
    notebook = check_path(notebook, argument="file").resolve()
    where = where or str(notebook)
    workspace = find_workspace(notebook.parent)
    cells = await asyncio.to_thread(read_cells, notebook)
    cell = choose_workflow(cells, workflow, where=where)
    parameters = await asyncio.to_thread(read_parameters, notebook, where=where)  # papermill's cell
    folder = Path(tempfile.mkdtemp(prefix=".rho-notebook-export-", dir=notebook.parent))
    try:
        result = await asyncio.to_thread(export_cells, cells, folder, workflow=cell.name, where=where)
        source = exported_source(
            result, cells, workspace=workspace, python_interpreter=python_interpreter, script_folder=notebook.parent
        )
        request = request_for(layout, source, inputs=parameters.merged(inputs), workspace=workspace)
        try:
            return await plan_source(layout, source, request, store=store)
        except InvalidWorkflow as err:
            raise parameters.explain(err, given=inputs) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def script_findings(path: Path, *, flow: str | None = None) -> list[Finding]:
    """A script's lint findings (``flow``: those of that flow of the module), read with ``ast``,
    never imported."""
    check_path(path, argument="file")
    entry = script_entry(path, module_workspace(path))
    return lint_script(entry.text, entry.label, display=str(path), flow=flow)


def graph_findings(path: Path, *, inputs: Mapping[str, Any] | None, display: str | None) -> list[GraphFinding]:
    """An item-graph document's findings, naming the file ``display`` (default: ``path``)."""
    check_path(path, argument="file")
    return lint_graph_file(path, display=display or str(path), inputs=inputs)


async def check_script(layout: StoreLayout, path: Path, *, inputs: Mapping[str, Any] | None) -> Checked:
    """The lint findings; when there is no error and ``inputs`` are given, the input errors too."""
    checked = Checked.of(await asyncio.to_thread(script_findings, path))
    if not checked.errors and inputs:
        try:
            await validate(request_for(layout, path, inputs=inputs))
        except InvalidWorkflow as err:
            checked.add_errors(err)
    return checked


async def check_graph(
    layout: StoreLayout, path: Path, *, inputs: Mapping[str, Any] | None, display: str | None
) -> Checked:
    """A graph document's findings, or the input errors; once the document has none, what
    ``plan`` would refuse in its steps too (an unknown agent, a program not found)."""
    try:
        checked = Checked.of(await asyncio.to_thread(graph_findings, path, inputs=inputs, display=display))
    except InvalidWorkflow as err:
        checked = Checked.of([])
        checked.add_errors(err)
        return checked
    if not checked.errors:
        request = request_for(layout, path)
        if display is not None:
            request = dataclasses.replace(request, entry=dataclasses.replace(request.entry, display=display))
        try:
            await check_graph_steps(request, limits=load_limits())
        except InvalidWorkflow as err:
            checked.add_errors(err)
    return checked


def convert_graph(path: Path) -> str:
    """The Starlark source equivalent to a graph document, read as ``plan`` reads it."""
    check_path(path, argument="file")
    raw = read_graph_file(path, display=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        msg = f"cannot read {path}: not UTF-8 text ({err.reason} at byte {err.start})"
        raise SourceError(msg, rule="graph.read", file=str(path)) from None
    return convert_graph_text(text, display=str(path))
