"""Showing plans, runs and the hub in a notebook: widgets when they are available, text always.

Every display is one MIME bundle with a deterministic ``text/plain`` line and a static
``text/html`` rendering, plus the widget view (``application/vnd.jupyter.widget-view+json``) when
:mod:`rho_notebook.widgets` imports: JupyterLab renders the live widget, other viewers (nbconvert,
GitHub) the HTML, and text front ends and output checks (nbval ignores the widget MIME type) see
the same text with or without widgets. A plan's graph carries the widget's SVG picture as its
static rendering (``image/svg+xml`` and the HTML embedding it); a run's display keeps a text
paragraph, since a picture taken when the run starts would show every node pending forever.
"""

from __future__ import annotations

import html
import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from IPython.display import display

from rho_notebook.errors import RhoError
from rho_notebook.model.graph import ApprovalNode
from rho_notebook.model.itemgraph import ItemGraph
from rho_notebook.model.plan import Plan
from rho_notebook.notebook._render import graph_html, graph_text, run_started_html, run_started_text
from rho_notebook.notebook.api import call
from rho_notebook.service import DiffResult, RunHandle, Service
from rho_notebook.views.flowtree import flow_tree_html, flow_tree_text
from rho_notebook.views.layout import NodeSpec, layered_layout

__all__ = [
    "widgets_module",
    "show_graph",
    "show_item_graph",
    "show_run",
    "show_plan_card",
    "show_hub",
    "show_flow_tree",
    "WIDGET_MIME",
]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widgets_module() -> ModuleType | None:
    """:mod:`rho_notebook.widgets`, or None when it cannot be imported (then text and HTML only)."""
    try:
        return importlib.import_module("rho_notebook.widgets")
    except ImportError:
        return None


def _view(factory_name: str, *args: Any, static: bool = False, **kwargs: Any) -> dict[str, Any]:
    """The widget's view MIME entry; with ``static`` also its SVG snapshot (``image/svg+xml`` and
    the ``text/html`` that embeds it), for a display whose picture cannot go stale (a plan)."""
    widgets = widgets_module()
    factory = getattr(widgets, factory_name, None) if widgets is not None else None
    if factory is None:
        return {}
    guard = getattr(widgets, "guard_kernel_parent", None)
    if callable(guard):  # before any widget's comm traffic: see rho_notebook.widgets._parent
        guard()
    widget = factory(*args, **kwargs)
    bundle = getattr(widget, "_repr_mimebundle_", None)
    data = bundle() if callable(bundle) else None
    if isinstance(data, tuple):  # (data, metadata)
        data = data[0]
    if not isinstance(data, dict) or WIDGET_MIME not in data:
        return {}
    kept = (WIDGET_MIME, "image/svg+xml", "text/html") if static else (WIDGET_MIME,)
    return {mime: data[mime] for mime in kept if mime in data}


def _show(text: str, html_text: str, view: dict[str, Any]) -> None:
    """One bundle: our deterministic text, the view's entries, our HTML unless the view has its own."""
    display({"text/html": html_text, **view, "text/plain": text}, raw=True)  # type: ignore[no-untyped-call]


def show_graph(plan: Plan) -> None:
    """The graph of a validated or stored plan: the widget, its SVG picture for static viewers
    (nbconvert, GitHub), or the HTML table when widgets are not installed."""
    _show(graph_text(plan.graph), graph_html(plan.graph), _view("graph_view", plan, static=True))


def show_run(handle: RunHandle) -> None:
    """The live run view of a run started or resumed from this kernel (it runs in its own owner
    process); the text and HTML say how to reattach to it."""
    text = run_started_text(handle.run_id, handle.workflow)
    body = run_started_html(handle.run_id, handle.workflow)
    _show(text, body, _view("run_view", handle))
    approvals = _view("approvals_view", handle) if _may_ask(handle) else {}
    if approvals:
        # pending approvals (approval nodes, supervised launches) with Approve / Deny buttons
        display({"text/plain": f"approvals of run {handle.run_id}", **approvals}, raw=True)  # type: ignore[no-untyped-call]


def _may_ask(handle: RunHandle) -> bool:
    """Whether this run can ever wait for a person (approval nodes, or supervised mode)."""
    service = Service(layout=handle.layout)
    try:
        manifest = call(service.manifest(handle.run_id))
        graph = call(service.run_graph(handle.run_id))
    except (RhoError, OSError):  # the run view already shows the run; approvals stay reachable by magic/CLI
        return False
    if manifest.mode == "supervised":
        return True
    return any(isinstance(n, ApprovalNode) for n in graph.nodes)


def show_plan_card(
    plan: Plan, *, on_run: Callable[[], Any], changes: DiffResult | None = None, confirm: str | None = None
) -> None:
    """A plan waiting for confirmation of its digest (the widget's button runs it); with
    ``changes``, what changed since the cell's previous plan, shown before the Run button;
    ``confirm`` is the magic that confirms it without the button (default: ``%workflow run ID --yes``)."""
    command = confirm or f"%workflow run {plan.plan_id[:13]} --yes"
    text = f"plan {plan.plan_id} of workflow {plan.graph.name}\ndigest {plan.graph_digest}\nto run it, confirm the digest: {command}"
    body = (
        f"<p>plan <code>{html.escape(plan.plan_id)}</code> of workflow <b>{html.escape(plan.graph.name)}</b><br>"
        f"digest <code>{html.escape(plan.graph_digest)}</code><br>to run it, confirm the digest: "
        f"<code>{html.escape(command)}</code></p>"
    )
    if changes is not None:
        shown = "\n".join(changes.lines())
        text = f"{text}\nchanges since the previous plan:\n{shown}"
        body = f"<pre>{html.escape(shown)}</pre>{body}"
    _show(text, body, _view("plan_card", plan, on_run=on_run, changes=changes))


def show_flow_tree(manifest: Mapping[str, Any]) -> None:
    """The module tree of a flow's compiled manifest (``%%flow NAME --compile``)."""
    _show(flow_tree_text(manifest), flow_tree_html(manifest), _view("flow_tree", manifest))


def show_hub(session: Any, text: str) -> None:
    """The session's hub (workflows, plans, runs)."""
    _show(text, f"<pre>{html.escape(text)}</pre>", _view("hub_view", session))


def show_item_graph(graph: ItemGraph) -> None:
    """A valid item-graph document (``%%graph``) drawn with the DAG layout as a static SVG: steps
    as nodes, edges (condition edges dashed; loop edges are not drawn, the layout is acyclic).
    Text only where the widgets package cannot be imported."""
    needs: dict[str, list[str]] = {step.id: [] for step in graph.steps}
    conditional: set[str] = set()
    for edge in graph.edges:
        if edge.loop is None and edge.source not in needs[edge.to]:
            needs[edge.to].append(edge.source)
        if edge.when is not None:
            conditional.add(edge.to)
    specs = [
        NodeSpec(name=step.id, needs=tuple(needs[step.id]), kind=step.kind, conditional=step.id in conditional)
        for step in graph.steps
    ]
    text = f"item graph {graph.name}: {len(graph.steps)} steps, {len(graph.edges)} edges"
    body = f"<pre>{html.escape(text)}</pre>"
    if widgets_module() is not None:
        svg = importlib.import_module("rho_notebook.widgets.svg")
        body = svg.render_svg(
            layered_layout(specs), title=f"item graph {graph.name}", subtitle="validated; %workflow run runs it"
        )
    display({"text/html": body, "text/plain": text}, raw=True)  # type: ignore[no-untyped-call]
