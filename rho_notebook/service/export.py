"""Notebook export: a notebook's workflow cells -> a workflow folder the CLI plans and runs.

Layout of ``export NOTEBOOK.ipynb DIR [--workflow NAME]`` (DIR is laid out as a module root):

=================================  ==============================================================
``DIR/<NAME>.star``                the ``%%workflow NAME`` cell (its magic line kept as a comment,
                                   so file lines are cell lines)
``DIR/<NAME>.py``                  or the ``%%script NAME`` cell, its body verbatim (the script file
                                   ``rho-notebook run DIR/<NAME>.py`` runs), or the ``%%flow NAME``
                                   cell, likewise (``rho-notebook run DIR/<NAME>.py --flow NAME``)
``DIR/<NAME>.graph.yaml``          or the ``%%graph NAME`` cell, its body verbatim (the item-graph
                                   document ``rho-notebook validate DIR/<NAME>.graph.yaml`` checks)
``DIR/<label path>``               each ``%%star //<label path>`` cell, e.g. ``//lib/common.star``
                                   -> ``DIR/lib/common.star``, and each ``%%py`` cell, its body
                                   verbatim, e.g. ``//nodes/stats.py`` -> ``DIR/nodes/stats.py``
``DIR/agents/<ID>.md``             each ``%%agent ID`` cell, verbatim
=================================  ==============================================================

Module labels are relative to the module root (the workspace root), so ``load("//lib/common.star")``
in the exported entry finds ``DIR/lib/common.star`` exactly when DIR is the workspace root. Exporting
elsewhere still gives a complete, self-describing folder; see docs/notebook.md for planning it.

Deterministic: the same cells give byte-identical files (text is normalised, files are written in
sorted order through a temporary file and an atomic rename, nothing time- or machine-dependent is
written). Files in DIR that the export does not produce are left alone. The cells' ``--input``
values are not part of the folder (inputs are given at plan time); they are returned and printed.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.errors import ArgumentError, ExportError
from rho_notebook.service.cells import (
    CellSet,
    GraphCell,
    ModuleCell,
    NotebookSource,
    PythonCell,
    ScriptCell,
    WorkflowCell,
    parse_cell,
    split_cell,
)
from rho_notebook.service.notebook_file import notebook_cells, read_notebook_json
from rho_notebook.service.paths import make_folder
from rho_notebook.source.labels import SourceText, label_for_path, read_regular_file_nofollow
from rho_notebook.source.workspace import Workspace, find_workspace

__all__ = [
    "ExportResult",
    "cell_display",
    "read_cells",
    "choose_workflow",
    "export_cells",
    "export_notebook",
    "exported_source",
]


@dataclass(frozen=True)
class ExportResult:
    workflow: str
    out_dir: Path
    entry: Path
    files: tuple[Path, ...]
    """Every file written, in the order written (sorted by relative path)."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The ``--input`` values of the ``%%workflow`` or ``%%script`` cell (give them again when planning)."""
    modules: tuple[str, ...] = ()
    """Labels of the exported ``%%star`` and ``%%py`` modules."""
    agents: tuple[str, ...] = ()
    flow: str | None = None
    """A ``%%flow NAME`` cell: the entry plans and runs with ``--flow NAME``."""

    def modules_outside_root(self) -> Path | None:
        """The workspace root the folder lies in when its ``%%star``/``%%py`` modules cannot be
        found from it: written at their labels under the folder, they resolve against the root,
        so the folder plans only as a workspace of its own (docs/notebook.md). None otherwise."""
        if not self.modules:
            return None
        root = find_workspace(self.out_dir).root
        return None if root == self.out_dir else root

    def plan_command(self) -> str:
        """The command line that plans the folder, with the cell's ``--flow`` and ``--input`` (an
        item graph declares its inputs in the document); when its modules need it
        (:meth:`modules_outside_root`), the folder is made a workspace of its own first
        (``mkdir DIR/.rho``) and planned from inside it."""
        flags = f" --flow {self.flow}" if self.flow else ""
        flags += "".join(
            " --input " + shlex.quote(f"{key}={json.dumps(value)}") for key, value in sorted(self.inputs.items())
        )
        if self.modules_outside_root() is not None:
            inside = shlex.quote(str(self.entry.relative_to(self.out_dir)))
            marker = shlex.quote(str(self.out_dir / ".rho"))
            return f"mkdir -p {marker} && cd {shlex.quote(str(self.out_dir))} && rho-notebook plan {inside}{flags}"
        return f"rho-notebook plan {shlex.quote(str(self.entry))}{flags}"

    def __str__(self) -> str:
        lines = [f"exported workflow {self.workflow} to {self.out_dir}"]
        lines += [f"  {path}" for path in self.files]
        return "\n".join(lines)


