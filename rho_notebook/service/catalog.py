"""The workflows of a workspace, found by reading files, never by running them.

What counts as a workflow, by kind:

``starlark``
    A ``*.star`` file that assigns ``WORKFLOW`` at its top level (an entry module). Its name is
    the first ``workflow(name = "...")`` written in it, else the file's stem.
``script``
    A ``*.py`` file that imports ``rho_notebook.script`` (docs/scripts.md), named by its stem.
``flow``
    A ``*.py`` file that imports ``rho_notebook.flow`` (docs/flows.md): one entry per top-level
    class deriving from a ``Workflow`` (the ``--flow NAME`` it runs), or the file's stem if it
    defines none.
``graph``
    A ``*.graph.yaml`` document, named by its top-level ``name:`` line, else its stem.
``notebook``
    A ``*.ipynb`` notebook: one entry per named ``%%workflow``, ``%%script`` or ``%%flow`` cell.

Folders that never hold the workspace's own workflows are not entered: hidden ones (``.rho/``,
``.git/``, ``.venv/``), Python environments (a folder with ``pyvenv.cfg``), ``node_modules``,
``__pycache__`` and ``site-packages``. Symlinks are not followed. The scan is bounded: it stops
after :data:`MAX_FILES` candidate files and says so (:attr:`WorkflowScan.truncated`); a file too
big or unreadable is listed in :attr:`WorkflowScan.skipped` with the reason, never silently left out.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from rho_notebook.errors import RhoError
from rho_notebook.model.base import FrozenModel
from rho_notebook.service.cells import split_cell

__all__ = ["WorkflowEntry", "WorkflowKind", "WorkflowScan", "MAX_FILES", "scan_workflows"]

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


def scan_workflows(root: Path, *, max_files: int = MAX_FILES) -> WorkflowScan:
    """The workflows under ``root`` (the module docstring says what counts)."""
    found: list[WorkflowEntry] = []
    skipped: list[str] = []
    read = 0
    truncated = False
    for path in _candidates(root):
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


def _candidates(root: Path) -> Iterator[Path]:
    """Candidate files under ``root`` in a stable order (sorted, depth first), skipping the
    folders the module docstring names and every symlink."""
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return
    folders = []
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if not entry.name.startswith(".") and entry.name not in _SKIPPED_DIRS:
                folders.append(Path(entry.path))
        elif entry.is_file(follow_symlinks=False) and _kind_of_name(entry.name) is not None:
            yield Path(entry.path)
    for folder in folders:
        if (folder / "pyvenv.cfg").exists():
            continue
        yield from _candidates(folder)


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
    if any(name == "rho_notebook.flow" or name.startswith("rho_notebook.flow.") for name in imported):
        classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef) and _is_workflow_class(node)]
        return [WorkflowEntry(file=relative, kind="flow", name=name) for name in classes or [stem]]
    if any(name == "rho_notebook.script" or name.startswith("rho_notebook.script.") for name in imported):
        return [WorkflowEntry(file=relative, kind="script", name=stem)]
    return []


def _is_workflow_class(node: ast.ClassDef) -> bool:
    """A class deriving (by name) from ``Workflow`` or ``flow.Workflow``."""
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
        if name == "Workflow":
            return True
    return False


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
