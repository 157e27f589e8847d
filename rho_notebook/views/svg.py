"""Static SVG pictures of a laid-out DAG, for saved notebooks, nbconvert HTML and the CLI.

The picture is drawn from the same :class:`~rho_notebook.views.layout.Layout` the live view
uses, with the same colours and icons per state (``STATE_STYLE``; the front end's
``js/src/dagview.ts`` repeats them and a test keeps both in step). It is self-contained: inline
styles only, no scripts, no external fonts. Its size holds everything drawn: the width is the
widest of the graph, the heading and the legend (which wraps onto more lines rather than run
past the graph), so a viewer that shows the SVG at its own size cuts nothing.

Node states are the displayed states of the shared contract (a node view's ``shown``): the
``NodeState`` values, plus ``failure_allowed``, ``failure_handled``, ``denial_handled`` and
``waiting_for_approval`` (``SHOWN_STYLE``, with the human labels of ``service.wire.shown_label``). The legend always
lists the nine node states and adds a displayed state only when a node has it.

Fonts: the family list starts with fonts a Debian machine has (DejaVu, Liberation) and ends in
the generic ``monospace``, so a browser picks the platform's and the rasteriser
(:mod:`rho_notebook.views.picture`) finds one on any machine. The state icons (○ ◔ ◉ ✓ ✗ ⊘ ■ ↷ ⊗
◷) are in DejaVu (Debian's fonts-dejavu-core); with Liberation alone the text renders and the
icons show as empty boxes; with no font at all the PNG has boxes and edges only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

from rho_notebook.service.wire import SHOWN_ORDER, shown_label
from rho_notebook.views.layout import Layout

__all__ = [
    "STATE_STYLE",
    "SHOWN_STYLE",
    "DECISION_STYLE",
    "STATES",
    "FONT_FAMILY",
    "render_svg",
    "counts_line",
    "style_of",
    "label_of",
]

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

SHOWN_STYLE: dict[str, tuple[str, str, str]] = {
    # displayed states that are not node states (the contract's ``shown``): (fill, stroke, icon)
    "failure_allowed": ("#fef2f2", "#f87171", "\u2717"),
    "failure_handled": ("#f1f5f9", "#64748b", "\u2717"),
    "denial_handled": ("#f5f3ff", "#8b5cf6", "\u2298"),
    "waiting_for_approval": ("#fefce8", "#ca8a04", "\u25f7"),
}

DECISION_STYLE = ("#fef08a", "#a16207", "?")
"""A script run's halted step (needs decision): js/src/model.ts DECISION_STYLE has the same values."""

FONT_FAMILY = "DejaVu Sans Mono, Liberation Mono, ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"

_DASHED = frozenset({"skipped", "failure_allowed", "failure_handled", "denial_handled", "waiting_for_approval"})
"""Displayed states drawn with a dashed border: nothing ran, or what happened does not count."""

_MAX_HEIGHT = 2400.0
_MIN_WIDTH = 520.0
_MARGIN = 8.0
_HEADING_Y = 16.0
_LEGEND_Y = 24.0
_LEGEND_ROW = 20.0
_LEGEND_GAP = 6.0
_GRAPH_GAP = 5.0
_CHAR = 7.0
"""Width of one character at the legend's 10 px, generous for any monospace font and the icons."""
_BOLD_CHAR = 8.0
"""Width of one character of the 12 px bold heading."""


def style_of(state: str) -> tuple[str, str, str]:
    """(fill, stroke, icon) of a displayed state; an unknown one is drawn as pending."""
    return STATE_STYLE.get(state) or SHOWN_STYLE.get(state) or STATE_STYLE["pending"]


def label_of(state: str) -> str:
    """How a person reads a displayed state (:func:`~rho_notebook.service.wire.shown_label`)."""
    return shown_label(state).replace("_", " ")


def counts_line(states: Mapping[str, str], names: list[str]) -> str:
    """``6 success · 1 failure (allowed)``: the nodes by displayed state, in the legend's order."""
    counts = Counter(states.get(name, "pending") for name in names)
    return " · ".join(f"{counts[s]} {label_of(s)}" for s in _legend_states(counts) if counts[s])


def _legend_states(counts: Mapping[str, int]) -> list[str]:
    """The nine node states always, a displayed state only when a node has it, in legend order;
    then any state this module does not know (drawn as pending)."""
    known = [s for s in SHOWN_ORDER if s in STATE_STYLE or counts.get(s)]
    return [*known, *sorted(s for s in counts if s not in SHOWN_ORDER)]


@dataclass(frozen=True)
class _Chip:
    label: str
    fill: str
    stroke: str

    @property
    def width(self) -> float:
        return len(self.label) * _CHAR + 8


def _legend_chips(counts: Mapping[str, int], halted: int) -> list[_Chip]:
    chips = []
    for state in _legend_states(counts):
        fill, stroke, icon = style_of(state)
        chips.append(_Chip(f"{icon} {label_of(state)} {counts.get(state, 0)}", fill, stroke))
    if halted:
        fill, stroke, icon = DECISION_STYLE
        chips.append(_Chip(f"{icon} needs decision {halted}", fill, stroke))
    return chips


def _legend_rows(chips: list[_Chip], width: float) -> list[list[_Chip]]:
    """The chips in rows no wider than ``width`` (a chip wider than that gets its own row)."""
    rows: list[list[_Chip]] = [[]]
    used = _MARGIN
    for chip in chips:
        if rows[-1] and used + chip.width + _MARGIN > width:
            rows.append([])
            used = _MARGIN
        rows[-1].append(chip)
        used += chip.width + _LEGEND_GAP
    return rows


