"""The executed copy of a notebook after a headless run (papermill's output notebook).

``rho-notebook run NOTEBOOK.ipynb --output-notebook OUT.ipynb`` follows the run to its end, then
writes OUT.ipynb: a copy of the notebook (nbformat 4; a version 3 notebook is converted) in which

- the workflow cell that was run (``%%workflow NAME``, ``%%script``, ``%%graph`` or ``%%flow``)
  carries two ``display_data`` outputs: the run's final DAG picture (the bundle of
  :func:`rho_notebook.views.picture.run_bundle`: ``image/png``, ``image/svg+xml``, ``text/plain``;
  what GitHub, nbviewer and an untrusted JupyterLab show) and the run's result (``text/plain`` as
  ``rho-notebook result`` prints it, ``application/json`` with each node's state and output);
- each cell that runs that workflow with ``%workflow run NAME`` carries the final DAG picture;
- the notebook's and those cells' metadata say which run (``rho_notebook``: run, plan, digest,
  outcome).

Every other cell is copied as it was saved: nothing else is executed. The picture is drawn by the
caller (views sit above the service), so this module takes it as a bundle.

The copy is validated with :func:`nbformat.validate` and written atomically (a temporary file in
OUT's folder, fsynced, renamed over OUT), so OUT is either the old file or the whole new one. OUT
may be the input notebook only because the person named it. :func:`check_output_notebook` makes
every check that does not need the run (OUT's folder, the input's shape, the workflow cell) before
the run starts, so a run is not spent to learn that its notebook cannot be written; the copy is of
the notebook as read then.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from rho_notebook.errors import BadPath, ExportError
from rho_notebook.oshelpers import kind_of
from rho_notebook.service.export import cell_display, choose_workflow, read_cells
from rho_notebook.service.notebook_file import read_notebook_json
from rho_notebook.service.paths import check_path, path_refused, shown_path
from rho_notebook.service.results import RunResult
from rho_notebook.store.ids import new_id

__all__ = ["ARGUMENT", "RunOutputs", "OutputTarget", "check_output_notebook", "new_run_id", "write_output_notebook"]

ARGUMENT = "--output-notebook"
"""How messages name the target."""


@dataclass(frozen=True)
class OutputTarget:
    """Where the copy goes, checked before the run (:func:`check_output_notebook`)."""

    notebook: Path
    """The notebook that is run."""
    target: Path
    """OUT.ipynb, absolute."""
    cell: str
    """The workflow cell's display (``NOTEBOOK.ipynb cell N``): the cell that gets the outputs."""
    workflow: str
    """The workflow cell's NAME."""
    saved: str = field(repr=False, default="")
    """The notebook as read before the run (nbformat 4 JSON): the copy is of the notebook that ran,
    whatever is saved over it meanwhile."""


@dataclass(frozen=True)
class RunOutputs:
    """What the run left for the copy: its IDs, its final picture and its result."""

    run_id: str
    plan_id: str
    graph_digest: str
    picture: Mapping[str, str]
    """The final DAG's MIME bundle (``image/png`` base64, ``image/svg+xml``, ``text/plain``)."""
    picture_metadata: Mapping[str, Any]
    """The bundle's display metadata (the PNG's display size)."""
    result: RunResult


def new_run_id() -> str:
    """A fresh run ID (a UUIDv7 no run has), for ``run --run-id`` when the caller must know the run
    it starts: the copy is written from that run once it ends."""
    return new_id()


def check_output_notebook(notebook: Path, target: Path, *, workflow: str | None) -> OutputTarget:
    """Every check of ``--output-notebook OUT`` that does not need the run.

    Raises
    ------
    BadPath
        OUT is a name the file system cannot hold, a folder, or its folder does not exist.
    ExportError
        The notebook cannot be read as nbformat 4, or has no such workflow cell.
    """
    checked = Path(os.path.abspath(check_path(target, argument=ARGUMENT)))
    folder = checked.parent
    if not folder.is_dir():
        msg = f"{ARGUMENT} {shown_path(target)}: its folder {shown_path(folder)} does not exist; make it first"
        raise BadPath(msg, argument=ARGUMENT, path=os.fspath(target))
    try:
        info = os.stat(checked)
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise path_refused(err, target, argument=ARGUMENT) from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        msg = f"{ARGUMENT} {shown_path(target)} is {kind_of(info.st_mode)}, not a notebook file; give a file name"
        raise BadPath(msg, argument=ARGUMENT, path=os.fspath(target))
    cell = choose_workflow(read_cells(notebook), workflow, where=str(notebook))
    saved: str = nbformat.writes(_load(notebook), version=4)  # type: ignore[no-untyped-call]
    return OutputTarget(notebook=notebook, target=checked, cell=cell.display, workflow=cell.name or "", saved=saved)


