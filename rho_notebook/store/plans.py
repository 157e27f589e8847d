"""Plans on disk: plans/<PLAN_ID>/{manifest.json, graph.json, sources/<DIGEST>.star}.

A plan directory is written under a temporary name and renamed into place, so a plan is either
complete or absent. Loading re-computes the graph digest from graph.json and refuses a mismatch.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rho_notebook.errors import NotFound, StoreError
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.store.files import atomic_write, atomic_write_json, check_no_symlink, fsync_dir, read_json
from rho_notebook.store.graphs import load_graph
from rho_notebook.store.ids import match_id
from rho_notebook.store.layout import StoreLayout

__all__ = ["PlanStore"]


class PlanStore:
    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout

    def save(self, plan: Plan) -> Path:
        plans = self.layout.ensure(self.layout.plans)
        final = plans / plan.plan_id
        staging = self.layout.ensure(plans / f".{plan.plan_id}.partial")
        sources = self.layout.ensure(staging / "sources")
        for source in plan.sources:
            record = next(r for r in plan.manifest.sources if r.label == source.label)
            atomic_write(sources / f"{record.sha256.removeprefix('sha256:')}.star", source.text.encode())
        atomic_write(staging / "graph.json", plan.graph.model_dump_json().encode() + b"\n")
        atomic_write_json(staging / "manifest.json", plan.manifest.model_dump(mode="json"))
        os.replace(staging, final)
        fsync_dir(plans)
        return final

    def ids(self) -> list[str]:
        if not self.layout.plans.is_dir():
            return []
        return sorted(p.name for p in self.layout.plans.iterdir() if not p.name.startswith("."))

    def resolve(self, prefix: str) -> str:
        return match_id(prefix, self.ids(), what="plan")

    def load_manifest(self, plan_id: str) -> PlanManifest:
        folder = self.layout.plan_dir(plan_id)
        check_no_symlink(folder / "manifest.json", below=self.layout.home)
        try:
            return PlanManifest.model_validate(read_json(folder / "manifest.json"))
        except FileNotFoundError:
            msg = f"plan {plan_id} has no manifest.json; the plan store entry is incomplete"
            raise NotFound(msg) from None

    def load(self, prefix: str) -> Plan:
        plan_id = self.resolve(prefix)
        folder = self.layout.plan_dir(plan_id)
        manifest = self.load_manifest(plan_id)
        graph, digest = load_graph(folder / "graph.json", below=self.layout.home)
        if digest != manifest.graph_digest:
            msg = f"plan {plan_id}: graph.json digests to {digest}, but the manifest records {manifest.graph_digest}; the plan was modified — create a new plan"
            raise StoreError(msg)
        return Plan(manifest=manifest, graph=graph)

    def list(self) -> list[PlanManifest]:
        found = []
        for plan_id in self.ids():
            try:
                found.append(self.load_manifest(plan_id))
            except (StoreError, FileNotFoundError):
                continue
        return found

    def delete(self, prefix: str) -> str:
        plan_id = self.resolve(prefix)
        folder = self.layout.plan_dir(plan_id)
        check_no_symlink(folder, below=self.layout.home)
        shutil.rmtree(folder)
        return plan_id
