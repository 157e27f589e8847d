"""The first-party output schema language (not JSON Schema) and value validation against it.

Schemas: null, bool, integer, string, enum_ (scalar members), list, optional, record, and
stdout_json, which wraps any of them for command nodes whose stdout is one JSON value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

from pydantic import Field

from rho_notebook.model.base import FrozenModel

__all__ = [
    "Scalar",
    "Schema",
    "NullSchema",
    "BoolSchema",
    "IntegerSchema",
    "StringSchema",
    "EnumSchema",
    "ListSchema",
    "OptionalSchema",
    "RecordSchema",
    "StdoutJsonSchema",
    "validate_value",
    "schema_depth",
    "schema_at_path",
    "value_schema",
    "INT64_MIN",
    "INT64_MAX",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Scalar = Union[None, bool, int, str]


class NullSchema(FrozenModel):
    kind: Literal["null"] = "null"


class BoolSchema(FrozenModel):
    kind: Literal["bool"] = "bool"


class IntegerSchema(FrozenModel):
    kind: Literal["integer"] = "integer"


class StringSchema(FrozenModel):
    kind: Literal["string"] = "string"


class EnumSchema(FrozenModel):
    kind: Literal["enum"] = "enum"
    members: tuple[Scalar, ...]
    """Allowed scalar values, in declaration order (order is part of the digest)."""


class ListSchema(FrozenModel):
    kind: Literal["list"] = "list"
    items: Schema


class OptionalSchema(FrozenModel):
    kind: Literal["optional"] = "optional"
    inner: Schema


class RecordSchema(FrozenModel):
    kind: Literal["record"] = "record"
    fields: tuple[tuple[str, Schema], ...]
    """Field name and schema, sorted by name. Optional fields may be absent or null."""

    def field(self, name: str) -> Schema | None:
        for key, sub in self.fields:
            if key == name:
                return sub
        return None


class StdoutJsonSchema(FrozenModel):
    kind: Literal["stdout_json"] = "stdout_json"
    inner: Schema


Schema = Annotated[
    NullSchema
    | BoolSchema
    | IntegerSchema
    | StringSchema
    | EnumSchema
    | ListSchema
    | OptionalSchema
    | RecordSchema
    | StdoutJsonSchema,
    Field(discriminator="kind"),
]

for _cls in (ListSchema, OptionalSchema, RecordSchema, StdoutJsonSchema):
    _cls.model_rebuild()


def value_schema(schema: Schema) -> Schema:
    """The schema of the validated value: stdout_json unwrapped."""
    return schema.inner if isinstance(schema, StdoutJsonSchema) else schema


def schema_depth(schema: Schema) -> int:
    """Nesting depth: a scalar schema has depth 1."""
    if isinstance(schema, (ListSchema,)):
        return 1 + schema_depth(schema.items)
    if isinstance(schema, (OptionalSchema, StdoutJsonSchema)):
        return 1 + schema_depth(schema.inner)
    if isinstance(schema, RecordSchema):
        return 1 + max((schema_depth(s) for _, s in schema.fields), default=0)
    return 1


def schema_at_path(schema: Schema, path: tuple[str | int, ...]) -> Schema | None:
    """The schema reached by following ``path`` (record fields and list indexes), or None."""
    current: Schema = value_schema(schema)
    for step in path:
        while isinstance(current, OptionalSchema):
            current = current.inner
        if isinstance(current, RecordSchema) and isinstance(step, str):
            found = current.field(step)
            if found is None:
                return None
            current = found
        elif isinstance(current, ListSchema) and isinstance(step, int) and not isinstance(step, bool):
            current = current.items
        else:
            return None
    return current


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "record"
    return type(value).__name__


def validate_value(schema: Schema, value: object, *, where: str = "$") -> list[str]:
    """Every mismatch between ``value`` (JSON data) and ``schema``; empty when it conforms."""
    schema = value_schema(schema)
    if isinstance(schema, OptionalSchema):
        return [] if value is None else validate_value(schema.inner, value, where=where)
    check = _CHECKS.get(schema.kind)
    return [] if check is None else check(schema, value, where)


def _expected(what: str, value: object, where: str) -> list[str]:
    return [f"{where}: expected {what}, got {_type_name(value)}"]


def _check_null(_schema: NullSchema, value: object, where: str) -> list[str]:
    return [] if value is None else _expected("null", value, where)


def _check_bool(_schema: BoolSchema, value: object, where: str) -> list[str]:
    return [] if isinstance(value, bool) else _expected("bool", value, where)


def _check_integer(_schema: IntegerSchema, value: object, where: str) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int):
        return _expected("integer", value, where)
    if not INT64_MIN <= value <= INT64_MAX:
        return [f"{where}: integer {value} is outside signed 64-bit range"]
    return []


def _check_string(_schema: StringSchema, value: object, where: str) -> list[str]:
    return [] if isinstance(value, str) else _expected("string", value, where)


def _check_enum(schema: EnumSchema, value: object, where: str) -> list[str]:
    if any(_same_scalar(value, member) for member in schema.members):
        return []
    allowed = ", ".join(_show(m) for m in schema.members)
    return [f"{where}: {_show(value)} is not one of [{allowed}]"]


def _check_list(schema: ListSchema, value: object, where: str) -> list[str]:
    if not isinstance(value, list):
        return _expected("list", value, where)
    problems: list[str] = []
    for index, item in enumerate(value):
        problems.extend(validate_value(schema.items, item, where=f"{where}[{index}]"))
    return problems


def _check_record(schema: RecordSchema, value: object, where: str) -> list[str]:
    if not isinstance(value, dict):
        return _expected("record", value, where)
    names = {name for name, _ in schema.fields}
    problems = [f"{where}: unexpected field '{extra}'" for extra in sorted(set(value) - names)]
    for name, sub in schema.fields:
        if name in value:
            problems.extend(validate_value(sub, value[name], where=f"{where}.{name}"))
        elif not isinstance(sub, OptionalSchema):
            problems.append(f"{where}: missing field '{name}'")
    return problems


_CHECKS: dict[str, Callable[[Any, object, str], list[str]]] = {
    "null": _check_null,
    "bool": _check_bool,
    "integer": _check_integer,
    "string": _check_string,
    "enum": _check_enum,
    "list": _check_list,
    "record": _check_record,
}
"""A schema's kind -> what a value of it must be (optional and stdout_json are unwrapped first)."""


def _same_scalar(value: object, member: Scalar) -> bool:
    # bool is a subclass of int in Python; True must not match 1.
    return type(value) is type(member) and value == member


def _show(value: object) -> str:
    import json

    return json.dumps(value)
