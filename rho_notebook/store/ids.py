"""UUIDv7 identifiers for plans and runs (Python 3.11 has no uuid.uuid7), and prefix matching."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from rho_notebook.errors import AmbiguousId, NotFound

__all__ = ["new_id", "match_id"]


def new_id() -> str:
    """A time-ordered UUIDv7 (RFC 9562): 48-bit ms timestamp, version 7, variant 10, 74 random bits."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    text = f"{value:032x}"  # as str(uuid.UUID(int=value)) spells it, without importing uuid (and platform)
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def match_id(prefix: str, known: Iterable[str], *, what: str, lister: str | None = None) -> str:
    """The one ID in ``known`` that starts with ``prefix``; ``lister`` is the verb that lists them
    (default: ``what`` + "s", as ``runs`` and ``plans``)."""
    cleaned = prefix.strip().lower()
    if not cleaned:
        msg = f"an empty {what} ID matches nothing"
        raise NotFound(msg)
    hits = sorted(k for k in known if k.startswith(cleaned))
    if not hits:
        raise NotFound(f"no {what} matches {prefix!r}", listers=(lister or f"{what}s",))
    if len(hits) > 1:
        shown = ", ".join(hits[:5])
        msg = f"{what} ID prefix {prefix!r} is ambiguous: it matches {len(hits)} ({shown}); give more characters"
        raise AmbiguousId(msg)
    return hits[0]
