"""Reading a run's durable state without owning it: the journal folded from the start.

Status never takes the owner lock. A run whose lifecycle says an owner is active while its owner
lock is free is reported as needs_recovery (the owner exited uncleanly); nothing is written.

A chained run (``journal_format: chained-v1``) is read against its hash chain and watermark
(:func:`rho_notebook.store.journal.check_journal`): a journal that contradicts what was fsynced
is reported as ``damaged``, with the reason in :attr:`RunState.damage` and the nodes folded from
the readable prefix; so is a run whose ``requests`` or ``nodes`` folder is a symlink or a file
(:meth:`~rho_notebook.store.runs.RunFolder.damage`). ``state.json`` and ``exit.json`` are never
taken as proof of anything.

Reading builds no pydantic model when the run's files allow it (issue 31: ``status`` and ``runs``
start in a fraction of the time): the manifest is read as :class:`RunFacts` (:func:`run_facts`)
and the frozen graph as its outline (:func:`~rho_notebook.store.graphs.load_outline`, verified by
its digest all the same). A manifest the light reading does not accept whole is validated as a
:class:`~rho_notebook.store.runs.RunManifest`, as before, with the same errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rho_notebook.errors import StoreError
from rho_notebook.model.run_fold import replay
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.store.files import check_no_symlink, read_json
from rho_notebook.store.graphs import GraphOutline, load_outline
from rho_notebook.store.journal import CHAINED, check_journal, read_journal
from rho_notebook.store.layout import StoreLayout, run_folder_damage
from rho_notebook.store.run_locks import OwnerLock

if TYPE_CHECKING:
    from rho_notebook.store.runs import RunManifest

__all__ = [
    "MANIFEST_FIELDS",
    "RunFacts",
    "allowed_failures_of",
    "graph_outline",
    "journal_state",
    "load_state",
    "run_facts",
]

MANIFEST_FIELDS = frozenset(
    "format run_id plan_id graph_digest workflow created_at workspace_root workspace_key identities mode origin "
    "initiator via client journal_format reuse seed_from seed_nodes forked_from executor".split()
)
"""The fields of :class:`~rho_notebook.store.runs.RunManifest` (a unit test keeps them equal)."""
_REQUIRED = ("run_id", "plan_id", "graph_digest", "workflow", "created_at", "workspace_root", "workspace_key")
_TEXT = frozenset({*_REQUIRED, "format", "mode", "origin", "initiator", "via", "journal_format", "executor"})
_IDENTITY = frozenset({"dev", "ino", "size", "mtime_ns", "mode"})


@dataclass(frozen=True, kw_only=True)
class RunFacts:
    """What status and the run list read of a run's manifest (the fields keep its names)."""

    plan_id: str
    graph_digest: str
    created_at: str
    origin: str
    mode: str
    initiator: str
    via: str
    client: str | None
    journal_format: str
    executor: str
    forked_from: dict[str, str] | None = None
    """A fork's ``{"run", "node"}`` (docs/fork.md); None for any other run."""

    @property
    def chained(self) -> bool:
        return self.journal_format == CHAINED

    @classmethod
    def of(cls, manifest: RunManifest | dict[str, Any]) -> RunFacts:
        def get(name: str, default: Any = None) -> Any:
            return manifest.get(name, default) if isinstance(manifest, dict) else getattr(manifest, name)

        origin = get("origin", "cli")
        return cls(
            plan_id=get("plan_id"),
            graph_digest=get("graph_digest"),
            created_at=get("created_at"),
            origin=origin,
            mode=get("mode", "auto"),
            initiator=get("initiator", ""),
            via=get("via") or origin,  # as RunManifest reads a manifest written before `via`
            client=get("client"),
            journal_format=get("journal_format", ""),
            executor=get("executor", "local"),
            forked_from=get("forked_from"),
        )


def run_facts(layout: StoreLayout, run_id: str) -> RunFacts:
    """The manifest of run ``run_id`` as :class:`RunFacts`; read as plain JSON when every field
    has the type :class:`~rho_notebook.store.runs.RunManifest` gives it, else validated as one
    (which raises what it always raised: NotFound for a missing manifest, a validation error)."""
    path = layout.checked_run_dir(run_id) / "manifest.json"
    check_no_symlink(path, below=layout.home)
    try:
        data = read_json(path)
    except (FileNotFoundError, StoreError):
        data = None
    if isinstance(data, dict) and _plain_manifest(data):
        return RunFacts.of(data)
    from rho_notebook.store.runs import RunStore  # the model: only for a manifest read otherwise

    return RunFacts.of(RunStore(layout).manifest(run_id))


def _plain_manifest(data: dict[str, Any]) -> bool:
    """Whether ``data`` is a manifest whose every field already has its model's type."""
    if not data.keys() <= MANIFEST_FIELDS or not all(name in data for name in (*_REQUIRED, "identities")):
        return False
    if not all(isinstance(data[name], str) for name in _TEXT & data.keys()):
        return False
    if not all(data.get(name) is None or isinstance(data[name], str) for name in ("client", "seed_from")):
        return False
    seeds, identities = data.get("seed_nodes", []), data["identities"]
    return (
        isinstance(data.get("reuse", True), bool)
        and isinstance(seeds, list)
        and all(isinstance(seed, str) for seed in seeds)
        and isinstance(identities, dict)
        and all(_plain_identity(identity) for identity in identities.values())
    )


