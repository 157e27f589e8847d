"""The edges of an item-graph document (docs/graphs.md): an edge's condition (``when``), a loop
edge's round limit, and the edge itself. Re-exported by :mod:`rho_notebook.model.itemgraph`, the
document's one definition; kept apart to keep each module small.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from rho_notebook.errors import MappingError
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.graph import NAME_PATTERN
from rho_notebook.model.mapping import MISSING, lookup, parse_path

__all__ = ["Condition", "Edge", "Loop", "Operator", "StepId"]

Operator = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"]
StepId = Annotated[str, Field(pattern=NAME_PATTERN, description="lower case, digits, _ and -; starts with a-z")]


class _Model(FrozenModel):
    """Field docstrings become descriptions in the JSON Schema (editors show them)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Condition(_Model):
    """A test of one field of the carried item."""

    field: str
    """A path into the item: ``score``, ``customer.name``, ``items[0]``."""
    op: Operator
    value: Any = None
    """The literal compared with (a list for ``in``; none for ``exists``)."""

    @model_validator(mode="after")
    def _value_fits(self) -> Condition:
        try:
            parse_path(self.field)
        except MappingError as err:
            raise ValueError(err.message) from None
        if self.op == "in" and not isinstance(self.value, list):
            msg = "op 'in' compares with a list: value: [a, b]"
            raise ValueError(msg)
        if self.op == "exists" and self.value is not None:
            msg = "op 'exists' takes no value"
            raise ValueError(msg)
        if self.op in ("gt", "gte", "lt", "lte") and (
            isinstance(self.value, bool) or not isinstance(self.value, int | str)
        ):
            msg = f"op {self.op!r} compares with an integer or a string, got {self.value!r}"
            raise ValueError(msg)
        return self

    def holds(self, item: Any) -> bool:
        """Whether the item passes. Equality is type-strict (``1`` is not ``true``); ``gt`` ..
        ``lte`` hold only between two integers or two strings; ``in`` holds when the field equals
        a member; ``exists`` holds when the field is present and not null. A missing field passes
        only ``ne``."""
        found = lookup(item, parse_path(self.field))
        if self.op == "exists":
            return found is not MISSING and found is not None
        if found is MISSING:
            return self.op == "ne"
        if self.op == "eq":
            return _same(found, self.value)
        if self.op == "ne":
            return not _same(found, self.value)
        if self.op == "in":
            return any(_same(found, member) for member in self.value)
        comparable = (_is_int(found) and _is_int(self.value)) or (
            isinstance(found, str) and isinstance(self.value, str)
        )
        if not comparable:
            return False
        if self.op == "gt":
            return bool(found > self.value)
        if self.op == "gte":
            return bool(found >= self.value)
        if self.op == "lt":
            return bool(found < self.value)
        return bool(found <= self.value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    """JSON equality, type-strict at every depth."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Loop(_Model):
    """Marks an edge that goes back to an earlier step."""

    max_rounds: int = Field(ge=1, le=1000)
    """The total number of rounds of the looped steps (the first pass is round 1)."""


class Edge(FrozenModel):
    """The item goes from one step to another, when ``when`` holds (always, without it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, use_attribute_docstrings=True)

    source: StepId = Field(alias="from")
    to: StepId
    when: Condition | None = None
    loop: Loop | None = None
