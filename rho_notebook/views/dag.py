"""What the DAG view shows, as plain JSON-able data: node views, the run view, node details.

Shared by the notebook widget (rho_notebook.widgets) and the JupyterLab sidebar's REST API
(rho_notebook.server), so both render one shape with the same dagview front-end module. The view
of a plan or a run is assembled once, by :func:`dag_view` (layout, node views, run view); the
server and the widgets read a run's view through the service with :func:`read_run_view` and a
node's pane with :func:`read_node_detail` (or :func:`node_detail` for a record they hold).

A script run (``Graph.script`` set, no frozen nodes) is drawn from its run state instead: its steps
are the nodes, in arrival order, with edges from each step's ``after`` (:func:`layout_steps`); the
layout grows as steps launch, so :class:`RunTracker` says when it changed.

The parts live in their own modules and are named here too: node and run views in
:mod:`~rho_notebook.views.state`, the live fold in :mod:`~rho_notebook.views.tracker`, the node
pane in :mod:`~rho_notebook.views.detail` (definition in :mod:`~rho_notebook.views.definition`,
bounded artifact reads in :mod:`~rho_notebook.views.artifacts`), the layout in
:mod:`~rho_notebook.views.layout`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from typing_extensions import TypedDict

from rho_notebook.model.events import now_iso
from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Service
from rho_notebook.service.wire import Detail, NodeView, RunView, StreamView, WireLayout
from rho_notebook.views.artifacts import PANE_BYTES, StreamTail
from rho_notebook.views.definition import definition_of
from rho_notebook.views.detail import load_detail, node_detail, read_node_detail, reused_source_dir, step_detail
from rho_notebook.views.layout import Layout, layout_of
from rho_notebook.views.state import STATE_ORDER, node_view, node_views, run_times, run_view_of
from rho_notebook.views.text import condition_text, schema_text, template_text
from rho_notebook.views.tracker import RunTracker

__all__ = [
    "PANE_BYTES",
    "NodeView",
    "RunView",
    "StreamView",
    "Detail",
    "DagView",
    "DagViewJson",
    "dag_view",
    "read_run_view",
    "node_detail",
    "step_detail",
    "read_node_detail",
    "layout_of",
    "reused_source_dir",
    "node_view",
    "node_views",
    "run_view_of",
    "RunTracker",
    "StreamTail",
    "condition_text",
    "template_text",
    "schema_text",
    "definition_of",
    "load_detail",
    "run_times",
    "STATE_ORDER",
]


class DagViewJson(TypedDict, total=False):
    """What the DAG view module draws: ``GET runs/<run>/view`` (``layout`` unless left out)."""

    title: str
    mode: Literal["plan", "run"]
    now: str
    last_seq: int
    nodes: dict[str, NodeView]
    run: RunView
    """Absent for a plan."""
    layout: WireLayout


@dataclass(frozen=True)
class DagView:
    """The DAG of a plan or a run as the view module draws it (:func:`dag_view`)."""

    graph: Graph
    layout: Layout
    mode: Literal["plan", "run"]
    nodes: dict[str, NodeView]
    run: RunView | None
    last_seq: int = 0

    @property
    def title(self) -> str:
        return self.graph.name

    @property
    def script(self) -> bool:
        """A script run: the layout grows while it runs."""
        return self.graph.script is not None

    def to_wire(self, *, with_layout: bool = True) -> DagViewJson:
        wire: DagViewJson = {
            "title": self.title,
            "mode": self.mode,
            "now": now_iso(),
            "last_seq": self.last_seq,
            "nodes": self.nodes,
        }
        if self.run is not None:
            wire["run"] = self.run
        if with_layout:
            wire["layout"] = self.layout.to_wire()
        return wire


def dag_view(
    graph: Graph,
    state: RunState | None = None,
    *,
    started_at: str | None = None,
    ended_at: str | None = None,
    version: int = 0,
    digest: str | None = None,
    actions: bool = True,
) -> DagView:
    """The view of a frozen graph: of a plan (no ``state``), or of a run in ``state`` whose
    latest execution started at ``started_at`` (see :func:`run_times`).

    ``version`` stamps every view (newest wins in the front end); ``digest`` (the graph's) keeps
    the layout for the next view of the same graph; without ``actions`` the run view offers no
    Cancel or Resume (a snapshot).
    """
    run = None
    if state is not None:
        run = run_view_of(state, started_at=started_at, ended_at=ended_at, version=version)
        if not actions:
            run["can_cancel"] = run["can_resume"] = False
    return DagView(
        graph=graph,
        layout=layout_of(graph, state, digest=digest),
        mode="plan" if state is None else "run",
        nodes=node_views(state, graph, version=version),
        run=run,
        last_seq=state.last_seq if state is not None else 0,
    )


async def read_run_view(service: Service, run: str) -> DagView:
    """The view of a run (ID or unique prefix) as its journal stands now, whoever owns it;
    every view carries the run's last seq as its version."""
    run_id = await service.resolve_run(run)
    journal = await service.journal(run_id)
    state = await service.status(run_id)
    graph = await service.run_graph(run_id)
    started, ended = run_times(journal.events)
    view = await asyncio.to_thread(
        dag_view, graph, state, started_at=started, ended_at=ended, version=state.last_seq, digest=state.graph_digest
    )
    from rho_notebook.service.usage import add_view_spend  # what the model calls spent (docs/usage.md)

    add_view_spend(view.nodes, view.run, state, home=service.layout.home)
    return view
