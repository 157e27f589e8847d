"""Widgets: the live DAG, the plan card, run views and the hub (see docs/widgets.md).

Nothing is imported from ipywidgets or anywidget until a function here is called, so headless
code (CLI, service) never pays for them. The DAG front end is one module (``js/src/dagview.ts``)
bundled into ``static/dag.js``; what it draws (layout, node and run views, node panes) is assembled
by :mod:`rho_notebook.views.dag`, as for the JupyterLab sidebar, and every DAG widget carries its
static picture (:mod:`rho_notebook.views.picture`: PNG and SVG) for saved and untrusted notebooks.
Widgets reach the store only through the service's verbs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rho_notebook.model.graph import Graph
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState

if TYPE_CHECKING:
    import graphviz  # type: ignore[import-untyped]

    from rho_notebook.model.itemgraph import ItemGraph
    from rho_notebook.service import DiffResult, Service
    from rho_notebook.widgets._dag import DagWidget
    from rho_notebook.widgets._flowtree import FlowTree
    from rho_notebook.widgets._hub import Hub, HubSession
    from rho_notebook.widgets._picker import RunPicker
    from rho_notebook.widgets._plan import PlanCard
    from rho_notebook.widgets._run import RunHandleLike

__all__ = [
    "graph_view",
    "item_graph_view",
    "plan_card",
    "run_view",
    "approvals_view",
    "hub_view",
    "flow_tree",
    "to_dot",
    "watch_run",
    "run_picker",
    "guard_kernel_parent",
]


def graph_view(
    plan_or_graph: Plan | Graph,
    *,
    state: RunState | None = None,
    service: Service | None = None,
    subtitle: str = "",
) -> DagWidget:
    """The DAG of a plan or graph; node states from ``state`` when given (a snapshot, not live).

    Clicking a node shows its frozen definition; with ``state`` and ``service``, also the
    artifacts of its latest attempt. ``subtitle`` goes in the static picture's heading.
    """
    from rho_notebook.views.dag import dag_view, node_detail, reused_source_dir
    from rho_notebook.widgets._call import call
    from rho_notebook.widgets._dag import DagWidget

    if isinstance(plan_or_graph, Plan):
        graph, digest = plan_or_graph.graph, plan_or_graph.graph_digest
    else:
        graph, digest = plan_or_graph, None

    def detail(name: str) -> dict[str, Any]:
        record = state.nodes.get(name) if state is not None else None
        attempt_dir = source_dir = None
        if record is not None and record.attempt and service is not None and state is not None:
            attempt_dir = service.attempt_dir(state.run_id, name, record.attempt)
            if record.current is not None and record.current.reused_from is not None:
                source_dir = call(reused_source_dir(service, record, run_id=state.run_id))
        return dict(node_detail(graph, name, record, attempt_dir=attempt_dir, source_dir=source_dir))

    widget = DagWidget(dag_view(graph, state, digest=digest, actions=False), on_select=detail)
    widget.subtitle = subtitle
    return widget


def item_graph_view(graph: ItemGraph, *, title: str = "", subtitle: str = "") -> DagWidget:
    """The DAG of an item-graph document before it runs (``%%graph``): its steps as nodes, all
    pending (:func:`rho_notebook.views.layout.layout_item_graph`); a run of it is drawn by
    :func:`run_view`, each loop round its own node."""
    from rho_notebook.model.run_state import NodeRecord
    from rho_notebook.views.dag import DagView
    from rho_notebook.views.layout import layout_item_graph
    from rho_notebook.views.state import node_view
    from rho_notebook.widgets._dag import DagWidget

    layout = layout_item_graph(graph)
    outline = Graph(name=title or f"item graph {graph.name}", inputs=(), nodes=())
    nodes = {node.name: node_view(NodeRecord()) for node in layout.nodes}
    widget = DagWidget(DagView(graph=outline, layout=layout, mode="plan", nodes=nodes, run=None))
    widget.subtitle = subtitle
    return widget


def plan_card(
    plan: Plan, *, on_run: Callable[[], Any], show_graph: bool = True, changes: DiffResult | None = None
) -> PlanCard:
    """Plan ID, workflow, graph digest, inputs, authority list and DAG, with a Run button; with
    ``changes`` (:meth:`Service.diff_plans` of the cell's previous plan), the nodes added, removed
    and changed since, above the button.

    Clicking Run is the confirmation of exactly ``plan.graph_digest`` for one new run: ``on_run()``
    is called once and the button disables itself.
    """
    from rho_notebook.widgets._plan import PlanCard

    return PlanCard(plan, on_run=on_run, graph=graph_view(plan) if show_graph else None, changes=changes)


def run_view(handle: RunHandleLike, *, service: Service | None = None) -> DagWidget:
    """The live DAG of a run: states, counts, elapsed time, Cancel / Resume and the output pane.

    ``handle`` is a ``RunHandle`` (or anything with ``run_id``, ``add_listener``, ``state``,
    ``done`` and ``cancel``). Updates are batched: at most ~10 messages a second, changed nodes only.
    """
    from rho_notebook.widgets._run import RunController

    return RunController(handle, service=service).widget


def approvals_view(handle: RunHandleLike, *, service: Service | None = None) -> Any:
    """Pending approvals of a run with Approve / Deny buttons (hidden while there are none)."""
    from rho_notebook.service import Service as _Service
    from rho_notebook.widgets._approvals import ApprovalsPanel

    if service is None:
        service = getattr(handle, "service", None)
    if service is None:
        layout = getattr(handle, "layout", None)
        service = _Service(layout=layout) if layout is not None else _Service.default()
    return ApprovalsPanel(handle, service=service).box


def watch_run(run_id: str, *, service: Service | None = None) -> DagWidget:
    """The DAG of any run in the store (live in another process, or finished), read from its
    journal without taking ownership."""
    from rho_notebook.service import Service as _Service
    from rho_notebook.widgets._run import JournalWatch

    service = service or _Service.default()
    return run_view(JournalWatch(service, run_id), service=service)


def run_picker(
    run_id: str,
    *,
    service: Service | None = None,
    handle_for: Callable[[str], Any] | None = None,
    select: str | None = None,
) -> RunPicker:
    """An earlier run's live DAG, read from the store (nothing is executed), under a picker of the
    runs of its workflow in its workspace, newest first, that switches the DAG to another run.

    ``handle_for(run_id)`` gives a live handle of a run an owner executes now (``rho.attach``:
    then the view follows it as :func:`run_view` does), or None (the view reads the store);
    ``select`` opens a node's output pane.
    """
    from rho_notebook.service import Service as _Service
    from rho_notebook.widgets._parent import guard_kernel_parent as _guard
    from rho_notebook.widgets._picker import RunPicker

    _guard()
    picker = RunPicker(run_id, service=service or _Service.default(), handle_for=handle_for)
    if select:
        picker.select(select)
    return picker


def hub_view(session: HubSession) -> Hub:
    """START, RUNS and SAVED PLANS of a notebook session (see :class:`HubSession`)."""
    from rho_notebook.widgets._hub import Hub

    return Hub(session)


def flow_tree(manifest: Mapping[str, Any]) -> FlowTree:
    """The module tree of a flow's compiled manifest (``plan.manifest.flow``, or
    ``workflow.compile()``): modules, agents with provider, model and definition digest, and
    selectors with their candidates."""
    from rho_notebook.widgets._flowtree import FlowTree

    return FlowTree(manifest)


def to_dot(graph: Plan | Graph, *, states: Mapping[str, str] | None = None, reduced: bool = True) -> graphviz.Digraph:
    """DOT export (``graphviz`` Python package; no graphviz binary needed for the source)."""
    from rho_notebook.widgets.dot import to_dot as _to_dot

    return _to_dot(graph.graph if isinstance(graph, Plan) else graph, states=states, reduced=reduced)


def follow_handle(handle: RunHandleLike) -> bool:
    """A new handle of a run (``rho.resume``, ``rho.attach``): the run views of that run shown in
    this process follow it from now on (a view follows its run, not the call that made it); True
    when a view of the run exists. See docs/widgets.md, "A widget follows its run"."""
    from rho_notebook.widgets._run import follow_handle as _follow

    return _follow(handle)


def guard_kernel_parent() -> bool:
    """Guard the running kernel against ipykernel's stale parent restore after a comm message
    handled while a cell awaits (which leaves the next cell at ``[*]`` in JupyterLab); once per
    kernel, False outside a kernel. See :mod:`rho_notebook.widgets._parent`."""
    from rho_notebook.widgets._parent import guard_kernel_parent as _guard

    return _guard()


def __getattr__(name: str) -> Any:
    if name in ("HubSession", "RunHandleLike"):
        if name == "HubSession":
            from rho_notebook.widgets._hub import HubSession

            return HubSession
        from rho_notebook.widgets._run import RunHandleLike

        return RunHandleLike
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
