"""Bounded answers: a window of a long text with a marker and where to go on, and JSON values cut
to a size with a marker saying where the whole value is."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from typing import Any, TypedDict

__all__ = ["Page", "EventsPage", "NodesPage", "page", "page_pieces", "events_page", "nodes_page", "cut_value"]


class Page(TypedDict):
    text: str
    """The window; a truncated one ends with a marker line naming ``next_offset``."""
    offset: int
    next_offset: int | None
    """Where the next window starts; None at the end of the text."""
    total: int
    """Characters in the whole text."""
    truncated: bool


def page(text: str, *, offset: int, limit: int, how: str) -> Page:
    """``text[offset:offset + limit]``; when more follows, a marker saying ``how`` to read on
    (e.g. "call workflow_logs with offset=N", ``{offset}`` filled in)."""
    return _window(text[offset : offset + limit], offset=offset, total=len(text), how=how)


async def page_pieces(pieces: AsyncIterable[str], *, offset: int, limit: int, how: str) -> Page:
    """:func:`page` of the text ``pieces`` make, read once and never joined: only the window is
    kept, so a node's output of up to 64 MiB is paged in the memory of one piece."""
    kept: list[str] = []
    seen = 0  # characters before this piece
    for_window = limit
    async for piece in pieces:
        start = max(offset - seen, 0)
        if for_window > 0 and start < len(piece):
            kept.append(piece[start : start + for_window])
            for_window -= len(kept[-1])
        seen += len(piece)
    return _window("".join(kept), offset=offset, total=seen, how=how)


def _window(window: str, *, offset: int, total: int, how: str) -> Page:
    end = offset + len(window)
    if end >= total:
        return {"text": window, "offset": offset, "next_offset": None, "total": total, "truncated": False}
    marker = f"\n[... truncated: {total - end} more characters; {how.format(offset=end)}]"
    return {"text": window + marker, "offset": offset, "next_offset": end, "total": total, "truncated": True}


class EventsPage(TypedDict):
    events: list[dict[str, Any]]
    """Records with ``seq > after_seq``, in order: at most ``limit`` of them and about ``max_chars``
    of JSON (at least one record, however long)."""
    after_seq: int
    next_after_seq: int | None
    """The ``after_seq`` of the next page: the seq of the last record here; None when this page
    reaches the end of what the journal holds now (a live run may add more: ask again later)."""
    last_seq: int
    """The seq of the journal's last record now."""
    truncated: bool


def events_page(
    records: list[dict[str, Any]], *, after_seq: int, last_seq: int, limit: int, max_chars: int
) -> EventsPage:
    """One page of a run's journal records (already those after ``after_seq``): cut at ``limit``
    records or ``max_chars`` characters of JSON, whichever comes first."""
    kept: list[dict[str, Any]] = []
    size = 0
    for record in records[:limit]:
        size += len(json.dumps(record, separators=(",", ":"), ensure_ascii=False)) + 1
        if kept and size > max_chars:
            break
        kept.append(record)
    truncated = len(kept) < len(records)
    return {
        "events": kept,
        "after_seq": after_seq,
        "next_after_seq": int(kept[-1]["seq"]) if truncated else None,
        "last_seq": last_seq,
        "truncated": truncated,
    }


def cut_value(value: Any, *, limit: int, where: str) -> Any:
    """``value`` itself when its JSON is at most ``limit`` characters, else a marker string naming
    ``where`` the whole value is read."""
    size = len(json.dumps(value, ensure_ascii=False))
    if size <= limit:
        return value
    return f"[... truncated: {size} characters of JSON; read {where}]"


class NodesPage(TypedDict):
    """Where an answer's ``nodes`` were cut (``nodes_page``, present only when they were)."""

    node_offset: int
    """The position, in the answer's node order, of the first node shown."""
    next_node_offset: int | None
    """Where the next page starts; None when this page shows the last node."""
    total: int
    """Nodes the run has."""
    shown: dict[str, int]
    """How many of *all* the run's nodes are in each state (``shown``, else ``state``), so a
    client sees where the failures are without reading every page."""
    how: str


def nodes_page(answer: dict[str, Any], *, node_offset: int, max_chars: int, how: str) -> dict[str, Any]:
    """``answer`` (a status or result with a ``nodes`` object) itself when it starts at the first
    node and its nodes' JSON is at most ``max_chars`` characters; else the nodes from
    ``node_offset`` on, as many as fit (at least one), with ``nodes_page`` saying where the next
    page starts (``how``: e.g. "call workflow_status with node_offset={offset}")."""
    nodes: dict[str, Any] = answer["nodes"]
    if node_offset == 0 and _indented_size(nodes) <= max_chars:
        return answer
    names = list(nodes)
    kept: dict[str, Any] = {}
    size = 0
    for name in names[node_offset:]:
        size += _indented_size({name: nodes[name]})
        if kept and size > max_chars:
            break
        kept[name] = nodes[name]
    end = min(node_offset, len(names)) + len(kept)
    shown: dict[str, int] = {}
    for node in nodes.values():
        state = str(node.get("shown") or node.get("state"))
        shown[state] = shown.get(state, 0) + 1
    following = end if end < len(names) else None
    where: NodesPage = {
        "node_offset": node_offset,
        "next_node_offset": following,
        "total": len(names),
        "shown": shown,
        "how": how.format(offset=following) if following is not None else "this page ends with the run's last node",
    }
    return {**answer, "nodes": kept, "nodes_page": where}


def _indented_size(value: Any) -> int:
    """Characters of ``value``'s JSON as an answer's text carries it (indented by two)."""
    return len(json.dumps(value, indent=2, ensure_ascii=False))
