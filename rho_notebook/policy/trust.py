"""Workspace trust: ``rho-notebook trust [PATH]`` / ``untrust``.

A workspace is untrusted by default. Its workflow sources and agent files still validate, plan
and run (confirming the digest is the consent, and the plan records that the workspace was
untrusted), but its project settings and project hooks are ignored until it is trusted. Trust
records live in ``$RHO_NOTEBOOK_HOME/trust.json``, keyed by WORKSPACE_KEY.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rho_notebook.source.workspace import Workspace
from rho_notebook.store.files import atomic_write_json, read_json
from rho_notebook.store.layout import StoreLayout

__all__ = ["TrustStore"]


class TrustStore:
    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout

    @property
    def path(self) -> Path:
        return self.layout.home / "trust.json"

    def _read(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = read_json(self.path)
        except FileNotFoundError:
            return {"workspaces": {}}
        return data

    def is_trusted(self, workspace: Workspace) -> bool:
        record = self._read()["workspaces"].get(workspace.key)
        return bool(record) and record.get("path") == str(workspace.root)

    def trust(self, workspace: Workspace, *, by: str) -> dict[str, Any]:
        data = self._read()
        record = {"path": str(workspace.root), "by": by, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        data["workspaces"][workspace.key] = record
        self.layout.ensure(self.layout.home)
        atomic_write_json(self.path, data)
        return record

    def untrust(self, workspace: Workspace) -> bool:
        data = self._read()
        removed = data["workspaces"].pop(workspace.key, None) is not None
        if removed:
            atomic_write_json(self.path, data)
        return removed

    def dump(self) -> str:
        return json.dumps(self._read(), indent=2)
