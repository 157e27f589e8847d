"""Bounded answers: a window of a long text with a marker and where to go on, and JSON values cut
to a size with a marker saying where the whole value is."""

from __future__ import annotations

import json
from typing import Any, TypedDict

__all__ = ["Page", "EventsPage", "page", "events_page", "cut_value"]


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
    window = text[offset : offset + limit]
    end = offset + len(window)
    if end >= len(text):
        return {"text": window, "offset": offset, "next_offset": None, "total": len(text), "truncated": False}
    marker = f"\n[... truncated: {len(text) - end} more characters; {how.format(offset=end)}]"
    return {"text": window + marker, "offset": offset, "next_offset": end, "total": len(text), "truncated": True}


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
