"""Bounded answers: a window of a long text with a marker and where to go on, and JSON values cut
to a size with a marker saying where the whole value is."""

from __future__ import annotations

import json
from typing import Any, TypedDict

__all__ = ["Page", "page", "cut_value"]


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


def cut_value(value: Any, *, limit: int, where: str) -> Any:
    """``value`` itself when its JSON is at most ``limit`` characters, else a marker string naming
    ``where`` the whole value is read."""
    size = len(json.dumps(value, ensure_ascii=False))
    if size <= limit:
        return value
    return f"[... truncated: {size} characters of JSON; read {where}]"