def cell_display(notebook: Path, index: int) -> str:
    """How messages name cell ``index`` (1-based, every cell type counted) of ``notebook``."""
    return f"{notebook.name} cell {index}"


def read_cells(notebook: Path) -> CellSet:
    """The workflow cells of a notebook file, in notebook order.

    Raises
    ------
    ExportError
        The file is not a notebook (:mod:`rho_notebook.service.notebook_file` says what it must
        be), or a workflow cell's magic line is malformed.
    """
    cells = CellSet()
    for index, cell_type, source in notebook_cells(notebook, read_notebook_json(notebook)):
        if cell_type != "code":
            continue
        split = split_cell(source)
        if split is None:
            continue
        kind, args, body = split
        display = cell_display(notebook, index)
        try:
            cells.add(parse_cell(kind, args, body, display=display))
        except ArgumentError as err:
            msg = f"{display}: {err}"
            raise ExportError(msg) from None
    return cells


def choose_workflow(cells: CellSet, name: str | None, *, where: str) -> WorkflowCell | ScriptCell:
    """The ``%%workflow``, ``%%script`` or ``%%graph`` cell to export: ``name``, or the only named one."""
    names = cells.names()
    hint = ""
    if cells.unnamed:
        shown = ", ".join(c.display for c in cells.unnamed)
        hint = f"; {shown} {'has' if len(cells.unnamed) == 1 else 'have'} no NAME (write %%workflow NAME to export it)"
    if name is not None:
        found = cells.workflows.get(name) or cells.scripts.get(name) or cells.graphs.get(name)
        if found is None:
            msg = f"{where} has no %%workflow {name} cell (nor a %%script, %%flow or %%graph {name}); {cells.names_text(name)}{hint}"
            raise ExportError(msg)
        return found
    if len(names) == 1:
        return cells.workflows.get(names[0]) or cells.scripts.get(names[0]) or cells.graphs[names[0]]
    if not names:
        msg = f"{where} has no %%workflow NAME, %%script NAME, %%flow NAME or %%graph NAME cell{hint}"
        raise ExportError(msg)
    msg = f"{where} has several workflows ({', '.join(names)}); choose one with --workflow NAME"
    raise ExportError(msg)


def _entry_file(cell: WorkflowCell | ScriptCell) -> str:
    if isinstance(cell, GraphCell):
        return cell.file_name
    return f"{cell.name}.py" if isinstance(cell, ScriptCell) else f"{cell.name}.star"


def _files(cells: CellSet, cell: WorkflowCell | ScriptCell) -> dict[str, bytes]:
    if cell.name is None:
        msg = f"{cell.display}: a %%workflow cell needs a NAME to be exported"
        raise ExportError(msg)
    files: dict[str, tuple[bytes, str]] = {_entry_file(cell): (cell.text.encode(), cell.display)}
    modules: list[tuple[str, ModuleCell | PythonCell]] = [*cells.modules.items(), *cells.python.items()]
    for label, module in sorted(modules, key=lambda item: item[0]):
        relative = label[2:]
        if relative in files:
            msg = f"{module.display}: module {label} would overwrite {files[relative][1]} (the entry is written as {_entry_file(cell)}); rename the module"
            raise ExportError(msg)
        files[relative] = (module.text.encode(), module.display)
    for agent_id, agent in sorted(cells.agents.items()):
        relative = f"agents/{agent_id}.md"
        if relative in files:
            msg = f"{agent.display}: agents/{agent_id}.md collides with module {files[relative][1]}"
            raise ExportError(msg)
        files[relative] = (agent.text.encode(), agent.display)
    return {relative: data for relative, (data, _) in sorted(files.items())}


