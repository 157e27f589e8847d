"""The static DAG picture (views/picture.py): what a saved, untrusted or converted notebook shows.

The PNG is decoded (a real PNG, its size the SVG's at the zoom, not blank, the legend's last
chip painted in its colour); the SVG holds its whole legend; the text reads as a list of nodes.
"""

from __future__ import annotations

import base64
import re
import struct
import xml.etree.ElementTree as ET
import zlib

from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.views.layout import NodeSpec, layered_layout
from rho_notebook.views.picture import PNG_ZOOM, dag_bundle, picture_html, picture_metadata, run_bundle
from rho_notebook.views.svg import DECISION_STYLE, SHOWN_STYLE, STATE_STYLE, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGBA bytes) of an 8-bit RGBA PNG, unfiltered with the five PNG
    filters (enough for what resvg writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert (depth, colour) == (8, 6), "resvg writes 8-bit RGBA"
    raw, stride, rows = zlib.decompress(chunks), width * 4, []
    previous = bytes(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 4] if i >= 4 else 0
            b = previous[i]
            c = previous[i - 4] if i >= 4 else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = bytes(line)
    return width, height, rows


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _specs() -> list[NodeSpec]:
    return [
        NodeSpec("fetch"),
        NodeSpec("parse", ("fetch",)),
        NodeSpec("greet", ("fetch",), conditional=True),
        NodeSpec("report", ("parse", "greet"), kind="shell"),
    ]


STATES = {"fetch": "success", "parse": "failure_allowed", "greet": "waiting_for_approval", "report": "blocked"}


def test_the_bundle_is_a_png_an_svg_and_text_and_no_html() -> None:
    bundle = dag_bundle(layered_layout(_specs()), states=STATES, title="quickstart", subtitle="run 0190 · completed")
    assert set(bundle) == {"image/png", "image/svg+xml", "text/plain"}
    png = base64.b64decode(bundle["image/png"])
    width, height, rows = _pixels(png)
    root = ET.fromstring(bundle["image/svg+xml"])
    assert (width, height) == (
        round(float(root.get("width", 0)) * PNG_ZOOM),
        round(float(root.get("height", 0)) * PNG_ZOOM),
    )
    assert picture_metadata(bundle) == {"image/png": {"width": width // 2, "height": height // 2}}
    colours = {row[i : i + 3] for row in rows[:: max(1, height // 60)] for i in range(0, len(row), 4 * 7)}
    assert len(colours) > 8, "the PNG is blank"
    # every state's fill is painted somewhere: the nodes are drawn in their displayed state
    painted = {bytes(_rgb(style[0])) for style in (STATE_STYLE["success"], SHOWN_STYLE["failure_allowed"])}
    assert painted <= {row[i : i + 3] for row in rows for i in range(0, len(row), 4)}


def test_the_text_reads_as_the_dag() -> None:
    text = dag_bundle(layered_layout(_specs()), states=STATES, title="quickstart")["text/plain"]
    lines = text.splitlines()
    assert lines[0] == "DAG quickstart"
    assert lines[1] == "4 nodes: 1 waiting for approval · 1 success · 1 failure (allowed) · 1 blocked"  # legend order
    assert "  \u2713 fetch (command): success" in lines
    assert "  \u2717 parse (command): failure (allowed)  \u2190 fetch" in lines
    assert "  \u2297 report (shell): blocked  \u2190 parse, greet" in lines
    assert "<" not in text and "pending 0" not in text


def _legend(svg: str) -> list[tuple[str, float, float, float]]:
    root = ET.fromstring(svg)
    chips = []
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "legend":
            rect, text = group.find(f"{SVG}rect"), group.find(f"{SVG}text")
            assert rect is not None and text is not None
            chips.append(
                (text.text or "", float(rect.get("x", 0)), float(rect.get("y", 0)), float(rect.get("width", 0)))
            )
    return chips


def test_the_svg_holds_its_whole_legend() -> None:
    """The picture used to be 520 wide while its legend ran to x=835: now its width and viewBox
    cover every chip, the legend wrapping under the graph's width rather than past it."""
    layout = layered_layout(_specs())
    svg = render_svg(layout, states=STATES, title="quickstart", halted=["report"])
    root = ET.fromstring(svg)
    width = float(root.get("width", 0))
    view = [float(v) for v in (root.get("viewBox") or "").split()]
    chips = _legend(svg)
    assert [label for label, *_ in chips][-1] == "? needs decision 1"
    assert all(x + w <= view[2] and x + w <= width for _, x, _, w in chips)
    assert len({y for *_, y, _ in [(c[0], c[1], c[2], c[3]) for c in chips]}) >= 2  # wrapped
    labels = " ".join(label for label, *_ in chips)
    for state in ("pending", "ready", "running", "success", "failure", "denial", "cancellation", "skipped", "blocked"):
        assert f" {state} " in f" {labels} "
    assert "\u2717 failure (allowed) 1" in labels and "\u25f7 waiting for approval 1" in labels
    assert "failure (handled)" not in labels  # a displayed state joins the legend when a node has it


def test_the_legends_last_chip_is_painted_in_the_png() -> None:
    layout = layered_layout(_specs())
    bundle = dag_bundle(layout, states=STATES, title="quickstart", halted=["report"])
    _, x, y, w = _legend(bundle["image/svg+xml"])[-1]
    _, _, rows = _pixels(base64.b64decode(bundle["image/png"]))
    row = rows[round((y + 7) * PNG_ZOOM)]
    near_right = round((x + w - 3) * PNG_ZOOM) * 4
    assert row[near_right : near_right + 3] == bytes(_rgb(DECISION_STYLE[0]))


def test_a_long_title_widens_the_picture() -> None:
    layout = layered_layout([NodeSpec("a")])
    title = "a-workflow-with-a-name-long-enough-to-run-past-the-minimum-width-of-the-picture"
    root = ET.fromstring(render_svg(layout, title=title, subtitle="run 0190 · completed · outcome success"))
    assert float(root.get("width", 0)) >= 8 * len(title)


def test_the_html_twin_is_an_img_the_sanitizer_keeps() -> None:
    bundle = dag_bundle(layered_layout(_specs()), title="quickstart")
    html = picture_html(bundle)
    assert re.fullmatch(
        r'<div class="rho-dag-static"><img src="data:image/png;base64,[A-Za-z0-9+/=]+" [^<]*/></div>', html
    )
    assert "<svg" not in html and 'alt="DAG quickstart"' in html


def test_run_bundle_draws_the_final_states(small_plan: object) -> None:
    from rho_notebook.model.run_state import NodeRecord
    from rho_notebook.model.state import NodeState

    graph: Graph = small_plan.graph  # type: ignore[attr-defined]
    state = RunState.fresh(
        run_id="0190abcd-0000-7000-8000-000000000000", plan_id="p", graph=graph, graph_digest="sha256:x"
    )
    state.nodes["a"] = NodeRecord(state=NodeState.SUCCESS)
    bundle = run_bundle(graph, state)
    root = ET.fromstring(bundle["image/svg+xml"])
    drawn = {g.get("data-name"): g.get("data-state") for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    assert drawn["a"] == "success" and set(drawn) == {node.name for node in graph.nodes}
    assert "run 0190abcd-0000" in bundle["text/plain"].splitlines()[0]
