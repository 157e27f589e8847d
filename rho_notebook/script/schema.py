"""Output schemas for ``run_step(output=...)`` and ``run_model(output=...)``.

Each helper returns a plain dict, the same shape the Starlark ``schema`` module produces
(``{"__rho__": "schema", "type": "record", "fields": {...}}``), so the runner validates a step's
answer exactly as it validates a graph node's output::

    from rho_notebook.script import run_step, schema

    FINDINGS = schema.record({"summary": schema.string(), "issues": schema.list(schema.string())})
    review = run_step("reviewer", "Review README.md", output=FINDINGS)
    review.value["issues"]

The schema is part of the step's execution-affecting digest: changing it makes the step diverge
on resume. ``stdout_json`` is a graph-node schema and is not offered here.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = ["Schema", "null", "bool", "integer", "string", "enum", "list", "optional", "record", "is_schema"]

Schema = dict[str, Any]
"""A schema as JSON: ``{"__rho__": "schema", "type": ..., ...}``."""

_TAG = "schema"


def is_schema(value: Any) -> builtins.bool:
    """Whether ``value`` is a schema made by this module (or an equal dict)."""
    return isinstance(value, dict) and value.get("__rho__") == _TAG and isinstance(value.get("type"), str)


def _need_schema(value: Any, where: str) -> Schema:
    if not is_schema(value):
        msg = f"{where} must be a schema (schema.string(), schema.record({{...}}), ...), got {value!r:.80}"
        raise TypeError(msg)
    result: Schema = value
    return result


def _make(kind: str, **fields: Any) -> Schema:
    return {"__rho__": _TAG, "type": kind, **fields}


def null() -> Schema:
    """The JSON ``null`` value."""
    return _make("null")


def bool() -> Schema:
    """``true`` or ``false``."""
    return _make("bool")


def integer() -> Schema:
    """A JSON integer."""
    return _make("integer")


def string() -> Schema:
    """A JSON string."""
    return _make("string")


def enum(members: builtins.list[Any]) -> Schema:
    """One of ``members``: a non-empty list of distinct scalars (None, bool, int, str)."""
    if not isinstance(members, builtins.list) or not members:
        msg = f"schema.enum() needs a non-empty list of members, got {members!r:.80}"
        raise TypeError(msg)
    seen: builtins.list[Any] = []
    for member in members:
        if member is not None and not isinstance(member, builtins.bool | int | str):
            msg = f"schema.enum() members must be None, bool, int or str, got {member!r:.80}"
            raise TypeError(msg)
        if any(type(member) is type(other) and member == other for other in seen):
            msg = f"schema.enum() lists {member!r} twice"
            raise ValueError(msg)
        seen.append(member)
    return _make("enum", members=builtins.list(members))


def list(inner: Schema) -> Schema:
    """A JSON array whose items all match ``inner``."""
    return _make("list", inner=_need_schema(inner, "schema.list()'s item schema"))


def optional(inner: Schema) -> Schema:
    """``null`` or a value matching ``inner``."""
    return _make("optional", inner=_need_schema(inner, "schema.optional()'s schema"))


def record(fields: dict[str, Schema]) -> Schema:
    """A JSON object with these fields and no others, each matching its schema (an
    ``optional`` field may be absent)."""
    if not isinstance(fields, dict):
        msg = f"schema.record() needs a dict of field name to schema, got {fields!r:.80}"
        raise TypeError(msg)
    checked: dict[str, Schema] = {}
    for name, sub in fields.items():
        if not isinstance(name, str) or not name:
            msg = f"schema.record() field names must be non-empty strings, got {name!r}"
            raise TypeError(msg)
        checked[name] = _need_schema(sub, f"schema.record() field {name!r}")
    return _make("record", fields=checked)
