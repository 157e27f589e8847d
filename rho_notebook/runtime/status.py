"""Reading a run's durable state without owning it: the journal folded from the start.

Status never takes the owner lock. A run whose lifecycle says an owner is active while its owner
lock is free is reported as needs_recovery (the owner exited uncleanly); nothing is written.
"""

from __future__ import annotations

from rho_notebook.model.run_state import RunState, replay
from rho_notebook.model.state import Lifecycle
from rho_notebook.store.journal import read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import OwnerLock, RunStore

__all__ = ["load_state"]


def load_state(layout: StoreLayout, run_id: str) -> RunState:
    """The current durable state: the journal folded from the start (status never takes ownership).

    A run whose lifecycle says an owner is active but whose owner lock is free is reported as
    needs_recovery (the owner exited uncleanly), without writing anything.
    """
    store = RunStore(layout)
    manifest = store.manifest(run_id)
    graph = store.graph(run_id, expected_digest=manifest.graph_digest)
    state = RunState.fresh(run_id=run_id, plan_id=manifest.plan_id, graph=graph, graph_digest=manifest.graph_digest)
    read = read_journal(store.folder(run_id).events)
    replay(state, read.events)
    if state.lifecycle in (Lifecycle.RUNNING, Lifecycle.CANCELLING, Lifecycle.WAITING):
        if not OwnerLock.is_held(store.folder(run_id).lock):
            state.lifecycle = Lifecycle.NEEDS_RECOVERY
    return state
