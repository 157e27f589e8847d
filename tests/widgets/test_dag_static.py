"""SVG snapshots, DOT export, and the state palette shared with the front end."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from rho_notebook.views.layout import NodeSpec, layered_layout
from rho_notebook.views.svg import SHOWN_STYLE, STATE_STYLE, STATES, render_svg
from rho_notebook.widgets import to_dot

REPO = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"


def _specs() -> list[NodeSpec]:
    return [
        NodeSpec("count"),
        NodeSpec("big", ("count",), conditional=True),
        NodeSpec("report", ("big", "count"), kind="shell"),
        NodeSpec("a-very-long-node-name-that-does-not-fit-in-the-box-at-all", ("count",)),
    ]


def test_snapshot_has_every_node_with_its_state() -> None:
    layout = layered_layout(_specs())
    states = {"count": "success", "big": "skipped", "report": "failure"}
    svg = render_svg(layout, states=states, title="hello", subtitle="run 0190 · completed")
    root = ET.fromstring(svg)
    nodes = {g.get("data-name"): g.get("data-state") for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    assert nodes == {
        "count": "success",
        "big": "skipped",
        "report": "failure",
        "a-very-long-node-name-that-does-not-fit-in-the-box-at-all": "pending",
    }
    assert "\u2713" in svg and "\u21b7" in svg and "\u2717" in svg
    paths = list(root.iter(f"{SVG}path"))
    assert len(paths) == 3  # reduced edges only
    assert sum(1 for p in paths if p.get("stroke-dasharray")) == 1  # count -> big is a condition edge
    legend = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for state in STATES:
        assert state in legend
    assert "1 success" not in legend  # legend reads "<icon> success 1"
    assert f"{STATE_STYLE['success'][2]} success 1" in legend


def test_snapshot_of_a_huge_graph_is_scaled_not_cut() -> None:
    specs = [NodeSpec(f"n{i:04d}", (f"n{i - 1:04d}",) if i else ()) for i in range(750)]
    layout = layered_layout(specs)
    root = ET.fromstring(render_svg(layout))
    assert float(root.get("height", "0")) <= 2400
    assert len([g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]) == 750


def test_dot_export(small_plan: object) -> None:
    graph = small_plan.graph  # type: ignore[attr-defined]
    dot = to_dot(graph)
    source = dot.source
    assert "digraph small" in source
    for name in ("a", "b", "c", "d", "e", "f"):
        assert re.search(rf"^\s*{name} \[", source, re.M)
    assert re.search(r"b -> c \[style=dashed\]", source)
    assert "a -> c" not in source  # reduced away
    full = to_dot(graph, reduced=False, states={"a": "success"}).source
    assert "a -> c" in full and "\u2713 a" in full and STATE_STYLE["success"][0] in full


def test_front_end_uses_the_same_icons() -> None:
    """The live view draws every displayed state with the picture's icon (its colours follow the
    JupyterLab theme; the static picture keeps fixed ones)."""
    source = (REPO / "js" / "src" / "dagview.ts").read_text()
    for state, (_, _, icon) in {**STATE_STYLE, **SHOWN_STYLE}.items():
        escaped = "\\u" + format(ord(icon), "04x")
        assert re.search(rf'{state}: \[.*"{re.escape(escaped)}"\]', source), state


def test_built_bundle_ships_in_the_package() -> None:
    static = REPO / "rho_notebook" / "widgets" / "static"
    bundle = (static / "dag.js").read_text()
    assert "rho-dag" in bundle and "msg:custom" in bundle
    assert (static / "dag.css").read_text() == (REPO / "js" / "src" / "dagview.css").read_text()


def test_nbconvert_html_shows_the_snapshot(project: object, small_plan: object, comms: list[object]) -> None:
    """Without saved widget state, nbconvert's HTML falls back to the picture's SVG (the bundle
    has no text/html, which untrusted JupyterLab would show sanitized instead of the PNG)."""
    import nbformat
    from nbconvert import HTMLExporter

    from rho_notebook.widgets import graph_view

    view = graph_view(small_plan)  # type: ignore[arg-type]
    data, _ = view._repr_mimebundle_()
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("graph_view(plan)")
    cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
    notebook.cells = [cell]
    html, _ = HTMLExporter().from_notebook_node(notebook)
    assert "text/html" not in data and data["image/png"]
    embedded = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', html)  # nbconvert 7 embeds the SVG
    assert embedded is not None
    svg = base64.b64decode(embedded.group(1)).decode()
    for name in ("a", "b", "c", "d", "e", "f"):
        assert f'data-name="{name}"' in svg
    assert "rho-dag-snapshot" in svg


def test_pane_reads_agent_artifacts(small_plan: object, tmp_path: Path) -> None:
    import json

    from rho_notebook.model.run_state import AttemptRecord, NodeRecord
    from rho_notebook.model.state import NodeState
    from rho_notebook.views.dag import load_detail

    (tmp_path / "answer.md").write_text("# Findings\n\n- **one**\n")
    (tmp_path / "answer.txt").write_text('{"decision": "approve"}')
    (tmp_path / "usage.json").write_text(json.dumps({"model": "m", "tokens": {"input": 10}}))
    record = NodeRecord(
        state=NodeState.SUCCESS, attempts=[AttemptRecord(number=1, started_at="2026-01-01T00:00:00+00:00")]
    )
    detail = load_detail(node=small_plan.graph.node("b"), record=record, attempt_dir=tmp_path)  # type: ignore[attr-defined]
    assert detail["answer"]["text"].startswith("# Findings")  # type: ignore[index]
    assert detail["raw_answer"]["text"] == '{"decision": "approve"}'  # type: ignore[index]
    assert detail["usage"] == {"model": "m", "tokens": {"input": 10}}
    assert detail["stdout"] is None  # no exit.json: the process never ran


def test_snapshot_frames_the_loop_rounds_of_one_step() -> None:
    specs = [
        NodeSpec("init", kind="item"),
        NodeSpec("bump@1", ("init",), kind="item"),
        NodeSpec("bump@2", ("bump@1",), kind="item"),
        NodeSpec("bump@3", ("bump@2",), kind="item"),
        NodeSpec("out", ("bump@3",), kind="item"),
    ]
    # a script's steps may be named like rounds (step ids allow @): they are not framed
    steps = [NodeSpec("fetch@1", kind="command"), NodeSpec("fetch@2", ("fetch@1",), kind="command")]
    script = ET.fromstring(render_svg(layered_layout(steps)))
    assert not [g for g in script.iter(f"{SVG}g") if g.get("class") == "round-group"]
    layout = layered_layout(specs)
    root = ET.fromstring(render_svg(layout))
    [frame] = [g for g in root.iter(f"{SVG}g") if g.get("class") == "round-group"]
    assert frame.get("data-step") == "bump"
    assert "bump \u00b7 3 rounds" in "".join(frame.itertext())
    rect = frame.find(f"{SVG}rect")
    assert rect is not None
    top, bottom = float(rect.get("y", 0)), float(rect.get("y", 0)) + float(rect.get("height", 0))
    rows = {node.name: node.y for node in layout.nodes}
    assert all(top < rows[f"bump@{r}"] < bottom for r in (1, 2, 3))
    assert not top < rows["init"] < bottom and not top < rows["out"] < bottom
