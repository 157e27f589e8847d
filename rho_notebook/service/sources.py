"""What a front end names -> the planning request: an entry ``.star`` path, a script or flow module
(``SCRIPT.py``), an item-graph document (``FILE.graph.yaml``), Starlark text, or notebook cells.

The one place that decides which workspace a source belongs to, which label it plans under, and
which user settings (home, ``PATH``, trust) come with it (:meth:`Service.request_for`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rho_notebook.errors import PlanError, SourceError
from rho_notebook.model.itemgraph import is_graph_file
from rho_notebook.model.source import SourceText
from rho_notebook.planning.item_plan import graph_entry
from rho_notebook.planning.plan import PlanRequest
from rho_notebook.planning.script import script_entry
from rho_notebook.policy.trust import TrustStore
from rho_notebook.service.cells import NotebookSource
from rho_notebook.service.paths import check_path
from rho_notebook.source.labels import FileSourceReader, label_for_path
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.layout import StoreLayout

__all__ = ["entry_source", "request_for", "module_workspace"]


def entry_source(path: Path, workspace: Workspace) -> SourceText:
    """Read an entry module from disk under the label rules (``.star``, under the root, no symlinks)."""
    label = label_for_path(path, workspace.root)
    if not label.endswith(".star"):
        what = "is a folder" if path.is_dir() else "is not a workflow file"
        msg = (
            f"{path} {what}: give a workflow entry (FILE.star), a script or flow module (SCRIPT.py), an item graph "
            "(FILE.graph.yaml) or a notebook (NOTEBOOK.ipynb)"
        )
        raise SourceError(msg, rule="load.label", file=str(path))
    return FileSourceReader(workspace.root).read(label)


def module_workspace(path: Path) -> Workspace:
    """The workspace of a script or graph document: found from the file's own folder."""
    return find_workspace(Path(os.path.realpath(path.absolute().parent)))


def _is_one_line(source: object) -> bool:
    return isinstance(source, Path) or (isinstance(source, str) and "\n" not in source)


def _is_script_path(source: object) -> bool:
    """Whether a planning source names a script file (``SCRIPT.py``), not Starlark text or a notebook."""
    if isinstance(source, Path):
        return source.suffix == ".py"
    return isinstance(source, str) and "\n" not in source and source.endswith(".py")


def _is_graph_path(source: object) -> bool:
    """Whether a planning source names an item-graph document (``FILE.graph.yaml``)."""
    return _is_one_line(source) and is_graph_file(str(source))


def _search_path(search_path: str | None) -> str:
    return search_path if search_path is not None else os.environ.get("PATH", os.defpath)


def request_for(
    layout: StoreLayout,
    source: Path | str | NotebookSource,
    *,
    inputs: Mapping[str, Any] | None = None,
    workspace: Workspace | None = None,
    search_path: str | None = None,
    flow: str | None = None,
) -> PlanRequest:
    """The planning request for an entry ``.star`` path, a script (a ``.py`` path: its
    workspace is found from the script's folder), Starlark source text (a str with a newline)
    or a notebook's workflow cells.

    The workspace (module root) defaults to the nearest ancestor of the current directory
    holding ``.rho/`` or ``.git``. Explicit ``inputs`` override a notebook source's default
    inputs key by key. ``flow`` (a script only) plans the module's ``Workflow`` of that name as
    a flow run (docs/flows.md).

    Raises BadPath: A path the file system cannot hold (:func:`~rho_notebook.service.paths.check_path`).
    """
    if _is_one_line(source):
        check_path(source, argument="file")  # type: ignore[arg-type]
    if _is_script_path(source) or _is_graph_path(source):
        request = _module_request(
            layout, Path(str(source)), inputs=inputs, workspace=workspace, search_path=search_path
        )
        return request if flow is None else dataclasses.replace(request, flow=flow)
    if flow is not None and not isinstance(source, NotebookSource):
        msg = f"--flow {flow} needs a flow module (a .py file), not {source!s:.80}"
        raise PlanError(msg)
    ws = workspace or find_workspace()
    given = dict(inputs or {})
    common: dict[str, Any] = {
        "workspace": ws,
        "user_home": layout.home,
        "search_path": _search_path(search_path),
        "workspace_trusted": TrustStore(layout).is_trusted(ws),
    }
    if isinstance(source, NotebookSource):
        return PlanRequest(
            entry=source.entry,
            inputs={**source.inputs, **given},
            workflow_dir=source.workflow_dir,
            overlay_sources=dict(source.modules),
            overlay_agents=dict(source.agents),
            python_interpreter=source.python_interpreter,
            flow=flow if flow is not None else source.flow,
            **common,
        )
    if isinstance(source, str) and "\n" in source:
        return PlanRequest(entry=_text_entry(source, ws), inputs=given, workflow_dir=Path.cwd().resolve(), **common)
    entry = entry_source(Path(source), ws)
    return PlanRequest(entry=entry, inputs=given, workflow_dir=(ws.root / entry.label[2:]).parent, **common)


def _text_entry(text: str, workspace: Workspace) -> SourceText:
    """Starlark text planned as ``source.star`` in the current directory (its label under the root)."""
    folder = Path.cwd().resolve()
    relative = folder.relative_to(workspace.root).as_posix() if folder.is_relative_to(workspace.root) else ""
    label = "//" + (f"{relative}/" if relative and relative != "." else "") + "source.star"
    return SourceText(label=label, text=text, display="<source>")


def _module_request(
    layout: StoreLayout,
    path: Path,
    *,
    inputs: Mapping[str, Any] | None,
    workspace: Workspace | None,
    search_path: str | None,
) -> PlanRequest:
    """The planning request of a script (``SCRIPT.py``) or graph document: its workspace is found
    from its folder (unless given) and the file must lie inside it."""
    ws = workspace or module_workspace(path)
    entry = graph_entry(path, ws) if is_graph_file(path.name) else script_entry(path, ws)
    return PlanRequest(
        entry=entry,
        inputs=dict(inputs or {}),
        workflow_dir=(ws.root / entry.label[2:]).parent,
        workspace=ws,
        user_home=layout.home,
        search_path=_search_path(search_path),
        workspace_trusted=TrustStore(layout).is_trusted(ws),
    )
