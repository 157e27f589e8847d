"""Keeping a store and a workspace: deleting runs and plans, pruning old runs, trusting workspaces.

A live run (an owner holds it) is never deleted; ``prune`` asks again for each run it deletes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from rho_notebook.errors import BadArgument, NotFound, RhoError, RunRefused, TrustRefused
from rho_notebook.model.state import Lifecycle
from rho_notebook.policy.approvals import who_am_i
from rho_notebook.policy.trust import TrustStore
from rho_notebook.runtime.status import load_state
from rho_notebook.service.paths import check_path
from rho_notebook.service.wire import LIVE_LIFECYCLES
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.run_locks import OwnerLock
from rho_notebook.store.runs import RunStore

__all__ = ["Deleted", "delete", "delete_plan", "prunable", "trust", "untrust"]


@dataclass(frozen=True)
class Deleted:
    """What ``delete`` deleted (:func:`rho_notebook.service.wire.deleted_json` is its answer)."""

    kind: Literal["run", "plan"]
    id: str


def delete(layout: StoreLayout, target: str, *, include_plans: bool) -> Deleted:
    """Delete a run that no owner holds, or (when no run matches and ``include_plans``) a plan."""
    store = RunStore(layout)
    try:
        run_id = store.resolve(target)
    except NotFound:
        if not include_plans:
            raise
        return delete_plan(layout, target)
    if not owner_lets_go(layout, run_id):
        msg = f"run {run_id} is live (an owner holds it); cancel it first"
        raise RunRefused(msg)
    store.delete(run_id)
    return Deleted("run", run_id)


OWNER_EXIT_SECONDS = 5.0
"""How long ``delete`` and ``resume`` wait for the owner of a run that stopped (completed, or halted
for a decision) to let go of it: it journals that before it closes the journal and exits."""


def owner_lets_go(layout: StoreLayout, run_id: str) -> bool:
    """Whether no owner holds ``run_id``: at once, or within :data:`OWNER_EXIT_SECONDS` when the
    journal says the run stopped. False when a live owner executes it (the journal says it runs,
    waits or cancels, and the lock is held), or one that stopped did not let go in time. The one
    rule every front end's ``delete`` and ``resume`` go by: a run that has just ended is neither
    refused as live nor given a second owner."""
    lock = RunStore(layout).folder(run_id).lock
    if not OwnerLock.is_held(lock):
        return True
    if load_state(layout, run_id).lifecycle in LIVE_LIFECYCLES:  # read once: only a new owner changes
        return False  # a stopped run back to live, and none can take the lock while this one holds it
    deadline = time.monotonic() + OWNER_EXIT_SECONDS
    while OwnerLock.is_held(lock):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def delete_plan(layout: StoreLayout, plan: str) -> Deleted:
    """Delete a saved plan (its runs keep their own copy of the graph)."""
    return Deleted("plan", PlanStore(layout).delete(plan))


def prunable(layout: StoreLayout, *, older_than_days: float, include_damaged: bool) -> list[str]:
    """Completed runs last updated more than ``older_than_days`` ago (what ``prune`` deletes);
    with ``include_damaged``, damaged runs too (aged by their last readable event, else by
    their creation).

    Raises BadArgument: ``older_than_days`` is not a finite number >= 0.
    """
    if not math.isfinite(older_than_days) or older_than_days < 0:
        msg = f"older than {older_than_days} days: give a finite number of days, 0 or more"
        raise BadArgument(msg)
    try:
        cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
    except OverflowError:  # before the first day of the calendar: no run is that old
        return []
    store = RunStore(layout)
    doomed = []
    for run_id in store.ids():
        try:
            when = _last_update(layout, store, run_id, include_damaged=include_damaged)
        except (RhoError, OSError):
            continue
        if when and datetime.fromisoformat(when) < cutoff:
            doomed.append(run_id)
    return doomed


def _last_update(layout: StoreLayout, store: RunStore, run_id: str, *, include_damaged: bool) -> str | None:
    """When a prunable run was last updated (a damaged one: its last readable event, else its
    creation); None for a run that is not prunable."""
    state = load_state(layout, run_id)
    if state.lifecycle is Lifecycle.DAMAGED:
        if not include_damaged:
            return None
        return state.updated_at or store.manifest(run_id).created_at
    if state.lifecycle is Lifecycle.COMPLETED:
        return state.updated_at
    return None


def _exists(path: Path) -> bool:
    """Whether ``path`` names something (a name the file system cannot hold names nothing)."""
    try:
        return path.exists()
    except OSError:
        return False


def trust(layout: StoreLayout, path: Path | None) -> tuple[Workspace, dict[str, Any]]:
    """Trust the workspace holding ``path``: its project settings and hooks apply.

    Raises TrustRefused: ``path`` does not exist: nothing is trusted; BadPath: ``path`` is a name the file
    system cannot hold.
    """
    if path is not None:
        check_path(path, argument="path")
    if path is not None and not _exists(path):
        msg = f"{path} does not exist, so there is no workspace to trust; give a folder of the workspace"
        raise TrustRefused(msg, path=str(path))
    workspace = find_workspace(path)
    return workspace, TrustStore(layout).trust(workspace, by=who_am_i())


def untrust(layout: StoreLayout, path: Path | None) -> tuple[Workspace, bool]:
    """Stop trusting the workspace holding ``path``: (the workspace, whether it was trusted)."""
    if path is not None:
        check_path(path, argument="path")
    workspace = find_workspace(path)
    return workspace, TrustStore(layout).untrust(workspace)
