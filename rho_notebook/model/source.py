"""A module's source text as planning reads it: its label, its text and how diagnostics name it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourceText"]


@dataclass(frozen=True)
class SourceText:
    label: str
    text: str
    display: str
    """How diagnostics name this module (a path relative to the workspace, or a notebook cell)."""
