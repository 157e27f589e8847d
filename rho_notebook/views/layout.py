"""Layered DAG layout, computed in Python and sent to the front end as plain coordinates.

Steps (a small Sugiyama pipeline, chosen to stay well under a second at 750 nodes / 7,500 edges):

1. transitive reduction (``networkx.transitive_reduction``): only the reduced edges are drawn;
   every node still carries its full ``needs`` so a view can highlight them on selection;
2. longest-path layering: a node sits one layer below its deepest need;
3. dummy nodes on reduced edges that span several layers (within a budget), so long edges are
   routed between nodes and take part in ordering;
4. a few barycenter ordering sweeps (down and up), keeping the ordering with the fewest crossings;
5. coordinates: nodes pulled toward the mean position of their neighbours, then separated.

Steps 1-4 are in :mod:`rho_notebook.views._layering`, step 5 in :mod:`rho_notebook.views._placing`;
:func:`layered_layout` runs them and builds the :class:`Layout`.

An edge is a *condition edge* when its child has a ``when`` condition; views draw it dashed.
Nothing here imports IPython or ipywidgets.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.service.wire import WireLayout
from rho_notebook.views._layering import Vertices, layers_of, ordered_layers, positions, reduced_graph, vertices_of
from rho_notebook.views._placing import NODE_HEIGHT, Geometry

if TYPE_CHECKING:
    from rho_notebook.model.itemgraph import ItemGraph

__all__ = [
    "Direction",
    "NodeSpec",
    "PlacedNode",
    "PlacedEdge",
    "Layout",
    "specs_of",
    "step_specs",
    "layered_layout",
    "layout_graph",
    "layout_steps",
    "layout_of",
    "layout_item_graph",
]

Direction = Literal["TB", "LR"]


@dataclass(frozen=True)
class NodeSpec:
    """What the layout needs to know about one node."""

    name: str
    needs: tuple[str, ...] = ()
    kind: str = "command"
    conditional: bool = False
    """The node has a ``when`` condition: edges into it are condition edges."""


@dataclass(frozen=True)
class PlacedNode:
    name: str
    kind: str
    layer: int
    order: int
    x: float
    """Left edge of the node box."""
    y: float
    """Top edge of the node box."""
    needs: tuple[str, ...]
    """Every need (the full dependency set, including needs that the reduction drops)."""
    conditional: bool


@dataclass(frozen=True)
class PlacedEdge:
    source: str
    target: str
    condition: bool
    points: tuple[tuple[float, float], ...]
    """Polyline from the bottom (TB) / right (LR) of the source to the target, through the
    positions of its dummy nodes."""


@dataclass(frozen=True)
class Layout:
    direction: Direction
    width: float
    height: float
    node_width: float
    node_height: float
    layers: int
    nodes: tuple[PlacedNode, ...]
    edges: tuple[PlacedEdge, ...]
    edge_count: int
    """Every dependency edge of the graph (needs), before reduction."""

    @property
    def by_name(self) -> dict[str, PlacedNode]:
        return {node.name: node for node in self.nodes}

    def to_wire(self) -> WireLayout:
        """The JSON payload the front-end module draws from."""
        return {
            "direction": self.direction,
            "width": self.width,
            "height": self.height,
            "node_width": self.node_width,
            "node_height": self.node_height,
            "layers": self.layers,
            "nodes": [
                {
                    "name": n.name,
                    "kind": n.kind,
                    "layer": n.layer,
                    "x": n.x,
                    "y": n.y,
                    "needs": list(n.needs),
                    "conditional": n.conditional,
                }
                for n in self.nodes
            ],
            "edges": [
                {
                    "source": e.source,
                    "target": e.target,
                    "condition": e.condition,
                    "points": [[x, y] for x, y in e.points],
                }
                for e in self.edges
            ],
            "edge_count": self.edge_count,
            "reduced_edge_count": len(self.edges),
        }


def specs_of(graph: Graph) -> list[NodeSpec]:
    return [
        NodeSpec(name=n.name, needs=tuple(n.needs), kind=n.kind, conditional=n.when is not None) for n in graph.nodes
    ]


def step_specs(state: RunState) -> list[NodeSpec]:
    """The steps of a script run as node specs, in arrival order (the order their nodes first
    appeared in the journal); a step's needs are the earlier steps named in its ``after``."""
    specs: list[NodeSpec] = []
    seen: set[str] = set()
    for name, record in state.nodes.items():
        step = record.step or {}
        after = [key for key in step.get("after") or () if isinstance(key, str) and key in seen]
        specs.append(NodeSpec(name=name, needs=tuple(dict.fromkeys(after)), kind=str(step.get("kind") or "step")))
        seen.add(name)
    return specs


def layout_steps(state: RunState, *, direction: Direction = "TB", digest: str | None = None) -> Layout:
    """Lay out the steps a script run has so far (see :func:`step_specs`); a new step is a new
    layout. With ``digest`` (the graph's), kept like :func:`layout_graph`'s, by the steps too."""
    specs = step_specs(state)
    if digest is None:
        return layered_layout(specs, direction=direction)
    shape = json.dumps([[spec.name, spec.kind, list(spec.needs)] for spec in specs], separators=(",", ":"))
    key = f"{digest}/steps/{hashlib.sha256(shape.encode()).hexdigest()}"
    return _kept_layout(key, direction, lambda: layered_layout(specs, direction=direction))