def _write(out_dir: Path, relative: str, data: bytes) -> Path:
    """Write ``out_dir/relative`` atomically, refusing to pass through symlinks below out_dir."""
    current = out_dir
    parts = relative.split("/")
    for part in parts[:-1]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current, 0o755)
            continue
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            msg = f"{current} is a symlink or not a directory; export writes only real directories under {out_dir}"
            raise ExportError(msg)
    target = current / parts[-1]
    try:
        if stat.S_ISDIR(os.lstat(target).st_mode):
            msg = f"{target} is a directory; cannot write a file there"
            raise ExportError(msg)
    except FileNotFoundError:
        pass
    temporary = target.with_name(f".{target.name}.rho-export-tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)
    return target


def export_cells(
    cells: CellSet, out_dir: Path, *, workflow: str | None = None, where: str = "this notebook"
) -> ExportResult:
    """Write the folder of one workflow of ``cells`` into ``out_dir`` (created if missing).

    Raises
    ------
    ExportError
        No such workflow, a malformed cell, or a link or a folder in the way below ``out_dir``.
    BadPath
        ``out_dir`` is a name the file system cannot hold, or a file stands where it or a folder
        above it must be (:func:`~rho_notebook.service.paths.make_folder`).
    """
    cell = choose_workflow(cells, workflow, where=where)
    files = _files(cells, cell)
    out_dir = make_folder(out_dir, argument="dir")
    written = tuple(_write(out_dir, relative, data) for relative, data in files.items())
    name = cell.name or ""
    return ExportResult(
        workflow=name,
        out_dir=out_dir,
        entry=out_dir / _entry_file(cell),
        files=written,
        inputs=dict(cell.inputs),
        modules=tuple(sorted([*cells.modules, *cells.python])),
        agents=tuple(sorted(cells.agents)),
        flow=cell.flow if isinstance(cell, ScriptCell) else None,
    )


def export_notebook(notebook: Path, out_dir: Path, *, workflow: str | None = None) -> ExportResult:
    """``rho-notebook export NOTEBOOK.ipynb DIR [--workflow NAME]``."""
    return export_cells(read_cells(notebook), out_dir, workflow=workflow, where=str(notebook))


def exported_source(
    result: ExportResult,
    cells: CellSet,
    *,
    workspace: Workspace,
    python_interpreter: Path | None = None,
    script_folder: Path | None = None,
) -> NotebookSource:
    """Plan an export folder that lies inside ``workspace``: its entry file, its modules as
    overlays at their labels (the folder is a module root), and its ``agents/`` as the workflow
    folder's catalog. Diagnostics name the notebook cells the files came from. Python nodes are
    frozen with ``python_interpreter`` (None: this process's ``sys.executable``).

    ``script_folder`` (the notebook's folder) labels the entry as the kernel labels the cell,
    ``//<notebook folder>/NAME.star`` (``.py``, ``.graph.yaml``), whatever folder it was exported
    to. A script's label is part of its plan's digest, so planning a saved notebook headless then
    gives the digest its kernel gives; and the label (hence the sources digest) is the same from one
    headless run to the next, so planning an unchanged notebook again hands back its stored plan
    (docs/diff.md) instead of piling up plans labelled with temporary folders. None: the label of
    the exported file.

    Raises
    ------
    SourceError
        The folder is outside the workspace or a file cannot be read.
    """
    cell: WorkflowCell | ScriptCell = (
        cells.workflows.get(result.workflow) or cells.scripts.get(result.workflow) or cells.graphs[result.workflow]
    )
    label = label_for_path(result.entry, workspace.root)
    shown_label = label
    if script_folder is not None:
        shown_label = label_for_path(script_folder / result.entry.name, workspace.root)
    entry_suffix = ".graph.yaml" if isinstance(cell, GraphCell) else ".py" if isinstance(cell, ScriptCell) else ".star"
    entry_text = read_regular_file_nofollow(
        workspace.root, label[2:].split("/"), shown=label[2:], suffix=entry_suffix
    ).decode()
    modules: dict[str, SourceText] = {}
    for module_label in result.modules:
        relative = module_label[2:]
        suffix = ".py" if module_label in cells.python else ".star"
        text = read_regular_file_nofollow(result.out_dir, relative.split("/"), shown=relative, suffix=suffix).decode()
        display = (cells.python[module_label] if suffix == ".py" else cells.modules[module_label]).display
        modules[module_label] = SourceText(label=module_label, text=text, display=display)
    locations = {
        str(result.out_dir / "agents" / f"{agent_id}.md"): (cells.agents[agent_id].display, 1)
        for agent_id in result.agents
    }
    for module_label, python in cells.python.items():
        locations[python.display] = (python.display, 1)
        locations[module_label] = (python.display, 1)
    if isinstance(cell, ScriptCell):  # the script file is the body: its lines are one above the cell's
        locations[cell.display] = (cell.display, 1)
        locations[shown_label] = (cell.display, 1)
    return NotebookSource(
        entry=SourceText(label=shown_label, text=entry_text, display=cell.display),
        modules=modules,
        agents={},
        inputs=dict(cell.inputs),
        workflow_dir=result.out_dir,
        locations=locations,
        python_interpreter=python_interpreter,
        flow=cell.flow if isinstance(cell, ScriptCell) else None,
    )
