"""Typed conditions over ancestor state, exit codes and validated outputs.

A condition evaluates to True, False or None (unavailable: a value it needs can never exist).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import Field

from rho_notebook.model.base import FrozenModel
from rho_notebook.model.reference import ExitCodeRef, OutputRef, Reference, StatusRef
from rho_notebook.model.schema import Scalar

__all__ = [
    "Condition",
    "Equals",
    "IsOneOf",
    "AllOf",
    "AnyOf",
    "Not",
    "condition_depth",
    "condition_references",
    "evaluate",
    "Lookup",
    "UNAVAILABLE",
]


Operand = Annotated[OutputRef | StatusRef | ExitCodeRef, Field(discriminator="kind")]


class Equals(FrozenModel):
    kind: Literal["equals"] = "equals"
    left: Operand
    right: Scalar


class IsOneOf(FrozenModel):
    kind: Literal["is_one_of"] = "is_one_of"
    left: Operand
    values: tuple[Scalar, ...]


class AllOf(FrozenModel):
    kind: Literal["all"] = "all"
    items: tuple[Condition, ...]


class AnyOf(FrozenModel):
    kind: Literal["any"] = "any"
    items: tuple[Condition, ...]


class Not(FrozenModel):
    kind: Literal["not"] = "not"
    item: Condition


Condition = Annotated[Equals | IsOneOf | AllOf | AnyOf | Not, Field(discriminator="kind")]

for _cls in (AllOf, AnyOf, Not):
    _cls.model_rebuild()


class _Unavailable:
    """Marker for a referenced value that can never become available."""

    def __repr__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE = _Unavailable()

Lookup = Callable[[Reference], object]
"""Resolves a reference to its value, or to UNAVAILABLE."""


def condition_depth(cond: Condition) -> int:
    if isinstance(cond, (AllOf, AnyOf)):
        return 1 + max((condition_depth(c) for c in cond.items), default=0)
    if isinstance(cond, Not):
        return 1 + condition_depth(cond.item)
    return 1


def condition_references(cond: Condition) -> list[Reference]:
    if isinstance(cond, (Equals, IsOneOf)):
        return [cond.left]
    if isinstance(cond, (AllOf, AnyOf)):
        return [ref for c in cond.items for ref in condition_references(c)]
    return condition_references(cond.item)


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def evaluate(cond: Condition, lookup: Lookup) -> bool | None:
    """True, False, or None when a needed value is unavailable.

    ``all`` is False as soon as one item is False, ``any`` True as soon as one is True; otherwise an
    unavailable item makes the whole unavailable. ``not`` of unavailable is unavailable.
    """
    if isinstance(cond, Equals):
        value = lookup(cond.left)
        return None if value is UNAVAILABLE else _same(value, cond.right)
    if isinstance(cond, IsOneOf):
        value = lookup(cond.left)
        return None if value is UNAVAILABLE else any(_same(value, v) for v in cond.values)
    if isinstance(cond, Not):
        inner = evaluate(cond.item, lookup)
        return None if inner is None else not inner
    results = [evaluate(c, lookup) for c in cond.items]
    if isinstance(cond, AllOf):
        if any(r is False for r in results):
            return False
        return None if any(r is None for r in results) else True
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False
