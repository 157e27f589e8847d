"""The ``schema.*`` builtins: output schemas of nodes (docs/workflows.md)."""

from __future__ import annotations

import json
from collections.abc import Callable

import starlark as sl

from rho_notebook.source._starlark.tags import is_tag, tag

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

_NOT_AROUND_STDOUT_JSON = ("list", "optional", "stdout_json")


def schema_arg(s: Session, value: Any, what: str) -> Any:
    s.need(
        is_tag(value, "schema"),
        "schema.argument",
        f"{what} must be a schema (schema.string(), ...), got {json.dumps(value)[:80]}",
    )
    return value


def enum_schema(s: Session, members: Any = None) -> dict[str, Any]:
    s.check_value(members, "schema.enum_")
    s.need(isinstance(members, list) and members, "schema.enum", "schema.enum_() needs a non-empty list of members")
    for m in members:
        s.need(
            m is None or isinstance(m, (bool, int, str)),
            "schema.enum",
            f"schema.enum_() members must be scalars (null, bool, integer, string), got {json.dumps(m)}",
        )
    seen: list[Any] = []
    for m in members:
        s.need(
            not any(type(m) is type(x) and m == x for x in seen),
            "schema.enum",
            f"schema.enum_() lists {json.dumps(m)} twice",
        )
        seen.append(m)
    return tag("schema", type="enum", members=members)


def record_schema(s: Session, fields: Any = None) -> dict[str, Any]:
    s.need(isinstance(fields, dict), "schema.record", "schema.record() needs a dictionary of field name to schema")
    for key, sub in fields.items():
        s.need(
            isinstance(key, str) and key != "",
            "schema.record",
            "schema.record() field names must be non-empty strings",
        )
        schema_arg(s, sub, f"schema.record() field {key!r}")
        s.need(
            sub.get("type") != "stdout_json",
            "schema.stdout_json",
            "schema.stdout_json() may only wrap a whole node output, not a record field",
        )
    return tag("schema", type="record", fields=fields)


def wrapped(s: Session, kind: str, inner: Any) -> dict[str, Any]:
    """``schema.<kind>(inner)``: a schema that wraps another one."""
    schema_arg(s, inner, f"schema.{kind}()")
    if kind in _NOT_AROUND_STDOUT_JSON:
        s.need(
            inner.get("type") != "stdout_json",
            "schema.stdout_json",
            f"schema.{kind}() cannot wrap schema.stdout_json(); it wraps a whole node output",
        )
    return tag("schema", type=kind, inner=inner)


def install_builtins(module: sl.Module, s: Session) -> None:
    # Python names these callables in the TypeError of a call with wrong arguments, which becomes
    # the diagnostic's message: the closures keep the names the worker has always reported.
    def schema_enum(members: Any = None) -> dict[str, Any]:
        return enum_schema(s, members)

    def schema_record(fields: Any = None) -> dict[str, Any]:
        return record_schema(s, fields)

    def wrap(kind: str) -> Callable[[Any], dict[str, Any]]:
        def build(inner: Any = None) -> dict[str, Any]:
            return wrapped(s, kind, inner)

        return build

    module.add_callable("_schema_null", lambda: tag("schema", type="null"))
    module.add_callable("_schema_bool", lambda: tag("schema", type="bool"))
    module.add_callable("_schema_integer", lambda: tag("schema", type="integer"))
    module.add_callable("_schema_string", lambda: tag("schema", type="string"))
    module.add_callable("_schema_enum", schema_enum)
    module.add_callable("_schema_list", wrap("list"))
    module.add_callable("_schema_optional", wrap("optional"))
    module.add_callable("_schema_record", schema_record)
    module.add_callable("_schema_stdout_json", wrap("stdout_json"))
