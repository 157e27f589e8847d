"""The graph phases of :func:`rho_notebook.views.layout.layered_layout` (steps 1-4 of its pipeline):
transitive reduction, longest-path layers, dummy vertices on long edges, barycenter ordering.

Vertices are integers: the real nodes ``0..n-1`` in the order of the specs, dummies after them;
``down[v]`` are the vertices one layer below ``v`` that it is joined to, ``up[v]`` one layer above.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx  # type: ignore[import-untyped]

SWEEPS = 4
DUMMY_BUDGET_PER_NODE = 8
"""At most this many dummy nodes per real node (plus a constant); past that, long edges are drawn
as direct curves and do not take part in ordering (keeps pathological graphs fast)."""
_DUMMY_BUDGET_BASE = 2000
_COUNT_CROSSINGS_UP_TO = 20000
"""Above this many vertices the first ordering is kept as it is (counting would be too slow)."""


def reduced_graph(names: Sequence[str], needs: Sequence[Sequence[str]]) -> nx.DiGraph:
    """The transitive reduction of the DAG whose node ``names[i]`` needs ``needs[i]``.

    Raises
    ------
    ValueError
        When the graph has a cycle.
    """
    full = nx.DiGraph()
    full.add_nodes_from(names)
    for name, wanted in zip(names, needs):
        full.add_edges_from((need, name) for need in wanted)
    if not nx.is_directed_acyclic_graph(full):
        cycle = nx.find_cycle(full)
        msg = f"cannot lay out a graph with a cycle: {' -> '.join(a for a, _ in cycle)}"
        raise ValueError(msg)
    return nx.transitive_reduction(full)


def layers_of(reduced: nx.DiGraph, names: Sequence[str]) -> dict[str, int]:
    """Longest-path layering: a node sits one layer below its deepest need."""
    layer: dict[str, int] = {}
    for name in nx.lexicographical_topological_sort(reduced):
        preds = reduced.pred[name]
        layer[name] = 1 + max(layer[p] for p in preds) if preds else 0
    return {name: layer[name] for name in names}


@dataclass(slots=True)
class Chain:
    """A reduced edge: source, target, and the dummy vertices between them (one per layer)."""

    source: str
    target: str
    dummies: list[int]


@dataclass
class Vertices:
    """The real and dummy vertices, their layers and adjacency, and the reduced edges as chains."""

    vid: dict[str, int]
    vlayer: list[int]
    down: list[list[int]]
    up: list[list[int]]
    chains: list[Chain] = field(default_factory=list)

    def add_dummy(self, layer: int) -> int:
        dummy = len(self.vlayer)
        self.vlayer.append(layer)
        self.down.append([])
        self.up.append([])
        return dummy

    def join(self, upper: int, lower: int) -> None:
        self.down[upper].append(lower)
        self.up[lower].append(upper)


def vertices_of(reduced: nx.DiGraph, names: Sequence[str], layer_of: dict[str, int]) -> Vertices:
    """Vertices with dummies on reduced edges that span several layers (within the budget)."""
    vid = {name: i for i, name in enumerate(names)}
    found = Vertices(
        vid=vid, vlayer=[layer_of[name] for name in names], down=[[] for _ in names], up=[[] for _ in names]
    )
    reduced_edges = sorted(reduced.edges(), key=lambda e: (vid[e[1]], vid[e[0]]))
    budget = DUMMY_BUDGET_PER_NODE * len(names) + _DUMMY_BUDGET_BASE
    total_span = sum(max(layer_of[t] - layer_of[s] - 1, 0) for s, t in reduced_edges)
    use_dummies = total_span <= budget
    for source, target in reduced_edges:
        span = layer_of[target] - layer_of[source]
        dummies: list[int] = []
        prev = vid[source]
        if span > 1 and use_dummies:
            for step in range(1, span):
                dummy = found.add_dummy(layer_of[source] + step)
                found.join(prev, dummy)
                dummies.append(dummy)
                prev = dummy
        if span == 1 or use_dummies:
            found.join(prev, vid[target])
        found.chains.append(Chain(source, target, dummies))
    return found


def positions(order: list[list[int]]) -> dict[int, int]:
    """Each vertex's position within its layer."""
    return {v: i for layer in order for i, v in enumerate(layer)}


def _crossings_between(lower_positions: list[list[int]]) -> int:
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


def _crossings(order: list[list[int]], down: list[list[int]]) -> int:
    pos = positions(order)
    total = 0
    for index in range(len(order) - 1):
        total += _crossings_between([[pos[w] for w in down[v]] for v in order[index]])
    return total


def _sweep(order: list[list[int]], vertices: Vertices, *, downward: bool) -> list[list[int]]:
    """One barycenter pass over the layers, down (by the layer above) or up (by the one below)."""
    result = [list(layer) for layer in order]
    pos = positions(result)
    indices = range(1, len(result)) if downward else range(len(result) - 2, -1, -1)
    neighbours = vertices.up if downward else vertices.down
    for index in indices:
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


def ordered_layers(vertices: Vertices, layer_count: int) -> list[list[int]]:
    """The vertices of each layer in the order with the fewest crossings found: first real nodes
    in spec order then dummies, then a few down-and-up barycenter sweeps."""
    layers: list[list[int]] = [[] for _ in range(layer_count)]
    for v, layer in enumerate(vertices.vlayer):
        layers[layer].append(v)
    best = layers
    best_crossings = _crossings(best, vertices.down) if len(vertices.vlayer) <= _COUNT_CROSSINGS_UP_TO else 0
    current = layers
    for _ in range(SWEEPS):
        if best_crossings == 0:
            break
        current = _sweep(_sweep(current, vertices, downward=True), vertices, downward=False)
        found = _crossings(current, vertices.down)
        if found < best_crossings:
            best, best_crossings = current, found
    return best
