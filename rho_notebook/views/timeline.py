"""Where a run's time went: its journal folded into timeline rows (the Timeline tab, its static
picture and ``rho-notebook timeline RUN``).

One row per node of a graph run, or per step of a script or flow run. Each attempt is one bar from
its launch (``node_launched``) to its end (``node_finished``; still open while it runs), with the
time it waited to launch (``node_ready`` to ``node_launched``) as a queued stretch before it. An
earlier attempt of a row is a retry (a cancelled or uncertain attempt started again on resume, a
script step executed again); a wait for a person (``approval_requested`` to ``approval_decided``)
is marked on the attempt it held. A reused node (``node_reused``) or a replayed script step
(``step_replayed``) ran nothing: it is a zero-length mark, so it never looks like work.

The critical path is the chain of needs that ends last: from the row that finished last, walk to
the need that finished last, and so on. Shortening any other row does not end the run sooner.

Times are seconds from the run's first ``run_started`` (``origin``), so the front ends need no
clock arithmetic; the ISO origin and ``now`` travel along. The fold is pure: it reads the records
as :meth:`rho_notebook.service.Service.journal` returns them and nothing else, so an old journal
folds as it always did (unknown kinds and missing keys are ignored).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NotRequired

from typing_extensions import TypedDict

from rho_notebook.model.events import now_iso

if TYPE_CHECKING:
    from rho_notebook.model.graph import Graph
    from rho_notebook.service import Service

__all__ = [
    "BarJson",
    "RowJson",
    "TimelineJson",
    "timeline_of",
    "graph_needs",
    "read_timeline",
    "timeline_text",
]


class BarJson(TypedDict):
    """One attempt of a row; times in seconds from the timeline's origin."""

    attempt: int
    queued: float | None
    """When it became ready to launch (None: no ``node_ready`` before it, e.g. a script step)."""
    launched: float
    started: float | None
    """When its process existed (None: no process, e.g. an agent or approval step)."""
    finished: float | None
    """None while it runs."""
    state: str
    """``running`` until it ends, then the state it ended in."""
    retry: bool
    """An earlier attempt than the row's last: it was started again."""
    waits: list[list[float | None]]
    """``[requested, decided]`` of each wait for a person (decided None: still waiting)."""
    reused: NotRequired[bool]
    """A stored success was taken: nothing ran."""
    instances: NotRequired[int]
    """An item graph's aggregate step: the instances this attempt started."""


class RowJson(TypedDict):
    name: str
    kind: str
    """``node`` (a graph node) or ``step`` (a script or flow step)."""
    needs: list[str]
    state: str
    """The row's last state (``pending`` when nothing happened to it)."""
    bars: list[BarJson]
    critical: bool
    decided: NotRequired[float]
    """When a row that never launched was skipped or blocked."""
    replays: NotRequired[list[float]]
    """When a later execution replayed the step from the journal (zero-length marks)."""


class TimelineJson(TypedDict):
    run_id: str
    origin: str | None
    """ISO time of the first ``run_started`` (None: the run never started)."""
    now: str
    """ISO time of the fold; an open bar ends here."""
    span: float
    """Seconds from the origin to the last thing shown (``now`` while anything is open)."""
    rows: list[RowJson]
    critical_path: list[str]
    """Row names, first to last."""
    running: bool


_WAITING = "waiting"
_UNCERTAIN = "uncertain"


def graph_needs(graph: Graph) -> dict[str, list[str]]:
    """Each node's needs (a script run's graph has none: its steps bring their ``after``)."""
    return {node.name: list(node.needs) for node in graph.nodes}


async def read_timeline(service: Service, run: str, *, now: str | None = None) -> TimelineJson:
    """The timeline of ``run`` (ID or unique prefix) as its journal stands now, whoever owns it:
    what ``rho-notebook timeline`` prints and ``GET runs/<run>/timeline`` answers."""
    run_id = await service.resolve_run(run)
    journal = await service.journal(run_id)
    graph = await service.run_graph(run_id)
    live = service.is_owned(run_id)
    return timeline_of(run_id, journal.events, needs=graph_needs(graph), now=now, live=live)


def _seconds(at: Any) -> float | None:
    if not isinstance(at, str):
        return None
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None


