"""Listing the runs of a store: snapshots (``runs``) and rows of the run list (``run_rows``).

One listing rule for every front end: a run whose directory entry is refused (a symlink, not a
directory) or that cannot be read is left out and reported as a warning, never silently; a run
whose journal is damaged is listed as ``damaged``. A front end that polls the list (the server)
keeps a :class:`RowCache` so the rows of finished runs are not read again. A row of a run that an
owner process holds now names that process (``owner_pid``: ``runs`` shows it, ``kill`` needs it).

Listing builds no pydantic model for runs whose files allow it (:mod:`rho_notebook.runtime.status`):
``rho-notebook runs`` starts fast (issue 31).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rho_notebook.errors import NotFound, RhoError
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.runtime.status import load_state, run_facts
from rho_notebook.service.wire import LIVE_LIFECYCLES, RunRowJson, run_row_json
from rho_notebook.store.files import refused_dir_entry
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import OwnerLock

__all__ = ["RowCache", "RunsQuery", "list_runs", "list_rows", "owner_pid"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RunsQuery:
    """Which runs to list: by lifecycle, and how many of the newest (0: all)."""

    state: Lifecycle | None = None
    limit: int = 0

    def select(self, runs: Sequence[T], lifecycle: Callable[[T], Lifecycle | str]) -> list[T]:
        """The listing rule, once for every front end: of ``runs`` (oldest first), those in
        ``state`` (when given), then the newest ``limit`` of them (0: all), oldest first.
        ``lifecycle`` reads a run's lifecycle (a :class:`Lifecycle` or its value)."""
        wanted = None if self.state is None else self.state.value
        kept = [run for run in runs if wanted is None or Lifecycle(lifecycle(run)).value == wanted]
        return kept[-self.limit :] if self.limit > 0 else kept


_log = logging.getLogger(__name__)
_REPORTED_REFUSALS: set[str] = set()
"""Refused run directory entries already warned about in this process."""


class RowCache:
    """Rows of finished runs by the size and mtime of their journal and the mtime of its
    watermark (:meth:`Service.run_rows`).

    A front end that lists runs often (the server) keeps one; safe to share between threads.
    """

    def __init__(self) -> None:
        self._rows: dict[str, tuple[tuple[int, ...], RunRowJson]] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str, key: tuple[int, ...]) -> RunRowJson | None:
        with self._lock:
            found = self._rows.get(run_id)
        return found[1] if found is not None and found[0] == key else None

    def put(self, run_id: str, key: tuple[int, ...], row: RunRowJson) -> None:
        with self._lock:
            self._rows[run_id] = (key, row)

    def keep(self, run_ids: list[str]) -> None:
        """Forget the runs not in ``run_ids`` (deleted)."""
        kept = set(run_ids)
        with self._lock:
            for gone in [run_id for run_id in self._rows if run_id not in kept]:
                del self._rows[gone]


def list_runs(layout: StoreLayout, query: RunsQuery | None) -> list[RunState]:
    """Snapshots of the listable runs, oldest first, selected by ``query``."""
    found = []
    for run_id in _listable_run_ids(layout):
        try:
            found.append(load_state(layout, run_id))
        except (RhoError, OSError):
            continue
    return (query or RunsQuery()).select(found, lambda state: state.lifecycle)


def list_rows(layout: StoreLayout, query: RunsQuery | None, cache: RowCache | None) -> list[RunRowJson]:
    """Rows of the listable runs, oldest first, selected by ``query``; finished rows from ``cache``."""
    ids = _listable_run_ids(layout)
    if cache is not None:
        cache.keep(ids)
    rows = [row for row in (_run_row(layout, run_id, cache) for run_id in ids) if row is not None]
    return (query or RunsQuery()).select(rows, lambda row: row["lifecycle"])


def _listable_run_ids(layout: StoreLayout) -> list[str]:
    """The store's run IDs but those whose directory entry is refused, each reported as a warning
    (``rho-notebook: warning: ...`` in the CLI, the server's log; once per process and entry)."""
    ids = []
    for run_id in layout.run_ids():
        refused = refused_dir_entry(layout.run_dir(run_id))
        if refused is None:
            ids.append(run_id)
        else:
            _report_refusal(run_id, refused)
    return ids


def _run_row(layout: StoreLayout, run_id: str, cache: RowCache | None) -> RunRowJson | None:
    key = None
    if cache is not None:
        key = _row_key(layout, run_id)
        cached = cache.get(run_id, key) if key is not None else None
        if cached is not None:
            return cached
    try:
        facts = run_facts(layout, run_id)
        state = load_state(layout, run_id, facts=facts)
        row = run_row_json(state, facts)
        if isinstance(facts.forked_from, dict):
            row["lineage"] = fork_lineage(layout, facts.forked_from)
    except NotFound:  # no manifest yet: a run being created
        return None
    except (RhoError, OSError) as err:  # reported as a warning, never silently left out
        _report_refusal(run_id, err.message if isinstance(err, RhoError) else str(err))
        return None
    finished = state.lifecycle not in LIVE_LIFECYCLES and state.lifecycle is not Lifecycle.PLANNED
    pid = None if finished else owner_pid(layout, run_id)
    if pid is not None:
        row["owner_pid"] = pid
    elif cache is not None and key is not None and finished:
        cache.put(run_id, key, row)
    return row


def owner_pid(layout: StoreLayout, run_id: str) -> int | None:
    """The pid of the process that owns run ``run_id`` now (0: an owner that did not record its
    pid), None when no process owns it (:meth:`OwnerLock.holder`; a lock that cannot be used
    counts as no owner: the run's status says what is wrong with its folder)."""
    try:
        return OwnerLock.holder(layout.checked_run_dir(run_id) / "mutation.lock")
    except (RhoError, OSError):
        return None


def _row_key(layout: StoreLayout, run_id: str) -> tuple[int, ...] | None:
    """What a cached row is valid for: the journal's size and mtime and (chained runs) the
    watermark's mtime, so deleting or editing either is seen; None when the journal cannot be
    stat'ed (the row is then read, not cached: a deleted journal lists as damaged)."""
    folder = layout.checked_run_dir(run_id)
    try:
        info = os.stat(folder / "events.jsonl", follow_symlinks=False)
    except OSError:
        return None
    try:
        mark = os.stat(folder / "journal.mark", follow_symlinks=False).st_mtime_ns
    except OSError:
        mark = -1
    return (info.st_size, info.st_mtime_ns, mark)


def _report_refusal(run_id: str, why: str) -> None:
    """Log that run ``run_id`` is left out of a listing and why, once per process and reason (the
    server's sidebar polls the list)."""
    if why not in _REPORTED_REFUSALS:
        _REPORTED_REFUSALS.add(why)
        _log.warning("run %s refused: %s", run_id, why)


def fork_lineage(layout: StoreLayout, origin: Mapping[str, object]) -> list[dict[str, str]]:
    """A fork's lineage from its manifest's ``forked_from``: that origin, then the origin of the
    run it names when that run is a fork too, and so on (nearest first); it stops at a run that
    is gone or unreadable, or one already listed."""
    chain: list[dict[str, str]] = []
    current: Mapping[str, object] | None = origin
    while current is not None:
        run, node = current.get("run"), current.get("node")
        if not isinstance(run, str) or not isinstance(node, str) or any(link["run"] == run for link in chain):
            break
        chain.append({"run": run, "node": node})
        try:
            found = run_facts(layout, run).forked_from
        except (RhoError, OSError, ValueError):
            break
        current = found if isinstance(found, dict) else None
    return chain
