"""Showing plans, runs and the hub in a notebook: widgets when they are available, text always.

Every display is one MIME bundle with a deterministic ``text/plain`` line plus the widget view
(``application/vnd.jupyter.widget-view+json``) when :mod:`rho_notebook.widgets` imports:
JupyterLab renders the live widget, other viewers a static rendering, and text front ends and
output checks (nbval ignores the widget MIME type) see the same text with or without widgets.

A display of a DAG (a plan's graph, an item graph, a run) carries its static picture instead of
HTML: ``image/png`` and ``image/svg+xml`` (:mod:`rho_notebook.views.picture`). JupyterLab shows
an untrusted notebook's output by its first *safe* MIME type by rank, and HTML outranks PNG, so an
HTML entry would be shown sanitized (garbled text) instead of the picture. A run's display is kept
by display id: when the run stops, its picture is replaced by the final DAG
(``DagWidget.refresh_static``); its text stays the run-started text, and it carries no SVG, so the
saved cell compares equal to a fresh run's (nbval skips PNG, not SVG).
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
from rho_notebook.notebook._render import counted, graph_text, run_started_html, run_started_text
from rho_notebook.notebook.api import call
from rho_notebook.service import DiffResult, RunHandle, Service
from rho_notebook.views.flowtree import flow_tree_html, flow_tree_text
from rho_notebook.views.layout import layout_graph, layout_item_graph, layout_of
from rho_notebook.views.picture import dag_bundle, picture_metadata

__all__ = [
    "widgets_module",
    "show_graph",
    "show_item_graph",
    "show_run",
    "show_script",
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


def _widget(factory_name: str, *args: Any, **kwargs: Any) -> Any:
    """The widget the factory of :mod:`rho_notebook.widgets` makes, or None without widgets."""
    widgets = widgets_module()
    factory = getattr(widgets, factory_name, None) if widgets is not None else None
    if factory is None:
        return None
    guard = getattr(widgets, "guard_kernel_parent", None)
    if callable(guard):  # before any widget's comm traffic: see rho_notebook.widgets._parent
        guard()
    return factory(*args, **kwargs)


def _bundle(widget: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A widget's (data, metadata), empty when it has no view to display."""
    bundle = getattr(widget, "_repr_mimebundle_", None)
    data = bundle() if callable(bundle) else None
    data, metadata = data if isinstance(data, tuple) else (data, {})
    if not isinstance(data, dict) or WIDGET_MIME not in data:
        return {}, {}
    return data, dict(metadata or {})


def _view(factory_name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The widget's view MIME entry alone."""
    data, _ = _bundle(_widget(factory_name, *args, **kwargs))
    return {WIDGET_MIME: data[WIDGET_MIME]} if WIDGET_MIME in data else {}


def _show(text: str, html_text: str, view: dict[str, Any]) -> None:
    """One bundle: our deterministic text, the view's entries, our HTML unless the view has its own."""
    display({"text/html": html_text, **view, "text/plain": text}, raw=True)  # type: ignore[no-untyped-call]


def _show_picture(text: str, widget: Any, picture: Callable[[], dict[str, str]]) -> None:
    """A DAG: the widget's view and picture (``picture()`` without widgets), our text, no HTML."""
    data, metadata = _bundle(widget)
    if "image/png" not in data:
        data = {**data, **picture()}
    metadata = {**metadata, **picture_metadata(data)}
    kept = {mime: data[mime] for mime in (WIDGET_MIME, "image/png", "image/svg+xml") if mime in data}
    display({**kept, "text/plain": text}, metadata=metadata, raw=True)  # type: ignore[no-untyped-call]


def show_graph(plan: Plan) -> None:
    """The graph of a validated or stored plan: the widget and its picture for static viewers
    (an untrusted notebook, nbconvert, GitHub); the picture alone when widgets are not installed."""
    graph = plan.graph

    def picture() -> dict[str, str]:
        return dag_bundle(layout_graph(graph, digest=plan.graph_digest), title=graph.name)

    _show_picture(graph_text(graph), _widget("graph_view", plan), picture)


def show_script(plan: Plan) -> None:
    """A ``%%script`` (or ``%%flow``) plan before it runs: the DAG widget of its plan, which has no
    nodes yet (a script's steps appear as nodes while it runs), and its picture saying so."""
    graph = plan.graph
    subtitle = "script: its steps appear as nodes while it runs"
    text = f"script {graph.name}: its steps appear as nodes while it runs (%workflow run {graph.name} --yes)"

    def picture() -> dict[str, str]:
        return dag_bundle(layout_of(graph), title=graph.name, subtitle=subtitle)

    _show_picture(text, _widget("graph_view", plan, subtitle=subtitle), picture)


def show_run(handle: RunHandle) -> None:
    """The live run view of a run started or resumed from this kernel (it runs in its own owner
    process), displayed with a display id so its picture becomes the run's final DAG when the
    run stops; the text says how to reattach to it."""
    text = run_started_text(handle.run_id, handle.workflow)
    widget = _widget("run_view", handle)
    if widget is None or not hasattr(widget, "refresh_static"):
        _show(text, run_started_html(handle.run_id, handle.workflow), {})
    else:
        widget.static_text = text
        widget.static_svg = False
        display(widget)  # type: ignore[no-untyped-call]
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
    """A valid item-graph document (``%%graph``): the DAG widget of its steps (edges, condition
    edges dashed; loop edges are not drawn, the layout is acyclic) and its picture."""
    text = f"item graph {graph.name}: {counted(len(graph.steps), 'step')}, {counted(len(graph.edges), 'edge')}"
    title, subtitle = f"item graph {graph.name}", "validated; %workflow run runs it"

    def picture() -> dict[str, str]:
        return dag_bundle(layout_item_graph(graph), title=title, subtitle=subtitle)

    _show_picture(text, _widget("item_graph_view", graph, title=title, subtitle=subtitle), picture)