@dataclass
class _Bar:
    attempt: int
    queued: float | None
    launched: float
    started: float | None = None
    finished: float | None = None
    state: str = "running"
    waits: dict[str, list[float | None]] = field(default_factory=dict)
    reused: bool = False
    instances: int = 0


@dataclass
class _Row:
    name: str
    kind: str = "node"
    needs: list[str] = field(default_factory=list)
    state: str = "pending"
    ready: float | None = None
    bars: dict[int, _Bar] = field(default_factory=dict)
    decided: float | None = None
    replays: list[float] = field(default_factory=list)
    first: float = float("inf")

    def bar(self, attempt: int, at: float) -> _Bar:
        """The bar of ``attempt``, begun at ``at`` when no launch of it was journaled."""
        found = self.bars.get(attempt)
        if found is None:
            found = self.bars[attempt] = _Bar(attempt, self.ready, at)
            self.ready = None
        return found

    def end(self, now: float) -> float | None:
        """When the row's last bar ended (``now`` while it runs), or None without bars."""
        if not self.bars:
            return None
        last = self.bars[max(self.bars)]
        return now if last.finished is None else last.finished


class _Fold:
    """The records of one journal, folded in order (see the module docstring)."""

    def __init__(self, needs: Mapping[str, Sequence[str]]) -> None:
        self.rows: dict[str, _Row] = {name: _Row(name, needs=sorted(deps)) for name, deps in needs.items()}
        self.requests: dict[str, _Bar] = {}
        self.origin: float | None = None
        self.origin_iso: str | None = None
        self.last = 0.0
        self.open_run = False

    def row(self, name: str, at: float) -> _Row:
        row = self.rows.get(name)
        if row is None:
            row = self.rows[name] = _Row(name)
        row.first = min(row.first, at)
        return row

    def feed(self, record: Mapping[str, Any]) -> None:
        at = _seconds(record.get("at"))
        if at is None:
            return
        kind = record.get("kind")
        if kind == "run_started":
            if self.origin is None:
                self.origin, self.origin_iso = at, str(record.get("at"))
            self.open_run = True
        elif kind in ("run_completed", "needs_recovery", "owner_exited", "run_halted"):
            self.open_run = False
        self.last = max(self.last, at)
        node = record.get("node")
        if isinstance(node, str) and node and kind != "budget_set":  # a node's limit is none of its activity
            self.feed_node(self.row(node, at), kind, record, at)

    def feed_node(self, row: _Row, kind: Any, record: Mapping[str, Any], at: float) -> None:
        attempt = record.get("attempt")
        number = attempt if isinstance(attempt, int) else max(row.bars, default=1)
        if kind == "node_ready":
            row.ready, row.state = at, "ready"
        elif kind == "node_launched":
            self.launched(row, record, number, at)
        elif kind in ("node_skipped", "node_blocked"):
            row.state, row.decided = str(kind).removeprefix("node_"), at
        elif kind in ("node_reused", "process_started", "node_finished", "instance_launched", "attempt_uncertain"):
            self.attempt_event(row, kind, record, row.bar(number, at), at)
        elif kind == "node_reset":
            row.state = "pending"
        elif kind == "step_replayed":
            row.replays.append(at)
            row.kind = "step"
        elif kind in ("approval_requested", "approval_decided"):
            self.approval(row, kind, record, number, at)

    @staticmethod
    def attempt_event(row: _Row, kind: str, record: Mapping[str, Any], bar: _Bar, at: float) -> None:
        """A record of one attempt's life after its launch."""
        if kind == "node_reused":
            bar.reused = True
        elif kind == "process_started":
            bar.started = at
        elif kind == "node_finished":
            bar.finished, bar.state = at, str(record.get("state") or "failure")
            row.state = bar.state
        elif kind == "attempt_uncertain":  # no result was journaled: it ended when this was found, at the latest
            if bar.finished is None:
                bar.finished, bar.state = at, _UNCERTAIN
                row.state = _UNCERTAIN
        else:
            bar.instances += 1

    def launched(self, row: _Row, record: Mapping[str, Any], number: int, at: float) -> None:
        step = record.get("step")
        if isinstance(step, Mapping):
            row.kind = "step"
            after = step.get("after")
            if isinstance(after, list) and not row.needs:
                row.needs = sorted(str(name) for name in after)
        bar = row.bar(number, at)
        bar.launched = min(bar.launched, at)
        row.state = "running"

    def close_open(self) -> None:
        """No owner holds the run: nothing runs now (see :func:`timeline_of`'s ``live``)."""
        self.open_run = False
        for row in self.rows.values():
            for bar in row.bars.values():
                if bar.finished is None:
                    bar.finished, bar.state = max(self.last, bar.launched), _UNCERTAIN
                    row.state = _UNCERTAIN
                for wait in bar.waits.values():
                    if wait[1] is None and wait[0] is not None:
                        wait[1] = max(self.last, wait[0])

    def approval(self, row: _Row, kind: Any, record: Mapping[str, Any], number: int, at: float) -> None:
        request = str(record.get("request_id") or "")
        if kind == "approval_requested":
            asked = row.bar(number, at)
            asked.waits[request] = [at, None]
            self.requests[request] = asked
            if asked.finished is None:
                row.state = _WAITING
            return
        bar = self.requests.get(request) or row.bars.get(number)
        wait = bar.waits.get(request) if bar is not None else None
        if wait is not None and wait[1] is None:
            wait[1] = _seconds(record.get("decided_at")) or at
            if row.state == _WAITING:
                row.state = "running"


