"""The static picture of a DAG: the MIME bundle a saved, untrusted or converted notebook shows.

A viewer that does not run our widget shows one entry of an output's bundle. JupyterLab, for a
notebook it does not trust, takes the first *safe* renderer by rank (``@jupyterlab/rendermime``:
``text/html`` 50 (sanitized), ``image/svg+xml`` 80 (not safe, skipped), ``image/png`` 90,
``text/plain`` 120): an HTML entry wins over the picture, and a sanitized SVG inside HTML reads as
garbled text (``○ pending 6◔ ready 0…``). So the bundle here carries no HTML: ``image/png`` (what
untrusted JupyterLab, GitHub and VS Code show), ``image/svg+xml`` (sharper, where trusted:
nbconvert HTML, nbviewer) and a readable ``text/plain`` (terminals, diffs, a cell without
images). Where a front end needs HTML (the plan card's facts), :func:`picture_html` embeds the PNG
as an ``<img>`` with a ``data:`` URI, which JupyterLab's sanitizer keeps.

The PNG is rasterised from the SVG (:mod:`rho_notebook.views.svg`) by resvg-py: a Rust wheel that
needs no system library (cairosvg needs libcairo) and renders the SVG subset we draw. It is drawn
at twice its size, for sharp text on high-density screens (:func:`picture_metadata` gives the
display size); that costs ~50 ms for a small DAG, in proportion to pixels, so the last pictures are
kept by their SVG (a cell run again with the same graph draws nothing new).
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Collection, Mapping
from html import escape
from typing import Any

from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.service.wire import RunView
from rho_notebook.views.layout import Layout, layout_of
from rho_notebook.views.state import node_views, run_view_of
from rho_notebook.views.svg import counts_line, label_of, render_svg, style_of

__all__ = [
    "PNG_ZOOM",
    "TEXT_NODES",
    "dag_bundle",
    "run_bundle",
    "run_subtitle",
    "svg_to_png",
    "picture_html",
    "picture_metadata",
    "dag_text",
    "png_size",
]

PNG_ZOOM = 2.0
"""Pixels of the PNG per unit of the SVG (its display size is the SVG's: :func:`picture_metadata`)."""

_MAX_PIXELS = 4_000_000
"""A larger picture is drawn at zoom 1: rasterising costs time in proportion to pixels (a
1000x600 picture takes ~15 ms), and a huge graph's PNG would weigh megabytes."""

TEXT_NODES = 60
"""Nodes listed in ``text/plain``; the rest are counted."""

_MONOSPACE = "DejaVu Sans Mono"
"""The rasteriser's ``monospace`` when the SVG's own families are missing (resvg's default,
Courier New, is not on a Debian machine)."""


@functools.lru_cache(maxsize=32)
def svg_to_png(svg: str) -> bytes:
    """The PNG of an SVG document, at :data:`PNG_ZOOM` (1 for a very large picture)."""
    try:
        import resvg_py
    except ImportError as err:  # pragma: no cover - resvg-py is a dependency
        msg = "the DAG picture's PNG needs the resvg-py package: pip install resvg-py"
        raise ImportError(msg) from err

    width, height = _svg_size(svg)
    zoom = PNG_ZOOM if width * height * PNG_ZOOM * PNG_ZOOM <= _MAX_PIXELS else 1.0
    png = resvg_py.svg_to_bytes(
        svg_string=svg, zoom=zoom, monospace_family=_MONOSPACE, font_family=_MONOSPACE, background="#ffffff"
    )
    return bytes(png)


def _svg_size(svg: str) -> tuple[float, float]:
    head = svg[: svg.find(">")]
    sizes = []
    for name in ('width="', 'height="'):
        start = head.find(name)
        sizes.append(float(head[start + len(name) : head.find('"', start + len(name))]) if start >= 0 else 0.0)
    return sizes[0], sizes[1]


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels, from the PNG's header."""
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def dag_bundle(
    layout: Layout,
    *,
    states: Mapping[str, str] | None = None,
    title: str = "",
    subtitle: str = "",
    halted: Collection[str] = (),
    marks: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The static picture of a laid-out DAG: ``image/png`` (base64), ``image/svg+xml`` and
    ``text/plain``; ``states`` maps a node to its displayed state (a node view's ``shown``, else
    its ``state``; missing: pending), ``halted`` names a script run's steps that need a decision,
    ``marks`` a node's short note drawn in its corner (an aggregate step's ``4 ×`` instances)."""
    svg = render_svg(layout, states=states, title=title, subtitle=subtitle, halted=halted, marks=marks)
    return {
        "image/png": base64.b64encode(svg_to_png(svg)).decode("ascii"),
        "image/svg+xml": svg,
        "text/plain": dag_text(layout, states=states, title=title, subtitle=subtitle, halted=halted),
    }


def run_bundle(graph: Graph, state: RunState) -> dict[str, str]:
    """The final DAG picture of a run (:func:`dag_bundle` of its graph and state)."""
    views = node_views(state, graph)
    shown = {name: str(_fields(view).get("shown") or view["state"]) for name, view in views.items()}
    halted = [name for name, view in views.items() if view.get("halted")]
    marks = {name: instances_mark(found) for name, view in views.items() if (found := view.get("instances"))}
    layout = layout_of(graph, state, digest=state.graph_digest)
    subtitle = run_subtitle(run_view_of(state))
    return dag_bundle(layout, states=shown, title=graph.name, subtitle=subtitle, halted=halted, marks=marks)


def instances_mark(instances: Mapping[str, Any]) -> str:
    """An aggregate step's instances on its node, as the live view marks them: ``2/3 ×`` (settled
    of all) while any runs, ``3 ×`` when all settled."""
    states = list(instances.get("states", {}).values())
    running = sum(1 for state in states if state in ("running", "pending"))
    return f"{len(states) - running}/{len(states)} \u00d7" if running else f"{len(states)} \u00d7"


def _fields(view: Mapping[str, object]) -> Mapping[str, object]:
    """A node view as a plain mapping (``shown`` is read where the view carries it)."""
    return view


def run_subtitle(run: RunView | Mapping[str, object]) -> str:
    """``run 0190a1b2-c3d4 · completed · outcome success``: a run view in the picture's heading."""
    if not run:
        return ""
    subtitle = f"run {str(run.get('run_id', ''))[:13]} · {run.get('lifecycle', '')}"
    if run.get("outcome"):
        subtitle += f" · outcome {run['outcome']}"
    return subtitle


