"""Layered DAG layout, computed in Python and sent to the front end as plain coordinates.

Steps (a small Sugiyama pipeline, chosen to stay well under a second at 750 nodes / 7,500 edges):

1. transitive reduction (``networkx.transitive_reduction``): only the reduced edges are drawn;
   every node still carries its full ``needs`` so a view can highlight them on selection;
2. longest-path layering: a node sits one layer below its deepest need;
3. dummy nodes on reduced edges that span several layers (within a budget), so long edges are
   routed between nodes and take part in ordering;
4. a few barycenter ordering sweeps (down and up), keeping the ordering with the fewest crossings;
5. coordinates: nodes pulled toward the mean position of their neighbours, then separated.

An edge is a *condition edge* when its child has a ``when`` condition; views draw it dashed.
Nothing here imports IPython or ipywidgets.
"""

from __future__ import annotations

import hashlib
import json
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import networkx as nx  # type: ignore[import-untyped]

from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.service.wire import WireLayout

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
]

Direction = Literal["TB", "LR"]

NODE_HEIGHT = 34
LAYER_GAP = 46
NODE_GAP = 22
DUMMY_WIDTH = 12
MARGIN = 16
SWEEPS = 4
DUMMY_BUDGET_PER_NODE = 8
"""At most this many dummy nodes per real node (plus a constant); past that, long edges are drawn
as direct curves and do not take part in ordering (keeps pathological graphs fast)."""


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


# -- the pipeline -----------------------------------------------------------------------------------


def _reduce(specs: Sequence[NodeSpec]) -> nx.DiGraph:
    full = nx.DiGraph()
    full.add_nodes_from(spec.name for spec in specs)
    for spec in specs:
        full.add_edges_from((need, spec.name) for need in spec.needs)
    if not nx.is_directed_acyclic_graph(full):
        cycle = nx.find_cycle(full)
        msg = f"cannot lay out a graph with a cycle: {' -> '.join(a for a, _ in cycle)}"
        raise ValueError(msg)
    return nx.transitive_reduction(full)


def _layers(reduced: nx.DiGraph, names: Sequence[str]) -> dict[str, int]:
    layer: dict[str, int] = {}
    for name in nx.lexicographical_topological_sort(reduced):
        preds = reduced.pred[name]
        layer[name] = 1 + max(layer[p] for p in preds) if preds else 0
    return {name: layer[name] for name in names}


class _Chain:
    """A reduced edge: source, target, and the dummy vertices between them (one per layer)."""

    __slots__ = ("source", "target", "dummies")

    def __init__(self, source: str, target: str, dummies: list[int]) -> None:
        self.source = source
        self.target = target
        self.dummies = dummies


def _crossings(lower_positions: list[list[int]]) -> int:
    """Edge crossings between two adjacent layers, given for each upper vertex (in order) the
    positions of its lower neighbours: inversions counted with a sorted list."""
    pairs = sorted((upper, lower) for upper, lowers in enumerate(lower_positions) for lower in lowers)
    seen: list[int] = []
    count = 0
    for _, lower in pairs:
        index = bisect_right(seen, lower)
        count += len(seen) - index
        seen.insert(index, lower)
    return count


