"""Finding the workspace (the module root) and its key.

The workspace is the nearest ancestor of a starting folder that holds ``.rho/`` or ``.git``,
else the starting folder itself. Its canonical path's sha256 is the WORKSPACE_KEY, so a kernel
and a terminal in the same project see the same workspace.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Workspace", "find_workspace"]


@dataclass(frozen=True)
class Workspace:
    root: Path
    """Canonical absolute path of the module root."""

    @property
    def key(self) -> str:
        return hashlib.sha256(os.fsencode(self.root)).hexdigest()


def find_workspace(start: Path | None = None) -> Workspace:
    """The workspace containing ``start`` (default: the current directory)."""
    here = (start or Path.cwd()).resolve()
    if here.is_file():
        here = here.parent
    for candidate in (here, *here.parents):
        if (candidate / ".rho").is_dir() or (candidate / ".git").exists():
            return Workspace(root=candidate)
    return Workspace(root=here)