def write_output_notebook(where: OutputTarget, outputs: RunOutputs) -> Path:
    """Write the copy (module docstring) to ``where.target``; the path written.

    Raises
    ------
    ExportError
        The copy does not validate.
    BadPath
        OUT cannot be written (no permission, the disk is full).
    """
    book = nbformat.reads(where.saved, as_version=4)  # type: ignore[no-untyped-call]
    picture = _display(dict(outputs.picture), metadata=outputs.picture_metadata)
    result = _display(_result_bundle(outputs.result), metadata={})
    facts = _facts(outputs)
    runs = re.compile(rf"%workflow\s+run\s+{re.escape(where.workflow)}(?=\s|$)", re.MULTILINE)
    for index, cell in enumerate(book.cells, start=1):
        if cell.cell_type != "code":
            continue
        if cell_display(where.notebook, index) == where.cell:
            cell.outputs = [picture, result]
        elif runs.search(cell.source):
            cell.outputs = [picture]
        else:
            continue
        cell.metadata["rho_notebook"] = facts
    book.metadata["rho_notebook"] = {**facts, "notebook": where.notebook.name, "workflow": where.workflow}
    try:
        nbformat.validate(book)
    except nbformat.ValidationError as err:
        msg = f"{where.target}: the copy of {where.notebook} is not a valid notebook ({err.message}); nothing written"
        raise ExportError(msg) from None
    text: str = nbformat.writes(book, version=4)  # type: ignore[no-untyped-call]
    return _write(where.target, text if text.endswith("\n") else text + "\n")


def _load(notebook: Path) -> Any:
    """The notebook as an nbformat 4 node, read through the untrusted-file reader, and valid."""
    data = read_notebook_json(notebook)
    try:
        with warnings.catch_warnings():  # nbformat warns about old minor versions it upgrades
            warnings.simplefilter("ignore")
            book = nbformat.reads(json.dumps(data), as_version=4)  # type: ignore[no-untyped-call]
            nbformat.validate(book)
    except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError) as err:
        message = getattr(err, "message", None) or str(err)
        msg = f"{notebook}: not a valid nbformat 4 notebook ({message:.200}); save it with Jupyter, then run again"
        raise ExportError(msg) from None
    return book


def _display(data: dict[str, Any], *, metadata: Mapping[str, Any]) -> Any:
    """A ``display_data`` output of ``data`` (a MIME bundle), as nbformat 4 holds one."""
    output = {"output_type": "display_data", "data": data, "metadata": json.loads(json.dumps(dict(metadata)))}
    return nbformat.from_dict(output)  # type: ignore[no-untyped-call]


def _result_bundle(result: RunResult) -> dict[str, Any]:
    """``text/plain`` as ``rho-notebook result`` prints it; ``application/json``: per node its
    state and output (no store paths, pids or times: they say nothing to a reader elsewhere)."""
    nodes: dict[str, Any] = {}
    for name, node in result.nodes.items():
        nodes[name] = {"state": node.state, **({"output": node.output} if node.has_output else {})}
    data: dict[str, Any] = {
        "run_id": result.run_id,
        "workflow": result.workflow,
        "lifecycle": result.lifecycle,
        "outcome": result.outcome,
        "nodes": nodes,
    }
    if result.output is not None:
        data["output"] = result.output
    return {"text/plain": str(result), "application/json": json.loads(json.dumps(data))}


def _facts(outputs: RunOutputs) -> dict[str, Any]:
    result = outputs.result
    return {
        "run_id": outputs.run_id,
        "plan_id": outputs.plan_id,
        "graph_digest": outputs.graph_digest,
        "lifecycle": result.lifecycle,
        "outcome": result.outcome,
    }


def _write(target: Path, text: str) -> Path:
    """``text`` to ``target`` through a temporary file in its folder and a rename."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = 0o644
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".rho-tmp", dir=target.parent)
    except OSError as err:
        raise path_refused(err, target, argument=ARGUMENT) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as err:
        Path(temporary).unlink(missing_ok=True)
        raise path_refused(err, target, argument=ARGUMENT) from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
