"""The graph rules of an item-graph document, checked on the validated model (the rules are
listed in :mod:`~rho_notebook.planning.itemgraph`): unique step ids, an aggregate's ``into`` that
is not the list it iterates over, the ``node_count`` and
``edge_count`` limits, edges between known steps, cycles only through loop edges that close one,
and several in-edges only into a join or from exclusive branch outcomes.
"""

from __future__ import annotations

from collections.abc import Iterator

from rho_notebook.model.itemgraph import AggregateStep, Edge, ItemGraph
from rho_notebook.planning.item_document import Document
from rho_notebook.planning.item_size import budget_text
from rho_notebook.source.limits import Limits

__all__ = ["graph_rules"]


def graph_rules(document: Document, graph: ItemGraph, limits: Limits) -> None:
    ids: dict[str, int] = {}
    for number, step in enumerate(graph.steps):
        if step.id in ids:
            document.add(
                ("steps", number, "id"),
                "graph.duplicate_id",
                f"step {step.id!r}: the id is used by step {ids[step.id] + 1} too; step ids must be unique",
                step=step.id,
                field="id",
            )
        else:
            ids[step.id] = number
    _aggregate_into(document, graph)
    if len(graph.steps) > limits.limit("node_count"):
        document.add(("steps",), "limit.node_count", budget_text("node_count", limits, len(graph.steps)))
    if len(graph.edges) > limits.limit("edge_count"):
        document.add(("edges",), "limit.edge_count", budget_text("edge_count", limits, len(graph.edges)))
    known = True
    for number, edge in enumerate(graph.edges):
        for end, name in (("from", edge.source), ("to", edge.to)):
            if name not in ids:
                known = False
                document.add(
                    ("edges", number, end),
                    "graph.edge_step",
                    f"edge {number + 1} ({edge.source} -> {edge.to}): {end} names {name!r}, which is not a step; "
                    f"the steps are {', '.join(ids)}",
                    step=edge.source,
                    field=end,
                )
    if known and not _cycles(document, graph):
        _in_edges(document, graph)


def _aggregate_into(document: Document, graph: ItemGraph) -> None:
    """``graph.into``: an aggregate whose ``into`` is the list it iterates over."""
    for number, step in enumerate(graph.steps):
        clash = step.params.into_clash() if isinstance(step, AggregateStep) else None
        if clash is not None:
            where = ("steps", number, "params", "into")
            document.add(where, "graph.into", f"step {step.id!r}: {clash}", step=step.id, field="params.into")


def _forward(graph: ItemGraph) -> dict[str, list[tuple[int, Edge]]]:
    out: dict[str, list[tuple[int, Edge]]] = {s.id: [] for s in graph.steps}
    for number, edge in enumerate(graph.edges):
        if edge.loop is None:
            out[edge.source].append((number, edge))
    return out


def _cycles(document: Document, graph: ItemGraph) -> bool:
    """Report a cycle of non-loop edges and loop edges that close none; True when any was found."""
    out = _forward(graph)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in (s.id for s in graph.steps):
        if state.get(start):
            continue
        state[start] = 1
        stack: list[tuple[str, Iterator[tuple[int, Edge]]]] = [(start, iter(out[start]))]
        while stack:
            node, edges = stack[-1]
            following = next(edges, None)
            if following is None:
                state[node] = 2
                stack.pop()
                continue
            number, edge = following
            if state.get(edge.to) == 1:
                path = [name for name, _ in stack]
                circle = [*path[path.index(edge.to) :], edge.to]
                document.add(
                    ("edges", number),
                    "graph.cycle",
                    f"edge {number + 1} ({edge.source} -> {edge.to}) closes the cycle {' -> '.join(circle)}; a cycle "
                    "is allowed only through a loop edge: add loop: {max_rounds: N} to the edge that goes back",
                    step=edge.source,
                    field="loop",
                )
                return True
            if not state.get(edge.to):
                state[edge.to] = 1
                stack.append((edge.to, iter(out[edge.to])))
    found = False
    for number, edge in enumerate(graph.edges):
        if edge.loop is not None and not _reaches(out, edge.to, edge.source):
            document.add(
                ("edges", number, "loop"),
                "graph.loop_back",
                f"edge {number + 1} ({edge.source} -> {edge.to}) is a loop edge, but {edge.to!r} does not lead to "
                f"{edge.source!r}; a loop edge goes back to an earlier step (drop loop: for a forward edge)",
                step=edge.source,
                field="loop",
            )
            found = True
    return found


def _reaches(out: dict[str, list[tuple[int, Edge]]], source: str, target: str) -> bool:
    seen = {source}
    todo = [source]
    while todo:
        node = todo.pop()
        if node == target:
            return True
        for _, edge in out[node]:
            if edge.to not in seen:
                seen.add(edge.to)
                todo.append(edge.to)
    return False


def _in_edges(document: Document, graph: ItemGraph) -> None:
    """The several-in-edges rule (module docstring): guards are the branch choices every path to
    a step (or through an edge) takes, as (branch id, edge number)."""
    out = _forward(graph)
    incoming: dict[str, list[tuple[int, Edge]]] = {s.id: [] for s in graph.steps}
    for number, edge in enumerate(graph.edges):
        if edge.loop is None:
            incoming[edge.to].append((number, edge))
    kinds = {s.id: s.kind for s in graph.steps}
    guards: dict[str, frozenset[tuple[str, int]]] = {}
    order = _topological(graph, out, incoming)

    def through(number: int, edge: Edge) -> frozenset[tuple[str, int]]:
        mine = guards[edge.source]
        return mine | {(edge.source, number)} if kinds[edge.source] == "branch" else mine

    for step in order:
        arriving = [through(n, e) for n, e in incoming[step]]
        guards[step] = frozenset.intersection(*arriving) if arriving else frozenset()
        if kinds[step] == "join" or len(arriving) < 2:
            continue
        pairs = [(i, j) for i in range(len(arriving)) for j in range(i + 1, len(arriving))]
        clash = next(((i, j) for i, j in pairs if not _exclusive(arriving[i], arriving[j])), None)
        if clash is None:
            continue
        (first_number, first), (second_number, second) = incoming[step][clash[0]], incoming[step][clash[1]]
        document.add(
            ("edges", second_number, "to"),
            "graph.in_edges",
            f"step {step!r} has in-edges from {first.source!r} (edge {first_number + 1}) and {second.source!r} "
            f"(edge {second_number + 1}) that can both deliver in one run; only a join step merges items: put a "
            "join step before it, or make them exclusive outcomes of one branch step",
            step=step,
            field="in-edges",
        )


def _exclusive(a: frozenset[tuple[str, int]], b: frozenset[tuple[str, int]]) -> bool:
    chosen = dict(a)
    return any(branch in chosen and chosen[branch] != number for branch, number in b)


def _topological(
    graph: ItemGraph, out: dict[str, list[tuple[int, Edge]]], incoming: dict[str, list[tuple[int, Edge]]]
) -> list[str]:
    waiting = {s.id: len(incoming[s.id]) for s in graph.steps}
    ready = [s.id for s in graph.steps if waiting[s.id] == 0]
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for _, edge in out[node]:
            waiting[edge.to] -= 1
            if waiting[edge.to] == 0:
                ready.append(edge.to)
    return order
