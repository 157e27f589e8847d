"""The static picture of a run's timeline, for saved notebooks: the Timeline tab drawn once.

A saved notebook (and nbconvert, GitHub, an untrusted JupyterLab) shows the widget's static
picture, not the live widget (:mod:`rho_notebook.views.picture`). When a run stops, its controller
(:mod:`rho_notebook.widgets._run`) folds the timeline (:mod:`rho_notebook.views.timeline`) and the
final picture becomes the DAG with the timeline under it (:func:`with_timeline`): one SVG, one
PNG rasterised from it, so every viewer that shows the DAG shows where the time went too.

The drawing follows js/src/timeline.ts: a row per node or step, queued time shaded, each attempt a
bar in its state's colour, earlier attempts (retries) paler with a dashed outline, waits for a
person in amber under the bar, the critical path in bold with an outlined bar. Its elements carry
``rho-tl-*`` classes and ``data-row`` names only, never the DAG picture's ``data-name`` or
``data-state``, so counting the DAG's nodes in the combined SVG counts what it did before.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from html import escape

from rho_notebook.views.picture import svg_to_png
from rho_notebook.views.svg import FONT_FAMILY, SHOWN_STYLE, STATE_STYLE
from rho_notebook.views.timeline import BarJson, RowJson, TimelineJson

__all__ = ["timeline_svg", "with_timeline"]

_ROW = 20
_AXIS = 36
_MARGIN = 12
_CHAR = 7.2
_WAIT = "#d97706"
_QUEUED = "#bae6fd"
_TICKS = 4
MAX_ROWS = 80
"""Rows drawn in the static picture; the rest are counted under it (a 750-node run's picture
would otherwise be 15,000 pixels tall: the live tab and ``rho-notebook timeline`` show them all)."""


def _colours(state: str) -> tuple[str, str]:
    fill, stroke, _icon = STATE_STYLE.get(state) or SHOWN_STYLE.get(state) or STATE_STYLE["running"]
    return fill, stroke


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d}:{rest:02d}"


def timeline_svg(timeline: TimelineJson, *, width: int = 720) -> str:
    """An SVG document of the timeline ``width`` units wide (see the module docstring)."""
    rows = timeline["rows"][:MAX_ROWS]
    more = len(timeline["rows"]) - len(rows)
    label = min(200.0, _MARGIN + _CHAR * max(4, *(len(row["name"]) for row in rows)) if rows else 40.0)
    bars = max(120.0, width - label - _MARGIN)
    height = _AXIS + _ROW * (len(rows) + (1 if more else 0)) + _MARGIN
    span = timeline["span"] or 1.0
    path = " → ".join(timeline["critical_path"])
    head = f"timeline · {_duration(timeline['span'])}" + (f" · critical path: {path}" if path else "")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rho-timeline-snapshot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{FONT_FAMILY}" font-size="11">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_MARGIN}" y="14" font-weight="bold" fill="#111827">{escape(head)}</text>',
    ]
    for tick in range(_TICKS + 1):
        x = label + bars * tick / _TICKS
        anchor = "start" if tick == 0 else "end" if tick == _TICKS else "middle"
        out.append(
            f'<line x1="{x:.1f}" y1="{_AXIS - 6}" x2="{x:.1f}" y2="{height - _MARGIN}" stroke="#e5e7eb"/>'
            f'<text x="{x:.1f}" y="{_AXIS - 9}" text-anchor="{anchor}" fill="#6b7280">'
            f"{escape(_duration(timeline['span'] * tick / _TICKS))}</text>"
        )
    for index, row in enumerate(rows):
        out.extend(_row(row, _AXIS + index * _ROW, label, bars / span, label + bars))
    if more:
        y = _AXIS + _ROW * len(rows) + _ROW / 2 + 4
        out.append(
            f'<text x="{_MARGIN}" y="{y:.1f}" fill="#6b7280">… {more} more rows: rho-notebook timeline RUN</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _row(row: RowJson, y: float, left: float, scale: float, right: float) -> list[str]:
    weight = ' font-weight="bold"' if row["critical"] else ""
    out = [
        f'<g class="rho-tl-row{" rho-tl-critical" if row["critical"] else ""}" data-row="{escape(row["name"])}">',
        f'<text x="{_MARGIN}" y="{y + _ROW / 2 + 4:.1f}" fill="#111827"{weight}>{escape(row["name"])}</text>',
    ]
    for bar in row["bars"]:
        out.extend(_bar(bar, row["critical"], y, left, scale, right))
    if not row["bars"] and "decided" in row:
        _fill, stroke = _colours(row["state"])
        out.append(
            f'<text x="{left + row["decided"] * scale + 2:.1f}" y="{y + _ROW / 2 + 4:.1f}" fill="{stroke}">'
            f"{escape(row['state'])}</text>"
        )
    for at in row.get("replays", []):
        out.append(_mark(left + at * scale, y, "#94a3b8"))
    out.append("</g>")
    return out


def _rect(x: float, y: float, width: float, height: float, fill: str, extra: str = "", cls: str = "") -> str:
    return (
        f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{max(2.0, width):.1f}" height="{height}" rx="2" '
        f'fill="{fill}"{extra}/>'
    )


def _mark(x: float, y: float, colour: str) -> str:
    mid = y + _ROW / 2
    return f'<path class="rho-tl-mark" d="M{x:.1f} {mid - 5:.1f} l5 5 l-5 5 l-5 -5 z" fill="{colour}"/>'


def _bar(bar: BarJson, critical: bool, y: float, left: float, scale: float, right: float) -> list[str]:
    fill, stroke = _colours(bar["state"])
    launched = left + bar["launched"] * scale
    end: float | None = bar["finished"]
    out = []
    if bar["queued"] is not None:
        start = left + bar["queued"] * scale
        out.append(_rect(start, y + 7, launched - start, 6, _QUEUED, cls="rho-tl-queued"))
    if bar.get("reused"):
        out.append(_mark(launched, y, stroke))
        return out
    stop: float = left + end * scale if end is not None else right  # an open bar runs to now
    if bar["retry"]:
        extra = f' stroke="{stroke}" stroke-dasharray="3 2"'
        out.append(_rect(launched, y + 3, stop - launched, 14, fill, extra, "rho-tl-retry"))
    else:
        outline = ' stroke="#111827" stroke-width="2"' if critical else ""
        out.append(_rect(launched, y + 3, stop - launched, 14, stroke, outline, "rho-tl-run"))
    for asked, decided in bar["waits"]:
        if asked is None:
            continue
        first = left + asked * scale
        last = left + (decided if decided is not None else asked) * scale
        out.append(_rect(first, y + 15, last - first, 4, _WAIT, cls="rho-tl-wait"))
    return out


_SIZE = re.compile(r'<svg([^>]*?) width="([0-9.]+)" height="([0-9.]+)"')


def _size(svg: str) -> tuple[float, float]:
    found = _SIZE.search(svg)
    return (float(found.group(2)), float(found.group(3))) if found else (0.0, 0.0)


def with_timeline(bundle: Mapping[str, str], timeline: TimelineJson) -> dict[str, str]:
    """The DAG picture ``bundle`` (:func:`rho_notebook.views.picture.dag_bundle`) with the run's
    timeline under it: one SVG holding both, its PNG, and the text with the timeline's head."""
    dag = bundle.get("image/svg+xml", "")
    dag_width, dag_height = _size(dag)
    width = int(max(dag_width, 480))
    lower = timeline_svg(timeline, width=width)
    _lw, lower_height = _size(lower)
    height = dag_height + lower_height
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rho-run-snapshot" width="{width}" height="{height:g}" '
        f'viewBox="0 0 {width} {height:g}">'
        f'<rect x="0" y="0" width="{width}" height="{height:g}" fill="#ffffff"/>'
        f"{dag}"
        f'<g transform="translate(0,{dag_height:g})">{lower}</g>'
        "</svg>"
    )
    found = dict(bundle)
    found["image/svg+xml"] = svg
    found["image/png"] = base64.b64encode(svg_to_png(svg)).decode("ascii")
    return found
