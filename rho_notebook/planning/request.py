"""The planning request every authoring form starts from: the entry source, the inputs and where
to look things up (:mod:`~rho_notebook.planning.forms` chooses the form from it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.source.labels import SourceText
from rho_notebook.source.workspace import Workspace

__all__ = ["PlanRequest"]


@dataclass
class PlanRequest:
    """Everything planning needs: the entry source, inputs and where to look things up."""

    entry: SourceText
    workspace: Workspace
    user_home: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    workflow_dir: Path | None = None
    """Folder of the entry module (its agents/ folder has the highest agent precedence)."""
    overlay_sources: Mapping[str, SourceText] = field(default_factory=dict)
    overlay_agents: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    search_path: str = "/usr/local/bin:/usr/bin:/bin"
    workspace_trusted: bool = False
    """Recorded in the plan; project settings and hooks apply only to trusted workspaces."""
    python_interpreter: Path | None = None
    """The interpreter Python nodes run in, by absolute path; None: this process's ``sys.executable``."""
    flow: str | None = None
    """A script entry planned as a flow run (docs/flows.md): the ``Workflow`` the module defines."""