def timeline_of(
    run_id: str,
    records: Iterable[Mapping[str, Any]],
    *,
    needs: Mapping[str, Sequence[str]] | None = None,
    now: str | None = None,
    live: bool | None = None,
) -> TimelineJson:
    """The timeline of a run from its journal ``records`` (in order); ``needs`` are the graph's
    (:func:`graph_needs`: every node gets a row, even one that never became ready), ``now`` the
    time an open bar ends at (default: the current time). ``live`` False says no owner holds the
    run: an attempt still open (its owner died before journaling its end) ends at the last
    record, ``uncertain``, instead of growing with the clock; None: judged from the records."""
    fold = _Fold(needs or {})
    for record in records:
        fold.feed(record)
    if live is False:
        fold.close_open()
    now_text = now or now_iso()
    now_at = _seconds(now_text) or fold.last
    running = fold.open_run or any(bar.finished is None for row in fold.rows.values() for bar in row.bars.values())
    end_at = max(now_at, fold.last) if running else fold.last
    origin = fold.origin if fold.origin is not None else min((r.first for r in fold.rows.values()), default=end_at)
    origin = min(origin, end_at)
    path = _critical_path(fold.rows, end_at)
    order = sorted(fold.rows.values(), key=lambda r: (r.first, r.name))
    rows = [_row_json(row, origin, path) for row in order]
    return {
        "run_id": run_id,
        "origin": fold.origin_iso,
        "now": now_text,
        "span": round(max(0.0, end_at - origin), 3),
        "rows": rows,
        "critical_path": path,
        "running": running,
    }


def _critical_path(rows: Mapping[str, _Row], now: float) -> list[str]:
    """The chain of needs that ended last (see the module docstring), first row first."""
    ends = {name: end for name, row in rows.items() if (end := row.end(now)) is not None}
    if not ends:
        return []
    name: str | None = max(ends, key=lambda n: (ends[n], n))
    path: list[str] = []
    seen: set[str] = set()
    while name is not None and name not in seen:
        path.append(name)
        seen.add(name)
        done = [need for need in rows[name].needs if need in ends]
        name = max(done, key=lambda n: (ends[n], n)) if done else None
    path.reverse()
    return path


def _at(value: float | None, origin: float) -> float | None:
    return None if value is None else round(value - origin, 3)


def _bar_json(bar: _Bar, origin: float, last: int) -> BarJson:
    launched = _at(bar.launched, origin) or 0.0
    queued = _at(bar.queued, origin)
    found: BarJson = {
        "attempt": bar.attempt,
        "queued": queued if queued is not None and queued < launched else None,
        "launched": launched,
        "started": _at(bar.started, origin),
        "finished": _at(bar.finished, origin),
        "state": bar.state,
        "retry": bar.attempt < last,
        "waits": [[_at(start, origin), _at(end, origin)] for start, end in bar.waits.values()],
    }
    if bar.reused:
        found["reused"] = True
    if bar.instances:
        found["instances"] = bar.instances
    return found