def layered_layout(specs: Sequence[NodeSpec], *, direction: Direction = "TB") -> Layout:
    """Lay out a DAG given as node specs; deterministic for the same input.

    Raises
    ------
    ValueError
        When a need names an unknown node or the graph has a cycle.
    """
    names = [spec.name for spec in specs]
    known = set(names)
    for spec in specs:
        missing = [need for need in spec.needs if need not in known]
        if missing:
            msg = f"node {spec.name!r} needs unknown node(s): {', '.join(missing)}"
            raise ValueError(msg)
    reduced = _reduce(specs)
    layer_of = _layers(reduced, names)
    layer_count = 1 + max(layer_of.values(), default=-1)
    conditional = {spec.name: spec.conditional for spec in specs}

    # vertices: real nodes get ids 0..n-1, dummies n.. ; each vertex has a layer
    vid = {name: i for i, name in enumerate(names)}
    vlayer: list[int] = [layer_of[name] for name in names]
    reduced_edges = sorted(reduced.edges(), key=lambda e: (vid[e[1]], vid[e[0]]))
    budget = DUMMY_BUDGET_PER_NODE * len(names) + 2000
    total_span = sum(max(layer_of[t] - layer_of[s] - 1, 0) for s, t in reduced_edges)
    use_dummies = total_span <= budget
    chains: list[_Chain] = []
    # adjacency between consecutive layers for ordering: down[v] = vertices in layer+1, up[v] in layer-1
    down: list[list[int]] = [[] for _ in names]
    up: list[list[int]] = [[] for _ in names]
    for source, target in reduced_edges:
        span = layer_of[target] - layer_of[source]
        dummies: list[int] = []
        prev = vid[source]
        if span > 1 and use_dummies:
            for step in range(1, span):
                d = len(vlayer)
                vlayer.append(layer_of[source] + step)
                down.append([])
                up.append([])
                down[prev].append(d)
                up[d].append(prev)
                dummies.append(d)
                prev = d
        if span == 1 or use_dummies:
            down[prev].append(vid[target])
            up[vid[target]].append(prev)
        chains.append(_Chain(source, target, dummies))

    # initial order: real nodes by name order within their layer, dummies after their source
    layers: list[list[int]] = [[] for _ in range(layer_count)]
    for v in range(len(vlayer)):
        layers[vlayer[v]].append(v)

    def positions(order: list[list[int]]) -> dict[int, int]:
        return {v: i for layer in order for i, v in enumerate(layer)}

    def crossings(order: list[list[int]]) -> int:
        pos = positions(order)
        total = 0
        for index in range(len(order) - 1):
            total += _crossings([[pos[w] for w in down[v]] for v in order[index]])
        return total

    def sweep(order: list[list[int]], downward: bool) -> list[list[int]]:
        result = [list(layer) for layer in order]
        pos = positions(result)
        indices = range(1, len(result)) if downward else range(len(result) - 2, -1, -1)
        for index in indices:
            neighbours = up if downward else down
            keyed = []
            for i, v in enumerate(result[index]):
                adjacent = neighbours[v]
                key = sum(pos[a] for a in adjacent) / len(adjacent) if adjacent else float(pos[v])
                keyed.append((key, i, v))
            keyed.sort()
            result[index] = [v for _, _, v in keyed]
            for i, v in enumerate(result[index]):
                pos[v] = i
        return result

    best = layers
    best_crossings = crossings(best) if len(vlayer) <= 20000 else 0
    current = layers
    for _ in range(SWEEPS):
        if best_crossings == 0:
            break
        current = sweep(sweep(current, True), False)
        found = crossings(current)
        if found < best_crossings:
            best, best_crossings = current, found

    # coordinates along the layer axis ("breadth"): pull toward neighbours, keep separation
    node_width = node_width_for(names)
    real = len(names)
    along = node_width if direction == "TB" else NODE_HEIGHT
    across_gap = NODE_GAP if direction == "TB" else 14

    def size(v: int) -> float:
        return along if v < real else DUMMY_WIDTH

    centre: dict[int, float] = {}
    for layer in best:
        at = 0.0
        for v in layer:
            centre[v] = at + size(v) / 2
            at += size(v) + across_gap

    def place(layer: list[int], neighbours: list[list[int]]) -> None:
        desired = []
        for v in layer:
            adjacent = [centre[a] for a in neighbours[v] if a in centre]
            desired.append(sum(adjacent) / len(adjacent) if adjacent else centre[v])
        placed: list[float] = []
        for i, v in enumerate(layer):
            want = desired[i]
            if placed:
                prev = layer[i - 1]
                want = max(want, placed[-1] + size(prev) / 2 + across_gap + size(v) / 2)
            placed.append(want)
        # shift back by the mean overshoot, which keeps separation and balances the layer
        overshoot = sum(p - d for p, d in zip(placed, desired)) / len(placed)
        for v, p in zip(layer, placed):
            centre[v] = p - overshoot

    for _ in range(2):
        for layer in best[1:]:
            place(layer, up)
        for layer in reversed(best[:-1]):
            place(layer, down)
    for layer in best[1:]:
        place(layer, up)

    low = min((centre[v] - size(v) / 2 for v in centre), default=0.0)
    shift = MARGIN - low
    depth_step = (NODE_HEIGHT + LAYER_GAP) if direction == "TB" else (node_width + LAYER_GAP + 10)

    def point(v: int, *, edge_end: Literal["top", "bottom", "middle"]) -> tuple[float, float]:
        breadth = round(centre[v] + shift, 1)
        depth = MARGIN + vlayer[v] * depth_step
        depth_size = NODE_HEIGHT if direction == "TB" else node_width
        if edge_end == "bottom":
            depth += depth_size
        elif edge_end == "middle":
            depth += depth_size / 2
        depth = round(depth, 1)
        return (breadth, depth) if direction == "TB" else (depth, breadth)

    order_of = positions(best)
    placed_nodes = []
    for spec in specs:
        v = vid[spec.name]
        breadth = centre[v] + shift - along / 2
        depth = MARGIN + vlayer[v] * depth_step
        x, y = (breadth, depth) if direction == "TB" else (depth, breadth)
        placed_nodes.append(
            PlacedNode(
                name=spec.name,
                kind=spec.kind,
                layer=vlayer[v],
                order=order_of[v],
                x=round(x, 1),
                y=round(y, 1),
                needs=tuple(spec.needs),
                conditional=spec.conditional,
            )
        )
    placed_edges = []
    for chain in chains:
        pts = [point(vid[chain.source], edge_end="bottom")]
        pts.extend(point(d, edge_end="middle") for d in chain.dummies)
        pts.append(point(vid[chain.target], edge_end="top"))
        placed_edges.append(
            PlacedEdge(source=chain.source, target=chain.target, condition=conditional[chain.target], points=tuple(pts))
        )

    breadth_extent = max((centre[v] + shift + size(v) / 2 for v in centre), default=0.0) + MARGIN
    depth_extent = (
        MARGIN * 2 + max(layer_count - 1, 0) * depth_step + (NODE_HEIGHT if direction == "TB" else node_width)
    )
    width, height = (breadth_extent, depth_extent) if direction == "TB" else (depth_extent, breadth_extent)
    return Layout(
        direction=direction,
        width=round(width, 1),
        height=round(height, 1),
        node_width=node_width,
        node_height=NODE_HEIGHT,
        layers=layer_count,
        nodes=tuple(placed_nodes),
        edges=tuple(placed_edges),
        edge_count=sum(len(spec.needs) for spec in specs),
    )
