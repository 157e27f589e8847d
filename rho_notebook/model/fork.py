"""The frozen fork record a fork's derived plan carries (issue 35, docs/fork.md).

A fork runs a *derived plan*, as ``try`` does: the source run's graph (or a newer plan's) with a
:class:`ForkRecord` in :attr:`~rho_notebook.model.graph.Graph.fork`. The record is part of the
graph, so it is in the graph digest a person consents to: which run the values come from, which
attempt of each taken node (and its value's digest), and the edited value of the fork node. The
run's owner takes exactly those values, from the copies written into the fork's own folder, so
deleting or pruning the source run never changes what the fork computed or can read.

Values are kept as canonical JSON text (``value_json``), not as JSON data: the canonical encoding
refuses floats, and an edited value may hold one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from pydantic import Field

from rho_notebook.model.base import FrozenModel

__all__ = [
    "UNSET",
    "ForkEdit",
    "ForkRecord",
    "TakenAttempt",
    "canonical_json",
    "edit_of",
    "value_digest",
    "value_named",
]


class _Unset:
    """The type of :data:`UNSET`: no edited value was given (``None`` is a JSON value)."""

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final[Any] = _Unset()
"""``fork(..., value=UNSET)``: the fork node re-runs instead of taking an edited value."""


def value_named(via: str) -> str:
    """How a refusal names the edited value to the front end ``via`` (:attr:`ForkEdit.via`): a REST
    client sent the JSON field ``"value"`` (``server``); the CLI and the magics take ``--value``."""
    return 'the "value" field' if via == "server" else "--value"


def canonical_json(value: Any) -> str:
    """The JSON text an edited value is stored and digested as: sorted keys, no spaces, so the
    same value always gives the same digest."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text


def value_digest(data: bytes) -> str:
    """``sha256:<hex>`` of a value's bytes, as a fork record names a value."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class TakenAttempt(FrozenModel):
    """A node the fork takes from the source run instead of launching it."""

    node: str
    attempt: int
    """Its successful attempt in the source run."""
    value_digest: str | None = None
    """Digest of that attempt's ``value.json`` bytes; None when it stored no value."""
    exit_code: int | None = None
    """That attempt's exit code (``exit_code(NODE)`` conditions in the fork see it)."""


class ForkEdit(FrozenModel):
    """A person's edited value for the fork node: it is taken, not launched."""

    value_json: str
    """The value as canonical JSON text (:func:`canonical_json`)."""
    value_digest: str
    by: str
    """The OS account that made the edit (when: the journal's ``node_reused`` record says; a time
    here would make every planning of the same edit a new digest to confirm)."""
    at: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """When it was planned, for forms that record it (left out of the canonical form when None)."""
    via: str
    """How: ``cli``, ``notebook``, ``server`` or ``mcp``."""


class ForkRecord(FrozenModel):
    """What a fork's derived plan takes from its source run."""

    source_run: str
    source_digest: str
    """The source run's graph digest."""
    node: str
    """The node (or script step key) the fork starts from."""
    taken: tuple[TakenAttempt, ...] = ()
    """Sorted by node: every node taken from the source run (not the edited node)."""
    edit: ForkEdit | None = None
    inputs: tuple[str, ...] = ()
    """Names of the inputs given new values (``--input``), sorted."""

    def taken_names(self) -> tuple[str, ...]:
        return tuple(t.node for t in self.taken)


def edit_of(value: Any, *, by: str, via: str, at: str | None = None) -> ForkEdit:
    """The edit record of ``value`` (JSON data).

    Raises
    ------
    ValueError
        The value is not JSON data (a NaN, a set...).
    """
    text = canonical_json(value)
    return ForkEdit(value_json=text, value_digest=value_digest(text.encode()), by=by, at=at, via=via)