def _row_json(row: _Row, origin: float, path: Sequence[str]) -> RowJson:
    last = max(row.bars, default=0)
    found: RowJson = {
        "name": row.name,
        "kind": row.kind,
        "needs": list(row.needs),
        "state": row.state,
        "bars": [_bar_json(row.bars[n], origin, last) for n in sorted(row.bars)],
        "critical": row.name in path,
    }
    if row.decided is not None and not row.bars:
        found["decided"] = _at(row.decided, origin) or 0.0
    if row.replays:
        found["replays"] = [_at(at, origin) or 0.0 for at in row.replays]
    return found


_GLYPHS = {"queued": "░", "retry": "▒", "run": "█", "wait": "?", "mark": "◇", "path": "*", "cut": "…"}
_ASCII = {"queued": ".", "retry": "=", "run": "#", "wait": "?", "mark": "o", "path": "*", "cut": "~"}
_NAME_MAX = 28
_SUFFIX = 22


def timeline_text(timeline: TimelineJson, *, width: int = 100, unicode: bool = True) -> list[str]:
    """The timeline as a text Gantt ``width`` columns wide: a head line, one line per row (its
    bars, its last attempt's duration and state, ``*`` on the critical path) and a legend."""
    glyphs = _GLYPHS if unicode else _ASCII
    rows = timeline["rows"]
    name_width = min(_NAME_MAX, max((len(row["name"]) for row in rows), default=4))
    columns = max(10, width - name_width - _SUFFIX - 2)
    span = timeline["span"] or 1.0
    path = " → " if unicode else " -> "
    head = f"run {timeline['run_id']}   {_duration(timeline['span'])}" + (" (running)" if timeline["running"] else "")
    lines = [head]
    if timeline["critical_path"]:
        lines.append("critical path: " + path.join(timeline["critical_path"]))
    for row in rows:
        cells = _row_cells(row, columns, span, glyphs)
        name = row["name"] if len(row["name"]) <= name_width else row["name"][: name_width - 1] + glyphs["cut"]
        last = row["bars"][-1] if row["bars"] else None
        took = _duration(_took(last, timeline["span"])) if last is not None else ""
        mark = glyphs["path"] if row["critical"] else " "
        lines.append(f"{name:<{name_width}} {''.join(cells)} {took:>8} {row['state']:<11}{mark}".rstrip())
    seconds = span / columns
    legend = [
        f"1 column = {_duration(seconds)} ",
        f"{glyphs['run']} ran",
        f"{glyphs['queued']} queued",
        f"{glyphs['retry']} earlier attempt",
        f"{glyphs['wait']} waiting for a person",
        f"{glyphs['mark']} reused/replayed",
        f"{glyphs['path']} critical path",
    ]
    line = ""
    for item in legend:  # wrapped between items, never inside one
        if line and len(line) + 2 + len(item) > width:
            lines.append(line)
            line = ""
        line = f"{line}  {item}" if line else item
    lines.append(line)
    return lines


def _took(bar: BarJson, span: float) -> float:
    end = bar["finished"] if bar["finished"] is not None else span
    return max(0.0, end - bar["launched"])


def _duration(seconds: float) -> str:
    """``3.4ms`` under a hundredth of a second (where ``0.00s`` would say nothing), ``0.42s``, ``12.5s``,
    ``4m05s``, ``2h03m``."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _row_cells(row: RowJson, columns: int, span: float, glyphs: Mapping[str, str]) -> list[str]:
    """One row's columns: queued, ran (an earlier attempt apart), waits and zero-length marks."""
    cells = [" "] * columns

    def paint(start: float, end: float | None, glyph: str) -> None:
        first = min(columns - 1, max(0, int(start / span * columns)))
        stop = span if end is None else end
        last = min(columns, max(first + 1, round(stop / span * columns)))
        for column in range(first, last):
            cells[column] = glyph

    for bar in row["bars"]:
        if bar["queued"] is not None:
            paint(bar["queued"], bar["launched"], glyphs["queued"])
        if bar.get("reused"):
            paint(bar["launched"], bar["launched"], glyphs["mark"])
            continue
        paint(bar["launched"], bar["finished"], glyphs["retry"] if bar["retry"] else glyphs["run"])
        for start, end in bar["waits"]:
            if start is not None:
                paint(start, end, glyphs["wait"])
    for at in row.get("replays", []):
        paint(at, at, glyphs["mark"])
    return cells
