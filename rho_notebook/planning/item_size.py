"""What an item graph will freeze into, measured before it is frozen.

Planning expands every loop body into per-round instances (``step@1`` ... ``step@N``) and then
encodes the graph; a document of 200 steps looped 1,000 times is 200,000 nodes, which took 17 s
and 1 GB to build before the ``graph_bytes`` budget refused it. Validate and plan both measure it
here first, from the document alone, in time linear in its steps and edges:

- :func:`loop_bodies`: which steps each loop edge repeats (a step in two loops is refused);
- :func:`frozen_size`: how many nodes and edges the frozen graph will have, and a lower bound of
  its encoded size (every instance carries its step's parameters), so that ``node_count``,
  ``edge_count`` and ``graph_bytes`` are checked against the limits before any instance is built;
- :func:`counted_too_many`: before the document is even composed, a streaming count of its
  ``steps`` and ``edges`` (libyaml's event parser: constant memory), so that a 2 MB document of
  100,000 edges is refused in half a second instead of 19 s and 500 MB.

:func:`size_findings` puts them together for validate and plan: (path, rule, message) findings
with the same rules and wording as the budgets planning enforces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml  # type: ignore[import-untyped]

from rho_notebook.model.canonical import encode
from rho_notebook.model.itemgraph import ItemGraph
from rho_notebook.source.limits import Limits

__all__ = ["FrozenSize", "counted_too_many", "frozen_size", "loop_bodies", "size_findings"]

Finding = tuple[tuple[Any, ...], str, str]
"""(document path, rule, message)."""

_COUNTED = {"steps": "node_count", "edges": "edge_count"}


def loop_bodies(graph: ItemGraph) -> dict[str, tuple[int, frozenset[str]]]:
    """Step -> (max_rounds, body) of the loop whose body holds it.

    Raises
    ------
    ValueError
        Two loops share a step (the message names it).
    """
    forward: dict[str, set[str]] = {s.id: set() for s in graph.steps}
    backward: dict[str, set[str]] = {s.id: set() for s in graph.steps}
    for edge in graph.edges:
        if edge.loop is None:
            forward[edge.source].add(edge.to)
            backward[edge.to].add(edge.source)
    found: dict[str, tuple[int, frozenset[str]]] = {}
    for edge in graph.edges:
        if edge.loop is None:
            continue
        body = frozenset(_reach(forward, edge.to) & _reach(backward, edge.source))
        for step in sorted(body):
            if step in found:
                msg = f"step {step!r} is in two loops; loops may not share steps"
                raise ValueError(msg)
            found[step] = (edge.loop.max_rounds, body)
    return found


def _reach(adjacent: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in adjacent[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@dataclass(frozen=True)
class FrozenSize:
    """The frozen graph's size, known before it is built."""

    nodes: int
    edges: int
    """Frozen edges (each a ``needs`` entry of its target instance)."""
    min_bytes: int
    """A lower bound of the canonical encoding: the parameters of every instance."""


def frozen_size(graph: ItemGraph, loops: dict[str, tuple[int, frozenset[str]]]) -> FrozenSize:
    """The size of ``graph`` once its ``loops`` (:func:`loop_bodies`) are expanded."""

    def rounds(step: str) -> int:
        return loops[step][0] if step in loops else 1

    nodes = sum(rounds(step.id) for step in graph.steps)
    edges = 0
    for edge in graph.edges:
        # a loop edge joins consecutive rounds; any other edge leaves every round of its source
        # (into the same round inside a body, into round 1 or a plain step outside it)
        edges += edge.loop.max_rounds - 1 if edge.loop is not None else rounds(edge.source)
    min_bytes = 0
    for step in graph.steps:
        try:
            min_bytes += rounds(step.id) * len(encode(step.params.model_dump(mode="json")))
        except (TypeError, ValueError):  # a value the encoding refuses: planning says which
            continue
    return FrozenSize(nodes=nodes, edges=edges, min_bytes=min_bytes)


