"""Folding journal events into node and run views as a run goes (the live DAG view)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rho_notebook.model.graph import Graph
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.service.wire import NodeView, allowed_failures_of
from rho_notebook.views.layout import Layout, layout_of
from rho_notebook.views.state import (
    allowed_failures,
    halted_by_step,
    node_view,
    node_view_copy,
    node_views,
    run_view_of,
    same_view,
)

__all__ = ["RunTracker"]

_RUN_KINDS = frozenset(
    {
        "run_started",
        "run_completed",
        "cancel_requested",
        "cancel_acknowledged",
        "needs_recovery",
        "owner_exited",
        "run_halted",
        "script_output",
    }
)
_EVERY_NODE_KINDS = frozenset({"run_started", "run_halted", "run_completed"})
"""Events that change node views they do not name (the halted marks; a script's failed steps
that its success shows handled)."""


class RunTracker:
    """Folds events into a private RunState copy; remembers changed node and run views.

    With a script run's ``graph``, a step launched for the first time is a new node: its view is
    added and :attr:`layout_dirty` says the layout must be drawn again (:meth:`take_layout`).
    """

    def __init__(
        self,
        state: RunState,
        *,
        started_at: str | None = None,
        ended_at: str | None = None,
        graph: Graph | None = None,
    ) -> None:
        self.state = copy.deepcopy(state)
        self.version = 0
        self.started_at = started_at
        self.ended_at = ended_at
        self.graph = graph
        self.allowed = allowed_failures(graph) if graph is not None else allowed_failures_of(self.state)
        """The nodes whose failure does not count (shown as ``failure (allowed)``)."""
        self.nodes: dict[str, NodeView] = node_views(
            self.state, graph if graph is not None and graph.script else None, allowed=self.allowed
        )
        self.run: dict[str, Any] = dict(run_view_of(self.state, started_at=started_at, ended_at=ended_at))
        self.dirty: set[str] = set()
        self.run_dirty = False
        self.layout_dirty = False
        """A new step appeared since the last :meth:`take_layout` (script runs)."""
        self.output_dirty: set[str] = set()
        """Nodes with new output bytes since the last flush (from output_chunk events)."""

    @property
    def script(self) -> bool:
        return self.graph is not None and self.graph.script is not None

    def feed(self, event: Mapping[str, Any]) -> bool:
        """Fold one event; True when some view changed. Events already folded (by seq) are ignored."""
        kind = event.get("kind")
        if kind == "output_chunk":
            node = event.get("node")
            if isinstance(node, str):
                self.output_dirty.add(node)
            return False
        seq = event.get("seq")
        if isinstance(seq, int) and seq <= self.state.last_seq:
            return False
        went_on = list(self.state.open_failures)  # a step call after them shows them handled
        apply(self.state, dict(event))
        changed = self._fold_nodes(event, kind, also=went_on)
        if kind == "run_started":
            self.started_at, self.ended_at = event.get("at"), None
        elif kind == "run_completed":
            self.ended_at = event.get("at")
        if kind in _RUN_KINDS or (self.layout_dirty and "script" not in self.run):
            changed = self._fold_run() or changed
        return changed

    def _fold_nodes(self, event: Mapping[str, Any], kind: Any, *, also: list[str]) -> bool:
        """Renew the views of the nodes ``event`` touched (and ``also``); True when one changed."""
        names: list[str] = list(also)
        if kind in _EVERY_NODE_KINDS:
            names.extend(self.state.nodes)
        if isinstance(event.get("node"), str):
            names.append(event["node"])
        names.extend(n for n in event.get("nodes", []) if isinstance(n, str))
        halted = halted_by_step(self.state)
        changed = False
        for name in dict.fromkeys(names):
            record = self.state.nodes.get(name)
            if record is None:
                continue
            view = node_view(record, halted=halted.get(name), allowed=name in self.allowed, name=name)
            known = self.nodes.get(name)
            if known is None:  # a script step launched for the first time
                self.layout_dirty = True
            elif same_view(view, known):
                continue
            self.version += 1
            view["v"] = self.version
            self.nodes[name] = view
            self.dirty.add(name)
            changed = True
        return changed

    def _fold_run(self) -> bool:
        """Renew the run view; True when it changed."""
        view_run = run_view_of(self.state, started_at=self.started_at, ended_at=self.ended_at)
        if same_view(view_run, self.run):
            return False
        self.version += 1
        view_run["v"] = self.version
        self.run.clear()
        self.run.update(view_run)
        self.run_dirty = True
        return True

    def take(self) -> tuple[dict[str, NodeView], dict[str, Any] | None]:
        """Copies of the changed views since the last take, and forget them."""
        nodes: dict[str, NodeView] = {name: node_view_copy(self.nodes[name]) for name in sorted(self.dirty)}
        run = dict(self.run) if self.run_dirty else None
        self.dirty.clear()
        self.run_dirty = False
        return nodes, run

    def take_layout(self, *, digest: str | None = None) -> Layout | None:
        """The layout of a script run's steps when a step appeared since the last call, else None."""
        dirty, self.layout_dirty = self.layout_dirty, False
        if not dirty or self.graph is None or self.graph.script is None:
            return None
        return layout_of(self.graph, self.state, digest=digest)
