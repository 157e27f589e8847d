"""The ``condition.*`` builtins: when a node runs (``when = ...``), over references and scalars."""

from __future__ import annotations

import json

import starlark as sl

from rho_notebook.source._starlark.tags import is_tag, tag

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session


def operand(s: Session, value: Any, fn: str) -> Any:
    s.need(
        is_tag(value, "ref"),
        "condition.operand",
        f"condition.{fn}() compares an output(), status() or exit_code() reference, got {json.dumps(value)[:80]}",
    )
    return value


def scalar(s: Session, value: Any, fn: str) -> Any:
    s.check_value(value, f"condition.{fn}")
    s.need(
        value is None or isinstance(value, (bool, int, str)),
        "condition.value",
        f"condition.{fn}() compares against scalars (null, bool, integer, string), got {json.dumps(value)[:80]}",
    )
    return value


def cond_list(s: Session, items: Any, fn: str) -> Any:
    s.need(
        isinstance(items, list) and items,
        "condition.items",
        f"condition.{fn}() needs a non-empty list of conditions",
    )
    for c in items:
        s.need(
            is_tag(c, "condition"),
            "condition.items",
            f"condition.{fn}() items must be conditions, got {json.dumps(c)[:80]}",
        )
    return items


def negation(s: Session, item: Any) -> dict[str, Any]:
    s.need(is_tag(item, "condition"), "condition.items", "condition.not_() needs a condition")
    return tag("condition", op="not", item=item)


def one_of(s: Session, ref: Any, values: Any) -> dict[str, Any]:
    s.need(
        isinstance(values, list) and values,
        "condition.value",
        "condition.is_one_of() needs a non-empty list of values",
    )
    return tag(
        "condition",
        op="is_one_of",
        left=operand(s, ref, "is_one_of"),
        values=[scalar(s, v, "is_one_of") for v in values],
    )


def install_builtins(module: sl.Module, s: Session) -> None:
    # Python names these callables in the TypeError of a call with wrong arguments, which becomes
    # the diagnostic's message: the closures keep the names the worker has always reported.
    def cond_not(item: Any = None) -> dict[str, Any]:
        return negation(s, item)

    def is_one_of(ref: Any = None, values: Any = None) -> dict[str, Any]:
        return one_of(s, ref, values)

    module.add_callable(
        "_cond_equals",
        lambda ref=None, value=None: tag(
            "condition", op="equals", left=operand(s, ref, "equals"), right=scalar(s, value, "equals")
        ),
    )
    module.add_callable("_cond_is_one_of", is_one_of)
    module.add_callable("_cond_all", lambda items=None: tag("condition", op="all", items=cond_list(s, items, "all")))
    module.add_callable("_cond_any", lambda items=None: tag("condition", op="any", items=cond_list(s, items, "any")))
    module.add_callable("_cond_not", cond_not)
