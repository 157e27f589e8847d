"""A frozen plan: the digest-covered graph plus its manifest (what is recorded but not digested).

The manifest holds IDs, time, workspace location and key, source labels/sizes/digests, file
identities, the authority list, planning limits and the planner's format identity. Planning
(:mod:`rho_notebook.planning.plan`) builds plans; the store saves and loads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from rho_notebook.model.base import FrozenModel
from rho_notebook.model.graph import Graph
from rho_notebook.model.identity import FileIdentity
from rho_notebook.model.source import SourceText

__all__ = ["PLAN_FORMAT", "SourceRecord", "AuthorityItem", "PlanManifest", "Plan"]

PLAN_FORMAT: Literal["rho-notebook/plan/v1"] = "rho-notebook/plan/v1"


class SourceRecord(FrozenModel):
    label: str
    size: int
    sha256: str


class AuthorityItem(FrozenModel):
    """One thing the plan may use: shown to the person who confirms the digest."""

    kind: Literal["executable", "interpreter", "directory", "agent", "capability"]
    value: str
    detail: str = ""


class PlanManifest(FrozenModel):
    format: Literal["rho-notebook/plan/v1"] = PLAN_FORMAT
    plan_id: str
    created_at: str
    graph_digest: str
    workflow: str
    entry: str
    """Label of the entry module."""
    workspace_root: str
    workspace_key: str
    workspace_trusted: bool = False
    sources: tuple[SourceRecord, ...]
    inputs: dict[str, Any]
    identities: dict[str, FileIdentity]
    """File identity of every frozen file and directory at plan time, by frozen path."""
    authority: tuple[AuthorityItem, ...]
    limits: dict[str, int]
    planner: dict[str, Any]
    stats: dict[str, int] = {}
    flow: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)
    """A flow plan's compiled manifest (docs/flows.md): modules, agent resources, selectors."""


@dataclass
class Plan:
    manifest: PlanManifest
    graph: Graph
    sources: list[SourceText] = field(default_factory=list)

    @property
    def plan_id(self) -> str:
        return self.manifest.plan_id

    @property
    def graph_digest(self) -> str:
        return self.manifest.graph_digest