def _legend(rows: list[list[_Chip]]) -> list[str]:
    out = []
    for number, row in enumerate(rows):
        x, y = _MARGIN, _LEGEND_Y + number * _LEGEND_ROW
        for chip in row:
            out.append(
                f'<g class="legend"><rect x="{x:g}" y="{y:g}" width="{chip.width:g}" height="15" rx="3" '
                f'fill="{chip.fill}" stroke="{chip.stroke}"/>'
                f'<text x="{x + 4:g}" y="{y + 11:g}" fill="#111827" font-size="10">{escape(chip.label)}</text></g>'
            )
            x += chip.width + _LEGEND_GAP
    return out


def _row_width(row: list[_Chip]) -> float:
    return _MARGIN * 2 + sum(chip.width for chip in row) + _LEGEND_GAP * max(len(row) - 1, 0)


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
    step of an item graph (as the live widget draws them); only item nodes, as a script's step
    ids may end in ``@N`` too."""
    groups: dict[str, list[Any]] = {}
    for node in layout.nodes:
        match = _ROUND.match(node.name) if node.kind == "item" else None
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


def _nodes(layout: Layout, states: Mapping[str, str], halted: Collection[str], marks: Mapping[str, str]) -> list[str]:
    out = []
    max_chars = int((layout.node_width - 34) / 7)
    for node in layout.nodes:
        state = states.get(node.name, "pending")
        fill, stroke, icon = style_of(state)
        dash = ' stroke-dasharray="3,2"' if state in _DASHED else ""
        if node.name in halted:
            fill, stroke, icon = DECISION_STYLE
            dash = ' stroke-dasharray="5,3"'
        label = node.name if len(node.name) <= max_chars else node.name[: max_chars - 1] + "\u2026"
        out.append(
            f'<g class="node" data-name="{escape(node.name)}" data-state="{escape(state)}">'
            f"<title>{escape(node.name)} ({escape(node.kind)}): {escape(label_of(state))}</title>"
            f'<rect x="{node.x:g}" y="{node.y:g}" width="{layout.node_width:g}" height="{layout.node_height:g}" rx="6" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"{dash}/>'
            f'<text x="{node.x + 10:g}" y="{node.y + layout.node_height / 2 + 4:g}" fill="{stroke}" font-weight="bold">{icon}</text>'
            f'<text x="{node.x + 26:g}" y="{node.y + layout.node_height / 2 + 4:g}" fill="#111827">{escape(label)}</text>'
            + _mark(node, layout, marks.get(node.name, ""))
            + "</g>"
        )
    return out


def _mark(node: Any, layout: Layout, text: str) -> str:
    """A node's short note in its lower right corner (as the live view draws its marks)."""
    if not text:
        return ""
    x, y = node.x + layout.node_width - 8, node.y + layout.node_height - 4
    return (
        f'<text class="mark" x="{x:g}" y="{y:g}" text-anchor="end" fill="#4b5563" font-size="9">{escape(text)}</text>'
    )


def render_svg(
    layout: Layout,
    *,
    states: Mapping[str, str] | None = None,
    title: str = "",
    subtitle: str = "",
    halted: Collection[str] = (),
    marks: Mapping[str, str] | None = None,
) -> str:
    """An SVG document of the DAG: every node (coloured and marked by displayed state), reduced
    edges (condition edges dashed), a heading, and a legend with the count of each state; the
    ``halted`` steps of a script run that needs a decision are drawn (and counted) in their own
    style. ``states`` maps a node to its displayed state (a missing node is pending); ``marks``
    a node to a short note drawn in its corner."""
    states = states or {}
    counts = Counter(states.get(node.name, "pending") for node in layout.nodes)
    heading = title + (f" — {subtitle}" if subtitle else "")
    chips = _legend_chips(counts, sum(1 for node in layout.nodes if node.name in halted)) if layout.nodes else []
    rows = _legend_rows(chips, max(layout.width, _MIN_WIDTH)) if chips else []
    width = max(layout.width, _MIN_WIDTH, _MARGIN * 2 + len(heading) * _BOLD_CHAR, *(_row_width(row) for row in rows))
    header = _LEGEND_Y + len(rows) * _LEGEND_ROW + _GRAPH_GAP
    height = header + (layout.height if layout.nodes else _MARGIN)
    scale = min(1.0, _MAX_HEIGHT / height)
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rho-dag-snapshot" width="{width * scale:.0f}" '
        f'height="{height * scale:.0f}" viewBox="0 0 {width:g} {height:g}" font-family="{FONT_FAMILY}" font-size="12">',
        f'<rect x="0" y="0" width="{width:g}" height="{height:g}" fill="#ffffff"/>',
        f'<text x="{_MARGIN:g}" y="{_HEADING_Y:g}" font-weight="bold" fill="#111827">{escape(heading)}</text>',
        *_legend(rows),
        f'<g transform="translate(0,{header:g})">',
        *_round_frames(layout),
        '<g class="edges" fill="none" stroke="#6b7280" stroke-width="1.2">',
    ]
    for edge in layout.edges:
        dash = ' stroke-dasharray="5,4"' if edge.condition else ""
        out.append(f'<path d="{_path(edge.points, layout.direction)}"{dash}/>')
    out.append("</g>")
    out.extend(_nodes(layout, states, halted, marks or {}))
    out.append("</g></svg>")
    return "".join(out)
