"""The workflows of a workspace, found by reading files, never by running them.

What counts as a workflow, by kind:

``starlark``
    A ``*.star`` file that assigns ``WORKFLOW`` at its top level (an entry module). Its name is
    the first ``workflow(name = "...")`` written in it, else the file's stem.
``script``
    A ``*.py`` file that imports ``rho_notebook.script`` (docs/scripts.md), named by its stem.
``flow``
    A ``*.py`` file that defines flows (docs/flows.md): one entry per name ``--flow`` takes in it
    (:func:`~rho_notebook.planning.script_flows.flows_defined`: its ``Workflow`` subclasses and
    the instances assigned at its top level). A module that imports ``rho_notebook.flow`` and
    defines none is a ``script``: a run runs its top-level code.
``graph``
    A ``*.graph.yaml`` document, named by its top-level ``name:`` line, else its stem.
``notebook``
    A ``*.ipynb`` notebook: one entry per named ``%%workflow``, ``%%script`` or ``%%flow`` cell.

Folders that never hold the workspace's own workflows are not entered: hidden ones (``.rho/``,
``.git/``, ``.venv/``), Python environments (a folder with ``pyvenv.cfg``), ``node_modules``,
``__pycache__``, ``site-packages``, the store's home when it lies in the workspace
(``RHO_NOTEBOOK_HOME=./store``: its plans keep copies of their sources, which are not the
workspace's workflows) and, for the same reason, the ``sources/`` of a recording (a folder beside
a ``recording.json``: ``rho-notebook record``). Symlinks are not followed. The scan is bounded: it stops
after :data:`MAX_FILES` candidate files and says so (:attr:`WorkflowScan.truncated`); a file too
big or unreadable is listed in :attr:`WorkflowScan.skipped` with the reason, never silently left out.

One workflow's detail (``rho-notebook get NAME``: :func:`find_workflow`, :func:`describe_workflow`)
is its source, its kind and its declared inputs. A script's or flow's ``INPUTS`` and an item
graph's ``inputs`` are read without running anything; a Starlark workflow's come from evaluating
its top level in the sandboxed planning worker, stopped before ``build`` is called. A workflow
whose inputs cannot be read is still described, with the reason (``inputs_error``).
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import JsonValue

from rho_notebook.errors import BadArgument, Diagnostic, InvalidWorkflow, NotFound, RhoError
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.spelling import meant
from rho_notebook.service.cells import split_cell

if TYPE_CHECKING:
    from rho_notebook.planning.request import PlanRequest

__all__ = [
    "WorkflowEntry",
    "WorkflowKind",
    "WorkflowScan",
    "WorkflowInput",
    "WorkflowDetail",
    "MAX_FILES",
    "scan_workflows",
    "catalog_json",
    "find_workflow",
    "describe_workflow",
]

WorkflowKind = Literal["starlark", "script", "flow", "graph", "notebook"]

MAX_FILES = 1000
"""How many candidate files (``.star``, ``.py``, ``.ipynb``, ``.graph.yaml``) one scan reads."""

_MAX_BYTES = 4 * 1024 * 1024
"""A candidate file bigger than this is skipped (and listed as skipped)."""

_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages"})
_WORKFLOW_ASSIGN = re.compile(r"^WORKFLOW\s*=", re.MULTILINE)
_WORKFLOW_NAME = re.compile(r"""\bworkflow\(\s*name\s*=\s*["']([^"'\n]+)["']""")
_GRAPH_NAME = re.compile(r"^name:[ \t]*([^#\n]*)", re.MULTILINE)
_NOTEBOOK_KINDS = frozenset({"workflow", "script", "flow"})


class WorkflowEntry(FrozenModel):
    """One workflow of the workspace."""

    file: str
    """Relative to the workspace root, with ``/``."""
    kind: WorkflowKind
    name: str
    """The workflow's name: what ``--flow`` or a notebook's workflow argument takes, for those kinds."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class WorkflowScan(FrozenModel):
    """What one scan found."""

    workflows: list[WorkflowEntry]
    """By file, then name."""
    truncated: bool
    """The scan stopped after :data:`MAX_FILES` candidate files: more may exist."""
    files_read: int
    skipped: list[str] = []
    """``FILE: reason`` for each candidate that could not be read."""


def catalog_json(root: Path, scan: WorkflowScan) -> dict[str, Any]:
    """The one answer of ``list --output json`` and MCP's ``workflow_list``."""
    return {
        "workspace": str(root),
        "workflows": [entry.to_json() for entry in scan.workflows],
        "truncated": scan.truncated,
        "skipped": scan.skipped,
    }


def scan_workflows(root: Path, *, max_files: int = MAX_FILES, store: Path | None = None) -> WorkflowScan:
    """The workflows under ``root`` (the module docstring says what counts); ``store``, the
    store's home, is not entered."""
    found: list[WorkflowEntry] = []
    skipped: list[str] = []
    read = 0
    truncated = False
    root = Path(os.path.realpath(root))
    for path in _candidates(root, None if store is None else os.path.realpath(store)):
        if read >= max_files:
            truncated = True
            break
        read += 1
        relative = path.relative_to(root).as_posix()
        try:
            found.extend(_entries(path, relative))
        except (OSError, UnicodeDecodeError, ValueError, RhoError) as err:
            skipped.append(f"{relative}: {err}")
    found.sort(key=lambda entry: (entry.file, entry.name))
    return WorkflowScan(workflows=found, truncated=truncated, files_read=read, skipped=skipped)


def _candidates(root: Path, store: str | None) -> Iterator[Path]:
    """Candidate files under ``root`` in a stable order (sorted, depth first), skipping the
    folders the module docstring names (``store``: the store's home, a real path) and every symlink."""
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return
    folders = []
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if not entry.name.startswith(".") and entry.name not in _SKIPPED_DIRS and entry.path != store:
                folders.append(Path(entry.path))
        elif entry.is_file(follow_symlinks=False) and _kind_of_name(entry.name) is not None:
            yield Path(entry.path)
    for folder in folders:
        if (folder / "pyvenv.cfg").exists() or _recorded_copies(folder):
            continue
        yield from _candidates(folder, store)


RECORDING_FILE = "recording.json"
"""What ``rho-notebook record`` writes in DIR (:data:`rho_notebook.runtime.recording.RECORDING_FILE`)."""


def _recorded_copies(folder: Path) -> bool:
    """Whether ``folder`` is the ``sources/`` of a recording (``record RUN DIR``): copies of a
    plan's sources that its test replays against, not the workspace's workflows."""
    return folder.name == "sources" and (folder.parent / RECORDING_FILE).is_file()


def _kind_of_name(name: str) -> str | None:
    if name.endswith(".graph.yaml"):
        return "graph"
    return {".star": "starlark", ".py": "python", ".ipynb": "notebook"}.get(os.path.splitext(name)[1])


def _text(path: Path) -> str:
    size = os.stat(path, follow_symlinks=False).st_size
    if size > _MAX_BYTES:
        msg = f"{size} bytes, more than the {_MAX_BYTES} a scan reads"
        raise ValueError(msg)
    return path.read_text(encoding="utf-8")


def _entries(path: Path, relative: str) -> list[WorkflowEntry]:
    kind = _kind_of_name(path.name)
    if kind == "starlark":
        text = _text(path)
        if not _WORKFLOW_ASSIGN.search(text):
            return []
        named = _WORKFLOW_NAME.search(text)
        name = named.group(1) if named else path.name.removesuffix(".star")
        return [WorkflowEntry(file=relative, kind="starlark", name=name)]
    if kind == "python":
        return _python_entries(_text(path), relative, stem=path.name.removesuffix(".py"))
    if kind == "graph":
        return [WorkflowEntry(file=relative, kind="graph", name=_graph_name(_text(path), path))]
    return [WorkflowEntry(file=relative, kind="notebook", name=name) for name in _notebook_names(_text(path))]


def _python_entries(text: str, relative: str, *, stem: str) -> list[WorkflowEntry]:
    """A script or flow module (by what it imports); nothing for any other Python file."""
    if "rho_notebook" not in text:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []  # not a module we can read; validate says why when asked
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            imported.add(node.module)
            if node.module == "rho_notebook":
                imported.update(f"rho_notebook.{alias.name}" for alias in node.names)
    from rho_notebook.planning.script_flows import flows_defined  # what --flow takes, by planning's own rule

    flows = flows_defined(tree)
    if flows:
        return [WorkflowEntry(file=relative, kind="flow", name=name) for name in flows]
    if any(name.split(".")[:2] in (["rho_notebook", "script"], ["rho_notebook", "flow"]) for name in imported):
        return [WorkflowEntry(file=relative, kind="script", name=stem)]  # run as a script: its top level
    return []


def _graph_name(text: str, path: Path) -> str:
    """The document's top-level ``name:`` (read as a line, not parsed: a listing never loads YAML),
    else the file's stem."""
    found = _GRAPH_NAME.search(text)
    name = found.group(1).strip().strip("'\"") if found else ""
    return name or path.name.removesuffix(".graph.yaml")


def _notebook_names(text: str) -> list[str]:
    """The NAMEs of a notebook's ``%%workflow NAME``, ``%%script NAME`` and ``%%flow NAME`` cells
    (a later cell of the same name replaces the earlier one, as when the notebook runs)."""
    data = json.loads(text)
    cells = data.get("cells") if isinstance(data, dict) else None
    names: list[str] = []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        split = split_cell("".join(source) if isinstance(source, list) else str(source))
        if split is None or split[0] not in _NOTEBOOK_KINDS:
            continue
        words = split[1].split()
        if words and not words[0].startswith("-") and words[0] not in names:
            names.append(words[0])
    return names


# -- one workflow: get NAME ----------------------------------------------------------------------------


class WorkflowInput(FrozenModel):
    """One declared input of a workflow."""

    name: str
    type: str
    """``string``, ``integer``, ``bool``, ``enum`` or (scripts, flows) ``path``."""
    required: bool
    default: JsonValue = None
    choices: list[JsonValue] = []


class WorkflowDetail(FrozenModel):
    """What ``get NAME`` shows: the workflow's entry, its source and its declared inputs."""

    name: str
    kind: WorkflowKind
    file: str
    """Relative to the workspace root, with ``/``."""
    workspace: str
    source: str
    """The file's text; for a notebook, the body of the workflow's cell."""
    inputs: list[WorkflowInput] | None
    """By name; None when they could not be read (:attr:`inputs_error` says why)."""
    inputs_error: str | None = None
    run: str
    """The command that plans and runs it."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


StarlarkRequest = Callable[[Path | str], "PlanRequest"]
"""Makes the planning request of a Starlark entry (a path) or of Starlark text (a notebook cell)."""


def find_workflow(root: Path, given: str, scan: WorkflowScan) -> WorkflowEntry:
    """The workflow of ``scan`` that ``given`` names: by name, or by its file (relative to
    ``root``, or a path to it), which also picks one of several workflows sharing a name.

    Raises
    ------
    NotFound
        No workflow of the workspace has that name or file; the message names the catalog.
    BadArgument
        Several workflows answer to ``given``; the message names their files.
    """
    found = [entry for entry in scan.workflows if entry.name == given]
    if not found:
        file = _relative(root, given)
        found = [entry for entry in scan.workflows if entry.file == file]
    if len(found) == 1:
        return found[0]
    if found:
        files = ", ".join(f"{entry.file} ({entry.kind} {entry.name})" for entry in found)
        msg = f"{given!r} names {len(found)} workflows of the workspace {root}: {files}; give the file instead"
        raise BadArgument(msg)
    known = sorted({entry.name for entry in scan.workflows})
    close = meant(given, known)
    guess = f" (did you mean {close}?)" if close else ""
    more = " (the scan stopped early: more may exist)" if scan.truncated else ""
    msg = (
        f"no workflow {given!r} in the workspace {root}{guess}; its workflows{more}: {', '.join(known) or 'none'} "
        "(`rho-notebook list` shows their files and kinds)"
    )
    raise NotFound(msg)


def _relative(root: Path, given: str) -> str:
    path = Path(given)
    try:
        absolute = path.resolve() if path.is_absolute() or path.exists() else (root / path).resolve()
        return absolute.relative_to(root.resolve()).as_posix()
    except (OSError, ValueError, RuntimeError):
        return given


async def describe_workflow(root: Path, entry: WorkflowEntry, *, starlark: StarlarkRequest) -> WorkflowDetail:
    """``entry``'s source, kind and declared inputs (the module docstring says how each is read)."""
    path = root / entry.file
    text = _text(path)
    source = text
    kind_of_source: str = entry.kind  # a notebook cell's own kind replaces it
    if entry.kind == "notebook":
        kind_of_source, source = _notebook_cell(text, entry.name)
    inputs: list[WorkflowInput] | None = None
    error = None
    try:
        declared = await _declared(kind_of_source, source, path=path, entry=entry, starlark=starlark)
        inputs = [WorkflowInput(name=key, **_shown(decl)) for key, decl in sorted(declared.items())]
    except InvalidWorkflow as err:
        error = "; ".join(found.render() for found in err.diagnostics()) or "the source did not evaluate"
    except RhoError as err:
        error = err.message
    return WorkflowDetail(
        name=entry.name,
        kind=entry.kind,
        file=entry.file,
        workspace=str(root),
        source=source,
        inputs=inputs,
        inputs_error=error,
        run=_run_command(entry, takes_inputs=inputs != []),
    )


def _shown(decl: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": str(decl.get("type")),
        "required": bool(decl.get("required")),
        "default": decl.get("default"),
        "choices": list(decl.get("choices") or ()),
    }


async def _declared(
    kind: str, source: str, *, path: Path, entry: WorkflowEntry, starlark: StarlarkRequest
) -> dict[str, dict[str, Any]]:
    """The declared inputs of one source, by its kind (``workflow``: a notebook's Starlark cell);
    planning is imported here, when a workflow is described: ``list`` reads files only."""
    from rho_notebook.planning.itemgraph import load_graph
    from rho_notebook.planning.script import FLOW_INPUTS
    from rho_notebook.planning.script_inputs import parse_inputs_declaration

    if kind in ("script", "flow"):
        declared = parse_inputs_declaration(source, entry.file, display=entry.file)
        return declared or (FLOW_INPUTS if kind == "flow" else {})
    if kind == "graph":
        graph = load_graph(source, display=entry.file)
        return {name: decl.declaration() for name, decl in graph.inputs.items()}
    request = starlark(path if entry.kind == "starlark" else source + "\n")
    return await _starlark_inputs(request)


class _Declared(InvalidWorkflow):
    """Stops an evaluation once the worker declared its inputs, before ``build`` runs."""

    def __init__(self, declared: dict[str, Any]) -> None:
        super().__init__([Diagnostic(rule="inputs.read", message="inputs read; build not called")])
        self.declared = declared


async def _starlark_inputs(request: PlanRequest) -> dict[str, dict[str, Any]]:
    """A Starlark entry's ``define(inputs = ...)``, its top level evaluated in the planning worker;
    refusing the inputs stops the evaluation before ``build`` is called."""

    from rho_notebook.source.evaluate import evaluate_source
    from rho_notebook.source.labels import FileSourceReader
    from rho_notebook.source.limits import load_limits

    def capture(declared: dict[str, Any]) -> dict[str, Any]:
        raise _Declared(declared)

    reader = FileSourceReader(request.workspace.root, request.overlay_sources)
    try:
        await evaluate_source(request.entry, reader=reader, check_inputs=capture, limits=load_limits())
    except _Declared as stopped:
        return stopped.declared
    return {}  # evaluated without declaring inputs: it takes none


def _notebook_cell(text: str, name: str) -> tuple[str, str]:
    """(kind, body) of the notebook's last ``%%workflow|script|flow NAME`` cell."""
    data = json.loads(text)
    found = ("workflow", "")
    for cell in data.get("cells") or [] if isinstance(data, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        split = split_cell("".join(source) if isinstance(source, list) else str(source))
        if split is not None and split[0] in _NOTEBOOK_KINDS and split[1].split()[:1] == [name]:
            found = (split[0], split[2])
    return found


def _run_command(entry: WorkflowEntry, *, takes_inputs: bool) -> str:
    """The command that plans and runs ``entry`` (from the workspace root); ``--input`` only when
    it may take inputs (it declares some, or they could not be read)."""
    flags = {"flow": f" --flow {entry.name}", "notebook": f" --workflow {entry.name}"}.get(entry.kind, "")
    return f"rho-notebook run {entry.file}{flags}" + (" --input KEY=JSON..." if takes_inputs else "")
