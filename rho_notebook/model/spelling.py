"""Which name a person most likely meant: the one rule behind every "did you mean" of the package
(an unknown node, agent, flow, field, argument, frontmatter key or verb)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["meant"]


def meant(name: str, names: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The one of ``names`` that ``name`` most likely misspells (difflib's similarity ratio at
    least ``cutoff``), or None. The caller words the suggestion where its message needs it."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=cutoff)
    return close[0] if close else None
