"""Reading settings documents: user ``$RHO_NOTEBOOK_HOME/settings.json`` and, only for a trusted
workspace, project ``<workspace>/.rho/settings.json``. Layers that own a section (providers,
hooks, plan approval) validate their part of the documents returned here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rho_notebook.errors import StoreError
from rho_notebook.store.files import read_nofollow

__all__ = ["SettingsDocument", "settings_documents"]


@dataclass(frozen=True)
class SettingsDocument:
    origin: Literal["user", "project"]
    path: Path
    data: dict[str, Any]


def _load(path: Path, origin: Literal["user", "project"]) -> SettingsDocument | None:
    try:
        raw = read_nofollow(path)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        msg = f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        raise StoreError(msg) from None
    if not isinstance(data, dict):
        msg = f"{path}: settings must be a JSON object"
        raise StoreError(msg)
    return SettingsDocument(origin=origin, path=path, data=data)


def settings_documents(home: Path, workspace: Path | None, *, trusted: bool) -> list[SettingsDocument]:
    """User settings first, then project settings when the workspace is trusted."""
    found = []
    user = _load(home / "settings.json", "user")
    if user is not None:
        found.append(user)
    if workspace is not None and trusted:
        project = _load(workspace / ".rho" / "settings.json", "project")
        if project is not None:
            found.append(project)
    return found