def _plain_identity(identity: Any) -> bool:
    return (
        isinstance(identity, dict)
        and identity.keys() == _IDENTITY
        and all(type(value) is int for value in identity.values())
    )


_ALLOWED: dict[str, frozenset[str]] = {}
"""Graph digest -> the nodes of that graph whose failure does not count, for every graph outline
this process read (a digest fixes the graph, so the answer never goes stale)."""
_ALLOWED_KEPT = 256


def allowed_failures_of(graph_digest: str) -> frozenset[str] | None:
    """The ``allow_failure`` nodes of the graph with digest ``graph_digest`` when this process read
    its outline (every status read does: :func:`journal_state`), else None. What a node view shows
    for a failed node needs it (``failure (allowed)``), and a run state does not carry it."""
    return _ALLOWED.get(graph_digest)


def graph_outline(layout: StoreLayout, run_id: str, *, expected_digest: str) -> GraphOutline:
    """The outline of the run's frozen graph, refused (StoreError) when it does not digest to
    ``expected_digest`` (as :meth:`RunStore.graph <rho_notebook.store.runs.RunStore.graph>`)."""
    path = layout.checked_run_dir(run_id) / "graph.json"
    outline, digest = load_outline(path, below=layout.home, expected_digest=expected_digest)
    if digest != expected_digest:
        msg = f"run {run_id}: graph.json digests to {digest}, not the confirmed {expected_digest}; refusing to use a modified graph"
        raise StoreError(msg)
    _remember_allowed(expected_digest, outline)
    return outline


def _remember_allowed(graph_digest: str, outline: GraphOutline) -> None:
    """Keep the ``allow_failure`` nodes of the graph with digest ``graph_digest`` (:func:`allowed_failures_of`)."""
    if graph_digest not in _ALLOWED:
        if len(_ALLOWED) >= _ALLOWED_KEPT:
            _ALLOWED.pop(next(iter(_ALLOWED)), None)
        _ALLOWED[graph_digest] = outline.allowed_failures


def journal_state(
    layout: StoreLayout, run_id: str, *, facts: RunFacts | None = None, outline: GraphOutline | None = None
) -> RunState:
    """The run's journal folded from the start, checked against its chain and watermark when it
    has them; lifecycle ``damaged`` (with :attr:`RunState.damage`) when it contradicts them.
    Neither probes nor takes the owner lock. ``facts``: its manifest, when the caller read it;
    ``outline``: its frozen graph's, when the caller loaded the graph and checked its digest
    against ``facts.graph_digest`` (the run's owner has: the file is then not read again)."""
    facts = run_facts(layout, run_id) if facts is None else facts
    if outline is None:
        outline = graph_outline(layout, run_id, expected_digest=facts.graph_digest)
    else:
        _remember_allowed(facts.graph_digest, outline)
    folder = layout.checked_run_dir(run_id)
    state = RunState(
        run_id=run_id,
        plan_id=facts.plan_id,
        graph_digest=facts.graph_digest,
        workflow=outline.name,
        nodes={name: NodeRecord() for name in outline.nodes},
    )
    damage = run_folder_damage(folder)  # requests/ or nodes/ a link or a file: no owner may start on it
    if not facts.chained:
        replay(state, read_journal(folder / "events.jsonl").events)
    else:
        read = check_journal(folder / "events.jsonl", mark=folder / "journal.mark")
        replay(state, read.events)
        damage = read.damage or damage
    if damage is not None:
        state.lifecycle = Lifecycle.DAMAGED
        state.damage = damage
    return state


_OWNED = frozenset({Lifecycle.RUNNING, Lifecycle.CANCELLING, Lifecycle.WAITING})
"""Lifecycles in which the run's owner holds its lock."""


def load_state(layout: StoreLayout, run_id: str, *, facts: RunFacts | None = None) -> RunState:
    """The current durable state: the journal folded from the start (status never takes ownership).

    A run whose lifecycle says an owner is active but whose owner lock is free is reported as
    needs_recovery (the owner exited uncleanly), without writing anything. A damaged run stays
    damaged. ``facts``: the run's manifest, when the caller read it already (the run list).
    """
    state = journal_state(layout, run_id, facts=facts)
    if state.lifecycle in _OWNED and not OwnerLock.is_held(layout.checked_run_dir(run_id) / "mutation.lock"):
        # An owner journals the run's end, then unlocks: one that ended cleanly between the read
        # and the probe shows its end now. Only a run still live after the free lock was seen
        # lost its owner.
        state = journal_state(layout, run_id, facts=facts)
        if state.lifecycle in _OWNED:
            state.lifecycle = Lifecycle.NEEDS_RECOVERY
    return state
