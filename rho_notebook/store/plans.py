"""Plans on disk: plans/<PLAN_ID>/{manifest.json, graph.json, sources/<DIGEST>.star}, and the
one-plan-per-graph index plan-index/<WORKSPACE_KEY>/<GRAPH DIGEST>/<SOURCES DIGEST>.json.

A plan directory is written under a temporary name and renamed into place, so a plan is either
complete or absent. Loading re-computes the graph digest from graph.json and refuses a mismatch.

One plan per graph: a plan is identified by (workspace key, graph digest, sources digest), the
last being the digest of its source labels and their content digests (:func:`sources_digest`).
:meth:`PlanStore.save_once` looks that key up in the index (one read) and hands back the stored
plan instead of saving a second one. An index entry is a hint, checked on every hit: the plan it
names must still exist, load (graph and sources match their digests) and have the same key, entry
module, workspace trust and file identities as a launch checks them (an executable touched since
has another identity, and a plan frozen with the old one would fail at launch; a working directory
whose entries changed launches alike), else it is a miss and the new plan is saved and indexed in
its place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from rho_notebook.errors import NotFound, StoreError
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.model.source import SourceText
from rho_notebook.store.files import (
    atomic_write,
    atomic_write_json,
    check_no_symlink,
    fsync_dir,
    list_dir,
    read_json,
    read_nofollow,
)
from rho_notebook.store.graphs import load_graph
from rho_notebook.store.ids import match_id
from rho_notebook.store.layout import StoreLayout

__all__ = ["PlanStore", "sources_digest"]

_PLAN_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def sources_digest(manifest: PlanManifest) -> str:
    """``sha256:<hex>`` of the plan's source labels and content digests (order-independent)."""
    pairs = sorted([source.label, source.sha256] for source in manifest.sources)
    encoded = json.dumps(pairs, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _same_plan(stored: PlanManifest, new: PlanManifest) -> bool:
    """Whether ``stored`` may stand for ``new``: same identity key and the facts a run relies on."""
    return (
        stored.workspace_key == new.workspace_key
        and stored.graph_digest == new.graph_digest
        and sources_digest(stored) == sources_digest(new)
        and stored.entry == new.entry
        and stored.workspace_root == new.workspace_root
        and stored.workspace_trusted == new.workspace_trusted
        and _launch_facts(stored) == _launch_facts(new)
    )


def _launch_facts(manifest: PlanManifest) -> dict[str, tuple[int, ...]]:
    """The identities a launch checks: a working directory's listing changing (a notebook's
    export folder made and removed beside it, a node's output files) is not a new plan."""
    return {path: identity.launch_facts() for path, identity in manifest.identities.items()}


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
        self._index(plan.manifest)
        return final

    def save_once(self, plan: Plan) -> Plan:
        """Save ``plan`` unless the store holds the same plan (:func:`_same_plan`) in the index;
        then that stored plan is returned (its ID and time, with ``plan``'s graph and sources)."""
        stored = self.find_same(plan.manifest)
        if stored is not None:
            return Plan(manifest=stored, graph=plan.graph, sources=plan.sources)
        self.save(plan)
        return plan

    def find_same(self, manifest: PlanManifest) -> PlanManifest | None:
        """The stored plan the index names for ``manifest``'s key, when it still stands for it."""
        plan_id = self._indexed(self._index_path(manifest))
        if plan_id is None:
            return None
        try:
            stored = self.load_manifest(plan_id)
            if not _same_plan(stored, manifest):
                return None
            self.load_sources(self._load(plan_id))  # graph.json and sources still match their digests
        except (StoreError, OSError, ValueError):
            return None
        return stored

    def _index_path(self, manifest: PlanManifest) -> Path:
        graph = manifest.graph_digest.removeprefix("sha256:")
        sources = sources_digest(manifest).removeprefix("sha256:")
        return self.layout.plan_index / manifest.workspace_key / graph / f"{sources}.json"

    def _index(self, manifest: PlanManifest) -> None:
        if manifest.plan_id == "unsaved":
            return
        path = self._index_path(manifest)
        self.layout.ensure(path.parent)
        atomic_write_json(path, {"plan_id": manifest.plan_id})

    def load_sources(self, plan: Plan) -> list[SourceText]:
        """The stored source texts of a loaded plan (``load`` leaves ``Plan.sources`` empty).

        Raises
        ------
        StoreError
            A stored source is missing or no longer matches its digest.
        """
        folder = self.layout.plan_dir(plan.plan_id) / "sources"
        found = []
        for record in plan.manifest.sources:
            path = folder / f"{record.sha256.removeprefix('sha256:')}.star"
            try:
                data = read_nofollow(path)
            except FileNotFoundError:
                msg = f"plan {plan.plan_id}: the stored source of {record.label} is missing; create a new plan"
                raise StoreError(msg) from None
            if "sha256:" + hashlib.sha256(data).hexdigest() != record.sha256:
                msg = f"plan {plan.plan_id}: the stored source of {record.label} no longer matches its digest; create a new plan"
                raise StoreError(msg)
            found.append(SourceText(label=record.label, text=data.decode(), display=record.label))
        return found

    def ids(self) -> list[str]:
        """Every plan ID, sorted; the plans folder is checked first (no symlink on the way, not
        writable by others)."""
        return sorted(name for name in list_dir(self.layout.plans, below=self.layout.home) if not name.startswith("."))

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
        return self._load(self.resolve(prefix))

    def _load(self, plan_id: str) -> Plan:
        """The plan with exactly ``plan_id`` (no listing of the plans folder)."""
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
        try:
            index = self._index_path(self.load_manifest(plan_id))
        except (StoreError, OSError, ValueError):
            index = None  # an unreadable manifest: its index entry, if any, is a miss anyway
        shutil.rmtree(folder)
        if index is not None and self._indexed(index) == plan_id:
            index.unlink(missing_ok=True)
        return plan_id

    def _indexed(self, path: Path) -> str | None:
        """The plan ID an index entry names, or None (absent, unreadable, malformed)."""
        check_no_symlink(path, below=self.layout.home)
        try:
            plan_id = read_json(path).get("plan_id")
        except (FileNotFoundError, NotADirectoryError, StoreError, AttributeError, ValueError):
            return None
        return plan_id if isinstance(plan_id, str) and _PLAN_ID.match(plan_id) else None