def layout_graph(graph: Graph, *, direction: Direction = "TB", digest: str | None = None) -> Layout:
    """Lay out a frozen graph (see :func:`layered_layout`).

    With ``digest`` (the graph's digest), the layout is kept: the last :data:`LAYOUTS_KEPT`
    layouts are shared by every view in the process (a layout is immutable).
    """
    if digest is None:
        return layered_layout(specs_of(graph), direction=direction)
    return _kept_layout(digest, direction, lambda: layered_layout(specs_of(graph), direction=direction))


def layout_of(graph: Graph, state: RunState | None = None, *, digest: str | None = None) -> Layout:
    """The layout of a plan's or run's DAG: the frozen graph's, or for a script run the steps it
    has so far (a script plan, without ``state``, has none)."""
    if graph.script is not None:
        return layout_steps(state, digest=digest) if state is not None else layered_layout([])
    return layout_graph(graph, digest=digest)


def layout_item_graph(graph: ItemGraph, *, direction: Direction = "TB") -> Layout:
    """Lay out an item-graph document before it runs: its steps as nodes, its edges as needs
    (an edge with a ``when`` makes a condition edge; loop edges are left out: the layout is
    acyclic, and a run draws each loop round as its own node)."""
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
    return layered_layout(specs, direction=direction)


def _kept_layout(digest: str, direction: Direction, make: Callable[[], Layout]) -> Layout:
    key = (digest, direction)
    with _kept_lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found
    laid = make()
    with _kept_lock:
        _kept[key] = laid
        while len(_kept) > LAYOUTS_KEPT:
            _kept.popitem(last=False)
    return laid


LAYOUTS_KEPT = 32
"""How many layouts (by graph digest) :func:`layout_graph` keeps."""

_kept: OrderedDict[tuple[str, Direction], Layout] = OrderedDict()
_kept_lock = threading.Lock()


def node_width_for(names: Iterable[str]) -> float:
    longest = max((len(name) for name in names), default=8)
    return float(min(max(7 * longest + 46, 120), 240))


# -- the pipeline (phases in views/_layering.py and views/_placing.py) ---------------------------------


def layered_layout(specs: Sequence[NodeSpec], *, direction: Direction = "TB") -> Layout:
    """Lay out a DAG given as node specs; deterministic for the same input.

    Raises
    ------
    ValueError
        When a need names an unknown node or the graph has a cycle.
    """
    names = [spec.name for spec in specs]
    _check_needs(specs, set(names))
    reduced = reduced_graph(names, [spec.needs for spec in specs])
    layer_of = layers_of(reduced, names)
    layer_count = 1 + max(layer_of.values(), default=-1)
    vertices = vertices_of(reduced, names, layer_of)
    order = ordered_layers(vertices, layer_count)
    node_width = node_width_for(names)
    geometry = Geometry(vertices, order, real=len(names), node_width=node_width, direction=direction)
    width, height = geometry.extent(layer_count)
    return Layout(
        direction=direction,
        width=width,
        height=height,
        node_width=node_width,
        node_height=NODE_HEIGHT,
        layers=layer_count,
        nodes=_placed_nodes(specs, vertices, order, geometry),
        edges=_placed_edges(specs, vertices, geometry),
        edge_count=sum(len(spec.needs) for spec in specs),
    )


def _check_needs(specs: Sequence[NodeSpec], known: set[str]) -> None:
    for spec in specs:
        missing = [need for need in spec.needs if need not in known]
        if missing:
            msg = f"node {spec.name!r} needs unknown node(s): {', '.join(missing)}"
            raise ValueError(msg)


def _placed_nodes(
    specs: Sequence[NodeSpec], vertices: Vertices, order: list[list[int]], geometry: Geometry
) -> tuple[PlacedNode, ...]:
    order_of = positions(order)
    placed = []
    for spec in specs:
        v = vertices.vid[spec.name]
        x, y = geometry.box(v)
        placed.append(
            PlacedNode(
                name=spec.name,
                kind=spec.kind,
                layer=vertices.vlayer[v],
                order=order_of[v],
                x=x,
                y=y,
                needs=tuple(spec.needs),
                conditional=spec.conditional,
            )
        )
    return tuple(placed)


def _placed_edges(specs: Sequence[NodeSpec], vertices: Vertices, geometry: Geometry) -> tuple[PlacedEdge, ...]:
    """The reduced edges as polylines through their dummies; condition edges lead to a node with
    a ``when``."""
    conditional = {spec.name: spec.conditional for spec in specs}
    placed = []
    for chain in vertices.chains:
        pts = [geometry.point(vertices.vid[chain.source], edge_end="bottom")]
        pts.extend(geometry.point(d, edge_end="middle") for d in chain.dummies)
        pts.append(geometry.point(vertices.vid[chain.target], edge_end="top"))
        placed.append(
            PlacedEdge(source=chain.source, target=chain.target, condition=conditional[chain.target], points=tuple(pts))
        )
    return tuple(placed)
