"""Shared fixtures: a private store home and a throwaway workspace per test."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.plan.plan import Plan
from rho_notebook.service import Service
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.layout import StoreLayout

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Project:
    """A workspace folder (with .rho/) and a store home, both temporary."""

    root: Path
    home: Path

    def write(self, relative: str, text: str, *, mode: int | None = None) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        if mode is not None:
            path.chmod(mode)
        return path

    @property
    def service(self) -> Service:
        return Service(layout=StoreLayout(home=self.home))

    @property
    def workspace(self) -> Workspace:
        return Workspace(root=self.root)

    def plan(self, relative: str, inputs: dict[str, Any] | None = None, *, store: bool = True) -> Plan:
        service = self.service
        request = service.request_for(self.root / relative, inputs=inputs or {}, workspace=self.workspace)
        coro = service.plan(request) if store else service.validate(request)
        return asyncio.run(coro)

    def stored_plans(self) -> list[str]:
        plans = self.home / "workflows" / "plans"
        return sorted(p.name for p in plans.iterdir()) if plans.exists() else []

    def cli(self, *args: str, check: bool = False, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "RHO_NOTEBOOK_HOME": str(self.home), **(env or {})}
        full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
        return subprocess.run(
            [sys.executable, "-m", "rho_notebook", *args],
            cwd=self.root,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "ws"
    (root / ".rho").mkdir(parents=True)
    return Project(root=root.resolve(), home=(tmp_path / "home").resolve())


def star(body: str) -> str:
    """Wrap a build() body returning nodes into a minimal entry module."""
    return (
        "def build(inputs):\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n\nWORKFLOW = define(inputs = {}, build = build)\n"
    )
