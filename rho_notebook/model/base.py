"""The one frozen pydantic base every record of ours derives from.

Records that cross a boundary (graph, plan, run manifest, wire answers) are immutable and reject
unknown keys, so a typo in stored JSON or a request body is an error, not a silently dropped field.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["FrozenModel"]


class FrozenModel(BaseModel):
    """Immutable, and unknown fields are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")
