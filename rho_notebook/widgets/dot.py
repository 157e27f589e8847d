"""DOT export of a workflow graph through the ``graphviz`` Python package.

Only the package is needed to build the DOT source (``to_dot(graph).source``); rendering it to an
image needs the system graphviz binary, which rho_notebook never requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rho_notebook.model.graph import Graph
from rho_notebook.views.svg import STATE_STYLE

if TYPE_CHECKING:
    import graphviz  # type: ignore[import-untyped]

__all__ = ["to_dot"]


def to_dot(graph: Graph, *, states: Mapping[str, str] | None = None, reduced: bool = True) -> graphviz.Digraph:
    """A ``graphviz.Digraph`` of the workflow: one box per node, filled by state when ``states``
    is given; condition edges (into nodes with ``when``) dashed.

    Parameters
    ----------
    graph
        The frozen graph (``plan.graph``).
    states
        Node name -> state value (``"success"``, ...), e.g. from a run's state.
    reduced
        Draw the transitive reduction (as the live view does); ``False`` draws every need.
    """
    try:
        import graphviz
    except ImportError as err:  # pragma: no cover - graphviz is a dependency
        msg = "DOT export needs the graphviz Python package: pip install graphviz"
        raise ImportError(msg) from err
    from rho_notebook.views.layout import layout_graph

    dot = graphviz.Digraph(name=graph.name, graph_attr={"rankdir": "TB", "label": graph.name, "labelloc": "t"})
    dot.attr("node", shape="box", style="rounded,filled", fontname="monospace", fontsize="11")
    for node in graph.nodes:
        state = (states or {}).get(node.name, "pending")
        fill, stroke, icon = STATE_STYLE.get(state, STATE_STYLE["pending"])
        label = f"{icon} {node.name}" if states else node.name
        dot.node(node.name, label=label, fillcolor=fill, color=stroke, tooltip=f"{node.kind}: {state}")
    conditional = {node.name for node in graph.nodes if node.when is not None}
    if reduced:
        edges = [(e.source, e.target) for e in layout_graph(graph).edges]
    else:
        edges = [(need, node.name) for node in graph.nodes for need in node.needs]
    for source, target in edges:
        dot.edge(source, target, style="dashed" if target in conditional else "solid")
    return dot
