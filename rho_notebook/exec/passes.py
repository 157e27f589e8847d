"""The operations that pass an item on without launching anything: ``set``, ``transform``,
``branch``, ``join`` and ``output`` steps of an item graph.

``branch`` and ``output`` pass the item they received; ``join`` passes the merge of every
delivered item (made when its input is gathered, :func:`~rho_notebook.model.itemrun.merge_join`);
``set`` sets top-level fields to its mappings resolved against the item; ``transform`` replaces the
item with its fields resolved against the item (Manykind's "Edit fields": the fields it does not
name are dropped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rho_notebook.model.mapping import RunContext, resolve

__all__ = ["PASSING_KINDS", "passed_item"]

PASSING_KINDS = frozenset({"set", "transform", "branch", "join", "output"})


def passed_item(kind: str, params: Mapping[str, Any], item: dict[str, Any], run: RunContext) -> dict[str, Any]:
    """The item a step of ``kind`` (one of :data:`PASSING_KINDS`) passes on."""
    if kind not in ("set", "transform"):
        return item
    changed = dict(item) if kind == "set" else {}
    for name, value in params["fields"].items():
        changed[name] = resolve(value, item, run)
    return changed
