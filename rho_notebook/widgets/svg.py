"""Static SVG snapshots of a laid-out DAG, for saved notebooks and nbconvert HTML.

The snapshot is drawn from the same :class:`~rho_notebook.views.layout.Layout` the live view
uses, with the same colours and icons per state (``STATE_STYLE``; the front end's
``js/src/dagview.ts`` repeats them and a test keeps both in step). It is self-contained: inline
styles only, no scripts, no external fonts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from html import escape
from typing import Any

from rho_notebook.views.layout import Layout

__all__ = ["STATE_STYLE", "DECISION_STYLE", "STATES", "render_svg", "counts_line"]

STATES = ("pending", "ready", "running", "success", "failure", "denial", "cancellation", "skipped", "blocked")

STATE_STYLE: dict[str, tuple[str, str, str]] = {
    # state: (fill, stroke, icon)
    "pending": ("#f3f4f6", "#9ca3af", "\u25cb"),
    "ready": ("#e0f2fe", "#0ea5e9", "\u25d4"),
    "running": ("#dbeafe", "#2563eb", "\u25c9"),
    "success": ("#dcfce7", "#16a34a", "\u2713"),
    "failure": ("#fee2e2", "#dc2626", "\u2717"),
    "denial": ("#fae8ff", "#a21caf", "\u2298"),
    "cancellation": ("#fef3c7", "#d97706", "\u25a0"),
    "skipped": ("#f8fafc", "#94a3b8", "\u21b7"),
    "blocked": ("#ffedd5", "#ea580c", "\u2297"),
}

DECISION_STYLE = ("#fef08a", "#a16207", "?")
"""A script run's halted step (needs decision): js/src/model.ts DECISION_STYLE has the same values."""

_MAX_HEIGHT = 2400.0
_HEADER = 44.0
_FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"


def counts_line(states: Mapping[str, str], names: list[str]) -> str:
    counts = Counter(states.get(name, "pending") for name in names)
    return " · ".join(f"{counts[s]} {s}" for s in STATES if counts[s])


def _path(points: tuple[tuple[float, float], ...], direction: str) -> str:
    (x0, y0), rest = points[0], points[1:]
    parts = [f"M{x0:g},{y0:g}"]
    px, py = x0, y0
    for x, y in rest:
        if direction == "TB":
            mid = (py + y) / 2
            parts.append(f"C{px:g},{mid:g} {x:g},{mid:g} {x:g},{y:g}")
        else:
            mid = (px + x) / 2
            parts.append(f"C{mid:g},{py:g} {mid:g},{y:g} {x:g},{y:g}")
        px, py = x, y
    return "".join(parts)


_ROUND = re.compile(r"^(.+)@(\d+)$")


def _round_frames(layout: Layout) -> list[str]:
    """One dashed frame, labelled with the step id, around the loop rounds ``step@N`` of each
    step of an item graph (as the live widget draws them)."""
    groups: dict[str, list[Any]] = {}
    for node in layout.nodes:
        match = _ROUND.match(node.name)
        if match is not None:
            groups.setdefault(match.group(1), []).append(node)
    frames: list[str] = []
    for step, nodes in groups.items():
        left = min(n.x for n in nodes) - 8
        top = min(n.y for n in nodes) - 16
        right = max(n.x for n in nodes) + layout.node_width + 8
        bottom = max(n.y for n in nodes) + layout.node_height + 6
        rounds = f"{len(nodes)} round{'s' * (len(nodes) != 1)}"
        frames.append(
            f'<g class="round-group" data-step="{escape(step)}">'
            f'<rect x="{left:g}" y="{top:g}" width="{right - left:g}" height="{bottom - top:g}" rx="8" '
            f'fill="none" stroke="#9ca3af" stroke-dasharray="4,3"/>'
            f'<text x="{left + 6:g}" y="{top + 11:g}" fill="#6b7280" font-size="10">{escape(step)} \u00b7 {rounds}</text></g>'
        )
    return frames


