"""Reading a run's durable state without owning it: the journal folded from the start.

Status never takes the owner lock. A run whose lifecycle says an owner is active while its owner
lock is free is reported as needs_recovery (the owner exited uncleanly); nothing is written.

A chained run (``journal_format: chained-v1``) is read against its hash chain and watermark
(:func:`rho_notebook.store.journal.check_journal`): a journal that contradicts what was fsynced
is reported as ``damaged``, with the reason in :attr:`RunState.damage` and the nodes folded from
the readable prefix; so is a run whose ``requests`` or ``nodes`` folder is a symlink or a file
(:meth:`~rho_notebook.store.runs.RunFolder.damage`). ``state.json`` and ``exit.json`` are never
taken as proof of anything.
"""

from __future__ import annotations

from rho_notebook.model.run_state import RunState, replay
from rho_notebook.model.state import Lifecycle
from rho_notebook.store.journal import check_journal, read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import OwnerLock
from rho_notebook.store.runs import RunStore

__all__ = ["load_state", "journal_state"]


def journal_state(layout: StoreLayout, run_id: str) -> RunState:
    """The run's journal folded from the start, checked against its chain and watermark when it
    has them; lifecycle ``damaged`` (with :attr:`RunState.damage`) when it contradicts them.
    Neither probes nor takes the owner lock."""
    store = RunStore(layout)
    manifest = store.manifest(run_id)
    graph = store.graph(run_id, expected_digest=manifest.graph_digest)
    folder = store.folder(run_id)
    state = RunState.fresh(run_id=run_id, plan_id=manifest.plan_id, graph=graph, graph_digest=manifest.graph_digest)
    damage = folder.damage()  # requests/ or nodes/ a link or a file: no owner may start on it
    if not manifest.chained:
        replay(state, read_journal(folder.events).events)
    else:
        read = check_journal(folder.events, mark=folder.mark)
        replay(state, read.events)
        damage = read.damage or damage
    if damage is not None:
        state.lifecycle = Lifecycle.DAMAGED
        state.damage = damage
    return state


def load_state(layout: StoreLayout, run_id: str) -> RunState:
    """The current durable state: the journal folded from the start (status never takes ownership).

    A run whose lifecycle says an owner is active but whose owner lock is free is reported as
    needs_recovery (the owner exited uncleanly), without writing anything. A damaged run stays
    damaged.
    """
    state = journal_state(layout, run_id)
    if state.lifecycle in (Lifecycle.RUNNING, Lifecycle.CANCELLING, Lifecycle.WAITING):
        if not OwnerLock.is_held(RunStore(layout).folder(run_id).lock):
            state.lifecycle = Lifecycle.NEEDS_RECOVERY
    return state
