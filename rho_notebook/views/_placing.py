"""The coordinates phase of :func:`rho_notebook.views.layout.layered_layout` (step 5 of its
pipeline): vertices pulled toward the mean position of their neighbours, then separated.

"Breadth" runs along a layer (x in a top-to-bottom layout), "depth" across the layers.
"""

from __future__ import annotations

from typing import Literal

from rho_notebook.views._layering import Vertices

NODE_HEIGHT = 34
LAYER_GAP = 46
NODE_GAP = 22
DUMMY_WIDTH = 12
MARGIN = 16
_LR_NODE_GAP = 14
_LR_EXTRA_LAYER_GAP = 10
_PLACE_ROUNDS = 2

EdgeEnd = Literal["top", "bottom", "middle"]


class Geometry:
    """Where every vertex of ordered layers sits: its centre along the layer and its layer's depth."""

    def __init__(
        self, vertices: Vertices, order: list[list[int]], *, real: int, node_width: float, direction: str
    ) -> None:
        self.vlayer = vertices.vlayer
        self.real = real
        self.node_width = node_width
        self.top_down = direction == "TB"
        self.along = node_width if self.top_down else NODE_HEIGHT
        self.across_gap = NODE_GAP if self.top_down else _LR_NODE_GAP
        self.depth_size = NODE_HEIGHT if self.top_down else node_width
        self.depth_step = (NODE_HEIGHT + LAYER_GAP) if self.top_down else (node_width + LAYER_GAP + _LR_EXTRA_LAYER_GAP)
        self.centre = self._centres(order, vertices)
        low = min((self.centre[v] - self.size(v) / 2 for v in self.centre), default=0.0)
        self.shift = MARGIN - low

    def size(self, v: int) -> float:
        return self.along if v < self.real else DUMMY_WIDTH

    def _centres(self, order: list[list[int]], vertices: Vertices) -> dict[int, float]:
        centre: dict[int, float] = {}
        for layer in order:
            at = 0.0
            for v in layer:
                centre[v] = at + self.size(v) / 2
                at += self.size(v) + self.across_gap
        for _ in range(_PLACE_ROUNDS):
            for layer in order[1:]:
                self._place(centre, layer, vertices.up)
            for layer in reversed(order[:-1]):
                self._place(centre, layer, vertices.down)
        for layer in order[1:]:
            self._place(centre, layer, vertices.up)
        return centre

    def _place(self, centre: dict[int, float], layer: list[int], neighbours: list[list[int]]) -> None:
        desired = []
        for v in layer:
            adjacent = [centre[a] for a in neighbours[v] if a in centre]
            desired.append(sum(adjacent) / len(adjacent) if adjacent else centre[v])
        placed: list[float] = []
        for i, v in enumerate(layer):
            want = desired[i]
            if placed:
                prev = layer[i - 1]
                want = max(want, placed[-1] + self.size(prev) / 2 + self.across_gap + self.size(v) / 2)
            placed.append(want)
        # shift back by the mean overshoot, which keeps separation and balances the layer
        overshoot = sum(p - d for p, d in zip(placed, desired)) / len(placed)
        for v, p in zip(layer, placed):
            centre[v] = p - overshoot

    def box(self, v: int) -> tuple[float, float]:
        """(x, y) of the top-left corner of real vertex ``v``'s box, rounded to 0.1."""
        breadth = self.centre[v] + self.shift - self.along / 2
        depth = MARGIN + self.vlayer[v] * self.depth_step
        x, y = (breadth, depth) if self.top_down else (depth, breadth)
        return round(x, 1), round(y, 1)

    def point(self, v: int, *, edge_end: EdgeEnd) -> tuple[float, float]:
        """Where an edge meets vertex ``v``: the top, bottom or middle of its layer's band."""
        breadth = round(self.centre[v] + self.shift, 1)
        depth = MARGIN + self.vlayer[v] * self.depth_step
        if edge_end == "bottom":
            depth += self.depth_size
        elif edge_end == "middle":
            depth += self.depth_size / 2
        depth = round(depth, 1)
        return (breadth, depth) if self.top_down else (depth, breadth)

    def extent(self, layer_count: int) -> tuple[float, float]:
        """(width, height) of the drawing, rounded to 0.1."""
        breadth_extent = (
            max((self.centre[v] + self.shift + self.size(v) / 2 for v in self.centre), default=0.0) + MARGIN
        )
        depth_extent = MARGIN * 2 + max(layer_count - 1, 0) * self.depth_step + self.depth_size
        width, height = (breadth_extent, depth_extent) if self.top_down else (depth_extent, breadth_extent)
        return round(width, 1), round(height, 1)