def render_svg(
    layout: Layout,
    *,
    states: Mapping[str, str] | None = None,
    title: str = "",
    subtitle: str = "",
    halted: Collection[str] = (),
) -> str:
    """An SVG document of the DAG: every node (coloured and marked by state), reduced edges
    (condition edges dashed), a legend line and counts by state in a header; the ``halted``
    steps of a script run that needs a decision are drawn (and counted) in their own style."""
    states = states or {}
    names = [node.name for node in layout.nodes]
    width = max(layout.width, 520.0)
    height = layout.height + _HEADER
    scale = min(1.0, _MAX_HEIGHT / height)
    shown_w, shown_h = width * scale, height * scale
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rho-dag-snapshot" width="{shown_w:.0f}" height="{shown_h:.0f}" '
        f'viewBox="0 0 {width:g} {height:g}" font-family="{_FONT}" font-size="12">',
        f'<rect x="0" y="0" width="{width:g}" height="{height:g}" fill="#ffffff"/>',
    ]
    heading = escape(title) + (f" — {escape(subtitle)}" if subtitle else "")
    out.append(f'<text x="8" y="16" font-weight="bold" fill="#111827">{heading}</text>')
    legend_x = 8.0
    counts = Counter(states.get(name, "pending") for name in names)
    for state in STATES:
        fill, stroke, icon = STATE_STYLE[state]
        label = f"{icon} {state} {counts[state]}"
        out.append(
            f'<g class="legend"><rect x="{legend_x:g}" y="24" width="{len(label) * 7 + 8}" height="15" rx="3" fill="{fill}" stroke="{stroke}"/>'
            f'<text x="{legend_x + 4:g}" y="35" fill="#111827" font-size="10">{escape(label)}</text></g>'
        )
        legend_x += len(label) * 7 + 14
    if halted:
        fill, stroke, icon = DECISION_STYLE
        label = f"{icon} needs decision {len(halted)}"
        out.append(
            f'<g class="legend"><rect x="{legend_x:g}" y="24" width="{len(label) * 7 + 8}" height="15" rx="3" fill="{fill}" stroke="{stroke}"/>'
            f'<text x="{legend_x + 4:g}" y="35" fill="#111827" font-size="10">{escape(label)}</text></g>'
        )
    out.append(f'<g transform="translate(0,{_HEADER:g})">')
    out.extend(_round_frames(layout))
    out.append('<g class="edges" fill="none" stroke="#6b7280" stroke-width="1.2">')
    for edge in layout.edges:
        dash = ' stroke-dasharray="5,4"' if edge.condition else ""
        out.append(f'<path d="{_path(edge.points, layout.direction)}"{dash}/>')
    out.append("</g>")
    max_chars = int((layout.node_width - 34) / 7)
    for node in layout.nodes:
        state = states.get(node.name, "pending")
        fill, stroke, icon = STATE_STYLE.get(state, STATE_STYLE["pending"])
        dash = ' stroke-dasharray="3,2"' if state == "skipped" else ""
        if node.name in halted:
            fill, stroke, icon = DECISION_STYLE
            dash = ' stroke-dasharray="5,3"'

        label = node.name if len(node.name) <= max_chars else node.name[: max_chars - 1] + "\u2026"
        out.append(
            f'<g class="node" data-name="{escape(node.name)}" data-state="{state}">'
            f"<title>{escape(node.name)} ({escape(node.kind)}): {state}</title>"
            f'<rect x="{node.x:g}" y="{node.y:g}" width="{layout.node_width:g}" height="{layout.node_height:g}" rx="6" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"{dash}/>'
            f'<text x="{node.x + 10:g}" y="{node.y + layout.node_height / 2 + 4:g}" fill="{stroke}" font-weight="bold">{icon}</text>'
            f'<text x="{node.x + 26:g}" y="{node.y + layout.node_height / 2 + 4:g}" fill="#111827">{escape(label)}</text>'
            "</g>"
        )
    out.append("</g></svg>")
    return "".join(out)