def dag_text(
    layout: Layout,
    *,
    states: Mapping[str, str] | None = None,
    title: str = "",
    subtitle: str = "",
    halted: Collection[str] = (),
) -> str:
    """The picture as text: heading, counts by state, then one line per node (layer by layer,
    icon, name, kind, state, the needs it was drawn from), at most :data:`TEXT_NODES` of them."""
    states = states or {}
    names = [node.name for node in layout.nodes]
    heading = f"DAG {title}" + (f" — {subtitle}" if subtitle else "")
    counts = f"{len(names)} node{'s' * (len(names) != 1)}: {counts_line(states, names)}" if names else "no nodes yet"
    lines = [heading, counts]
    if halted:
        lines[-1] += f" · {len(halted)} need{'s' * (len(halted) == 1)} a decision"
    for node in sorted(layout.nodes, key=lambda n: (n.layer, n.order))[:TEXT_NODES]:
        state = states.get(node.name, "pending")
        icon = "?" if node.name in halted else style_of(state)[2]
        needs = f"  ← {', '.join(node.needs)}" if node.needs else ""
        lines.append(f"  {icon} {node.name} ({node.kind}): {label_of(state)}{needs}")
    if len(names) > TEXT_NODES:
        lines.append(f"  … {len(names) - TEXT_NODES} more")
    return "\n".join(lines)


def picture_metadata(bundle: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Display metadata for a bundle's ``image/png``: its size at the SVG's scale (Jupyter
    front ends read ``width``/``height``), so the PNG drawn at :data:`PNG_ZOOM` is not shown twice
    as large."""
    png = base64.b64decode(bundle["image/png"])
    width, height = png_size(png)
    zoom = _zoom_of(bundle, width)
    return {"image/png": {"width": round(width / zoom), "height": round(height / zoom)}}


def _zoom_of(bundle: Mapping[str, str], png_width: int) -> float:
    svg = bundle.get("image/svg+xml")
    svg_width = _svg_size(svg)[0] if svg else 0.0
    return png_width / svg_width if svg_width else PNG_ZOOM


def picture_html(bundle: Mapping[str, str], *, css_class: str = "rho-dag-static") -> str:
    """The bundle's PNG as an ``<img>`` with a ``data:`` URI (kept by JupyterLab's sanitizer,
    unlike inline SVG) at its display size, with the text as its ``alt``."""
    size = picture_metadata(bundle)["image/png"]
    alt = escape(bundle.get("text/plain", "").split("\n", 1)[0])
    return (
        f'<div class="{css_class}"><img src="data:image/png;base64,{bundle["image/png"]}" '
        f'width="{size["width"]}" height="{size["height"]}" alt="{alt}" style="max-width:100%;height:auto"/></div>'
    )
