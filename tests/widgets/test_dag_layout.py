"""Layered layout: reduction, layering, ordering, coordinates, and the 750-node case's structure."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
import textwrap

import networkx as nx
import pytest

from rho_notebook.views.layout import Layout, NodeSpec, layered_layout, layout_graph
from tests.conftest import REPO


def _layout(edges: dict[str, tuple[str, ...]], **kwargs: object) -> Layout:
    conditional = kwargs.pop("conditional", ())
    specs = [NodeSpec(name=n, needs=tuple(sorted(needs)), conditional=n in conditional) for n, needs in edges.items()]  # type: ignore[operator]
    return layered_layout(specs, **kwargs)  # type: ignore[arg-type]


def _drawn(layout: Layout) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in layout.edges}


def test_reduction_drops_implied_edges_but_keeps_every_need() -> None:
    layout = _layout({"count": (), "big": ("count",), "report": ("big", "count")}, conditional={"big"})
    assert _drawn(layout) == {("count", "big"), ("big", "report")}
    assert layout.edge_count == 3
    assert layout.by_name["report"].needs == ("big", "count")
    assert [e.condition for e in layout.edges if e.target == "big"] == [True]
    assert [e.condition for e in layout.edges if e.target == "report"] == [False]


def test_diamond_with_shortcut() -> None:
    layout = _layout({"a": (), "b": ("a",), "c": ("a",), "d": ("a", "b", "c")})
    assert _drawn(layout) == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    layers = {n.name: n.layer for n in layout.nodes}
    assert layers == {"a": 0, "b": 1, "c": 1, "d": 2}


def test_longest_path_layering_and_geometry_top_to_bottom() -> None:
    layout = _layout({"a": (), "b": ("a",), "c": ("b",), "d": ("a",), "e": ("c", "d")})
    by = layout.by_name
    assert by["d"].layer == 1 and by["e"].layer == 3
    for edge in layout.edges:
        (sx, sy), (tx, ty) = edge.points[0], edge.points[-1]
        assert sy == by[edge.source].y + layout.node_height
        assert ty == by[edge.target].y
        assert sx == pytest.approx(by[edge.source].x + layout.node_width / 2)
        assert tx == pytest.approx(by[edge.target].x + layout.node_width / 2)
        assert all(a[1] < b[1] for a, b in zip(edge.points, edge.points[1:]))
    # the long edge d -> e (layers 1 -> 3) is routed through one dummy point
    long_edge = next(e for e in layout.edges if (e.source, e.target) == ("d", "e"))
    assert len(long_edge.points) == 3


def test_nodes_in_a_layer_never_overlap() -> None:
    edges = {"root": ()} | {f"w{i:02d}": ("root",) for i in range(30)} | {"sink": tuple(f"w{i:02d}" for i in range(30))}
    layout = _layout(edges)
    row = sorted(n.x for n in layout.nodes if n.layer == 1)
    assert len(row) == 30
    assert all(b - a >= layout.node_width for a, b in zip(row, row[1:]))
    assert all(n.x >= 0 and n.x + layout.node_width <= layout.width for n in layout.nodes)


def test_ordering_removes_an_avoidable_crossing() -> None:
    # name order puts c (child of b) left of d (child of a) while a sits left of b
    layout = _layout({"a": (), "b": (), "c": ("b",), "d": ("a",)})
    by = layout.by_name
    assert (by["a"].x < by["b"].x) == (by["d"].x < by["c"].x)


def test_left_to_right_direction() -> None:
    layout = _layout({"a": (), "b": ("a",), "c": ("b",)}, direction="LR")
    xs = [layout.by_name[n].x for n in "abc"]
    assert xs == sorted(xs) and len(set(xs)) == 3
    assert len({layout.by_name[n].y for n in "abc"}) == 1


_LAYOUT_JSON = textwrap.dedent(
    """
    import dataclasses, json, sys
    from rho_notebook.views.layout import NodeSpec, layered_layout
    edges = json.load(sys.stdin)
    specs = [NodeSpec(name=n, needs=tuple(sorted(needs))) for n, needs in edges.items()]
    print(hash("n000"))
    print(json.dumps(dataclasses.asdict(layered_layout(specs)), sort_keys=True))
    """
)


def _layout_json_in_process(edges: dict[str, tuple[str, ...]], hash_seed: int) -> tuple[str, str]:
    """``(hash("n000"), the layout of edges as JSON)`` from a fresh interpreter with ``PYTHONHASHSEED``."""
    path = f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": path}
    command = [sys.executable, "-c", _LAYOUT_JSON]
    done = subprocess.run(
        command, input=json.dumps(edges), env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    string_hash, layout_json = done.stdout.splitlines()
    return string_hash, layout_json


def test_deterministic() -> None:
    edges = {f"n{i:03d}": tuple(f"n{j:03d}" for j in range(max(0, i - 3), i)) for i in range(60)}
    assert _layout(edges) == _layout(edges)
    # and across interpreters: str hashing (so set order) differs with PYTHONHASHSEED, the layout must not
    (hash1, json1), (hash2, json2) = (_layout_json_in_process(edges, seed) for seed in (1, 2))
    assert hash1 != hash2, "PYTHONHASHSEED did not reach the child interpreters"
    assert json1 == json2
    assert json1 == json.dumps(dataclasses.asdict(_layout(edges)), sort_keys=True)


def test_cycle_and_unknown_need_are_errors() -> None:
    with pytest.raises(ValueError, match="cycle"):
        _layout({"a": ("b",), "b": ("a",)})
    with pytest.raises(ValueError, match="unknown"):
        _layout({"a": ("zz",)})


def test_reduced_graph_keeps_reachability_on_random_dags() -> None:
    rng = random.Random(7)
    for _ in range(5):
        names = [f"n{i:03d}" for i in range(80)]
        needs: dict[str, set[str]] = {n: set() for n in names}
        for _ in range(400):
            a, b = sorted(rng.sample(range(80), 2))
            needs[names[b]].add(names[a])
        layout = _layout({n: tuple(v) for n, v in needs.items()})
        full = nx.DiGraph([(need, n) for n, v in needs.items() for need in v])
        full.add_nodes_from(names)
        drawn = nx.DiGraph(list(_drawn(layout)))
        drawn.add_nodes_from(names)
        assert set(nx.transitive_closure_dag(full).edges) == set(nx.transitive_closure_dag(drawn).edges)
        assert _drawn(layout) <= set(full.edges)
        for edge in layout.edges:  # edges always point down a layer at least
            assert layout.by_name[edge.target].layer > layout.by_name[edge.source].layer


def test_limit_corpus_graph_structure() -> None:
    """The 750-node / 7,500-edge plan: every node needs its 10 predecessors, so the reduction is
    a chain of 749 edges over 750 layers (timing is measured in bench/ and the browser test)."""
    names = [f"n{i:04d}" for i in range(750)]
    extra = 7500 - sum(min(i, 10) for i in range(750))
    specs = []
    for i, name in enumerate(names):
        needs = {names[i - 1 - j] for j in range(min(i, 10))}
        if i >= 750 - extra:
            needs.add(names[i - 11])
        specs.append(NodeSpec(name=name, needs=tuple(sorted(needs))))
    layout = layered_layout(specs)
    assert layout.edge_count == 7500
    assert len(layout.edges) == 749
    assert layout.layers == 750
    assert len({(n.x, n.y) for n in layout.nodes}) == 750
    assert sum(len(n.needs) for n in layout.nodes) == 7500


def test_layout_of_a_planned_graph(small_plan: object) -> None:
    layout = layout_graph(small_plan.graph)  # type: ignore[attr-defined]
    assert {n.name for n in layout.nodes} == {"a", "b", "c", "d", "e", "f"}
    assert ("a", "c") not in _drawn(layout)
    assert {(e.source, e.target) for e in layout.edges if e.condition} == {("b", "c")}
    wire = layout.to_wire()
    assert wire["reduced_edge_count"] == len(layout.edges) and wire["edge_count"] == 6