def budget_text(budget: str, limits: Limits, measured: int, *, at_least: bool = False) -> str:
    """The words of an exceeded planning budget (as planning says it)."""
    how = "at least " if at_least else ""
    return f"planning budget '{budget}' exceeded: accepted limit {limits.limit(budget)}, measured {how}{measured}"


class _ListCounter:
    """Counts the items of the top-level ``steps`` and ``edges`` lists from parser events."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # key -> items
        self.where: dict[str, tuple[int, int]] = {}  # key -> (line, column) of its list
        self.depth = 0
        self.key: str | None = None
        self.expect_key = False
        self.counting: str | None = None

    def start(self, ev: yaml.Event) -> None:
        """A mapping or a sequence starts (an item, when it is in a counted list)."""
        if self.depth == 2 and self.counting is not None:
            self.counts[self.counting] += 1
        self.depth += 1
        if self.depth == 1:
            self.expect_key = isinstance(ev, yaml.MappingStartEvent)
        elif self.depth == 2 and self.key in _COUNTED and isinstance(ev, yaml.SequenceStartEvent):
            self.counting = self.key
            self.counts[self.key], self.where[self.key] = 0, (ev.start_mark.line + 1, ev.start_mark.column + 1)

    def end(self, ev: yaml.Event) -> None:
        self.depth -= 1
        if self.depth == 1:
            self.counting, self.expect_key = None, True

    def scalar(self, ev: yaml.Event) -> None:
        """A scalar or an alias: a top-level key or value, or an item of a counted list."""
        if self.depth == 1:
            if self.expect_key:
                self.key = ev.value if isinstance(ev, yaml.ScalarEvent) else None
            self.expect_key = not self.expect_key
        elif self.depth == 2 and self.counting is not None:
            self.counts[self.counting] += 1


def counted_too_many(text: str, limits: Limits) -> list[tuple[str, str, int, int]]:
    """(rule, message, line, column) for each top-level ``steps`` / ``edges`` list of ``text``
    holding more items than its budget, counted from the parser's events without building the
    document (constant memory; ``source_bytes`` bounds the time). Text libyaml cannot parse gives
    no finding: reading it says why."""
    counter = _ListCounter()
    handlers = {
        yaml.MappingStartEvent: counter.start,
        yaml.SequenceStartEvent: counter.start,
        yaml.MappingEndEvent: counter.end,
        yaml.SequenceEndEvent: counter.end,
        yaml.ScalarEvent: counter.scalar,
        yaml.AliasEvent: counter.scalar,
    }
    try:
        for ev in yaml.parse(text, Loader=yaml.CSafeLoader):
            handler = handlers.get(type(ev))
            if handler is not None:
                handler(ev)
    except yaml.YAMLError:
        return []
    found = []
    for name, items in counter.counts.items():
        budget = _COUNTED[name]
        if items > limits.limit(budget):
            found.append((f"limit.{budget}", budget_text(budget, limits, items), *counter.where[name]))
    return found


def size_findings(graph: ItemGraph, limits: Limits) -> list[Finding]:
    """What planning will refuse about the size of ``graph``, measured before it is built: loops
    that share a step, and the frozen node count, edge count and (a lower bound of) encoded size
    against their budgets."""
    try:
        loops = loop_bodies(graph)
    except ValueError as err:
        index = next(i for i, e in enumerate(graph.edges) if e.loop is not None)
        return [(("edges", index, "loop"), "graph.loop", str(err))]
    size = frozen_size(graph, loops)
    found: list[Finding] = []
    after = " after its loops are expanded into rounds" if loops else ""
    for budget, measured, path in (("node_count", size.nodes, "steps"), ("edge_count", size.edges, "edges")):
        if measured > limits.limit(budget):
            found.append(((path,), f"limit.{budget}", budget_text(budget, limits, measured) + after))
    if size.min_bytes > limits.limit("graph_bytes"):
        message = budget_text("graph_bytes", limits, size.min_bytes, at_least=True) + after
        found.append(((), "limit.graph_bytes", message))
    return found
