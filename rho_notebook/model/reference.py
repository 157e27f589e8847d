"""References to earlier nodes (output, status, exit_code) and prompt/argv templates.

Templates render strings as they are and every other value as compact JSON, the same way
everywhere (:func:`render_value`).
"""

from __future__ import annotations

import json
from typing import Literal, Union

from rho_notebook.model.base import FrozenModel

__all__ = [
    "OutputRef",
    "StatusRef",
    "ExitCodeRef",
    "Reference",
    "Template",
    "TemplatePart",
    "render_value",
    "walk_path",
    "MISSING",
]


class OutputRef(FrozenModel):
    """The validated output of an ancestor node, at a schema path (record fields, list indexes)."""

    kind: Literal["output"] = "output"
    node: str
    path: tuple[str | int, ...] = ()


class StatusRef(FrozenModel):
    """The terminal state of an ancestor node (success, failure, ...)."""

    kind: Literal["status"] = "status"
    node: str


class ExitCodeRef(FrozenModel):
    """The integer exit code of an ancestor command or shell node."""

    kind: Literal["exit_code"] = "exit_code"
    node: str


Reference = Union[OutputRef, StatusRef, ExitCodeRef]

TemplatePart = Union[str, OutputRef]


class Template(FrozenModel):
    """Literal text and output references, concatenated when the node launches.

    Adjacent literal strings are merged during normalisation, so ``template(["a", "b"])`` and
    ``template(["ab"])`` freeze to the same graph.
    """

    kind: Literal["template"] = "template"
    parts: tuple[TemplatePart, ...]

    def references(self) -> tuple[OutputRef, ...]:
        return tuple(p for p in self.parts if isinstance(p, OutputRef))

    def static_text(self) -> str | None:
        """The text when the template has no references, else None."""
        if self.references():
            return None
        return "".join(p for p in self.parts if isinstance(p, str))


def render_value(value: object) -> str:
    """Render one interpolated value: strings as-is, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
"""Returned by :func:`walk_path` when the path does not exist in the value."""


def walk_path(value: object, path: tuple[str | int, ...]) -> object:
    """Follow record fields and list indexes; MISSING when a step does not exist."""
    for step in path:
        if isinstance(step, str) and isinstance(value, dict) and step in value:
            value = value[step]
        elif (
            isinstance(step, int)
            and not isinstance(step, bool)
            and isinstance(value, list)
            and -len(value) <= step < len(value)
        ):
            value = value[step]
        else:
            return MISSING
    return value
