"""The service's reads of a run's status and of the run list, synchronous and light.

``rho-notebook status`` and ``runs`` are the verbs a person types most, and a CLI process lives
for one of them: its start is most of its time (issue 31). So these reads import no event loop and
no pydantic model when the run's files allow it (:mod:`rho_notebook.runtime.status` says when),
and :class:`~rho_notebook.service.service.Service` answers ``status`` and ``run_rows`` through
them too (in a worker thread), so every front end shows what the CLI shows.
"""

from __future__ import annotations

from rho_notebook.errors import RhoError
from rho_notebook.model.run_state import RunState
from rho_notebook.runtime.status import RunFacts, graph_outline, load_state, run_facts
from rho_notebook.service.listing import RowCache, RunsQuery, list_rows
from rho_notebook.service.wire import RunRowJson
from rho_notebook.store.ids import match_id
from rho_notebook.store.journal import check_journal, read_journal
from rho_notebook.store.layout import StoreLayout

__all__ = ["allowed_failures", "completion_message", "manifest_facts", "resolve_run", "run_rows", "status"]


def resolve_run(layout: StoreLayout, run: str) -> str:
    """The full ID of run ``run`` (an ID or a unique prefix)."""
    return match_id(run, layout.run_ids(), what="run")


def status(layout: StoreLayout, run: str) -> RunState:
    """One durable snapshot of run ``run`` (:func:`~rho_notebook.runtime.status.load_state`)."""
    return load_state(layout, resolve_run(layout, run))


def run_rows(layout: StoreLayout, query: RunsQuery | None = None, cache: RowCache | None = None) -> list[RunRowJson]:
    """Rows of the run list (:func:`~rho_notebook.service.listing.list_rows`)."""
    return list_rows(layout, query, cache)


def manifest_facts(layout: StoreLayout, run_id: str) -> RunFacts | None:
    """What the run's manifest says (executor, front end, mode), None when it cannot be read
    (the status says what it can)."""
    try:
        return run_facts(layout, run_id)
    except (RhoError, OSError):
        return None


def completion_message(layout: StoreLayout, state: RunState) -> str | None:
    """The ``message`` of the run's last ``run_completed`` record (a script run's error); None
    when there is none or the journal cannot be read (``events`` names what is wrong)."""
    try:
        facts = run_facts(layout, state.run_id)
        folder = layout.checked_run_dir(state.run_id)
        after = max(0, state.last_seq - 8)
        if facts.chained:
            read = check_journal(folder / "events.jsonl", mark=folder / "journal.mark", after_seq=after)
        else:
            read = read_journal(folder / "events.jsonl", after_seq=after)
    except (RhoError, OSError):
        return None
    for record in reversed(read.events):
        if record.get("kind") == "run_completed":
            return str(record["message"]) if record.get("message") else None
    return None


def allowed_failures(layout: StoreLayout, run_id: str) -> frozenset[str]:
    """The run's nodes whose failure does not count (``allow_failure``); empty when its graph
    cannot be read (every failed node is then named)."""
    try:
        facts = run_facts(layout, run_id)
        return graph_outline(layout, run_id, expected_digest=facts.graph_digest).allowed_failures
    except (RhoError, OSError):
        return frozenset()
